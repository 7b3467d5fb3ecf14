#!/usr/bin/env node
/**
 * `shuffledp-client submit`: the Python CLI's `shuffledp client submit`, in Node.
 *
 *   shuffledp-client submit --task FILE|URL [--task-digest HEX] --shuffler URL
 *       (--value LABEL | --values-file FILE) [--token T | --token-file F | --tokens-file F]
 *       [--per-request K] [--first-line N] [--retry-seconds S] [--quiet]
 *
 * `--value` submits one user's value, as a device does. `--values-file` submits many users
 * from one process (load tests, demos): every line is its own user with its own fresh
 * randomness, submission id and (with `--tokens-file`) client token, `--per-request`
 * submissions per HTTP request. Values are checked against the domain before anything is
 * sent. Stdout gets one receipt per stored submission (schema `submission`, one JSON object a
 * line, as Python writes it); errors go to stderr with exit code 2.
 *
 * Ctrl-C lets the request in flight finish (or fail), writes its receipts and says which
 * lines were stored and which were not sent (resume with --first-line); a second Ctrl-C
 * quits at once, saying which lines were in flight (maybe stored). Exit code 130.
 */
import { readFileSync, statSync } from "node:fs";
import { ShuffleDPClientError, TaskError } from "./errors.js";
import { Client, type Submission } from "./client.js";
import { readTask } from "./node.js";
import { schemaId } from "./schema.js";
import type { Task } from "./task.js";

const PROGRAM = "shuffledp-client";
const DEFAULT_PER_REQUEST = 100;
const USAGE = `usage: ${PROGRAM} submit --task FILE|URL [--task-digest HEX] --shuffler URL
       (--value LABEL | --values-file FILE) [--token T | --token-file F | --tokens-file F]
       [--per-request K] [--first-line N] [--retry-seconds S] [--quiet]

Randomize a value (or every line of a file, each its own user) locally, seal every message
to the analyzer's key (HPKE) and submit it to the shuffler; one receipt per submission on
stdout. --task FILE pins the analyzer's key; a URL trusts the shuffler for it unless
--task-digest pins the task's SHA-256.`;

class UsageError extends Error {}

interface Options {
  task?: string;
  "task-digest"?: string;
  shuffler?: string;
  value?: string;
  "values-file"?: string;
  token?: string;
  "token-file"?: string;
  "tokens-file"?: string;
  "per-request"?: string;
  "first-line"?: string;
  "retry-seconds"?: string;
  quiet?: boolean;
}

const VALUED = ["task", "task-digest", "shuffler", "value", "values-file", "token", "token-file", "tokens-file", "per-request", "first-line", "retry-seconds"];

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
  const sources = ["value", "values-file"].filter((name) => name in options);
  if (sources.length !== 1) throw new UsageError("give exactly one of --value and --values-file");
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

let interrupts = 0;
let onSecondInterrupt: () => void = () => process.exit(130);

async function main(argv: string[]): Promise<number> {
  const options = parseArgs(argv);
  const shuffler = options.shuffler as string;
  if (!/^https?:\/\//.test(shuffler)) throw new UsageError(`--shuffler must be an http(s):// URL, got ${JSON.stringify(shuffler)}`);
  const retrySeconds = options["retry-seconds"] === undefined ? 60 : Number(options["retry-seconds"]);
  if (!(retrySeconds >= 0)) throw new UsageError(`--retry-seconds must be a number >= 0, got ${JSON.stringify(options["retry-seconds"])}`);
  const digest = options["task-digest"];
  const taskOptions = digest === undefined ? {} : { expectedDigest: digest };
  const started = performance.now();

  if (options.value !== undefined) {
    for (const flag of ["tokens-file", "per-request", "first-line"] as const) {
      if (options[flag] !== undefined) throw new UsageError(`--${flag} goes with --values-file, not --value`);
    }
    const task = await readTask(options.task as string, taskOptions);
    let token = options.token;
    if (options["token-file"] !== undefined) token = readSecretFile(options["token-file"], "client token");
    const client = await Client.create(task, { shufflerUrl: shuffler, retrySeconds, ...(token === undefined ? {} : { token }) });
    const submission = await client.prepare(options.value);
    await client.post([submission]);
    process.stdout.write(`${receipt(task, submission)}\n`);
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

  const client = await Client.create(task, { shufflerUrl: shuffler, retrySeconds });
  const last = all.length;
  let storedTo = first - 1;
  let inFlight = 0;
  let messages = 0;
  let requests = 0;
  const report = (): string => {
    const parts = [storedTo < first ? "nothing was stored" : `${span(first, storedTo)} of ${last} stored (receipts on stdout)`];
    let next = storedTo + 1;
    if (inFlight > 0) {
      parts.push(`${span(next, storedTo + inFlight)} in flight, maybe stored (their submission ids were not saved: do not submit them again)`);
      next = storedTo + inFlight + 1;
    }
    if (next <= last) parts.push(`${span(next, last)} not sent (resume with --first-line ${next})`);
    return parts.join("; ");
  };
  onSecondInterrupt = () => {
    process.stderr.write(`${PROGRAM}: interrupted: ${report()}\n`);
    process.exit(130);
  };
  for (let start = 0; start < values.length; start += perRequest) {
    const chunk = values.slice(start, start + perRequest);
    const prepared = await client.prepareMany(chunk, tokens?.slice(start, start + perRequest));
    for (const request of client.requests(prepared, perRequest)) {
      if (interrupts > 0) break;
      inFlight = request.length;
      try {
        await client.post(request);
      } catch (exc) {
        if (!(exc instanceof ShuffleDPClientError)) throw exc;
        inFlight = 0;
        const where = storedTo < first ? "nothing was stored" : `${span(first, storedTo)} of ${last} were stored (their receipts are on stdout), ${span(storedTo + 1, last)} were not`;
        throw new ShuffleDPClientError(`${exc.message}; ${where}`);
      }
      process.stdout.write(request.map((s) => `${receipt(task, s)}\n`).join(""));
      inFlight = 0;
      storedTo += request.length;
      messages += request.reduce((sum, s) => sum + s.ciphertexts.length, 0);
      requests += 1;
    }
    if (interrupts > 0) {
      process.stderr.write(`${PROGRAM}: interrupted: ${report()}\n`);
      return 130;
    }
  }
  if (options.quiet !== true) {
    const seconds = (performance.now() - started) / 1000;
    const stored = storedTo - first + 1;
    process.stderr.write(
      `${PROGRAM} submit: ${stored} submissions (${messages} encrypted messages) in ${requests} request${requests === 1 ? "" : "s"} of at most ${perRequest} to ${shuffler}, ${seconds.toFixed(2)} s (${(stored / seconds).toFixed(0)} submissions/s)\n`,
    );
  }
  return 0;
}

process.on("SIGINT", () => {
  interrupts += 1;
  if (interrupts === 1) {
    process.stderr.write(`${PROGRAM}: Ctrl-C: stopping after the request in flight (Ctrl-C again to quit now)\n`);
  } else onSecondInterrupt();
});

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (exc: unknown) => {
    if (exc instanceof UsageError || exc instanceof ShuffleDPClientError || exc instanceof TaskError) {
      process.stderr.write(`${PROGRAM}: error: ${exc.message}\n`);
      if (exc instanceof UsageError && !/^--values-file|^--tokens-file|^--token|^--first-line/.test(exc.message)) process.stderr.write(`${USAGE.split("\n\n")[0]}\n`);
      process.exit(2);
    }
    process.stderr.write(`${PROGRAM}: unexpected error: ${(exc as Error).stack ?? String(exc)}\n`);
    process.exit(1);
  },
);
