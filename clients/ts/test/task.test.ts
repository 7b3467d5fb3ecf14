/** Reading task documents: digests against Python's, refusals, the schemas behind them. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { MAX_INDEX, PROTOCOLS, TaskError, loadTask, parseTask, supportedProtocols, taskDigest } from "../src/node.js";
import { MAX_BATCH_USERS, messageDomain, minimumBeta } from "../src/task.js";
import { PACKAGE, wireVectors } from "./paths.js";

const vectors = wireVectors();
const base = (): Record<string, unknown> => JSON.parse((vectors.tasks[0] as { text: string }).text) as Record<string, unknown>;
const text = (doc: unknown): string => JSON.stringify(doc);

describe("task documents", () => {
  for (const vector of vectors.tasks) {
    it(`digest and canonical JSON equal Python's: ${vector.name}`, async () => {
      const task = parseTask(vector.text);
      assert.equal(task.canonicalJson, vector.canonical);
      assert.equal(await taskDigest(task), vector.digest);
      await loadTask(vector.text, { expectedDigest: vector.digest.toUpperCase() });
    });
  }

  it("a document parsed by JSON.parse gets Python's digest when Python wrote it (floats as floats)", async () => {
    for (const vector of vectors.tasks.slice(0, 3)) {
      const task = await loadTask(JSON.parse(vector.text) as object);
      assert.equal(await taskDigest(task), vector.digest, vector.name);
    }
  });

  it("refuses another digest", async () => {
    const vector = vectors.tasks[0] as { text: string; digest: string };
    const wrong = vector.digest.replace(/^./, (c) => (c === "0" ? "1" : "0"));
    await assert.rejects(loadTask(vector.text, { expectedDigest: wrong }), (exc: unknown) => exc instanceof TaskError && /differs from the expected/.test(exc.message));
  });

  it("runs exactly the protocols the task schema names", () => {
    const schema = JSON.parse(readFileSync(join(PACKAGE, "schemas", "task.schema.json"), "utf8")) as {
      properties: { protocol: { enum: string[] } };
    };
    assert.deepEqual(supportedProtocols(), schema.properties.protocol.enum);
    assert.deepEqual(Object.keys(PROTOCOLS).sort(), [...schema.properties.protocol.enum].sort());
  });

  const refusals: [string, (doc: Record<string, unknown>) => void, RegExp][] = [
    ["an unknown protocol", (d) => (d.protocol = "segmented"), /unsupported protocol "segmented": this client runs flip, krr, correlated, augmented/],
    ["no protocol", (d) => delete d.protocol, /unsupported protocol \(none\)/],
    ["another format version", (d) => (d.format = "shuffledp-task/2"), /unsupported task format "shuffledp-task\/2": this client reads "shuffledp-task\/1"/],
    ["another schema", (d) => (d.schema = "urn:shuffledp:schema:task:2"), /unsupported task schema/],
    ["another message_format", (d) => (d.message_format = 2), /unsupported message_format 2/],
    ["another HPKE suite", (d) => ((d.hpke as Record<string, string>).aead = "AES_128_GCM"), /unsupported HPKE suite/],
    ["a missing field", (d) => delete d.public_key, /has no field "public_key"/],
    ["an extra field", (d) => (d.note = "x"), /field "note" its schema does not allow/],
    ["a repeated label", (d) => (d.domain = ["a", "a"]), /items must be unique/],
    ["a bad task id", (d) => (d.task_id = "XYZ"), /\/task_id must match/],
    ["epsilon0 <= 0", (d) => ((d.parameters as Record<string, unknown>).epsilon0 = 0), /\/parameters\/epsilon0 must be > 0/],
    ["an unknown estimator", (d) => ((d.parameters as Record<string, unknown>).estimator = "best"), /\/parameters\/estimator must be one of/],
    ["a float where an int is due", (d) => (d.min_batch_users = 100.5), /\/min_batch_users must be integer/],
    ["a bad public key", (d) => (d.public_key = "short="), /\/public_key must match/],
    ["a domain_source Python does not know", (d) => (d.domain_source = "inferred-from-data"), /domain_source must be declared, file, synthetic/],
    ["a builtin: domain_source without a name", (d) => (d.domain_source = "builtin:"), /domain_source must be/],
    ["min_batch_users above 2^40", (d) => (d.min_batch_users = MAX_BATCH_USERS + 1), /min_batch_users must be at most 2\^40, got 1099511627777/],
  ];
  for (const [what, change, message] of refusals) {
    it(`refuses ${what}`, () => {
      const doc = base();
      change(doc);
      assert.throws(() => parseTask(text(doc)), (exc: unknown) => exc instanceof TaskError && message.test(exc.message));
    });
  }

  it("refuses a correlated task whose min_honest is not its min_batch_users", () => {
    const doc = JSON.parse((vectors.tasks[1] as { text: string }).text) as Record<string, unknown>;
    (doc.parameters as Record<string, unknown>).min_honest = 999;
    assert.throws(() => parseTask(text(doc)), /min_honest must equal its min_batch_users \(1000\), got 999/);
  });

  it("refuses what the spec schemas refuse (augmented sbin with a nu, flip q >= 1/2)", () => {
    const sbin = JSON.parse((vectors.tasks[3] as { text: string }).text) as Record<string, unknown>;
    (sbin.parameters as Record<string, unknown>).nu = 2;
    assert.throws(() => parseTask(text(sbin)), /must not match/);
    const flip = JSON.parse((vectors.tasks[2] as { text: string }).text) as Record<string, unknown>;
    (flip.parameters as Record<string, unknown>).q = 0.5;
    assert.throws(() => parseTask(text(flip)), /\/parameters\/q must be < 0.5/);
  });

  it("reads a document of shuffledp 0.1 (no schema key): its digest is of the text as written", async () => {
    for (const vector of vectors.tasks) {
      const old = vector.text.replace(/"schema":\s*"urn:shuffledp:schema:task:1",\s*/, "");
      assert.notEqual(old, vector.text);
      const task = parseTask(old);
      assert.equal(task.canonicalJson, vector.canonical.replace('"schema":"urn:shuffledp:schema:task:1",', ""), vector.name);
      assert.notEqual(await taskDigest(task), vector.digest);
    }
    const doc = base();
    doc.schema = null;
    assert.throws(() => parseTask(text(doc)), /unsupported task schema null/);
  });

  it("refuses Python's augmented rules beyond the schema: SAGeo's beta >= 1 - e^(-epsilon/2), q_right > 1e-300, trials <= 10^9", () => {
    const sageo = (): Record<string, unknown> => JSON.parse((vectors.tasks[4] as { text: string }).text) as Record<string, unknown>;
    const params = (d: Record<string, unknown>) => d.parameters as Record<string, unknown>;
    const at = (epsilon: number, beta: number): Record<string, unknown> => {
      const d = sageo();
      d.epsilon = epsilon;
      params(d).beta = beta;
      return d;
    };
    const low = minimumBeta(1);
    assert.equal(low, 0.3934693402873666); // 1 - e^(-1/2)
    parseTask(text(at(1, low)));
    assert.throws(() => parseTask(text(at(1, low - 2 ** -54))), /beta must be at least 1 - e\^\(-epsilon\/2\) = 0.3934693402873666 at epsilon 1/);
    const s1geo = at(1, 0.01);
    params(s1geo).variant = "s1geo"; // no lower limit
    parseTask(text(s1geo));
    const tiny = sageo();
    params(tiny).q_right = 1e-300;
    assert.throws(() => parseTask(text(tiny)), /q_right must be in \(1e-300, 1\)/);
    const sbin = JSON.parse((vectors.tasks[3] as { text: string }).text) as Record<string, unknown>;
    params(sbin).trials = 1e9;
    parseTask(text(sbin));
    params(sbin).trials = 1e9 + 1;
    assert.throws(() => parseTask(text(sbin)), /trials must be at most 10\^9/);
    const many = sageo();
    many.max_messages_per_submission = 2;
    assert.throws(() => parseTask(text(many)), /max_messages_per_submission must be 1/);
  });

  it("refuses a domain whose message indices would not fit a uint32 (Python's Task.check: d > 2^32 - 1 or 2d - 1 > 2^32 - 1)", () => {
    // Such a document cannot be built (2^31 labels), so the rule is checked on its own.
    assert.equal(messageDomain("krr", MAX_INDEX), MAX_INDEX);
    assert.throws(() => messageDomain("krr", MAX_INDEX + 1), /too large for the message format/);
    assert.equal(messageDomain("correlated", 2 ** 31), 2 ** 32);
    assert.throws(() => messageDomain("correlated", 2 ** 31 + 1), /too large/);
  });

  it("refuses text that is not JSON, or not an object", () => {
    assert.throws(() => parseTask("{"), /not JSON/);
    assert.throws(() => parseTask("[1]"), /must be a JSON object/);
    assert.throws(() => parseTask('{"a": NaN}'), /not JSON/);
  });
});
