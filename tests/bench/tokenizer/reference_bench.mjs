// The reference side of dpgate-bench-tokenizer: HuggingFace tokenizers (npm)
// counting the same files, in 16 KB chunks (cut on the same UTF-8 boundaries
// as the C++ side) and as one string. Prints one JSON line per file.
//   node reference_bench.mjs TOKENIZER_JSON FILE...
import { createRequire } from "node:module";
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

const [tokenizerPath, ...files] = process.argv.slice(2);
const t0 = performance.now();
const tokenizer = Tokenizer.fromFile(tokenizerPath);
const loadMs = performance.now() - t0;
const kChunk = 16384;

function chunks(buf) {
  const out = [];
  let start = 0;
  while (start < buf.length) {
    let end = Math.min(start + kChunk, buf.length);
    while (end < buf.length && (buf[end] & 0xc0) === 0x80) --end;
    out.push(buf.subarray(start, end).toString("utf8"));
    start = end;
  }
  return out;
}

for (const file of files) {
  const buf = fs.readFileSync(file);
  const parts = chunks(buf);
  let t = performance.now();
  // CPU time of the whole process (the binding encodes on another thread): on
  // a shared machine it is steadier than wall time.
  const cpu0 = process.cpuUsage();
  let chunkTokens = 0;
  for (const p of parts) chunkTokens += (await tokenizer.encode(p, null, { addSpecialTokens: false })).getIds().length;
  const chunkMs = performance.now() - t;
  const cpu = process.cpuUsage(cpu0);
  const chunkCpuMs = (cpu.user + cpu.system) / 1000;
  const whole = buf.toString("utf8");
  t = performance.now();
  const wholeTokens = (await tokenizer.encode(whole, null, { addSpecialTokens: false })).getIds().length;
  const wholeMs = performance.now() - t;
  console.log(JSON.stringify({ file: path.basename(file), bytes: buf.length, loadMs, chunkTokens, chunkMs, chunkCpuMs, wholeTokens, wholeMs }));
}
