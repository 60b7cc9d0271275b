// A scripted agent conversation through compact-host proxy, written with
// the official Node SDKs. internal/proxy/node_test.go runs it and checks
// what the upstream received. Every other turn streams.
//
// Environment: PROXY_URL (the proxy's address), KIND (anthropic, openai
// or gemini), TURNS, API_KEY. Prints one JSON line per turn: {"turn","text"}.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { GoogleGenAI } from '@google/genai';

const { PROXY_URL, KIND, API_KEY } = process.env;
const TURNS = Number(process.env.TURNS || '14');

// The same turns as the Go tests' turnText.
function turnText(i) {
  return `Turn ${i}: please look at parser_${i}.go and fix the bug. ` +
    `detail ${i} of the failing case; `.repeat(55);
}

async function anthropic() {
  const client = new Anthropic({ baseURL: PROXY_URL, apiKey: API_KEY, maxRetries: 0, timeout: 240_000 });
  const tools = [{ name: 'read_file', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } } } }];
  const history = [];
  for (let i = 0; i < TURNS; i++) {
    history.push({ role: 'user', content: [{ type: 'text', text: turnText(i) }] });
    if (i % 4 === 1) {
      const id = `toolu_${String(i).padStart(2, '0')}`;
      history.push({ role: 'assistant', content: [{ type: 'tool_use', id, name: 'read_file', input: { path: `parser_${i}.go` } }] });
      history.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: `package parser // file ${i}` }] });
    }
    const params = {
      model: 'claude-sonnet-4-5', max_tokens: 2000, messages: history, tools,
      system: [{ type: 'text', text: 'You are a careful coding agent.' }],
      metadata: { user_id: 'user-42' }, thinking: { type: 'enabled', budget_tokens: 1024 }, temperature: 1,
      x_future_field: { keep: [1, 2] },
    };
    const reply = i % 2 === 0
      ? await client.messages.stream(params).finalMessage()
      : await client.messages.create(params);
    const text = reply.content.map((b) => b.text ?? '').join('');
    console.log(JSON.stringify({ turn: i, text }));
    history.push({ role: 'assistant', content: reply.content });
  }
}

async function openai() {
  const client = new OpenAI({ baseURL: `${PROXY_URL}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 240_000 });
  const tools = [{ type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } }];
  const history = [{ role: 'system', content: 'You are a careful coding agent.' }];
  for (let i = 0; i < TURNS; i++) {
    history.push({ role: 'user', content: turnText(i) });
    if (i % 4 === 1) {
      const id = `call_${String(i).padStart(2, '0')}`;
      history.push({ role: 'assistant', tool_calls: [{ id, type: 'function', function: { name: 'read_file', arguments: `{"path":"parser_${i}.go"}` } }] });
      history.push({ role: 'tool', tool_call_id: id, content: `package parser // file ${i}` });
    }
    const params = {
      model: 'gpt-4o', messages: history, tools, max_completion_tokens: 2000, temperature: 0.2,
      metadata: { run: '42' }, user: 'user-42', x_future_field: { keep: [1, 2] },
    };
    let text = '';
    if (i % 2 === 0) {
      const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    } else {
      const c = await client.chat.completions.create(params);
      text = c.choices[0].message.content;
    }
    console.log(JSON.stringify({ turn: i, text }));
    history.push({ role: 'assistant', content: text });
  }
}

async function gemini() {
  const ai = new GoogleGenAI({
    apiKey: API_KEY,
    httpOptions: { baseUrl: PROXY_URL, timeout: 240_000, extraBody: { x_future_field: { keep: [1, 2] } } },
  });
  const tools = [{ functionDeclarations: [{ name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } }] }];
  const history = [];
  for (let i = 0; i < TURNS; i++) {
    history.push({ role: 'user', parts: [{ text: turnText(i) }] });
    if (i % 4 === 1) {
      history.push({ role: 'model', parts: [{ functionCall: { name: 'read_file', args: { path: `parser_${i}.go` } }, thoughtSignature: `Y2FsbC1zaWc=/${i}` }] });
      history.push({ role: 'user', parts: [{ functionResponse: { name: 'read_file', response: { output: `package parser // file ${i}` } } }] });
    }
    const params = {
      model: 'gemini-2.5-pro', contents: history,
      config: {
        systemInstruction: 'You are a careful coding agent.', tools, maxOutputTokens: 1000, temperature: 0.2,
        thinkingConfig: { includeThoughts: true },
      },
    };
    let text = '';
    if (i % 2 === 0) {
      // The stream's parts become one content, its signature the last one seen.
      let signature;
      for await (const chunk of await ai.models.generateContentStream(params)) {
        for (const part of chunk.candidates?.[0]?.content?.parts ?? []) {
          text += part.text ?? '';
          signature = part.thoughtSignature ?? signature;
        }
      }
      history.push({ role: 'model', parts: [{ text, thoughtSignature: signature }] });
    } else {
      const reply = await ai.models.generateContent(params);
      text = reply.text;
      history.push(reply.candidates[0].content);
    }
    console.log(JSON.stringify({ turn: i, text }));
  }
}

const clients = { anthropic, openai, gemini };

try {
  await clients[KIND]();
} catch (err) {
  console.error(`client.mjs: ${err?.stack ?? err}`);
  process.exit(1);
}
