// Seal rate of one correlated user at d = 100 (randomize + seal every message: Client.prepare,
// nothing sent), and of sealing alone, in Node (WebCrypto X25519 and pure-JS X25519), in
// headless Chromium (when /usr/bin/chromium exists) and in Python (the repository's .venv:
// service.client.Client.prepare and wire.MessageSealer). Prints one JSON object.
//
// The task's parameters are those `shuffledp task create --protocol correlated
// --domain-name range:1-100 --epsilon 1 --delta 1e-6 --min-batch-users 1000` calibrates
// (a user sends about 60 messages, mostly flooding pairs); its key is fresh.
//
// Usage: node bench/seal.mjs [--users N] [--seal-messages M]   (after `npm run build`)
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client, MessageSealer, base64Encode, parseTask } from "../build/src/node.js";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = join(here, "..");
const repo = join(pkg, "..", "..");
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : Number(process.argv[i + 1]);
};
const USERS = arg("--users", 200);
const SEAL_MESSAGES = arg("--seal-messages", 4000);

const { publicKey } = await crypto.subtle.generateKey({ name: "X25519" }, true, ["deriveBits"]);
const raw = new Uint8Array(await crypto.subtle.exportKey("raw", publicKey));
const document = {
  schema: "urn:shuffledp:schema:task:1",
  format: "shuffledp-task/1",
  task_id: "0123456789abcdef0123456789abcdef",
  protocol: "correlated",
  domain: Array.from({ length: 100 }, (_, i) => String(i + 1)),
  domain_source: "builtin:range:1-100",
  parameters: {
    alpha: 0.6342253320600151,
    flood_r: 15.762249441942016,
    flood_q: 0.9507356856424147,
    min_honest: 1000,
    neighbours: "replacement",
    slack: 0.1,
    calibration: "exact",
  },
  epsilon: 1.0,
  delta: 1e-6,
  min_batch_users: 1000,
  max_messages_per_submission: 3067,
  one_submission_per_client: false,
  message_format: 1,
  hpke: { kem: "X25519", kdf: "HKDF_SHA256", aead: "CHACHA20_POLY1305" },
  public_key: base64Encode(raw),
  shuffledp_version: "bench",
};
const text = JSON.stringify(document, null, 2);
const task = parseTask(text);

async function node(kem) {
  const client = await Client.create(task, { shufflerUrl: "http://127.0.0.1:9", kem });
  await client.prepare("1");
  let messages = 0;
  let started = performance.now();
  for (let i = 0; i < USERS; i++) messages += (await client.prepare("1")).ciphertexts.length;
  const prepareSeconds = (performance.now() - started) / 1000;
  const sealer = await MessageSealer.create(task.publicKey, task.taskId, task.messageDomainSize, kem);
  const indices = Array.from({ length: SEAL_MESSAGES }, (_, i) => i % task.messageDomainSize);
  started = performance.now();
  await sealer.sealAll(indices);
  const sealSeconds = (performance.now() - started) / 1000;
  return rates({ kem: client.kem, users: USERS, messages, prepare_seconds: prepareSeconds, seal_messages: SEAL_MESSAGES, seal_seconds: sealSeconds });
}

function rates(r) {
  return {
    ...r,
    messages_per_user: r.messages / r.users,
    users_per_second: r.users / r.prepare_seconds,
    prepare_messages_per_second: r.messages / r.prepare_seconds,
    seal_messages_per_second: r.seal_messages / r.seal_seconds,
  };
}

async function chromium() {
  const executable = process.env.CHROMIUM ?? "/usr/bin/chromium";
  if (!existsSync(executable)) return { skipped: `no Chromium at ${executable}` };
  const { runPage } = await import("../build/test/browser/driver.js");
  const files = {
    "/task.json": text,
    "/config.json": JSON.stringify({ bundle: "/dist/shuffledp-client.min.js", task_url: "/task.json", mode: "bench", users: USERS, seal_messages: SEAL_MESSAGES }),
  };
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://x").pathname;
    let body = files[path];
    if (body === undefined && path.startsWith("/dist/") && !path.includes("..")) body = readFileSync(join(pkg, path));
    if (body === undefined && (path === "/page.html" || path === "/page.js")) body = readFileSync(join(pkg, "test", "browser", path));
    if (body === undefined) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { "Content-Type": { ".js": "text/javascript", ".html": "text/html" }[extname(path)] ?? "application/json" });
    response.end(body);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const { result } = await runPage(`http://127.0.0.1:${server.address().port}/page.html?config=/config.json`, 300);
    if (!result.ok) return { error: result.error };
    return rates(result);
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

function python() {
  const venv = join(repo, ".venv", "bin", "python");
  if (!existsSync(venv)) return { skipped: `no ${venv}` };
  const dir = mkdtempSync(join(tmpdir(), "shuffledp-bench-"));
  try {
    writeFileSync(join(dir, "task.json"), text);
    const script = `
import json, sys, time
from shuffledp.service.client import Client
from shuffledp.service.task import load_task
from shuffledp.service.wire import MessageSealer, public_key_from_b64
task = load_task(sys.argv[1]); users = int(sys.argv[2]); count = int(sys.argv[3])
client = Client(task, "http://127.0.0.1:9")
client.prepare("1")
started = time.perf_counter(); messages = sum(len(client.prepare("1").ciphertexts) for _ in range(users))
prepare = time.perf_counter() - started
sealer = MessageSealer(public_key_from_b64(task.public_key), task.task_id, task.message_domain_size)
started = time.perf_counter(); sealer.seal_all([i % task.message_domain_size for i in range(count)])
seal = time.perf_counter() - started
client.close()
print(json.dumps({"users": users, "messages": messages, "prepare_seconds": prepare, "seal_messages": count, "seal_seconds": seal}))
`;
    const out = execFileSync(venv, ["-c", script, join(dir, "task.json"), String(USERS), String(SEAL_MESSAGES)], { encoding: "utf8" });
    return rates({ kem: "cryptography (OpenSSL)", ...JSON.parse(out) });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const result = {
  benchmark: "seal rate of a correlated user at d = 100 (m = 1000, epsilon 1, delta 1e-6)",
  machine: { cpus: cpus().length, load_average_1m: loadavg()[0], node: process.version },
  node_webcrypto: await node("webcrypto"),
  node_pure_js: await node("pure-js"),
  chromium: await chromium(),
  python: python(),
};
console.log(JSON.stringify(result, null, 2));
