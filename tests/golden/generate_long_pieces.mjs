// Regenerates tests/golden/tokenizer_long_pieces.jsonl: long single pieces
// that first-contact text brings and that take BPE's long-piece
// merge path: base64 and hex runs, long identifiers, URLs, minified code,
// digit-free letter runs in several scripts. Ids from the reference,
// HuggingFace tokenizers (npm `tokenizers`). Deterministic (seeded PRNG).
//
//   node tests/golden/generate_long_pieces.mjs [TOKENIZER_DIR]
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");
function npmModules() {
  const candidates = [process.env.NODE_PATH, path.join(repo, "local/npm/node_modules"), path.join(repo, "npm/node_modules")];
  const found = candidates.find((d) => d && fs.existsSync(path.join(d, "tokenizers")));
  if (!found) throw new Error("npm packages not found: run scripts/setup");
  return found;
}
const requireNpm = createRequire(import.meta.url);
const { Tokenizer } = requireNpm(path.join(npmModules(), "tokenizers"));
const tokDir = process.argv[2] || process.env.DPGATE_TOKENIZER_DIR || path.join(repo, "local/tokenizer/deepseek-v3");
const tokenizer = Tokenizer.fromFile(path.join(tokDir, "tokenizer.json"));

let seed = 0x1e5e18;
function rand() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = (s) => s[Math.floor(rand() * s.length)];
// Lengths log-uniform over 65..8000 characters: past the 64-symbol linear merge.
const length = () => Math.floor(65 * Math.pow(8000 / 65, rand()));
const run = (alphabet, n) => Array.from({ length: n }, () => pick(alphabet)).join("");

const lower = "abcdefghijklmnopqrstuvwxyz";
const upper = lower.toUpperCase();
const words = ["get", "set", "value", "buffer", "stream", "token", "count", "cache", "Http", "Request", "Json", "parse",
  "Tree", "node", "visit", "Impl", "Factory", "Manager", "handle", "Size", "index", "Of", "unsafe", "raw"];
const kinds = [
  // base64 (letters only between the rare '+', '/': one \p{L} run per letter stretch)
  () => run(lower + upper + "0123456789+/", length()) + (rand() < 0.5 ? "==" : ""),
  () => run(lower + upper, length()),  // base64 stretches without digits: one piece
  () => run("0123456789abcdef", length()),
  () => { let s = ""; const n = length(); while (s.length < n) s += pick(words) + (rand() < 0.3 ? pick(words).toUpperCase() : ""); return s; },
  () => { let s = ""; const n = length(); while (s.length < n) s += pick(words); return s.toLowerCase(); },
  () => "https://example.com/" + run(lower + upper + "0123456789-_./?=&%", length()),
  () => run(lower + "{}();=,.+-*/<>!&|\"' ", length()),  // minified code
  () => run("абвгдежзийклмнопрстуфхцчшщъыьэюя", length()),
  () => run("αβγδεζηθικλμνξοπρστυφχψω", length()),
  () => run("가나다라마바사아자차카타파하한글", length()),
  () => run("éèêëàâäôöûüçñ" + lower, length()),
  () => pick(["ab", "abc", "xyz", "aA", "Zz", "e\u0301"]).repeat(Math.ceil(length() / 2)),
  () => " " + run(lower, length()),  // a leading space joins the piece
  () => "\\f" + pick("BIR") + run(lower, length()) + "\\fP",  // troff escapes around a long word
];

const out = fs.openSync(path.join(here, "tokenizer_long_pieces.jsonl"), "w");
const n = 112;  // 8 of each kind
for (let i = 0; i < n; ++i) {
  const text = kinds[i % kinds.length]();
  const ids = (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
  fs.writeSync(out, JSON.stringify({ text, ids: Array.from(ids) }) + "\n");
}
fs.closeSync(out);
console.error(`wrote ${n} strings`);
