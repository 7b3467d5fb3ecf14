"""Analyzer stores holding real batches: sealed messages, some that cannot be counted, permuted."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shuffledp.service.analyzer import Aggregator
from shuffledp.service.shuffler import permute_messages
from shuffledp.service.sqlite_store import SQLiteAnalyzerStore
from shuffledp.service.store import ReceivedBatch
from shuffledp.service.store_common import content_digest
from shuffledp.service.task import Task, build_randomizer, create_task, new_id
from shuffledp.service.wire import (
    CIPHERTEXT_LENGTH,
    MessageSealer,
    hpke_info,
    hpke_suite,
    public_key_from_b64,
)

DOMAIN = ["red", "green", "blue", "cyan", "pink"]
_TASKS: dict[tuple[str, int], tuple[Task, Any]] = {}


def task_and_key(protocol: str, min_batch_users: int = 100) -> tuple[Task, Any]:
    """A task and its analyzer key, created once per test session."""
    if (protocol, min_batch_users) not in _TASKS:
        options = {"fake_users": 20} if protocol == "flip" else {}
        _TASKS[protocol, min_batch_users] = create_task(
            protocol, DOMAIN, 1.0, 1e-6, min_batch_users, **options
        )
    return _TASKS[protocol, min_batch_users]


def seal_raw(task: Task, plaintext: bytes) -> bytes:
    """A ciphertext of an arbitrary plaintext, bound to the task (decrypts, may not decode)."""
    return hpke_suite().encrypt(
        plaintext, public_key_from_b64(task.public_key), info=hpke_info(task.task_id)
    )


def bad_messages(task: Task) -> tuple[list[bytes], int, int]:
    """Messages an honest client never sends: (messages, undecryptable, undecodable)."""
    other, _ = task_and_key("krr" if task.protocol == "flip" else "flip")
    other_sealer = MessageSealer(public_key_from_b64(other.public_key), other.task_id, 5)
    tampered = bytearray(
        MessageSealer(public_key_from_b64(task.public_key), task.task_id, 5).seal(1)
    )
    tampered[40] ^= 1
    undecryptable = [os.urandom(CIPHERTEXT_LENGTH), other_sealer.seal(0), bytes(tampered)]
    undecodable = [
        seal_raw(task, bytes([2, 0, 0, 0, 1])),  # unknown version
        seal_raw(task, bytes([1, 0, 0, 0, 5])),  # index outside the domain
        seal_raw(task, bytes([0, 0, 0, 0, 1])),  # version 0
    ]
    return undecryptable + undecodable, len(undecryptable), len(undecodable)


@dataclass
class Stored:
    """A store with batches, and what they hold."""

    task: Task
    key: Any
    path: Path
    url: str
    counts: np.ndarray  # good messages per bin over every batch
    n_users: int
    undecryptable: int
    undecodable: int
    batch_ids: list[str]


StoreMaker = Callable[..., Stored]


def make_store_maker(tmp_path: Path) -> StoreMaker:
    made = [0]

    def make(
        protocol: str = "flip",
        batch_users: Sequence[int] = (100, 130, 115),
        *,
        bad: bool = True,
        aggregate: bool = True,
        min_batch_users: int = 100,
        seed: int = 0,
    ) -> Stored:
        task, key = task_and_key(protocol, min_batch_users)
        randomizer = build_randomizer(task)
        sealer = MessageSealer(public_key_from_b64(task.public_key), task.task_id, 5)
        rng = np.random.default_rng(seed)
        path = tmp_path / f"analyzer{made[0]}.db"
        made[0] += 1
        store = SQLiteAnalyzerStore(path, task.task_id)
        counts = np.zeros(task.domain_size, dtype=np.int64)
        undecryptable = undecodable = 0
        ids = []
        try:
            for users in batch_users:
                values = rng.integers(0, task.domain_size, size=users)
                bins = randomizer.randomize(values, rng).payload
                messages = [sealer.seal(int(b)) for b in bins]
                if bad:
                    extra, n_undecryptable, n_undecodable = bad_messages(task)
                    if protocol == "krr":  # exactly one message per user: replace some
                        bins = bins[len(extra) :]
                        messages = messages[len(extra) :]
                    messages += extra
                    undecryptable += n_undecryptable
                    undecodable += n_undecodable
                counts += np.bincount(bins, minlength=task.domain_size)
                payload = permute_messages(b"".join(messages))
                batch = ReceivedBatch(
                    new_id(),
                    payload,
                    users,
                    len(messages),
                    content_digest(payload, CIPHERTEXT_LENGTH),
                )
                assert store.add_batch(batch)
                ids.append(batch.batch_id)
            if aggregate:
                assert Aggregator(task, key, store).step()
        finally:
            store.close()
        return Stored(
            task,
            key,
            path,
            f"sqlite:///{path}",
            counts,
            sum(batch_users),
            undecryptable,
            undecodable,
            ids,
        )

    return make


def write_task_files(stored: Stored, directory: Path) -> tuple[Path, Path]:
    """Save the task document and the analyzer key file; return their paths."""
    from shuffledp.service.task import save_private_key, save_task

    task_path, key_path = directory / "task.json", directory / "analyzer.key"
    if not task_path.exists():
        save_task(stored.task, task_path)
        save_private_key(stored.key, key_path)
    return task_path, key_path


def _labeled_extract(suite: bytes, salt: bytes, label: bytes, ikm: bytes) -> bytes:
    import hmac

    return hmac.new(salt or bytes(32), b"HPKE-v1" + suite + label + ikm, "sha256").digest()


def _labeled_expand(suite: bytes, prk: bytes, label: bytes, info: bytes, length: int) -> bytes:
    import hmac

    labeled = length.to_bytes(2, "big") + b"HPKE-v1" + suite + label + info
    out, block, counter = b"", b"", 1
    while len(out) < length:  # HKDF-Expand (RFC 5869)
        block = hmac.new(prk, block + labeled + bytes([counter]), "sha256").digest()
        out += block
        counter += 1
    return out[:length]


def seal_with_ephemeral(task: Task, plaintext: bytes, ephemeral: Any) -> bytes:
    """HPKE base-mode seal (RFC 9180, the wire's suite) under a GIVEN ephemeral key.

    What only the holder of a message's ephemeral secret can do: another
    ciphertext with the same encapsulated key that decrypts (to another
    plaintext, say). ``cryptography`` draws the ephemeral key itself, so the
    key schedule is written out here (checked against it: the result decrypts).
    """
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    recipient = public_key_from_b64(task.public_key).public_bytes_raw()
    enc = ephemeral.public_key().public_bytes_raw()
    dh = ephemeral.exchange(public_key_from_b64(task.public_key))
    kem = b"KEM" + (0x20).to_bytes(2, "big")
    prk = _labeled_extract(kem, b"", b"eae_prk", dh)
    shared = _labeled_expand(kem, prk, b"shared_secret", enc + recipient, 32)
    suite = b"HPKE" + b"".join(n.to_bytes(2, "big") for n in (0x20, 0x1, 0x3))
    context = (
        b"\x00"
        + _labeled_extract(suite, b"", b"psk_id_hash", b"")
        + _labeled_extract(suite, b"", b"info_hash", hpke_info(task.task_id))
    )
    secret = _labeled_extract(suite, shared, b"secret", b"")
    key = _labeled_expand(suite, secret, b"key", context, 32)
    nonce = _labeled_expand(suite, secret, b"base_nonce", context, 12)
    return enc + ChaCha20Poly1305(key).encrypt(nonce, plaintext, b"")
