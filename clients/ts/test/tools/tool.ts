/**
 * What the Python tests (tests/service/test_ts_client_*.py) ask of the TS package, one
 * subcommand each; input on stdin or in arguments, JSON on stdout.
 *
 *   sample TASK_FILE LABEL USERS   one JSON array per user: its sorted message indices
 *                                  (the randomizer with crypto.getRandomValues, no sealing)
 *   seal TASK_FILE KEM             stdin: JSON array of message indices; stdout: their
 *                                  ciphertexts, base64, sealed by the TS package
 *   repr                           stdin: JSON array of numbers; stdout: Python's repr of each
 *   dumps                          stdin: JSON array of JSON texts; stdout: for each, parseJson
 *                                  then pythonDumps (json.dumps, sort_keys, compact), or
 *                                  {error} if parseJson refuses it
 *   digest TASK_FILE               the task's digest and canonical JSON, as the TS package reads it
 *   check-tasks                    stdin: JSON array of {name, text} task documents (text as
 *                                  written); stdout: JSON array of {name, ok, digest | error},
 *                                  whether parseTask accepts each (and the digest it pins)
 *   min-beta                       stdin: JSON array of epsilons; stdout: the smallest SAGeo
 *                                  beta the TS package accepts at each (1 - e^(-epsilon/2))
 */
import { readFileSync } from "node:fs";
import { MessageSealer, Random, TaskError, base64Encode, clientProtocol, indexOf, parseJson, parseTask, pythonDumps, pythonFloatRepr, taskDigest, type KemChoice } from "../../src/node.js";
import { JsonSyntaxError } from "../../src/json.js";
import { minimumBeta } from "../../src/task.js";

const [command, ...args] = process.argv.slice(2);
const stdin = (): string => readFileSync(0, "utf8");
const task = (path: string | undefined) => parseTask(readFileSync(path as string, "utf8"));

if (command === "sample") {
  const t = task(args[0]);
  const index = indexOf(t, args[1] as string);
  const users = Number(args[2]);
  const random = new Random();
  const protocol = clientProtocol(t);
  const lines: string[] = [];
  for (let i = 0; i < users; i++) {
    lines.push(JSON.stringify(protocol.randomize(index, t.domain.length, t.parameters, random, t.maxMessagesPerSubmission)));
  }
  process.stdout.write(lines.join("\n") + "\n");
} else if (command === "seal") {
  const t = task(args[0]);
  const sealer = await MessageSealer.create(t.publicKey, t.taskId, t.messageDomainSize, (args[1] ?? "auto") as KemChoice);
  const indices = JSON.parse(stdin()) as number[];
  const sealed = await sealer.sealAll(indices);
  process.stdout.write(JSON.stringify({ kem: sealer.kem, ciphertexts: sealed.map(base64Encode) }) + "\n");
} else if (command === "repr") {
  const numbers = JSON.parse(stdin()) as number[];
  process.stdout.write(JSON.stringify(numbers.map(pythonFloatRepr)) + "\n");
} else if (command === "dumps") {
  const texts = JSON.parse(stdin()) as string[];
  const out = texts.map((text) => {
    try {
      return pythonDumps(parseJson(text));
    } catch (exc) {
      if (!(exc instanceof JsonSyntaxError)) throw exc;
      return { error: exc.message };
    }
  });
  process.stdout.write(JSON.stringify(out) + "\n");
} else if (command === "digest") {
  const t = task(args[0]);
  process.stdout.write(JSON.stringify({ digest: await taskDigest(t), canonical: t.canonicalJson }) + "\n");
} else if (command === "check-tasks") {
  const documents = JSON.parse(stdin()) as { name: string; text: string }[];
  const out: { name: string; ok: boolean; digest?: string; error?: string }[] = [];
  for (const { name, text } of documents) {
    try {
      out.push({ name, ok: true, digest: await taskDigest(parseTask(text)) });
    } catch (exc) {
      if (!(exc instanceof TaskError)) throw exc; // anything else is a bug, not a refusal
      out.push({ name, ok: false, error: exc.message });
    }
  }
  process.stdout.write(JSON.stringify(out) + "\n");
} else if (command === "min-beta") {
  process.stdout.write(JSON.stringify((JSON.parse(stdin()) as number[]).map(minimumBeta)) + "\n");
} else {
  process.stderr.write(`unknown command ${String(command)}\n`);
  process.exit(2);
}
