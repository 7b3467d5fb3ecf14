// What the bundle embeds of the JSON Schemas (shared by sync-schemas.mjs and the tests).

/** The schema files the client reads, as the Python package ships them. */
export const SCHEMA_FILES = [
  "task.schema.json",
  "defs.schema.json",
  "flip-spec.schema.json",
  "krr-spec.schema.json",
  "correlated-spec.schema.json",
  "augmented-spec.schema.json",
  "submission.schema.json",
];

/** Keywords that never change a verdict (annotations, the dialect URL): left out of the bundle. */
const ANNOTATIONS = new Set(["description", "title", "$comment", "$schema"]);

/**
 * The documents the bundle embeds, by file name: each schema without its annotations
 * and, for defs, only the definitions the other schemas refer to (directly or through defs).
 *
 * @param {Map<string, any>} documents the parsed files, by name
 * @returns {Record<string, unknown>}
 */
export function embedded(documents) {
  const used = usedDefs(documents);
  const out = {};
  for (const [name, schema] of documents) {
    const copy = strip(schema);
    if (name === "defs.schema.json") {
      copy.$defs = Object.fromEntries(Object.entries(copy.$defs).filter(([key]) => used.has(key)));
    }
    out[name] = copy;
  }
  return out;
}

function strip(node) {
  if (Array.isArray(node)) return node.map(strip);
  if (node === null || typeof node !== "object") return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    if (ANNOTATIONS.has(key)) continue;
    out[key] = key === "const" || key === "enum" ? value : strip(value);
  }
  return out;
}

const DEFS_REF = /^urn:shuffledp:schema:defs:\d+#\/\$defs\/(.+)$/;
const LOCAL_REF = /^#\/\$defs\/(.+)$/;

function usedDefs(documents) {
  const defs = documents.get("defs.schema.json").$defs;
  const used = new Set();
  const pending = [];
  const visit = (node, inDefs) => {
    if (Array.isArray(node)) return node.forEach((item) => visit(item, inDefs));
    if (node === null || typeof node !== "object") return;
    for (const [key, value] of Object.entries(node)) {
      if (key === "$ref" && typeof value === "string") {
        const match = DEFS_REF.exec(value) ?? (inDefs ? LOCAL_REF.exec(value) : null);
        if (match && !used.has(match[1])) {
          used.add(match[1]);
          pending.push(defs[match[1]]);
        }
      } else if (key !== "const" && key !== "enum") visit(value, inDefs);
    }
  };
  for (const [name, doc] of documents) if (name !== "defs.schema.json") visit(doc, false);
  while (pending.length) visit(pending.pop(), true);
  return used;
}
