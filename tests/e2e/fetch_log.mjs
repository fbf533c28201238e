// Every HTTP attempt a client library makes, as it makes it: the OpenAI SDK
// (and pi-ai, through its own copy of it) sends with the global fetch, and
// retries inside one call, so a wrapper around globalThis.fetch is the only
// place a test sees each attempt: when it was sent, what came back, when.
//
// Install it before the library builds its client: the OpenAI SDK takes
// globalThis.fetch when constructed.
import { performance } from "node:perf_hooks";

// The answer headers a retry decision is made from, and OpenAI's rate-limit fields.
const WATCHED = [
  "retry-after",
  "retry-after-ms",
  "x-should-retry",
  "x-ratelimit-limit-tokens",
  "x-ratelimit-remaining-tokens",
  "x-ratelimit-reset-tokens",
  "x-ratelimit-limit-requests",
  "x-ratelimit-remaining-requests",
  "x-ratelimit-reset-requests",
  "x-request-id",
];

export function watchedHeaders(headers) {
  const out = {};
  for (const name of WATCHED) {
    const value = headers.get(name);
    if (value !== null) out[name] = value;
  }
  return out;
}

export const attempts = [];

export function installFetchLog() {
  const original = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    const attempt = {
      sentMs: performance.now(),
      requestId: headers.get("x-request-id"),
      retryCount: headers.get("x-stainless-retry-count"),
    };
    attempts.push(attempt);
    const response = await original(input, init);
    attempt.answeredMs = performance.now();
    attempt.status = response.status;
    attempt.headers = watchedHeaders(response.headers);
    return response;
  };
}
