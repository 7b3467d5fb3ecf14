/**
 * A small JSON Schema (draft 2020-12) validator for the subset the shipped schemas use.
 *
 * It reads the Python package's schema files (embedded by scripts/sync-schemas.mjs) rather
 * than re-spelling their rules. Keywords: type, enum, const, required, properties,
 * additionalProperties, minimum, maximum, exclusiveMinimum, exclusiveMaximum, pattern,
 * items, minItems, uniqueItems, $ref (to another schema's `$id`, with a JSON pointer
 * fragment), allOf, anyOf, not, if/then/else: the keywords the shipped schemas use (the
 * browser build carries no other). A keyword outside that set met
 * while validating is an error ({@link SchemaError}), never skipped: a schema that grows a
 * new rule cannot be half-applied.
 *
 * Instances are {@link JsonValue} trees, which keep Python's int/float distinction: a
 * schema's `integer` accepts an int only (Python's checks refuse `1.0` where an int is due).
 */
import { JsonNumber, type JsonObject, type JsonValue } from "./json.js";
import { SCHEMA_DOCUMENTS } from "./schemas.generated.js";

/** A schema uses a keyword this validator does not implement, or a $ref it cannot resolve. */
export class SchemaError extends Error {
  override name = "SchemaError";
}

/** One reason an instance does not match: where (a JSON pointer) and what. */
export interface Violation {
  readonly path: string;
  readonly message: string;
}

type Schema = boolean | { readonly [keyword: string]: unknown };

const ANNOTATIONS = new Set(["$schema", "$id", "$defs", "$comment", "title", "description"]);
const KNOWN = new Set([
  ...ANNOTATIONS,
  "type",
  "enum",
  "const",
  "required",
  "properties",
  "additionalProperties",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "pattern",
  "items",
  "minItems",
  "uniqueItems",
  "$ref",
  "allOf",
  "anyOf",
  "not",
  "if",
  "then",
  "else",
]);

/** The shipped schemas by `$id`. */
const BY_ID: ReadonlyMap<string, Schema> = new Map(
  Object.values(SCHEMA_DOCUMENTS).map((doc) => {
    const schema = doc as { $id: string };
    return [schema.$id, schema as Schema];
  }),
);

/** The `$id` of a shipped schema by its name (`task`, `krr-spec`, ...). */
export function schemaId(name: string): string {
  const doc = SCHEMA_DOCUMENTS[`${name}.schema.json`] as { $id?: unknown } | undefined;
  if (doc === undefined || typeof doc.$id !== "string") {
    throw new SchemaError(`no shipped schema named ${JSON.stringify(name)}`);
  }
  return doc.$id;
}

/** The schema a `$ref` names (`urn:...:defs:2#/$defs/epsilon`, or a fragment of `base`). */
export function resolveRef(ref: string, base: string): Schema {
  const hash = ref.indexOf("#");
  const id = hash < 0 ? ref : ref.slice(0, hash) || base;
  const pointer = hash < 0 ? "" : ref.slice(hash + 1);
  let node: unknown = BY_ID.get(id);
  if (node === undefined) throw new SchemaError(`unresolvable $ref ${ref}`);
  for (const part of pointer.split("/").slice(1)) {
    const key = part.replace(/~1/g, "/").replace(/~0/g, "~");
    node = (node as Record<string, unknown> | undefined)?.[key];
    if (node === undefined) throw new SchemaError(`unresolvable $ref ${ref}`);
  }
  return node as Schema;
}

function typeOf(value: JsonValue): string {
  if (value === null) return "null";
  if (value instanceof JsonNumber) return value.isFloat ? "number" : "integer";
  if (Array.isArray(value)) return "array";
  if (value instanceof Map) return "object";
  return typeof value; // boolean, string
}

function matchesType(value: JsonValue, type: string): boolean {
  const actual = typeOf(value);
  if (type === "number") {
    return (actual === "number" || actual === "integer") && Number.isFinite((value as JsonNumber).value);
  }
  return actual === type;
}

/** Deep equality of a typed tree and a plain JSON value (a schema's const or enum item). */
function equalsPlain(value: JsonValue, plain: unknown): boolean {
  if (value instanceof JsonNumber) return typeof plain === "number" && value.value === plain;
  if (Array.isArray(value)) {
    return (
      Array.isArray(plain) &&
      plain.length === value.length &&
      value.every((item, i) => equalsPlain(item, plain[i]))
    );
  }
  if (value instanceof Map) {
    if (plain === null || typeof plain !== "object" || Array.isArray(plain)) return false;
    const keys = Object.keys(plain);
    return (
      keys.length === value.size &&
      keys.every((k) => value.has(k) && equalsPlain(value.get(k) as JsonValue, (plain as Record<string, unknown>)[k]))
    );
  }
  return value === plain;
}

function show(plain: unknown): string {
  return JSON.stringify(plain);
}

function showValue(value: JsonValue): string {
  if (value instanceof JsonNumber) return value.isFloat ? String(value.value) : value.digits;
  if (typeof value === "string") return JSON.stringify(value);
  if (value === null || typeof value === "boolean") return String(value);
  return Array.isArray(value) ? "an array" : "an object";
}

function equalValues(a: JsonValue, b: JsonValue): boolean {
  if (a instanceof JsonNumber || b instanceof JsonNumber) {
    return a instanceof JsonNumber && b instanceof JsonNumber && a.value === b.value;
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => equalValues(x, b[i] as JsonValue));
  }
  if (a instanceof Map || b instanceof Map) {
    return (
      a instanceof Map &&
      b instanceof Map &&
      a.size === b.size &&
      [...a].every(([k, v]) => b.has(k) && equalValues(v, b.get(k) as JsonValue))
    );
  }
  return a === b;
}

/**
 * Every violation of `instance` against the schema `$id` (or a `$ref`), in document order
 * (an empty list: it matches).
 *
 * @throws SchemaError if the schema uses a keyword outside the supported subset.
 */
export function validate(id: string, instance: JsonValue): Violation[] {
  const out: Violation[] = [];
  check(resolveRef(id, id), id.split("#")[0] as string, instance, "", out);
  return out;
}

/** Every violation of `instance` against a schema given as a value (refs resolve among the shipped ones). */
export function validateWith(schema: Schema, base: string, instance: JsonValue): Violation[] {
  const out: Violation[] = [];
  check(schema, base, instance, "", out);
  return out;
}

function check(schema: Schema, base: string, value: JsonValue, path: string, out: Violation[]): void {
  if (schema === true) return;
  if (schema === false) {
    out.push({ path, message: "no value is allowed here" });
    return;
  }
  const s = schema;
  const base2 = typeof s.$id === "string" ? s.$id : base;
  for (const keyword of Object.keys(s)) {
    if (!KNOWN.has(keyword)) throw new SchemaError(`schema keyword ${keyword} is not supported (at ${base2})`);
  }
  const fail = (message: string): void => {
    out.push({ path, message });
  };
  if (s.$ref !== undefined) check(resolveRef(s.$ref as string, base2), refBase(s.$ref as string, base2), value, path, out);
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
    if (!types.some((t) => matchesType(value, t))) {
      fail(`must be ${types.join(" or ")}, got ${showValue(value)}`);
      return; // the other keywords would only repeat it
    }
  }
  if (s.const !== undefined && !equalsPlain(value, s.const)) fail(`must be ${show(s.const)}, got ${showValue(value)}`);
  if (s.enum !== undefined && !(s.enum as unknown[]).some((item) => equalsPlain(value, item))) {
    fail(`must be one of ${(s.enum as unknown[]).map(show).join(", ")}, got ${showValue(value)}`);
  }
  if (value instanceof JsonNumber) {
    const x = value.value;
    if (typeof s.minimum === "number" && !(x >= s.minimum)) fail(`must be >= ${s.minimum}, got ${showValue(value)}`);
    if (typeof s.maximum === "number" && !(x <= s.maximum)) fail(`must be <= ${s.maximum}, got ${showValue(value)}`);
    if (typeof s.exclusiveMinimum === "number" && !(x > s.exclusiveMinimum)) {
      fail(`must be > ${s.exclusiveMinimum}, got ${showValue(value)}`);
    }
    if (typeof s.exclusiveMaximum === "number" && !(x < s.exclusiveMaximum)) {
      fail(`must be < ${s.exclusiveMaximum}, got ${showValue(value)}`);
    }
  }
  if (typeof value === "string") {
    if (typeof s.pattern === "string" && !new RegExp(s.pattern, "u").test(value)) {
      fail(`must match ${s.pattern}, got ${showValue(value)}`);
    }
  }
  if (Array.isArray(value)) {
    if (typeof s.minItems === "number" && value.length < s.minItems) fail(`must have at least ${s.minItems} items, got ${value.length}`);
    if (s.uniqueItems === true) {
      for (let i = 1; i < value.length; i++) {
        const j = value.slice(0, i).findIndex((earlier) => equalValues(earlier, value[i] as JsonValue));
        if (j >= 0) {
          fail(`items must be unique: items ${j} and ${i} are both ${showValue(value[i] as JsonValue)}`);
          break;
        }
      }
    }
    if (s.items !== undefined) value.forEach((item, i) => check(s.items as Schema, base2, item, `${path}/${i}`, out));
  }
  if (value instanceof Map) checkObject(s, base2, value, path, out);
  for (const sub of (s.allOf as Schema[] | undefined) ?? []) check(sub, base2, value, path, out);
  if (s.anyOf !== undefined && !(s.anyOf as Schema[]).some((sub) => matches(sub, base2, value, path))) {
    fail("matches none of the allowed forms (anyOf)");
  }
  if (s.not !== undefined && matches(s.not as Schema, base2, value, path)) fail(`must not match ${show(s.not)}`);
  if (s.if !== undefined) {
    const branch = matches(s.if as Schema, base2, value, path) ? s.then : s.else;
    if (branch !== undefined) check(branch as Schema, base2, value, path, out);
  }
}

function refBase(ref: string, base: string): string {
  const hash = ref.indexOf("#");
  return hash === 0 ? base : hash < 0 ? ref : ref.slice(0, hash);
}

function matches(schema: Schema, base: string, value: JsonValue, path: string): boolean {
  const found: Violation[] = [];
  check(schema, base, value, path, found);
  return found.length === 0;
}

function checkObject(s: { readonly [k: string]: unknown }, base: string, value: JsonObject, path: string, out: Violation[]): void {
  for (const key of (s.required as string[] | undefined) ?? []) {
    if (!value.has(key)) out.push({ path, message: `has no field ${JSON.stringify(key)}` });
  }
  const properties = (s.properties as Record<string, Schema> | undefined) ?? {};
  for (const [key, item] of value) {
    const where = `${path}/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`;
    if (Object.hasOwn(properties, key)) check(properties[key] as Schema, base, item, where, out);
    else if (s.additionalProperties !== undefined) {
      if (s.additionalProperties === false) {
        out.push({ path, message: `has a field ${JSON.stringify(key)} its schema does not allow` });
      } else check(s.additionalProperties as Schema, base, item, where, out);
    }
  }
}

/** Whether a schema (after `$ref`s) says its value is a JSON `number` (Python: a float). */
export function isNumberTyped(schema: Schema, base: string): boolean {
  if (typeof schema !== "object") return false;
  if (typeof schema.$ref === "string") return isNumberTyped(resolveRef(schema.$ref, base), refBase(schema.$ref, base));
  const type = schema.type;
  return type === "number" || (Array.isArray(type) && type.includes("number"));
}

/** The `properties` of a schema by `$id` (for the fields of a spec). */
export function propertiesOf(id: string): ReadonlyMap<string, Schema> {
  const schema = resolveRef(id, id);
  if (typeof schema !== "object") return new Map();
  return new Map(Object.entries((schema.properties as Record<string, Schema> | undefined) ?? {}));
}

/** The `enum` (or `const`) of a property of a schema, e.g. the protocols a task can name. */
export function allowedValues(id: string, property: string): readonly unknown[] {
  const node = propertiesOf(id).get(property);
  if (typeof node !== "object") throw new SchemaError(`${id} has no property ${property}`);
  if (Array.isArray(node.enum)) return node.enum as unknown[];
  if (node.const !== undefined) return [node.const];
  throw new SchemaError(`${id}'s ${property} has no enum or const`);
}
