// A client for the HTTP API of `compact-host serve` and the admin side of
// `compact-host proxy`, on fetch alone (Node 18+, Deno, Bun, browsers).
//
//   const client = new Client({ baseUrl: "http://127.0.0.1:8377", token });
//   const got = await client.compact(messages, { output_format: "anthropic" });
//   await anthropic.messages.create({ model, system: got.system, messages: got.messages, ... });
//
// Every call has a deadline (the client's timeoutMs, or the call's own)
// that covers the whole exchange, the body's arrival included. Every error
// is a CompactHostError carrying the API's error code and whether a retry
// can help. Bodies use the API's snake_case names as they are on the wire
// (GET /openapi.json describes them), so fields a newer server adds pass
// through.

export const DEFAULT_URL = "http://127.0.0.1:8377";
export const DEFAULT_PROXY_URL = "http://127.0.0.1:8378";
/** The server's own default request timeout. */
export const DEFAULT_TIMEOUT_MS = 300_000;
/** The server takes bodies up to 64 MiB and answers with the session and
 * its messages, so an answer may be about twice that. */
export const DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024 * 1024;

/** Codes a retry can cure: the API's busy, store_unavailable and timeout,
 * and the client's timeout and unreachable. After revision_conflict, read
 * the session again before retrying. */
export const RETRYABLE_CODES: ReadonlySet<string> = new Set(["busy", "store_unavailable", "timeout", "unreachable"]);

/**
 * An error answer of the API, or a failure to get one. code is the API's
 * error code (bad_session, busy, ...) or one of the client's: timeout (the
 * call's deadline passed), unreachable (no connection), aborted (the
 * caller's signal), bad_response (not the API's answer: not JSON, or too
 * large). status is the HTTP status, 0 when there was none.
 */
export class CompactHostError extends Error {
  readonly code: string;
  readonly status: number;
  /** The 1-based line of the session the problem is on, when known. */
  readonly line?: number;
  /** The byte offset of the problem, when known. */
  readonly offset?: number;
  /** The server's Retry-After, in seconds. */
  readonly retryAfter?: number;

  constructor(code: string, message: string, init: { status?: number; line?: number; offset?: number; retryAfter?: number; cause?: unknown } = {}) {
    super(init.status ? `${init.status} ${code}: ${message}` : `${code}: ${message}`, { cause: init.cause });
    this.name = "CompactHostError";
    this.code = code;
    this.status = init.status ?? 0;
    this.line = init.line;
    this.offset = init.offset;
    this.retryAfter = init.retryAfter;
  }

  /** True when the same call may succeed later. */
  get retryable(): boolean {
    return RETRYABLE_CODES.has(this.code);
  }
}

// Requests.

export type InputFormat = "" | "canonical" | "anthropic" | "openai" | "claude-code" | "codex" | "copilot" | "mini-swe-agent" | "swe-agent";
export type OutputFormat = "" | "canonical" | "anthropic" | "openai";

/** A message in canonical form: a role and content blocks in the style of
 * Anthropic's Messages API. */
export interface CanonicalMessage {
  id?: string;
  role: "system" | "user" | "assistant";
  content: Block[];
  pinned?: boolean;
  summary?: boolean;
  usage?: Usage;
}

export interface Block {
  type: "text" | "thinking" | "tool_use" | "tool_result" | "image";
  text?: string;
  id?: string;
  name?: string;
  input?: unknown;
  tool_use_id?: string;
  is_error?: boolean;
  media_type?: string;
  data?: string;
}

/** A message of the context to send, in the output format. */
export type Message = { role: string; [field: string]: unknown };

/** A session: canonical messages, a provider's request object (Anthropic,
 * OpenAI) or a trajectory, or a string holding a JSONL file. */
export type Session = string | readonly CanonicalMessage[] | readonly Message[] | Record<string, unknown>;

export interface Thresholds {
  prune?: number;
  compact?: number;
  overhead_reserve?: number;
  emergency?: number;
  /** The share of the request a compaction must be able to free. */
  min_savings?: number;
}

/** Overrides of the server's engine configuration for one call. */
export interface EngineOptions {
  model?: string;
  context_window?: number;
  strategy?: string;
  keep_recent_tokens?: number;
  thresholds?: Thresholds;
  /** When a session is compacted: "threshold" or "cache-aware". */
  policy?: "threshold" | "cache-aware";
  /** The cache-aware policy's share of the budget for an expired cache. */
  cold_share?: number;
  /** The prompt cache's lifetime: "5m" or "1h". */
  cache_ttl?: "5m" | "1h";
}

export interface CompactOptions extends EngineOptions {
  focus?: string;
  threshold?: number;
  dry_run?: boolean;
}

/** Per call: its own deadline, and a signal of the caller's. */
export interface CallOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface SessionArgs<O> extends CallOptions {
  format?: InputFormat;
  output_format?: OutputFormat;
  options?: O;
}

export interface CheckArgs extends SessionArgs<EngineOptions> {
  tool_schema_tokens?: number;
  dynamic_tokens?: number;
  apply?: boolean;
}

export interface TruncateArgs extends CallOptions {
  tool?: string;
  category?: string;
  max_tokens?: number;
}

// Answers.

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
}

export interface Health {
  status: "ok";
  version: string;
  abi: string;
  plugins: number;
  broken?: number;
}

export interface PluginInfo {
  name: string;
  source: string;
  path?: string;
  loaded: boolean;
  kinds?: string[];
  categories?: string[];
  version?: string;
  abi?: string;
  description?: string;
  overridden?: boolean;
  error?: string;
}

export interface Plugins {
  dir: string;
  plugins: PluginInfo[];
}

export interface Plan {
  first_kept: number;
  first_kept_id: string;
  folded: number;
  kept: number;
  turn_prefix: boolean;
  tokens_before: number;
  tokens_kept: number;
  summary_tokens: number;
  files_read?: string[];
  files_modified?: string[];
}

export interface ModelStats {
  model_calls: number;
  model_calls_failed?: number;
  model_usage: Usage;
  cost_usd: number;
}

export interface CompactReport extends ModelStats {
  action: "compacted" | "emergency" | "pruned" | "none" | "nothing_to_fold" | "plan";
  format: string;
  output_format?: string;
  messages: number;
  model?: string;
  context_window: number;
  budget: number;
  tokenizer: string;
  threshold?: number;
  tokens_before: number;
  tokens_after: number;
  fits: boolean;
  requested_strategy?: string;
  strategy?: string;
  offline?: boolean;
  messages_folded?: number;
  messages_kept?: number;
  fallbacks?: string[];
  plan?: Plan;
  skipped_records?: Record<string, number>;
  repaired?: Record<string, number>;
  warnings?: string[];
  duration_ms: number;
}

/** The system prompt of an Anthropic request: a string or text blocks. */
export type System = string | Array<{ type: "text"; text: string; [field: string]: unknown }>;

export interface CompactResult {
  /** The whole compacted session: the request object for anthropic and
   * openai, the session log (JSONL) for canonical. */
  session?: string | Record<string, unknown>;
  /** The compacted context to send to the model, in the output format. */
  messages?: Message[];
  /** With output_format anthropic, the system prompt to send with them. */
  system?: System;
  report: CompactReport;
}

export interface Budget {
  context_window: number;
  max_output_tokens: number;
  input: number;
  prune_at: number;
  compact_at: number;
  emergency_at: number;
}

export interface Decision {
  action: "none" | "pruned" | "compacted" | "emergency";
  tokens_before: number;
  tokens_after: number;
  budget: number;
  usage: number;
  fits: boolean;
}

export interface CheckResult extends Partial<ModelStats> {
  format: string;
  /** The number of messages; the messages to send are in context. */
  messages: number;
  tokenizer: string;
  budget: Budget;
  tokens: number;
  overhead: number;
  total: number;
  usage: number;
  action: "none" | "prune" | "compact" | "emergency";
  fits: boolean;
  decision?: Decision;
  output_format?: string;
  session?: string | Record<string, unknown>;
  context?: { messages: Message[]; system?: System };
  fallbacks?: string[];
  warnings?: string[];
}

export interface TruncateResult {
  content: string;
  category: string;
  truncated: boolean;
  bytes_before: number;
  bytes_after: number;
  tokens_before: number;
  tokens_after: number;
}

/** The answer of putSession and appendMessages. */
export interface SessionUpdate {
  id: string;
  revision: number;
  created?: boolean;
  appended?: number;
  action: "none" | "compacted" | "emergency" | "pruned" | "nothing_to_fold";
  tokens: number;
  compactions: number;
  updated_at: string;
  /** The compaction's report, when the gate acted. */
  report?: CompactReport;
  warnings?: string[];
}

/** The pauses between reported calls, those longer than the TTL, and
 * what the prompt grew across them. */
export interface Growth {
  gaps: number;
  expired: number;
  tokens: number;
}

/** Reported usage by kind of token, priced. */
export interface Bill {
  requests: number;
  input_tokens: number;
  cache_read_tokens: number;
  cache_write_5m_tokens: number;
  cache_write_1h_tokens: number;
  output_tokens: number;
  usd: number;
}

/** One compaction priced from the cache's state when it was made. */
export interface CompactionCost {
  time: string;
  tokens_before: number;
  tokens_after: number;
  warm: boolean;
  summary_usd: number;
  rewrite_usd: number;
  uncompacted_usd: number;
  saved_per_request_usd: number;
  break_even_requests: number;
}

/** The session's calls billed, beside the same calls without its
 * compactions (uncompacted_usd). */
export interface SessionCost {
  priced: boolean;
  bill: Bill;
  uncompacted_usd: number;
  summary_usd: number;
  compactions_usd: number;
  saved_usd: number;
  compactions: CompactionCost[];
}

/** A session's prompt cache, from the usage of the assistant messages
 * appended to it, and its cost report. misses counts the calls that found
 * nothing cached by reason. */
export interface SessionCache {
  last_request?: string;
  cache_ttl: "5m" | "1h";
  cold: boolean;
  cached_tokens: number;
  prompt_tokens: number;
  requests: number;
  misses: Partial<Record<"cold_start" | "ttl_expired" | "compaction" | "prefix_changed", number>>;
  growth: Growth;
  cost: SessionCost;
}

/** A kept session's compacted context: messages (with system for
 * anthropic) is what to send to the model; cache its prompt cache and
 * cost. */
export interface SessionView {
  id: string;
  revision: number;
  output_format: "canonical" | "anthropic" | "openai";
  messages: Message[];
  system?: System;
  tokens: number;
  compactions: number;
  summary?: string;
  updated_at: string;
  cache: SessionCache;
}

export interface SessionDeleted {
  id: string;
  deleted: boolean;
}

export interface PutSessionArgs extends CallOptions {
  format?: InputFormat;
  /** Kept for every later append; dry_run is refused. */
  options?: CompactOptions;
  /** Replace only at this revision; 0: only create. */
  if_revision?: number;
}

export interface AppendArgs extends CallOptions {
  /** canonical (the default), anthropic or openai. */
  format?: "" | "canonical" | "anthropic" | "openai";
  /** Append only at this revision. */
  if_revision?: number;
}

export interface ClientOptions {
  baseUrl?: string;
  /** Sent as a bearer token (serve --token-env). */
  token?: string;
  /** Each call's deadline unless it names its own; for calls that compact
   * with a model, more than the server's --request-timeout. */
  timeoutMs?: number;
  maxResponseBytes?: number;
  /** The fetch to use; default globalThis.fetch. */
  fetch?: typeof fetch;
}

/** What both clients share: one exchange with a deadline and a size
 * limit, errors mapped to CompactHostError. */
class Transport {
  readonly baseUrl: string;
  readonly token?: string;
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  private readonly fetch: typeof fetch;

  constructor(o: ClientOptions, defaultUrl: string, defaultTimeoutMs: number, defaultMax: number) {
    const base = o.baseUrl ?? defaultUrl;
    let u: URL;
    try {
      u = new URL(base);
    } catch {
      throw new TypeError(`baseUrl ${JSON.stringify(base)}: want an absolute http(s) URL such as ${defaultUrl}`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new TypeError(`baseUrl ${JSON.stringify(base)}: want an absolute http(s) URL such as ${defaultUrl}`);
    }
    this.baseUrl = base.replace(/\/+$/, "");
    this.token = o.token;
    this.timeoutMs = positive("timeoutMs", o.timeoutMs ?? defaultTimeoutMs);
    this.maxResponseBytes = positive("maxResponseBytes", o.maxResponseBytes ?? defaultMax);
    const f = o.fetch ?? globalThis.fetch;
    if (typeof f !== "function") {
      throw new TypeError("no fetch: pass ClientOptions.fetch, or use Node 18 or later");
    }
    this.fetch = f;
  }

  async exchange(method: string, path: string, body: unknown, call: CallOptions = {}, accept = "application/json"): Promise<{ status: number; headers: Headers; bytes: Uint8Array }> {
    const ms = positive("timeoutMs", call.timeoutMs ?? this.timeoutMs);
    const deadline = AbortSignal.timeout(ms);
    const signal = call.signal ? AbortSignal.any([deadline, call.signal]) : deadline;
    const headers: Record<string, string> = { Accept: accept };
    let payload: string | undefined;
    if (body !== undefined) {
      payload = JSON.stringify(body);
      headers["Content-Type"] = "application/json";
    }
    if (this.token) {
      headers.Authorization = `Bearer ${this.token}`;
    }
    const what = `${method} ${path}`;
    const failed = (err: unknown, stage: string): CompactHostError => {
      if (deadline.aborted) {
        return new CompactHostError("timeout", `${what}: ${stage} within the client's timeout of ${ms} ms`, { cause: err });
      }
      if (call.signal?.aborted) {
        return new CompactHostError("aborted", `${what}: the caller aborted it`, { cause: err });
      }
      return new CompactHostError("unreachable", `${what} (${this.baseUrl}): ${describe(err)}`, { cause: err });
    };
    let resp: Response;
    try {
      resp = await this.fetch(this.baseUrl + path, { method, headers, body: payload, signal, redirect: "error" });
    } catch (err) {
      throw failed(err, "no answer");
    }
    let bytes: Uint8Array;
    try {
      bytes = await readLimited(resp, this.maxResponseBytes, what);
    } catch (err) {
      if (err instanceof CompactHostError) {
        throw err;
      }
      throw failed(err, "the answer did not arrive");
    }
    if (resp.status >= 400) {
      throw apiError(resp, bytes, what);
    }
    return { status: resp.status, headers: resp.headers, bytes };
  }

  async json<T>(method: string, path: string, body?: unknown, call?: CallOptions): Promise<T> {
    const { bytes } = await this.exchange(method, path, body, call);
    const text = new TextDecoder().decode(bytes);
    if (text === "") {
      return undefined as T;
    }
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new CompactHostError("bad_response", `${method} ${path}: the answer is not JSON: ${describe(err)}`, { cause: err });
    }
  }
}

/** The API of `compact-host serve`. */
export class Client {
  private readonly t: Transport;

  constructor(o: ClientOptions = {}) {
    this.t = new Transport(o, DEFAULT_URL, DEFAULT_TIMEOUT_MS, DEFAULT_MAX_RESPONSE_BYTES);
  }

  get baseUrl(): string {
    return this.t.baseUrl;
  }

  /** GET /healthz: status, version, plugin counts. Needs no token. */
  health(call?: CallOptions): Promise<Health> {
    return this.t.json("GET", "/healthz", undefined, call);
  }

  /** GET /openapi.json: the OpenAPI 3.1 document of the API. */
  openapi(call?: CallOptions): Promise<Record<string, any>> {
    return this.t.json("GET", "/openapi.json", undefined, call);
  }

  /** GET /metrics: serve's Prometheus text exposition (the sessions'
   * cache misses by reason). */
  async metricsText(call?: CallOptions): Promise<string> {
    const { bytes } = await this.t.exchange("GET", "/metrics", undefined, call, "text/plain");
    return new TextDecoder().decode(bytes);
  }

  /** The samples of GET /metrics whose names start with prefix, by series:
   * 'compact_host_proxy_cache_misses_total{reason="ttl_expired"}'. */
  async metrics(prefix = "compact_host_", call?: CallOptions): Promise<Map<string, number>> {
    return parseMetrics(await this.metricsText(call), prefix);
  }

  /** GET /v1/plugins: the strategy and truncator plugins. */
  plugins(call?: CallOptions): Promise<Plugins> {
    return this.t.json("GET", "/v1/plugins", undefined, call);
  }

  /** POST /v1/compact. The answer's messages (with system for anthropic)
   * is the compacted context to send to the model. */
  compact(session: Session, args: SessionArgs<CompactOptions> = {}): Promise<CompactResult> {
    return this.t.json("POST", "/v1/compact", sessionBody(session, args), args);
  }

  /** POST /v1/check: the gate before a model call. With apply the server
   * prunes or compacts as needed, and context holds the messages to send. */
  check(session: Session, args: CheckArgs = {}): Promise<CheckResult> {
    const body = sessionBody(session, args);
    const request = dropEmpty({ tool_schema_tokens: args.tool_schema_tokens || undefined, dynamic_tokens: args.dynamic_tokens || undefined });
    if (Object.keys(request).length > 0) {
      body.request = request;
    }
    if (args.apply) {
      body.apply = true;
    }
    return this.t.json("POST", "/v1/check", body, args);
  }

  /** POST /v1/truncate: cap one tool output. */
  truncate(content: string, args: TruncateArgs = {}): Promise<TruncateResult> {
    const body = dropEmpty({ content, tool: args.tool, category: args.category, max_tokens: args.max_tokens || undefined });
    return this.t.json("POST", "/v1/truncate", body, args);
  }

  // Sessions the server keeps, so an agent sends only what is new.

  /** PUT /v1/sessions/{id}: create or replace a kept session, with the
   * options every later append is compacted with. With if_revision, a
   * session at another revision fails with revision_conflict. */
  putSession(id: string, session: Session, args: PutSessionArgs = {}): Promise<SessionUpdate> {
    const body = sessionBody(session, { format: args.format, options: args.options });
    if (args.if_revision !== undefined) {
      body.if_revision = args.if_revision;
    }
    return this.t.json("PUT", sessionPath(id), body, args);
  }

  /** POST /v1/sessions/{id}/messages: add the new messages to a kept
   * session; the server compacts it when it crosses its threshold, and
   * report says how. An unknown ID is session_not_found. */
  appendMessages(id: string, messages: readonly (CanonicalMessage | Message)[], args: AppendArgs = {}): Promise<SessionUpdate> {
    const body: Record<string, unknown> = { messages };
    if (args.format) {
      body.format = args.format;
    }
    if (args.if_revision !== undefined) {
      body.if_revision = args.if_revision;
    }
    return this.t.json("POST", `${sessionPath(id)}/messages`, body, args);
  }

  /** GET /v1/sessions/{id}: the kept session's compacted context as
   * messages in output_format (canonical by default), ready to send. */
  getSession(id: string, args: CallOptions & { output_format?: OutputFormat } = {}): Promise<SessionView> {
    const q = args.output_format ? `?output_format=${encodeURIComponent(args.output_format)}` : "";
    return this.t.json("GET", sessionPath(id) + q, undefined, args);
  }

  /** DELETE /v1/sessions/{id}. */
  deleteSession(id: string, call?: CallOptions): Promise<SessionDeleted> {
    return this.t.json("DELETE", sessionPath(id), undefined, call);
  }
}

/** The admin side of `compact-host proxy`: its endpoints under
 * /_compact-host/ on the proxy's listen address. */
export class ProxyAdmin {
  private readonly t: Transport;

  constructor(o: Omit<ClientOptions, "token"> = {}) {
    this.t = new Transport(o, DEFAULT_PROXY_URL, 10_000, 16 * 1024 * 1024);
  }

  /** GET /_compact-host/healthz: true when the proxy answers "ok". */
  async health(call?: CallOptions): Promise<boolean> {
    const { bytes } = await this.t.exchange("GET", "/_compact-host/healthz", undefined, call, "text/plain");
    return new TextDecoder().decode(bytes).trim() === "ok";
  }

  /** GET /_compact-host/metrics: the Prometheus text exposition. */
  async metricsText(call?: CallOptions): Promise<string> {
    const { bytes } = await this.t.exchange("GET", "/_compact-host/metrics", undefined, call, "text/plain");
    return new TextDecoder().decode(bytes);
  }

  /** The samples whose names start with prefix, keyed by the series as
   * written: 'compact_host_proxy_requests_total{action="spliced",kind="anthropic"}'. */
  async metrics(prefix = "compact_host_proxy_", call?: CallOptions): Promise<Map<string, number>> {
    return parseMetrics(await this.metricsText(call), prefix);
  }
}

/** The samples of a Prometheus text exposition, by series. */
export function parseMetrics(text: string, prefix = ""): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line.startsWith(prefix) || line.startsWith("#")) {
      continue;
    }
    // Label values may hold spaces: the value follows the labels.
    const close = line.lastIndexOf("}");
    const cut = close >= 0 ? close + 1 : line.indexOf(" ");
    if (cut <= 0) {
      continue;
    }
    const value = Number(line.slice(cut).trim().split(/\s+/)[0]);
    if (!Number.isNaN(value)) {
      out.set(line.slice(0, cut), value);
    }
  }
  return out;
}

function positive(name: string, v: number): number {
  if (!(v > 0) || !Number.isFinite(v)) {
    throw new RangeError(`${name} ${v}: want a positive number`);
  }
  return v;
}

function sessionPath(id: string): string {
  if (!id) {
    throw new TypeError("session id: want a non-empty string");
  }
  return `/v1/sessions/${encodeURIComponent(id)}`;
}

function sessionBody<O extends object>(session: Session, args: SessionArgs<O>): Record<string, unknown> {
  const body: Record<string, unknown> = { session };
  if (args.format) {
    body.format = args.format;
  }
  if (args.output_format) {
    body.output_format = args.output_format;
  }
  if (args.options && Object.keys(args.options).length > 0) {
    body.options = args.options;
  }
  return body;
}

function dropEmpty(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null));
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message}: ${cause.message}` : err.message;
  }
  return String(err);
}

/** The body of resp, refused past max bytes. */
async function readLimited(resp: Response, max: number, what: string): Promise<Uint8Array> {
  const declared = Number(resp.headers.get("Content-Length") ?? "NaN");
  if (declared > max) {
    await resp.body?.cancel();
    throw new CompactHostError("bad_response", `${what}: the answer of ${declared} bytes is over maxResponseBytes (${max}); raise it on the client`, { status: resp.status });
  }
  if (!resp.body) {
    return new Uint8Array(0);
  }
  const reader = resp.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) {
      break;
    }
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      throw new CompactHostError("bad_response", `${what}: the answer is over maxResponseBytes (${max}); raise it on the client`, { status: resp.status });
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

function apiError(resp: Response, bytes: Uint8Array, what: string): CompactHostError {
  const ra = Number(resp.headers.get("Retry-After") ?? "NaN");
  const retryAfter = Number.isFinite(ra) ? ra : undefined;
  try {
    const e = JSON.parse(new TextDecoder().decode(bytes)).error;
    if (e && typeof e.code === "string" && typeof e.message === "string") {
      return new CompactHostError(e.code, e.message, { status: resp.status, line: e.line, offset: e.offset, retryAfter });
    }
  } catch {
    // Not the API's body: a proxy in front, or another server.
  }
  const code = resp.status === 503 ? "busy" : resp.status === 408 || resp.status === 504 ? "timeout" : "bad_response";
  const text = new TextDecoder().decode(bytes.subarray(0, 200));
  return new CompactHostError(code, `${what}: status ${resp.status} without an API error body: ${JSON.stringify(text)}`, { status: resp.status, retryAfter });
}
