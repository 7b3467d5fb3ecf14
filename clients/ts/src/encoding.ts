/** Bytes as text: strict standard base64 (as wire.b64decode_exact), hex, SHA-256. */
import { SecureContextError, WireError } from "./errors.js";

const B64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Standard base64 with padding. */
export function base64Encode(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i] as number);
  return btoa(binary);
}

/** Decode strict standard base64 of exactly `length` bytes (when given). */
export function base64Decode(text: string, length?: number, what = "value"): Uint8Array {
  if (!B64.test(text)) throw new WireError(`${what} is not valid base64`);
  const binary = atob(text);
  if (length !== undefined && binary.length !== length) {
    throw new WireError(`${what} has ${binary.length} bytes, expected ${length}`);
  }
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/** Lowercase hex. */
export function hex(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i++) out += (bytes[i] as number).toString(16).padStart(2, "0");
  return out;
}

/**
 * WebCrypto's SubtleCrypto, or a clear error where the page is not a secure context
 * (browsers expose `crypto.subtle` only to HTTPS pages and http://localhost).
 */
export function subtle(): SubtleCrypto {
  const g = globalThis as { isSecureContext?: boolean; crypto?: Crypto };
  if (g.isSecureContext === false || g.crypto?.subtle === undefined) {
    throw new SecureContextError(
      "the shuffledp client needs a secure context (a page served over HTTPS, or from " +
        "http://localhost / 127.0.0.1): this page is not one, so WebCrypto (crypto.subtle) is " +
        "unavailable and no message can be sealed",
    );
  }
  return g.crypto.subtle;
}

/** SHA-256 of UTF-8 text, hex. */
export async function sha256Hex(text: string): Promise<string> {
  const digest = await subtle().digest("SHA-256", new TextEncoder().encode(text));
  return hex(new Uint8Array(digest));
}
