// Sizes of the browser build (run `npm run build` first): raw and gzip -9 (Node's zlib).
// Prints one JSON object. The client is dist/shuffledp-client.min.js; the pure-JS X25519
// fallback is a separate file a browser downloads only when its WebCrypto lacks X25519.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const dist = join(dirname(fileURLToPath(import.meta.url)), "..", "dist");
const size = (name) => {
  const bytes = readFileSync(join(dist, name));
  return { bytes: bytes.length, gzip_bytes: gzipSync(bytes, { level: 9 }).length };
};
const client = size("shuffledp-client.min.js");
const fallback = size("shuffledp-x25519-fallback.min.js");
console.log(
  JSON.stringify(
    {
      benchmark: "clients/ts bundle size",
      client_min_js: client,
      x25519_fallback_min_js: fallback,
      goal_gzip_bytes: 20_000,
      client_within_goal: client.gzip_bytes <= 20_000,
    },
    null,
    2,
  ),
);
