"""The one place that maps a protocol's name to its spec.

Every layer that reads a protocol's name from a document (a task, a release,
a command line) turns it into a spec here and then calls the spec: no other
module branches on the name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shuffledp.specs.augmented import AugmentedSpec
from shuffledp.specs.base import ProtocolSpec, SpecError
from shuffledp.specs.correlated import CorrelatedSpec
from shuffledp.specs.flip import FlipSpec
from shuffledp.specs.krr import KRRSpec

__all__ = ["SPECS", "spec_class", "spec_from_dict"]

#: The specs of the protocols a task can run, by name.
SPECS: Mapping[str, type[ProtocolSpec]] = {
    spec.name: spec for spec in (FlipSpec, KRRSpec, CorrelatedSpec, AugmentedSpec)
}


def spec_class(protocol: str) -> type[ProtocolSpec]:
    """The spec class of ``protocol``.

    Raises:
        SpecError: If no protocol has that name.
    """
    try:
        return SPECS[protocol]
    except (KeyError, TypeError):
        raise SpecError(f"protocol must be one of {', '.join(SPECS)}, got {protocol!r}") from None


def spec_from_dict(protocol: str, parameters: Mapping[str, Any]) -> ProtocolSpec:
    """Read ``parameters`` (a task document's) as the spec of ``protocol``.

    Raises:
        SpecError: If the protocol is unknown or the parameters are not its spec's.
    """
    return spec_class(protocol).from_dict(parameters)
