// Regenerates tests/golden/chat_templates.jsonl: chat completions requests
// rendered through five chat templates the way vLLM + transformers render
// them, with the DeepSeek V3 token count of each prompt.
//
//   node tests/golden/generate_templates.mjs
//   /usr/bin/python3 tests/golden/check_python_jinja.py
//
// For each template, seeded requests (raw JSON bodies, written by our own
// serializer so 1.0 and 10**30 keep their text) become template variables by
// vllm_preprocess.mjs and are rendered by @huggingface/jinja. Every request is
// also rendered by Python's Jinja2 over vllm_preprocess.py (a child
// check_python_jinja.py --emit): the two ports must produce identical
// variables, and where the two engines disagree Python wins (the backend is
// Python) and the line says "reference": "python-jinja2". Each disagreement
// is put in a class (README.md lists them); an unknown class stops the run.
//
// Line: {"template","format","body","prompt","prompt_tokens","images"} or
// {"template","format","body","error"}, plus "reference" where Python decided.
// Deterministic: one seeded PRNG stream per template.
import { createRequire } from "node:module";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as port from "./vllm_preprocess.mjs";

const started = Date.now();
const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");
// npm packages: $NODE_PATH (scripts/test sets it), else scripts/setup's
// local/npm, else the checked-in npm/ folder (as generate.mjs).
function npmModules() {
  const candidates = [process.env.NODE_PATH, path.join(repo, "local/npm/node_modules"), path.join(repo, "npm/node_modules")];
  const found = candidates.find((d) => d && fs.existsSync(path.join(d, "tokenizers")));
  if (!found) throw new Error("npm packages not found: run scripts/setup");
  return found;
}
const requireNpm = createRequire(import.meta.url);
const npm = (name) => requireNpm(path.join(npmModules(), name));
const { Tokenizer } = npm("tokenizers");
const { Template, Environment, Interpreter } = npm("@huggingface/jinja");

const PER_TEMPLATE = 300;
const MODEL = "ds-v4.1-flash-1017";
const tokenizerDir = (name) => path.join(repo, "local/tokenizer", name);
const readConfig = (dir) => port.pyJsonLoads(fs.readFileSync(path.join(tokenizerDir(dir), "tokenizer_config.json"), "utf8"));

// Content formats are hard-coded: they are what vLLM's "auto" detection
// gives for each template (gemma3 loops over message['content']; the others,
// deepseek_tools.jinja included, never iterate a message's content).
const TEMPLATES = [
  { name: "deepseek-v3", tokenizer: "deepseek-v3", format: "string" },
  { name: "qwen3", tokenizer: "qwen3", format: "string" },
  { name: "llama3-1", tokenizer: "llama3-1", format: "string" },
  { name: "gemma3", tokenizer: "gemma3", format: "openai" },
  { name: "deepseek-tools", tokenizer: "deepseek-v3", format: "string", file: path.join(here, "templates/deepseek_tools.jinja") },
];
for (const t of TEMPLATES) {
  const config = readConfig(t.tokenizer);
  t.source = t.file ? fs.readFileSync(t.file, "utf8") : config.get("chat_template");
  t.tokens = port.specialTokens(config);
  t.compiled = new Template(t.source);
}

// --- PRNG (mulberry32, as generate.mjs), one stream per template ----------------
let seed = 0;
function rand() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
function seedFor(name) {
  let h = 0x7e3a1f05;
  for (const ch of name) h = Math.imul(h ^ ch.codePointAt(0), 0x01000193);
  return h | 0;
}
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1)); // inclusive
const pick = (arr) => arr[Math.floor(rand() * arr.length)];
const chance = (p) => rand() < p;
const cpSlice = (s, n) => [...s].slice(0, n).join(""); // never splits a surrogate pair

// --- text generators (copied from generate.mjs, which runs when imported) -------
function scalar(lo, hi) {
  for (;;) {
    const cp = randInt(lo, hi);
    if (cp < 0xd800 || cp > 0xdfff) return String.fromCodePoint(cp);
  }
}
const range = (lo, hi) => () => scalar(lo, hi);
const pools = {
  ascii: range(0x00, 0x7f),
  latin1: range(0x80, 0xff),
  latinExt: range(0x100, 0x24f),
  greekCyrillic: range(0x370, 0x52f),
  hebrewArabic: range(0x590, 0x6ff),
  devanagari: range(0x900, 0x97f),
  thai: range(0xe00, 0xe7f),
  cjkPunct: range(0x3000, 0x303f),
  hiragana: range(0x3040, 0x309f),
  katakana: range(0x30a0, 0x30ff),
  cjk: range(0x4e00, 0x9fff),
  cjkExtA: range(0x3400, 0x4dbf),
  hangul: range(0xac00, 0xd7a3),
  halfFull: range(0xff00, 0xffef),
  any: range(0, 0x10ffff),
  emoji: range(0x1f300, 0x1faff),
};
const spaces = [" ", " ", " ", "\t", "\n", "\n", "\r", "\r\n", "\u000b", "\u000c", "\u0085", "\u00a0", "\u1680", "\u2000", "\u2009", "\u200b", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u001c", "\u001f", "\ufeff"];
const digits = ["0", "1", "2", "5", "9", "\u0660", "\u0663", "\u06f5", "\u0966", "\uff11", "\u00b2", "\u00bd", "\u2160", "\u2463", "\u3007", "\u{1d7ce}", "\u{10107}"];
const punct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~".split("").concat(["\u00a1", "\u00bf", "\u2014", "\u2026", "\u3001", "\u3002", "\uff0c", "\u300c", "\u00a9", "\u20ac", "\u00b0", "\u2192", "\u309b", "\u30fb", "\u30a0", "\u{1f600}"]);
const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".split("").concat(["\u00e9", "\u00df", "\u0101", "\u03b1", "\u0436", "\u05d0", "\u0627", "\u0915", "\u0e01", "\u4e00", "\u4f60", "\u9fa5", "\u9fa6", "\u3042", "\u30ab", "\u30fc", "\uac00", "\u02b0", "\u01c5", "\u{20000}"]);
const marks = ["\u0301", "\u0308", "\u0327", "\u093f", "\u094d", "\u0e31", "\u20dd", "\u3099", "\u309a", "\ufe0f", "\u{1f3fb}", "\u200d", "\u{e0020}"];
const emojiSeqs = ["\u{1f468}\u200d\u{1f469}\u200d\u{1f467}\u200d\u{1f466}", "\u{1f44d}\u{1f3fd}", "\u{1f3f3}\ufe0f\u200d\u{1f308}", "\u{1f1fa}\u{1f1f8}", "1\ufe0f\u20e3", "\u2764\ufe0f", "\u{1f9d1}\u{1f3ff}\u200d\u{1f4bb}"];
const words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Hello", "World", "token", "count", "DeepSeek", "gateway", "naïve", "café", "résumé", "Straße", "über", "don't", "I'm", "we'll", "e.g.", "U.S.A.", "3.14159", "1,000,000", "2024-05-17", "12:30", "v1.2.3", "#include", "std::vector", "http://example.com/a?b=c", "user@example.com", "$HOME", "@mention", "C++", "f(x)", "a_b", "snake_case", "camelCase", "你好", "世界", "日本語", "テスト", "ひらがな", "한국어", "مرحبا", "नमस्ते", "привет", "γειά", "שלום", "สวัสดี"];
const codeSnippets = [
  'def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
  '#include <vector>\n\nint main() {\n  std::vector<int> v{1, 2, 3};\n  return v.size() > 2 ? 0 : 1;\n}\n',
  'const add = (a, b) => a + b;\nexport default function App() {\n\treturn <div className="app">{add(1, 2)}</div>;\n}\n',
  'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hello, 世界")\n}\n',
  "SELECT id, name FROM users WHERE age >= 21 AND name LIKE '%son' ORDER BY id DESC LIMIT 10;\n",
  '{"model": "ds", "messages": [{"role": "user", "content": "hi\\n"}], "max_tokens": 128}\n',
  "{% if x %}{{ y }}{% endif %} {# not a template: just text #} {{ raw }}\n",
  '    \n\n\t\t  x = 1  \r\n\r\n   y=2\n\n\n',
];
// Added tokens of every template's tokenizer: inside text they are plain text
// to the template and special tokens to DeepSeek V3's tokenizer (or not).
const specialStrings = [
  ...port.pyJsonLoads(fs.readFileSync(path.join(tokenizerDir("deepseek-v3"), "tokenizer.json"), "utf8")).get("added_tokens").slice(0, 20).map((t) => t.get("content")),
  "<think>", "</think>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_response>", "<|begin_of_text|>", "<|eot_id|>",
  "<|start_header_id|>", "<bos>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>", port.CONTINUE_TAG, "{{ bos_token }}",
];

function interesting(maxLen) {
  const kinds = [() => pick(spaces), () => pick(digits), () => pick(punct), () => pick(letters), () => pick(marks), () => pick(emojiSeqs), () => pools.ascii(), () => pools.any()];
  const weights = [3, 2, 3, 5, 1, 0.3, 1, 0.5];
  const total = weights.reduce((a, b) => a + b, 0);
  const n = randInt(1, maxLen);
  let s = "";
  for (let i = 0; i < n; ++i) {
    let r = rand() * total;
    let k = 0;
    while (r >= weights[k]) r -= weights[k++];
    s += kinds[k]();
  }
  return s;
}
function wsRuns() {
  let s = "";
  const n = randInt(1, 10);
  for (let i = 0; i < n; ++i) {
    const run = randInt(0, 6);
    for (let j = 0; j < run; ++j) s += pick(spaces);
    if (chance(0.7)) s += chance(0.5) ? pick(words) : pick(punct);
  }
  return s;
}
function digitRuns() {
  let s = "";
  const n = randInt(1, 5);
  for (let i = 0; i < n; ++i) {
    const run = randInt(1, 14);
    for (let j = 0; j < run; ++j) s += chance(0.85) ? String(randInt(0, 9)) : pick(digits);
    if (chance(0.6)) s += pick([" ", ".", ",", "-", "a", "x", "\n", "元", "%"]);
  }
  return s;
}
function script() {
  const p = pick(["cjk", "hiragana", "katakana", "hangul", "hebrewArabic", "devanagari", "thai", "cjkPunct", "halfFull", "cjkExtA", "greekCyrillic"]);
  let s = "";
  const n = randInt(1, 40);
  for (let i = 0; i < n; ++i) s += chance(0.15) ? pick([" ", "，", "。", "、", "\n", "1", "a", "!", "ー", "・"]) : pools[p]();
  return s;
}
function emoji() {
  let s = "";
  const n = randInt(1, 8);
  for (let i = 0; i < n; ++i) {
    s += chance(0.6) ? pick(emojiSeqs) : pools.emoji();
    if (chance(0.3)) s += pick(marks);
    if (chance(0.3)) s += pick([" ", "a", "!", "\n", "你"]);
  }
  return s;
}
function code() {
  let s = pick(codeSnippets);
  if (chance(0.3)) s += pick(codeSnippets);
  return s;
}
function specialInside() {
  const pieces = [];
  const n = randInt(1, 5);
  for (let i = 0; i < n; ++i) {
    const tok = pick(specialStrings);
    const r = rand();
    if (r < 0.65) pieces.push(tok);
    else if (r < 0.8) pieces.push(cpSlice(tok, randInt(1, [...tok].length - 1))); // a prefix only
    else pieces.push(tok + cpSlice(tok, 3));
    pieces.push(chance(0.5) ? interesting(6) : pick(["", " ", "\n", "<", "x"]));
  }
  return pieces.join("");
}
function prose(maxWords = 14) {
  const n = randInt(2, maxWords);
  const out = [];
  for (let i = 0; i < n; ++i) out.push(pick(words) + (chance(0.15) ? pick([",", ".", "!", "?", ";", ":"]) : ""));
  return out.join(chance(0.8) ? " " : pick(["  ", "\n", " \n", "\t"]));
}
const commonSpaces = [" ", " ", "\n", "\t", "\r\n", "\u00a0", "\u3000"];
function padded(s) {
  // Whitespace around text: what trim and strip see (Python's set differs from JS's).
  const ws = () => Array.from({ length: randInt(1, 3) }, () => pick(chance(0.3) ? spaces : commonSpaces)).join("");
  return (chance(0.6) ? ws() : "") + s + (chance(0.6) ? ws() : "");
}
function text() {
  const r = rand();
  if (r < 0.4) return prose();
  if (r < 0.5) return interesting(30);
  if (r < 0.57) return code();
  if (r < 0.67) return script();
  if (r < 0.74) return specialInside();
  if (r < 0.78) return emoji();
  if (r < 0.81) return "";
  if (r < 0.9) return padded(prose(8));
  if (r < 0.96) return wsRuns();
  return digitRuns();
}
const shortText = () => (chance(0.7) ? prose(6) : cpSlice(text(), 40));

// --- request bodies: JSON values JSON.stringify cannot write ---------------------
/** A number written with its exact JSON text (1.0, 1e-7, 10**30). */
class Num {
  constructor(text) {
    this.text = text;
  }
}
/** An object with ordered, possibly repeated keys (JS objects reorder "1", "2"). */
class Obj {
  constructor(entries) {
    this.entries = entries;
  }
}
const num = (t) => new Num(t);
const obj = (...entries) => new Obj(entries);
const NUMBER_TEXTS = [
  "0", "1", "-1", "7", "42", "1000", "1.0", "-0.0", "0.0", "0.1", "0.5", "2.5", "3.14159", "100.0", "1e-7", "1E-7", "1e-05", "0.0001",
  "1e16", "1e+16", "1.5e300", "1e21", "12345678901234567.0", "9007199254740993", "9223372036854775807", "9223372036854775808",
  "-9223372036854775809", "18446744073709551616", "123456789012345678901234567890", "-1.5e-10", "6.02214076e23", "2.0",
];
const randomNumber = () => num(pick(NUMBER_TEXTS));

function quote(s, asciiOnly) {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (c < 0x20) out += { 8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r" }[c] ?? "\\u" + c.toString(16).padStart(4, "0");
    else if (asciiOnly && ch === "/") out += "\\/";
    else if (asciiOnly && c > 0x7e) {
      for (let k = 0; k < ch.length; ++k) out += "\\u" + ch.charCodeAt(k).toString(16).padStart(4, "0");
    } else out += ch;
  }
  return out + '"';
}

/** Writes a body value as JSON text. style: {ws: "compact"|"spaced"|"pretty"|"random", ascii: bool}. */
function serialize(value, style) {
  const gap = () => (style.ws === "random" && chance(0.3) ? pick([" ", "\n", "\t", "\r\n", "  ", " \n  "]) : "");
  const sep = style.ws === "compact" ? [",", ":"] : style.ws === "pretty" ? [",", ": "] : [", ", ": "];
  function write(v, depth) {
    if (v === null) return "null";
    if (v === true || v === false) return String(v);
    if (typeof v === "number") return String(v);
    if (typeof v === "string") return quote(v, style.ascii);
    if (v instanceof Num) return v.text;
    const entries = v instanceof Obj ? v.entries : Array.isArray(v) ? null : Object.entries(v);
    const items = entries ? entries.map(([k, x]) => gap() + quote(k, style.ascii) + gap() + sep[1] + gap() + write(x, depth + 1) + gap()) : v.map((x) => gap() + write(x, depth + 1) + gap());
    const [open, close] = entries ? ["{", "}"] : ["[", "]"];
    if (items.length === 0) return open + gap() + close;
    if (style.ws !== "pretty") return open + items.join(sep[0]) + close;
    const pad = "\n" + "  ".repeat(depth + 1);
    return open + pad + items.join(sep[0] + pad) + "\n" + "  ".repeat(depth) + close;
  }
  return write(value, 0);
}
function randomStyle() {
  return { ws: pick(["compact", "compact", "spaced", "spaced", "spaced", "pretty", "random"]), ascii: chance(0.08) };
}

// --- tools -------------------------------------------------------------------------------
const TOOL_NAMES = ["get_weather", "search", "run_code", "read_file", "write_file", "f", "lookup_ùser", "翻译", "calc", "send_email", "list_dir", "sql_query"];
function description() {
  const r = rand();
  if (r < 0.5) return prose(25) + (chance(0.3) ? " " + emoji() + " " + prose(8) : "");
  if (r < 0.65) return padded(prose(10));
  if (r < 0.75) return specialInside();
  if (r < 0.85) return script() + " " + emoji();
  if (r < 0.9) return "";
  return interesting(50);
}
function schema(depth) {
  const type = depth > 2 ? pick(["string", "integer", "number", "boolean"]) : pick(["string", "integer", "number", "boolean", "array", "object", "object"]);
  const e = [["type", type]];
  if (chance(0.6)) e.push(["description", chance(0.7) ? shortText() : description()]);
  if (type === "integer" || type === "number") {
    if (chance(0.5)) e.push(["minimum", randomNumber()]);
    if (chance(0.4)) e.push(["maximum", randomNumber()]);
    if (chance(0.3)) e.push(["default", randomNumber()]);
    if (chance(0.2)) e.push(["multipleOf", num(pick(["0.1", "1e-7", "2", "0.25"]))]);
  } else if (type === "string") {
    if (chance(0.3)) e.push(["enum", Array.from({ length: randInt(1, 4) }, () => pick(["celsius", "fahrenheit", "ÄÖÜ", "", "a b", "<｜User｜>", "🌍"]))]);
    if (chance(0.2)) e.push(["default", shortText()]);
    if (chance(0.1)) e.push(["pattern", "^[a-z]+\\d{2,}$"]);
  } else if (type === "boolean") {
    if (chance(0.4)) e.push(["default", chance(0.5)]);
  } else if (type === "array") {
    e.push(["items", schema(depth + 1)]);
    if (chance(0.3)) e.push(["minItems", randInt(0, 3)]);
  } else {
    const props = [];
    const n = randInt(1, depth === 0 ? 4 : 2);
    const used = new Set();
    for (let i = 0; i < n; ++i) {
      let key = pick(["location", "unit", "query", "limit", "path", "options", "über", "名前", "1", "10", "2", "a-b", "$ref", "", "Location", "_id", "emoji😀"]);
      if (used.has(key)) key += i;
      used.add(key);
      props.push([key, schema(depth + 1)]);
    }
    e.push(["properties", new Obj(props)]);
    if (chance(0.5)) e.push(["required", props.slice(0, randInt(0, props.length)).map(([k]) => k)]);
    if (chance(0.3)) e.push(["additionalProperties", chance(0.5) ? false : schema(depth + 1)]);
  }
  if (chance(0.12)) e.push(["examples", [randomNumber(), null, true, "x", [num("1.0"), num("10000000000000000000000")]]]);
  if (chance(0.08)) e.push(["nullable", true], ["const", null]);
  if (chance(0.08)) e.push(["type", pick(["string", "integer", ["string", "null"]])]); // a repeated key: the last value wins, in the first place
  return new Obj(e);
}
function toolDef(i) {
  const fn = [["name", TOOL_NAMES[i % TOOL_NAMES.length] + (i >= TOOL_NAMES.length ? `_${i}` : "")]];
  const r = rand();
  if (r < 0.8) fn.push(["description", description()]);
  else if (r < 0.9) fn.push(["description", null]);
  if (chance(0.85)) fn.push(["parameters", chance(0.9) ? schema(0) : chance(0.5) ? null : new Obj([])]);
  else if (chance(0.3)) fn.push(["parameters", null]);
  if (chance(0.2)) fn.push(["strict", chance(0.5)]);
  if (chance(0.1)) fn.push(["x-extra", obj(["version", num("2.0")])]);
  if (chance(0.3)) fn.reverse(); // request key order is not the normalized order
  const tool = [];
  if (chance(0.85)) tool.push(["type", "function"]);
  tool.push(["function", new Obj(fn)]);
  if (chance(0.1)) tool.push(["cache_control", { type: "ephemeral" }]); // dropped
  if (chance(0.3)) tool.reverse();
  return new Obj(tool);
}
const toolList = () => Array.from({ length: pick([1, 1, 1, 2, 2, 3, 4, 6]) }, (_, i) => toolDef(i));

// --- tool calls and their arguments ----------------------------------------------------
// NaN and Infinity only inside an arguments string: json.loads takes them, but
// a request body holding them is not JSON (dpgate refuses such a body).
let nanAllowed = true;
function argValue(depth) {
  const r = rand();
  if (r < 0.3) return shortText();
  if (r < 0.55) return randomNumber();
  if (r < 0.62) return chance(0.5);
  if (r < 0.67) return null;
  if (r < 0.7) return nanAllowed ? num(pick(["NaN", "Infinity", "-Infinity"])) : randomNumber(); // json.loads accepts them
  if (depth > 2) return randomNumber();
  if (r < 0.85) return Array.from({ length: randInt(0, 4) }, () => argValue(depth + 1));
  return argObject(depth + 1);
}
function argObject(depth) {
  const e = [];
  const n = randInt(0, 4);
  for (let i = 0; i < n; ++i) e.push([pick(["q", "n", "path", "flag", "units", "Ünits", "1", "10", "nested", "list", "x", "价格"]), argValue(depth)]);
  if (e.length && chance(0.15)) e.push([e[0][0], argValue(depth)]); // repeated key
  return new Obj(e);
}
function argumentsValue() {
  const r = rand();
  if (r < 0.72) return serialize(argObject(0), { ws: pick(["compact", "spaced", "spaced", "pretty", "random"]), ascii: chance(0.1) });
  if (r < 0.8) return pick(["", "   ", "{", "not json", '{"a": 1,}', "{'a': 1}", '{"a": 1} trailing', "[1, 2", "nul"]); // -> {}
  if (r < 0.88) return pick(["42", '"a string"', "null", "true", "[1, 2.0, 3]", "1e400", "[]", "{}", " {\"x\": 1.0} "]);
  if (r < 0.94) {
    nanAllowed = false;
    const object = argObject(0); // an object, not a string: kept
    nanAllowed = true;
    return object;
  }
  return pick([null, 7, true]); // neither: -> {}
}
let callCounter = 0;
function toolCall() {
  const id = pick(["call_", "chatcmpl-tool-", "toolu_", ""]) + (++callCounter * 2654435761 % 4294967296).toString(36) + (chance(0.05) ? "ü😀" : "");
  const fn = [["name", pick(TOOL_NAMES)], ["arguments", argumentsValue()]];
  if (chance(0.5)) fn.reverse();
  if (chance(0.05)) fn.push(["description", "dropped"]);
  const call = [["id", id], ["type", "function"], ["function", new Obj(fn)]];
  for (let i = call.length - 1; i > 0; --i) {
    const j = randInt(0, i);
    [call[i], call[j]] = [call[j], call[i]];
  }
  if (chance(0.1)) call.push(["index", randInt(0, 3)]); // dropped
  return { id, value: new Obj(call) };
}

// --- messages -------------------------------------------------------------------------------
function parts(allowImages) {
  const out = [];
  const n = randInt(1, 3);
  for (let i = 0; i < n; ++i) {
    const r = rand();
    if (allowImages && r < 0.2) out.push({ type: "image_url", image_url: chance(0.8) ? { url: "data:image/png;base64,iVBORw0KGgo=" } : { url: "https://example.com/cat.png", detail: "auto" } });
    else if (allowImages && r < 0.28) out.push({ type: "input_image", image_url: "https://example.com/dog.jpg" });
    else if (r < 0.75) out.push({ type: "text", text: text() });
    else if (r < 0.8) out.push(chance(0.5) ? { type: "text", text: null } : { type: "text" }); // skipped
    else if (r < 0.87) out.push({ type: "input_text", text: text() });
    else if (r < 0.92) out.push({ type: "output_text", text: shortText() });
    else if (r < 0.96) out.push({ type: "refusal", refusal: shortText() });
    else out.push({ type: "thinking", thinking: shortText() });
  }
  return out;
}
function content(allowImages, pNull = 0.03) {
  const r = rand();
  if (r < pNull) return null;
  if (r < 0.7) return text();
  return parts(allowImages);
}
function named(msg, p) {
  if (chance(p)) msg.name = pick(["alice", "Bob", "ユーザー", "tool-runner", ""]);
  return msg;
}
const systemMessage = () => named({ role: chance(0.25) ? "developer" : "system", content: content(false) }, 0.05);
const userMessage = () => named({ role: "user", content: content(true) }, 0.1);
function reasoningFields(msg) {
  const r = rand();
  if (r < 0.12) msg.reasoning_content = text();
  else if (r < 0.18) msg.reasoning = text();
  else if (r < 0.21) Object.assign(msg, { reasoning: shortText(), reasoning_content: "ignored: " + shortText() });
  else if (r < 0.23) Object.assign(msg, { reasoning: null, reasoning_content: shortText() });
  else if (r < 0.25) msg.reasoning_content = null;
  return msg;
}
function assistantMessage() {
  const msg = named({ role: "assistant" }, 0.04);
  const r = rand();
  if (r < 0.06) msg.content = "<think>\n" + shortText() + "\n</think>\n\n" + text(); // Qwen3 splits this
  else msg.content = content(false, 0.05);
  if (chance(0.04)) msg.tool_calls = chance(0.5) ? [] : null;
  return reasoningFields(msg);
}
/** An assistant turn with tool calls, their results and maybe a final answer. */
function toolRound() {
  const calls = Array.from({ length: pick([1, 1, 1, 2, 3]) }, toolCall);
  const msg = { role: "assistant", content: pick([null, null, null, "", text()]), tool_calls: calls.map((c) => c.value) };
  if (chance(0.3)) delete msg.content;
  const out = [reasoningFields(msg)];
  const nResults = chance(0.85) ? calls.length : randInt(0, 3);
  for (let i = 0; i < nResults; ++i) {
    const result = { role: "tool" };
    const r = rand();
    if (r < 0.85) result.tool_call_id = calls[Math.min(i, calls.length - 1)].id;
    else if (r < 0.92) result.tool_call_id = null;
    const c = rand();
    if (c < 0.55) result.content = chance(0.3) ? serialize(argObject(0), { ws: "spaced", ascii: false }) : text();
    else if (c < 0.9) result.content = Array.from({ length: randInt(0, 3) }, () => (chance(0.8) ? { type: "text", text: text() } : { type: "input_text", text: shortText() }));
    else if (c < 0.95) result.content = [{ type: "text", text: shortText() }, { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }];
    else result.content = null;
    out.push(named(result, 0.05));
  }
  if (chance(0.6)) out.push(assistantMessage());
  return out;
}
const unknownRole = () => ({ role: pick(["function", "critic", "observation", "ipython", "User"]), content: shortText() });

/** A conversation: 0-2 system/developer messages, 1-4 turns, tool rounds. */
function conversation(opts) {
  const msgs = [];
  const nSystem = pick([0, 0, 1, 1, 1, 2]);
  for (let i = 0; i < nSystem; ++i) msgs.push(systemMessage());
  const turns = pick([1, 1, 2, 2, 3, 4]);
  for (let t = 0; t < turns; ++t) {
    msgs.push(userMessage());
    if (chance(0.05)) msgs.push(systemMessage()); // a system message mid-conversation
    if (chance(0.02)) msgs.push(unknownRole());
    if (t === turns - 1 && !opts.endOnAssistant && chance(0.6)) break;
    if (opts.tools && chance(0.45)) msgs.push(...toolRound());
    else msgs.push(assistantMessage());
  }
  if (opts.endOnAssistant && msgs[msgs.length - 1].role === "user") msgs.push(assistantMessage());
  return msgs;
}
/** Gemma: strictly alternating user/model turns after an optional system message. */
function alternatingConversation(opts) {
  const msgs = [];
  if (chance(0.35)) msgs.push({ role: "system", content: chance(0.8) ? text() : [{ type: "text", text: text() }] });
  const turns = randInt(1, 4);
  for (let t = 0; t < turns; ++t) {
    msgs.push(userMessage());
    if (t === turns - 1 && !opts.endOnAssistant) break;
    const a = assistantMessage();
    delete a.tool_calls;
    msgs.push(a);
  }
  return msgs;
}

// --- chat_template_kwargs -------------------------------------------------------------------
function templateKwargs(agp) {
  const menu = [
    () => ["enable_thinking", chance(0.5)],
    () => ["enable_thinking", pick([null, "auto"])], // dropped, and blocks reasoning_effort's enable_thinking
    () => ["system_prefix", text()],
    () => ["tool_json_indent", pick([0, 1, 2, 2, 4, null, "auto"])],
    () => ["tool_json_indent", "\t"],
    () => ["tool_sort_keys", chance(0.5)],
    () => ["tool_call_style", pick(["json", "python", "python", "deepseek", "auto"])],
    () => ["max_tools", randInt(0, 3)],
    () => ["dump_last_message", chance(0.8)],
    () => ["custom_flag", obj(["nested", [num("1.0"), num("12345678901234567890123"), null]], ["1", "one"])],
    () => ["tools", chance(0.8) ? toolList() : pick([[], [{ name: "bare" }], "none"])], // replaces the request's tools
    () => ["bos_token", pick(["", "<s>", "<｜begin▁of▁sentence｜>", "BOS "])],
    () => ["add_generation_prompt", !agp], // the request's own field wins
    () => ["documents", [{ title: "kw", text: shortText() }]],
    () => ["reasoning_effort", pick(["low", "high"])],
  ];
  const n = randInt(1, 3);
  const seen = new Set();
  const entries = [];
  for (let i = 0; i < n; ++i) {
    const [k, v] = pick(menu)();
    if (seen.has(k)) continue;
    seen.add(k);
    entries.push([k, v]);
  }
  if (chance(0.1)) entries.push(["enable_thinking", chance(0.5)], ["enable_thinking", chance(0.5)]); // repeated: the last wins
  return new Obj(entries);
}
const documentsList = () => Array.from({ length: randInt(1, 3) }, (_, i) => (chance(0.8) ? { title: `doc ${i}: ` + shortText(), text: text() } : { text: text() }));

// --- a request ---------------------------------------------------------------------------------
function makeRequest(t) {
  const r = rand();
  // Modes: continue_final_message (with add_generation_prompt false), or
  // add_generation_prompt false alone, or the default.
  const mode = r < 0.12 ? "continue" : r < 0.2 ? "no-generation-prompt" : "default";
  // Tools for the templates that render them; the others see fewer.
  const withTools = chance(t.name === "qwen3" || t.name === "deepseek-tools" ? 0.45 : 0.2);
  const opts = { tools: withTools || chance(0.15), endOnAssistant: mode !== "default" && chance(0.8) };
  const strict = t.name === "gemma3" && chance(0.8);
  const messages = strict ? alternatingConversation(opts) : conversation(opts);
  if (mode === "continue" && chance(0.15)) {
    // Continue a message the template may drop or reshape.
    messages.push(pick([systemMessage, userMessage, unknownRole, () => ({ role: "tool", tool_call_id: "call_x", content: text() })])());
  } else if (mode === "continue") {
    const last = messages[messages.length - 1];
    if (last.role === "assistant" && chance(0.4)) {
      // What trim/rstrip see at the end of the continued text.
      if (typeof last.content === "string") last.content += pick([" ", "  ", "\n", " \n", "\t", "\u00a0", "\u3000", "\u0085"]);
      else if (chance(0.5)) last.content = [{ type: "text", text: shortText() + " " }, { type: "image_url", image_url: { url: "data:," } }];
    }
  }
  const keys = [["messages", messages]];
  if (withTools) keys.push(["tools", toolList()]);
  if (withTools && chance(0.3)) keys.push(["tool_choice", pick(["auto", "required", "none"])]);
  if (chance(0.3)) keys.push(["chat_template_kwargs", templateKwargs(mode === "default")]);
  if (mode === "continue") keys.push(["continue_final_message", true], ["add_generation_prompt", false]);
  else if (mode === "no-generation-prompt") keys.push(["add_generation_prompt", false]);
  else if (chance(0.1)) keys.push(["add_generation_prompt", true]);
  if (chance(0.12)) keys.push(["reasoning_effort", pick(["none", "minimal", "low", "medium", "high", "xhigh", "max"])]);
  if (chance(0.06)) keys.push(["documents", documentsList()]);
  if (chance(0.5)) keys.push(["max_tokens", randInt(1, 8192)]);
  if (chance(0.3)) keys.push(["temperature", num(pick(["1.0", "0.7", "0", "1e-3"]))]);
  if (chance(0.2)) keys.push(["stream", chance(0.5)]);
  if (chance(0.1)) keys.push(["seed", num(pick(["42", "-9223372036854775808", "9223372036854775807"]))]);
  if (chance(0.3)) keys.reverse();
  // A repeated top-level key the template does not see (dpgate refuses a
  // repeated field it judges, such as max_tokens or messages).
  if (chance(0.05)) keys.push(["temperature", 0.5], ["temperature", randInt(1, 9) / 10]);
  return serialize(new Obj([["model", MODEL], ...keys]), randomStyle());
}

// --- rendering with @huggingface/jinja over the JS port's variables ----------------------
// The library converts plain JS values itself (Template.render), which would
// turn 1.0 into an integer and reorder keys like "2", "1"; so the port's
// values become the library's runtime values directly. Its runtime classes
// are not exported: take them from values it converted.
const probe = new Environment();
let probeCount = 0;
const runtimeClass = (v) => probe.set(`probe${probeCount++}`, v).constructor;
const RT = {
  Integer: runtimeClass(1),
  Float: runtimeClass(0.5),
  String: runtimeClass(""),
  Boolean: runtimeClass(true),
  Null: runtimeClass(null),
  Array: runtimeClass([]),
  Object: runtimeClass({}),
};
function toRuntime(v) {
  if (v === null) return new RT.Null();
  if (typeof v === "boolean") return new RT.Boolean(v);
  if (typeof v === "string") return new RT.String(v);
  if (typeof v === "bigint") return new RT.Integer(Number(v)); // beyond 2**53 it loses digits: a known disagreement
  if (typeof v === "number") return new RT.Float(v);
  if (Array.isArray(v)) return new RT.Array(v.map(toRuntime));
  return new RT.Object(new Map([...v].map(([k, x]) => [k, toRuntime(x)])));
}
function pyRange(start, stop, step = 1) {
  if (stop === undefined) [start, stop] = [0, start];
  const out = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
  return out;
}
function renderJs(t, variables) {
  // The globals Template.render installs (its setupGlobals is not exported).
  const env = new Environment();
  for (const [k, v] of [["false", false], ["true", true], ["none", null], ["False", false], ["True", true], ["None", null]]) env.set(k, v);
  env.set("raise_exception", (message) => {
    throw new Error(message);
  });
  env.set("range", pyRange);
  env.set("strftime_now", () => {
    throw new Error("strftime_now: no golden template may depend on the clock");
  });
  for (const [k, v] of variables) env.setVariable(k, toRuntime(v));
  return new Interpreter(env).run(t.compiled.parsed).value;
}
function jsAnswer(t, body) {
  let variables; // stays undefined when rendering stops before the template
  try {
    const out = port.renderRequest(body, t.format, t.tokens, (vars) => {
      variables = port.canonical(vars);
      return renderJs(t, vars);
    });
    return { prompt: out.prompt, images: out.images, variables };
  } catch (e) {
    if (e instanceof port.Refused) throw new Error(`${t.name}: the generator made a refused request: ${e.message}\n${body}`);
    return { error: `${e.constructor.name}: ${e.message}`, variables };
  }
}

// --- Python's answers ------------------------------------------------------------------------
function pythonAnswers(cases) {
  const input = cases.map((c) => JSON.stringify({ template: c.template, format: c.format, body: c.body })).join("\n") + "\n";
  const run = spawnSync("/usr/bin/python3", [path.join(here, "check_python_jinja.py"), "--emit"], { input, maxBuffer: 1 << 30 });
  if (run.status !== 0) throw new Error(`check_python_jinja.py --emit failed:\n${run.stderr}`);
  const out = run.stdout.toString("utf8").trimEnd().split("\n").map((l) => JSON.parse(l));
  if (out.length !== cases.length) throw new Error(`python answered ${out.length} of ${cases.length} requests`);
  return out;
}

// --- disagreement classes ---------------------------------------------------------------------
// Each class is a known difference between @huggingface/jinja and Python's
// Jinja2 (README.md); a disagreement no class explains stops the run.
// Whitespace that only one engine's trim/strip removes: Python's str.isspace()
// has \x1c-\x1f and \x85, JS's String.trim() has \ufeff.
const ONE_SIDED_SPACE = /[\u001c-\u001f\u0085\ufeff]/u;
const NUMBER_CHAR = /[-+0-9.eE]/;
function numberAround(s, from, to) {
  while (from > 0 && NUMBER_CHAR.test(s[from - 1])) --from;
  while (to < s.length && NUMBER_CHAR.test(s[to])) ++to;
  return s.slice(from, to);
}
function strings(v, out = []) {
  if (typeof v === "string") out.push(v);
  else if (Array.isArray(v)) v.forEach((x) => strings(x, out));
  else if (v instanceof Map) v.forEach((x) => strings(x, out));
  return out;
}
const SPACE_OR_BOM = /[\s\u001c-\u001f\u0085\ufeff]/u;
function spaceRun(s, at) {
  let from = at;
  let to = at;
  while (from > 0 && SPACE_OR_BOM.test(s[from - 1])) --from;
  while (to < s.length && SPACE_OR_BOM.test(s[to])) ++to;
  return s.slice(from, to);
}
/** The class of a disagreement, from its first difference. */
function classify(t, js, py, body) {
  if (py.error !== undefined) {
    if (/can only concatenate str \(not "[A-Za-z]+"\)/.test(py.error)) return "python: str + non-str is a TypeError (JS concatenates)";
    if (/UndefinedError/.test(py.error)) return "python: an attribute or item of an undefined value is an error (JS gives undefined)";
    if (/Object of type Undefined is not JSON serializable/.test(py.error)) return "python: tojson of an undefined value is an error (JS writes null)";
    return "unexplained: python fails: " + py.error.slice(0, 80);
  }
  if (js.error !== undefined) {
    if (/indent must be a number/.test(js.error)) return "js: tojson(indent=<string>) is an error (Python indents with the string)";
    if (/Unknown operator "\*" between StringValue and IntegerValue/.test(js.error)) return "js: str * int is an error (Python repeats the string)";
    if (/Cannot perform operation on null values/.test(js.error)) return "js: None ~ str is an error (Python writes None)";
    if (/Expected iterable or object type in for loop: got StringValue/.test(js.error)) return "js: a for loop over a string is an error (Python iterates characters)";
    // The continued text, changed by one engine's whitespace stripping, not found in the prompt.
    if (/^RenderError: continue_final_message/.test(js.error)) {
      if (/\.[lr]?strip\('/.test(t.source)) return "str.strip/lstrip/rstrip(chars): JS ignores chars and strips whitespace";
      if (strings(port.pyJsonLoads(body)).some((s) => ONE_SIDED_SPACE.test(s))) return "trim/strip: Python strips \\x1c-\\x1f and \\x85 but not \\ufeff, JS the reverse";
    }
    return "unexplained: js fails: " + js.error.slice(0, 80);
  }
  const a = js.prompt;
  const b = py.prompt;
  let at = 0;
  while (at < a.length && at < b.length && a[at] === b[at]) ++at;
  if (b[at] === "\n" && /"tool_json_indent"\s*:\s*0\b/.test(body)) return "tojson(indent=0): Python breaks lines, JS writes one line";
  if (SPACE_OR_BOM.test(a[at] ?? "") || SPACE_OR_BOM.test(b[at] ?? "")) {
    if (/\.[lr]?strip\('/.test(t.source)) return "str.strip/lstrip/rstrip(chars): JS ignores chars and strips whitespace";
    if (ONE_SIDED_SPACE.test(spaceRun(a, at) + spaceRun(b, at))) return "trim/strip: Python strips \\x1c-\\x1f and \\x85 but not \\ufeff, JS the reverse";
  }
  const pyNumber = numberAround(b, at, at);
  const jsNumber = numberAround(a, at, at);
  if (/\d/.test(pyNumber) && /\d/.test(jsNumber)) {
    if (/^-?\d{16,}$/.test(pyNumber)) return "integers beyond 2**53 lose digits in JS";
    if (Number(pyNumber) === Number(jsNumber) || Object.is(Number(pyNumber), -0)) return "float text: Python's repr (1.0, -0.0, 1e-07, 1e+16) vs JS's number text";
  }
  if (/^-?(NaN|Infinity|nan|inf)/.test(b.slice(at - (b[at - 1] === "-" ? 1 : 0)))) return "NaN and Infinity: Python writes NaN/Infinity (tojson) or nan/inf, JS null or NaN";
  if (b[at] === "'" && a[at] === '"') return "str() of a dict or list: Python's repr ({'a': 1.0}), JS's JSON-like text";
  if (/^(True|False|None)/.test(b.slice(at))) return "str() of True/False/None: Python's repr, JS's true/false/\"\"";
  if (/^"/.test(a.slice(at - 1)) && /^"/.test(b.slice(at - 1)) && /"(tool_sort_keys|dump_last_message)"\s*:\s*true/.test(body)) {
    return "tojson(sort_keys=true): Python sorts by code point, JS by localeCompare";
  }
  // deepseek_tools.jinja: a description cut at [:100] and its | length.
  const line = b.slice(b.lastIndexOf("\n", at - 1) + 1);
  const previous = b.slice(b.lastIndexOf("\n", b.lastIndexOf("\n", at - 1) - 1) + 1, b.lastIndexOf("\n", at - 1));
  const lengthDiffers = /^\d* characters\]/.test(a.slice(at)) && /^\d* characters\]/.test(b.slice(at));
  if (lengthDiffers || (/[\u{10000}-\u{10ffff}]/u.test(line.split("\n")[0]) && /^### \d+\/\d+/.test(previous))) {
    return "string slicing and length count UTF-16 units in JS, code points in Python";
  }
  return "unexplained: " + JSON.stringify(b.slice(Math.max(0, at - 30), at)) + " | py " + JSON.stringify(b.slice(at, at + 40)) + " | js " + JSON.stringify(a.slice(at, at + 40));
}

// --- main ---------------------------------------------------------------------------------
async function main() {
  const cases = [];
  for (const t of TEMPLATES) {
    seed = seedFor(t.name);
    callCounter = 0;
    for (let i = 0; i < PER_TEMPLATE; ++i) {
      const body = makeRequest(t);
      cases.push({ template: t.name, format: t.format, body, js: jsAnswer(t, body) });
    }
  }
  const renderedAt = Date.now();
  const python = pythonAnswers(cases);
  const pythonAt = Date.now();

  const tokenizer = Tokenizer.fromFile(path.join(tokenizerDir("deepseek-v3"), "tokenizer.json"));
  const classes = new Map();
  const stats = new Map(TEMPLATES.map((t) => [t.name, { lines: 0, errors: 0, reference: 0 }]));
  const lines = [];
  const unexplained = [];
  const samples = []; // GOLDEN_SAMPLES=file: every disagreement, for review
  for (let i = 0; i < cases.length; ++i) {
    const c = cases[i];
    const py = python[i];
    if (py.refused !== undefined) throw new Error(`${c.template}: python refused a request: ${py.refused}\n${c.body}`);
    if (py.variables !== c.js.variables) {
      throw new Error(`${c.template}: the JS and Python ports disagree on the variables of\n${c.body}\njs: ${c.js.variables}\npy: ${py.variables}`);
    }
    const agree = c.js.error !== undefined ? py.error !== undefined : py.error === undefined && py.prompt === c.js.prompt && py.images === c.js.images;
    const line = { template: c.template, format: c.format, body: c.body };
    if (py.error !== undefined) line.error = py.error;
    else {
      line.prompt = py.prompt;
      line.prompt_tokens = (await tokenizer.encode(py.prompt, null, { addSpecialTokens: false })).getIds().length;
      line.images = py.images;
    }
    if (!agree) {
      line.reference = "python-jinja2";
      const cls = classify(TEMPLATES.find((t) => t.name === c.template), c.js, py, c.body);
      classes.set(cls, (classes.get(cls) ?? 0) + 1);
      if (process.env.GOLDEN_SAMPLES) samples.push({ class: cls, template: c.template, body: c.body, js: c.js, python: py });
      if (cls.startsWith("unexplained")) unexplained.push({ class: cls, template: c.template, body: c.body, js: c.js, python: py });
    }
    const s = stats.get(c.template);
    s.lines++;
    s.errors += line.error !== undefined;
    s.reference += !agree;
    lines.push(JSON.stringify(line));
  }
  fs.writeFileSync(path.join(here, "chat_templates.jsonl"), lines.join("\n") + "\n");
  if (process.env.GOLDEN_SAMPLES) fs.writeFileSync(process.env.GOLDEN_SAMPLES, JSON.stringify(samples, null, 1));

  for (const [name, s] of stats) console.error(`${name.padEnd(15)} ${s.lines} lines, ${s.errors} errors, ${s.reference} python-only`);
  console.error("JS vs Python disagreements (Python's answer kept):");
  for (const [cls, n] of [...classes].sort((x, y) => y[1] - x[1])) console.error(`  ${String(n).padStart(4)}  ${cls}`);
  const bytes = fs.statSync(path.join(here, "chat_templates.jsonl")).size;
  console.error(`wrote ${lines.length} lines (${(bytes / 1e6).toFixed(1)} MB): JS ${(renderedAt - started) / 1000}s, Python ${(pythonAt - renderedAt) / 1000}s, total ${(Date.now() - started) / 1000}s`);
  if (unexplained.length) {
    const dump = path.join(os.tmpdir(), "golden_unexplained.json");
    fs.writeFileSync(dump, JSON.stringify(unexplained, null, 1));
    console.error(`${unexplained.length} unexplained disagreements (details in ${dump}):\n` + unexplained.slice(0, 15).map((u) => u.class).join("\n"));
    process.exit(1);
  }
}
main();
