"""Published amplification bounds, each under its source's name.

The generic closed forms (EFMRTT'19, BBGN'19 with Hoeffding's and Bennett's
inequalities integrated soundly, FMT'21's closed form: :mod:`.generic_bounds`)
and the numerical two-count reductions (FMT'21's clones, the variation-ratio
reduction of Wang et al., VLDB 2024: :mod:`.variation_ratio`). Each is
certified only inside its theorem's proven range; where our checks contradict
a printed formula, the printed version lives in
:mod:`shuffledp.accounting.reproductions` instead.

Group rule: modules here may import the numerical core
(:mod:`shuffledp.accounting.numerics`) and each other, nothing else of the
accountant.
"""
