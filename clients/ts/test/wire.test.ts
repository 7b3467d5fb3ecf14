/** The wire format against vectors written by Python (scripts/make_wire_vectors.py). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  CIPHERTEXT_LENGTH,
  MessageOpener,
  MessageSealer,
  base64Decode,
  base64Encode,
  decodePlaintext,
  encodePlaintext,
  hasWebCryptoX25519,
  hpkeInfo,
  type KemChoice,
} from "../src/node.js";
import { wireVectors } from "./paths.js";

const vectors = wireVectors();
const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");
const KEMS: KemChoice[] = ["webcrypto", "pure-js"];

describe("wire format (vectors sealed by Python)", () => {
  it("this Node has WebCrypto X25519 (the default path)", async () => {
    assert.equal(await hasWebCryptoX25519(), true);
  });

  it("the HPKE info is Python's", () => {
    assert.equal(hex(hpkeInfo(vectors.task_id)), vectors.info_hex);
  });

  it("plaintexts are Python's 5 bytes, and decode back", () => {
    for (const v of vectors.sealed) {
      const plaintext = encodePlaintext(v.index, v.domain_size);
      assert.equal(hex(plaintext), v.plaintext_hex);
      assert.equal(decodePlaintext(plaintext, v.domain_size), v.index);
    }
    assert.throws(() => encodePlaintext(5, 5), /outside the domain/);
    assert.throws(() => encodePlaintext(-1, 5), /outside the domain/);
    assert.throws(() => decodePlaintext(Uint8Array.of(2, 0, 0, 0, 0), 5), /version 2/);
  });

  for (const kem of KEMS) {
    it(`opens every ciphertext Python sealed (${kem} X25519)`, async () => {
      const key = base64Decode(vectors.private_key, 32);
      for (const v of vectors.sealed) {
        const opener = await MessageOpener.create(key, vectors.task_id, v.domain_size, kem);
        const ciphertext = base64Decode(v.ciphertext, CIPHERTEXT_LENGTH);
        assert.equal(hex(await opener.openPlaintext(ciphertext)), v.plaintext_hex);
        assert.equal(await opener.open(ciphertext), v.index);
      }
    });

    it(`a ciphertext sealed for another task does not open (${kem})`, async () => {
      const key = base64Decode(vectors.private_key, 32);
      const other = base64Decode(vectors.other_task.ciphertext, CIPHERTEXT_LENGTH);
      const wrongTask = await MessageOpener.create(key, vectors.task_id, 5, kem);
      await assert.rejects(wrongTask.open(other), /does not decrypt/);
      const rightTask = await MessageOpener.create(key, vectors.other_task.task_id, 5, kem);
      assert.equal(await rightTask.open(other), vectors.other_task.index);
    });
  }

  it("TS seals 53 fresh bytes per message that the other KEM implementation opens", async () => {
    const publicKey = base64Decode(vectors.public_key, 32);
    const privateKey = base64Decode(vectors.private_key, 32);
    for (const [sealKem, openKem] of [["webcrypto", "pure-js"], ["pure-js", "webcrypto"]] as const) {
      const sealer = await MessageSealer.create(publicKey, vectors.task_id, 10, sealKem);
      assert.equal(sealer.kem, sealKem);
      const opener = await MessageOpener.create(privateKey, vectors.task_id, 10, openKem);
      const sealed = await sealer.sealAll([0, 3, 3, 9]);
      assert.deepEqual(sealed.map((c) => c.length), [53, 53, 53, 53]);
      assert.equal(base64Encode(sealed[0] as Uint8Array).length, 72);
      assert.notEqual(hex(sealed[1] as Uint8Array), hex(sealed[2] as Uint8Array)); // fresh encapsulation each
      assert.deepEqual(await Promise.all(sealed.map((c) => opener.open(c))), [0, 3, 3, 9]);
    }
  });

  it("strict base64", () => {
    assert.throws(() => base64Decode("AAA", 2), /not valid base64/);
    assert.throws(() => base64Decode("AA==", 2), /1 bytes, expected 2/);
    assert.throws(() => base64Decode("A A=", 2), /not valid base64/);
  });
});
