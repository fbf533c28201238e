// Differential fuzzing of `dpgate tokens` against HuggingFace tokenizers:
// random strings (golden-corpus splices, random code points, random bytes
// decoded leniently) are counted by both; any difference is printed and saved
// to differential-failures.jsonl for a regression test.
//
//   node tests/fuzz/tokenizer/differential.mjs [--seconds N] [--seed S] [--cli PATH]
import { createRequire } from "node:module";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../../..");
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

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const seconds = Number(opt("--seconds", "60"));
let seed = Number(opt("--seed", String(Date.now() % 2147483647)));
const cli = opt("--cli", path.join(repo, "build/bin/dpgate"));
const tokDir = process.env.DPGATE_TOKENIZER_DIR || path.join(repo, "local/tokenizer/deepseek-v3");
const tokenizer = Tokenizer.fromFile(path.join(tokDir, "tokenizer.json"));

function rand() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = (a) => a[Math.floor(rand() * a.length)];

const golden = fs.readFileSync(path.join(repo, "tests/golden/tokenizer_strings.jsonl"), "utf8")
  .split("\n").filter(Boolean).map((l) => JSON.parse(l).text).filter((t) => t.length < 2000);

function scalar() {
  for (;;) {
    const r = rand();
    const cp = r < 0.5 ? randInt(0, 0x7f) : r < 0.8 ? randInt(0x80, 0xffff) : randInt(0x10000, 0x10ffff);
    if (cp < 0xd800 || cp > 0xdfff) return String.fromCodePoint(cp);
  }
}
function splice() {
  let s = "";
  const n = randInt(1, 4);
  for (let i = 0; i < n; ++i) {
    const g = [...pick(golden)];
    const a = randInt(0, g.length);
    const b = randInt(a, Math.min(g.length, a + 40));
    s += g.slice(a, b).join("");
    if (rand() < 0.3) s += scalar();
  }
  return s;
}
function randomScalars() {
  let s = "";
  const n = randInt(1, 30);
  for (let i = 0; i < n; ++i) s += scalar();
  return s;
}
function randomBytes() {
  const b = Buffer.alloc(randInt(1, 40));
  for (let i = 0; i < b.length; ++i) b[i] = rand() < 0.5 ? randInt(0x20, 0x7e) : randInt(0, 255);
  return b.toString("utf8"); // invalid sequences become U+FFFD
}
const makers = [splice, splice, randomScalars, randomBytes];

const deadline = Date.now() + seconds * 1000;
let tested = 0;
let failures = 0;
const failureFile = path.join(here, "differential-failures.jsonl");
while (Date.now() < deadline) {
  const batch = Array.from({ length: 500 }, () => pick(makers)());
  const want = [];
  for (const s of batch) want.push((await tokenizer.encode(s, null, { addSpecialTokens: false })).getIds().length);
  const run = spawnSync(cli, ["tokens", "--tokenizer", tokDir, "--jsonl"], { input: batch.map((s) => JSON.stringify(s)).join("\n") + "\n", encoding: "utf8", maxBuffer: 1 << 26 });
  if (run.status !== 0) {
    console.error(`cli failed (${run.status}): ${run.stderr}`);
    process.exit(2);
  }
  const got = run.stdout.trim().split("\n").map((l) => JSON.parse(l));
  for (let i = 0; i < batch.length; ++i) {
    if (got[i]?.tokens !== want[i]) {
      ++failures;
      console.log(`MISMATCH ${JSON.stringify(batch[i])}: dpgate ${JSON.stringify(got[i])}, reference ${want[i]}`);
      fs.appendFileSync(failureFile, JSON.stringify({ text: batch[i], reference_tokens: want[i] }) + "\n");
    }
  }
  tested += batch.length;
}
console.log(`differential: ${tested} strings, ${failures} mismatches (seed ${opt("--seed", "time-based")})`);
process.exit(failures === 0 ? 0 : 1);
