"""The message format: one bin index per message, HPKE-encrypted to the analyzer.

Plaintext (format version 1), always :data:`PLAINTEXT_LENGTH` = 5 bytes::

    version (1 byte, = 1) | index (uint32, big-endian)

where ``index`` is a bin of the task's public domain (FLIP, k-RR, augmented:
the shuffler's dummies are sealed the same way), or for the correlated
protocol one (bin, sign) message: 2·bin for (bin, +1) and 2·bin + 1 for
(bin, −1), below 2d (the task's ``message_domain_size``); an index beyond it, or
another version, does not decode. The length never depends on the value, so neither does
the ciphertext's: every ciphertext is exactly :data:`CIPHERTEXT_LENGTH` bytes
(the 32-byte X25519 encapsulated key, the 5 encrypted bytes, the 16-byte
Poly1305 tag).

Every message is sealed on its own with HPKE base mode (RFC 9180): suite
X25519 / HKDF-SHA256 / ChaCha20-Poly1305 (:data:`SUITE_NAMES`). The HPKE
``info`` string binds the format version and the task id
(:func:`hpke_info`), so a ciphertext made for another task or another format
version does not decrypt. In JSON a ciphertext travels as standard base64
(:data:`CIPHERTEXT_B64_LENGTH` characters).
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.hpke import AEAD, KDF, KEM, Suite
from numpy.typing import NDArray

from shuffledp._validation import DataError

__all__ = [
    "CIPHERTEXT_B64_LENGTH",
    "CIPHERTEXT_LENGTH",
    "ENCAPSULATED_KEY_LENGTH",
    "MAX_INDEX",
    "PLAINTEXT_LENGTH",
    "SUITE_NAMES",
    "WIRE_VERSION",
    "MessageOpener",
    "MessageSealer",
    "OpenedMessages",
    "WireError",
    "b64decode_exact",
    "b64encode",
    "decode_plaintext",
    "encode_plaintext",
    "hpke_info",
    "hpke_suite",
    "private_key_from_b64",
    "private_key_to_b64",
    "public_key_from_b64",
    "public_key_to_b64",
]

#: Version byte of the plaintext, also bound into the HPKE ``info``.
WIRE_VERSION = 1
_PLAINTEXT = struct.Struct(">BI")
#: Bytes of one plaintext message.
PLAINTEXT_LENGTH = _PLAINTEXT.size
#: Largest index a message can carry.
MAX_INDEX = 2**32 - 1
#: Bytes of the X25519 encapsulated key that starts every ciphertext (fresh per message).
ENCAPSULATED_KEY_LENGTH = 32
_TAG_LENGTH = 16
#: Bytes of one ciphertext: encapsulated key + plaintext + AEAD tag.
CIPHERTEXT_LENGTH = ENCAPSULATED_KEY_LENGTH + PLAINTEXT_LENGTH + _TAG_LENGTH
#: Characters of one ciphertext in standard base64 (with padding).
CIPHERTEXT_B64_LENGTH = 4 * -(-CIPHERTEXT_LENGTH // 3)

#: The one HPKE suite of format version 1, by the names of ``cryptography``'s enums.
SUITE_NAMES: Mapping[str, str] = {
    "kem": "X25519",
    "kdf": "HKDF_SHA256",
    "aead": "CHACHA20_POLY1305",
}


class WireError(DataError):
    """A message, key or ciphertext does not follow the wire format."""


def hpke_suite(names: Mapping[str, str] | None = None) -> Suite:
    """Return the HPKE suite; ``names`` (from a task document) must be :data:`SUITE_NAMES`.

    Raises:
        WireError: If another suite is named.
    """
    if names is not None and dict(names) != dict(SUITE_NAMES):
        raise WireError(f"unsupported HPKE suite {dict(names)!r}; expected {dict(SUITE_NAMES)!r}")
    return Suite(KEM.X25519, KDF.HKDF_SHA256, AEAD.CHACHA20_POLY1305)


def hpke_info(task_id: str) -> bytes:
    """Return the HPKE ``info``: the format version and the task id, e.g. ``shuffledp/1 task=…``."""
    return f"shuffledp/{WIRE_VERSION} task={task_id}".encode("ascii")


def encode_plaintext(index: int, domain_size: int) -> bytes:
    """Return the 5-byte plaintext of a message carrying ``index``.

    Raises:
        WireError: If ``index`` is not in ``[0, domain_size)``.
    """
    if not 0 <= index < domain_size or index > MAX_INDEX:
        raise WireError(f"message index {index} is outside the domain [0, {domain_size})")
    return _PLAINTEXT.pack(WIRE_VERSION, index)


def decode_plaintext(plaintext: bytes, domain_size: int) -> int:
    """Return the index a plaintext carries.

    Raises:
        WireError: On a wrong length, an unknown version or an index outside the domain.
    """
    if len(plaintext) != PLAINTEXT_LENGTH:
        raise WireError(f"plaintext has {len(plaintext)} bytes, expected {PLAINTEXT_LENGTH}")
    version, index = _PLAINTEXT.unpack(plaintext)
    if version != WIRE_VERSION:
        raise WireError(f"message format version {version}, expected {WIRE_VERSION}")
    if index >= domain_size:
        raise WireError(f"message index {index} is outside the domain [0, {domain_size})")
    return int(index)


def b64encode(data: bytes) -> str:
    """Standard base64 with padding, as text."""
    return base64.b64encode(data).decode("ascii")


def b64decode_exact(text: object, length: int | None = None, what: str = "value") -> bytes:
    """Decode strict standard base64; optionally require exactly ``length`` bytes.

    Raises:
        WireError: If ``text`` is not a string of valid base64 of the right length.
    """
    if not isinstance(text, str):
        raise WireError(f"{what} must be a base64 string, got {type(text).__name__}")
    if length is not None and len(text) != 4 * -(-length // 3):
        raise WireError(f"{what} must be {length} bytes in base64")
    try:  # what base64.b64decode(text, validate=True) does, without its wrapper
        data = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        raise WireError(f"{what} is not valid base64") from None
    if length is not None and len(data) != length:
        raise WireError(f"{what} has {len(data)} bytes, expected {length}")
    return data


def public_key_to_b64(key: X25519PublicKey) -> str:
    """The raw 32-byte X25519 public key in base64."""
    return b64encode(key.public_bytes_raw())


def public_key_from_b64(text: object) -> X25519PublicKey:
    """Parse a raw X25519 public key from base64.

    Raises:
        WireError: If it is not 32 bytes of base64.
    """
    return X25519PublicKey.from_public_bytes(b64decode_exact(text, 32, "public key"))


def private_key_to_b64(key: X25519PrivateKey) -> str:
    """The raw 32-byte X25519 private key in base64 (for the 0600 key file only)."""
    return b64encode(key.private_bytes_raw())


def private_key_from_b64(text: str) -> X25519PrivateKey:
    """Parse a raw X25519 private key from base64.

    Raises:
        WireError: If it is not 32 bytes of base64.
    """
    return X25519PrivateKey.from_private_bytes(b64decode_exact(text, 32, "private key"))


class MessageSealer:
    """Encrypts messages of one task to the analyzer's public key (client side).

    Args:
        public_key: The analyzer's X25519 public key.
        task_id: The task; bound into every ciphertext through the HPKE ``info``.
        domain_size: Number of bins; an index outside is refused before encryption.
    """

    def __init__(self, public_key: X25519PublicKey, task_id: str, domain_size: int) -> None:
        self._suite = hpke_suite()
        self._key = public_key
        self._info = hpke_info(task_id)
        self.domain_size = domain_size

    def seal(self, index: int) -> bytes:
        """Return the ciphertext (:data:`CIPHERTEXT_LENGTH` bytes) of one message."""
        plaintext = encode_plaintext(index, self.domain_size)
        ciphertext = self._suite.encrypt(plaintext, self._key, info=self._info)
        if len(ciphertext) != CIPHERTEXT_LENGTH:  # pragma: no cover - fixed by the suite
            raise WireError(f"ciphertext has {len(ciphertext)} bytes, not {CIPHERTEXT_LENGTH}")
        return ciphertext

    def seal_all(self, indices: Iterable[int]) -> list[bytes]:
        """Seal every message separately (one fresh encapsulation each)."""
        return [self.seal(int(index)) for index in indices]


@dataclass(frozen=True)
class OpenedMessages:
    """The messages of a payload that decrypted and decoded, and what did not.

    Attributes:
        indices: Bin index of every good message.
        undecryptable: Messages that failed HPKE (other key, other task, tampered).
        undecodable: Messages that decrypted but are not a valid plaintext.
        positions: Where each good message sits in the payload (its rank among the
            ciphertexts), in the order of ``indices``.
    """

    indices: NDArray[np.int64]
    undecryptable: int
    undecodable: int
    positions: NDArray[np.int64]


class MessageOpener:
    """Decrypts and decodes messages of one task (analyzer side).

    Args:
        private_key: The analyzer's X25519 private key.
        task_id: The task whose ``info`` the ciphertexts must carry.
        domain_size: Number of bins; an index outside is rejected.
    """

    def __init__(self, private_key: X25519PrivateKey, task_id: str, domain_size: int) -> None:
        self._suite = hpke_suite()
        self._key = private_key
        self._info = hpke_info(task_id)
        self.domain_size = domain_size

    def open(self, ciphertext: bytes) -> int:
        """Return the index one ciphertext carries.

        Raises:
            WireError: If it does not decrypt (wrong length, key, task or
                tampered) or does not decode.
        """
        if len(ciphertext) != CIPHERTEXT_LENGTH:
            raise WireError(f"ciphertext has {len(ciphertext)} bytes, not {CIPHERTEXT_LENGTH}")
        try:
            plaintext = self._suite.decrypt(ciphertext, self._key, info=self._info)
        except InvalidTag:
            raise WireError("ciphertext does not decrypt under this task's key") from None
        return decode_plaintext(plaintext, self.domain_size)

    def open_payload(self, payload: bytes) -> OpenedMessages:
        """Open every fixed-length ciphertext of a concatenated payload; never raises on content.

        Raises:
            WireError: Only if the payload's length is not a multiple of
                :data:`CIPHERTEXT_LENGTH`.
        """
        if len(payload) % CIPHERTEXT_LENGTH:
            raise WireError(
                f"payload of {len(payload)} bytes is not a whole number of "
                f"{CIPHERTEXT_LENGTH}-byte ciphertexts"
            )
        count = len(payload) // CIPHERTEXT_LENGTH
        out = np.empty(count, dtype=np.int64)
        positions = np.empty(count, dtype=np.int64)
        good = undecryptable = undecodable = 0
        view = memoryview(payload)
        decrypt, key, info = self._suite.decrypt, self._key, self._info
        for start in range(0, len(payload), CIPHERTEXT_LENGTH):
            try:
                plaintext = decrypt(view[start : start + CIPHERTEXT_LENGTH], key, info=info)
            except InvalidTag:
                undecryptable += 1
                continue
            try:
                out[good] = decode_plaintext(plaintext, self.domain_size)
            except WireError:
                undecodable += 1
                continue
            positions[good] = start // CIPHERTEXT_LENGTH
            good += 1
        return OpenedMessages(out[:good], undecryptable, undecodable, positions[:good])
