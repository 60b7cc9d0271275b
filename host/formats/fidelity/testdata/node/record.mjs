// Sends the same conversations as host/formats/fidelity/sdk_test.go through
// the official Node SDKs, plain and streaming, to the loopback provider whose
// base URLs are in ANTHROPIC_BASE_URL and OPENAI_BASE_URL. The Go test
// records the bodies.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

const rounds = Number(process.env.ROUNDS || "3");
const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const toolOutput = (i) => `line ${i} of the listing: a.txt b.txt c.txt\n`.repeat(30);

function anthropicParams() {
  const messages = [];
  for (let i = 0; i < rounds; i++) {
    const user = { role: "user", content: [{ type: "text", text: `step ${i}: list and size /tmp <b>&</b>` }] };
    if (i === 0) {
      user.content.push(
        { type: "image", source: { type: "base64", media_type: "image/png", data: png } },
        { type: "document", source: { type: "text", media_type: "text/plain", data: "The plan: list, then size." }, title: "plan.txt", citations: { enabled: true } },
      );
    }
    const ls = `toolu_ls_${i}`, du = `toolu_du_${i}`;
    messages.push(user, {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "List, then size; both at once.", signature: `EqQBCkYIBxgCKkD${i}+sig/==` },
        { type: "redacted_thinking", data: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw" },
        { type: "text", text: "Checking." },
        { type: "tool_use", id: ls, name: "ls", input: { path: "/tmp", all: true, depth: 1.5 } },
        { type: "tool_use", id: du, name: "du", input: { path: "/tmp" } },
      ],
    }, {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: ls, content: toolOutput(i) },
        {
          type: "tool_result", tool_use_id: du, is_error: false, cache_control: { type: "ephemeral" },
          content: [{ type: "text", text: "8K\t/tmp" }, { type: "image", source: { type: "base64", media_type: "image/png", data: png } }],
        },
      ],
    });
  }
  const schema = { type: "object", properties: { path: { type: "string" } }, required: ["path"] };
  return {
    model: "claude-sonnet-4-5",
    max_tokens: 16000,
    system: [{ type: "text", text: "You are a coding agent.", cache_control: { type: "ephemeral" } }, { type: "text", text: "Answer tersely." }],
    messages,
    tools: [
      { name: "ls", description: "List a directory", input_schema: schema },
      { name: "du", description: "Size a directory", input_schema: schema, cache_control: { type: "ephemeral" } },
    ],
    thinking: { type: "enabled", budget_tokens: 4000 },
    metadata: { user_id: "user_1234" },
    temperature: 1,
    stop_sequences: ["\n\nHuman:"],
    context_management: { edits: [{ type: "clear_thinking_20251015", keep: "all" }] },
    output_config: { effort: "high" },
  };
}

function openAIParams() {
  const messages = [{ role: "system", content: "You are a coding agent. Answer tersely." }];
  for (let i = 0; i < rounds; i++) {
    let user = { role: "user", content: `step ${i}: list and size /tmp <b>&</b>` };
    if (i === 0) {
      user = {
        role: "user", name: "alex",
        content: [
          { type: "text", text: "step 0: what is in this picture and in /tmp?" },
          { type: "image_url", image_url: { url: `data:image/png;base64,${png}`, detail: "low" } },
        ],
      };
    }
    const ls = `call_ls_${i}`, du = `call_du_${i}`;
    const assistant = {
      role: "assistant", name: "agent",
      tool_calls: [
        { id: ls, type: "function", function: { name: "ls", arguments: '{"path": "/tmp",  "all": true}' } },
        { id: du, type: "function", function: { name: "du", arguments: '{\n  "path": "/tmp"\n}' } },
      ],
    };
    if (i === 1) assistant.refusal = "I will not delete /tmp.";
    messages.push(user, assistant,
      { role: "tool", tool_call_id: ls, content: toolOutput(i) },
      { role: "tool", tool_call_id: du, content: [{ type: "text", text: "8K" }, { type: "text", text: "\t/tmp" }] });
  }
  const parameters = { type: "object", properties: { path: { type: "string" } }, required: ["path"] };
  return {
    model: "gpt-4o",
    messages,
    tools: [
      { type: "function", function: { name: "ls", description: "List a directory", parameters } },
      { type: "function", function: { name: "du", description: "Size a directory", parameters, strict: false } },
    ],
    temperature: 0.2,
    max_completion_tokens: 2000,
    seed: 7,
    parallel_tool_calls: true,
    metadata: { run: "r1" },
    user: "user_1234",
    prompt_cache_key: "session-1",
  };
}

const anthropic = new Anthropic({ apiKey: "test-key", baseURL: process.env.ANTHROPIC_BASE_URL, maxRetries: 0, timeout: 30000 });
const openai = new OpenAI({ apiKey: "test-key", baseURL: process.env.OPENAI_BASE_URL, maxRetries: 0, timeout: 30000 });

await anthropic.messages.create(anthropicParams());
for await (const _ of await anthropic.messages.create({ ...anthropicParams(), stream: true })) { /* drain */ }
await openai.chat.completions.create(openAIParams());
for await (const _ of await openai.chat.completions.create({ ...openAIParams(), stream: true, stream_options: { include_usage: true } })) { /* drain */ }
