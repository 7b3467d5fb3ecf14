"""Printed formulas of the papers, kept under their sources' names: never certificates.

Biswas, Jung & Palamidessi's k-RR bound (:mod:`.biswas`), Cheu & Zhilyaev's
FLIP parameters (:mod:`.flip_paper`), BBGN's Bennett integration as their
reference code computes it (:mod:`.bbgn2019_bennett`), the segmented paper's
Lemma 3 (:mod:`.poisson_lemma3`) and Eq. 7 (:mod:`.segmented_eq7`), the per-user
paper's App. C (:mod:`.per_user_appendix_c`), the augmented shuffle paper's ν
(:mod:`.augmented_paper`), and the near-central papers' flooding rule
(:mod:`.correlated_paper`). The method registry lists the ones it offers with
``BoundKind.REPRODUCTION`` (a test checks that none is certified);
``docs/accounting.md`` says where each disagrees with the exact computation.

Group rule: modules here may import the numerical core, published bounds and
certificates (to compare against them). No certificate, numerical or published
module imports a reproduction.
"""
