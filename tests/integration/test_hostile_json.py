"""Hostile JSON through the real gateway and simulator: for every field
dpgate reads or renders, and one it does not, nesting of 1,000, 100,000 and
1,000,000 levels (arrays and objects) is a 400 naming the path and the limit,
nesting at the limit is served, a very wide value is served, invalid JSON in
a field nobody reads is a 400 the backend never sees, and the gateway stays
up and serves the next request after each."""

from __future__ import annotations

import json

import pytest

from harness import MODEL, Gateway, Sim, chat_body, gateway_config

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
DEPTH_LIMIT = 256  # limits.max_json_depth's default
MAX_PATH_BYTES = 256

USER = b'{"role":"user","content":"hi"}'
HEAD = b'{"model":"' + MODEL.encode() + b'","max_tokens":8,'


def chat_with(fields: bytes) -> bytes:
    return HEAD + b'"messages":[' + USER + b"]," + fields + b"}"


class Field:
    """A field whose value (an array or object) sits at `level` (the body is 1)."""

    def __init__(self, name: str, endpoint: str, level: int, path: str, build, served_at_limit: bool = True):
        self.name, self.endpoint, self.level, self.path = name, endpoint, level, path
        self.build = build
        self.served_at_limit = served_at_limit  # False: refused as the wrong type, not for its depth


FIELDS = [
    Field("chat_template_kwargs", CHAT, 3, "chat_template_kwargs.x",
          lambda v: chat_with(b'"chat_template_kwargs":{"x":' + v + b"}")),
    Field("tools_parameters", CHAT, 7, "tools[0].function.parameters.properties.a",
          lambda v: chat_with(b'"tools":[{"type":"function","function":{"name":"f","parameters":'
                              b'{"type":"object","properties":{"a":' + v + b"}}}}]")),
    Field("tool_call_arguments_object", CHAT, 7, "messages[1].tool_calls[0].function.arguments",
          lambda v: HEAD + b'"messages":[' + USER + b',{"role":"assistant","content":null,"tool_calls":[{"id":"c1",'
                    b'"type":"function","function":{"name":"f","arguments":' + v +
                    b'}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}'),
    Field("content_parts", CHAT, 6, "messages[0].content[0].x",
          lambda v: HEAD + b'"messages":[{"role":"user","content":[{"type":"text","text":"hi","x":' + v + b"}]}]}"),
    Field("documents", CHAT, 2, "documents", lambda v: chat_with(b'"documents":' + v), served_at_limit=False),
    Field("tool_choice", CHAT, 4, "tool_choice.function.x",
          lambda v: chat_with(b'"tools":[{"type":"function","function":{"name":"f"}}],'
                              b'"tool_choice":{"type":"function","function":{"name":"f","x":' + v + b"}}")),
    Field("stream_options", CHAT, 3, "stream_options.x",
          lambda v: chat_with(b'"stream_options":{"include_usage":false,"x":' + v + b"}")),
    Field("response_format", CHAT, 4, "response_format.json_schema.schema",
          lambda v: chat_with(b'"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":' + v +
                              b"}}")),
    Field("completions_prompt", COMPLETIONS, 2, "prompt",
          lambda v: HEAD + b'"prompt":' + v + b"}", served_at_limit=False),
    Field("metadata_not_read", CHAT, 2, "metadata", lambda v: chat_with(b'"metadata":' + v)),
]

# Tool-call arguments as a string: JSON inside a JSON string, so the body
# nests shallowly; the template engine's json.loads stops the depth.
ARGUMENTS_STRING = Field(
    "tool_call_arguments_string", CHAT, 7, "messages[1].tool_calls[0].function.arguments",
    lambda v: HEAD + b'"messages":[' + USER + b',{"role":"assistant","content":null,"tool_calls":[{"id":"c1",'
              b'"type":"function","function":{"name":"f","arguments":' + json.dumps(v.decode()).encode() +
              b'}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}')


def arrays(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def objects(levels: int) -> bytes:
    return b'{"a":' * levels + b"1" + b"}" * levels


@pytest.fixture(scope="module")
def gateway():
    with Sim() as sim:
        with Gateway(gateway_config([("primary", sim, "primary")])) as gw:
            yield gw, sim


def post(gw: Gateway, path: str, body: bytes):
    status, _, data = gw.request("POST", path, body, {"Content-Type": "application/json"})
    return status, (json.loads(data) if data else None)


def assert_still_serving(gw: Gateway) -> None:
    assert gw.process.alive(), gw.process.describe()
    status, body = post(gw, CHAT, json.dumps(chat_body("Hello!", max_tokens=8)).encode())
    assert status == 200, body


def refused_before_the_backend(gw: Gateway, sim: Sim, path: str, body: bytes) -> dict:
    before = sim.stats()["requests"]
    status, answer = post(gw, path, body)
    assert status == 400, answer
    assert answer["error"]["type"] == "invalid_request_error", answer
    assert sim.stats()["requests"] == before, "a refused request must not reach the backend"
    return answer["error"]


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_a_thousand_to_a_million_levels_are_refused_naming_the_path(gateway, field):
    gw, sim = gateway
    for levels in (1_000, 100_000, 1_000_000):
        for shape, segment in ((arrays, "[0]"), (objects, ".a")):
            error = refused_before_the_backend(gw, sim, field.endpoint, field.build(shape(levels)))
            assert error["message"].endswith(f"nests deeper than {DEPTH_LIMIT} levels (limits.max_json_depth)"), error
            # The container that opens level 257, below the field's value.
            expected = field.path + segment * (DEPTH_LIMIT - field.level + 1)
            if len(expected) > MAX_PATH_BYTES:
                expected = expected[:MAX_PATH_BYTES - 3] + "..."
            assert error["param"] == expected, error
    assert_still_serving(gw)


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_at_the_limit_is_served_and_one_level_more_is_not(gateway, field):
    gw, sim = gateway
    levels = DEPTH_LIMIT - field.level + 1  # the body nests exactly DEPTH_LIMIT deep
    for shape in (arrays, objects):
        status, answer = post(gw, field.endpoint, field.build(shape(levels)))
        if field.served_at_limit:
            assert status == 200, answer
        else:
            assert status == 400 and "max_json_depth" not in answer["error"]["message"], answer
        status, answer = post(gw, field.endpoint, field.build(shape(levels + 1)))
        assert status == 400 and "limits.max_json_depth" in answer["error"]["message"], answer
    assert_still_serving(gw)


def test_arguments_as_a_string_a_million_levels_deep_are_refused(gateway):
    gw, sim = gateway
    for levels in (1_000, 100_000, 1_000_000):
        error = refused_before_the_backend(gw, sim, CHAT, ARGUMENTS_STRING.build(arrays(levels)))
        assert error["param"].startswith("messages[1].tool_calls[0].function.arguments"), error
    assert_still_serving(gw)


def test_a_very_wide_value_is_served(gateway):
    gw, _ = gateway
    wide = b"[" + b",".join([b"0"] * 1_000_000) + b"]"
    keys = b"{" + b",".join(b'"k%d":1' % i for i in range(100_000)) + b"}"
    for value in (wide, keys):
        for field in (FIELDS[0], FIELDS[-1]):  # read and rendered; not read
            status, answer = post(gw, field.endpoint, field.build(value))
            assert status == 200, answer
    assert_still_serving(gw)


INVALID = [
    (b"NaN", "metadata", "NaN and Infinity are not JSON values"),
    (b"Infinity", "metadata", "NaN and Infinity are not JSON values"),
    (b"[1,,2]", "metadata[1]", "expected a value"),
    (b'{"a" 1}', "metadata.a", "expected ':'"),
    (b"tru", "metadata", "invalid literal"),
    (b"1.2.3", "metadata", "invalid number"),
    (b"[1,2,]", "metadata[2]", "expected a value"),
    (b'{"a":1,}', "metadata", "expected an object key"),
    (b"012", "metadata", "invalid number"),
    (b'"a\\x"', "metadata", "bad escape"),
    (b'"a\x01"', "metadata", "unescaped control character"),
    (b'"\\ud800"', "metadata", "lone surrogate"),
    (b'"\xff"', "body", "is not valid UTF-8"),
]


@pytest.mark.parametrize("value,param,words", INVALID, ids=[v.decode("latin-1") for v, _, _ in INVALID])
def test_invalid_json_in_a_field_nobody_reads_never_reaches_the_backend(gateway, value, param, words):
    gw, sim = gateway
    error = refused_before_the_backend(gw, sim, CHAT, chat_with(b'"metadata":' + value))
    assert error["param"] == param, error
    assert words in error["message"] and "byte offset" in error["message"], error


def test_a_second_value_or_trailing_garbage_never_reaches_the_backend(gateway):
    gw, sim = gateway
    body = chat_with(b'"metadata":1')
    for tail in (body, b"garbage", b"\x00"):
        error = refused_before_the_backend(gw, sim, CHAT, body + tail)
        assert error["param"] == "body" and "trailing content" in error["message"], error
    assert_still_serving(gw)


def test_errors_on_deep_paths_and_huge_keys_stay_small(gateway):
    gw, sim = gateway
    long_keys = b"".join(b'{"' + b"p" * 100 + b'":' for _ in range(300)) + b"1" + b"}" * 300
    huge_key = b'{"' + b"k" * (1 << 20) + b'":NaN}'
    for value in (long_keys, huge_key):
        before = sim.stats()["requests"]
        status, _, data = gw.request("POST", CHAT, chat_with(b'"metadata":' + value),
                                     {"Content-Type": "application/json"})
        assert status == 400 and len(data) < 1024, data[:300]
        assert len(json.loads(data)["error"]["param"]) <= MAX_PATH_BYTES
        assert sim.stats()["requests"] == before


def test_n_above_the_limit_is_refused(gateway):
    gw, sim = gateway
    for n in (9, 10_000_000_000):
        error = refused_before_the_backend(gw, sim, CHAT, json.dumps(chat_body("hi", n=n)).encode())
        assert error["param"] == "n" and f"n: {n} is above the limit 8 (limits.max_n)" == error["message"], error
    status, answer = post(gw, CHAT, json.dumps(chat_body("hi", n=2, max_tokens=8)).encode())
    assert status == 200, answer
