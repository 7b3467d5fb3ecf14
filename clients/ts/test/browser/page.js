// The browser tests' page script. Its configuration (JSON at ?config=URL):
//   bundle       URL of shuffledp-client.min.js
//   task_url     URL of the task document (its text: the digest is Python's)
//   digest       expected task digest (optional)
//   shuffler     the shuffler's base URL
//   mode         "submit": submit `values` (each its own user), `per_request` per request,
//                and return one receipt per submission as the CLI prints them;
//                "seal": seal `indices` and return the ciphertexts (base64);
//                "bench": time `users` users' prepare() (randomize + seal, nothing sent) and
//                the sealing of `seal_messages` messages alone (bench/seal.mjs)
//   kem          "auto" (default), "webcrypto" or "pure-js"
// The outcome, or the error's name and message, goes to window.__shuffledpResult.
const out = { ok: false, secure: globalThis.isSecureContext };
try {
  const config = await (await fetch(new URLSearchParams(location.search).get("config"))).json();
  const shuffledp = await import(config.bundle);
  const text = await (await fetch(config.task_url)).text();
  const task = await shuffledp.loadTask(text, config.digest ? { expectedDigest: config.digest } : {});
  const kem = config.kem ?? "auto";
  if (config.mode === "bench") {
    const client = await shuffledp.Client.create(task, { shufflerUrl: "http://127.0.0.1:9", kem });
    const value = task.domain[0];
    await client.prepare(value); // warm up
    let messages = 0;
    let started = performance.now();
    for (let i = 0; i < config.users; i++) messages += (await client.prepare(value)).ciphertexts.length;
    const prepareSeconds = (performance.now() - started) / 1000;
    const sealer = await shuffledp.MessageSealer.create(task.publicKey, task.taskId, task.messageDomainSize, kem);
    const indices = Array.from({ length: config.seal_messages }, (_, i) => i % task.messageDomainSize);
    started = performance.now();
    await sealer.sealAll(indices);
    const sealSeconds = (performance.now() - started) / 1000;
    Object.assign(out, { ok: true, kem: client.kem, users: config.users, messages, prepare_seconds: prepareSeconds, seal_messages: indices.length, seal_seconds: sealSeconds });
  } else if (config.mode === "seal") {
    const sealer = await shuffledp.MessageSealer.create(task.publicKey, task.taskId, task.messageDomainSize, kem);
    const sealed = await sealer.sealAll(config.indices);
    Object.assign(out, { ok: true, kem: sealer.kem, ciphertexts: sealed.map(shuffledp.base64Encode) });
  } else {
    const client = await shuffledp.Client.create(task, { shufflerUrl: config.shuffler, kem });
    const receipts = [];
    const per = config.per_request ?? 20;
    for (let start = 0; start < config.values.length; start += per) {
      const prepared = await client.prepareMany(config.values.slice(start, start + per));
      for (const request of client.requests(prepared, per)) {
        await client.post(request);
        for (const s of request) {
          receipts.push({
            schema: shuffledp.schemaId("submission"),
            task_id: task.taskId,
            submission_id: s.submissionId,
            messages: s.ciphertexts.length,
          });
        }
      }
    }
    Object.assign(out, { ok: true, kem: client.kem, receipts });
  }
} catch (error) {
  out.error = { name: error?.name ?? "Error", message: String(error?.message ?? error) };
}
document.getElementById("status").textContent = out.ok ? "done" : `failed: ${out.error.message}`;
globalThis.__shuffledpResult = out;
