/**
 * The task document (format shuffledp-task/1) the services publish: read, checked, pinned.
 *
 * The document is checked against the Python package's JSON Schemas (task.schema.json and
 * the protocol's spec schema), with a clear error first for what a client must never guess:
 * an unknown format, protocol, message_format or HPKE suite. The client trusts the document
 * it is given; pin it with its digest, SHA-256 of the canonical JSON exactly as
 * `Task.digest()` computes it in Python (see json.ts for the canonical form).
 */
import { TaskError } from "./errors.js";
import { JsonNumber, type JsonObject, type JsonValue, fromPlain, parseJson, pythonDumps, toPlain, JsonSyntaxError } from "./json.js";
import { PROTOCOLS, type ClientProtocol, type Parameters } from "./randomizers.js";
import { allowedValues, isNumberTyped, propertiesOf, schemaId, validate } from "./schema.js";
import { base64Decode, sha256Hex } from "./encoding.js";

/** The `$id` of the task schema this client reads. */
export const TASK_SCHEMA = schemaId("task");
/** Largest message index the wire format carries (uint32). */
export const MAX_INDEX = 2 ** 32 - 1;

/** A checked task document. */
export interface Task {
  readonly taskId: string;
  readonly protocol: string;
  readonly domain: readonly string[];
  /** The protocol's parameters (the document's `parameters`). */
  readonly parameters: Parameters;
  readonly epsilon: number;
  readonly delta: number;
  readonly minBatchUsers: number;
  readonly maxMessagesPerSubmission: number;
  readonly oneSubmissionPerClient: boolean;
  /** The analyzer's raw X25519 public key (32 bytes). */
  readonly publicKey: Uint8Array;
  /** Distinct message indices: 2d for the correlated protocol, else d. */
  readonly messageDomainSize: number;
  /** The canonical JSON Python hashes (`json.dumps(to_dict(), sort_keys=True, ...)`). */
  readonly canonicalJson: string;
  /** The document as plain JSON. */
  readonly document: Readonly<Record<string, unknown>>;
}

/** The protocols this client runs that the task schema names (in the schema's order). */
export function supportedProtocols(): string[] {
  return (allowedValues(TASK_SCHEMA, "protocol") as string[]).filter((name) => Object.hasOwn(PROTOCOLS, name));
}

/** The client side of a task's protocol. */
export function clientProtocol(task: Task): ClientProtocol {
  return PROTOCOLS[task.protocol] as ClientProtocol;
}

/** Read a task document from its JSON text (the form to pin: Python's int/float kept). */
export function parseTask(text: string): Task {
  let tree: JsonValue;
  try {
    tree = parseJson(text);
  } catch (exc) {
    if (exc instanceof JsonSyntaxError) throw new TaskError(`the task document is not JSON: ${exc.message}`);
    throw exc;
  }
  return taskFromTree(tree);
}

/**
 * Read a task document already parsed by `JSON.parse`. Its digest assumes Python's types
 * where JSON text would have told them: an integral number is an int unless its schema says
 * `number` (pin the text with {@link parseTask} to be exact for hand-written documents).
 */
export function taskFromObject(document: unknown): Task {
  let tree: JsonValue;
  try {
    tree = fromPlain(document);
  } catch (exc) {
    throw new TaskError(`the task document is not JSON: ${(exc as Error).message}`);
  }
  if (tree instanceof Map) {
    for (const key of ["epsilon", "delta"]) {
      const value = tree.get(key);
      if (value instanceof JsonNumber && !value.isFloat) tree.set(key, JsonNumber.float(value.value));
    }
  }
  return taskFromTree(tree);
}

function expectConst(tree: JsonObject, field: string, what: string): void {
  const allowed = allowedValues(TASK_SCHEMA, field);
  const value = tree.get(field);
  const plain = value === undefined ? undefined : toPlain(value);
  if (!allowed.some((item) => JSON.stringify(item) === JSON.stringify(plain))) {
    const shown = value === undefined ? "none" : JSON.stringify(plain);
    throw new TaskError(
      `unsupported ${what} ${shown}: this client reads ${allowed.map((a) => JSON.stringify(a)).join(" or ")} ` +
        "(a newer task needs a newer client)",
    );
  }
}

/** Largest min_batch_users (service/task.py's MAX_BATCH_USERS). */
export const MAX_BATCH_USERS = 2 ** 40;

/** 1 − e^{−ε/2}: the smallest β of an augmented SAGeo task at ε (randomizers/augmented.py's minimum_beta). */
export function minimumBeta(epsilon: number): number {
  return -Math.expm1(-epsilon / 2);
}

/**
 * The number of distinct messages of a `protocol` task over `domainSize` bins.
 *
 * @throws TaskError if a message index would not fit the wire format's uint32 (Task.check).
 */
export function messageDomain(protocol: string, domainSize: number): number {
  const size = (PROTOCOLS[protocol] as ClientProtocol).messageDomainSize(domainSize);
  if (domainSize > MAX_INDEX || size - 1 > MAX_INDEX) throw new TaskError("task domain is too large for the message format");
  return size;
}

/**
 * Python's rules that the schemas do not state (Task.check, the specs' constructors and
 * check_task), on a document the schemas accept; returns its message domain size.
 */
function checkBeyondSchema(doc: Record<string, unknown>, protocol: string): number {
  const p = doc.parameters as Record<string, number | string>;
  const fail = (message: string): never => {
    throw new TaskError(`invalid task document: ${message}`);
  };
  const source = doc.domain_source as string;
  if (!["declared", "file", "synthetic"].includes(source) && !/^(builtin|public):./s.test(source)) {
    fail(`domain_source must be declared, file, synthetic, builtin:<name> or public:<name>, got ${JSON.stringify(source)}`);
  }
  const n = doc.min_batch_users as number;
  if (n > MAX_BATCH_USERS) fail(`min_batch_users must be at most 2^40, got ${n}`);
  if (protocol === "correlated" && p.min_honest !== n) {
    fail(`a correlated task's parameters.min_honest must equal its min_batch_users (${n}), got ${p.min_honest}`);
  }
  if (protocol === "augmented") {
    if ((p.q_right as number) <= 1e-300) fail(`q_right must be in (1e-300, 1), got ${p.q_right}`);
    if ((p.trials as number) > 1e9) fail(`trials must be at most 10^9, got ${p.trials}`);
    const low = minimumBeta(doc.epsilon as number);
    if (p.variant === "sageo" && (p.beta as number) < low) {
      fail(`an sageo task's beta must be at least 1 - e^(-epsilon/2) = ${low} at epsilon ${doc.epsilon as number}, got ${p.beta}`);
    }
  }
  return messageDomain(protocol, (doc.domain as string[]).length);
}

function taskFromTree(tree: JsonValue): Task {
  if (!(tree instanceof Map)) throw new TaskError("a task document must be a JSON object");
  // What a client must never guess, each with its own error, before the full schema check.
  expectConst(tree, "format", "task format");
  if (tree.has("schema")) expectConst(tree, "schema", "task schema");
  const protocol = tree.get("protocol");
  const supported = supportedProtocols();
  if (typeof protocol !== "string" || !supported.includes(protocol)) {
    throw new TaskError(
      `unsupported protocol ${protocol === undefined ? "(none)" : JSON.stringify(toPlain(protocol))}: ` +
        `this client runs ${supported.join(", ")}`,
    );
  }
  expectConst(tree, "message_format", "message_format");
  expectConst(tree, "hpke", "HPKE suite");
  // A document of shuffledp 0.1 has no `schema` key; Python reads it (and keeps its digest).
  const violations = validate(TASK_SCHEMA, tree.has("schema") ? tree : new Map([...tree, ["schema", TASK_SCHEMA]]));
  if (violations.length > 0) {
    const shown = violations.slice(0, 3).map((v) => `${v.path || "(document)"} ${v.message}`);
    throw new TaskError(`invalid task document: ${shown.join("; ")}`);
  }
  const doc = toPlain(tree) as Record<string, unknown>;
  const parameters = doc.parameters as Parameters;
  const domain = doc.domain as string[];
  const minBatchUsers = doc.min_batch_users as number;
  const messageDomainSize = checkBeyondSchema(doc, protocol);
  return {
    taskId: doc.task_id as string,
    protocol,
    domain,
    parameters,
    epsilon: doc.epsilon as number,
    delta: doc.delta as number,
    minBatchUsers,
    maxMessagesPerSubmission: doc.max_messages_per_submission as number,
    oneSubmissionPerClient: doc.one_submission_per_client as boolean,
    publicKey: base64Decode(doc.public_key as string, 32, "public key"),
    messageDomainSize,
    canonicalJson: pythonDumps(pythonView(tree, protocol)),
    document: doc,
  };
}

/**
 * The document as Python's `Task.to_dict()` holds it: the spec's real-valued fields (the
 * spec schema's `number` properties: `ProtocolSpec.real_fields`) are floats even when the
 * text wrote them as integers; everything else is as read.
 */
function pythonView(tree: JsonObject, protocol: string): JsonObject {
  const out: JsonObject = new Map(tree);
  const parameters = new Map(tree.get("parameters") as JsonObject);
  const spec = schemaId(`${protocol}-spec`);
  for (const [name, property] of propertiesOf(spec)) {
    const value = parameters.get(name);
    if (value instanceof JsonNumber && !value.isFloat && isNumberTyped(property, spec)) {
      parameters.set(name, JsonNumber.float(value.value));
    }
  }
  out.set("parameters", parameters);
  out.set("message_format", JsonNumber.int(1)); // Task.to_dict writes WIRE_VERSION (1.0 reads as 1)
  return out;
}

/** SHA-256 (hex) of the task's canonical JSON: Python's `Task.digest()`. */
export async function taskDigest(task: Task): Promise<string> {
  return sha256Hex(task.canonicalJson);
}

/**
 * Check the task is the pinned one.
 *
 * @throws TaskError if its digest differs from `expected` (hex, any case).
 */
export async function checkDigest(task: Task, expected: string): Promise<void> {
  const digest = await taskDigest(task);
  if (digest !== expected.trim().toLowerCase()) {
    throw new TaskError(`task digest ${digest} differs from the expected ${expected}`);
  }
}

/** The bin index of a domain label. @throws TaskError if it is not in the domain. */
export function indexOf(task: Task, label: string): number {
  const index = task.domain.indexOf(label);
  if (index < 0) throw new TaskError(`value ${JSON.stringify(label)} is not in the task's domain`);
  return index;
}
