/**
 * The browser bundle in headless Chromium: it seals (WebCrypto's X25519, and the pure-JS
 * fallback file) what Node opens with the analyzer's key, and on a plain-http page of a
 * non-loopback host (a name Chromium is told resolves to loopback) it refuses with a
 * "secure context" error. Without Chromium the tests
 * are skipped, saying so, unless SHUFFLEDP_REQUIRE_BROWSER=1 (CI), where they fail.
 * The browser against the real services: tests/service/test_ts_client_browser.py.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { type Server, createServer } from "node:http";
import { extname, join, normalize } from "node:path";
import { after, before, describe, it } from "node:test";
import { MessageOpener, SecureContextError, base64Decode, loadTask, parseTask } from "../src/node.js";
import { browserAvailable, CHROMIUM, runPage } from "./browser/driver.js";
import { PACKAGE, wireVectors } from "./paths.js";

const vectors = wireVectors();
const taskText = (vectors.tasks[1] as { text: string }).text; // correlated: 6 message indices
const available = browserAvailable();
const skip = available ? false : `no Chromium at ${CHROMIUM}: browser tests skipped (SHUFFLEDP_REQUIRE_BROWSER=1 makes this a failure)`;

const TYPES: Record<string, string> = { ".js": "text/javascript", ".html": "text/html", ".json": "application/json" };

/** Serves dist/, the test page and the configs given, from `host` on a free port. */
async function serve(host: string, configs: Map<string, unknown>): Promise<{ server: Server; origin: string }> {
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://x").pathname;
    let body: string | Buffer | undefined;
    if (path === "/task.json") body = taskText;
    else if (configs.has(path)) body = JSON.stringify(configs.get(path));
    else if (path.startsWith("/dist/")) body = readFileSync(join(PACKAGE, normalize(path).replace(/^(\.\.[/\\])+/, "")));
    else if (path === "/page.html" || path === "/page.js") body = readFileSync(join(PACKAGE, "test", "browser", path));
    if (body === undefined) {
      response.writeHead(404);
      response.end();
      return;
    }
    response.writeHead(200, { "Content-Type": TYPES[extname(path)] ?? "application/octet-stream" });
    response.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const address = server.address();
  assert.ok(address !== null && typeof address === "object");
  return { server, origin: `http://${host}:${address.port}` };
}

describe("browser bundle in headless Chromium", { skip }, () => {
  const configs = new Map<string, unknown>();
  const servers: Server[] = [];
  let loopback = "";
  const indices = [0, 1, 2, 3, 4, 5, 5, 0];
  for (const kem of ["auto", "pure-js"]) {
    configs.set(`/config-seal-${kem}.json`, { bundle: "/dist/shuffledp-client.min.js", task_url: "/task.json", mode: "seal", kem, indices });
  }
  configs.set("/config-submit.json", { bundle: "/dist/shuffledp-client.min.js", task_url: "/task.json", mode: "submit", shuffler: "http://127.0.0.1:9", values: ["a"] });

  before(async () => {
    const { server, origin } = await serve("127.0.0.1", configs);
    servers.push(server);
    loopback = origin;
  });
  after(() => {
    for (const server of servers) {
      server.closeAllConnections();
      server.close();
    }
  });

  for (const [kem, expected] of [
    ["auto", "webcrypto"],
    ["pure-js", "pure-js"],
  ] as const) {
    it(`seals what Node opens (${kem}: ${expected} X25519)`, async () => {
      const { result, console } = await runPage(`${loopback}/page.html?config=/config-seal-${kem}.json`);
      assert.equal(result.ok, true, JSON.stringify({ result, console }));
      assert.equal(result.secure, true);
      assert.equal(result.kem, expected);
      const task = parseTask(taskText);
      const opener = await MessageOpener.create(base64Decode(vectors.private_key, 32), task.taskId, task.messageDomainSize);
      const opened = await Promise.all((result.ciphertexts as string[]).map((c) => opener.open(base64Decode(c, 53))));
      assert.deepEqual(opened, indices);
    });
  }

  it("refuses on a plain-http page of a non-loopback host: not a secure context", async () => {
    // Chromium resolves insecure.test to the loopback server, but the page's origin is
    // http://insecure.test:PORT, which no browser treats as potentially trustworthy.
    const host = "insecure.test";
    const port = new URL(loopback).port;
    const { result } = await runPage(`http://${host}:${port}/page.html?config=/config-submit.json`, 60, [`--host-resolver-rules=MAP ${host} 127.0.0.1`]);
    assert.equal(result.ok, false, JSON.stringify(result));
    assert.equal(result.secure, false);
    const error = result.error as { name: string; message: string };
    assert.equal(error.name, "SecureContextError");
    assert.match(error.message, /needs a secure context \(a page served over HTTPS, or from http:\/\/localhost/);
  });
});

describe("secure-context handling without a browser", () => {
  it("a runtime that says isSecureContext = false gets SecureContextError, not a sealed message", async () => {
    const g = globalThis as { isSecureContext?: boolean };
    g.isSecureContext = false;
    try {
      const { Client } = await import("../src/node.js");
      await assert.rejects(Client.create(parseTask(taskText), { shufflerUrl: "http://127.0.0.1:9" }), SecureContextError);
      await assert.rejects(loadTask(taskText, { expectedDigest: "0".repeat(64) }), SecureContextError);
    } finally {
      delete g.isSecureContext;
    }
  });
});
