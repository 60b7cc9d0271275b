// Measures pi's session append, cut and load on the sessions the Go side
// exported (compact-host session logs, one file per session: message and
// compaction entries), and prints one JSON object. Run by
// `go run ./bench/pi/compare` (make bench-pi); it reads: node bench.mjs DIR.
import { readdirSync, readFileSync, writeFileSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import {
	SessionManager,
	findCutPoint,
	buildSessionContext,
} from "@mariozechner/pi-coding-agent";
// prepareCompaction (the cut, the messages to summarize and the file
// operations) is not in the package's exports; its module is imported by path.
const { prepareCompaction } = await import(
	new URL("./node_modules/@mariozechner/pi-coding-agent/dist/core/compaction/compaction.js", import.meta.url).href
);

const dir = process.argv[2];
const keepRecentTokens = Number(process.env.KEEP_RECENT_TOKENS ?? 40000);
const minSeconds = Number(process.env.MIN_SECONDS ?? 1);

// toPi turns canonical messages into pi's: tool results become toolResult
// messages, tool_use blocks toolCall blocks; system messages and images
// have no pi equivalent here and are left out. names maps tool call IDs to
// tool names across calls.
function toPi(msgs, names = new Map()) {
	const out = [];
	const ts = Date.now();
	for (const m of msgs) {
		const content = m.content ?? [];
		if (m.role === "assistant") {
			const blocks = [];
			for (const b of content) {
				if (b.type === "text") blocks.push({ type: "text", text: b.text ?? "" });
				else if (b.type === "thinking") blocks.push({ type: "thinking", thinking: b.text ?? "" });
				else if (b.type === "tool_use") {
					names.set(b.id, b.name);
					let args = b.input ?? {};
					if (typeof args !== "object" || args === null) args = { input: args };
					blocks.push({ type: "toolCall", id: b.id, name: b.name, arguments: args });
				}
			}
			const u = m.usage ?? {};
			out.push({
				role: "assistant", content: blocks, api: "anthropic-messages", provider: "anthropic", model: "bench",
				usage: { input: u.input_tokens ?? 0, output: u.output_tokens ?? 0, cacheRead: u.cache_read_tokens ?? 0, cacheWrite: u.cache_write_tokens ?? 0,
					totalTokens: (u.input_tokens ?? 0) + (u.output_tokens ?? 0), cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
				stopReason: "stop", timestamp: ts,
			});
		} else if (m.role === "user") {
			const texts = [];
			for (const b of content) {
				if (b.type === "tool_result") {
					out.push({ role: "toolResult", toolCallId: b.tool_use_id, toolName: names.get(b.tool_use_id) ?? "tool",
						content: [{ type: "text", text: b.text ?? "" }], isError: !!b.is_error, timestamp: ts });
				} else if (b.type === "text") texts.push({ type: "text", text: b.text ?? "" });
			}
			if (texts.length) out.push({ role: "user", content: texts, timestamp: ts });
		}
	}
	return out;
}

// measure runs fn until minSeconds have passed and returns the wall and CPU
// nanoseconds per call.
function measure(fn) {
	// Warm up until the JIT has compiled the hot paths.
	const w0 = process.hrtime.bigint();
	while (process.hrtime.bigint() - w0 < BigInt(Math.round(minSeconds * 0.3e9))) fn();
	let n = 0;
	const cpu0 = process.cpuUsage();
	const t0 = process.hrtime.bigint();
	let elapsed = 0n;
	do {
		fn();
		n++;
		elapsed = process.hrtime.bigint() - t0;
	} while (elapsed < BigInt(minSeconds * 1e9));
	const cpu = process.cpuUsage(cpu0);
	return { wallNs: Number(elapsed) / n, cpuNs: ((cpu.user + cpu.system) * 1000) / n };
}

// session builds an in-memory pi session of msgs, repeated until it holds
// at least n messages.
function session(msgs, n) {
	const sm = SessionManager.inMemory("/tmp");
	let count = 0;
	do {
		for (const m of msgs) {
			sm.appendMessage(m);
			count++;
		}
	} while (count < n);
	return sm;
}

const tmp = mkdtempSync(join(tmpdir(), "pi-bench-"));
const results = {};
try {
	for (const file of readdirSync(dir).filter((f) => f.endsWith(".jsonl")).sort()) {
		const name = file.replace(/\.jsonl$/, "");
		const entries = readFileSync(join(dir, file), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
		const canonical = entries.filter((e) => e.type === "message").map((e) => e.message);
		const msgs = toPi(canonical);
		if (msgs.length === 0) continue;

		const append = measure(() => session(msgs, 1));

		const big = session(msgs, 10000);
		const bigEntries = big.getEntries();
		const cut = measure(() => findCutPoint(bigEntries, 0, bigEntries.length, keepRecentTokens));
		const prepare = measure(() => prepareCompaction(bigEntries, { enabled: true, reserveTokens: 16384, keepRecentTokens }));

		// pi's own session file of the same conversation, as it writes it:
		// where the log has a compaction (the agent's), pi's compaction
		// entry with the same summary, keeping nothing before it.
		const path = join(tmp, name + ".jsonl");
		const sm = SessionManager.inMemory("/tmp");
		const names = new Map();
		for (const e of entries) {
			if (e.type === "message") for (const m of toPi([e.message], names)) sm.appendMessage(m);
			else if (e.type === "compaction") sm.appendCompaction(e.compaction.summary, null, e.compaction.tokens_before ?? 0);
		}
		writeFileSync(path, [sm.getHeader(), ...sm.getEntries()].map((e) => JSON.stringify(e)).join("\n") + "\n");
		const bytes = statSync(path).size;
		const load = measure(() => {
			const s = SessionManager.open(path, tmp);
			buildSessionContext(s.getEntries());
		});

		results[name] = {
			messages: msgs.length,
			append_ns_per_message: append.wallNs / msgs.length,
			append_cpu_ns_per_message: append.cpuNs / msgs.length,
			cut_messages: entries.length,
			cut_ns: cut.wallNs, cut_cpu_ns: cut.cpuNs,
			prepare_ns: prepare.wallNs, prepare_cpu_ns: prepare.cpuNs,
			load_bytes: bytes, load_ns: load.wallNs, load_cpu_ns: load.cpuNs,
		};
	}
} finally {
	rmSync(tmp, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify({ pi_version: JSON.parse(readFileSync(new URL("./node_modules/@mariozechner/pi-coding-agent/package.json", import.meta.url))).version, node: process.version, results }) + "\n");
