"""Protocol specs: one typed description of each mechanism that every layer shares.

A spec (:class:`~shuffledp.specs.base.ProtocolSpec`) is a frozen value holding
a protocol's public parameters, with their JSON form and JSON Schema
(``urn:shuffledp:schema:NAME-spec:1``) and the functions that go with them:
the client's randomizer, the protocol (analyzer and certificate) for n users,
the per-submission message bound and the calibration. The task document's
``parameters`` are a spec's JSON form; :func:`spec_from_dict` is the only place
that maps a protocol's name to its spec.

Layering: specs sit above ``randomizers/`` and ``accounting/`` (whose types
they hold) and below ``protocols/`` (imported inside the methods that build a
protocol), ``service/`` and ``cli/``.

The names below are re-exported lazily (PEP 562), as ``shuffledp.protocols``
does: ``from shuffledp.specs import FlipSpec`` (what ``shuffledp run flip``
does) loads FLIP's spec only, not every spec's certificates and randomizers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shuffledp._lazy import lazy_exports

if TYPE_CHECKING:
    from shuffledp.specs.augmented import AugmentedSpec, PlainValueRandomizer
    from shuffledp.specs.base import Calibrated, ProtocolSpec, Randomizer, SpecError
    from shuffledp.specs.correlated import CorrelatedSpec
    from shuffledp.specs.flip import FlipSpec
    from shuffledp.specs.krr import KRRSpec
    from shuffledp.specs.registry import SPECS, spec_class, spec_from_dict

__all__ = [
    "SPECS",
    "AugmentedSpec",
    "Calibrated",
    "CorrelatedSpec",
    "FlipSpec",
    "KRRSpec",
    "PlainValueRandomizer",
    "ProtocolSpec",
    "Randomizer",
    "SpecError",
    "spec_class",
    "spec_from_dict",
]

#: Where each re-exported name lives, imported on first use.
_LAZY: dict[str, str] = {
    "AugmentedSpec": "shuffledp.specs.augmented",
    "PlainValueRandomizer": "shuffledp.specs.augmented",
    "Calibrated": "shuffledp.specs.base",
    "ProtocolSpec": "shuffledp.specs.base",
    "Randomizer": "shuffledp.specs.base",
    "SpecError": "shuffledp.specs.base",
    "CorrelatedSpec": "shuffledp.specs.correlated",
    "FlipSpec": "shuffledp.specs.flip",
    "KRRSpec": "shuffledp.specs.krr",
    "SPECS": "shuffledp.specs.registry",
    "spec_class": "shuffledp.specs.registry",
    "spec_from_dict": "shuffledp.specs.registry",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
