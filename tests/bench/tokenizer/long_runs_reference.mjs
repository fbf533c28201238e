// The reference side of dpgate-bench-long-runs: HuggingFace tokenizers (npm)
// counting one file once, as one string. Prints one JSON line: the time, the
// count, and the process's peak resident memory before and after (KB);
// nothing when the tokenizer fails (the caller reports the failure).
//   node long_runs_reference.mjs TOKENIZER_JSON FILE
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../../..");
function npmModules() {
  const candidates = [process.env.NODE_PATH, path.join(repo, "local/npm/node_modules"), path.join(repo, "npm/node_modules")];
  const found = candidates.find((d) => d && fs.existsSync(path.join(d, "tokenizers")));
  if (!found) throw new Error("npm packages not found: run scripts/setup");
  return found;
}
const requireNpm = createRequire(import.meta.url);
const { Tokenizer } = requireNpm(path.join(npmModules(), "tokenizers"));

const [tokenizerPath, file] = process.argv.slice(2);
const tokenizer = Tokenizer.fromFile(tokenizerPath);
const text = fs.readFileSync(file, "utf8");
const peakBeforeKb = process.resourceUsage().maxRSS;
const t0 = performance.now();
let tokens;
try {
  tokens = (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds().length;
} catch (e) {
  console.error(String(e).slice(0, 300));
  process.exit(3);
}
const ms = performance.now() - t0;
console.log(JSON.stringify({ ms, tokens, peakBeforeKb, peakAfterKb: process.resourceUsage().maxRSS }));
