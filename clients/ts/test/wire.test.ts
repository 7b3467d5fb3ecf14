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
import { DhkemX25519HkdfSha256 } from "@hpke/dhkem-x25519";
import { aeadSeal, keySchedule, keyScheduleContext, webCryptoEncapsulator } from "../src/wire.js";
import { wireVectors } from "./paths.js";

const vectors = wireVectors();
const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");
const KEMS: KemChoice[] = ["webcrypto", "pure-js"];
const bytes = (text: string): Uint8Array<ArrayBuffer> => new Uint8Array(Buffer.from(text.replace(/\s+/g, ""), "hex"));

/**
 * RFC 9180, appendix A.2.1: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20Poly1305, base
 * mode (the values of cfrg/draft-irtf-cfrg-hpke's test vectors).
 */
const RFC9180_A21 = {
  info: "4f6465206f6e2061204772656369616e2055726e",
  ikmE: "909a9b35d3dc4713a5e72a4da274b55d3d3821a37e5d099e74a647db583a904b",
  pkEm: "1afa08d3dec047a643885163f1180476fa7ddb54c6a8029ea33f95796bf2ac4a",
  skEm: "f4ec9b33b792c372c1d2c2063507b684ef925b8c75a42dbcbf57d63ccd381600",
  pkRm: "4310ee97d88cc1f088a5576c77ab0cf5c3ac797f3d95139c6c84b5429c59662a",
  enc: "1afa08d3dec047a643885163f1180476fa7ddb54c6a8029ea33f95796bf2ac4a",
  sharedSecret: "0bbe78490412b4bbea4812666f7916932b828bba79942424abb65244930d69a7",
  keyScheduleContext:
    "00431df6cd95e11ff49d7013563baf7f11588c75a6611ee2a4404a49306ae4cfc5b69c5718a60cc5876c358d3f7fc31ddb598503f67be58ea1e798c0bb19eb9796",
  key: "ad2744de8e17f4ebba575b3f5f5a8fa1f69c2a07f6e7500bc60ca6e3e3ec1c91",
  baseNonce: "5c4d98150661b848853b547f",
  encryptions: [
    {
      pt: "4265617574792069732074727574682c20747275746820626561757479",
      aad: "436f756e742d30",
      nonce: "5c4d98150661b848853b547f",
      ct: "1c5250d8034ec2b784ba2cfd69dbdb8af406cfe3ff938e131f0def8c8b60b4db21993c62ce81883d2dd1b51a28",
    },
    {
      pt: "4265617574792069732074727574682c20747275746820626561757479",
      aad: "436f756e742d31",
      nonce: "5c4d98150661b848853b547e",
      ct: "6b53c051e4199c518de79594e1c4ab18b96f081549d45ce015be002090bb119e85285337cc95ba5f59992dc98c",
    },
  ],
};

describe("wire format (vectors sealed by Python)", () => {
  it("this Node has WebCrypto X25519 (the default path)", async () => {
    assert.equal(await hasWebCryptoX25519(), true);
  });

  it("seals as RFC 9180's test vector A.2.1: encapsulation (WebCrypto X25519), key schedule, AEAD", async () => {
    const v = RFC9180_A21;
    // The ephemeral key pair of the vector (PKCS#8 of an X25519 private key: a fixed prefix).
    const privateKey = await crypto.subtle.importKey("pkcs8", bytes(`302e020100300506032b656e04220420${v.skEm}`), { name: "X25519" }, false, ["deriveBits"]);
    const publicKey = await crypto.subtle.importKey("raw", bytes(v.pkEm), { name: "X25519" }, true, []);
    const encap = await webCryptoEncapsulator(bytes(v.pkRm), { privateKey, publicKey });
    const { enc, sharedSecret } = await encap();
    assert.equal(hex(enc), v.enc);
    assert.equal(hex(sharedSecret), v.sharedSecret);
    const context = await keyScheduleContext(bytes(v.info));
    assert.equal(hex(context), v.keyScheduleContext);
    const { key, baseNonce } = await keySchedule(sharedSecret, context);
    assert.equal(hex(key), v.key);
    assert.equal(hex(baseNonce), v.baseNonce);
    for (const e of v.encryptions) assert.equal(hex(await aeadSeal(key, bytes(e.nonce), bytes(e.pt), bytes(e.aad))), e.ct);
    // The pure-JS KEM (the fallback) from the vector's ikmE: the same encapsulation.
    const kem = new DhkemX25519HkdfSha256();
    const pure = await kem.encap({ recipientPublicKey: await kem.deserializePublicKey(bytes(v.pkRm)), ekm: bytes(v.ikmE).buffer });
    assert.equal(hex(new Uint8Array(pure.enc)), v.enc);
    assert.equal(hex(new Uint8Array(pure.sharedSecret)), v.sharedSecret);
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

  it("refuses to seal to a low-order public key (an all-zero shared secret), with either KEM", async () => {
    for (const kem of KEMS) {
      const sealer = await MessageSealer.create(new Uint8Array(32), vectors.task_id, 5, kem);
      await assert.rejects(sealer.seal(1), /all-zero X25519 shared secret/, kem);
    }
  });

  it("strict base64", () => {
    assert.throws(() => base64Decode("AAA", 2), /not valid base64/);
    assert.throws(() => base64Decode("AA==", 2), /1 bytes, expected 2/);
    assert.throws(() => base64Decode("A A=", 2), /not valid base64/);
  });
});
