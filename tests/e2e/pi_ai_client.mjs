// One pi-ai call through dpgate, as the operators' desktop agent makes it:
// pi-ai's OpenAI-completions provider with a custom model whose baseUrl is
// dpgate's /v1. Driven by test_pi_ai.py and test_budgets_clients.py.
//
//   echo '{"baseUrl":..., "apiKey":..., "scenario":"text"|"tool", "prompt":...}' | node tests/e2e/pi_ai_client.mjs
//
// The spec comes on stdin: an over-window prompt is larger than an argument may be.
//
// "drain": {"max_tokens": N} first sends one plain chat completion with
// the same key (not through pi-ai, not among the attempts), so a test can
// empty the key's token bucket right before pi-ai's call, not a node start-up
// earlier.
//
// "maxRetries" is passed to pi-ai (0 when absent); null leaves it unset, as
// the agent does, so the OpenAI SDK inside pi-ai keeps its own default.
//
// Prints one JSON line: the event types in order, the final assistant
// message (stopReason, errorMessage, text, tool calls, usage), what
// isContextOverflow(message, contextWindow) says of it, how long the call
// took and every HTTP attempt made for it (fetch_log.mjs).
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";

import { attempts, installFetchLog } from "./fetch_log.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");

// pi-ai is an ES module: NODE_PATH does not reach `import`, so it is loaded
// by path from $NODE_PATH (scripts/test sets it), else scripts/setup's local/npm.
async function loadPiAi() {
  const candidates = [...(process.env.NODE_PATH || "").split(path.delimiter), path.join(repo, "local/npm/node_modules")];
  for (const dir of candidates) {
    const main = dir && path.join(dir, "@mariozechner/pi-ai/dist/index.js");
    if (main && fs.existsSync(main)) return import(pathToFileURL(main).href);
  }
  throw new Error("@mariozechner/pi-ai not found: run scripts/setup");
}

const spec = JSON.parse(fs.readFileSync(0, "utf8"));
installFetchLog();
const { stream, isContextOverflow } = await loadPiAi();

const model = {
  id: spec.model,
  name: "DeepSeek through dpgate",
  api: "openai-completions",
  provider: "dpgate",
  baseUrl: spec.baseUrl,
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: spec.contextWindow,
  maxTokens: spec.maxTokens,
};

const context = {
  systemPrompt: spec.systemPrompt,
  messages: [{ role: "user", content: spec.prompt, timestamp: Date.now() }],
};
if (spec.scenario === "tool") {
  context.tools = [
    {
      name: "get_weather",
      description: "Current weather for a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string", description: "City name" } },
      },
    },
  ];
}

const events = [];
let deltas = "";
const options = { apiKey: spec.apiKey, maxTokens: spec.maxTokens, headers: { "X-Request-ID": spec.requestId } };
if (spec.maxRetries !== null) options.maxRetries = spec.maxRetries ?? 0;
if (spec.drain) {
  const response = await fetch(`${spec.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${spec.apiKey}`, "Content-Type": "application/json" },
    body: JSON.stringify({ model: spec.model, messages: [{ role: "user", content: spec.prompt }], ...spec.drain }),
  });
  if (response.status !== 200) throw new Error(`drain: ${response.status} ${await response.text()}`);
  await response.text();
  attempts.length = 0;
}
const started = performance.now();
const s = stream(model, context, options);
for await (const event of s) {
  events.push(event.type);
  if (event.type === "text_delta") deltas += event.delta;
}
const message = await s.result();
const elapsedMs = performance.now() - started;

console.log(
  JSON.stringify({
    events,
    deltas,
    stopReason: message.stopReason,
    errorMessage: message.errorMessage ?? null,
    text: message.content.filter((b) => b.type === "text").map((b) => b.text).join(""),
    toolCalls: message.content
      .filter((b) => b.type === "toolCall")
      .map((b) => ({ id: b.id, name: b.name, arguments: b.arguments })),
    usage: message.usage,
    isContextOverflow: isContextOverflow(message, spec.contextWindow),
    elapsedMs,
    attempts: attempts.map((a) => ({ ...a, sentMs: a.sentMs - started, answeredMs: a.answeredMs - started })),
  }),
);
