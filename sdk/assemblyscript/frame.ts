// Frames of the compact-host ABI (abi/README.md, "Frames"): "CHF" and the
// major version byte, the header length, a JSON header, the blob count,
// then each blob as its length and its raw bytes; integers are u32 LE.

import { JSONValue, Kind, parseJSON, quote } from "./json";

export const ABI_MAJOR: i32 = 1;
export const ABI_MINOR: i32 = 0;

// Frame is a decoded frame. Its blobs are copies: a request's bytes are
// valid only during its call.
export class Frame {
  body: JSONValue | null = null;
  errorCode: string = "";
  errorMessage: string = "";
  blobs: Uint8Array[] = [];
  // problem says why the frame did not decode; "" when it did.
  problem: string = "";

  isError(): bool {
    return this.errorCode.length > 0;
  }

  // blob resolves the reference in field key of obj: absent is empty,
  // and a reference past the blobs sets problem.
  blob(obj: JSONValue, key: string): Uint8Array {
    const v = obj.get(key);
    if (v == null || v.kind == Kind.Null) return new Uint8Array(0);
    const i = v.kind == Kind.Number ? <i32>v.num : -1;
    if (i < 0 || i >= this.blobs.length || <f64>i != v.num) {
      this.problem = "field " + key + " refers to blob " + v.raw + " of " + this.blobs.length.toString();
      return new Uint8Array(0);
    }
    return this.blobs[i];
  }

  blobString(obj: JSONValue, key: string): string {
    const b = this.blob(obj, key);
    return String.UTF8.decodeUnsafe(b.dataStart, <usize>b.length);
  }
}

function bad(why: string): Frame {
  const f = new Frame();
  f.problem = why;
  return f;
}

// decodeFrame reads the frame of len bytes at ptr in linear memory.
export function decodeFrame(ptr: usize, len: u32): Frame {
  if (len < 12) return bad(len.toString() + " bytes is shorter than the smallest frame");
  if (load<u8>(ptr) != 0x43 || load<u8>(ptr, 1) != 0x48 || load<u8>(ptr, 2) != 0x46) return bad("not a frame: bad magic");
  const major = load<u8>(ptr, 3);
  if (<i32>major != ABI_MAJOR) return bad("frame is ABI v" + major.toString() + ", the plugin speaks v1");
  const hlen = load<u32>(ptr, 4);
  if (hlen > len - 12) return bad("header length " + hlen.toString() + " runs past the frame end");
  const header = new Uint8Array(<i32>hlen);
  memory.copy(header.dataStart, ptr + 8, hlen);
  let p = ptr + 8 + <usize>hlen;
  const n = load<u32>(p);
  let rest = len - 12 - hlen;
  p += 4;
  if (n > rest / 4) return bad(n.toString() + " blobs cannot fit in " + rest.toString() + " bytes");
  const f = new Frame();
  for (let i: u32 = 0; i < n; i++) {
    if (rest < 4 || load<u32>(p) > rest - 4) return bad("blob " + i.toString() + " runs past the frame end");
    const l = load<u32>(p);
    const blob = new Uint8Array(<i32>l);
    memory.copy(blob.dataStart, p + 4, l);
    f.blobs.push(blob);
    p += 4 + <usize>l;
    rest -= 4 + l;
  }
  if (rest != 0) return bad(rest.toString() + " trailing bytes after the last blob");
  const h = parseJSON(header);
  if (h == null || h.kind != Kind.Object) return bad("the header is not a JSON object");
  const body = h.get("body");
  const err = h.get("error");
  if ((body == null) == (err == null)) return bad("the header needs exactly one of body and error");
  if (err != null) {
    f.errorCode = err.getString("code");
    f.errorMessage = err.getString("message");
    if (f.errorCode.length == 0) f.errorCode = "internal";
  } else {
    f.body = body;
  }
  return f;
}

// FrameWriter builds a frame: call its methods in document order.
export class FrameWriter {
  private h: string = "";
  private comma: bool[] = [false];
  private blobs: Uint8Array[] = [];

  private key(k: string | null): void {
    const top = this.comma.length - 1;
    if (this.comma[top]) this.h += ",";
    this.comma[top] = true;
    if (k != null) this.h += quote(k) + ":";
  }

  str(k: string | null, s: string): FrameWriter {
    this.key(k);
    this.h += quote(s);
    return this;
  }

  int(k: string | null, n: i64): FrameWriter {
    this.key(k);
    this.h += n.toString();
    return this;
  }

  bool(k: string | null, b: bool): FrameWriter {
    this.key(k);
    this.h += b ? "true" : "false";
    return this;
  }

  // bytes writes a blob reference; empty content writes nothing.
  bytes(k: string, b: Uint8Array): FrameWriter {
    if (b.length == 0) return this;
    this.int(k, this.blobs.length);
    this.blobs.push(b);
    return this;
  }

  text(k: string, s: string): FrameWriter {
    if (s.length == 0) return this;
    return this.bytes(k, Uint8Array.wrap(String.UTF8.encode(s)));
  }

  raw(k: string | null, json: string): FrameWriter {
    this.key(k);
    this.h += json;
    return this;
  }

  open(k: string | null, kind: string): FrameWriter {
    this.key(k);
    this.h += kind;
    this.comma.push(false);
    return this;
  }

  close(kind: string): FrameWriter {
    this.h += kind == "[" ? "]" : "}";
    this.comma.pop();
    return this;
  }

  // finish lays the frame out in a buffer from heap.alloc, which the
  // caller frees with heap.free. It returns ptr << 32 | len.
  finish(): u64 {
    return layout("{\"body\":{" + this.h + "}}", this.blobs);
  }
}

export function layout(header: string, blobs: Uint8Array[]): u64 {
  const h = String.UTF8.encode(header);
  let size: usize = 12 + <usize>h.byteLength;
  for (let i = 0; i < blobs.length; i++) size += 4 + <usize>blobs[i].length;
  const out = heap.alloc(size);
  store<u8>(out, 0x43);
  store<u8>(out, 0x48, 1);
  store<u8>(out, 0x46, 2);
  store<u8>(out, <u8>ABI_MAJOR, 3);
  store<u32>(out, <u32>h.byteLength, 4);
  memory.copy(out + 8, changetype<usize>(h), <usize>h.byteLength);
  let p = out + 8 + <usize>h.byteLength;
  store<u32>(p, <u32>blobs.length);
  p += 4;
  for (let i = 0; i < blobs.length; i++) {
    const b = blobs[i];
    store<u32>(p, <u32>b.length);
    memory.copy(p + 4, b.dataStart, <usize>b.length);
    p += 4 + <usize>b.length;
  }
  return (<u64>out << 32) | <u64>size;
}

export function errorFrame(code: string, message: string): u64 {
  return layout("{\"error\":{\"code\":" + quote(code) + ",\"message\":" + quote(message) + "}}", []);
}
