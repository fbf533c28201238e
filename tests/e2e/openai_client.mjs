// OpenAI's Node SDK (npm `openai`) calling dpgate, one call after another in
// one process: chat.completions.create(...).withResponse(), each call with
// its own maxRetries. Driven by test_budgets_clients.py.
//
//   echo '{"baseUrl":..., "apiKey":..., "model":..., "calls":[{"requestId":..., "prompt":...,
//          "max_tokens":..., "maxRetries":..., "tool":false}]}' | node tests/e2e/openai_client.mjs
//
// "tool": true offers one function, which dpgate-sim calls in a 2-token
// answer whatever max_tokens was: a completion shorter than its budget.
//
// Prints one JSON line: the SDK's version and, per call, what the SDK
// returned (the completion and its answer's headers, or the error it threw:
// class, status, code, headers), when it started (ms on one clock for the
// process) and how long it took, and every HTTP attempt the SDK made for it
// (fetch_log.mjs): sent and answered when (ms from the call's start), with
// what.
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";

import { attempts, installFetchLog, watchedHeaders } from "./fetch_log.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");

// An ES module import does not read NODE_PATH: the SDK is loaded by path
// from $NODE_PATH (scripts/test sets it), else scripts/setup's local/npm.
function openaiDir() {
  const candidates = [
    ...(process.env.NODE_PATH || "").split(path.delimiter),
    path.join(repo, "local/npm/node_modules"),
  ];
  for (const dir of candidates) {
    if (dir && fs.existsSync(path.join(dir, "openai/index.mjs"))) return path.join(dir, "openai");
  }
  throw new Error("openai not found: run scripts/setup");
}

const spec = JSON.parse(fs.readFileSync(0, "utf8"));
installFetchLog();
const dir = openaiDir();
const { default: OpenAI } = await import(pathToFileURL(path.join(dir, "index.mjs")).href);
const { version } = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));

const client = new OpenAI({ apiKey: spec.apiKey, baseURL: spec.baseUrl });

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } } },
  },
};

const results = [];
for (const call of spec.calls) {
  const first = attempts.length;
  const started = performance.now();
  const result = { requestId: call.requestId };
  try {
    const params = {
      model: spec.model,
      messages: [{ role: "user", content: call.prompt }],
      max_tokens: call.max_tokens,
    };
    if (call.tool) params.tools = [weatherTool];
    const { data, response } = await client.chat.completions
      .create(params, { maxRetries: call.maxRetries, headers: { "X-Request-ID": call.requestId } })
      .withResponse();
    result.ok = true;
    result.status = response.status;
    result.headers = watchedHeaders(response.headers);
    result.usage = data.usage;
    result.finishReason = data.choices[0].finish_reason;
  } catch (error) {
    result.ok = false;
    result.error = {
      class: error.constructor.name,
      status: error.status ?? null,
      type: error.type ?? null,
      code: error.code ?? null,
      message: error.message,
      headers: error.headers ? watchedHeaders(error.headers) : null,
    };
  }
  result.startedMs = started;
  result.elapsedMs = performance.now() - started;
  result.attempts = attempts
    .slice(first)
    .map((a) => ({ ...a, sentMs: a.sentMs - started, answeredMs: a.answeredMs - started }));
  results.push(result);
}

console.log(JSON.stringify({ version, results }));
