"""The task document: everything public about one collection, as JSON.

A task fixes the protocol and its calibrated parameters, the public domain,
the target (ε, δ), the minimum batch size and the analyzer's public key. Every
client, the shuffler and the analyzer load the same document; it holds no
secret. The analyzer's private key goes to a separate 0600 file
(:func:`save_private_key`).

Why a minimum batch size is enough. The parameters are calibrated for
``min_batch_users`` = n users. A batch of m ≥ n users is at least as private:
its shuffled output is a post-processing of the shuffled output of any n of
its users (including the target) together with the other m − n users'
messages, which do not depend on the target's value and could simply be handed
to the adversary. So the (ε, δ) certified at n holds for every batch of at
least n users, and the shuffler never forwards a smaller one.

Protocols. ``flip`` and ``krr`` (local randomizers whose privacy is amplified
by the shuffle), ``correlated`` (each user sends its value as (x, +1) and
noise shares (j, ±1) calibrated so that n = ``min_batch_users`` users' shares
add up to the certified noise: ``min_honest`` is ``min_batch_users``) and
``augmented`` (each user sends its value alone; the shuffler adds the noise as
dummy messages, :mod:`shuffledp.service.augment`, and the guarantee does not
depend on n).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from numpy.typing import NDArray

from shuffledp import __version__
from shuffledp._rng import SeedLike
from shuffledp._validation import (
    DataError,
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_int,
)
from shuffledp._wording import Parameter, Worded
from shuffledp.accounting.certificates.augmented import (
    VARIANTS,
    DummyLaw,
    SAGeoLaw,
    SBinLaw,
    augmented_delta,
    check_beta,
)
from shuffledp.accounting.certificates.correlated import (
    NEIGHBOURS,
    CorrelatedNoise,
    correlated_delta,
)
from shuffledp.data.domains import check_domain, check_domain_source
from shuffledp.messages import MessageBatch
from shuffledp.randomizers.augmented import AugmentedClient
from shuffledp.randomizers.bitflip import FlipRandomizer
from shuffledp.randomizers.correlated import CorrelatedRandomizer
from shuffledp.randomizers.krr import KRRRandomizer
from shuffledp.schemas import schema_id
from shuffledp.service.message_bounds import (
    MESSAGE_TAIL_PROBABILITY,
    calibration_target,
    correlated_max_messages,
    honest_cap_delta,
    max_dummies_per_batch,
)
from shuffledp.service.secretfile import read_secret_file, write_secret_file
from shuffledp.service.wire import (
    MAX_INDEX,
    SUITE_NAMES,
    WIRE_VERSION,
    WireError,
    private_key_from_b64,
    private_key_to_b64,
    public_key_from_b64,
    public_key_to_b64,
)

if TYPE_CHECKING:  # the protocols load the accountant: imported where a task needs them
    from shuffledp.protocols.augmented import AugmentedCalibration
    from shuffledp.protocols.base import ShuffleProtocol
    from shuffledp.protocols.correlated import CorrelatedCalibration

__all__ = [
    "MAX_BATCH_USERS",
    "MESSAGE_TAIL_PROBABILITY",
    "PROTOCOLS",
    "TASK_FORMAT",
    "TASK_SCHEMA",
    "PlainValueRandomizer",
    "Task",
    "TaskError",
    "augmented_calibration",
    "build_protocol",
    "build_randomizer",
    "capped_parties",
    "correlated_calibration",
    "create_task",
    "is_id",
    "load_private_key",
    "load_task",
    "max_messages_per_user",
    "new_id",
    "save_private_key",
    "save_task",
]

#: ``format`` of a task document.
TASK_FORMAT = "shuffledp-task/1"
#: ``schema`` of a task document this version writes (the ``$id`` of its JSON Schema).
TASK_SCHEMA = schema_id("task")
#: Protocols a task can run.
PROTOCOLS: tuple[str, ...] = ("flip", "krr", "correlated", "augmented")
#: Largest ``min_batch_users`` (and number of users in a batch) the services handle:
#: 2**40 users per batch keep every sum of users over batches far below 2**63.
MAX_BATCH_USERS = 2**40

Protocol = Literal["flip", "krr", "correlated", "augmented"]


class PlainValueRandomizer:
    """An augmented client: one message carrying the value, no noise (the shuffler adds it).

    Args:
        domain_size: d.
    """

    def __init__(self, domain_size: int) -> None:
        self._client = AugmentedClient(domain_size)

    def randomize(self, values: NDArray[np.integer], seed: SeedLike = None) -> MessageBatch:
        """Every user's one message, its value (``seed`` is not used: nothing is random)."""
        return self._client.randomize(values)


#: What a client runs for one task (:func:`build_randomizer`).
Randomizer = FlipRandomizer | KRRRandomizer | CorrelatedRandomizer | PlainValueRandomizer


class TaskError(DataError):
    """A task document is malformed or does not match its key."""


def new_id() -> str:
    """Return a random 128-bit identifier as 32 lowercase hex digits."""
    return secrets.token_hex(16)


_ID = re.compile("[0-9a-f]{32}")


def is_id(value: object) -> bool:
    """Whether ``value`` is 32 lowercase hex digits (a task, submission, batch or client id)."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def max_messages_per_user(protocol: str, domain_size: int, q: float = 0.0, k: int = 0) -> int:
    """Return the most messages an honest client sends, but for a negligible probability.

    k-RR and the augmented protocol send exactly one (for the correlated
    protocol see :func:`~shuffledp.service.message_bounds.correlated_max_messages`).
    A FLIP user sends Ber(1 − q) + Bin(d − 1, q) +
    Bin(k·d, q) messages (the count's law does not depend on the value), at
    most 1 + Bin((k + 1)·d − 1, q); the bound is the smallest c with
    P[1 + Bin((k + 1)·d − 1, q) > c] ≤ :data:`MESSAGE_TAIL_PROBABILITY`. The
    shuffler rejects larger submissions; a client that draws more does not submit.
    """
    if protocol in ("krr", "augmented"):
        return 1
    if protocol != "flip":
        raise InvalidParameterError(
            f"protocol must be 'flip', 'krr' or 'augmented', got {protocol!r} (the correlated "
            "protocol's bound is message_bounds.correlated_max_messages)"
        )
    from scipy.stats import binom

    trials = (k + 1) * domain_size - 1
    mean = trials * q
    top = min(trials, int(mean + 60.0 * math.sqrt(mean + 1.0) + 200.0))
    for extra in range(int(mean), top + 1):
        if float(binom.sf(extra, trials, q)) <= MESSAGE_TAIL_PROBABILITY:
            return 1 + extra
    return 1 + top


def capped_parties(protocol: str, min_batch_users: int, variant: str | None) -> int:
    """How many parties a task's certificate counts on could exceed a message bound.

    FLIP and correlated: the ``min_batch_users`` clients of a batch (each
    drops out above ``max_messages_per_submission``). Augmented SAGeo and
    S1Geo: the shuffler's one draw of a batch's dummies (a batch above
    :meth:`Task.max_dummies_per_batch` is never published). k-RR and augmented
    SBin: none (one message per client; at most M dummies per bin).
    """
    if protocol not in PROTOCOLS:
        raise InvalidParameterError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if protocol in ("flip", "correlated"):
        return check_int(min_batch_users, "min_batch_users", minimum=1)
    if protocol == "augmented":
        if variant not in VARIANTS:
            raise InvalidParameterError(f"variant must be one of {VARIANTS}, got {variant!r}")
        return 0 if variant == "sbin" else 1
    return 0


@dataclass(frozen=True)
class Task:
    """The public description of one collection (format ``shuffledp-task/1``).

    Attributes:
        task_id: Random 128-bit id (32 hex digits); bound into every ciphertext.
        protocol: ``"flip"``, ``"krr"``, ``"correlated"`` or ``"augmented"``.
        domain: The public domain's labels, in bin order (a message carries a bin
            index; a correlated message the index 2·bin + (1 if its sign is −1)).
        domain_source: Where the domain came from (``declared``, ``file``, ``builtin:NAME``).
        epsilon: Target ε.
        delta: Target δ.
        min_batch_users: n, the number of users the parameters were calibrated
            for. The guarantee holds for every batch of at least n users
            (extra users' reports can be handed to the adversary: post-processing),
            and no smaller batch is ever forwarded or published.
        calibration: How the parameters were chosen (``exact``, ``paper``; for
            the augmented protocol also ``pure`` (S1Geo) or ``fixed``).
        public_key: The analyzer's raw X25519 public key, base64.
        max_messages_per_submission: Most ciphertexts one submission may carry
            (see :func:`max_messages_per_user`).
        one_submission_per_client: Whether the shuffler admits one submission per
            client token (:mod:`shuffledp.service.tokens`).
        q: FLIP's flip probability.
        fake_users: FLIP's k.
        epsilon0: k-RR's local ε₀.
        estimator: k-RR's estimator (``inversion``, ``raw``, ``clip``, ``simplex``).
        alpha: Correlated: α = e^{−a}, the two-sided geometric part of every bin's noise.
        flood_r: Correlated: the flooding NB(r, q)'s shape r (per bin, at
            ``min_batch_users`` users).
        flood_q: Correlated: the flooding's q.
        neighbours: Correlated: ``"replacement"`` or ``"add-remove"``.
        slack: Correlated: the accuracy slack it was calibrated with (``None`` if not).
        variant: Augmented: the dummy law, ``"sageo"``, ``"s1geo"`` or ``"sbin"``.
        beta: Augmented: the probability that the shuffler keeps each message.
        nu: Augmented (SAGeo, S1Geo): the shift ν.
        q_left: Augmented (SAGeo, S1Geo): q_l.
        q_right: Augmented (SAGeo, S1Geo): q_r.
        trials: Augmented (SBin): M.
        shuffledp_version: The version that created the task.
        schema: The document's ``schema`` (:data:`TASK_SCHEMA`); ``None`` for a
            document written by shuffledp 0.1, which has none. It is kept as it
            was so that such a document's digest does not change.
    """

    task_id: str
    protocol: Protocol
    domain: tuple[str, ...]
    domain_source: str
    epsilon: float
    delta: float
    min_batch_users: int
    calibration: str
    public_key: str
    max_messages_per_submission: int
    one_submission_per_client: bool = False
    q: float | None = None
    fake_users: int | None = None
    epsilon0: float | None = None
    estimator: str | None = None
    alpha: float | None = None
    flood_r: float | None = None
    flood_q: float | None = None
    neighbours: str | None = None
    slack: float | None = None
    variant: str | None = None
    beta: float | None = None
    nu: int | None = None
    q_left: float | None = None
    q_right: float | None = None
    trials: int | None = None
    shuffledp_version: str = __version__
    schema: str | None = TASK_SCHEMA

    @property
    def domain_size(self) -> int:
        """Number of bins."""
        return len(self.domain)

    @property
    def message_domain_size(self) -> int:
        """Number of distinct messages: 2d for the correlated protocol (bin, sign), else d."""
        return 2 * len(self.domain) if self.protocol == "correlated" else len(self.domain)

    @property
    def parameters(self) -> dict[str, Any]:
        """The protocol parameters, as in the task document."""
        if self.protocol == "flip":
            return {"q": self.q, "fake_users": self.fake_users, "calibration": self.calibration}
        if self.protocol == "correlated":
            return {
                "alpha": self.alpha,
                "flood_r": self.flood_r,
                "flood_q": self.flood_q,
                "min_honest": self.min_batch_users,
                "neighbours": self.neighbours,
                "slack": self.slack,
                "calibration": self.calibration,
            }
        if self.protocol == "augmented":
            law: dict[str, Any] = (
                {"trials": self.trials}
                if self.variant == "sbin"
                else {"nu": self.nu, "q_left": self.q_left, "q_right": self.q_right}
            )
            return {
                "variant": self.variant,
                "beta": self.beta,
                **law,
                "calibration": self.calibration,
            }
        return {
            "epsilon0": self.epsilon0,
            "estimator": self.estimator,
            "calibration": self.calibration,
        }

    def correlated_noise(self) -> CorrelatedNoise:
        """The correlated protocol's per-bin noise at ``min_batch_users`` users (α, r, q).

        Raises:
            TaskError: If the task is not a correlated one.
        """
        if self.protocol != "correlated":
            raise TaskError(f"a {self.protocol} task has no correlated noise")
        assert self.alpha is not None and self.flood_r is not None and self.flood_q is not None
        return CorrelatedNoise(self.alpha, self.flood_r, self.flood_q)

    def dummy_law(self) -> DummyLaw:
        """The augmented protocol's dummy law (SAGeo for ``sageo`` and ``s1geo``, SBin).

        Raises:
            TaskError: If the task is not an augmented one.
        """
        if self.protocol != "augmented":
            raise TaskError(f"a {self.protocol} task has no dummy law")
        if self.variant == "sbin":
            assert self.trials is not None
            return SBinLaw(self.trials)
        assert self.nu is not None and self.q_left is not None and self.q_right is not None
        return SAGeoLaw(self.nu, self.q_left, self.q_right)

    def max_dummies_per_batch(self) -> int:
        """Augmented: the most dummies the shuffler adds to a batch, but with probability 1e-30.

        (:func:`~shuffledp.service.message_bounds.max_dummies_per_batch`; 0 for
        the other protocols, whose shuffler adds none.)
        """
        if self.protocol != "augmented":
            return 0
        return max_dummies_per_batch(self.domain_size, self.dummy_law())

    def capped_parties(self) -> int:
        """How many parties the certificate counts on could exceed a message bound.

        (:func:`capped_parties` of the task's protocol, batch size and variant.)
        """
        return capped_parties(self.protocol, self.min_batch_users, self.variant)

    def cap_delta(self) -> float:
        """The δ the message bounds add to every release's certificate at the task's ε.

        :func:`~shuffledp.service.message_bounds.honest_cap_delta` of
        :meth:`capped_parties`; tasks are calibrated for the target δ minus it.
        """
        return honest_cap_delta(self.epsilon, self.capped_parties())

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON document (its ``schema`` first, when it has one)."""
        schema = {} if self.schema is None else {"schema": self.schema}
        return {
            **schema,
            "format": TASK_FORMAT,
            "task_id": self.task_id,
            "protocol": self.protocol,
            "domain": list(self.domain),
            "domain_source": self.domain_source,
            "parameters": self.parameters,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "min_batch_users": self.min_batch_users,
            "max_messages_per_submission": self.max_messages_per_submission,
            "one_submission_per_client": self.one_submission_per_client,
            "message_format": WIRE_VERSION,
            "hpke": dict(SUITE_NAMES),
            "public_key": self.public_key,
            "shuffledp_version": self.shuffledp_version,
        }

    def to_json(self) -> str:
        """Return the document as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def digest(self) -> str:
        """SHA-256 of the canonical JSON: what a client can pin instead of trusting a server."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    @classmethod
    def from_dict(cls, data: Any) -> Task:
        """Parse and check a task document.

        Raises:
            TaskError: If a field is missing, of the wrong type or out of range.
        """
        if not isinstance(data, dict):
            raise TaskError("a task document must be a JSON object")
        if data.get("format") != TASK_FORMAT:
            raise TaskError(f"task format must be {TASK_FORMAT!r}, got {data.get('format')!r}")
        if "schema" in data and data["schema"] != TASK_SCHEMA:
            raise TaskError(
                f"task schema must be {TASK_SCHEMA!r} (or absent, as shuffledp 0.1 wrote it), "
                f"got {data['schema']!r}"
            )
        if data.get("message_format") != WIRE_VERSION:
            raise TaskError(f"task message_format must be {WIRE_VERSION}")
        if data.get("hpke") != dict(SUITE_NAMES):
            raise TaskError(f"task hpke must be {dict(SUITE_NAMES)!r}, got {data.get('hpke')!r}")
        params = data.get("parameters")
        if not isinstance(params, dict):
            raise TaskError("task parameters must be an object")
        try:
            task = cls(
                task_id=data["task_id"],
                protocol=data["protocol"],
                domain=tuple(data["domain"]),
                domain_source=data["domain_source"],
                epsilon=data["epsilon"],
                delta=data["delta"],
                min_batch_users=data["min_batch_users"],
                calibration=params["calibration"],
                public_key=data["public_key"],
                max_messages_per_submission=data["max_messages_per_submission"],
                one_submission_per_client=data["one_submission_per_client"],
                q=params.get("q"),
                fake_users=params.get("fake_users"),
                epsilon0=params.get("epsilon0"),
                estimator=params.get("estimator"),
                alpha=_real(params, "alpha"),
                flood_r=_real(params, "flood_r"),
                flood_q=_real(params, "flood_q"),
                neighbours=params.get("neighbours"),
                slack=_real(params, "slack"),
                variant=params.get("variant"),
                beta=_real(params, "beta"),
                nu=params.get("nu"),
                q_left=_real(params, "q_left"),
                q_right=_real(params, "q_right"),
                trials=params.get("trials"),
                shuffledp_version=data.get("shuffledp_version", "unknown"),
                schema=data.get("schema"),
            )
        except KeyError as exc:
            raise TaskError(f"task document has no field {exc.args[0]!r}") from None
        except TypeError:
            raise TaskError("task document has a field of the wrong type") from None
        if task.protocol == "correlated" and params.get("min_honest") != task.min_batch_users:
            raise TaskError(
                "a correlated task's parameters.min_honest must equal its min_batch_users "
                f"({task.min_batch_users}), got {params.get('min_honest')!r}"
            )
        task.check()
        return task

    def check(self) -> None:
        """Check every field.

        Raises:
            TaskError: On the first bad field.
        """
        try:
            if not is_id(self.task_id):
                raise TaskError(f"task_id must be 32 lowercase hex digits, got {self.task_id!r}")
            if self.protocol not in PROTOCOLS:
                raise TaskError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
            check_domain(list(self.domain), "task domain")
            if len(self.domain) > MAX_INDEX:
                raise TaskError("task domain is too large for the message format")
            check_epsilon(self.epsilon, "task epsilon")
            check_delta(self.delta, "task delta")
            check_int(
                self.min_batch_users, "task min_batch_users", minimum=2, maximum=MAX_BATCH_USERS
            )
            check_int(self.max_messages_per_submission, "max_messages_per_submission", minimum=1)
            if not isinstance(self.one_submission_per_client, bool):
                raise TaskError("one_submission_per_client must be true or false")
            if not isinstance(self.calibration, str):
                raise TaskError("calibration must be a string")
            # A task's domain is public: releases say it is covered on this field alone.
            check_domain_source(self.domain_source)
            if self.schema not in (None, TASK_SCHEMA):
                raise TaskError(f"task schema must be {TASK_SCHEMA!r}, got {self.schema!r}")
            public_key_from_b64(self.public_key)
            if self.protocol == "flip":
                FlipRandomizer(len(self.domain), self.q, self.fake_users)  # type: ignore[arg-type]
            elif self.protocol == "krr":
                KRRRandomizer(len(self.domain), self.epsilon0)  # type: ignore[arg-type]
                if self.estimator not in ("inversion", "raw", "clip", "simplex"):
                    raise TaskError(f"unknown k-RR estimator {self.estimator!r}")
            elif self.protocol == "correlated":
                self._check_correlated()
            else:
                self._check_augmented()
        except TaskError:
            raise
        except (InvalidParameterError, WireError, DataError, TypeError) as exc:
            raise TaskError(f"invalid task: {exc}") from None

    def _check_correlated(self) -> None:
        if None in (self.alpha, self.flood_r, self.flood_q):
            raise TaskError("a correlated task needs parameters alpha, flood_r and flood_q")
        self.correlated_noise()
        if self.neighbours not in NEIGHBOURS:
            raise TaskError(f"neighbours must be one of {NEIGHBOURS}, got {self.neighbours!r}")
        if self.slack is not None and not (math.isfinite(self.slack) and self.slack > 0):
            raise TaskError(f"slack must be a positive number or null, got {self.slack!r}")
        if 2 * len(self.domain) - 1 > MAX_INDEX:
            raise TaskError("task domain is too large for the message format")

    def _check_augmented(self) -> None:
        if self.variant not in VARIANTS:
            raise TaskError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.beta is None:
            raise TaskError("an augmented task needs the parameter beta")
        check_beta(self.beta, self.epsilon if self.variant == "sageo" else None)
        if self.variant == "sbin":
            if self.trials is None:
                raise TaskError("an sbin task needs the parameter trials")
        elif None in (self.nu, self.q_left, self.q_right):
            raise TaskError(f"an {self.variant} task needs the parameters nu, q_left and q_right")
        self.dummy_law()
        if self.max_messages_per_submission != 1:
            raise TaskError(
                "an augmented client sends exactly one message: max_messages_per_submission "
                f"must be 1, got {self.max_messages_per_submission}"
            )

    def index_of(self, label: str) -> int:
        """Return the bin index of a label of the domain.

        Raises:
            DataError: If the label is not in the domain.
        """
        try:
            return self.domain.index(label)
        except ValueError:
            raise DataError(f"value {label!r} is not in the task's domain") from None


def _real(params: dict[str, Any], key: str) -> float | None:
    """A parameter that is a number, as a float (JSON may write 1.0 as 1); None if absent.

    Raises:
        TaskError: If it is present and not a number.
    """
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TaskError(f"task parameter {key!r} must be a number, got {value!r}")
    return float(value)


def create_task(
    protocol: str,
    domain: list[str] | tuple[str, ...],
    epsilon: float,
    delta: float,
    min_batch_users: int,
    *,
    domain_source: str = "declared",
    one_submission_per_client: bool = False,
    fake_users: int | None = None,
    calibration: str = "exact",
    estimator: str = "inversion",
    slack: float | None = None,
    neighbours: str = "replacement",
    variant: str = "sageo",
    beta: float | None = None,
    nu: int | None = None,
    trials: int | None = None,
) -> tuple[Task, X25519PrivateKey]:
    """Calibrate a protocol for ``min_batch_users`` users and generate the analyzer's key pair.

    FLIP uses :meth:`FlipProtocol.calibrated` (q for k fake users), k-RR
    :meth:`KRRProtocol.calibrated` (ε₀), the correlated protocol
    :func:`~shuffledp.protocols.correlated.calibrate_correlated` with
    ``min_honest`` = ``min_batch_users`` (each user's noise shares are
    NB(1/n, ·), so n honest users' shares add up to the certified noise), the
    augmented protocol :func:`~shuffledp.protocols.augmented.calibrate_augmented`
    (its guarantee does not depend on n). The returned private key must be
    saved with :func:`save_private_key` and given to the analyzer only.

    Args:
        protocol: ``"flip"``, ``"krr"``, ``"correlated"`` or ``"augmented"``.
        domain: The public domain's labels, in bin order.
        epsilon: Target ε.
        delta: Target δ.
        min_batch_users: n, the smallest batch the shuffler forwards.
        domain_source: Where the labels came from (stated in releases).
        one_submission_per_client: Require a client token per submission.
        fake_users: FLIP's k (default 100).
        calibration: FLIP and augmented SAGeo: ``"exact"`` or ``"paper"``; the
            correlated protocol: ``"exact"`` only.
        estimator: k-RR's estimator.
        slack: Correlated: the accuracy slack (default
            :data:`~shuffledp.protocols.correlated.DEFAULT_SLACK`).
        neighbours: Correlated: ``"replacement"`` (default) or ``"add-remove"``.
        variant: Augmented: ``"sageo"`` (default), ``"s1geo"`` or ``"sbin"``.
        beta: Augmented: the shuffler's sampling rate (default 1; S1Geo fixes it).
        nu: Augmented SAGeo: a fixed shift to certify instead of calibrating.
        trials: Augmented SBin: a fixed M to certify instead of calibrating.

    Raises:
        InvalidParameterError: On a bad parameter or a target no parameter meets.
    """
    from shuffledp.protocols.flip import FlipProtocol
    from shuffledp.protocols.krr import KRRProtocol

    if protocol not in PROTOCOLS:
        raise InvalidParameterError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    _refuse_unused_options(
        protocol,
        fake_users=(fake_users, None, ("flip",)),
        calibration=(calibration, "exact", ("flip", "correlated", "augmented")),
        estimator=(estimator, "inversion", ("krr",)),
        slack=(slack, None, ("correlated",)),
        neighbours=(neighbours, "replacement", ("correlated",)),
        variant=(variant, "sageo", ("augmented",)),
        beta=(beta, None, ("augmented",)),
        nu=(nu, None, ("augmented",)),
        trials=(trials, None, ("augmented",)),
    )
    labels = tuple(check_domain(list(domain)))
    n = check_int(min_batch_users, "min_batch_users", minimum=2, maximum=MAX_BATCH_USERS)
    key = X25519PrivateKey.generate()
    common: dict[str, Any] = {
        "task_id": new_id(),
        "domain": labels,
        "domain_source": check_domain_source(domain_source),
        "epsilon": check_epsilon(epsilon),
        "delta": check_delta(delta),
        "min_batch_users": n,
        "public_key": public_key_to_b64(key.public_key()),
        "one_submission_per_client": bool(one_submission_per_client),
    }
    # The message bounds cost δ of their own (message_bounds.honest_cap_delta): the
    # parameters are calibrated for what is left, so every release stays within delta.
    reserve = honest_cap_delta(common["epsilon"], capped_parties(protocol, n, variant))
    if not reserve < common["delta"]:
        raise InvalidParameterError(
            Worded(
                "{delta} is not above what the message bounds alone cost ({reserve}, "
                "(1 + e^epsilon) x 2e-30 per party that could exceed its bound); raise "
                "{raise_delta} or lower {batch}",
                delta=Parameter("delta", delta),
                reserve=f"{reserve:.3g}",
                raise_delta=Parameter("delta"),
                batch=Parameter("min_batch_users"),
            )
        )
    delta = calibration_target(common["delta"], reserve)
    if protocol == "flip":
        if calibration not in ("exact", "paper"):
            raise InvalidParameterError(
                f"calibration must be 'exact' or 'paper', got {calibration!r}"
            )
        flip = FlipProtocol.calibrated(  # type: ignore[call-overload]
            n,
            list(labels),
            epsilon,
            delta,
            fake_users=fake_users,
            calibration=calibration,  # a str checked above
        )
        cal = flip.calibration
        task = Task(
            protocol="flip",
            calibration=cal.method,
            q=cal.q,
            fake_users=cal.fake_users,
            max_messages_per_submission=max_messages_per_user(
                "flip", len(labels), cal.q, cal.fake_users
            ),
            **common,
        )
    elif protocol == "krr":
        if estimator not in ("inversion", "raw", "clip", "simplex"):
            raise InvalidParameterError(f"unknown k-RR estimator {estimator!r}")
        krr = KRRProtocol.calibrated(n, list(labels), epsilon, delta)
        task = Task(
            protocol="krr",
            calibration=krr.calibration.method,
            epsilon0=krr.calibration.epsilon0,
            estimator=estimator,
            max_messages_per_submission=1,
            **common,
        )
    elif protocol == "correlated":
        task = _create_correlated(common, epsilon, delta, calibration, slack, neighbours)
    else:
        task = _create_augmented(common, epsilon, delta, calibration, variant, beta, nu, trials)
    task.check()
    return task, key


def _refuse_unused_options(protocol: str, **options: tuple[Any, Any, tuple[str, ...]]) -> None:
    """Refuse an option set away from its default for a protocol that does not use it.

    Each option is (value, default, protocols that use it): nothing a caller gives
    is dropped without a word.
    """
    for name, (value, default, users) in options.items():
        if protocol not in users and value != default:
            raise InvalidParameterError(
                Worded(
                    "{option} does not apply to the {protocol} protocol (it is for {users})",
                    option=Parameter(name, value),
                    protocol=protocol,
                    users=", ".join(users),
                )
            )


def _create_correlated(
    common: dict[str, Any],
    epsilon: float,
    delta: float,
    calibration: str,
    slack: float | None,
    neighbours: str,
) -> Task:
    from shuffledp.protocols.correlated import DEFAULT_SLACK, calibrate_correlated

    if calibration != "exact":
        raise InvalidParameterError(
            f"the correlated protocol is calibrated by the exact accountant only; got "
            f"calibration {calibration!r}"
        )
    n, d = common["min_batch_users"], len(common["domain"])
    cal = calibrate_correlated(
        n,
        d,
        epsilon,
        delta,
        slack=DEFAULT_SLACK if slack is None else slack,
        min_honest=n,
        neighbours=neighbours,  # type: ignore[arg-type]
    )
    return Task(
        protocol="correlated",
        calibration=cal.method,
        alpha=cal.alpha,
        flood_r=cal.flood_r,
        flood_q=cal.flood_q,
        neighbours=cal.neighbours,
        slack=cal.slack,
        max_messages_per_submission=correlated_max_messages(d, cal.noise, n),
        **common,
    )


def _create_augmented(
    common: dict[str, Any],
    epsilon: float,
    delta: float,
    calibration: str,
    variant: str,
    beta: float | None,
    nu: int | None,
    trials: int | None,
) -> Task:
    from shuffledp.protocols.augmented import calibrate_augmented

    cal = calibrate_augmented(
        common["min_batch_users"],
        len(common["domain"]),
        epsilon,
        delta,
        variant=variant,  # type: ignore[arg-type]
        beta=beta,
        nu=nu,
        trials=trials,
        calibration=calibration,  # type: ignore[arg-type]
    )
    return Task(
        protocol="augmented",
        calibration=cal.method,
        variant=cal.variant,
        beta=cal.beta,
        nu=cal.nu,
        q_left=cal.q_left,
        q_right=cal.q_right,
        trials=cal.trials,
        max_messages_per_submission=1,
        **common,
    )


def correlated_calibration(task: Task, n: int) -> CorrelatedCalibration:
    """The task's correlated noise as a calibration for ``n`` users, certified at its ε.

    ``min_honest`` is the task's ``min_batch_users``: every user's shares are
    NB(1/min_batch_users, ·), so the certificate (which does not depend on n)
    holds when a batch holds at least that many users who send them. n only
    sets the estimate's standard error, √(2(n/m)α)/(1 − α) with all n users'
    noise. δ is :func:`~shuffledp.accounting.certificates.correlated.correlated_delta` of the
    task's (α, r, q) at ε, rounded up (``delta_lower``: the same sum rounded down).

    Raises:
        TaskError: If the task is not a correlated one.
    """
    from shuffledp.protocols.correlated import CorrelatedCalibration

    noise = task.correlated_noise()
    neighbours: Any = task.neighbours
    m = task.min_batch_users
    return CorrelatedCalibration(
        method=task.calibration,
        n=check_int(n, "n", minimum=m),
        domain_size=task.domain_size,
        epsilon=task.epsilon,
        target_delta=task.delta,
        neighbours=neighbours,
        min_honest=m,
        slack=task.slack,
        noise=noise,
        delta=correlated_delta(
            task.epsilon, noise, neighbours=neighbours, domain_size=task.domain_size, min_honest=m
        ),
        delta_lower=correlated_delta(
            task.epsilon,
            noise,
            neighbours=neighbours,
            domain_size=task.domain_size,
            min_honest=m,
            rounding="down",
        ),
        notes=(
            f"min_honest = min_batch_users = {m}: every user's noise shares are NB(1/{m}, alpha) "
            f"of (j, +1), NB(1/{m}, alpha) of (j, -1) and NB(r/{m}, q) of both, per bin",
        ),
    )


def augmented_calibration(task: Task, n: int) -> AugmentedCalibration:
    """The task's dummy law as a calibration for ``n`` users, certified at its ε.

    δ is :func:`~shuffledp.accounting.certificates.augmented.augmented_delta` of the task's
    law and β at ε (rounded up; it does not depend on n); ``delta_lower`` is
    the same pair rounded down when a dataset attains it (as
    :func:`~shuffledp.protocols.augmented.calibrate_augmented` states it).

    Raises:
        TaskError: If the task is not an augmented one.
    """
    from shuffledp.analyzers.augmented import augmented_count_stderr
    from shuffledp.central import discrete_laplace_std
    from shuffledp.protocols.augmented import AugmentedCalibration

    law = task.dummy_law()
    assert task.beta is not None and task.variant is not None
    n = check_int(n, "n", minimum=1)
    d, beta = task.domain_size, task.beta
    attained = d >= 3 or n == 1 or beta == 1.0
    return AugmentedCalibration(
        n=n,
        domain_size=d,
        epsilon=task.epsilon,
        target_delta=task.delta,
        variant=task.variant,
        beta=beta,
        nu=task.nu,
        q_left=task.q_left,
        q_right=task.q_right,
        trials=task.trials,
        delta=augmented_delta(task.epsilon, law, beta),
        delta_lower=(
            augmented_delta(task.epsilon, law, beta, rounding="down") if attained else None
        ),
        noise_mean=law.mean,
        noise_variance=law.variance,
        per_bin_std=float(augmented_count_stderr(law.variance, beta, n / d)),
        dlap_std=discrete_laplace_std(task.epsilon),
        method=task.calibration,
    )


def build_protocol(task: Task, n: int) -> ShuffleProtocol:
    """Rebuild the task's protocol for ``n`` users (estimates and the privacy report at n).

    Uses ``from_parameters`` with the task's q and k (FLIP) or ε₀ (k-RR); the
    result's privacy report is the certified δ at the task's ε for n users.
    The correlated and augmented protocols are rebuilt from
    :func:`correlated_calibration` and :func:`augmented_calibration` (their
    certificates do not depend on n; an augmented protocol's estimate
    subtracts the dummies of ONE batch, see :mod:`shuffledp.service.release`).
    """
    from shuffledp.protocols.augmented import AugmentedProtocol
    from shuffledp.protocols.correlated import CorrelatedProtocol
    from shuffledp.protocols.flip import FlipProtocol
    from shuffledp.protocols.krr import KRRProtocol

    n = check_int(n, "n", minimum=1)
    if task.protocol == "flip":
        assert task.q is not None and task.fake_users is not None
        return FlipProtocol.from_parameters(
            q=task.q,
            fake_users=task.fake_users,
            n=n,
            domain=list(task.domain),
            epsilon=task.epsilon,
        )
    if task.protocol == "correlated":
        return CorrelatedProtocol(correlated_calibration(task, n), labels=task.domain)
    if task.protocol == "augmented":
        return AugmentedProtocol(augmented_calibration(task, n), labels=task.domain)
    assert task.epsilon0 is not None and task.estimator is not None
    krr: KRRProtocol = KRRProtocol.from_parameters(  # type: ignore[call-overload]
        epsilon0=task.epsilon0,
        n=n,
        domain=list(task.domain),
        epsilon=task.epsilon,
        estimator=task.estimator,  # a str, checked by the protocol
    )
    return krr


def build_randomizer(task: Task) -> Randomizer:
    """Return the client-side randomizer of the task (no accounting needed).

    Each has ``randomize(values, seed)`` returning the users' messages before
    the shuffle; a correlated message's payload is 2·bin + (1 if its sign is −1).
    """
    if task.protocol == "flip":
        assert task.q is not None and task.fake_users is not None
        return FlipRandomizer(task.domain_size, task.q, task.fake_users)
    if task.protocol == "correlated":
        return CorrelatedRandomizer(task.domain_size, task.correlated_noise(), task.min_batch_users)
    if task.protocol == "augmented":
        return PlainValueRandomizer(task.domain_size)
    assert task.epsilon0 is not None
    return KRRRandomizer(task.domain_size, task.epsilon0)


def save_task(task: Task, path: str | Path) -> None:
    """Write the task document (public) to ``path``."""
    from shuffledp._files import write_text_atomically

    path = Path(path)
    write_text_atomically(path, task.to_json())
    path.chmod(0o644)  # public: every client and both services read it


def load_task(path: str | Path) -> Task:
    """Read and check a task document.

    Raises:
        FileNotFoundError: If the file does not exist.
        TaskError: If it is not a valid task document.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"task file {str(path)!r} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise TaskError(f"task file {str(path)!r} is not JSON") from None
    return Task.from_dict(data)


def save_private_key(key: X25519PrivateKey, path: str | Path) -> Path:
    """Write the analyzer's private key to a new file with mode 0600 (never overwrites)."""
    return write_secret_file(path, private_key_to_b64(key))


def load_private_key(path: str | Path, task: Task) -> X25519PrivateKey:
    """Read the analyzer's private key and check that it belongs to ``task``.

    Raises:
        TaskError: If the key's public half is not the task's public key.
    """
    key = private_key_from_b64(read_secret_file(path, "analyzer key"))
    if public_key_to_b64(key.public_key()) != task.public_key:
        raise TaskError(f"the key in {str(path)!r} is not the analyzer key of task {task.task_id}")
    return key
