/**
 * The client: randomize one user's value, seal every message, post to the shuffler, as
 * service/client.py's `Client` does.
 *
 * A submission has a random 128-bit id (32 hex digits) and, when the task admits one
 * submission per client, the client's token. Before anything is sealed the message count is
 * checked against the task's `max_messages_per_submission` (an honest client exceeds it
 * with probability at most 1e-30: that user then does not submit).
 *
 * Retries. A network error, a timeout, HTTP 429 or a 5xx is retried with exponential
 * backoff and jitter, resending the SAME submission ids and ciphertexts (never randomizing
 * again): the shuffler stores a submission id once, so a user is counted once whatever the
 * network did. An answer's `Retry-After` (in seconds; the services send 1 with a 503) makes
 * the pause at least that long, up to {@link MAX_RETRY_AFTER_SECONDS}. Other 4xx answers are
 * final ({@link SubmissionRejectedError}).
 *
 * Trust. The client encrypts to the public key in the task document it is given: ship the
 * document with the client, or pin its digest (`expectedDigest`).
 */
import { base64Encode, hex } from "./encoding.js";
import { InputError, ShufflerUnavailableError, SubmissionRejectedError } from "./errors.js";
import { Random, type RandomSource } from "./random.js";
import { type Task, checkDigest, clientProtocol, indexOf } from "./task.js";
import { type KemChoice, MessageSealer } from "./wire.js";

/** The longest pause a `Retry-After` answer can impose on one retry (Python's too). */
export const MAX_RETRY_AFTER_SECONDS = 30;

/**
 * The pause an answer's `Retry-After` asks for (RFC 9110 §10.2.3), in seconds: its
 * delay-seconds form (digits), at most {@link MAX_RETRY_AFTER_SECONDS}; 0 when it is absent
 * or another form (an HTTP date: the services never send one).
 */
export function retryAfterSeconds(value: string | null): number {
  if (value === null || !/^[0-9]+$/.test(value)) return 0;
  return Math.min(Number(value), MAX_RETRY_AFTER_SECONDS);
}

/** `format` of a submissions request (service/shuffler.py's SUBMISSIONS_FORMAT). */
export const SUBMISSIONS_FORMAT = "shuffledp-submissions/1";
/** The shuffler's default request body limit (service/shuffler.py's DEFAULT_MAX_BODY_BYTES). */
export const DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024;

/** One user's submission as the client built it. */
export interface Submission {
  /** The idempotency key: 32 lowercase hex digits. */
  readonly submissionId: string;
  /** The sealed messages, as sent (53 bytes each). */
  readonly ciphertexts: readonly Uint8Array[];
  /** The plaintext message indices: they stay on the device (for tests and audits only). */
  readonly messages: readonly number[];
  /** The client token, if the task wants one. */
  readonly token?: string;
}

/** The shuffler's answer to an accepted request. */
export interface Accepted {
  readonly status: string;
  readonly submission_ids?: readonly string[];
  readonly [key: string]: unknown;
}

export interface ClientOptions {
  /** The shuffler's base URL (`https://host:port`). */
  readonly shufflerUrl: string;
  /** The client token, when the task admits one submission per client. */
  readonly token?: string;
  /** Expected SHA-256 of the task (hex): refuse any other task. */
  readonly expectedDigest?: string;
  /** Randomness of the randomizer (default: `crypto.getRandomValues`). Tests only. */
  readonly random?: RandomSource;
  /** Give up retrying after this many seconds (default 60). */
  readonly retrySeconds?: number;
  /** Seconds per HTTP attempt (default 30). */
  readonly timeoutSeconds?: number;
  /** Largest body {@link Client.requests} groups submissions into (default 4 MiB). */
  readonly maxRequestBytes?: number;
  /** The fetch to use (default `globalThis.fetch`). */
  readonly fetch?: typeof fetch;
  /** Which X25519 implementation seals (default: WebCrypto's where available). */
  readonly kem?: KemChoice;
}

/** The JSON of one submission in a request. */
export function submissionJson(submission: Submission): Record<string, unknown> {
  const item: Record<string, unknown> = {
    submission_id: submission.submissionId,
    ciphertexts: submission.ciphertexts.map(base64Encode),
  };
  if (submission.token !== undefined) item.token = submission.token;
  return item;
}

/** The body of one request carrying `submissions`. */
export function requestBody(submissions: readonly Submission[]): string {
  return JSON.stringify({ format: SUBMISSIONS_FORMAT, submissions: submissions.map(submissionJson) });
}

/** A new random 128-bit id: 32 lowercase hex digits (from crypto.getRandomValues). */
export function newId(): string {
  return hex(globalThis.crypto.getRandomValues(new Uint8Array(16)));
}

/** Wait `seconds`, or reject with `signal`'s reason once it aborts. */
const sleep = (seconds: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, seconds * 1000);
    signal?.addEventListener("abort", () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });

/** What went wrong with a request, with its cause (Node's fetch says "fetch failed" and puts why in `cause`). */
export function describeError(exc: unknown): string {
  const { name, message, cause } = exc as Error & { cause?: { message?: string; code?: string } };
  const why = cause?.message ?? cause?.code;
  return `${name}: ${message}${why === undefined ? "" : ` (${why}${cause?.code !== undefined && cause.code !== why ? `, ${cause.code}` : ""})`}`;
}

/** Submits users' values for one task to a shuffler. */
export class Client {
  readonly url: string;
  readonly maxRequestBytes: number;
  // ES private fields (not TypeScript's `private`): the bundle minifies their names.
  readonly #random: Random;
  readonly #retrySeconds: number;
  readonly #timeoutSeconds: number;
  readonly #fetcher: typeof fetch;
  readonly #sealer: MessageSealer;
  readonly #options: ClientOptions;

  private constructor(
    readonly task: Task,
    sealer: MessageSealer,
    options: ClientOptions,
  ) {
    this.#sealer = sealer;
    this.#options = options;
    this.url = `${options.shufflerUrl.replace(/\/+$/, "")}/v1/tasks/${task.taskId}/submissions`;
    this.#random = new Random(options.random);
    this.#retrySeconds = options.retrySeconds ?? 60;
    this.#timeoutSeconds = options.timeoutSeconds ?? 30;
    this.maxRequestBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
    this.#fetcher = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /**
   * A client of `task` (checked against `expectedDigest` when given).
   *
   * @throws TaskError if the digest differs; SecureContextError on an insecure page.
   */
  static async create(task: Task, options: ClientOptions): Promise<Client> {
    if (!/^https?:\/\//.test(options.shufflerUrl)) {
      throw new InputError(`the shuffler's URL must be http(s)://, got ${JSON.stringify(options.shufflerUrl)}`);
    }
    if (options.expectedDigest !== undefined) await checkDigest(task, options.expectedDigest);
    const sealer = await MessageSealer.create(task.publicKey, task.taskId, task.messageDomainSize, options.kem ?? "auto");
    return new Client(task, sealer, options);
  }

  /** Which X25519 implementation seals. */
  get kem(): "webcrypto" | "pure-js" {
    return this.#sealer.kem;
  }

  /**
   * Randomize and seal one user's value (a domain label); nothing is sent.
   *
   * @throws TaskError if the value is not in the domain; InputError if the task wants a
   *   token and none is given; MessageBoundError if the randomizer drew more messages than
   *   the task's bound (the user does not submit).
   */
  async prepare(value: string, token: string | undefined = this.#options.token): Promise<Submission> {
    const task = this.task;
    const index = indexOf(task, value);
    if (task.oneSubmissionPerClient && token === undefined) {
      throw new InputError("this task admits one submission per client: a client token is needed");
    }
    const messages = clientProtocol(task).randomize(index, task.domain.length, task.parameters, this.#random, task.maxMessagesPerSubmission);
    const ciphertexts = await this.#sealer.sealAll(messages);
    const submission: Submission = { submissionId: newId(), ciphertexts, messages };
    return token === undefined ? submission : { ...submission, token };
  }

  /** Randomize and seal many users' values, each as its own user (own randomness, id, token). */
  async prepareMany(values: readonly string[], tokens?: readonly string[]): Promise<Submission[]> {
    if (tokens !== undefined && tokens.length !== values.length) throw new InputError("give one token per value");
    const out: Submission[] = [];
    for (let i = 0; i < values.length; i++) out.push(await this.prepare(values[i] as string, tokens === undefined ? this.#options.token : tokens[i]));
    return out;
  }

  /**
   * Group submissions, in order, into requests of at most `perRequest` submissions and
   * {@link maxRequestBytes} bytes (a single larger submission goes alone).
   */
  requests(submissions: readonly Submission[], perRequest: number): Submission[][] {
    if (!Number.isInteger(perRequest) || perRequest < 1) throw new InputError(`perRequest must be an integer >= 1, got ${perRequest}`);
    const envelope = requestBody([]).length; // with k items: envelope + Σ(item + 1) − 1
    const groups: Submission[][] = [];
    let size = 0;
    for (const submission of submissions) {
      const item = JSON.stringify(submissionJson(submission)).length + 1;
      const group = groups[groups.length - 1];
      if (group === undefined || group.length >= perRequest || envelope + size + item - 1 > this.maxRequestBytes) {
        groups.push([submission]);
        size = item;
      } else {
        group.push(submission);
        size += item;
      }
    }
    return groups;
  }

  /**
   * Post prepared submissions in one request, retrying transient failures with the same body.
   *
   * @param options.signal - stops the request in flight (and any retry) when it aborts: the
   *   submissions may or may not be stored; post them again (the same ids) to be sure.
   * @throws SubmissionRejectedError on a final refusal; ShufflerUnavailableError if the
   *   retries ran out; the signal's reason once it aborts.
   */
  async post(submissions: readonly Submission[], options: { signal?: AbortSignal } = {}): Promise<Accepted> {
    const { signal } = options;
    const body = requestBody(submissions);
    const deadline = Date.now() + this.#retrySeconds * 1000;
    let attempt = 0;
    for (;;) {
      signal?.throwIfAborted();
      let problem: string;
      let retryAfter = 0;
      const abort = new AbortController();
      const stop = (): void => abort.abort();
      signal?.addEventListener("abort", stop);
      const timer = setTimeout(stop, this.#timeoutSeconds * 1000);
      try {
        const response = await this.#fetcher(this.url, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body,
          signal: abort.signal,
        });
        const text = await response.text();
        if (response.ok) return JSON.parse(text) as Accepted;
        if (response.status !== 429 && response.status < 500) {
          let reason = "unknown";
          let detail = text.slice(0, 200);
          try {
            const info = JSON.parse(text) as { reason?: unknown; error?: unknown };
            reason = String(info.reason);
            detail = String(info.error);
          } catch {
            // not JSON: keep the text
          }
          throw new SubmissionRejectedError(response.status, reason, detail);
        }
        problem = `HTTP ${response.status}`;
        retryAfter = retryAfterSeconds(response.headers.get("retry-after"));
      } catch (exc) {
        if (exc instanceof SubmissionRejectedError) throw exc;
        signal?.throwIfAborted();
        problem = describeError(exc);
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener("abort", stop);
      }
      attempt += 1;
      const pause = Math.max(retryAfter, Math.min(5, 0.05 * 2 ** attempt) * (0.5 + this.#random.unitInterval() / 2));
      if (Date.now() + pause * 1000 > deadline) {
        throw new ShufflerUnavailableError(`shuffler at ${this.url} unavailable after ${attempt} attempts (${problem})`);
      }
      await sleep(pause, signal);
    }
  }

  /**
   * Randomize, seal and post one user's value; resolve once the shuffler stored it durably.
   * `options.signal` as for {@link post}.
   */
  async submit(value: string, options: { signal?: AbortSignal } = {}): Promise<Submission> {
    const submission = await this.prepare(value);
    await this.post([submission], options);
    return submission;
  }
}
