"""Composition: dominating pairs as privacy loss distributions, and the total of several releases.

:mod:`.pld` turns each mechanism's dominating pair into a dp-accounting PLD;
:mod:`.compose` states the guarantee of several releases on the same users (PLD
composition or basic composition, whichever is tighter), re-exporting :mod:`.inputs`
(what each release brings), :mod:`.total` (the arithmetic) and
:mod:`.release_documents` (releases read back); :mod:`.rederive` recomputes
every input's guarantee from the parameters it records.

Group rule: modules here may import the numerical core, published bounds,
certificates and :mod:`shuffledp.privacy`; not reproductions or the questions
layer.
"""
