// A JSON parser that remembers where each value came from.
//
// JSON.parse loses two things the console needs: the exact bytes of an
// audit event (its hash covers those bytes, so the browser must hash them
// as they arrived, not a re-encoding) and the exact text of a payload
// (an amount like 12345678901234567890 or 1.10 must be shown as the agent
// sent it, not as a JavaScript number prints it). parse returns ordinary
// values and records, for every object member and array element, the span
// of source text it was parsed from; raw gives that text back.

const spans = new WeakMap(); // object or array -> { text, at: Map(key -> [start, end]) }

export class JSONError extends Error {}

// parse parses text as one JSON value (RFC 8259), strictly.
export function parse(text) {
  const p = new Parser(text);
  const v = p.value();
  p.ws();
  if (p.i !== text.length) p.fail("the end of the document");
  return v;
}

// raw returns the source text of container[key] exactly as it was in the
// parsed document (undefined when container was not parsed here or has no
// such member).
export function raw(container, key) {
  const s = container && typeof container === "object" ? spans.get(container) : undefined;
  const at = s && s.at.get(key);
  return at ? s.text.slice(at[0], at[1]) : undefined;
}

class Parser {
  constructor(text) {
    this.t = text;
    this.i = 0;
  }

  fail(what) {
    throw new JSONError(`JSON: expected ${what} at offset ${this.i}`);
  }

  ws() {
    const t = this.t;
    while (this.i < t.length) {
      const c = t.charCodeAt(this.i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) this.i++;
      else break;
    }
  }

  value() {
    this.ws();
    switch (this.t[this.i]) {
      case "{": return this.object();
      case "[": return this.array();
      case "\"": return this.string();
      case "t": return this.literal("true", true);
      case "f": return this.literal("false", false);
      case "n": return this.literal("null", null);
      default: return this.number();
    }
  }

  object() {
    this.i++;
    const obj = {};
    const at = new Map();
    spans.set(obj, { text: this.t, at });
    this.ws();
    if (this.t[this.i] === "}") {
      this.i++;
      return obj;
    }
    for (;;) {
      this.ws();
      if (this.t[this.i] !== "\"") this.fail("a member name");
      const k = this.string();
      this.ws();
      if (this.t[this.i] !== ":") this.fail("':'");
      this.i++;
      this.ws();
      const start = this.i;
      const v = this.value();
      at.set(k, [start, this.i]);
      // defineProperty: a member named __proto__ stays a plain member.
      Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true });
      this.ws();
      if (this.t[this.i] === ",") {
        this.i++;
        continue;
      }
      if (this.t[this.i] !== "}") this.fail("',' or '}'");
      this.i++;
      return obj;
    }
  }

  array() {
    this.i++;
    const arr = [];
    const at = new Map();
    spans.set(arr, { text: this.t, at });
    this.ws();
    if (this.t[this.i] === "]") {
      this.i++;
      return arr;
    }
    for (;;) {
      this.ws();
      const start = this.i;
      arr.push(this.value());
      at.set(arr.length - 1, [start, this.i]);
      this.ws();
      if (this.t[this.i] === ",") {
        this.i++;
        continue;
      }
      if (this.t[this.i] !== "]") this.fail("',' or ']'");
      this.i++;
      return arr;
    }
  }

  string() {
    const start = this.i;
    this.i++;
    const t = this.t;
    for (;;) {
      if (this.i >= t.length) this.fail("the end of a string");
      const c = t.charCodeAt(this.i);
      if (c === 0x22) break;
      if (c < 0x20) this.fail("no control character in a string");
      this.i += c === 0x5c ? 2 : 1;
    }
    this.i++;
    return JSON.parse(t.slice(start, this.i)); // decodes the escapes, strictly
  }

  literal(word, v) {
    if (this.t.startsWith(word, this.i)) {
      this.i += word.length;
      return v;
    }
    this.fail(`a value`);
  }

  number() {
    const re = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
    re.lastIndex = this.i;
    const m = re.exec(this.t);
    if (!m || m[0] === "") this.fail("a value");
    this.i = re.lastIndex;
    return Number(m[0]);
  }
}

// pretty indents JSON source text by two spaces per level, keeping every
// string and number exactly as written (it re-spaces, it never re-encodes).
export function pretty(text) {
  if (text === undefined || text === null) return "";
  let out = "";
  let depth = 0;
  const nl = () => "\n" + "  ".repeat(depth);
  const t = String(text);
  for (let i = 0; i < t.length; ) {
    const c = t[i];
    if (c === "\"") {
      let j = i + 1;
      while (j < t.length && t[j] !== "\"") j += t[j] === "\\" ? 2 : 1;
      out += t.slice(i, j + 1);
      i = j + 1;
    } else if (c === "{" || c === "[") {
      let j = i + 1;
      while (j < t.length && " \t\r\n".includes(t[j])) j++;
      if (t[j] === (c === "{" ? "}" : "]")) {
        out += c + t[j];
        i = j + 1;
      } else {
        depth++;
        out += c + nl();
        i++;
      }
    } else if (c === "}" || c === "]") {
      depth = Math.max(0, depth - 1);
      out += nl() + c;
      i++;
    } else if (c === ",") {
      out += "," + nl();
      i++;
    } else if (c === ":") {
      out += ": ";
      i++;
    } else if (" \t\r\n".includes(c)) {
      i++;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}
