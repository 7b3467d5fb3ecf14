/**
 * The message format of service/wire.py: one bin index per message, HPKE-sealed to the analyzer.
 *
 * Plaintext (format version 1), always 5 bytes: version (1) ‖ index (uint32, big-endian).
 * Every message is sealed on its own with HPKE base mode (RFC 9180), suite X25519 /
 * HKDF-SHA256 / ChaCha20-Poly1305, info = "shuffledp/1 task=<task_id>"; the ciphertext is
 * enc (32 bytes) ‖ ct (5 + 16 bytes) = 53 bytes, standard base64 in JSON (72 characters).
 *
 * Sealing is RFC 9180's SetupBaseS and one Seal (sequence number 0) written out over
 * WebCrypto (X25519, HKDF-SHA256) and @hpke/chacha20poly1305's AEAD: the RFC's test vector
 * for this suite, Python's opener and @hpke/core's (the Node entry's MessageOpener) check
 * it. The KEM is WebCrypto's X25519 where the runtime has it (Node >= 20, recent browsers),
 * else the pure-JS DHKEM of @hpke/dhkem-x25519, loaded only then (its own file in the bundle).
 */
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

/** Bytes WebCrypto takes (not over a SharedArrayBuffer). */
type Bytes = Uint8Array<ArrayBuffer>;

const utf8 = (text: string): Bytes => new TextEncoder().encode(text);

function concat(...parts: readonly Uint8Array[]): Bytes {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

const EMPTY = new Uint8Array(0);
/** suite_id of the KEM, "KEM" ‖ I2OSP(0x0020, 2), and of the suite, "HPKE" ‖ kem ‖ kdf 0x0001 ‖ aead 0x0003. */
const KEM_SUITE = concat(utf8("KEM"), Uint8Array.of(0, 0x20));
const HPKE_SUITE = concat(utf8("HPKE"), Uint8Array.of(0, 0x20, 0, 1, 0, 3));

/** The HKDF key of LabeledExtract's input: "HPKE-v1" ‖ suite_id ‖ label ‖ ikm (RFC 9180 §4). */
function labeledIkm(suite: Bytes, label: string, ikm: Bytes): Promise<CryptoKey> {
  return subtle().importKey("raw", concat(utf8("HPKE-v1"), suite, utf8(label), ikm), "HKDF", false, ["deriveBits"]);
}

/**
 * LabeledExpand(LabeledExtract(salt, ·, ikm), label, info, length): one WebCrypto HKDF, whose
 * Expand info is I2OSP(length, 2) ‖ "HPKE-v1" ‖ suite_id ‖ label ‖ info (an empty salt is
 * HashLen zeros, as RFC 5869 says).
 */
async function labeledExpand(ikm: CryptoKey, salt: Bytes, suite: Bytes, label: string, info: Bytes, length: number): Promise<Bytes> {
  const expandInfo = concat(Uint8Array.of(0, length), utf8("HPKE-v1"), suite, utf8(label), info);
  return new Uint8Array(await subtle().deriveBits({ name: "HKDF", hash: "SHA-256", salt, info: expandInfo }, ikm, length * 8));
}

/** LabeledExtract("", label, ikm) alone: HMAC-SHA256 keyed with HashLen zeros. */
async function labeledExtract(suite: Bytes, label: string, ikm: Bytes): Promise<Bytes> {
  const key = await subtle().importKey("raw", new Uint8Array(32), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await subtle().sign("HMAC", key, concat(utf8("HPKE-v1"), suite, utf8(label), ikm)));
}

/** The analyzer's key is a low-order point: no message can be sealed to it (nor by Python). */
const lowOrder = (): WireError => new WireError("the public key gives an all-zero X25519 shared secret (a low-order point): nothing can be sealed to it");

/** An encapsulation: enc (the ephemeral public key) and the KEM's shared secret. */
export interface Encapsulation {
  readonly enc: Bytes;
  readonly sharedSecret: Bytes;
}

/**
 * DHKEM(X25519, HKDF-SHA256)'s Encap to `publicKey` with WebCrypto: a fresh ephemeral key
 * pair each call (`ephemeral`: a given one, for the RFC's test vector only).
 */
export async function webCryptoEncapsulator(publicKey: Bytes, ephemeral?: CryptoKeyPair): Promise<() => Promise<Encapsulation>> {
  const recipient = await subtle().importKey("raw", publicKey, { name: "X25519" }, true, []);
  return async () => {
    const pair = ephemeral ?? ((await subtle().generateKey({ name: "X25519" }, false, ["deriveBits"])) as CryptoKeyPair);
    const enc = new Uint8Array(await subtle().exportKey("raw", pair.publicKey));
    let dh = EMPTY;
    try {
      dh = new Uint8Array(await subtle().deriveBits({ name: "X25519", public: recipient }, pair.privateKey, 256));
    } catch {
      // an all-zero shared secret (RFC 7748 6.1), which WebCrypto refuses
    }
    if (dh.length !== 32 || dh.every((b) => b === 0)) throw lowOrder();
    const ikm = await labeledIkm(KEM_SUITE, "eae_prk", dh);
    return { enc, sharedSecret: await labeledExpand(ikm, EMPTY, KEM_SUITE, "shared_secret", concat(enc, publicKey), 32) };
  };
}

/** The same Encap with the pure-JS X25519 of @hpke/dhkem-x25519 (loaded now). */
async function pureJsEncapsulator(publicKey: Bytes): Promise<() => Promise<Encapsulation>> {
  const kem = new (await import("@hpke/dhkem-x25519")).DhkemX25519HkdfSha256();
  const recipient = await kem.deserializePublicKey(publicKey);
  return async () => {
    const { enc, sharedSecret } = await kem.encap({ recipientPublicKey: recipient }).catch(() => {
      throw lowOrder();
    });
    return { enc: new Uint8Array(enc), sharedSecret: new Uint8Array(sharedSecret) };
  };
}

/** key_schedule_context of base mode: 0 ‖ LabeledExtract("", "psk_id_hash", "") ‖ LabeledExtract("", "info_hash", info). */
export async function keyScheduleContext(info: Bytes): Promise<Bytes> {
  return concat(Uint8Array.of(0), await labeledExtract(HPKE_SUITE, "psk_id_hash", EMPTY), await labeledExtract(HPKE_SUITE, "info_hash", info));
}

/** The AEAD key and base nonce of base mode (secret = LabeledExtract(shared_secret, "secret", "")). */
export async function keySchedule(sharedSecret: Bytes, context: Bytes): Promise<{ key: Bytes; baseNonce: Bytes }> {
  const secret = await labeledIkm(HPKE_SUITE, "secret", EMPTY);
  return {
    key: await labeledExpand(secret, sharedSecret, HPKE_SUITE, "key", context, 32),
    baseNonce: await labeledExpand(secret, sharedSecret, HPKE_SUITE, "base_nonce", context, 12),
  };
}

/** ChaCha20-Poly1305 sealing (the nonce of sequence number 0 is the base nonce). */
export async function aeadSeal(key: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array, aad: Uint8Array = EMPTY): Promise<Bytes> {
  return new Uint8Array(await new Chacha20Poly1305().createEncryptionContext(key).seal(nonce, plaintext, aad));
}

/** Seals messages of one task to the analyzer's public key (client side). */
export class MessageSealer {
  private constructor(
    private readonly encap: () => Promise<Encapsulation>,
    /** key_schedule_context: the same for every message of the task. */
    private readonly context: Bytes,
    /** Distinct message indices; an index outside is refused before sealing. */
    readonly domainSize: number,
    /** Which X25519 seals. */
    readonly kem: "webcrypto" | "pure-js",
  ) {}

  /**
   * A sealer for a task's key, id and message domain, with WebCrypto's X25519 where there
   * is one (`choice` "auto"), or the one `choice` names.
   *
   * @throws SecureContextError on a page that is not a secure context; WireError for
   *   "webcrypto" where WebCrypto has no X25519.
   */
  static async create(publicKey: Uint8Array, taskId: string, domainSize: number, choice: KemChoice = "auto"): Promise<MessageSealer> {
    if (publicKey.length !== 32) throw new WireError(`public key has ${publicKey.length} bytes, expected 32`);
    const key = concat(publicKey); // a copy of its own
    const native = choice !== "pure-js" && (await hasWebCryptoX25519());
    if (choice === "webcrypto" && !native) throw new WireError("this runtime's WebCrypto has no X25519");
    const encap = native ? await webCryptoEncapsulator(key) : await pureJsEncapsulator(key);
    return new MessageSealer(encap, await keyScheduleContext(concat(hpkeInfo(taskId))), domainSize, native ? "webcrypto" : "pure-js");
  }

  /** The 53-byte ciphertext of one message (a fresh encapsulation each). */
  async seal(index: number): Promise<Uint8Array> {
    const plaintext = encodePlaintext(index, this.domainSize);
    const { enc, sharedSecret } = await this.encap();
    const { key, baseNonce } = await keySchedule(sharedSecret, this.context);
    const out = concat(enc, await aeadSeal(key, baseNonce, plaintext));
    if (out.length !== CIPHERTEXT_LENGTH) throw new WireError(`ciphertext has ${out.length} bytes, not ${CIPHERTEXT_LENGTH}`);
    return out;
  }

  /** Seal every message separately, in order. */
  async sealAll(indices: readonly number[]): Promise<Uint8Array[]> {
    return Promise.all(indices.map((index) => this.seal(index)));
  }
}
