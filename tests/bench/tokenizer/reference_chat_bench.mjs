// The reference for dpgate's chat path, on the same request bodies:
// @huggingface/jinja renders the model's chat template over the messages (as
// vLLM hands them over: these bodies carry string contents only, so vLLM's
// preprocessing leaves them as they are) and HF tokenizers counts the prompt.
// One JSON line per body: {"ms", "tokens"}; the template is parsed once, as a
// server does, and the timing covers JSON parse, render and count.
//
//   node reference_chat_bench.mjs TOKENIZER_DIR BODIES.jsonl
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(import.meta.url);
const modules = process.env.NODE_PATH || path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../../local/npm/node_modules");
const { Tokenizer } = require(path.join(modules, "tokenizers"));
const { Template } = require(path.join(modules, "@huggingface/jinja"));

const [dir, bodiesPath] = process.argv.slice(2);
const tokenizer = Tokenizer.fromFile(path.join(dir, "tokenizer.json"));
const config = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
const token = (t) => (t === null || t === undefined ? undefined : typeof t === "string" ? t : t.content);
const template = new Template(config.chat_template);
const variables = { bos_token: token(config.bos_token), eos_token: token(config.eos_token) };

for (const line of fs.readFileSync(bodiesPath, "utf8").split("\n")) {
  if (!line) continue;
  const start = process.hrtime.bigint();
  const body = JSON.parse(line);
  const prompt = template.render({ ...variables, messages: body.messages, tools: null, add_generation_prompt: true });
  const ids = (await tokenizer.encode(prompt, null, { addSpecialTokens: false })).getIds();
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  process.stdout.write(JSON.stringify({ ms, tokens: ids.length }) + "\n");
}
