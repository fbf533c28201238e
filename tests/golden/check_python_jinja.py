#!/usr/bin/python3
"""Checks tests/golden/chat_templates.jsonl against Python's Jinja2, the
engine the backend renders with.

    /usr/bin/python3 tests/golden/check_python_jinja.py [FILE]

For every line: the variables from "body" by vllm_preprocess.py, the named
template rendered by jinja2 configured as transformers configures it, the
continue_final_message cut; the prompt and image count must equal the line's
(or, for an "error" line, rendering must fail too: messages differ between
engines, so only the failure is compared). Prints a summary; exits 1 on any
disagreement.

    check_python_jinja.py --emit < requests.jsonl

is how generate_templates.mjs asks for Python's answer: for each input line
({"template", "format", "body"}) it prints {"prompt", "images"} or
{"error"}, plus "variables" (vllm_preprocess.canonical()) so the generator
can compare the JS port's variables with this port's.
"""

import json
import os
import sys
import time
from datetime import datetime

import jinja2
import jinja2.exceptions
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ beside the corpus
import vllm_preprocess  # noqa: E402

# Template name -> (template file or None for the tokenizer_config's
# chat_template, tokenizer directory for the special tokens).
TEMPLATES = {
    "deepseek-v3": (None, "deepseek-v3"),
    "qwen3": (None, "qwen3"),
    "llama3-1": (None, "llama3-1"),
    "gemma3": (None, "gemma3"),
    "deepseek-tools": (os.path.join(HERE, "templates", "deepseek_tools.jinja"), "deepseek-v3"),
}


class GenerationTag(jinja2.ext.Extension):
    """transformers' {% generation %} ... {% endgeneration %}: renders its body
    (transformers also records the span for assistant masks, which does not
    change the text)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' replacement: no HTML escaping, json.dumps's options.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def make_environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, GenerationTag]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = datetime.now().strftime
    return env


class Renderers:
    def __init__(self):
        self.env = make_environment()
        self.cache = {}

    def get(self, name):
        if name not in self.cache:
            path, tokenizer = TEMPLATES[name]
            with open(os.path.join(REPO, "local", "tokenizer", tokenizer, "tokenizer_config.json"), encoding="utf-8") as f:
                config = json.load(f)
            if path is None:
                source = config["chat_template"]
            else:
                with open(path, encoding="utf-8") as f:
                    source = f.read()
            self.cache[name] = (self.env.from_string(source), vllm_preprocess.special_tokens(config))
        return self.cache[name]

    def render(self, name, content_format, body):
        """{"prompt", "images", "variables"} or {"error", "variables"?}."""
        template, tokens = self.get(name)
        seen = {}

        def render(variables):
            seen["variables"] = vllm_preprocess.canonical(variables)
            return template.render(**variables)

        try:
            prompt, images, _ = vllm_preprocess.render_request(body, content_format, tokens, render)
            out = {"prompt": prompt, "images": images}
        except vllm_preprocess.Refused as e:
            return {"refused": str(e)}  # the corpus holds no refused requests
        except Exception as e:  # a template or render error: the line's answer
            out = {"error": f"{type(e).__name__}: {e}"}
        if "variables" in seen:
            out["variables"] = seen["variables"]
        return out


def emit():
    renderers = Renderers()
    for line in sys.stdin.buffer:
        case = json.loads(line)
        out = renderers.render(case["template"], case["format"], case["body"])
        sys.stdout.write(json.dumps(out) + "\n")


def check(path):
    started = time.monotonic()
    renderers = Renderers()
    per_template = {}
    failures = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            case = json.loads(line)
            stats = per_template.setdefault(case["template"], {"lines": 0, "errors": 0, "python_reference": 0})
            stats["lines"] += 1
            stats["errors"] += "error" in case
            stats["python_reference"] += case.get("reference") == "python-jinja2"
            out = renderers.render(case["template"], case["format"], case["body"])
            if "refused" in out:
                failures.append((number, case, {"error": "refused: " + out["refused"]}))
            elif "error" in case or "error" in out:
                if ("error" in case) != ("error" in out):
                    failures.append((number, case, out))
            elif out["prompt"] != case["prompt"] or out["images"] != case["images"]:
                failures.append((number, case, out))
    for number, case, out in failures[:20]:
        expected = case.get("error") or case["prompt"]
        got = out.get("error") or out["prompt"]
        at = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), min(len(expected), len(got)))
        print(f"line {number} ({case['template']}): golden {ascii(expected[max(0, at - 40):at + 60])}")
        print(f"{' ' * len(str(number))}       python {ascii(got[max(0, at - 40):at + 60])}")
    total = sum(s["lines"] for s in per_template.values())
    for name, s in per_template.items():
        print(f"{name:15} {s['lines']:5} lines {s['errors']:4} errors {s['python_reference']:4} python-only")
    print(
        f"jinja2 {jinja2.__version__}: {total - len(failures)}/{total} lines agree, "
        f"{len(failures)} disagree ({time.monotonic() - started:.1f}s)"
    )
    return 1 if failures or total == 0 else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--emit"]:
        emit()
    else:
        sys.exit(check(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "chat_templates.jsonl")))
