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
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from shuffledp import __version__
from shuffledp._validation import (
    DataError,
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_int,
)
from shuffledp._wording import Parameter, Worded
from shuffledp.accounting.certificates.message_bounds import (
    MESSAGE_TAIL_PROBABILITY,
    calibration_target,
    honest_cap_delta,
)
from shuffledp.data.domains import check_domain, check_domain_source
from shuffledp.schemas import schema_id
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
from shuffledp.specs import (
    SPECS,
    AugmentedSpec,
    CorrelatedSpec,
    PlainValueRandomizer,
    ProtocolSpec,
    Randomizer,
    SpecError,
    spec_class,
    spec_from_dict,
)

if TYPE_CHECKING:  # the protocols load the accountant: imported where a task needs them
    from shuffledp.accounting.certificates.augmented import DummyLaw
    from shuffledp.accounting.certificates.correlated_noise import CorrelatedNoise
    from shuffledp.protocols.base import ShuffleProtocol

__all__ = [
    "MAX_BATCH_USERS",
    "MESSAGE_TAIL_PROBABILITY",
    "PROTOCOLS",
    "TASK_FORMAT",
    "TASK_SCHEMA",
    "PlainValueRandomizer",
    "Randomizer",
    "Task",
    "TaskError",
    "build_protocol",
    "build_randomizer",
    "create_task",
    "is_id",
    "load_private_key",
    "load_task",
    "new_id",
    "save_private_key",
    "save_task",
]

#: ``format`` of a task document.
TASK_FORMAT = "shuffledp-task/1"
#: ``schema`` of a task document this version writes (the ``$id`` of its JSON Schema).
TASK_SCHEMA = schema_id("task")
#: Protocols a task can run (the names of :data:`shuffledp.specs.SPECS`).
PROTOCOLS: tuple[str, ...] = tuple(SPECS)
#: Largest ``min_batch_users`` (and number of users in a batch) the services handle:
#: 2**40 users per batch keep every sum of users over batches far below 2**63.
#: The fields of a task document, in the order :meth:`Task.to_dict` writes them (the task
#: schema's ``properties``; all required but ``schema``, which 0.1 documents lack).
TASK_FIELDS = (
    "schema",
    "format",
    "task_id",
    "protocol",
    "domain",
    "domain_source",
    "parameters",
    "epsilon",
    "delta",
    "min_batch_users",
    "max_messages_per_submission",
    "one_submission_per_client",
    "message_format",
    "hpke",
    "public_key",
    "shuffledp_version",
)
MAX_BATCH_USERS = 2**40


class TaskError(DataError):
    """A task document is malformed or does not match its key."""


def new_id() -> str:
    """Return a random 128-bit identifier as 32 lowercase hex digits."""
    return secrets.token_hex(16)


_ID = re.compile("[0-9a-f]{32}")


def is_id(value: object) -> bool:
    """Whether ``value`` is 32 lowercase hex digits (a task, submission, batch or client id)."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


@dataclass(frozen=True)
class Task:
    """The public description of one collection (format ``shuffledp-task/1``).

    Attributes:
        task_id: Random 128-bit id (32 hex digits); bound into every ciphertext.
        spec: The protocol and its calibrated parameters
            (:class:`~shuffledp.specs.ProtocolSpec`; the document's ``protocol``
            is its name, its ``parameters`` its JSON form).
        domain: The public domain's labels, in bin order (a message carries a bin
            index; a correlated message the index 2·bin + (1 if its sign is −1)).
        domain_source: Where the domain came from (``declared``, ``file``, ``builtin:NAME``).
        epsilon: Target ε.
        delta: Target δ.
        min_batch_users: n, the number of users the parameters were calibrated
            for. The guarantee holds for every batch of at least n users
            (extra users' reports can be handed to the adversary: post-processing),
            and no smaller batch is ever forwarded or published.
        public_key: The analyzer's raw X25519 public key, base64.
        max_messages_per_submission: Most ciphertexts one submission may carry
            (the spec's :meth:`~shuffledp.specs.ProtocolSpec.max_messages`).
        one_submission_per_client: Whether the shuffler admits one submission per
            client token (:mod:`shuffledp.service.tokens`).
        shuffledp_version: The version that created the task.
        schema: The document's ``schema`` (:data:`TASK_SCHEMA`); ``None`` for a
            document written by shuffledp 0.1, which has none. It is kept as it
            was so that such a document's digest does not change.
    """

    task_id: str
    spec: ProtocolSpec
    domain: tuple[str, ...]
    domain_source: str
    epsilon: float
    delta: float
    min_batch_users: int
    public_key: str
    max_messages_per_submission: int
    one_submission_per_client: bool = False
    shuffledp_version: str = __version__
    schema: str | None = TASK_SCHEMA

    @property
    def protocol(self) -> str:
        """The protocol's name (the spec's)."""
        return self.spec.name

    @property
    def calibration(self) -> str:
        """How the parameters were chosen (the spec's ``calibration``)."""
        return self.spec.calibration

    @property
    def domain_size(self) -> int:
        """Number of bins."""
        return len(self.domain)

    @property
    def message_domain_size(self) -> int:
        """Number of distinct messages: 2d for the correlated protocol (bin, sign), else d."""
        return self.spec.message_domain_size(len(self.domain))

    @property
    def parameters(self) -> dict[str, Any]:
        """The protocol parameters, as in the task document (the spec's JSON form)."""
        return self.spec.to_dict()

    def correlated_noise(self) -> CorrelatedNoise:
        """The correlated protocol's per-bin noise at ``min_batch_users`` users (α, r, q).

        Raises:
            TaskError: If the task is not a correlated one.
        """
        if not isinstance(self.spec, CorrelatedSpec):
            raise TaskError(f"a {self.protocol} task has no correlated noise")
        return self.spec.noise()

    def dummy_law(self) -> DummyLaw:
        """The augmented protocol's dummy law (SAGeo for ``sageo`` and ``s1geo``, SBin).

        Raises:
            TaskError: If the task is not an augmented one.
        """
        if not isinstance(self.spec, AugmentedSpec):
            raise TaskError(f"a {self.protocol} task has no dummy law")
        return self.spec.dummy_law()

    def max_dummies_per_batch(self) -> int:
        """The most dummies the shuffler adds to a batch, but with probability 1e-30.

        (The spec's :meth:`~shuffledp.specs.ProtocolSpec.max_dummies_per_batch`:
        0 but for the augmented protocol, whose shuffler adds the noise.)
        """
        return self.spec.max_dummies_per_batch(self.domain_size)

    def capped_parties(self) -> int:
        """How many parties the certificate counts on could exceed a message bound.

        (The spec's :meth:`~shuffledp.specs.ProtocolSpec.capped_parties` at
        ``min_batch_users``: FLIP and correlated, every client of a batch;
        augmented SAGeo and S1Geo, the shuffler's one draw of a batch's
        dummies; k-RR and augmented SBin, none.)
        """
        return self.spec.capped_parties(self.min_batch_users)

    def cap_delta(self) -> float:
        """The δ the message bounds add to every release's certificate at the task's ε.

        :func:`~shuffledp.accounting.certificates.message_bounds.honest_cap_delta` of
        :meth:`capped_parties`; tasks are calibrated for the target δ minus it.
        """
        return honest_cap_delta(self.epsilon, self.capped_parties())

    def build_protocol(self, n: int) -> ShuffleProtocol:
        """The task's protocol for ``n`` users (estimates and the privacy report at n).

        The spec's :meth:`~shuffledp.specs.ProtocolSpec.protocol` at the task's
        labels, ε and target δ: the report is the certified δ at the task's ε
        for n users (the correlated and augmented certificates do not depend on
        n; an augmented protocol's estimate subtracts the dummies of ONE batch,
        see :mod:`shuffledp.service.release`).
        """
        n = check_int(n, "n", minimum=1)
        return self.spec.protocol(n, self.domain, self.epsilon, self.delta)

    def build_randomizer(self) -> Randomizer:
        """The client-side randomizer (the spec's; no accounting needed).

        Its ``randomize(values, seed)`` returns the users' messages before the
        shuffle; a correlated message's payload is 2·bin + (1 if its sign is −1).
        """
        return self.spec.randomizer(self.domain_size)

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
        # The task schema's shape, checked here so that Python reads exactly the documents
        # the schema (and so every other client) accepts: no field beyond TASK_FIELDS,
        # every one but ``schema`` present (0.1 wrote none), strings and lists as typed.
        unknown = sorted(set(data) - set(TASK_FIELDS))
        if unknown:
            raise TaskError(
                f"task document has an unknown field {unknown[0]!r} (a {TASK_FORMAT} document "
                f"has only {', '.join(TASK_FIELDS)})"
            )
        missing = [name for name in TASK_FIELDS if name not in data and name != "schema"]
        if missing:
            raise TaskError(f"task document has no field {missing[0]!r}")
        if isinstance(data["message_format"], bool) or data["message_format"] != WIRE_VERSION:
            raise TaskError(
                f"task message_format must be {WIRE_VERSION}, got {data['message_format']!r}"
            )
        if not isinstance(data["shuffledp_version"], str):
            raise TaskError(
                f"task shuffledp_version must be a string, got {data['shuffledp_version']!r}"
            )
        domain = data["domain"]
        if not isinstance(domain, list):
            raise TaskError(f"task domain must be a list of labels, got a {type(domain).__name__}")
        for i, label in enumerate(domain):
            if not isinstance(label, str):
                raise TaskError(f"task domain label {i} must be a string, got {label!r}")
        if data.get("hpke") != dict(SUITE_NAMES):
            raise TaskError(f"task hpke must be {dict(SUITE_NAMES)!r}, got {data.get('hpke')!r}")
        params = data.get("parameters")
        if not isinstance(params, dict):
            raise TaskError("task parameters must be an object")
        try:
            spec = spec_from_dict(str(data.get("protocol")), params)
        except SpecError as exc:
            raise TaskError(f"invalid task: {exc}") from None
        try:
            task = cls(
                task_id=data["task_id"],
                spec=spec,
                domain=tuple(domain),
                domain_source=data["domain_source"],
                epsilon=data["epsilon"],
                delta=data["delta"],
                min_batch_users=data["min_batch_users"],
                public_key=data["public_key"],
                max_messages_per_submission=data["max_messages_per_submission"],
                one_submission_per_client=data["one_submission_per_client"],
                shuffledp_version=data["shuffledp_version"],
                schema=data.get("schema"),
            )
        except TypeError:
            raise TaskError("task document has a field of the wrong type") from None
        task.check()
        return task

    def check(self) -> None:
        """Check every field (the spec checked its own when it was made).

        Raises:
            TaskError: On the first bad field.
        """
        try:
            if not is_id(self.task_id):
                raise TaskError(f"task_id must be 32 lowercase hex digits, got {self.task_id!r}")
            if not isinstance(self.spec, ProtocolSpec):
                raise TaskError(f"a task's spec must be a ProtocolSpec, got {self.spec!r}")
            spec_class(self.spec.name)
            check_domain(list(self.domain), "task domain")
            if len(self.domain) > MAX_INDEX or self.message_domain_size - 1 > MAX_INDEX:
                raise TaskError("task domain is too large for the message format")
            check_epsilon(self.epsilon, "task epsilon")
            check_delta(self.delta, "task delta")
            check_int(
                self.min_batch_users, "task min_batch_users", minimum=2, maximum=MAX_BATCH_USERS
            )
            check_int(self.max_messages_per_submission, "max_messages_per_submission", minimum=1)
            if not isinstance(self.one_submission_per_client, bool):
                raise TaskError("one_submission_per_client must be true or false")
            # A task's domain is public: releases say it is covered on this field alone.
            check_domain_source(self.domain_source)
            if self.schema not in (None, TASK_SCHEMA):
                raise TaskError(f"task schema must be {TASK_SCHEMA!r}, got {self.schema!r}")
            public_key_from_b64(self.public_key)
            self.spec.check_task(
                domain_size=self.domain_size,
                epsilon=self.epsilon,
                min_batch_users=self.min_batch_users,
                max_messages_per_submission=self.max_messages_per_submission,
            )
        except TaskError:
            raise
        except (InvalidParameterError, WireError, DataError, TypeError) as exc:
            raise TaskError(f"invalid task: {exc}") from None

    def index_of(self, label: str) -> int:
        """Return the bin index of a label of the domain.

        Raises:
            DataError: If the label is not in the domain.
        """
        try:
            return self.domain.index(label)
        except ValueError:
            raise DataError(f"value {label!r} is not in the task's domain") from None


def create_task(
    protocol: str | ProtocolSpec,
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

    Given a protocol's name, its spec's ``calibrate`` chooses the parameters:
    :meth:`FlipSpec.calibrate <shuffledp.specs.FlipSpec.calibrate>` (q for k
    fake users), :meth:`KRRSpec.calibrate <shuffledp.specs.KRRSpec.calibrate>`
    (ε₀), :meth:`CorrelatedSpec.calibrate <shuffledp.specs.CorrelatedSpec.calibrate>`
    with ``min_honest`` = ``min_batch_users`` (each user's noise shares are
    NB(1/n, ·), so n honest users' shares add up to the certified noise) and
    :meth:`AugmentedSpec.calibrate <shuffledp.specs.AugmentedSpec.calibrate>`
    (its guarantee does not depend on n). Given a spec, its parameters are
    certified at ``min_batch_users`` users instead, and refused if they do
    not meet the target. Either way the parameters are calibrated for the
    target δ minus what the message bounds cost. The returned private key
    must be saved with :func:`save_private_key` and given to the analyzer only.

    Args:
        protocol: ``"flip"``, ``"krr"``, ``"correlated"`` or ``"augmented"``,
            or a :class:`~shuffledp.specs.ProtocolSpec` to certify as it is.
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
        InvalidParameterError: On a bad parameter, an option the protocol does
            not use, or a target no parameter meets.
    """
    given = {
        name: value
        for name, value, default in (
            ("fake_users", fake_users, None),
            ("calibration", calibration, "exact"),
            ("estimator", estimator, "inversion"),
            ("slack", slack, None),
            ("neighbours", neighbours, "replacement"),
            ("variant", variant, "sageo"),
            ("beta", beta, None),
            ("nu", nu, None),
            ("trials", trials, None),
        )
        if value != default
    }
    if isinstance(protocol, ProtocolSpec):
        if given:
            raise InvalidParameterError(
                Worded(
                    "{option} does not apply when the spec is given (its parameters are "
                    "certified as they are)",
                    option=Parameter(next(iter(given)), next(iter(given.values()))),
                )
            )
        spec_type: type[ProtocolSpec] = type(protocol)
    else:
        try:
            spec_type = spec_class(protocol)
        except SpecError as exc:
            raise InvalidParameterError(str(exc)) from None
        _refuse_unused_options(spec_type, given)
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
    parties = (
        protocol.capped_parties(n)
        if isinstance(protocol, ProtocolSpec)
        else spec_type.capped_parties_when_calibrated(n, given)
    )
    reserve = honest_cap_delta(common["epsilon"], parties)
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
    target = calibration_target(common["delta"], reserve)
    if isinstance(protocol, ProtocolSpec):
        spec = protocol
        certified = spec.protocol(n, labels, common["epsilon"], target).privacy_report().delta
        if certified > target:
            raise InvalidParameterError(
                f"the given {spec.name} parameters certify delta {certified:.4g} at epsilon "
                f"{common['epsilon']:g} and {n} users, above the target {delta:g} less the "
                f"message bounds' {reserve:.3g}"
            )
    else:
        spec = spec_type.calibrate(n, labels, common["epsilon"], target, **given)
    if spec.capped_parties(n) != parties:  # the reserve was for this many parties
        raise AssertionError(f"{spec.name}: capped parties changed with the calibration")
    task = Task(spec=spec, max_messages_per_submission=spec.max_messages(len(labels)), **common)
    task.check()
    return task, key


def _refuse_unused_options(spec_type: type[ProtocolSpec], given: dict[str, Any]) -> None:
    """Refuse an option set away from its default for a protocol that does not use it.

    A protocol uses the options its spec's ``calibrate`` takes: nothing a caller
    gives is dropped without a word.
    """
    for name, value in given.items():
        if name not in spec_type.calibration_options():
            users = [spec.name for spec in SPECS.values() if name in spec.calibration_options()]
            raise InvalidParameterError(
                Worded(
                    "{option} does not apply to the {protocol} protocol (it is for {users})",
                    option=Parameter(name, value),
                    protocol=spec_type.name,
                    users=", ".join(users),
                )
            )


def build_protocol(task: Task, n: int) -> ShuffleProtocol:
    """The task's protocol for ``n`` users: :meth:`Task.build_protocol`."""
    return task.build_protocol(n)


def build_randomizer(task: Task) -> Randomizer:
    """The task's client-side randomizer: :meth:`Task.build_randomizer`."""
    return task.build_randomizer()


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
