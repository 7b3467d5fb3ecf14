#!/usr/bin/env node
/**
 * `shuffledp-client submit`: the Python CLI's `shuffledp client submit`, in Node.
 *
 *   shuffledp-client submit --task FILE|URL [--task-digest HEX] --shuffler URL [--ca-file PEM]
 *       (--value LABEL | --values-file FILE | --resend FILE)
 *       [--token T | --token-file F | --tokens-file F]
 *       [--per-request K] [--first-line N] [--retry-seconds S] [--quiet]
 *
 * `--value` submits one user's value, as a device does. `--values-file` submits many users
 * from one process (load tests, demos): every line is its own user with its own fresh
 * randomness, submission id and (with `--tokens-file`) client token, `--per-request`
 * submissions per HTTP request. Values are checked against the domain before anything is
 * sent. Stdout gets one receipt per stored submission (schema `submission`, one JSON object a
 * line, as Python writes it); errors go to stderr with exit code 2. `--ca-file` trusts a PEM
 * file's CA certificates, in place of Node's, for an https:// shuffler and --task URL.
 *
 * Ctrl-C, as in Python: the request in flight is abandoned at once; every request the
 * shuffler acknowledged has its receipts written, and one line says which lines were stored,
 * which were in flight and which were not sent. A request in flight may or may not have been
 * stored: its submissions are saved as sent (ids, ciphertexts, tokens) in a file of mode 0600
 * in the current directory, and `--resend FILE` posts exactly them again, which cannot count
 * anyone twice (the shuffler stores a submission id once and answers a known one as stored);
 * `--first-line N` then resumes with the lines not sent. Exit code 130.
 */
import { X509Certificate } from "node:crypto";
import { closeSync, fchmodSync, fstatSync, fsyncSync, openSync, readFileSync, readlinkSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import { Client, SUBMISSIONS_FORMAT, type Submission, requestBody } from "./client.js";
import { base64Decode } from "./encoding.js";
import { ShuffleDPClientError } from "./errors.js";
import { fetchWithCa } from "./https.js";
import { readTask } from "./node.js";
import { schemaId } from "./schema.js";
import type { Task } from "./task.js";
import { CIPHERTEXT_LENGTH } from "./wire.js";

const PROGRAM = "shuffledp-client";
const DEFAULT_PER_REQUEST = 100;
/** Exit code of a run stopped by Ctrl-C (128 + SIGINT). */
const INTERRUPTED = 130;
const USAGE = `usage: ${PROGRAM} submit --task FILE|URL [--task-digest HEX] --shuffler URL [--ca-file PEM]
       (--value LABEL | --values-file FILE | --resend FILE)
       [--token T | --token-file F | --tokens-file F]
       [--per-request K] [--first-line N] [--retry-seconds S] [--quiet]

Randomize a value (or every line of a file, each its own user) locally, seal every message
to the analyzer's key (HPKE) and submit it to the shuffler; one receipt per submission on
stdout. --task FILE pins the analyzer's key; a URL trusts the shuffler for it unless
--task-digest pins the task's SHA-256. --ca-file: the CA certificates an https:// shuffler's
certificate must chain to (in place of Node's). --resend FILE posts again, exactly as sent,
the submissions an interrupted run saved as in flight (the same ids: nobody counts twice).`;

class UsageError extends Error {}

interface Options {
  task?: string;
  "task-digest"?: string;
  shuffler?: string;
  "ca-file"?: string;
  value?: string;
  "values-file"?: string;
  resend?: string;
  token?: string;
  "token-file"?: string;
  "tokens-file"?: string;
  "per-request"?: string;
  "first-line"?: string;
  "retry-seconds"?: string;
  quiet?: boolean;
}

const VALUED = [
  "task",
  "task-digest",
  "shuffler",
  "ca-file",
  "value",
  "values-file",
  "resend",
  "token",
  "token-file",
  "tokens-file",
  "per-request",
  "first-line",
  "retry-seconds",
];

function parseArgs(argv: string[]): Options {
  const [command, ...rest] = argv;
  if (command === "-h" || command === "--help") {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  if (command !== "submit") throw new UsageError(command === undefined ? "a command is required: submit" : `unknown command ${JSON.stringify(command)} (the one command is submit)`);
  const options: Record<string, string | boolean> = {};
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i] as string;
    if (arg === "-h" || arg === "--help") {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    }
    const match = /^--([a-z-]+)(?:=(.*))?$/s.exec(arg);
    if (match === null) throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`);
    const name = match[1] as string;
    if (name === "quiet" && match[2] === undefined) options.quiet = true;
    else if (VALUED.includes(name)) {
      const value = match[2] ?? rest[++i];
      if (value === undefined) throw new UsageError(`--${name} needs a value`);
      if (name in options) throw new UsageError(`--${name} is given twice`);
      options[name] = value;
    } else throw new UsageError(`unknown option --${name}`);
  }
  for (const required of ["task", "shuffler"]) if (!(required in options)) throw new UsageError(`--${required} is required`);
  const sources = ["value", "values-file", "resend"].filter((name) => name in options);
  if (sources.length !== 1) throw new UsageError("give exactly one of --value, --values-file and --resend");
  const tokens = ["token", "token-file", "tokens-file"].filter((name) => name in options);
  if (tokens.length > 1) throw new UsageError(`--${tokens[0]} and --${tokens[1]} exclude each other`);
  return options as Options;
}

function integerAtLeast(text: string | undefined, flag: string, minimum: number, fallback: number): number {
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text) || Number(text) < minimum) throw new UsageError(`${flag} must be an integer >= ${minimum}, got ${JSON.stringify(text)}`);
  return Number(text);
}

/** A secret file's content (ASCII, whitespace stripped), as service/secretfile.read_secret_file. */
function readSecretFile(path: string, what: string): string {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch {
    throw new UsageError(`${what} file ${JSON.stringify(path)} does not exist`);
  }
  if ((statSync(path).mode & 0o077) !== 0) {
    process.stderr.write(`${PROGRAM}: warning: ${what} file ${path} is readable by others; it should be 600 (chmod 600)\n`);
  }
  if (bytes.some((b) => b > 0x7f)) throw new UsageError(`${what} file ${JSON.stringify(path)} is not ASCII text`);
  const text = bytes.toString("ascii").trim();
  if (text === "") throw new UsageError(`${what} file ${JSON.stringify(path)} is empty`);
  return text;
}

/**
 * Create `path` with mode 0600 holding `text` (one line), never overwriting a file, as
 * service/secretfile.write_secret_file.
 */
function writeSecretFile(path: string, text: string): void {
  const fd = openSync(path, "wx", 0o600);
  try {
    fchmodSync(fd, 0o600); // a restrictive umask may have narrowed it
    writeSync(fd, `${text.replace(/\n+$/, "")}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * The PEM text of `--ca-file`, refused before any work if it holds no readable certificate
 * (service/client.tls_verification).
 */
function readCaFile(path: string): string {
  const refuse = (why: string): never => {
    throw new UsageError(`--ca-file ${JSON.stringify(path)}: cannot read CA certificates from it (${why})`);
  };
  let text = "";
  try {
    text = readFileSync(path, "utf8");
  } catch (exc) {
    refuse((exc as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (exc as Error).message);
  }
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[^-]*-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) refuse("no PEM certificate in it");
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch (exc) {
      refuse((exc as Error).message);
    }
  }
  return text;
}

/** The lines of --values-file ('-': stdin), each kept exactly but for its line end. */
function readValues(source: string): string[] {
  let bytes: Buffer;
  try {
    bytes = readFileSync(source === "-" ? 0 : source);
  } catch {
    throw new UsageError(`--values-file: ${JSON.stringify(source)} does not exist or is not a file`);
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes); // a BOM is dropped
  } catch {
    throw new UsageError(`--values-file: ${JSON.stringify(source)} is not UTF-8 text`);
  }
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines.map((line) => (line.endsWith("\r") ? line.slice(0, -1) : line));
}

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === "object" && !Array.isArray(value);

/**
 * The submissions of a request body an interrupted run saved, as sent (ids, ciphertexts,
 * tokens; service/client.submissions_from_body reads the same).
 */
function submissionsFromBody(text: string, what: string): Submission[] {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (exc) {
    throw new UsageError(`${what} is not JSON: ${(exc as Error).message}`);
  }
  const items = isObject(data) ? data.submissions : undefined;
  if (!isObject(data) || data.format !== SUBMISSIONS_FORMAT || !Array.isArray(items) || items.length === 0) {
    throw new UsageError(`${what} is not a submissions request (format "${SUBMISSIONS_FORMAT}" with a non-empty list of submissions)`);
  }
  return items.map((item: unknown) => {
    if (!isObject(item) || typeof item.submission_id !== "string" || !Array.isArray(item.ciphertexts) || !["string", "undefined"].includes(typeof item.token)) {
      throw new UsageError(`${what}: a submission lacks its submission_id or ciphertexts`);
    }
    const ciphertexts = item.ciphertexts.map((c: unknown) => {
      try {
        return base64Decode(c as string, CIPHERTEXT_LENGTH, "ciphertext");
      } catch (exc) {
        throw new UsageError(`${what}: ${(exc as Error).message}`);
      }
    });
    const submission: Submission = { submissionId: item.submission_id, ciphertexts, messages: [] };
    return typeof item.token === "string" ? { ...submission, token: item.token } : submission;
  });
}

/** One receipt line, as Python's json.dumps writes it (", " and ": " separators). */
function receipt(task: Task, submission: Submission): string {
  const fields: [string, unknown][] = [
    ["schema", schemaId("submission")],
    ["task_id", task.taskId],
    ["submission_id", submission.submissionId],
    ["messages", submission.ciphertexts.length],
  ];
  return `{${fields.map(([k, v]) => `${JSON.stringify(k)}: ${JSON.stringify(v)}`).join(", ")}}`;
}

const span = (first: number, last: number): string => (first === last ? `line ${first}` : `lines ${first}-${last}`);

/** Where the receipts go: the file stdout writes to, if it is one, else `stdout`. */
function stdoutName(): string {
  try {
    if (fstatSync(1).isFile()) return readlinkSync("/proc/self/fd/1");
  } catch {
    // not Linux, or no such link: say stdout
  }
  return "stdout";
}

/** Aborted by the first Ctrl-C: the request in flight and any retry stop at once. */
const stop = new AbortController();

/**
 * Which lines the shuffler acknowledged, which request is in flight, which are left (the
 * Python command's `_Sending`). Lines `first` to `storedTo` are stored (their receipts
 * written); the `inFlight` submissions are lines `storedTo + 1` onwards; the rest, up to
 * `last`, were not sent. `source` names them in messages: "lines" (a values file), "value"
 * (--value) or the resent file.
 */
class Sending {
  storedTo: number;
  inFlight: readonly Submission[] = [];
  messages = 0;
  requests = 0;

  constructor(
    readonly task: Task,
    readonly first: number,
    readonly last: number,
    readonly source = "lines",
  ) {
    this.storedTo = first - 1;
  }

  /** Post one request; once acknowledged, write its receipts (synchronously: Ctrl-C waits). */
  async post(client: Client, request: readonly Submission[]): Promise<void> {
    this.inFlight = request;
    await client.post(request, { signal: stop.signal });
    process.stdout.write(request.map((s) => `${receipt(this.task, s)}\n`).join(""));
    this.storedTo += request.length;
    this.messages += request.reduce((sum, s) => sum + s.ciphertexts.length, 0);
    this.requests += 1;
    this.inFlight = [];
  }

  get stored(): number {
    return this.storedTo - this.first + 1;
  }

  /** The error of a request, with which lines the shuffler had stored before it. */
  stopped(exc: Error): string {
    if (this.stored === 0) return `${exc.message}; nothing was stored`;
    return (
      `${exc.message}; ${span(this.first, this.storedTo)} of ${this.last} were stored (their receipts are on ` +
      `${stdoutName()}), ${span(this.storedTo + 1, this.last)} were not`
    );
  }

  /** Say what was stored, in flight and not sent, saving the in-flight submissions; 130. */
  interrupted(): number {
    process.stderr.write(`${PROGRAM}: interrupted: ${this.report().join("; ")}\n`);
    return INTERRUPTED;
  }

  private report(): string[] {
    if (this.source !== "lines") {
      if (this.inFlight.length === 0) return [this.stored > 0 ? "the submission was stored" : "nothing was sent"];
      if (this.source === "value") return [`the submission was in flight, maybe stored: ${this.saved(this.first)}`];
      return [`the submissions of ${this.source} were in flight again, maybe stored; the file still holds them: resend them with --resend ${this.source}`];
    }
    const parts = [this.stored === 0 ? "nothing was stored" : `${span(this.first, this.storedTo)} of ${this.last} stored (receipts on ${stdoutName()})`];
    let next = this.storedTo + 1;
    if (this.inFlight.length > 0) {
      const end = this.storedTo + this.inFlight.length;
      parts.push(`${span(next, end)} in flight, maybe stored: ${this.saved(end)}`);
      next = end + 1;
    }
    if (next <= this.last) parts.push(`${span(next, this.last)} not sent (resume with --first-line ${next})`);
    return parts;
  }

  /** Save the in-flight request as sent; say where and how to resend it. */
  private saved(last: number): string {
    const id = (this.inFlight[0] as Submission).submissionId.slice(0, 8);
    const path = join(process.cwd(), `shuffledp-in-flight-lines-${this.storedTo + 1}-${last}-${id}.json`);
    try {
      writeSecretFile(path, requestBody(this.inFlight));
    } catch (exc) {
      const ids = this.inFlight.map((s) => s.submissionId).join(" ");
      return `they could not be saved (${(exc as Error).message}); resending them needs these submission ids and their ciphertexts, which are lost: ${ids}`;
    }
    return `saved as sent in ${path} (resend them with --resend ${path}: the same submission ids, which the shuffler stores once)`;
  }

  summary(perRequest: number, url: string, seconds: number): string {
    const rate = seconds > 0 ? (this.stored / seconds).toFixed(0) : "inf";
    return (
      `${PROGRAM} submit: ${this.stored} submissions (${this.messages} encrypted messages) in ${this.requests} ` +
      `request${this.requests === 1 ? "" : "s"} of at most ${perRequest} to ${url}, ${seconds.toFixed(2)} s (${rate} submissions/s)`
    );
  }
}

/** The run under way once submissions start (Ctrl-C before that just ends the command). */
let sending: Sending | undefined;

async function main(argv: string[]): Promise<number> {
  const options = parseArgs(argv);
  const shuffler = options.shuffler as string;
  if (!/^https?:\/\//.test(shuffler)) throw new UsageError(`--shuffler must be an http(s):// URL, got ${JSON.stringify(shuffler)}`);
  const retrySeconds = options["retry-seconds"] === undefined ? 60 : Number(options["retry-seconds"]);
  if (!(retrySeconds >= 0)) throw new UsageError(`--retry-seconds must be a number >= 0, got ${JSON.stringify(options["retry-seconds"])}`);
  const caFile = options["ca-file"];
  const http = caFile === undefined ? {} : { fetch: fetchWithCa(readCaFile(caFile)) }; // a bad file: before any work
  const digest = options["task-digest"];
  const taskOptions = { ...http, ...(digest === undefined ? {} : { expectedDigest: digest }) };
  const started = performance.now();
  const seconds = (): number => (performance.now() - started) / 1000;

  if (options["values-file"] === undefined) {
    for (const flag of ["tokens-file", "per-request", "first-line"] as const) {
      if (options[flag] !== undefined) throw new UsageError(`--${flag} goes with --values-file, not ${options.value !== undefined ? "--value" : "--resend"}`);
    }
  }

  if (options.resend !== undefined) {
    const source = options.resend;
    const flag = options.token !== undefined ? "token" : options["token-file"] !== undefined ? "token-file" : undefined;
    if (flag !== undefined) throw new UsageError(`--${flag}: the resent submissions carry their own tokens`);
    const submissions = submissionsFromBody(readSecretFile(source, "in-flight submissions"), `--resend ${JSON.stringify(source)}`);
    const task = await readTask(options.task as string, taskOptions);
    const client = await Client.create(task, { shufflerUrl: shuffler, retrySeconds, ...http });
    sending = new Sending(task, 1, submissions.length, source);
    try {
      await sending.post(client, submissions); // one request, as the interrupted run sent it
    } catch (exc) {
      if (stop.signal.aborted) return sending.interrupted();
      throw exc;
    }
    if (options.quiet !== true) {
      process.stderr.write(
        `${sending.summary(submissions.length, shuffler, seconds())}; resent from ${source} (an id the shuffler had is answered as stored, not stored twice)\n`,
      );
    }
    return 0;
  }

  if (options.value !== undefined) {
    const task = await readTask(options.task as string, taskOptions);
    let token = options.token;
    if (options["token-file"] !== undefined) token = readSecretFile(options["token-file"], "client token");
    const client = await Client.create(task, { shufflerUrl: shuffler, retrySeconds, ...http, ...(token === undefined ? {} : { token }) });
    sending = new Sending(task, 1, 1, "value");
    const submission = await client.prepare(options.value);
    if (stop.signal.aborted) return sending.interrupted();
    try {
      await sending.post(client, [submission]);
    } catch (exc) {
      if (stop.signal.aborted) return sending.interrupted();
      throw exc;
    }
    return 0;
  }

  const source = options["values-file"] as string;
  const perRequest = integerAtLeast(options["per-request"], "--per-request", 1, DEFAULT_PER_REQUEST);
  const first = integerAtLeast(options["first-line"], "--first-line", 1, 1);
  const all = readValues(source);
  if (all.length > 0 && first > all.length) {
    throw new UsageError(`--first-line ${first} is past the last line (${all.length}) of --values-file ${JSON.stringify(source)}`);
  }
  const task = await readTask(options.task as string, taskOptions);
  const values = all.slice(first - 1);
  if (values.length === 0) throw new UsageError(`--values-file: ${JSON.stringify(source)} holds no values`);
  const domain = new Set(task.domain);
  values.forEach((value, i) => {
    if (!domain.has(value)) {
      const shown = task.domain.slice(0, 5).join(", ") + (task.domain.length > 5 ? ", ..." : "");
      throw new UsageError(
        `--values-file: line ${first + i}: ${JSON.stringify(value)} is not in the task's domain (${task.domain.length} labels: ${shown}); nothing was submitted`,
      );
    }
  });
  let tokens: string[] | undefined;
  if (options.token !== undefined || options["token-file"] !== undefined) {
    throw new UsageError(
      `--${options.token !== undefined ? "token" : "token-file"} is one client's token; --values-file submits one client per line: give their tokens with --tokens-file, one per line`,
    );
  }
  if (!task.oneSubmissionPerClient) {
    if (options["tokens-file"] !== undefined) throw new UsageError(`--tokens-file: task ${task.taskId} does not admit one submission per client; it takes no tokens`);
  } else {
    if (options["tokens-file"] === undefined) {
      throw new UsageError(
        `--tokens-file is needed: task ${task.taskId} admits one submission per client, so each of the ${all.length} values needs its own client token (shuffledp task tokens --count ${all.length} --out FILE)`,
      );
    }
    const read = readSecretFile(options["tokens-file"], "client tokens").split(/\s+/);
    if (read.length !== all.length) throw new UsageError(`--tokens-file holds ${read.length} tokens for ${all.length} values: give one token per value, in the order of the values`);
    if (new Set(read).size !== read.length) throw new UsageError("--tokens-file: a token repeats; each value is a different client with its own token");
    tokens = read.slice(first - 1);
  }

  const client = await Client.create(task, { shufflerUrl: shuffler, retrySeconds, ...http });
  const run = new Sending(task, first, all.length);
  sending = run;
  for (let start = 0; start < values.length; start += perRequest) {
    // Each value is its own user: fresh randomness, its own submission id and token.
    const prepared = await client.prepareMany(values.slice(start, start + perRequest), tokens?.slice(start, start + perRequest));
    // Fewer per request where the bodies would pass the shuffler's default limit.
    for (const request of client.requests(prepared, perRequest)) {
      if (stop.signal.aborted) return run.interrupted();
      try {
        await run.post(client, request);
      } catch (exc) {
        if (stop.signal.aborted) return run.interrupted();
        if (!(exc instanceof ShuffleDPClientError)) throw exc;
        run.inFlight = [];
        throw new ShuffleDPClientError(run.stopped(exc));
      }
    }
  }
  if (stop.signal.aborted) return run.interrupted();
  if (options.quiet !== true) process.stderr.write(`${run.summary(perRequest, shuffler, seconds())}\n`);
  return 0;
}

process.on("SIGINT", () => {
  if (sending === undefined) {
    // Nothing sent yet, nothing to save.
    process.stderr.write(`${PROGRAM}: interrupted\n`);
    process.exit(INTERRUPTED);
  }
  if (stop.signal.aborted) process.exit(sending.interrupted()); // a second Ctrl-C: report now
  stop.abort(); // the request in flight stops; main reports and saves it
});

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (exc: unknown) => {
    if (exc instanceof UsageError || exc instanceof ShuffleDPClientError) {
      process.stderr.write(`${PROGRAM}: error: ${exc.message}\n`);
      if (exc instanceof UsageError && /^(unknown|unexpected|a command|give exactly|--\w[\w-]* (is required|needs a value|is given twice|and --))/.test(exc.message)) {
        process.stderr.write(`${USAGE.split("\n\n")[0]}\n`);
      }
      process.exit(2);
    }
    process.stderr.write(`${PROGRAM}: unexpected error: ${(exc as Error).stack ?? String(exc)}\n`);
    process.exit(1);
  },
);
