/**
 * JSON as Python's `json` module reads and writes it.
 *
 * A task's digest is SHA-256 of `json.dumps(task.to_dict(), sort_keys=True,
 * separators=(",", ":"))`. Python tells an integer (`1`) from a float (`1.0`, `1e-06`) by its
 * spelling, writes floats as `repr` does and escapes every non-ASCII character
 * (`ensure_ascii=True`). `JSON.parse` loses the first distinction, so documents are read into
 * a {@link JsonValue} tree that keeps it; {@link pythonDumps} writes one back Python's way.
 */

/** A JSON number with Python's type: `int` (spelled without `.`, `e` or `E`) or `float`. */
export class JsonNumber {
  constructor(
    /** The value as a double (an int beyond 2^53 is rounded here; `digits` keeps it exactly). */
    readonly value: number,
    /** Whether Python reads it as a float. */
    readonly isFloat: boolean,
    /** An int's exact decimal digits, as Python's `int` prints them. */
    readonly digits: string = "",
  ) {}

  static int(value: bigint | number): JsonNumber {
    const big = BigInt(value);
    return new JsonNumber(Number(big), false, big.toString());
  }

  static float(value: number): JsonNumber {
    return new JsonNumber(value, true);
  }
}

export type JsonValue = null | boolean | string | JsonNumber | JsonValue[] | JsonObject;
/** An object; keys in the order read, a repeated key keeping its last value (as Python's dict). */
export type JsonObject = Map<string, JsonValue>;

export class JsonSyntaxError extends Error {
  override name = "JsonSyntaxError";
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
const WHITESPACE = /[ \t\n\r]*/y;
// A JSON string token (RFC 8259: no U+0000 to U+001F unescaped).
const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;

/** Parse JSON text (RFC 8259; no NaN or Infinity) into a typed tree. */
export function parseJson(text: string): JsonValue {
  let at = 0;
  const fail = (what: string): never => {
    throw new JsonSyntaxError(`${what} at character ${at}`);
  };
  const skip = (): void => {
    WHITESPACE.lastIndex = at;
    WHITESPACE.exec(text);
    at = WHITESPACE.lastIndex;
  };
  const value = (depth: number): JsonValue => {
    if (depth > 512) fail("nesting too deep");
    skip();
    const c = text[at];
    if (c === "{") {
      at++;
      const out: JsonObject = new Map();
      skip();
      if (text[at] === "}") {
        at++;
        return out;
      }
      for (;;) {
        skip();
        if (text[at] !== '"') fail("expected a string key");
        const key = string();
        skip();
        if (text[at] !== ":") fail("expected ':'");
        at++;
        out.set(key, value(depth + 1)); // a repeated key: the last value, the first place (a dict)
        skip();
        if (text[at] === ",") {
          at++;
          continue;
        }
        if (text[at] === "}") {
          at++;
          return out;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      at++;
      const out: JsonValue[] = [];
      skip();
      if (text[at] === "]") {
        at++;
        return out;
      }
      for (;;) {
        out.push(value(depth + 1));
        skip();
        if (text[at] === ",") {
          at++;
          continue;
        }
        if (text[at] === "]") {
          at++;
          return out;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c === '"') return string();
    for (const [word, result] of [
      ["true", true],
      ["false", false],
      ["null", null],
    ] as const) {
      if (text.startsWith(word, at)) {
        at += word.length;
        return result;
      }
    }
    NUMBER.lastIndex = at;
    const match = NUMBER.exec(text);
    if (match === null) return fail("expected a JSON value");
    at = NUMBER.lastIndex;
    const lexeme = match[0];
    if (match[1] !== undefined || match[2] !== undefined) return JsonNumber.float(Number(lexeme));
    return JsonNumber.int(BigInt(lexeme));
  };
  const string = (): string => {
    // A string token as RFC 8259 spells it; JSON.parse reads its escapes (lone surrogates
    // included, as Python's json does).
    STRING.lastIndex = at;
    if (STRING.exec(text) === null) fail("invalid string (unterminated, a control character or a bad escape)");
    const token = text.slice(at, STRING.lastIndex);
    at = STRING.lastIndex;
    return JSON.parse(token) as string;
  };
  const result = value(0);
  skip();
  if (at !== text.length) fail("extra data");
  return result;
}

/** A typed tree from a plain JS value (as `JSON.parse` gives): an integral number is an int. */
export function fromPlain(value: unknown): JsonValue {
  if (value === null || typeof value === "boolean" || typeof value === "string") return value;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new JsonSyntaxError(`${value} is not a JSON number`);
    return Number.isInteger(value) && !Object.is(value, -0)
      ? JsonNumber.int(value)
      : JsonNumber.float(value);
  }
  if (Array.isArray(value)) return value.map(fromPlain);
  if (typeof value === "object") {
    const out: JsonObject = new Map();
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      out.set(key, fromPlain(item));
    }
    return out;
  }
  throw new JsonSyntaxError(`a ${typeof value} is not a JSON value`);
}

/** The plain JS value of a typed tree (numbers as doubles, objects as plain objects). */
export function toPlain(value: JsonValue): unknown {
  if (value instanceof JsonNumber) return value.value;
  if (Array.isArray(value)) return value.map(toPlain);
  if (value instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of value) {
      Object.defineProperty(out, key, { value: toPlain(item), enumerable: true, writable: true });
    }
    return out;
  }
  return value;
}

/** Python's `repr(float)`: the shortest digits that read back, `1e-06`, `1e+16`, `100.0`. */
export function pythonFloatRepr(x: number): string {
  if (Number.isNaN(x)) return "NaN";
  if (x === Infinity) return "Infinity";
  if (x === -Infinity) return "-Infinity";
  const sign = x < 0 || Object.is(x, -0) ? "-" : "";
  const [mantissa, exp] = Math.abs(x).toExponential().split("e") as [string, string];
  const digits = mantissa.replace(".", "");
  const e = Number(exp);
  if (e < -4 || e >= 16) {
    const rest = digits.length > 1 ? `.${digits.slice(1)}` : "";
    const magnitude = String(Math.abs(e)).padStart(2, "0");
    return `${sign}${digits[0]}${rest}e${e < 0 ? "-" : "+"}${magnitude}`;
  }
  if (e < 0) return `${sign}0.${"0".repeat(-e - 1)}${digits}`;
  const whole = digits.slice(0, e + 1).padEnd(e + 1, "0");
  const fraction = digits.slice(e + 1) || "0";
  return `${sign}${whole}.${fraction}`;
}

/**
 * A string as `json.dumps(..., ensure_ascii=True)` writes it: `JSON.stringify`'s escapes
 * (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other controls and lone surrogates as
 * lower-case `\u00XX`), then every code unit outside U+0020 to U+007E as `\uXXXX` too.
 */
export function pythonString(text: string): string {
  return JSON.stringify(text).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** Python's order of str keys: by code point (not by UTF-16 code unit). */
function compareCodePoints(a: string, b: string): number {
  const x = Array.from(a, (ch) => ch.codePointAt(0) as number);
  const y = Array.from(b, (ch) => ch.codePointAt(0) as number);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return (x[i] as number) - (y[i] as number);
  }
  return x.length - y.length;
}

/**
 * `json.dumps(value, sort_keys=True, separators=(",", ":"))` of the value Python would hold:
 * what `Task.digest()` hashes.
 */
export function pythonDumps(value: JsonValue): string {
  if (value === null) return "null";
  if (value === true) return "true";
  if (value === false) return "false";
  if (typeof value === "string") return pythonString(value);
  if (value instanceof JsonNumber) {
    return value.isFloat ? pythonFloatRepr(value.value) : value.digits;
  }
  if (Array.isArray(value)) return `[${value.map(pythonDumps).join(",")}]`;
  const keys = [...value.keys()].sort(compareCodePoints);
  return `{${keys.map((k) => `${pythonString(k)}:${pythonDumps(value.get(k) as JsonValue)}`).join(",")}}`;
}
