// JS port of docs/VLLM_RENDERING.md sections 3-4: a chat completions request
// body (raw JSON text) and a content format ("string" or "openai") become
// the variables the chat template is rendered with, as vLLM and transformers
// build them; plus transformers' continue_final_message marker.
//
// An independent port of the page, checked against vllm_preprocess.py (the
// reference) on every golden line by generate_templates.mjs. The request is
// parsed as Python's json.loads parses it, into a Python-like value model:
//   null, booleans, strings   as themselves
//   int                       bigint (exact, any size)
//   float                     number (1.0 stays a float: 1.0 is a number, 1 is 1n)
//   dict                      Map (insertion order; a repeated key keeps its
//                             first position and last value, as a dict does)
//   list                      Array
// JSON.parse would lose all three distinctions. (One gap: Python refuses
// integers of more than 4,300 digits; the corpus has none.)
//
// The spec points decided here are the same as in vllm_preprocess.py (see its
// docstring and tests/golden/README.md).

export const CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG ";
const TEXT_PART_KEYS = new Map([
  ["text", "text"],
  ["input_text", "text"],
  ["output_text", "text"],
  ["refusal", "refusal"],
  ["thinking", "thinking"],
]);
const IMAGE_PART_TYPES = new Set(["image_url", "input_image"]);
const REASONING_EFFORTS = new Set(["none", "minimal", "low", "medium", "high", "xhigh", "max"]);
const SPECIAL_TOKEN_NAMES = ["bos_token", "eos_token", "unk_token", "pad_token"];

export class Refused extends Error {}
export class RenderError extends Error {}
export class JSONDecodeError extends Error {}

// --- json.loads ----------------------------------------------------------------
const JSON_WS = new Set([" ", "\t", "\n", "\r"]);
const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/y;
const ESCAPES = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };

/** Python's json.loads (NaN, Infinity and -Infinity accepted) into the value model above. */
export function pyJsonLoads(text) {
  let i = 0;
  const fail = (what) => {
    throw new JSONDecodeError(`${what} at char ${i}`);
  };
  const ws = () => {
    while (i < text.length && JSON_WS.has(text[i])) ++i;
  };
  const literal = (word, value) => {
    if (text.startsWith(word, i)) {
      i += word.length;
      return { value };
    }
    return null;
  };
  function string() {
    ++i; // opening quote
    let out = "";
    for (;;) {
      if (i >= text.length) fail("Unterminated string");
      const c = text[i];
      if (c === '"') {
        ++i;
        return out;
      }
      if (c < " ") fail("Invalid control character");
      if (c !== "\\") {
        out += c;
        ++i;
        continue;
      }
      const e = text[i + 1];
      if (e === "u") {
        const hex = text.slice(i + 2, i + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail("Invalid \\uXXXX escape");
        out += String.fromCharCode(parseInt(hex, 16)); // surrogate pairs join as in Python
        i += 6;
      } else if (e in ESCAPES) {
        out += ESCAPES[e];
        i += 2;
      } else fail("Invalid \\escape");
    }
  }
  function value(depth) {
    if (depth > 900) fail("Nesting too deep");
    ws();
    const c = text[i];
    if (c === '"') return string();
    if (c === "{") {
      ++i;
      const out = new Map();
      ws();
      if (text[i] === "}") {
        ++i;
        return out;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail("Expecting property name enclosed in double quotes");
        const key = string();
        ws();
        if (text[i] !== ":") fail("Expecting ':' delimiter");
        ++i;
        out.set(key, value(depth + 1));
        ws();
        if (text[i] === ",") ++i;
        else if (text[i] === "}") {
          ++i;
          return out;
        } else fail("Expecting ',' delimiter");
      }
    }
    if (c === "[") {
      ++i;
      const out = [];
      ws();
      if (text[i] === "]") {
        ++i;
        return out;
      }
      for (;;) {
        out.push(value(depth + 1));
        ws();
        if (text[i] === ",") ++i;
        else if (text[i] === "]") {
          ++i;
          return out;
        } else fail("Expecting ',' delimiter");
      }
    }
    const word =
      literal("null", null) ?? literal("true", true) ?? literal("false", false) ?? literal("NaN", NaN) ?? literal("Infinity", Infinity) ?? literal("-Infinity", -Infinity);
    if (word) return word.value;
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (!m) fail("Expecting value");
    i += m[0].length;
    if (m[1] === undefined && m[2] === undefined) return BigInt(m[0]);
    return Number(m[0]); // correctly rounded, as Python's float()
  }
  const out = value(0);
  ws();
  if (i !== text.length) fail("Extra data");
  return out;
}

// Python's str.isspace() set, which str.strip() and rstrip() use.
const PY_SPACE = new Set([..."\t\n\u000b\u000c\r\u001c\u001d\u001e\u001f \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"]);
export function pyStrip(s, left = true, right = true) {
  let a = 0;
  let b = s.length;
  while (left && a < b && PY_SPACE.has(s[a])) ++a;
  while (right && b > a && PY_SPACE.has(s[b - 1])) --b;
  return s.slice(a, b);
}

const isDict = (v) => v instanceof Map;
const isStr = (v) => typeof v === "string";

// --- sections 3 and 4 ----------------------------------------------------------------
/** bos/eos/unk/pad from a tokenizer_config.json (parsed with pyJsonLoads). */
export function specialTokens(config) {
  const out = new Map();
  for (const name of SPECIAL_TOKEN_NAMES) {
    let value = config.get(name);
    if (isDict(value)) value = value.get("content");
    if (value !== undefined && value !== null) out.set(name, value);
  }
  return out;
}

function contentParts(content) {
  if (content === undefined || content === null) return [];
  if (isStr(content)) return [new Map([["type", "text"], ["text", content]])];
  if (Array.isArray(content)) return content;
  throw new Refused("message content must be a string, an array of parts or null");
}

function convertMessage(msg, format) {
  if (!isDict(msg) || !isStr(msg.get("role"))) throw new Refused("a message must be an object with a string role");
  const role = msg.get("role");
  const items = []; // {text} or {image: true}
  let images = 0;
  for (const part of contentParts(msg.get("content"))) {
    const kind = isDict(part) ? part.get("type") : undefined;
    if (TEXT_PART_KEYS.has(kind)) {
      const text = part.get(TEXT_PART_KEYS.get(kind));
      if (text === undefined || text === null) continue;
      if (!isStr(text)) throw new Refused(`a ${kind} part needs a string`);
      items.push({ text });
    } else if (IMAGE_PART_TYPES.has(kind)) {
      ++images;
      items.push({ image: true });
    } else throw new Refused(`unsupported content part type: ${kind}`);
  }
  const content =
    format === "string"
      ? items.filter((x) => !x.image).map((x) => x.text).join("\n")
      : items.map((x) => (x.image ? new Map([["type", "image"]]) : new Map([["type", "text"], ["text", x.text]])));
  const out = new Map([["role", role], ["content", content]]);

  if (role === "assistant") {
    const calls = msg.get("tool_calls");
    if (calls !== undefined && calls !== null) out.set("tool_calls", calls);
    let reasoning = msg.get("reasoning");
    if (reasoning === undefined || reasoning === null) reasoning = msg.get("reasoning_content");
    if (reasoning !== undefined && reasoning !== null) {
      out.set("reasoning", reasoning);
      out.set("reasoning_content", reasoning);
    }
  } else if (role === "tool") {
    if (msg.has("tool_call_id")) out.set("tool_call_id", msg.get("tool_call_id"));
    if (Array.isArray(content) && content.every((p) => p.get("type") === "text")) {
      out.set("content", content.map((p) => p.get("text")).join("\n"));
    }
  }
  if (isStr(msg.get("name"))) out.set("name", msg.get("name"));
  if (role === "developer") out.set("tools", null);  // vLLM passes the message's own tools; never sent here
  return { message: out, images };
}

function convertToolCall(call) {
  if (!isDict(call) || !isDict(call.get("function"))) throw new Refused("a tool call needs a function object");
  // pydantic rebuilds the OpenAI TypedDicts in field order and drops other keys.
  const out = new Map();
  if (call.has("id")) out.set("id", call.get("id"));
  const fn = new Map();
  for (const key of ["arguments", "name"]) if (call.get("function").has(key)) fn.set(key, call.get("function").get(key));
  out.set("function", fn);
  if (call.has("type")) out.set("type", call.get("type"));

  const args = fn.get("arguments");
  if (isStr(args)) {
    try {
      fn.set("arguments", pyJsonLoads(args));
    } catch (e) {
      if (!(e instanceof JSONDecodeError)) throw e;
      fn.set("arguments", new Map());
    }
  } else if (!isDict(args) && !Array.isArray(args)) {
    fn.set("arguments", new Map());
  }
  return out;
}

function postprocess(messages) {
  for (const msg of messages) {
    if (msg.get("role") !== "assistant" || !msg.has("tool_calls")) continue;
    const calls = msg.get("tool_calls");
    if (!Array.isArray(calls)) throw new Refused("tool_calls must be an array");
    if (calls.length === 0) msg.delete("tool_calls");
    else msg.set("tool_calls", calls.map(convertToolCall));
  }
}

function convertTools(tools) {
  if (tools === undefined || tools === null) return null;
  if (!Array.isArray(tools)) throw new Refused("tools must be an array");
  return tools.map((tool) => {
    if (!isDict(tool) || (tool.has("type") ? tool.get("type") : "function") !== "function") throw new Refused('a tool\'s type must be "function"');
    const fn = tool.get("function");
    if (!isDict(fn) || !isStr(fn.get("name"))) throw new Refused("a tool needs a function with a string name");
    const out = new Map([
      ["name", fn.get("name")],
      ["description", fn.has("description") ? fn.get("description") : null],
      ["parameters", fn.has("parameters") ? fn.get("parameters") : null],
    ]);
    // vLLM's FunctionDefinition keeps strict and defer_loading only when set
    // (a tool-level defer_loading fills the function's); other keys are dropped.
    const set = (map, key) => map.has(key) && map.get(key) !== null && map.get(key) !== undefined;
    if (set(fn, "strict")) out.set("strict", fn.get("strict"));
    if (set(fn, "defer_loading")) out.set("defer_loading", fn.get("defer_loading"));
    else if (set(tool, "defer_loading")) out.set("defer_loading", tool.get("defer_loading"));
    const entry = new Map([["type", "function"], ["function", out]]);
    if (set(tool, "defer_loading")) entry.set("defer_loading", tool.get("defer_loading"));
    return entry;
  });
}

/** vLLM's merge_kwargs: overriding values null and "auto" are dropped. */
function merge(defaults, overrides) {
  const out = new Map(defaults);
  for (const [key, value] of overrides) if (value !== null && value !== undefined && value !== "auto") out.set(key, value);
  return out;
}

function convertKwargs(body) {
  let user = body.get("chat_template_kwargs");
  if (user === undefined || user === null) user = new Map();
  if (!isDict(user)) throw new Refused("chat_template_kwargs must be an object");
  for (const key of ["chat_template", "tokenize"]) if (user.has(key)) throw new Refused(`chat_template_kwargs.${key} is not allowed`);

  const addGenerationPrompt = body.has("add_generation_prompt") ? body.get("add_generation_prompt") : true;
  const continueFinalMessage = body.has("continue_final_message") ? body.get("continue_final_message") : false;
  if (typeof addGenerationPrompt !== "boolean" || typeof continueFinalMessage !== "boolean") {
    throw new Refused("add_generation_prompt and continue_final_message must be booleans");
  }
  if (addGenerationPrompt && continueFinalMessage) throw new Refused("cannot set both continue_final_message and add_generation_prompt to true");
  const effort = body.has("reasoning_effort") ? body.get("reasoning_effort") : null;
  if (effort !== null && !REASONING_EFFORTS.has(effort)) throw new Refused(`unsupported reasoning_effort: ${effort}`);

  const extra = new Map([
    ["add_generation_prompt", addGenerationPrompt],
    ["continue_final_message", continueFinalMessage],
    ["documents", body.has("documents") ? body.get("documents") : null],
    ["reasoning_effort", effort],
  ]);
  if (effort !== null && !user.has("enable_thinking")) extra.set("enable_thinking", effort !== "none");
  return merge(merge(new Map(), user), extra);
}

/** The request reduced to what the template sees (before the continue marker). */
export function preprocess(bodyText, format) {
  if (format !== "string" && format !== "openai") throw new Error(`unknown content format ${format}`);
  const body = pyJsonLoads(bodyText);
  if (!isDict(body) || !Array.isArray(body.get("messages"))) throw new Refused("the body must be an object with a messages array");
  const messages = [];
  let images = 0;
  for (const msg of body.get("messages")) {
    const converted = convertMessage(msg, format);
    messages.push(converted.message);
    images += converted.images;
  }
  postprocess(messages);
  const kwargs = convertKwargs(body);
  return { messages, tools: convertTools(body.get("tools")), kwargs, images, continueFinalMessage: kwargs.get("continue_final_message") };
}

function deepCopy(v) {
  if (Array.isArray(v)) return v.map(deepCopy);
  if (isDict(v)) return new Map([...v].map(([k, x]) => [k, deepCopy(x)]));
  return v;
}

/** transformers: append the marker to the final message's content (to its
 *  last text part for lists). Returns {messages, finalText}. */
export function addContinueMarker(messages) {
  if (messages.length === 0) throw new RenderError("continue_final_message is set but there is no message");
  messages = deepCopy(messages);
  const last = messages[messages.length - 1];
  const final = last.get("content");
  if (final === undefined || final === null) throw new RenderError('continue_final_message is set but the final message has no "content" to continue!');
  if (Array.isArray(final)) {
    for (let k = final.length - 1; k >= 0; --k) {
      if (final[k].has("text")) {
        const text = final[k].get("text");
        final[k].set("text", text + CONTINUE_TAG);
        return { messages, finalText: text };
      }
    }
    throw new RenderError("continue_final_message is set but we could not find any text to continue in the final message!");
  }
  last.set("content", final + CONTINUE_TAG);
  return { messages, finalText: final };
}

/** transformers: cut the render at the last marker, rstripped when the
 *  template changed the space after it. */
export function cutAtContinueMarker(prompt, finalText) {
  const bare = pyStrip(CONTINUE_TAG);
  if (!prompt.includes(pyStrip(finalText)) || !prompt.includes(bare)) {
    throw new RenderError("continue_final_message is set but the final message does not appear in the chat after applying the chat template!");
  }
  const at = prompt.lastIndexOf(bare);
  if (prompt.slice(at, at + CONTINUE_TAG.length) === CONTINUE_TAG) return prompt.slice(0, at);
  return pyStrip(prompt.slice(0, at), false, true);
}

/** The variables in transformers' order: messages, tools, documents,
 *  add_generation_prompt, special tokens, then the kwargs (which may replace
 *  tools, documents and the special tokens). */
export function templateVariables(prepared, messages, tokens) {
  const vars = new Map([
    ["messages", messages],
    ["tools", prepared.tools],
    ["documents", null],
    ["add_generation_prompt", prepared.kwargs.get("add_generation_prompt")],
  ]);
  for (const [k, v] of tokens) vars.set(k, v);
  for (const [k, v] of prepared.kwargs) if (k !== "add_generation_prompt" && k !== "continue_final_message") vars.set(k, v);
  return vars;
}

/** Preprocess, render with render(variables) -> string, apply the continue
 *  marker. Returns {prompt, images, variables}; throws Refused, RenderError
 *  or whatever render throws. */
export function renderRequest(bodyText, format, tokens, render) {
  const prepared = preprocess(bodyText, format);
  let messages = prepared.messages;
  let finalText = null;
  if (prepared.continueFinalMessage) ({ messages, finalText } = addContinueMarker(messages));
  const variables = templateVariables(prepared, messages, tokens);
  let prompt = render(variables);
  if (finalText !== null) prompt = cutAtContinueMarker(prompt, finalText);
  return { prompt, images: prepared.images, variables };
}

/** A typed, order-preserving text form of template variables, the same as
 *  canonical() in vllm_preprocess.py. */
export function canonical(v) {
  if (v === null) return "N";
  if (v === true) return "T";
  if (v === false) return "F";
  if (typeof v === "bigint") return "i" + v.toString();
  if (typeof v === "number") {
    const view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, v);
    return "f" + view.getBigUint64(0).toString(16).padStart(16, "0");
  }
  if (isStr(v)) return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  if (isDict(v)) return "{" + [...v].map(([k, x]) => JSON.stringify(k) + ":" + canonical(x)).join(",") + "}";
  throw new TypeError(`not a JSON value: ${v}`);
}
