/**
 * What the Python tests (tests/service/test_ts_client_*.py) ask of the TS package, one
 * subcommand each; input on stdin or in arguments, JSON on stdout.
 *
 *   sample TASK_FILE LABEL USERS   one JSON array per user: its sorted message indices
 *                                  (the randomizer with crypto.getRandomValues, no sealing)
 *   seal TASK_FILE KEM             stdin: JSON array of message indices; stdout: their
 *                                  ciphertexts, base64, sealed by the TS package
 *   repr                           stdin: JSON array of numbers; stdout: Python's repr of each
 *   digest TASK_FILE               the task's digest and canonical JSON, as the TS package reads it
 */
import { readFileSync } from "node:fs";
import { MessageSealer, Random, base64Encode, clientProtocol, indexOf, parseTask, pythonFloatRepr, taskDigest, type KemChoice } from "../../src/node.js";

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
} else if (command === "digest") {
  const t = task(args[0]);
  process.stdout.write(JSON.stringify({ digest: await taskDigest(t), canonical: t.canonicalJson }) + "\n");
} else {
  process.stderr.write(`unknown command ${String(command)}\n`);
  process.exit(2);
}
