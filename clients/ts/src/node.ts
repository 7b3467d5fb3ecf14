/** The Node entry: everything of the browser entry, plus files and the analyzer's opener. */
import { readFile } from "node:fs/promises";
import { loadTask, fetchTask } from "./index.js";
import type { Task } from "./task.js";

export * from "./index.js";
export { MessageOpener } from "./open.js";
export { fetchWithCa } from "./https.js";

/**
 * A task from a file path or an http(s) URL, checked against `expectedDigest` when given
 * (a URL as {@link fetchTask}: `fetch`, `timeoutSeconds`).
 */
export async function readTask(source: string, options: { expectedDigest?: string; fetch?: typeof fetch; timeoutSeconds?: number } = {}): Promise<Task> {
  if (/^https?:\/\//.test(source)) return fetchTask(source, options);
  let text: string;
  try {
    text = await readFile(source, "utf8");
  } catch (exc) {
    const { TaskError } = await import("./errors.js");
    throw new TaskError(`cannot read the task file ${JSON.stringify(source)}: ${(exc as Error).message}`);
  }
  return loadTask(text, options);
}
