"""The exact numerical core every certificate shares.

Windowed binomial pmfs with error bounds (:mod:`.binomial`), certified
hockey-stick sums (:mod:`.hockey_stick`), two-count pairs summed exactly by
certified blocks of lines (:mod:`.two_counts`; one line's divergence and the
certified rounding: :mod:`.line_kernel`), averages of pairs over a count
(:mod:`.mixture`), exact two-dimensional sums when the other users are i.i.d.
(:mod:`.iid_blanket`), privacy-loss distributions on a grid composed by FFT
with their discretization and rounding charged (:mod:`.loss_grid`), the
symmetric binomial's tails and points kept within one search, bit for bit the
computed doubles (:mod:`.symmetric_memo`), where a two-count pair's ε(δ) lies
(the Gaussian approximation, polished on the pair's own lines: a starting
point, never a certificate; :mod:`.gaussian_guess`), and the searches that
round the safe way and settle on the public δ (:mod:`.search`).

Group rule: modules here import numpy, scipy and ``shuffledp._validation``,
and each other; nothing else of the accountant. Importing this package imports
none of its modules.
"""
