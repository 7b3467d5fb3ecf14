"""What every protocol spec is: a small frozen value that owns a protocol's public parameters.

A spec is the one description of a mechanism that the task document, the
client (in any language), the shuffler, the analyzer, the accountant and the
release share. It holds exactly the protocol's public parameters, under one
name each (FLIP's fake users are ``fake_users`` everywhere; ``domain_size`` is
always d), their JSON form (:meth:`ProtocolSpec.to_dict`, the ``parameters``
object of a task document, valid against the protocol's JSON Schema
``urn:shuffledp:schema:NAME-spec:1``) and the functions that go with them:

- :meth:`ProtocolSpec.randomizer`: what a client runs (no accountant needed);
- :meth:`ProtocolSpec.protocol`: the protocol object for n users, whose
  ``privacy_report`` is the certificate (δ(ε) upper, with a lower bound where
  one is attained) and whose ``estimate`` is the analyzer;
- :meth:`ProtocolSpec.max_messages`: the per-submission message bound, and
  :meth:`ProtocolSpec.capped_parties`: how many parties it caps;
- a classmethod ``calibrated`` on each spec: the parameters the certified
  accountant chooses for a target (ε, δ) at n users, and the protocol it
  certified with them (a :class:`Calibrated`: one calibration, one
  certificate; ``run`` executes the protocol, ``task create`` records the
  spec), and ``calibrate``, the spec alone.

Specs are values, in the spirit of dp-accounting's ``DpEvent`` types: built
from numbers, compared by value, with no hidden state. Their constructors
check every parameter (a bad one is an :class:`~shuffledp.InvalidParameterError`
naming it); :func:`~shuffledp.specs.registry.spec_from_dict` reads the JSON
form and is the only place that maps a protocol's name to its spec.
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypeVar

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike
from shuffledp._validation import InvalidParameterError
from shuffledp.schemas import schema_id

if TYPE_CHECKING:
    from shuffledp.messages import MessageBatch
    from shuffledp.protocols.base import ShuffleProtocol

__all__ = ["Calibrated", "ProtocolSpec", "Randomizer", "SpecError"]

SpecT = TypeVar("SpecT", bound="ProtocolSpec")
ProtocolT = TypeVar("ProtocolT", bound="ShuffleProtocol[Any, Any, Any, Any, Any]")


class SpecError(InvalidParameterError):
    """A spec's JSON form is malformed: a field missing, unknown, mistyped or out of range."""


class Randomizer(Protocol):
    """What a client runs: every user's messages before the shuffle."""

    def randomize(self, values: NDArray[np.integer], seed: SeedLike = None) -> MessageBatch:
        """Return the users' messages (payload = bin index, or the protocol's encoding)."""
        ...


@dataclass(frozen=True)
class Calibrated(Generic[SpecT, ProtocolT]):
    """What a spec's ``calibrated`` returns: the parameters chosen and the protocol they make.

    One calibration gives both, its certificate computed once: ``spec`` is
    what a task document records, ``protocol`` what a ``run`` executes and
    releases (its ``calibration`` is the calibration itself, with how the
    parameters were chosen, the target δ and the notes, as the protocol's own
    ``calibrated`` gives it).

    Attributes:
        spec: The public parameters the certified accountant chose.
        protocol: The protocol for the n users calibrated for, over the labels
            given, with exactly those parameters.
    """

    spec: SpecT
    protocol: ProtocolT


class ProtocolSpec(ABC):
    """The public parameters of one protocol and what goes with them.

    Subclasses are frozen dataclasses; their fields are the parameters, in the
    order of the JSON form. ``calibration`` says how the parameters were chosen
    (``exact``, ``paper``, ...): part of the public record, not of the law.
    """

    #: The protocol's name (``flip``, ``krr``, ``correlated``, ``augmented``).
    name: ClassVar[str]
    #: What ``calibrate``'s ``calibration`` option accepts (empty: it takes none).
    calibrations: ClassVar[tuple[str, ...]] = ()
    #: Every field of the JSON form, in order (all required, some may be null).
    fields: ClassVar[tuple[str, ...]]
    #: Fields whose JSON value must be a real number (JSON may write 1.0 as 1).
    real_fields: ClassVar[tuple[str, ...]] = ()
    #: Fields that may be absent from the JSON form (then None).
    optional_fields: ClassVar[tuple[str, ...]] = ()

    calibration: str

    @classmethod
    def schema(cls) -> str:
        """The ``$id`` of the spec's JSON Schema, ``urn:shuffledp:schema:NAME-spec:MAJOR``."""
        return schema_id(f"{cls.name}-spec")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: every field, in order (a task document's ``parameters``)."""
        out: dict[str, Any] = {}
        for name in self.fields:
            value = getattr(self, name)
            if value is None and name in self.optional_fields:
                continue
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProtocolSpec:
        """Read the JSON form (the spec's constructor checks every value).

        Raises:
            SpecError: If a field is missing, unknown or of the wrong type, or a
                value is out of range.
        """
        if not isinstance(data, Mapping):
            raise SpecError(f"{cls.name} parameters must be an object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(cls.fields))
        if unknown:
            raise SpecError(
                f"{cls.name} parameters have no field {unknown[0]!r} (they are "
                f"{', '.join(cls.fields)})"
            )
        missing = [
            name for name in cls.fields if name not in data and name not in cls.optional_fields
        ]
        if missing:
            raise SpecError(f"{cls.name} parameters need {', '.join(missing)}")
        written_null = [name for name in cls.optional_fields if name in data and data[name] is None]
        if written_null:
            raise SpecError(
                f"{cls.name} parameter {written_null[0]} is null: an optional parameter that "
                "does not apply is left out, not written as null"
            )
        values = {name: data.get(name) for name in cls.fields}
        for name in cls.real_fields:
            values[name] = _real(cls.name, name, values[name])
        try:
            return cls(**values)
        except SpecError:
            raise
        except (InvalidParameterError, TypeError) as exc:
            raise SpecError(f"invalid {cls.name} parameters: {exc}") from None

    # Calibration -------------------------------------------------------------------

    # Each spec defines, with its own keyword-only options (typed per spec, so it is not
    # declared here: an override could not narrow them),
    #   calibrated(n, labels, epsilon, delta, **options) -> Calibrated[Spec, Protocol]
    # and :meth:`calibrate` is its spec for every spec.

    @classmethod
    def calibrate(
        cls, n: int, labels: Sequence[str], epsilon: float, delta: float, **options: Any
    ) -> Self:
        """The spec the spec's ``calibrated`` chooses (its options: :meth:`calibration_options`).

        Raises:
            InvalidParameterError: As ``calibrated``; TypeError for an option it does not take.
        """
        spec = cls.calibrated_with(n, labels, epsilon, delta, options).spec
        assert isinstance(spec, cls)
        return spec

    @classmethod
    def calibration_options(cls) -> tuple[str, ...]:
        """The keyword options the spec's ``calibrated`` takes (``fake_users``, ``variant``...)."""
        signature = inspect.signature(cls._calibrated())
        return tuple(
            name
            for name, parameter in signature.parameters.items()
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY
        )

    @classmethod
    def calibrated_with(
        cls,
        n: int,
        labels: Sequence[str],
        epsilon: float,
        delta: float,
        options: Mapping[str, Any],
    ) -> Calibrated[ProtocolSpec, ShuffleProtocol[Any, Any, Any, Any, Any]]:
        """``calibrated(n, labels, epsilon, delta, **options)`` of the spec's class."""
        return cls._calibrated()(n, labels, epsilon, delta, **options)

    @classmethod
    def _calibrated(
        cls,
    ) -> Callable[..., Calibrated[ProtocolSpec, ShuffleProtocol[Any, Any, Any, Any, Any]]]:
        calibrated: Callable[
            ..., Calibrated[ProtocolSpec, ShuffleProtocol[Any, Any, Any, Any, Any]]
        ] = getattr(cls, "calibrated")  # noqa: B009
        return calibrated

    @classmethod
    @abstractmethod
    def capped_parties_when_calibrated(
        cls, min_batch_users: int, options: Mapping[str, Any]
    ) -> int:
        """:meth:`capped_parties` of the spec ``calibrate`` will return with ``options``.

        The message bounds' δ is set aside before the calibration, so it must be
        known before the parameters are.
        """

    # What goes with the parameters -------------------------------------------------

    def message_domain_size(self, domain_size: int) -> int:
        """Number of distinct messages for a domain of ``domain_size`` bins (d by default)."""
        return domain_size

    @abstractmethod
    def randomizer(self, domain_size: int) -> Randomizer:
        """The client's randomizer for a domain of ``domain_size`` bins."""

    @abstractmethod
    def max_messages(self, domain_size: int) -> int:
        """The most messages an honest client sends, but with probability 1e-30."""

    def capped_parties(self, min_batch_users: int) -> int:
        """How many parties the certificate counts on could exceed a message bound.

        What :meth:`capped_parties_when_calibrated` says of these parameters (its
        options are read from the spec's own fields, e.g. an augmented ``variant``).
        """
        return type(self).capped_parties_when_calibrated(min_batch_users, self.to_dict())

    def fewest_messages_per_submission(self) -> int:
        """The fewest messages an honest client sends (1 by default: its value)."""
        return 1

    def fewest_messages_per_user(self) -> int:
        """The fewest messages a batch's analyzer can receive per honest user.

        By default what the client sends (:meth:`fewest_messages_per_submission`).
        """
        return self.fewest_messages_per_submission()

    def max_dummies_per_batch(self, domain_size: int) -> int:
        """The most dummies the shuffler adds to a batch (none unless the shuffler adds noise)."""
        return 0

    @abstractmethod
    def protocol(
        self, n: int, labels: Sequence[str], epsilon: float, target_delta: float
    ) -> ShuffleProtocol:
        """The protocol for ``n`` users over ``labels``, its report certified at ``epsilon``.

        Its ``privacy_report`` is the certificate of these parameters at n
        users (``target_delta`` is only stated beside it), its ``estimate`` the
        analyzer.
        """

    def batch_assumption(self, min_batch_users: int, smallest: int) -> str:
        """What a service release's guarantee assumes about the users of each batch.

        By default (a local randomizer amplified by the shuffle): at least
        ``min_batch_users`` users of each batch follow the protocol.
        """
        m = min_batch_users
        return (
            f"each batch holds at least {m} users who follow the protocol "
            f"(min_batch_users), and the guarantee is certified for exactly {m} "
            f"such users: a batch's size counts every submission (the smallest batch holds "
            f"{smallest}), and submissions an adversary makes itself count towards it but hide "
            "nobody; honest users beyond the minimum only add privacy (their reports could be "
            "handed to the adversary: post-processing)"
        )

    def shuffler_assumption(self) -> str:
        """What a service release's guarantee assumes of the shuffler (by default: trusted)."""
        return (
            "the shuffler is trusted: it does not reveal who sent which message, in which order "
            "or how many messages each submission held, and it does not collude with the "
            "analyzer"
        )

    def capped_parties_description(self, parties: int) -> str:
        """Who the ``parties`` that :meth:`capped_parties` counts are (by default: users)."""
        return f"{parties} users"

    def check_task(
        self,
        *,
        domain_size: int,
        epsilon: float,
        min_batch_users: int,
        max_messages_per_submission: int,
    ) -> None:
        """Check what a task document states beside the spec (none by default).

        Raises:
            SpecError: If the task's other fields contradict the spec.
        """
        return None


def _real(protocol: str, name: str, value: Any) -> float | None:
    """A JSON number as a float (None stays None); anything else is refused."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(f"{protocol} parameter {name!r} must be a number, got {value!r}")
    out = float(value)
    if not math.isfinite(out):
        raise SpecError(f"{protocol} parameter {name!r} must be finite, got {value!r}")
    return out
