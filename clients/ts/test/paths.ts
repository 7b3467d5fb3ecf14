/** Where things are, from the compiled tests (build/test/*.js). */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** clients/ts/ */
export const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** The repository root (the Python package is under src/shuffledp). */
export const REPOSITORY = join(PACKAGE, "..", "..");

export interface WireVectors {
  private_key: string;
  public_key: string;
  task_id: string;
  info_hex: string;
  sealed: { index: number; domain_size: number; plaintext_hex: string; ciphertext: string }[];
  other_task: { task_id: string; index: number; ciphertext: string };
  tasks: { name: string; text: string; canonical: string; digest: string }[];
}

/** test/vectors/wire.json, written by scripts/make_wire_vectors.py (Python). */
export function wireVectors(): WireVectors {
  return JSON.parse(readFileSync(join(PACKAGE, "test", "vectors", "wire.json"), "utf8")) as WireVectors;
}
