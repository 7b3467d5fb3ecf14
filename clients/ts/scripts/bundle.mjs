// The browser build, in dist/:
//   shuffledp-client.min.js        the client (ESM, minified), from src/index.ts;
//   shuffledp-x25519-fallback.min.js  @hpke/dhkem-x25519, the pure-JS X25519, self-contained:
//                                  imported (relative to the client's URL) only by a browser
//                                  whose WebCrypto lacks X25519, so others never download it;
//   *.LEGAL.txt                    the bundled packages' license comments (noble-curves, MIT).
import { build } from "esbuild";
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
export const FALLBACK = "shuffledp-x25519-fallback.min.js";
const common = { bundle: true, format: "esm", platform: "browser", target: ["es2022"], minify: true, legalComments: "external", logLevel: "warning" };

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
      },
    },
  ],
});
await build({
  ...common,
  entryPoints: [join(pkg, "node_modules", "@hpke", "dhkem-x25519", "esm", "mod.js")],
  outfile: join(pkg, "dist", FALLBACK),
});
