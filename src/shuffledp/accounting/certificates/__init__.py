"""Mechanism-specific certificates and lower bounds: what proves each protocol's δ.

One module per mechanism: k-RR (:mod:`.krr`), FLIP with fake users
(:mod:`.flip`), the Poisson randomizer with blanket messages (:mod:`.poisson`),
segmented levels (:mod:`.segmented`), per-user histograms (:mod:`.per_user`),
the correlated-noise protocol (:mod:`.correlated`) and the augmented shuffle
(:mod:`.augmented`). Each holds the upper bound the protocol states, the
concrete dataset pairs whose exact δ is a lower bound, and the calibration of
the mechanism's parameter against its certificate.

Group rule: modules here may import the numerical core
(:mod:`shuffledp.accounting.numerics`), published bounds
(:mod:`shuffledp.accounting.published`), each other, the guarantee types
(:mod:`shuffledp.privacy`) and the randomizers' parameter checks; never a
reproduction, composition or the questions layer.
"""
