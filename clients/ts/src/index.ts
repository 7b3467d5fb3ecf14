/**
 * @shuffledp/client: shuffledp's client for browsers and Node.
 *
 * ```ts
 * import { loadTask, Client } from "@shuffledp/client";
 * const task = await loadTask(taskJsonText, { expectedDigest: PINNED_DIGEST });
 * const client = await Client.create(task, { shufflerUrl: "https://shuffler.example" });
 * await client.submit("blue");
 * ```
 */
import { describeError } from "./client.js";
import { TaskError } from "./errors.js";
import { type Task, checkDigest, parseTask, taskFromObject } from "./task.js";

export {
  InputError,
  MessageBoundError,
  SecureContextError,
  ShuffleDPClientError,
  ShufflerUnavailableError,
  SubmissionRejectedError,
  TaskError,
  WireError,
} from "./errors.js";
export {
  Client,
  DEFAULT_MAX_REQUEST_BYTES,
  MAX_RETRY_AFTER_SECONDS,
  SUBMISSIONS_FORMAT,
  describeError,
  newId,
  requestBody,
  retryAfterSeconds,
  submissionJson,
} from "./client.js";
export type { Accepted, ClientOptions, Submission } from "./client.js";
export { CryptoRandom, LazyUniform, Random } from "./random.js";
export type { RandomSource } from "./random.js";
export { PROTOCOLS, correlatedMessages, flipMessages, krrMessage, krrProbabilities, negativeBinomialClusters } from "./randomizers.js";
export type { ClientProtocol, Parameters } from "./randomizers.js";
export { MAX_INDEX, TASK_SCHEMA, checkDigest, clientProtocol, indexOf, parseTask, supportedProtocols, taskDigest, taskFromObject } from "./task.js";
export type { Task } from "./task.js";
export { CIPHERTEXT_LENGTH, MessageSealer, PLAINTEXT_LENGTH, WIRE_VERSION, decodePlaintext, encodePlaintext, hasWebCryptoX25519, hpkeInfo } from "./wire.js";
export type { KemChoice } from "./wire.js";
export { base64Decode, base64Encode } from "./encoding.js";
export { schemaId, validate } from "./schema.js";
export { parseJson, pythonDumps, pythonFloatRepr } from "./json.js";

/**
 * A task from its JSON text (preferred: the digest is then exactly Python's) or a parsed
 * object, checked against `expectedDigest` when given.
 */
export async function loadTask(document: string | object, options: { expectedDigest?: string } = {}): Promise<Task> {
  const task = typeof document === "string" ? parseTask(document) : taskFromObject(document);
  if (options.expectedDigest !== undefined) await checkDigest(task, options.expectedDigest);
  return task;
}

/**
 * Fetch a task document from a URL (the shuffler's `GET /v1/tasks/{task_id}`). Without
 * `expectedDigest` this trusts the server for the analyzer's key: pin the digest.
 *
 * @param options.timeoutSeconds - give up after this long, answer included (default 10,
 *   as Python's `fetch_task`)
 * @throws TaskError if the document cannot be fetched in time, is invalid or is not the pinned one.
 */
export async function fetchTask(
  url: string,
  options: { expectedDigest?: string; fetch?: typeof fetch; timeoutSeconds?: number } = {},
): Promise<Task> {
  const fetcher = options.fetch ?? globalThis.fetch.bind(globalThis);
  const seconds = options.timeoutSeconds ?? 10;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), seconds * 1000);
  let text: string;
  let status: number;
  try {
    const response = await fetcher(url, { headers: { Accept: "application/json" }, signal: abort.signal });
    status = response.status;
    text = await response.text();
  } catch (exc) {
    const why = abort.signal.aborted ? `no answer within ${seconds} s` : describeError(exc);
    throw new TaskError(`cannot fetch the task from ${url}: ${why}`);
  } finally {
    clearTimeout(timer);
  }
  if (status < 200 || status > 299) throw new TaskError(`cannot fetch the task from ${url}: HTTP ${status}`);
  return loadTask(text, options);
}
