"""The message format: constant length, version and domain checks, HPKE binding."""

from __future__ import annotations

import base64
import struct

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from shuffledp.service.wire import (
    CIPHERTEXT_B64_LENGTH,
    CIPHERTEXT_LENGTH,
    PLAINTEXT_LENGTH,
    SUITE_NAMES,
    WIRE_VERSION,
    MessageOpener,
    MessageSealer,
    WireError,
    b64decode_exact,
    b64encode,
    decode_plaintext,
    encode_plaintext,
    hpke_info,
    hpke_suite,
    public_key_from_b64,
    public_key_to_b64,
)

TASK = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def key() -> X25519PrivateKey:
    return X25519PrivateKey.generate()


def test_plaintext_is_version_byte_and_big_endian_uint32():
    assert encode_plaintext(0, 5) == bytes([WIRE_VERSION, 0, 0, 0, 0])
    assert encode_plaintext(258, 1000) == bytes([WIRE_VERSION, 0, 0, 1, 2])
    assert PLAINTEXT_LENGTH == 5
    for index in (0, 1, 4):
        assert decode_plaintext(encode_plaintext(index, 5), 5) == index


def test_ciphertext_length_never_depends_on_the_value(key):
    domain = 70_000  # indices of 1, 2 and 3 significant bytes
    sealer = MessageSealer(key.public_key(), TASK, domain)
    lengths = {len(sealer.seal(i)) for i in (0, 1, 255, 256, 65_535, 65_536, domain - 1)}
    assert lengths == {CIPHERTEXT_LENGTH} == {32 + 5 + 16}
    assert len(b64encode(sealer.seal(7))) == CIPHERTEXT_B64_LENGTH == 72


def test_round_trip_and_fresh_encapsulation(key):
    sealer = MessageSealer(key.public_key(), TASK, 5)
    opener = MessageOpener(key, TASK, 5)
    a, b = sealer.seal(3), sealer.seal(3)
    assert a != b  # a new ephemeral key per message: equal values do not show
    assert opener.open(a) == opener.open(b) == 3


@pytest.mark.parametrize(
    ("plaintext", "fragment"),
    [
        (struct.pack(">BI", 2, 1), "version"),
        (struct.pack(">BI", 0, 1), "version"),
        (struct.pack(">BI", WIRE_VERSION, 5), "outside the domain"),
        (struct.pack(">BI", WIRE_VERSION, 2**32 - 1), "outside the domain"),
        (b"\x01\x00\x00\x00", "bytes"),
        (b"\x01\x00\x00\x00\x00\x00", "bytes"),
        (b"", "bytes"),
    ],
)
def test_decoding_rejects_bad_plaintexts(plaintext, fragment):
    with pytest.raises(WireError, match=fragment):
        decode_plaintext(plaintext, 5)


@pytest.mark.parametrize("index", [-1, 5, 2**32])
def test_encoding_rejects_indices_outside_the_domain(index):
    with pytest.raises(WireError):
        encode_plaintext(index, 5)


def test_info_binds_the_task_and_the_version(key):
    assert hpke_info(TASK) == f"shuffledp/1 task={TASK}".encode()
    ct = MessageSealer(key.public_key(), TASK, 5).seal(1)
    other_task = MessageOpener(key, "f" * 32, 5)
    with pytest.raises(WireError, match="does not decrypt"):
        other_task.open(ct)
    suite = hpke_suite()
    other_version = suite.encrypt(
        encode_plaintext(1, 5), key.public_key(), info=b"shuffledp/2 task=" + TASK.encode()
    )
    with pytest.raises(WireError, match="does not decrypt"):
        MessageOpener(key, TASK, 5).open(other_version)


def test_other_key_and_tampering_do_not_decrypt(key):
    ct = MessageSealer(X25519PrivateKey.generate().public_key(), TASK, 5).seal(1)
    opener = MessageOpener(key, TASK, 5)
    with pytest.raises(WireError):
        opener.open(ct)
    good = bytearray(MessageSealer(key.public_key(), TASK, 5).seal(1))
    good[40] ^= 1
    with pytest.raises(WireError):
        opener.open(bytes(good))
    with pytest.raises(WireError, match="bytes"):
        opener.open(bytes(good[:-1]))


def test_open_payload_counts_what_fails_and_never_raises_on_content(key):
    sealer = MessageSealer(key.public_key(), TASK, 5)
    stranger = MessageSealer(X25519PrivateKey.generate().public_key(), TASK, 5)
    bad_plain = hpke_suite().encrypt(
        b"\x01\x00\x00\x00\x09", key.public_key(), info=hpke_info(TASK)
    )
    payload = b"".join([sealer.seal(0), stranger.seal(1), sealer.seal(4), bad_plain, b"\x00" * 53])
    opened = MessageOpener(key, TASK, 5).open_payload(payload)
    assert opened.indices.tolist() == [0, 4]
    assert (opened.undecryptable, opened.undecodable) == (2, 1)
    with pytest.raises(WireError, match="whole number"):
        MessageOpener(key, TASK, 5).open_payload(payload[:-1])


def test_base64_is_strict():
    data = bytes(range(53))
    text = b64encode(data)
    assert b64decode_exact(text, 53) == data
    for bad in (text[:-1], text + "A", text.replace("A", "*", 1), " " + text[1:], 7, None):
        with pytest.raises(WireError):
            b64decode_exact(bad, 53)
    urlsafe = base64.urlsafe_b64encode(b"\xff" * 53).decode()
    with pytest.raises(WireError):
        b64decode_exact(urlsafe, 53)


def test_public_key_round_trip_and_suite_names(key):
    text = public_key_to_b64(key.public_key())
    assert public_key_from_b64(text).public_bytes_raw() == key.public_key().public_bytes_raw()
    with pytest.raises(WireError):
        public_key_from_b64(text[:-4])
    assert dict(SUITE_NAMES) == {"kem": "X25519", "kdf": "HKDF_SHA256", "aead": "CHACHA20_POLY1305"}
    with pytest.raises(WireError, match="unsupported"):
        hpke_suite({"kem": "P256", "kdf": "HKDF_SHA256", "aead": "AES_128_GCM"})


def test_permutation_keeps_the_multiset_and_moves_messages():
    from shuffledp.service.shuffler import permute_messages

    rows = np.arange(200 * CIPHERTEXT_LENGTH, dtype=np.uint32).astype(np.uint8)
    rows = np.random.default_rng(0).integers(0, 256, (200, CIPHERTEXT_LENGTH), dtype=np.uint8)
    payload = rows.tobytes()
    out = permute_messages(payload)
    before = sorted(payload[i : i + CIPHERTEXT_LENGTH] for i in range(0, len(payload), 53))
    after = [out[i : i + CIPHERTEXT_LENGTH] for i in range(0, len(out), 53)]
    assert sorted(after) == before
    assert out != payload
