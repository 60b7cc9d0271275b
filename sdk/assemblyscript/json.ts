// A small JSON reader and writer for the frame headers of the compact-host
// ABI: headers are small (large fields travel as blobs), so a tree is
// cheap. AssemblyScript has no exceptions that a plugin could catch, so a
// malformed document parses to null instead of throwing.

export const enum Kind {
  Null,
  Bool,
  Number,
  String,
  Array,
  Object,
}

export class JSONValue {
  kind: Kind = Kind.Null;
  bool: bool = false;
  num: f64 = 0;
  str: string = "";
  items: JSONValue[] = [];
  keys: string[] = [];
  // raw is the value's JSON text (kept for a tool_use input).
  raw: string = "";

  get(key: string): JSONValue | null {
    if (this.kind != Kind.Object) return null;
    for (let i = 0; i < this.keys.length; i++) {
      if (this.keys[i] == key) return this.items[i];
    }
    return null;
  }

  getString(key: string): string {
    const v = this.get(key);
    return v != null && v.kind == Kind.String ? v.str : "";
  }

  getInt(key: string, fallback: i64 = 0): i64 {
    const v = this.get(key);
    return v != null && v.kind == Kind.Number ? <i64>v.num : fallback;
  }

  getBool(key: string): bool {
    const v = this.get(key);
    return v != null && v.kind == Kind.Bool && v.bool;
  }

  getArray(key: string): JSONValue[] {
    const v = this.get(key);
    return v != null && v.kind == Kind.Array ? v.items : [];
  }

  getStrings(key: string): string[] {
    const out: string[] = [];
    const items = this.getArray(key);
    for (let i = 0; i < items.length; i++) {
      if (items[i].kind == Kind.String) out.push(items[i].str);
    }
    return out;
  }
}

const MAX_DEPTH = 64;

class Parser {
  pos: i32 = 0;
  failed: bool = false;
  constructor(public b: Uint8Array) {}

  ws(): void {
    const b = this.b;
    while (this.pos < b.length) {
      const c = b[this.pos];
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      this.pos++;
    }
  }

  peek(): i32 {
    return this.pos < this.b.length ? <i32>this.b[this.pos] : -1;
  }

  fail(): JSONValue {
    this.failed = true;
    return new JSONValue();
  }

  value(depth: i32): JSONValue {
    if (depth > MAX_DEPTH) return this.fail();
    this.ws();
    const start = this.pos;
    const c = this.peek();
    let v: JSONValue;
    if (c == 0x7b) v = this.object(depth);
    else if (c == 0x5b) v = this.array(depth);
    else if (c == 0x22) {
      v = new JSONValue();
      v.kind = Kind.String;
      v.str = this.string();
    } else v = this.scalar();
    if (!this.failed) v.raw = String.UTF8.decodeUnsafe(this.b.dataStart + <usize>start, <usize>(this.pos - start));
    return v;
  }

  object(depth: i32): JSONValue {
    const v = new JSONValue();
    v.kind = Kind.Object;
    this.pos++;
    this.ws();
    if (this.peek() == 0x7d) {
      this.pos++;
      return v;
    }
    while (!this.failed) {
      this.ws();
      if (this.peek() != 0x22) return this.fail();
      const key = this.string();
      this.ws();
      if (this.peek() != 0x3a) return this.fail();
      this.pos++;
      const item = this.value(depth + 1);
      v.keys.push(key);
      v.items.push(item);
      this.ws();
      const c = this.peek();
      this.pos++;
      if (c == 0x7d) return v;
      if (c != 0x2c) return this.fail();
    }
    return v;
  }

  array(depth: i32): JSONValue {
    const v = new JSONValue();
    v.kind = Kind.Array;
    this.pos++;
    this.ws();
    if (this.peek() == 0x5d) {
      this.pos++;
      return v;
    }
    while (!this.failed) {
      v.items.push(this.value(depth + 1));
      this.ws();
      const c = this.peek();
      this.pos++;
      if (c == 0x5d) return v;
      if (c != 0x2c) return this.fail();
    }
    return v;
  }

  hex4(): i32 {
    if (this.pos + 4 > this.b.length) {
      this.failed = true;
      return 0;
    }
    let n = 0;
    for (let i = 0; i < 4; i++) {
      const c = <i32>this.b[this.pos++];
      let d = -1;
      if (c >= 0x30 && c <= 0x39) d = c - 0x30;
      else if (c >= 0x61 && c <= 0x66) d = c - 0x61 + 10;
      else if (c >= 0x41 && c <= 0x46) d = c - 0x41 + 10;
      if (d < 0) {
        this.failed = true;
        return 0;
      }
      n = (n << 4) | d;
    }
    return n;
  }

  // string reads a JSON string into UTF-8 bytes and decodes them once.
  string(): string {
    const b = this.b;
    this.pos++;
    const start = this.pos;
    // The common case has no escapes: decode the bytes in place.
    while (this.pos < b.length && b[this.pos] != 0x22 && b[this.pos] != 0x5c) this.pos++;
    if (this.pos < b.length && b[this.pos] == 0x22) {
      this.pos++;
      return String.UTF8.decodeUnsafe(b.dataStart + <usize>start, <usize>(this.pos - 1 - start));
    }
    const out = new Array<u8>();
    for (let i = start; i < this.pos; i++) out.push(b[i]);
    while (this.pos < b.length) {
      const c = b[this.pos++];
      if (c == 0x22) {
        const bytes = new Uint8Array(out.length);
        for (let i = 0; i < out.length; i++) bytes[i] = out[i];
        return String.UTF8.decodeUnsafe(bytes.dataStart, <usize>bytes.length);
      }
      if (c != 0x5c) {
        out.push(c);
        continue;
      }
      if (this.pos >= b.length) break;
      const e = b[this.pos++];
      if (e == 0x6e) out.push(0x0a);
      else if (e == 0x74) out.push(0x09);
      else if (e == 0x72) out.push(0x0d);
      else if (e == 0x62) out.push(0x08);
      else if (e == 0x66) out.push(0x0c);
      else if (e == 0x75) {
        let cp = this.hex4();
        if (cp >= 0xd800 && cp < 0xdc00 && this.pos + 6 <= b.length && b[this.pos] == 0x5c && b[this.pos + 1] == 0x75) {
          const save = this.pos;
          this.pos += 2;
          const lo = this.hex4();
          if (lo >= 0xdc00 && lo < 0xe000) cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          else this.pos = save;
        }
        if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd;
        appendUTF8(out, cp);
      } else out.push(e);
    }
    this.failed = true;
    return "";
  }

  scalar(): JSONValue {
    const v = new JSONValue();
    const b = this.b;
    const start = this.pos;
    while (this.pos < b.length) {
      const c = b[this.pos];
      if (c == 0x2c || c == 0x7d || c == 0x5d || c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d) break;
      this.pos++;
    }
    const text = String.UTF8.decodeUnsafe(b.dataStart + <usize>start, <usize>(this.pos - start));
    if (text == "null") return v;
    if (text == "true" || text == "false") {
      v.kind = Kind.Bool;
      v.bool = text == "true";
      return v;
    }
    if (text.length == 0) return this.fail();
    const c0 = text.charCodeAt(0);
    if (c0 != 0x2d && (c0 < 0x30 || c0 > 0x39)) return this.fail();
    v.kind = Kind.Number;
    v.num = parseFloat(text);
    if (isNaN(v.num)) return this.fail();
    return v;
  }
}

function appendUTF8(out: Array<u8>, cp: i32): void {
  if (cp < 0x80) out.push(<u8>cp);
  else if (cp < 0x800) {
    out.push(<u8>(0xc0 | (cp >> 6)));
    out.push(<u8>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push(<u8>(0xe0 | (cp >> 12)));
    out.push(<u8>(0x80 | ((cp >> 6) & 0x3f)));
    out.push(<u8>(0x80 | (cp & 0x3f)));
  } else {
    out.push(<u8>(0xf0 | (cp >> 18)));
    out.push(<u8>(0x80 | ((cp >> 12) & 0x3f)));
    out.push(<u8>(0x80 | ((cp >> 6) & 0x3f)));
    out.push(<u8>(0x80 | (cp & 0x3f)));
  }
}

// parseJSON parses UTF-8 JSON text; null when it is malformed.
export function parseJSON(b: Uint8Array): JSONValue | null {
  const p = new Parser(b);
  const v = p.value(0);
  p.ws();
  if (p.failed || p.pos != b.length) return null;
  return v;
}

const HEX = "0123456789abcdef";

// quote returns s as a JSON string.
export function quote(s: string): string {
  let out = '"';
  let run = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c != 0x22 && c != 0x5c) continue;
    out += s.substring(run, i);
    run = i + 1;
    if (c == 0x22) out += '\\"';
    else if (c == 0x5c) out += "\\\\";
    else if (c == 0x0a) out += "\\n";
    else out += "\\u00" + HEX.charAt(c >> 4) + HEX.charAt(c & 15);
  }
  return out + s.substring(run) + '"';
}
