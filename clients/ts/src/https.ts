/**
 * A `fetch` for Node that trusts the CA certificates it is given, in place of the default
 * ones (Node's own `fetch` takes no CA): for a shuffler whose certificate a private CA
 * signed, or a self-signed one. `https:` URLs go through `node:https` with that CA; any
 * other URL through the global `fetch`. Node only (the browser trusts its own store).
 *
 * ```ts
 * const fetch = fetchWithCa(readFileSync("ca.pem", "utf8"));
 * const task = await readTask("https://shuffler.example:8443/v1/tasks/ID", { fetch, expectedDigest });
 * const client = await Client.create(task, { shufflerUrl: "https://shuffler.example:8443", fetch });
 * ```
 */
import { Agent, request } from "node:https";

/** `fetch` over `node:https` trusting `ca` (PEM certificates) only. */
export function fetchWithCa(ca: string): typeof fetch {
  const agent = new Agent({ ca, keepAlive: true });
  return ((input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (url.protocol !== "https:") return globalThis.fetch(input, init);
    const signal = init.signal ?? undefined;
    return new Promise<Response>((resolve, reject) => {
      const headers: Record<string, string> = {};
      new Headers(init.headers ?? undefined).forEach((value, name) => (headers[name] = value));
      const sent = request(url, { method: init.method ?? "GET", headers, agent, ...(signal === undefined ? {} : { signal }) }, (answer) => {
        const chunks: Buffer[] = [];
        answer.on("data", (chunk: Buffer) => chunks.push(chunk));
        answer.on("error", reject);
        answer.on("close", () => {
          if (!answer.complete) reject(signal?.aborted === true ? signal.reason : new Error("the connection closed before the answer's end"));
        });
        answer.on("end", () => {
          const status = answer.statusCode ?? 0;
          const body = [101, 204, 205, 304].includes(status) ? null : new Uint8Array(Buffer.concat(chunks));
          const fields: [string, string][] = [];
          for (const [name, value] of Object.entries(answer.headers)) {
            for (const item of Array.isArray(value) ? value : value === undefined ? [] : [value]) fields.push([name, item]);
          }
          resolve(new Response(body, { status, headers: fields }));
        });
      });
      sent.on("error", (exc) => reject(signal?.aborted === true ? signal.reason : exc));
      sent.end(typeof init.body === "string" ? init.body : undefined);
    });
  }) as typeof fetch;
}
