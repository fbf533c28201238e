// Regenerates the golden corpus the C++ tokenizer tests compare against,
// from the reference: HuggingFace tokenizers (npm `tokenizers`, the Rust
// library). (Chat templates have their own corpus: generate_templates.mjs.)
//
//   node tests/golden/generate.mjs [TOKENIZER_DIR]
//
// Writes tests/golden/tokenizer_strings.jsonl ({"text","ids"} per line).
// Deterministic: a seeded PRNG drives every choice.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");
// npm packages: $NODE_PATH (scripts/test sets it), else scripts/setup's
// local/npm, else the checked-in npm/ folder.
function npmModules() {
  const candidates = [process.env.NODE_PATH, path.join(repo, "local/npm/node_modules"), path.join(repo, "npm/node_modules")];
  const found = candidates.find((d) => d && fs.existsSync(path.join(d, "tokenizers")));
  if (!found) throw new Error("npm packages not found: run scripts/setup");
  return found;
}
const requireNpm = createRequire(import.meta.url);
const npm = (name) => requireNpm(path.join(npmModules(), name));
const { Tokenizer } = npm("tokenizers");

const tokDir = process.argv[2] || process.env.DPGATE_TOKENIZER_DIR || path.join(repo, "local/tokenizer/deepseek-v3");
const tokenizer = Tokenizer.fromFile(path.join(tokDir, "tokenizer.json"));
const addedTokens = JSON.parse(fs.readFileSync(path.join(tokDir, "tokenizer.json"), "utf8")).added_tokens.map((t) => t.content);

// --- PRNG (mulberry32) -------------------------------------------------------
let seed = 0x5eed1234;
function rand() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1)); // inclusive
const pick = (arr) => arr[Math.floor(rand() * arr.length)];
const chance = (p) => rand() < p;

function scalar(lo, hi) {
  for (;;) {
    const cp = randInt(lo, hi);
    if (cp < 0xd800 || cp > 0xdfff) return String.fromCodePoint(cp);
  }
}
const range = (lo, hi) => () => scalar(lo, hi);

// Character pools chosen to hit every class the pre-tokenizer regexes use.
const pools = {
  ascii: range(0x00, 0x7f),
  asciiPrintable: range(0x20, 0x7e),
  latin1: range(0x80, 0xff),
  latinExt: range(0x100, 0x24f),
  combining: range(0x300, 0x36f),
  greekCyrillic: range(0x370, 0x52f),
  hebrewArabic: range(0x590, 0x6ff),
  devanagari: range(0x900, 0x97f),
  thai: range(0xe00, 0xe7f),
  generalPunct: range(0x2000, 0x206f),
  symbols: range(0x2100, 0x2bff),
  cjkPunct: range(0x3000, 0x303f),
  hiragana: range(0x3040, 0x309f),
  katakana: range(0x30a0, 0x30ff),
  cjk: range(0x4e00, 0x9fff),
  cjkExtA: range(0x3400, 0x4dbf),
  hangul: range(0xac00, 0xd7a3),
  halfFull: range(0xff00, 0xffef),
  bmp: range(0, 0xffff),
  smp: range(0x10000, 0x1ffff),
  sip: range(0x20000, 0x2ffff),
  tip: range(0x30000, 0x3ffff),
  ssp: range(0xe0000, 0xeffff),
  pua: range(0xf0000, 0x10ffff),
  any: range(0, 0x10ffff),
  emoji: range(0x1f300, 0x1faff),
  mathAlnum: range(0x1d400, 0x1d7ff),
};
const poolNames = Object.keys(pools);
const spaces = [" ", " ", " ", "\t", "\n", "\n", "\r", "\r\n", "\u000b", "\u000c", "\u0085", "\u00a0", "\u1680", "\u2000", "\u2009", "\u200b", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u001c", "\u001f", "\ufeff"];
const digits = ["0", "1", "2", "5", "9", "\u0660", "\u0663", "\u06f5", "\u0966", "\uff11", "\u00b2", "\u00bd", "\u2160", "\u2463", "\u3007", "\u{1d7ce}", "\u{10107}"];
const punct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~".split("").concat(["\u00a1", "\u00bf", "\u2014", "\u2026", "\u3001", "\u3002", "\uff0c", "\u300c", "\u00a9", "\u20ac", "\u00b0", "\u2192", "\u309b", "\u30fb", "\u30a0", "\u{1f600}"]);
const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".split("").concat(["\u00e9", "\u00df", "\u0101", "\u03b1", "\u0436", "\u05d0", "\u0627", "\u0915", "\u0e01", "\u4e00", "\u4f60", "\u9fa5", "\u9fa6", "\u3042", "\u30ab", "\u30fc", "\uac00", "\u02b0", "\u01c5", "\u{20000}"]);
const marks = ["\u0301", "\u0308", "\u0327", "\u093f", "\u094d", "\u0e31", "\u20dd", "\u3099", "\u309a", "\ufe0f", "\u{1f3fb}", "\u200d", "\u{e0020}"];
const emojiSeqs = ["\u{1f468}\u200d\u{1f469}\u200d\u{1f467}\u200d\u{1f466}", "\u{1f44d}\u{1f3fd}", "\u{1f3f3}\ufe0f\u200d\u{1f308}", "\u{1f1fa}\u{1f1f8}", "1\ufe0f\u20e3", "\u2764\ufe0f", "\u{1f9d1}\u{1f3ff}\u200d\u{1f4bb}", "\u{1f469}\u200d\u2764\ufe0f\u200d\u{1f48b}\u200d\u{1f468}", "\u{1f3f4}\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}"];
const words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Hello", "World", "token", "count", "DeepSeek", "gateway", "naïve", "café", "résumé", "Straße", "über", "don't", "I'm", "we'll", "e.g.", "U.S.A.", "3.14159", "1,000,000", "2024-05-17", "12:30", "v1.2.3", "#include", "std::vector", "http://example.com/a?b=c", "user@example.com", "$HOME", "@mention", "C++", "f(x)", "a_b", "snake_case", "camelCase", "你好", "世界", "日本語", "テスト", "ひらがな", "한국어", "مرحبا", "नमस्ते", "привет", "γειά", "שלום", "สวัสดี"];

const codeSnippets = [
  'def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])\n',
  '#include <vector>\n\nint main() {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x *= 2;\n  return v.size() > 2 ? 0 : 1;\n}\n',
  'const add = (a, b) => a + b;\nexport default function App() {\n\treturn <div className="app">{add(1, 2)}</div>;\n}\n',
  'fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n}\n',
  'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hello, 世界")\n}\n',
  'SELECT id, name FROM users WHERE age >= 21 AND name LIKE \'%son\' ORDER BY id DESC LIMIT 10;\n',
  '<!DOCTYPE html>\n<html>\n  <body>\n    <p class="x">&amp; &lt;tag&gt;</p>\n  </body>\n</html>\n',
  '{"model": "ds", "messages": [{"role": "user", "content": "hi\\n"}], "max_tokens": 128}\n',
  '#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do\n  wc -l "$f" | awk \'{print $1}\'\ndone\n',
  'public class Main {\n    public static void main(String[] args) {\n        System.out.println("Hi");\n    }\n}\n',
  '    \n\n\t\t  x = 1  \r\n\r\n   y=2\n\n\n',
  '// comment with trailing spaces   \n/* block */\nint  a\t=\t0 ;;\n',
];

// --- string generators -------------------------------------------------------
function randomFromPools(maxLen) {
  const n = randInt(1, maxLen);
  let s = "";
  const nPools = randInt(1, 3);
  const chosen = Array.from({ length: nPools }, () => pools[pick(poolNames)]);
  for (let i = 0; i < n; ++i) s += pick(chosen)();
  return s;
}
function interesting(maxLen) {
  // Every class of character the splitter distinguishes, adjacent in all orders.
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
  const n = randInt(1, 12);
  for (let i = 0; i < n; ++i) {
    const run = randInt(0, 6);
    for (let j = 0; j < run; ++j) s += pick(spaces);
    if (chance(0.7)) s += chance(0.5) ? pick(words) : pick(punct);
  }
  return s;
}
function digitRuns() {
  let s = "";
  const n = randInt(1, 6);
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
  const n = randInt(1, 10);
  for (let i = 0; i < n; ++i) {
    s += chance(0.6) ? pick(emojiSeqs) : pools.emoji();
    if (chance(0.3)) s += pick(marks);
    if (chance(0.3)) s += pick([" ", "a", "!", "\n", "你"]);
  }
  return s;
}
function combining() {
  let s = "";
  const n = randInt(1, 12);
  for (let i = 0; i < n; ++i) {
    s += pick([pick(letters), pick(spaces), pick(digits), pick(punct), ""]);
    const m = randInt(1, 4);
    for (let j = 0; j < m; ++j) s += chance(0.7) ? pick(marks) : pools.combining();
  }
  return s;
}
function code() {
  let s = pick(codeSnippets);
  if (chance(0.5)) s += pick(codeSnippets);
  if (chance(0.3)) {
    const at = randInt(0, s.length);
    s = s.slice(0, at) + interesting(6) + s.slice(at);
  }
  return s;
}
function specialInside() {
  const pieces = [];
  const n = randInt(1, 6);
  for (let i = 0; i < n; ++i) {
    const tok = pick(addedTokens.slice(0, 30).concat(addedTokens.slice(-20)));
    const r = rand();
    if (r < 0.6) pieces.push(tok);
    else if (r < 0.75) pieces.push(tok.slice(0, randInt(1, tok.length - 1))); // a prefix only
    else if (r < 0.85) pieces.push(tok + tok.slice(1));
    else pieces.push(tok.slice(0, -1) + tok); // overlapping start
    pieces.push(chance(0.5) ? interesting(8) : pick(["", " ", "\n", "<", "x"]));
  }
  return pieces.join("");
}
function longWord() {
  const unit = pick(["a", "ab", "xyz", "é", "你", "ア", "한", "1", " ", "\n", "!", "-", "=", "ا", "😀", "\u0301", "aé", "中文"]);
  const n = randInt(200, 6000);
  return (chance(0.5) ? pick(words) + " " : "") + unit.repeat(Math.ceil(n / unit.length)) + (chance(0.5) ? " " + pick(words) : "");
}
function prose() {
  const n = randInt(3, 40);
  const out = [];
  for (let i = 0; i < n; ++i) out.push(pick(words) + (chance(0.15) ? pick([",", ".", "!", "?", ";", ":"]) : ""));
  return out.join(chance(0.8) ? " " : pick(["  ", "\n", " \n", "\t"]));
}

const generators = [
  [randomFromPools, 4, 40],
  [interesting, 8, 30],
  [interesting, 2, 120],
  [wsRuns, 2],
  [digitRuns, 2],
  [script, 2],
  [emoji, 1],
  [combining, 1],
  [code, 1],
  [specialInside, 1.5],
  [prose, 1.5],
];

function makeString(i) {
  if (i % 400 === 0) return longWord();
  const total = generators.reduce((a, g) => a + g[1], 0);
  let r = rand() * total;
  let k = 0;
  while (r >= generators[k][1]) r -= generators[k++][1];
  const [fn, , arg] = generators[k];
  return fn(arg);
}

// --- write ---------------------------------------------------------------------
async function main() {
  const nStrings = 20480;
  const stringsOut = fs.openSync(path.join(here, "tokenizer_strings.jsonl"), "w");
  for (let i = 0; i < nStrings; ++i) {
    const text = makeString(i);
    const ids = (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
    fs.writeSync(stringsOut, JSON.stringify({ text, ids: Array.from(ids) }) + "\n");
  }
  fs.closeSync(stringsOut);

  console.error(`wrote ${nStrings} strings`);
}
main();
