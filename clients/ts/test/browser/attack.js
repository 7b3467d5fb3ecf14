// What a page on any site can try against a shuffler its visitors' browsers can reach:
// requests that need no preflight (fetch in no-cors mode with text/plain, an HTML form
// POST) and one that does (a JSON fetch in cors mode). The Python test reads the outcomes
// in window.__shuffledpResult and then checks that the shuffler stored nothing.
(async () => {
  const outcomes = {};
  try {
    const config = await (await fetch("config.json")).json();
    const body = config.body;
    try {
      const answer = await fetch(config.url, {
        method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body,
      });
      outcomes.no_cors_text = `opaque response (type ${answer.type})`;
    } catch (error) {
      outcomes.no_cors_text = `network error: ${error}`;
    }
    if (config.cors_json) try {
      const answer = await fetch(config.url, {
        method: "POST", mode: "cors", headers: { "Content-Type": "application/json" }, body,
      });
      outcomes.cors_json = `status ${answer.status}`;
    } catch (error) {
      outcomes.cors_json = `blocked: ${error}`;
    }
    // An HTML form posting text/plain into a hidden frame (a top-level navigation needs no
    // preflight either).
    await new Promise((resolve) => {
      const frame = document.createElement("iframe");
      frame.name = "sink";
      frame.style.display = "none";
      frame.addEventListener("load", () => resolve(undefined), { once: true });
      document.body.appendChild(frame);
      const form = document.createElement("form");
      form.method = "POST";
      form.action = config.url;
      form.enctype = "text/plain";
      form.target = "sink";
      const field = document.createElement("input");
      field.type = "hidden";
      field.name = body.slice(0, body.length - 2); // name=value re-forms the JSON text
      field.value = body.slice(body.length - 2);
      form.appendChild(field);
      document.body.appendChild(form);
      form.submit();
      setTimeout(() => resolve(undefined), 5000);
    });
    outcomes.form_text = "submitted";
    globalThis.__shuffledpResult = { ok: true, outcomes };
  } catch (error) {
    globalThis.__shuffledpResult = { ok: false, error: String(error), outcomes };
  }
})();
