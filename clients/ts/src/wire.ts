/**
 * The message format of service/wire.py: one bin index per message, HPKE-sealed to the analyzer.
 *
 * Plaintext (format version 1), always 5 bytes: version (1) ‖ index (uint32, big-endian).
 * Every message is sealed on its own with HPKE base mode (RFC 9180), suite X25519 /
 * HKDF-SHA256 / ChaCha20-Poly1305, info = "shuffledp/1 task=<task_id>"; the ciphertext is
 * enc (32 bytes) ‖ ct (5 + 16 bytes) = 53 bytes, standard base64 in JSON (72 characters).
 *
 * The KEM is WebCrypto's X25519 where the runtime has it (Node ≥ 20, recent browsers), else
 * the pure-JS one of @hpke/dhkem-x25519, loaded only then (its own chunk in the bundle).
 */
import { CipherSuite, DhkemX25519HkdfSha256, HkdfSha256, type KemInterface } from "@hpke/core";
import { Chacha20Poly1305 } from "@hpke/chacha20poly1305";
import { subtle } from "./encoding.js";
import { WireError } from "./errors.js";

/** Version byte of the plaintext, also bound into the HPKE info. */
export const WIRE_VERSION = 1;
/** Bytes of one plaintext. */
export const PLAINTEXT_LENGTH = 5;
/** Bytes of the encapsulated key starting every ciphertext. */
export const ENCAPSULATED_KEY_LENGTH = 32;
/** Bytes of one ciphertext: encapsulated key + plaintext + Poly1305 tag. */
export const CIPHERTEXT_LENGTH = ENCAPSULATED_KEY_LENGTH + PLAINTEXT_LENGTH + 16;

/** Which X25519 implementation seals: WebCrypto's, the pure-JS one, or the first available. */
export type KemChoice = "auto" | "webcrypto" | "pure-js";

/** The HPKE info of a task: the format version and the task id. */
export function hpkeInfo(taskId: string): Uint8Array {
  return new TextEncoder().encode(`shuffledp/${WIRE_VERSION} task=${taskId}`);
}

/** The 5-byte plaintext of a message carrying `index` of a `domainSize`-message domain. */
export function encodePlaintext(index: number, domainSize: number): Uint8Array {
  if (!Number.isInteger(index) || index < 0 || index >= domainSize || index > 0xffffffff) {
    throw new WireError(`message index ${index} is outside the domain [0, ${domainSize})`);
  }
  const out = new Uint8Array(PLAINTEXT_LENGTH);
  out[0] = WIRE_VERSION;
  new DataView(out.buffer).setUint32(1, index, false);
  return out;
}

/** The index a plaintext carries. @throws WireError on a wrong length, version or index. */
export function decodePlaintext(plaintext: Uint8Array, domainSize: number): number {
  if (plaintext.length !== PLAINTEXT_LENGTH) {
    throw new WireError(`plaintext has ${plaintext.length} bytes, expected ${PLAINTEXT_LENGTH}`);
  }
  if (plaintext[0] !== WIRE_VERSION) throw new WireError(`message format version ${plaintext[0]}, expected ${WIRE_VERSION}`);
  const index = new DataView(plaintext.buffer, plaintext.byteOffset).getUint32(1, false);
  if (index >= domainSize) throw new WireError(`message index ${index} is outside the domain [0, ${domainSize})`);
  return index;
}

let webCryptoX25519: Promise<boolean> | undefined;

/** Whether WebCrypto implements X25519 here (asked once). */
export function hasWebCryptoX25519(): Promise<boolean> {
  const crypto = subtle(); // a clear error outside a secure context
  webCryptoX25519 ??= crypto.generateKey({ name: "X25519" }, false, ["deriveBits"]).then(
    () => true,
    () => false,
  );
  return webCryptoX25519;
}

/** The DHKEM(X25519, HKDF-SHA256) of `choice`. */
export async function x25519Kem(choice: KemChoice = "auto"): Promise<{ kem: KemInterface; kind: "webcrypto" | "pure-js" }> {
  if (choice !== "pure-js" && (await hasWebCryptoX25519())) return { kem: new DhkemX25519HkdfSha256(), kind: "webcrypto" };
  if (choice === "webcrypto") throw new WireError("this runtime's WebCrypto has no X25519");
  const pure = await import("@hpke/dhkem-x25519");
  return { kem: new pure.DhkemX25519HkdfSha256(), kind: "pure-js" };
}

/** The task's HPKE suite (X25519 / HKDF-SHA256 / ChaCha20-Poly1305) with the KEM of `choice`. */
export async function hpkeSuite(choice: KemChoice = "auto"): Promise<{ suite: CipherSuite; kind: "webcrypto" | "pure-js" }> {
  const { kem, kind } = await x25519Kem(choice);
  return { suite: new CipherSuite({ kem, kdf: new HkdfSha256(), aead: new Chacha20Poly1305() }), kind };
}

/** Seals messages of one task to the analyzer's public key (client side). */
export class MessageSealer {
  readonly #suite: CipherSuite;
  readonly #key: CryptoKey;
  readonly #info: Uint8Array;

  private constructor(
    suite: CipherSuite,
    key: CryptoKey,
    info: Uint8Array,
    /** Distinct message indices; an index outside is refused before sealing. */
    readonly domainSize: number,
    /** Which X25519 seals. */
    readonly kem: "webcrypto" | "pure-js",
  ) {
    this.#suite = suite;
    this.#key = key;
    this.#info = info;
  }

  /**
   * A sealer for a task's key, id and message domain.
   *
   * @throws SecureContextError on a page that is not a secure context.
   */
  static async create(publicKey: Uint8Array, taskId: string, domainSize: number, choice: KemChoice = "auto"): Promise<MessageSealer> {
    if (publicKey.length !== 32) throw new WireError(`public key has ${publicKey.length} bytes, expected 32`);
    const { suite, kind } = await hpkeSuite(choice);
    const key = await suite.kem.deserializePublicKey(publicKey);
    return new MessageSealer(suite, key, hpkeInfo(taskId), domainSize, kind);
  }

  /** The 53-byte ciphertext of one message (a fresh encapsulation each). */
  async seal(index: number): Promise<Uint8Array> {
    const plaintext = encodePlaintext(index, this.domainSize);
    const { enc, ct: ciphertext } = await this.#suite.seal({ recipientPublicKey: this.#key, info: this.#info }, plaintext);
    const out = new Uint8Array(CIPHERTEXT_LENGTH);
    out.set(new Uint8Array(enc), 0);
    const ct = new Uint8Array(ciphertext);
    if (enc.byteLength !== ENCAPSULATED_KEY_LENGTH || ct.length !== CIPHERTEXT_LENGTH - ENCAPSULATED_KEY_LENGTH) {
      throw new WireError(`ciphertext has ${enc.byteLength + ct.length} bytes, not ${CIPHERTEXT_LENGTH}`);
    }
    out.set(ct, ENCAPSULATED_KEY_LENGTH);
    return out;
  }

  /** Seal every message separately, in order. */
  async sealAll(indices: readonly number[]): Promise<Uint8Array[]> {
    return Promise.all(indices.map((index) => this.seal(index)));
  }
}
