/** Reading task documents: digests against Python's, refusals, the schemas behind them. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { PROTOCOLS, TaskError, loadTask, parseTask, supportedProtocols, taskDigest } from "../src/node.js";
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

  it("refuses text that is not JSON, or not an object", () => {
    assert.throws(() => parseTask("{"), /not JSON/);
    assert.throws(() => parseTask("[1]"), /must be a JSON object/);
    assert.throws(() => parseTask('{"a": NaN}'), /not JSON/);
  });
});
