// compact-host-sdk: write compact-host plugins (ABI v1, abi/README.md) in
// AssemblyScript. A plugin fills a Plugin with a Strategy and/or a
// Truncator, calls serve(plugin) at the top level of its entry file, and
// re-exports the ABI's functions:
//
//   import { Plugin, serve } from "compact-host-sdk";
//   export * from "compact-host-sdk/exports";
//
// Errors: AssemblyScript has no exceptions a plugin can catch, so a handler
// that cannot answer returns fail(code, message), which is null; the SDK
// answers the error frame.

import { JSONValue, Kind } from "./json";
import { ABI_MAJOR, ABI_MINOR, Frame, FrameWriter, decodeFrame } from "./frame";

export { JSONValue, Kind, parseJSON, quote } from "./json";
export { ABI_MAJOR, ABI_MINOR, Frame, FrameWriter, decodeFrame, errorFrame } from "./frame";

// Error codes of abi/README.md, "Errors".
export const INVALID_REQUEST = "invalid_request";
export const UNSUPPORTED = "unsupported";
export const NO_MODEL = "no_model";
export const MODEL_ERROR = "model_error";
export const DEADLINE = "deadline";
export const TOO_LARGE = "too_large";
export const INTERNAL = "internal";

export class PluginError {
  constructor(public code: string, public message: string) {}
}

// pending is the error of the handler running now (set by fail).
let pending: PluginError | null = null;

// fail records the error the current call answers with and returns null,
// so a handler can `return fail(UNSUPPORTED, "...")`.
export function fail<T>(code: string, message: string): T | null {
  pending = new PluginError(code, message);
  return null;
}

export function takeError(): PluginError | null {
  const e = pending;
  pending = null;
  return e;
}

// ---- documents ------------------------------------------------------------

export class Block {
  type: string = "";
  text: string = ""; // text, thinking, tool_result
  id: string = "";
  name: string = "";
  input: string = ""; // tool_use arguments as JSON text
  toolUseId: string = "";
  isError: bool = false;
  mediaType: string = "";
  data: Uint8Array = new Uint8Array(0); // image
}

export class Usage {
  inputTokens: i64 = 0;
  outputTokens: i64 = 0;
  cacheReadTokens: i64 = 0;
  cacheWriteTokens: i64 = 0;
}

export class Message {
  id: string = "";
  role: string = "";
  content: Block[] = [];
  pinned: bool = false;
  summary: bool = false;
}

export class SummarizeRequest {
  kind: string = ""; // "history" or "turn_prefix"
  messages: Message[] = [];
  previousSummary: string = "";
  filesRead: string[] = [];
  filesModified: string[] = [];
  targetTokens: i64 = 0;
  focus: string = "";
  modelAvailable: bool = false;
}

export class SummarizeResponse {
  constructor(public summary: string = "", public offline: bool = false) {}
}

export class TruncateRequest {
  category: string = "";
  toolName: string = "";
  // content is the raw tool output; contentString() decodes it.
  content: Uint8Array = new Uint8Array(0);
  maxTokens: i64 = 0;

  contentString(): string {
    return String.UTF8.decodeUnsafe(this.content.dataStart, <usize>this.content.length);
  }
}

export class TruncateResponse {
  content: Uint8Array = new Uint8Array(0);
  truncated: bool = false;
  omittedBytes: i64 = 0;
  omittedLines: i64 = 0;

  static ofString(s: string, truncated: bool): TruncateResponse {
    const r = new TruncateResponse();
    r.content = Uint8Array.wrap(String.UTF8.encode(s));
    r.truncated = truncated;
    return r;
  }
}

export class CompleteRequest {
  system: string = "";
  messages: Message[] = [];
  maxTokens: i64 = 0;
}

export class CompleteResponse {
  text: string = "";
  model: string = "";
  usage: Usage = new Usage();
}

// textMessage is a message of one text block.
export function textMessage(role: string, text: string): Message {
  const m = new Message();
  m.role = role;
  const b = new Block();
  b.type = "text";
  b.text = text;
  m.content.push(b);
  return m;
}

function readBlock(f: Frame, v: JSONValue): Block {
  const b = new Block();
  b.type = v.getString("type");
  b.text = f.blobString(v, "text");
  b.id = v.getString("id");
  b.name = v.getString("name");
  const input = v.get("input");
  if (input != null) b.input = input.raw;
  b.toolUseId = v.getString("tool_use_id");
  b.isError = v.getBool("is_error");
  b.mediaType = v.getString("media_type");
  b.data = f.blob(v, "data");
  return b;
}

function readMessage(f: Frame, v: JSONValue): Message {
  const m = new Message();
  m.id = v.getString("id");
  m.role = v.getString("role");
  m.pinned = v.getBool("pinned");
  m.summary = v.getBool("summary");
  const blocks = v.getArray("content");
  for (let i = 0; i < blocks.length; i++) m.content.push(readBlock(f, blocks[i]));
  return m;
}

function readSummarize(f: Frame, body: JSONValue): SummarizeRequest {
  const r = new SummarizeRequest();
  r.kind = body.getString("kind");
  const msgs = body.getArray("messages");
  for (let i = 0; i < msgs.length; i++) r.messages.push(readMessage(f, msgs[i]));
  r.previousSummary = f.blobString(body, "previous_summary");
  const ops = body.get("file_ops");
  if (ops != null) {
    r.filesRead = ops.getStrings("read");
    r.filesModified = ops.getStrings("modified");
  }
  r.targetTokens = body.getInt("target_tokens");
  r.focus = f.blobString(body, "focus");
  r.modelAvailable = body.getBool("model_available");
  return r;
}

function readTruncate(f: Frame, body: JSONValue): TruncateRequest {
  const r = new TruncateRequest();
  r.category = body.getString("category");
  r.toolName = body.getString("tool_name");
  r.content = f.blob(body, "content");
  r.maxTokens = body.getInt("max_tokens");
  return r;
}

function writeMessage(w: FrameWriter, m: Message): void {
  w.open(null, "{").str("role", m.role);
  if (m.id.length) w.str("id", m.id);
  w.open("content", "[");
  for (let i = 0; i < m.content.length; i++) {
    const b = m.content[i];
    w.open(null, "{").str("type", b.type).text("text", b.text);
    if (b.id.length) w.str("id", b.id);
    if (b.name.length) w.str("name", b.name);
    if (b.input.length) w.raw("input", b.input);
    if (b.toolUseId.length) w.str("tool_use_id", b.toolUseId);
    if (b.isError) w.bool("is_error", true);
    w.close("{");
  }
  w.close("[").close("{");
}

// ---- host functions (module compact_host_v1) --------------------------------

@external("compact_host_v1", "call")
declare function host_call(op: i32, ptr: usize, len: u32): i64;
@external("compact_host_v1", "result")
declare function host_result(ptr: usize, len: u32): i32;
@external("compact_host_v1", "log")
declare function host_log(level: i32, ptr: usize, len: u32): void;
@external("compact_host_v1", "deadline")
declare function host_deadline(): i64;

// Levels of Go's log/slog.
export const DEBUG: i32 = -4;
export const INFO: i32 = 0;
export const WARN: i32 = 4;
export const ERROR: i32 = 8;

// Host is the plugin's line to the host during a call. A failed call
// returns null (or -1) and leaves its error in error.
export class Host {
  error: PluginError | null = null;

  log(level: i32, msg: string): void {
    const b = String.UTF8.encode(msg);
    host_log(level, changetype<usize>(b), <u32>b.byteLength);
  }

  // deadline is the call's deadline in Unix nanoseconds, 0 if none.
  deadline(): i64 {
    return host_deadline();
  }

  // complete asks the host's model; with none the error code is NO_MODEL.
  complete(req: CompleteRequest): CompleteResponse | null {
    const w = new FrameWriter();
    w.text("system", req.system);
    w.open("messages", "[");
    for (let i = 0; i < req.messages.length; i++) writeMessage(w, req.messages[i]);
    w.close("[");
    if (req.maxTokens > 0) w.int("max_tokens", req.maxTokens);
    const f = this.roundTrip(1, w);
    if (f == null) return null;
    const body = f.body!;
    const r = new CompleteResponse();
    r.text = f.blobString(body, "text");
    r.model = body.getString("model");
    const u = body.get("usage");
    if (u != null) {
      r.usage.inputTokens = u.getInt("input_tokens");
      r.usage.outputTokens = u.getInt("output_tokens");
      r.usage.cacheReadTokens = u.getInt("cache_read_tokens");
      r.usage.cacheWriteTokens = u.getInt("cache_write_tokens");
    }
    return r;
  }

  // countTokens counts with the host's tokenizer; -1 on failure.
  countTokens(text: string): i64 {
    const f = this.roundTrip(2, new FrameWriter().text("text", text));
    return f == null ? -1 : f.body!.getInt("tokens");
  }

  private roundTrip(op: i32, w: FrameWriter): Frame | null {
    this.error = null;
    const packed = w.finish();
    const ptr = <usize>(packed >> 32);
    const n = host_call(op, ptr, <u32>packed);
    heap.free(ptr);
    if (n < 0) {
      this.error = new PluginError(INTERNAL, "the host refused the request (" + n.toString() + ")");
      return null;
    }
    const buf = heap.alloc(<usize>(n > 0 ? n : 1));
    const got = host_result(buf, <u32>n);
    const f = decodeFrame(buf, <u32>got);
    heap.free(buf);
    if (f.problem.length) {
      this.error = new PluginError(INTERNAL, "the host's answer is malformed: " + f.problem);
      return null;
    }
    if (f.isError()) {
      this.error = new PluginError(f.errorCode, f.errorMessage);
      return null;
    }
    return f;
  }
}

// ---- registration -------------------------------------------------------------

export abstract class Strategy {
  abstract summarize(req: SummarizeRequest, host: Host): SummarizeResponse | null;
}

export abstract class Truncator {
  abstract truncate(req: TruncateRequest, host: Host): TruncateResponse | null;
}

export class Plugin {
  name: string = "";
  version: string = "";
  description: string = "";
  strategy: Strategy | null = null;
  truncator: Truncator | null = null;
  // categories are the tool-output categories the truncator handles;
  // the SDK answers unsupported for the others.
  categories: string[] = [];
}

let served: Plugin | null = null;

// serve publishes p: the exports of "compact-host-sdk/exports" answer for it.
export function serve(p: Plugin): void {
  served = p;
}

export function servedPlugin(): Plugin {
  if (served == null) abort("compact-host-sdk: serve(plugin) was not called at the top level");
  return served!;
}

// ---- the calls, for ./exports ----------------------------------------------

import { errorFrame } from "./frame";

function answerError(e: PluginError | null, fallback: string): u64 {
  if (e == null) return errorFrame(INTERNAL, fallback);
  return errorFrame(e.code, e.message);
}

export function handleInfo(): u64 {
  const p = servedPlugin();
  const w = new FrameWriter().int("abi_major", ABI_MAJOR).int("abi_minor", ABI_MINOR).str("name", p.name);
  if (p.version.length) w.str("version", p.version);
  if (p.description.length) w.str("description", p.description);
  w.open("kinds", "[");
  if (p.strategy != null) w.str(null, "strategy");
  if (p.truncator != null) w.str(null, "truncator");
  w.close("[");
  if (p.categories.length) {
    w.open("categories", "[");
    for (let i = 0; i < p.categories.length; i++) w.str(null, p.categories[i]);
    w.close("[");
  }
  return w.finish();
}

function requestFrame(ptr: usize, len: u32): Frame {
  const f = decodeFrame(ptr, len);
  if (f.problem.length == 0 && f.isError()) f.problem = "the request is an error frame";
  if (f.problem.length == 0 && f.body!.kind != Kind.Object) f.problem = "the request body is not an object";
  return f;
}

export function handleSummarize(ptr: usize, len: u32): u64 {
  const p = servedPlugin();
  const s = p.strategy;
  if (s == null) return errorFrame(UNSUPPORTED, "plugin " + p.name + " is not a strategy");
  const f = requestFrame(ptr, len);
  if (f.problem.length) return errorFrame(INVALID_REQUEST, f.problem);
  const req = readSummarize(f, f.body!);
  if (f.problem.length) return errorFrame(INVALID_REQUEST, f.problem);
  pending = null;
  const resp = s.summarize(req, new Host());
  if (resp == null) return answerError(takeError(), "plugin " + p.name + " returned no summary and no error");
  const w = new FrameWriter().text("summary", resp.summary);
  if (resp.offline) w.bool("offline", true);
  return w.finish();
}

export function handleTruncate(ptr: usize, len: u32): u64 {
  const p = servedPlugin();
  const t = p.truncator;
  if (t == null) return errorFrame(UNSUPPORTED, "plugin " + p.name + " is not a truncator");
  const f = requestFrame(ptr, len);
  if (f.problem.length) return errorFrame(INVALID_REQUEST, f.problem);
  const req = readTruncate(f, f.body!);
  if (f.problem.length) return errorFrame(INVALID_REQUEST, f.problem);
  if (p.categories.length && !p.categories.includes(req.category)) {
    return errorFrame(UNSUPPORTED, "plugin " + p.name + " does not truncate category " + req.category);
  }
  pending = null;
  const resp = t.truncate(req, new Host());
  if (resp == null) return answerError(takeError(), "plugin " + p.name + " returned no output and no error");
  const w = new FrameWriter().bytes("content", resp.content).bool("truncated", resp.truncated);
  if (resp.omittedBytes) w.int("omitted_bytes", resp.omittedBytes);
  if (resp.omittedLines) w.int("omitted_lines", resp.omittedLines);
  return w.finish();
}

// abort replaces AssemblyScript's env.abort import, which the host does not
// provide (a plugin imports only compact_host_v1 and WASI): build with
// --use abort=~lib/compact-host-sdk/index/pluginAbort. The message goes to the
// host's log, then the instance traps and the host discards it.
export function pluginAbort(message: string | null = null, fileName: string | null = null, line: u32 = 0, column: u32 = 0): void {
  const text =
    "abort: " + (message != null ? message : "") + " at " + (fileName != null ? fileName : "?") + ":" + line.toString() + ":" + column.toString();
  const b = String.UTF8.encode(text);
  host_log(ERROR, changetype<usize>(b), <u32>b.byteLength);
  unreachable();
}
