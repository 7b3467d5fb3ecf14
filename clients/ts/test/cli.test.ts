/**
 * The command (build/src/cli.js) as a process, against a recording HTTP server on loopback
 * that answers or hangs on demand: Ctrl-C while a request is in flight, the file it saves,
 * --resend, --first-line, and the refusals of --resend and --ca-file. (The real shuffler:
 * tests/service/test_ts_client_end_to_end.py, with the shuffler stopped by SIGSTOP for the
 * request in flight, and over HTTPS with --ca-file.)
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { type Server, createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { PACKAGE, wireVectors } from "./paths.js";

const CLI = join(PACKAGE, "build", "src", "cli.js");
const vectors = wireVectors();
const taskText = (vectors.tasks[0] as { text: string }).text; // k-RR over 9 labels, "plain" among them

interface Body {
  format: string;
  submissions: { submission_id: string; ciphertexts: string[]; token?: string }[];
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe("the command: Ctrl-C, --resend, --ca-file", () => {
  let server: Server;
  let base = "";
  let dir = "";
  let taskFile = "";
  /** Bodies of the requests the server answered or is holding, in order. */
  const bodies: string[] = [];
  /** How many more requests to answer before hanging (Infinity: answer all). */
  let answer = Infinity;
  /** Called with the body of a request the server hangs on. */
  let onHang: (body: string) => void = () => undefined;
  /** Commands still running (killed at the end, should a test fail first). */
  const running = new Set<ChildProcess>();

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "shuffledp-cli-"));
    taskFile = join(dir, "task.json");
    writeFileSync(taskFile, taskText);
    server = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
      request.on("end", () => {
        if (request.url?.startsWith("/hang")) return; // a task URL that never answers
        bodies.push(body);
        if (answer <= 0) {
          onHang(body);
          return;
        }
        answer -= 1;
        const ids = (JSON.parse(body) as Body).submissions.map((s) => s.submission_id);
        response.writeHead(200, { "Content-Type": "application/json" });
        response.end(JSON.stringify({ status: "accepted", submission_ids: ids }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    assert.ok(address !== null && typeof address === "object");
    base = `http://127.0.0.1:${address.port}`;
  });
  after(() => {
    for (const child of running) child.kill("SIGKILL");
    server.closeAllConnections();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Start the command in `dir`. */
  function start(args: string[]): { child: ChildProcess; done: Promise<Run> } {
    const child = spawn(process.execPath, [CLI, "submit", ...args], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
    running.add(child);
    child.on("exit", () => running.delete(child));
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    const done = new Promise<Run>((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
    return { child, done };
  }

  /** Run the command to its end; the server answers `hangAfter` requests, then holds them (`interrupt`: Ctrl-C then). */
  async function run(args: string[], { hangAfter = Infinity, interrupt = false } = {}): Promise<Run> {
    bodies.length = 0;
    answer = hangAfter;
    const { child, done } = start(args);
    onHang = () => {
      if (interrupt) child.kill("SIGINT");
    };
    const result = await done;
    answer = Infinity;
    server.closeAllConnections(); // the held requests
    return result;
  }

  const receipts = (stdout: string): { submission_id: string; messages: number; task_id: string }[] =>
    stdout
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as { submission_id: string; messages: number; task_id: string });

  const savedFile = (stderr: string): string => {
    const match = /saved as sent in (\S+\.json) \(resend them with --resend \1: the same submission ids, which the shuffler stores once\)/.exec(stderr);
    assert.ok(match !== null, stderr);
    return match[1] as string;
  };

  it("Ctrl-C abandons the request in flight, saves it as sent (0600) and says what was stored, in flight and not sent; --resend and --first-line finish", { timeout: 60_000 }, async () => {
    const values = join(dir, "values.txt");
    writeFileSync(values, "plain\ncaf\u00e9\nplain\nplain\nplain\n");
    const common = ["--task", taskFile, "--shuffler", base, "--retry-seconds", "30"];
    const first = await run([...common, "--values-file", values, "--per-request", "2"], { hangAfter: 1, interrupt: true });
    assert.equal(first.code, 130, first.stderr);
    const stored = receipts(first.stdout);
    assert.equal(stored.length, 2);
    assert.equal(bodies.length, 2);
    const held = JSON.parse(bodies[1] as string) as Body;
    const path = savedFile(first.stderr);
    const id = held.submissions[0]?.submission_id.slice(0, 8);
    assert.equal(path, join(dir, `shuffledp-in-flight-lines-3-4-${id}.json`));
    assert.equal(
      first.stderr,
      `shuffledp-client: interrupted: lines 1-2 of 5 stored (receipts on stdout); lines 3-4 in flight, maybe stored: ` +
        `saved as sent in ${path} (resend them with --resend ${path}: the same submission ids, which the shuffler stores once); ` +
        `line 5 not sent (resume with --first-line 5)\n`,
    );
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.equal(readFileSync(path, "utf8"), `${bodies[1]}\n`); // the body as it was sent

    const again = await run([...common, "--resend", path]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(bodies.length, 1);
    assert.deepEqual(JSON.parse(bodies[0] as string), held); // the same ids and ciphertexts
    assert.deepEqual(
      receipts(again.stdout).map((r) => [r.submission_id, r.messages]),
      held.submissions.map((s) => [s.submission_id, s.ciphertexts.length]),
    );
    assert.match(again.stderr, new RegExp(`^shuffledp-client submit: 2 submissions \\(2 encrypted messages\\) in 1 request of at most 2 to ${base}, .*; resent from ${path} \\(an id the shuffler had is answered as stored, not stored twice\\)\\n$`));

    const rest = await run([...common, "--values-file", values, "--first-line", "5", "--quiet"]);
    assert.equal(rest.code, 0, rest.stderr);
    assert.equal(rest.stderr, "");
    assert.equal(receipts(rest.stdout).length, 1);
    const ids = new Set([...stored, ...receipts(again.stdout), ...receipts(rest.stdout)].map((r) => r.submission_id));
    assert.equal(ids.size, 5);
  });

  it("Ctrl-C with --value saves the one submission; with --resend the file still holds them", { timeout: 60_000 }, async () => {
    const common = ["--task", taskFile, "--shuffler", base];
    const one = await run([...common, "--value", "plain"], { hangAfter: 0, interrupt: true });
    assert.equal(one.code, 130);
    assert.equal(one.stdout, "");
    const path = savedFile(one.stderr);
    assert.match(one.stderr, /^shuffledp-client: interrupted: the submission was in flight, maybe stored: saved as sent in \S+shuffledp-in-flight-lines-1-1-[0-9a-f]{8}\.json/);
    assert.equal(readFileSync(path, "utf8"), `${bodies[0]}\n`);
    const resent = await run([...common, "--resend", path], { hangAfter: 0, interrupt: true });
    assert.equal(resent.code, 130);
    assert.equal(
      resent.stderr,
      `shuffledp-client: interrupted: the submissions of ${path} were in flight again, maybe stored; the file still holds them: resend them with --resend ${path}\n`,
    );
    assert.equal(bodies[0], readFileSync(path, "utf8").trim());
  });

  it("Ctrl-C before anything is sent (a task URL that does not answer) ends at once, saving nothing", { timeout: 30_000 }, async () => {
    const { child, done } = start(["--task", `${base}/hang`, "--shuffler", base, "--value", "plain"]);
    setTimeout(() => child.kill("SIGINT"), 500);
    const result = await done;
    assert.equal(result.code, 130);
    assert.equal(result.stderr, "shuffledp-client: interrupted\n");
  });

  it("refuses a bad --resend, --resend with a token or a --values-file option, and a bad --ca-file, sending nothing", { timeout: 60_000 }, async () => {
    const common = ["--task", taskFile, "--shuffler", base];
    const file = (name: string, text: string): string => {
      const path = join(dir, name);
      writeFileSync(path, text, { mode: 0o600 });
      return path;
    };
    const body = (submissions: unknown): string => JSON.stringify({ format: "shuffledp-submissions/1", submissions });
    const ciphertext = Buffer.alloc(53, 7).toString("base64");
    const cases: [string[], RegExp][] = [
      [["--resend", join(dir, "absent.json")], /in-flight submissions file ".*absent.json" does not exist/],
      [["--resend", file("text.json", "not json")], /--resend ".*text.json" is not JSON/],
      [["--resend", file("empty-list.json", body([]))], /is not a submissions request \(format "shuffledp-submissions\/1" with a non-empty list of submissions\)/],
      [["--resend", file("no-id.json", body([{ ciphertexts: [ciphertext] }]))], /a submission lacks its submission_id or ciphertexts/],
      [["--resend", file("short.json", body([{ submission_id: "a".repeat(32), ciphertexts: ["AAAA"] }]))], /--resend ".*short.json": ciphertext has 3 bytes, expected 53/],
      [["--resend", file("ok.json", body([{ submission_id: "a".repeat(32), ciphertexts: [ciphertext] }])), "--token", "t"], /--token: the resent submissions carry their own tokens/],
      [["--resend", join(dir, "ok.json"), "--first-line", "2"], /--first-line goes with --values-file, not --resend/],
      [["--value", "plain", "--per-request", "2"], /--per-request goes with --values-file, not --value/],
      [["--value", "plain", "--resend", join(dir, "ok.json")], /give exactly one of --value, --values-file and --resend/],
      [["--value", "plain", "--ca-file", "/dev/null"], /--ca-file "\/dev\/null": cannot read CA certificates from it \(no PEM certificate in it\)/],
      [["--value", "plain", "--ca-file", join(dir, "absent.pem")], /--ca-file ".*absent.pem": cannot read CA certificates from it \(no such file\)/],
      [["--value", "plain", "--ca-file", file("bad.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")], /--ca-file ".*bad.pem": cannot read CA certificates from it \(/],
    ];
    for (const [args, message] of cases) {
      const result = await run([...common, ...args]);
      assert.equal(result.code, 2, `${args.join(" ")}: ${result.stderr}`);
      assert.equal(result.stdout, "");
      assert.match(result.stderr, message, args.join(" "));
      assert.equal(bodies.length, 0, args.join(" "));
    }
  });
});
