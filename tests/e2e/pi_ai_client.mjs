// One pi-ai call through dpgate, as the operators' desktop agent makes it:
// pi-ai's OpenAI-completions provider with a custom model whose baseUrl is
// dpgate's /v1. Driven by test_pi_ai.py.
//
//   echo '{"baseUrl":..., "apiKey":..., "scenario":"text"|"tool", "prompt":...}' | node tests/e2e/pi_ai_client.mjs
//
// The spec comes on stdin: an over-window prompt is larger than an argument may be.
//
// Prints one JSON line: the event types in order, the final assistant
// message (stopReason, errorMessage, text, tool calls, usage) and what
// isContextOverflow(message, contextWindow) says of it.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

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
const s = stream(model, context, {
  apiKey: spec.apiKey,
  maxTokens: spec.maxTokens,
  headers: { "X-Request-ID": spec.requestId },
  maxRetries: 0,
});
for await (const event of s) {
  events.push(event.type);
  if (event.type === "text_delta") deltas += event.delta;
}
const message = await s.result();

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
  }),
);
