/** The schema copies are the Python package's files; the bundle embeds them faithfully. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { JsonNumber } from "../src/json.js";
import { SchemaError, validate, validateWith } from "../src/schema.js";
import { SCHEMA_DOCUMENTS } from "../src/schemas.generated.js";
import { PACKAGE, REPOSITORY } from "./paths.js";

// @ts-expect-error -- a plain .mjs module of the build scripts, without types
const { SCHEMA_FILES, embedded } = (await import("../../scripts/schema-embed.mjs")) as {
  SCHEMA_FILES: string[];
  embedded: (documents: Map<string, unknown>) => Record<string, unknown>;
};

describe("schemas", () => {
  it("schemas/ holds byte-identical copies of the Python package's schema files", () => {
    for (const name of SCHEMA_FILES) {
      const copy = readFileSync(join(PACKAGE, "schemas", name));
      const original = readFileSync(join(REPOSITORY, "src", "shuffledp", "schemas", name));
      assert.ok(copy.equals(original), `${name} differs from src/shuffledp/schemas/${name}: run npm run sync-schemas`);
    }
  });

  it("the embedded schemas are the copies less annotations and unused definitions", () => {
    const documents = new Map(SCHEMA_FILES.map((name) => [name, JSON.parse(readFileSync(join(PACKAGE, "schemas", name), "utf8")) as unknown]));
    assert.deepEqual(SCHEMA_DOCUMENTS, embedded(documents));
  });

  it("every keyword of every shipped schema, in every branch, is one the validator implements", () => {
    // Validation checks the keywords of the branches it takes; this walks them all, so a
    // schema that grows a keyword the browser build leaves out fails here, not on a device.
    const SUBSCHEMA_MAPS = new Set(["properties", "$defs"]);
    const SUBSCHEMAS = new Set(["items", "additionalProperties", "not", "if", "then", "else"]);
    const SUBSCHEMA_LISTS = new Set(["allOf", "anyOf"]);
    let nodes = 0;
    const walk = (node: unknown, base: string): void => {
      if (typeof node !== "object" || node === null) return;
      const schema = node as Record<string, unknown>;
      const here = typeof schema.$id === "string" ? schema.$id : base;
      // Checked against a value no keyword here reaches (its $ref, if any, is resolved too).
      assert.doesNotThrow(() => validateWith({ ...schema, $ref: undefined, if: undefined }, here, null), `${here}: ${Object.keys(schema).join(", ")}`);
      nodes += 1;
      for (const [key, value] of Object.entries(schema)) {
        if (SUBSCHEMA_MAPS.has(key)) for (const sub of Object.values(value as object)) walk(sub, here);
        else if (SUBSCHEMAS.has(key)) walk(value, here);
        else if (SUBSCHEMA_LISTS.has(key)) for (const sub of value as unknown[]) walk(sub, here);
      }
    };
    for (const document of Object.values(SCHEMA_DOCUMENTS)) walk(document, "");
    assert.ok(nodes > 50, `${nodes} schema nodes walked`);
  });

  it("a keyword outside the supported subset is an error, not skipped", () => {
    assert.throws(
      () => validateWith({ type: "integer", multipleOf: 2 }, "urn:test", JsonNumber.int(3)),
      (exc: unknown) => exc instanceof SchemaError && /keyword multipleOf is not supported/.test(exc.message),
    );
    assert.deepEqual(validateWith({ type: "integer", minimum: 2 }, "urn:test", JsonNumber.int(3)), []);
    assert.throws(
      () => validate("urn:shuffledp:schema:defs:2#/$defs/nope", JsonNumber.int(1)),
      (exc: unknown) => exc instanceof SchemaError && /unresolvable/.test(exc.message),
    );
  });
});
