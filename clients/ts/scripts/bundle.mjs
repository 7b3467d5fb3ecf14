// The browser build, in dist/:
//   shuffledp-client.min.js        the client (ESM, minified), from src/index.ts;
//   shuffledp-x25519-fallback.min.js  @hpke/dhkem-x25519, the pure-JS X25519, self-contained:
//                                  imported (relative to the client's URL) only by a browser
//                                  whose WebCrypto lacks X25519, so others never download it;
//   *.LEGAL.txt                    the bundled packages' license comments (noble-curves, MIT).
//
// @hpke/common's entry re-exports pure-JS hashes and curve arithmetic (hmac, sha2, sha3,
// montgomery) that the client never calls: WebCrypto does its HKDF and X25519, and the
// pure-JS X25519 is the separate fallback file. Their modules run code at load (constant
// tables, properties set on functions), so esbuild keeps them although nothing uses
// them (2.5 kB). The client's build reads that entry without those re-exports; if any code
// bundled here needed one, esbuild would stop with "No matching export", never build
// without it. The fallback file is built from the unchanged entry.
import { build } from "esbuild";
import { readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
export const FALLBACK = "shuffledp-x25519-fallback.min.js";
const common = { bundle: true, format: "esm", platform: "browser", target: ["es2022"], minify: true, legalComments: "external", logLevel: "warning" };

const COMMON = join(pkg, "node_modules", "@hpke", "common", "esm");
const UNUSED_IN_THE_CLIENT = /^export .* from "\.\/src\/(hash|curve)\/[^"]+";$/;

/** @hpke/common's entry without the re-exports of UNUSED_IN_THE_CLIENT. */
function commonWithoutPureJsPrimitives() {
  const lines = readFileSync(join(COMMON, "mod.js"), "utf8").split("\n");
  const kept = lines.filter((line) => !UNUSED_IN_THE_CLIENT.test(line));
  if (kept.length === lines.length) throw new Error("bundle: @hpke/common's entry changed: no hash/curve re-export found");
  return kept.join("\n");
}

rmSync(join(pkg, "dist"), { recursive: true, force: true });
await build({
  ...common,
  entryPoints: [join(pkg, "src", "index.ts")],
  outfile: join(pkg, "dist", "shuffledp-client.min.js"),
  plugins: [
    {
      name: "x25519-fallback",
      setup(b) {
        // The dynamic import of the pure-JS KEM becomes a sibling file of the bundle.
        b.onResolve({ filter: /^@hpke\/dhkem-x25519$/ }, () => ({ path: `./${FALLBACK}`, external: true }));
        b.onResolve({ filter: /^@hpke\/common$/ }, () => ({ path: join(COMMON, "mod.js"), namespace: "hpke-common-client" }));
        b.onLoad({ filter: /.*/, namespace: "hpke-common-client" }, () => ({
          contents: commonWithoutPureJsPrimitives(),
          resolveDir: COMMON,
          loader: "js",
        }));
      },
    },
  ],
});
await build({
  ...common,
  entryPoints: [join(pkg, "node_modules", "@hpke", "dhkem-x25519", "esm", "mod.js")],
  outfile: join(pkg, "dist", FALLBACK),
});
