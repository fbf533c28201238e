"""Renders template snippets with Python's Jinja2 configured as transformers
configures chat templates; one JSON line per snippet: {"ok", "text"}.

    /usr/bin/python3 render_with_jinja2.py INPUT.json   (INPUT: {"snippets": [...], "context": {...}})
"""
import json
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox
from jinja2.exceptions import TemplateError


class Generation(jinja2.ext.Extension):
    """The {% generation %} tag of transformers' AssistantTracker, rendering its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise TemplateError(message)


def main():
    data = json.load(open(sys.argv[1]))
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, Generation])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    for snippet in data["snippets"]:
        try:
            answer = {"ok": True, "text": env.from_string(snippet).render(**data["context"])}
        except Exception as e:  # the message, whatever failed
            answer = {"ok": False, "text": str(e)}
        print(json.dumps(answer))


main()
