/**
 * Opening ciphertexts with the analyzer's private key: what the analyzer does, for tests and
 * audits in JS (the Node entry exports it; the browser bundle does not carry it).
 */
import type { CipherSuite } from "@hpke/core";
import { WireError } from "./errors.js";
import { CIPHERTEXT_LENGTH, ENCAPSULATED_KEY_LENGTH, type KemChoice, decodePlaintext, hpkeInfo, hpkeSuite } from "./wire.js";

/** Opens messages of one task (analyzer side). */
export class MessageOpener {
  private constructor(
    private readonly suite: CipherSuite,
    private readonly key: CryptoKey,
    private readonly info: Uint8Array,
    readonly domainSize: number,
  ) {}

  /** An opener for the analyzer's raw 32-byte X25519 private key. */
  static async create(privateKey: Uint8Array, taskId: string, domainSize: number, choice: KemChoice = "auto"): Promise<MessageOpener> {
    const { suite } = await hpkeSuite(choice);
    const key = await suite.kem.deserializePrivateKey(privateKey);
    return new MessageOpener(suite, key, hpkeInfo(taskId), domainSize);
  }

  /** The plaintext of one ciphertext. @throws WireError if it does not decrypt. */
  async openPlaintext(ciphertext: Uint8Array): Promise<Uint8Array> {
    if (ciphertext.length !== CIPHERTEXT_LENGTH) {
      throw new WireError(`ciphertext has ${ciphertext.length} bytes, not ${CIPHERTEXT_LENGTH}`);
    }
    try {
      const plaintext = await this.suite.open(
        { recipientKey: this.key, enc: ciphertext.slice(0, ENCAPSULATED_KEY_LENGTH), info: this.info },
        ciphertext.slice(ENCAPSULATED_KEY_LENGTH),
      );
      return new Uint8Array(plaintext);
    } catch {
      throw new WireError("ciphertext does not decrypt under this task's key");
    }
  }

  /** The index one ciphertext carries. */
  async open(ciphertext: Uint8Array): Promise<number> {
    return decodePlaintext(await this.openPlaintext(ciphertext), this.domainSize);
  }
}
