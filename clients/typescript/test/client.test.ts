// Tests of the client against a live `compact-host serve` (and a live
// `compact-host proxy` for the admin side), started here on free loopback
// ports. The binary is $COMPACT_HOST_BIN. test/run.mjs (`npm test`) runs
// them in a project that installed the packed package, so they import it
// by name as its users do.

import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { Client, CompactHostError, ProxyAdmin, parseMetrics, type CanonicalMessage, type CompactOptions } from "compact-host-client";

const TOKEN = "t0ken-for-the-tests";
// A hang guard, not a speed requirement: a cold start compiles the
// built-in plugins, and CI machines are shared.
const START_TIMEOUT_MS = 180_000;

class Daemon {
  url = "";
  private readonly log: string[] = [];
  private constructor(private readonly proc: ChildProcess) {}

  static start(bin: string, args: string[], env: NodeJS.ProcessEnv, pattern: RegExp): Promise<Daemon> {
    const d = new Daemon(spawn(bin, args, { env, stdio: ["ignore", "ignore", "pipe"] }));
    return new Promise((ok, fail) => {
      const timer = setTimeout(() => {
        d.stop();
        fail(new Error(`${args[0]} did not start within ${START_TIMEOUT_MS} ms:\n${d.log.join("")}`));
      }, START_TIMEOUT_MS);
      d.proc.stderr!.setEncoding("utf8");
      d.proc.stderr!.on("data", (chunk: string) => {
        d.log.push(chunk);
        const m = pattern.exec(d.log.join(""));
        if (m && !d.url) {
          d.url = `http://${m[1]}`;
          clearTimeout(timer);
          ok(d);
        }
      });
      d.proc.on("exit", (code) => {
        clearTimeout(timer);
        if (!d.url) {
          fail(new Error(`${args[0]} exited with ${code}:\n${d.log.join("")}`));
        }
      });
    });
  }

  stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
      return Promise.resolve();
    }
    return new Promise((ok) => {
      const kill = setTimeout(() => this.proc.kill("SIGKILL"), 30_000);
      this.proc.on("exit", () => {
        clearTimeout(kill);
        ok();
      });
      this.proc.kill("SIGTERM");
    });
  }
}

let work = "";
let serve: Daemon;
let proxy: Daemon;

before(async () => {
  const bin = process.env.COMPACT_HOST_BIN ?? "";
  if (!bin) {
    throw new Error("COMPACT_HOST_BIN is not set: run the tests with `npm test` (test/run.mjs), which sets it");
  }
  work = mkdtempSync(join(tmpdir(), "compact-host-ts-"));
  // A home of its own: no user config, no API key (so summaries are
  // written offline), a compilation cache that starts empty.
  const env = {
    PATH: process.env.PATH,
    HOME: work,
    XDG_CONFIG_HOME: join(work, "config"),
    XDG_CACHE_HOME: join(work, "cache"),
    COMPACT_HOST_TEST_TOKEN: TOKEN,
  };
  serve = await Daemon.start(bin, ["serve", "--addr", "127.0.0.1:0", "--token-env", "COMPACT_HOST_TEST_TOKEN"], env, /serving on http:\/\/(\S+)/);
  proxy = await Daemon.start(
    bin,
    ["proxy", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9", "--offline", "--store", "memory"],
    env,
    /proxying http:\/\/(\S+) to/,
  );
});

after(async () => {
  await Promise.all([serve?.stop(), proxy?.stop()]);
  if (work) {
    rmSync(work, { recursive: true, force: true });
  }
});

function filler(tag: string, tokens: number): string {
  let out = "";
  while (out.length < tokens * 4) {
    out += `${tag} line ${out.length} of output\n`;
  }
  return out;
}

/** A coding agent's session in canonical form: a pinned system prompt,
 * then turns of a request, tool calls and their results. */
function codingSession(seed: number, turns = 8, resultTokens = 600): CanonicalMessage[] {
  const msgs: CanonicalMessage[] = [
    { role: "system", pinned: true, content: [{ type: "text", text: "You are a careful coding agent. Run the tests before you say you are done." }] },
  ];
  for (let turn = 0; turn < turns; turn++) {
    msgs.push({ role: "user", content: [{ type: "text", text: `session ${seed} turn ${turn}: fix the failing test in pkg${turn}/handler_test.go` }] });
    for (let step = 0; step < 2; step++) {
      const a = `s${seed}_t${turn}_${step}_read`;
      const b = `s${seed}_t${turn}_${step}_edit`;
      msgs.push({
        role: "assistant",
        content: [
          { type: "text", text: "Let me look at the code first." },
          { type: "tool_use", id: a, name: "Read", input: { file_path: `pkg${turn}/file${step}.go` } },
          { type: "tool_use", id: b, name: "Edit", input: { file_path: `pkg${turn}/edit${step}.go`, old_string: "x", new_string: "y" } },
        ],
      });
      msgs.push({
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: a, text: filler(`s${seed}-read-${turn}-${step}`, resultTokens) },
          { type: "tool_result", tool_use_id: b, text: "The file was edited." },
        ],
      });
    }
    msgs.push({ role: "assistant", content: [{ type: "text", text: `Turn ${turn} is done: the test passes now because the handler checks the nil case.` }] });
  }
  return msgs;
}

// The window the sessions above overflow: about 11,000 tokens of results.
const SMALL: CompactOptions = { context_window: 14000, keep_recent_tokens: 2000 };

async function rejects(p: Promise<unknown>, code: string): Promise<CompactHostError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof CompactHostError, `not a CompactHostError: ${err}`);
    assert.equal(err.code, code, err.message);
    return err;
  }
  assert.fail(`no error; want ${code}`);
}

describe("service", () => {
  const client = () => new Client({ baseUrl: serve.url, token: TOKEN, timeoutMs: 120_000 });

  test("health needs no token", async () => {
    const h = await new Client({ baseUrl: serve.url }).health();
    assert.equal(h.status, "ok");
    assert.match(h.abi, /^v\d+\.\d+$/);
    assert.ok(h.plugins > 0);
  });

  test("a missing or wrong token is unauthorized", async () => {
    for (const token of [undefined, "wrong"]) {
      const e = await rejects(new Client({ baseUrl: serve.url, token }).plugins(), "unauthorized");
      assert.equal(e.status, 401);
      assert.equal(e.retryable, false);
    }
  });

  test("plugins", async () => {
    const p = await client().plugins();
    const structured = p.plugins.find((x) => x.name === "structured");
    assert.ok(structured?.loaded);
    assert.ok(structured.kinds?.includes("strategy"));
  });

  test("the OpenAPI document has what the client calls", async () => {
    const doc = await client().openapi();
    assert.match(doc.openapi, /^3\.1\./);
    for (const [path, method] of [
      ["/healthz", "get"], ["/openapi.json", "get"], ["/v1/plugins", "get"], ["/v1/compact", "post"],
      ["/v1/check", "post"], ["/v1/truncate", "post"], ["/_compact-host/metrics", "get"], ["/_compact-host/healthz", "get"],
    ]) {
      assert.ok(doc.paths[path]?.[method], `${method.toUpperCase()} ${path}`);
    }
    const codes: string[] = doc.components.schemas.ErrorCode.enum;
    assert.ok(codes.includes("busy") && codes.includes("timeout"), "the retryable codes are the API's");
  });

  test("the package's README documents every call and every error code", async () => {
    const readme = readFileSync(join(process.cwd(), "node_modules", "compact-host-client", "README.md"), "utf8");
    for (const cls of [Client, ProxyAdmin]) {
      const methods = Object.getOwnPropertyNames(cls.prototype).filter(
        (n) => n !== "constructor" && typeof Object.getOwnPropertyDescriptor(cls.prototype, n)?.value === "function",
      );
      assert.ok(methods.length > 0);
      for (const m of methods) {
        assert.ok(readme.includes(`\`${m}(`), `README.md does not document ${cls.name}.${m}`);
      }
    }
    assert.ok(readme.includes("`parseMetrics("));
    const codes: string[] = (await client().openapi()).components.schemas.ErrorCode.enum;
    for (const code of [...codes, "unreachable", "aborted", "bad_response"]) {
      assert.ok(readme.includes(`| \`${code}\` |`), `README.md's error table lacks ${code}`);
    }
  });

  test("compact returns canonical messages to send", async () => {
    const session = codingSession(1);
    const got = await client().compact(session, { options: SMALL });
    const rep = got.report;
    assert.equal(rep.action, "compacted");
    assert.equal(rep.output_format, "canonical");
    assert.ok(rep.tokens_after < rep.tokens_before);
    assert.equal(rep.offline, true, "no model configured");
    const msgs = got.messages!;
    assert.ok(Array.isArray(msgs));
    assert.equal(msgs.length, rep.messages_kept);
    assert.ok(msgs.length < session.length);
    assert.equal(msgs[0].role, "system", "the pinned system prompt is kept");
    assert.ok(msgs.some((m) => m.summary === true), "a summary stands for the folded history");
    assert.match(JSON.stringify(msgs), /Turn 7 is done/, "the newest reply is kept verbatim");
    assert.equal(typeof got.session, "string", "the session log is still returned");
    assert.equal(got.system, undefined);

    // The messages are a session the server takes back as they are.
    const again = await client().check(msgs, { options: { context_window: 14000 } });
    assert.equal(again.messages, msgs.length);
    assert.equal(again.fits, true);
    const plan = await client().compact(session, { options: { context_window: 14000, dry_run: true } });
    assert.equal(plan.report.action, "plan");
    assert.equal(plan.messages, undefined, "a dry run returns no messages");
  });

  test("compact to anthropic splits the system prompt", async () => {
    const got = await client().compact(codingSession(2), { output_format: "anthropic", options: SMALL });
    assert.equal(got.report.output_format, "anthropic");
    assert.match(JSON.stringify(got.system), /careful coding agent/);
    assert.deepEqual(got.messages, (got.session as { messages: unknown }).messages);
    assert.deepEqual(new Set(got.messages!.map((m) => m.role)), new Set(["user", "assistant"]));
  });

  test("compact to openai", async () => {
    const got = await client().compact(codingSession(3), { output_format: "openai", options: SMALL });
    assert.equal(got.messages![0].role, "system");
    assert.ok(got.messages!.some((m) => m.role === "tool"), "tool results are messages of role tool");
    assert.equal(got.system, undefined);
  });

  test("check measures, then applies", async () => {
    const session = codingSession(5);
    const measured = await client().check(session, { options: { context_window: 14000 }, tool_schema_tokens: 300 });
    assert.equal(measured.overhead, 300);
    assert.equal(measured.total, measured.tokens + 300);
    assert.notEqual(measured.action, "none");
    assert.equal(measured.context, undefined);

    const applied = await client().check(session, { output_format: "openai", options: { context_window: 14000 }, tool_schema_tokens: 300, apply: true });
    assert.notEqual(applied.decision?.action, "none");
    assert.equal(applied.fits, true);
    assert.deepEqual(applied.context?.messages, (applied.session as { messages: unknown }).messages);
  });

  test("truncate", async () => {
    const content = filler("build", 4000);
    const got = await client().truncate(content, { tool: "Bash", max_tokens: 300 });
    assert.equal(got.truncated, true);
    assert.ok(got.tokens_after <= 300);
    assert.equal(got.bytes_before, Buffer.byteLength(content));
  });

  test("API errors carry their code and line", async () => {
    const e = await rejects(client().compact('{"role":"user","content":[]}\nnot json\n', { format: "canonical" }), "bad_session");
    assert.equal(e.status, 400);
    assert.equal(e.line, 2);
    assert.equal(e.retryable, false);
    const s = await rejects(client().compact(codingSession(6), { options: { strategy: "no-such-strategy" } }), "unknown_strategy");
    assert.match(s.message, /no-such-strategy/);
    await rejects(client().check(codingSession(6), { format: "word" as never }), "unknown_format");
  });
});

describe("sessions", () => {
  const client = () => new Client({ baseUrl: serve.url, token: TOKEN, timeoutMs: 120_000 });

  test("a kept session compacts as it grows", async () => {
    const msgs = codingSession(7);
    const created = await client().putSession("ts-chat-1", msgs.slice(0, 4), { options: { context_window: 14000 } });
    assert.equal(created.created, true);
    assert.equal(created.action, "none");
    let revision = created.revision;
    // The agent sends each turn's new messages only.
    const actions: string[] = [];
    let reports = 0;
    for (let at = 4; at < msgs.length; ) {
      let end = at + 1;
      while (end < msgs.length && msgs[end].role !== "assistant") {
        end++;
      }
      // The client reports each call's usage on its reply.
      const batch = msgs.slice(at, end).map((m) => {
        if (m.role !== "assistant") {
          return m;
        }
        reports++;
        return { ...m, usage: { input_tokens: 5, cache_write_tokens: 400, output_tokens: 50 } };
      });
      const up = await client().appendMessages("ts-chat-1", batch, { if_revision: revision });
      assert.equal(up.appended, end - at);
      assert.ok(up.revision > revision);
      revision = up.revision;
      actions.push(up.action);
      if (up.action === "compacted") {
        assert.ok(up.report!.tokens_after < up.report!.tokens_before);
      }
      at = end;
    }
    assert.ok(actions.includes("compacted"), "the session crossed its threshold");

    const view = await client().getSession("ts-chat-1");
    assert.equal(view.revision, revision);
    assert.equal(view.output_format, "canonical");
    assert.ok(view.compactions >= 1);
    assert.ok(view.summary);
    assert.equal(view.messages[0].role, "system");
    assert.match(JSON.stringify(view.messages), /Turn 7 is done/);
    assert.ok(view.messages.length < msgs.length);
    assert.equal(view.cache.requests, reports);
    assert.equal(view.cache.misses.cold_start, 1);
    assert.equal(view.cache.cache_ttl, "5m");
    assert.equal(view.cache.cost.bill.cache_write_5m_tokens, 400 * reports);
    assert.equal(view.cache.cost.compactions.length, view.compactions);
    const samples = await client().metrics();
    assert.ok(samples.get('compact_host_proxy_cache_misses_total{reason="cold_start"}')! >= 1);

    const anthropic = await client().getSession("ts-chat-1", { output_format: "anthropic" });
    assert.match(JSON.stringify(anthropic.system), /careful coding agent/);
    assert.equal(anthropic.messages[0].role, "user");

    const conflict = await rejects(client().putSession("ts-chat-1", msgs.slice(0, 4), { if_revision: revision - 1 }), "revision_conflict");
    assert.equal(conflict.status, 409);
    assert.equal(conflict.retryable, false, "a conflict wants a fresh read, not the same call");

    assert.deepEqual(await client().deleteSession("ts-chat-1"), { id: "ts-chat-1", deleted: true });
    const gone = await rejects(client().getSession("ts-chat-1"), "session_not_found");
    assert.equal(gone.status, 404);
  });

  test("append to no session", async () => {
    await rejects(client().appendMessages("ts-nobody", codingSession(8, 1).slice(1, 2)), "session_not_found");
  });

  test("a bad session ID", async () => {
    const e = await rejects(client().getSession("../etc"), "bad_request");
    assert.equal(e.status, 400);
  });
});

describe("transport", () => {
  test("the deadline covers a server that never answers", async () => {
    // A listener that accepts and never answers: the edge the test needs,
    // since a real server answers.
    const held: import("node:net").Socket[] = [];
    const ln: Server = createServer((c) => held.push(c));
    await new Promise<void>((ok) => ln.listen(0, "127.0.0.1", ok));
    const port = (ln.address() as { port: number }).port;
    try {
      const began = Date.now();
      const e = await rejects(new Client({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 300 }).health(), "timeout");
      assert.equal(e.retryable, true);
      assert.ok(Date.now() - began < 30_000, "the deadline held");
    } finally {
      held.forEach((c) => c.destroy());
      ln.close();
    }
  });

  test("the caller's signal aborts", async () => {
    const ctl = new AbortController();
    ctl.abort();
    const e = await rejects(new Client({ baseUrl: serve.url }).health({ signal: ctl.signal }), "aborted");
    assert.equal(e.retryable, false);
  });

  test("unreachable", async () => {
    const ln = createServer();
    await new Promise<void>((ok) => ln.listen(0, "127.0.0.1", ok));
    const port = (ln.address() as { port: number }).port;
    await new Promise((ok) => ln.close(ok));
    const e = await rejects(new Client({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 10_000 }).health(), "unreachable");
    assert.equal(e.retryable, true);
  });

  test("an answer over the size limit", async () => {
    const e = await rejects(new Client({ baseUrl: serve.url, token: TOKEN, maxResponseBytes: 64 }).plugins(), "bad_response");
    assert.match(e.message, /maxResponseBytes/);
  });

  test("bad arguments", () => {
    assert.throws(() => new Client({ baseUrl: "127.0.0.1:8377" }), TypeError);
    assert.throws(() => new Client({ timeoutMs: 0 }), RangeError);
    assert.throws(() => new Client({ maxResponseBytes: -1 }), RangeError);
    assert.throws(() => new Client().getSession(""), TypeError);
  });
});

describe("proxy admin", () => {
  test("health and metrics", async () => {
    const admin = new ProxyAdmin({ baseUrl: proxy.url });
    assert.equal(await admin.health(), true);
    const text = await admin.metricsText();
    assert.match(text, /# TYPE compact_host_proxy_store_errors_total counter/);
    const m = await admin.metrics();
    assert.equal(m.get("compact_host_proxy_store_errors_total"), 0);
    assert.ok([...m.keys()].every((k) => k.startsWith("compact_host_proxy_")));
  });

  test("parseMetrics reads labels", () => {
    const text = '# HELP x y\ncompact_host_proxy_requests_total{action="spliced",kind="a b"} 3\ngo_goroutines 7\ncompact_host_proxy_store_errors_total 0\n';
    assert.deepEqual(
      parseMetrics(text, "compact_host_proxy_"),
      new Map([
        ['compact_host_proxy_requests_total{action="spliced",kind="a b"}', 3],
        ["compact_host_proxy_store_errors_total", 0],
      ]),
    );
  });
});
