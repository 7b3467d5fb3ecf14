/**
 * The client's HTTP behaviour against a recording HTTP server on loopback (a stand-in for
 * the shuffler's answers, to produce 503s and 409s at will; the real shuffler is exercised
 * end to end by tests/service/test_ts_client_end_to_end.py).
 */
import assert from "node:assert/strict";
import { type IncomingHttpHeaders, type Server, createServer } from "node:http";
import { after, before, describe, it } from "node:test";
import {
  Client,
  InputError,
  MAX_RETRY_AFTER_SECONDS,
  MessageBoundError,
  MessageOpener,
  ShufflerUnavailableError,
  SubmissionRejectedError,
  TaskError,
  base64Decode,
  fetchTask,
  parseTask,
  retryAfterSeconds,
} from "../src/node.js";
import { wireVectors } from "./paths.js";

const vectors = wireVectors();
const krrTask = parseTask((vectors.tasks[0] as { text: string }).text);
const tokenTask = parseTask((vectors.tasks[3] as { text: string }).text);

interface Seen {
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

describe("Client against a recording server", () => {
  let server: Server;
  let base = "";
  const seen: Seen[] = [];
  let answers: { status: number; body: unknown; headers?: Record<string, string> }[] = [];

  before(async () => {
    server = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
      request.on("end", () => {
        if (request.url?.startsWith("/hang-body")) {
          response.writeHead(200, { "Content-Type": "application/json" });
          response.write("{"); // answers, never finishes the body
          return;
        }
        if (request.url?.startsWith("/hang")) return; // never answers
        seen.push({ url: request.url ?? "", headers: request.headers, body, at: performance.now() });
        const answer = answers.shift() ?? { status: 200, body: { status: "accepted" } };
        response.writeHead(answer.status, { "Content-Type": "application/json", ...answer.headers });
        response.end(JSON.stringify(answer.body));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    assert.ok(address !== null && typeof address === "object");
    base = `http://127.0.0.1:${address.port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  it("posts JSON and resends the same ids and ciphertexts after a 503", async () => {
    seen.length = 0;
    answers = [{ status: 503, body: { error: "store unavailable" } }];
    const client = await Client.create(krrTask, { shufflerUrl: `${base}/`, retrySeconds: 30 });
    const submission = await client.submit("plain");
    assert.equal(seen.length, 2);
    assert.equal(seen[0]?.body, seen[1]?.body);
    assert.equal(seen[0]?.url, `/v1/tasks/${krrTask.taskId}/submissions`);
    assert.equal(seen[1]?.headers["content-type"], "application/json");
    const body = JSON.parse(seen[1]?.body ?? "") as { format: string; submissions: { submission_id: string; ciphertexts: string[]; token?: string }[] };
    assert.equal(body.format, "shuffledp-submissions/1");
    assert.equal(body.submissions.length, 1);
    const item = body.submissions[0];
    assert.match(item?.submission_id ?? "", /^[0-9a-f]{32}$/);
    assert.equal(item?.submission_id, submission.submissionId);
    assert.equal(item?.token, undefined);
    // What was sent is what the analyzer opens to the submission's message.
    const opener = await MessageOpener.create(base64Decode(vectors.private_key, 32), krrTask.taskId, krrTask.messageDomainSize);
    const opened = await Promise.all((item?.ciphertexts ?? []).map((c) => opener.open(base64Decode(c, 53))));
    assert.deepEqual(opened, submission.messages);
    assert.equal(opened.length, 1);
  });

  it("waits at least the Retry-After a 503 asks for, then resends the same body", { timeout: 20_000 }, async () => {
    seen.length = 0;
    answers = [{ status: 503, body: { reason: "store_unavailable" }, headers: { "Retry-After": "1" } }];
    const client = await Client.create(krrTask, { shufflerUrl: base, retrySeconds: 30 });
    await client.submit("plain");
    assert.equal(seen.length, 2);
    assert.equal(seen[0]?.body, seen[1]?.body);
    const gap = ((seen[1]?.at ?? 0) - (seen[0]?.at ?? 0)) / 1000;
    // Without the header the first pause is at most 0.1 s (0.05 * 2, jitter below 1).
    assert.ok(gap >= 1 && gap < 5, `${gap} s between the two requests`);
  });

  it("reads Retry-After's delay-seconds form only, capped", () => {
    assert.equal(retryAfterSeconds("1"), 1);
    assert.equal(retryAfterSeconds("0"), 0);
    assert.equal(retryAfterSeconds("86400"), MAX_RETRY_AFTER_SECONDS);
    for (const other of [null, "", "-1", "1.5", " 1", "Wed, 21 Oct 2015 07:28:00 GMT", "\u0661"]) {
      assert.equal(retryAfterSeconds(other), 0, String(other));
    }
  });

  it("fetchTask gives up after timeoutSeconds, whether the answer or its body is missing", { timeout: 20_000 }, async () => {
    for (const path of ["/hang", "/hang-body"]) {
      const started = performance.now();
      await assert.rejects(
        fetchTask(`${base}${path}`, { timeoutSeconds: 0.3 }),
        (exc: unknown) => exc instanceof TaskError && exc.message === `cannot fetch the task from ${base}${path}: no answer within 0.3 s`,
      );
      const seconds = (performance.now() - started) / 1000;
      assert.ok(seconds >= 0.29 && seconds < 5, `${path}: ${seconds} s`);
    }
  });

  it("a post without an answer times out per attempt and gives up at retrySeconds", { timeout: 20_000 }, async () => {
    const client = await Client.create(krrTask, { shufflerUrl: `${base}/hang`, timeoutSeconds: 0.2, retrySeconds: 0.5 });
    const started = performance.now();
    await assert.rejects(client.submit("plain"), (exc: unknown) => exc instanceof ShufflerUnavailableError && /AbortError/.test(exc.message));
    assert.ok((performance.now() - started) / 1000 < 5);
  });

  it("a 4xx other than 429 is final: one request, the shuffler's reason", async () => {
    seen.length = 0;
    answers = [{ status: 409, body: { reason: "client_already_submitted", error: "this client already submitted" } }];
    const client = await Client.create(krrTask, { shufflerUrl: base });
    await assert.rejects(client.submit("plain"), (exc: unknown) => exc instanceof SubmissionRejectedError && exc.status === 409 && exc.reason === "client_already_submitted");
    assert.equal(seen.length, 1);
  });

  it("gives up after retrySeconds with ShufflerUnavailableError", async () => {
    seen.length = 0;
    answers = Array.from({ length: 50 }, () => ({ status: 429, body: {} }));
    const client = await Client.create(krrTask, { shufflerUrl: base, retrySeconds: 0.3 });
    await assert.rejects(client.submit("plain"), (exc: unknown) => exc instanceof ShufflerUnavailableError && /HTTP 429/.test(exc.message));
    assert.ok(seen.length >= 2 && new Set(seen.map((s) => s.body)).size === 1);
    answers = [];
  });

  it("sends the token a one-submission-per-client task wants, and refuses to go without", async () => {
    seen.length = 0;
    const token = `${"a".repeat(32)}.${"b".repeat(64)}`;
    const client = await Client.create(tokenTask, { shufflerUrl: base });
    await assert.rejects(client.prepare("p"), InputError);
    await client.post([await client.prepare("q", token)]);
    const body = JSON.parse(seen[0]?.body ?? "") as { submissions: { token?: string }[] };
    assert.equal(body.submissions[0]?.token, token);
  });

  it("groups submissions into requests by count and by body size", async () => {
    const client = await Client.create(krrTask, { shufflerUrl: base, maxRequestBytes: 600 });
    const prepared = await client.prepareMany(["plain", "caf\u00e9", "plain", "plain", "plain"]);
    const bySize = client.requests(prepared, 100);
    assert.ok(bySize.length > 1);
    for (const group of bySize) {
      const body = JSON.stringify({ format: "shuffledp-submissions/1", submissions: group.map((s) => ({ submission_id: s.submissionId, ciphertexts: s.ciphertexts.map(() => "x".repeat(72)) })) });
      assert.ok(group.length === 1 || body.length <= 600, `a request of ${body.length} bytes`);
    }
    const byCount = (await Client.create(krrTask, { shufflerUrl: base })).requests(prepared, 2);
    assert.deepEqual(byCount.map((g) => g.length), [2, 2, 1]);
    assert.deepEqual(byCount.flat(), prepared);
  });

  it("refuses a value outside the domain, a wrong digest, a non-http URL", async () => {
    const client = await Client.create(krrTask, { shufflerUrl: base });
    await assert.rejects(client.prepare("nope"), (exc: unknown) => exc instanceof TaskError && /not in the task's domain/.test(exc.message));
    await assert.rejects(Client.create(krrTask, { shufflerUrl: base, expectedDigest: "0".repeat(64) }), /differs from the expected/);
    await assert.rejects(Client.create(krrTask, { shufflerUrl: "ftp://x" }), InputError);
  });

  it("checks the message bound before sealing anything (the user does not submit)", async () => {
    const doc = JSON.parse((vectors.tasks[1] as { text: string }).text) as Record<string, unknown>;
    doc.max_messages_per_submission = 1; // every noise share now exceeds it
    Object.assign(doc.parameters as object, { min_honest: 2 });
    doc.min_batch_users = 2;
    const client = await Client.create(parseTask(JSON.stringify(doc)), { shufflerUrl: base });
    const outcomes = await Promise.allSettled(Array.from({ length: 40 }, () => client.prepare("a")));
    const refused = outcomes.filter((o) => o.status === "rejected");
    assert.ok(refused.length > 0);
    for (const o of refused) assert.ok(o.reason instanceof MessageBoundError);
    for (const o of outcomes) if (o.status === "fulfilled") assert.equal(o.value.ciphertexts.length, 1);
  });
});
