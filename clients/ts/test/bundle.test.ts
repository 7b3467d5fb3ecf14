/** The browser build stays within its size goal and leaves the pure-JS X25519 to its own file. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import { gzipSync } from "node:zlib";
import { PACKAGE } from "./paths.js";

/** bench/bundle.mjs's goal: 20 KB gzip, read as 20,000 bytes. */
const GOAL_GZIP_BYTES = 20_000;

it(`the browser client (dist/shuffledp-client.min.js) is at most ${GOAL_GZIP_BYTES} bytes gzip -9`, () => {
  const client = readFileSync(join(PACKAGE, "dist", "shuffledp-client.min.js"));
  const gzip = gzipSync(client, { level: 9 }).length;
  assert.ok(gzip <= GOAL_GZIP_BYTES, `${gzip} bytes gzip`);
  // The pure-JS X25519 is imported from the sibling file, not bundled.
  assert.match(client.toString("utf8"), /import\("\.\/shuffledp-x25519-fallback\.min\.js"\)/);
  assert.doesNotMatch(client.toString("utf8"), /noble-curves|montgomery/i);
});
