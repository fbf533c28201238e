"""Python port of docs/VLLM_RENDERING.md sections 3-4: a chat completions
request body (raw JSON text) and a content format ("string" or "openai")
become the variables the chat template is rendered with, as vLLM and
transformers build them; plus transformers' continue_final_message marker.

This is the reference side of the golden suite: the backend parses request
bodies with json.loads, so ints stay exact, 1.0 stays a float, a repeated key
keeps its first position and last value. vllm_preprocess.mjs is an
independent JS port of the same page; generate_templates.mjs checks that both
produce identical variables (canonical()) for every golden line.

Spec points the page leaves open, decided here and in the JS port alike
(tests/golden/README.md lists them):
- chat_template_kwargs values null and "auto" are dropped ("dropped at each
  merge"), as vLLM's merge_kwargs does when the request's kwargs are merged
  over server defaults.
- "no enable_thinking in chat_template_kwargs" means the key is absent (vLLM
  tests `"enable_thinking" not in chat_template_kwargs` before dropping nulls).
- add_generation_prompt and continue_final_message are consumed by
  transformers' apply_chat_template: add_generation_prompt is a template
  variable, continue_final_message is not.
- Special tokens that are null in tokenizer_config.json are not variables
  (transformers' special_tokens_map lists only the tokens that are set).
- A tool-call `arguments` string is json.loads'ed whatever it holds ("42"
  gives 42, "null" gives None); only a string that fails to parse gives {}.
"""

import copy
import json
import struct

CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
# Part type -> the key holding its text.
TEXT_PART_KEYS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal", "thinking": "thinking"}
IMAGE_PART_TYPES = ("image_url", "input_image")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")


class Refused(ValueError):
    """The request is refused before rendering (a 400 from vLLM and dpgate)."""


class RenderError(ValueError):
    """Rendering failed outside the template (continue_final_message)."""


def special_tokens(tokenizer_config):
    """bos/eos/unk/pad from a tokenizer_config.json dict; an AddedToken object
    gives its content, a null token is left out."""
    out = {}
    for name in SPECIAL_TOKEN_NAMES:
        value = tokenizer_config.get(name)
        if isinstance(value, dict):
            value = value.get("content")
        if value is not None:
            out[name] = value
    return out


def _content_parts(content):
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    raise Refused("message content must be a string, an array of parts or null")


def _message(msg, content_format):
    if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
        raise Refused("a message must be an object with a string role")
    role = msg["role"]
    items = []  # ("text", str) or ("image", None), in part order
    images = 0
    for part in _content_parts(msg.get("content")):
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str):
            raise Refused("a content part needs a string type")
        if kind in TEXT_PART_KEYS:
            text = part.get(TEXT_PART_KEYS[kind])
            if text is None:
                continue
            if not isinstance(text, str):
                raise Refused(f"a {kind} part needs a string")
            items.append(("text", text))
        elif kind in IMAGE_PART_TYPES:
            images += 1
            items.append(("image", None))
        else:
            raise Refused(f"unsupported content part type: {kind!r}")

    if content_format == "string":
        content = "\n".join(text for kind, text in items if kind == "text")
    else:
        content = [{"type": "text", "text": text} if kind == "text" else {"type": "image"} for kind, text in items]
    out = {"role": role, "content": content}

    if role == "assistant":
        if msg.get("tool_calls") is not None:
            out["tool_calls"] = msg["tool_calls"]
        reasoning = msg.get("reasoning")
        if reasoning is None:
            reasoning = msg.get("reasoning_content")
        if reasoning is not None:
            out["reasoning"] = reasoning
            out["reasoning_content"] = reasoning
    elif role == "tool":
        if "tool_call_id" in msg:
            out["tool_call_id"] = msg["tool_call_id"]
        if isinstance(content, list) and all(p["type"] == "text" for p in content):
            out["content"] = "\n".join(p["text"] for p in content)
    if isinstance(msg.get("name"), str):
        out["name"] = msg["name"]
    if role == "developer":
        # vLLM passes a developer message's own tools; dpgate (and this
        # corpus) never sends them, so the key is always None.
        out["tools"] = None
    return out, images


def _tool_call(call):
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        raise Refused("a tool call needs a function object")
    # pydantic rebuilds the OpenAI TypedDicts in field order and drops other keys.
    out = {}
    if "id" in call:
        out["id"] = call["id"]
    function = {}
    for key in ("arguments", "name"):
        if key in call["function"]:
            function[key] = call["function"][key]
    out["function"] = function
    if "type" in call:
        out["type"] = call["type"]

    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            function["arguments"] = json.loads(arguments)
        except json.JSONDecodeError:
            function["arguments"] = {}
    elif not isinstance(arguments, (dict, list)):
        function["arguments"] = {}
    return out


def _postprocess(messages):
    for msg in messages:
        if msg["role"] != "assistant" or "tool_calls" not in msg:
            continue
        calls = msg["tool_calls"]
        if not isinstance(calls, list):
            raise Refused("tool_calls must be an array")
        if not calls:
            del msg["tool_calls"]
            continue
        msg["tool_calls"] = [_tool_call(call) for call in calls]


def _tools(tools):
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise Refused("tools must be an array")
    out = []
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            raise Refused('a tool\'s type must be "function"')
        function = tool.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise Refused("a tool needs a function with a string name")
        normalized = {"name": function["name"], "description": function.get("description"), "parameters": function.get("parameters")}
        # vLLM's FunctionDefinition keeps strict and defer_loading only when
        # set (a tool-level defer_loading fills the function's); other keys
        # are dropped, as are the tool's own but defer_loading.
        if function.get("strict") is not None:
            normalized["strict"] = function["strict"]
        defer = function.get("defer_loading")
        if defer is None:
            defer = tool.get("defer_loading")
        if defer is not None:
            normalized["defer_loading"] = defer
        entry = {"type": "function", "function": normalized}
        if tool.get("defer_loading") is not None:
            entry["defer_loading"] = tool["defer_loading"]
        out.append(entry)
    return out


def _merge(defaults, overrides):
    """vLLM's merge_kwargs: overriding values null and "auto" are dropped."""
    merged = dict(defaults)
    for key, value in overrides.items():
        if value is not None and value != "auto":
            merged[key] = value
    return merged


def _kwargs(body):
    user = body.get("chat_template_kwargs")
    if user is None:
        user = {}
    if not isinstance(user, dict):
        raise Refused("chat_template_kwargs must be an object")
    for key in ("chat_template", "tokenize"):
        if key in user:
            raise Refused(f"chat_template_kwargs.{key} is not allowed")

    add_generation_prompt = body.get("add_generation_prompt", True)
    continue_final_message = body.get("continue_final_message", False)
    if not isinstance(add_generation_prompt, bool) or not isinstance(continue_final_message, bool):
        raise Refused("add_generation_prompt and continue_final_message must be booleans")
    if add_generation_prompt and continue_final_message:
        raise Refused("cannot set both continue_final_message and add_generation_prompt to true")
    reasoning_effort = body.get("reasoning_effort")
    if reasoning_effort is not None and reasoning_effort not in REASONING_EFFORTS:
        raise Refused(f"unsupported reasoning_effort: {reasoning_effort!r}")

    extra = {
        "add_generation_prompt": add_generation_prompt,
        "continue_final_message": continue_final_message,
        "documents": body.get("documents"),
        "reasoning_effort": reasoning_effort,
    }
    if reasoning_effort is not None and "enable_thinking" not in user:
        extra["enable_thinking"] = reasoning_effort != "none"
    return _merge(_merge({}, user), extra)


class Prepared:
    """The request reduced to what the template sees (before the continue marker)."""

    def __init__(self, messages, tools, kwargs, images):
        self.messages = messages
        self.tools = tools
        self.kwargs = kwargs
        self.images = images

    @property
    def continue_final_message(self):
        return self.kwargs["continue_final_message"]


def preprocess(body_text, content_format):
    if content_format not in ("string", "openai"):
        raise ValueError(f"unknown content format {content_format!r}")
    body = json.loads(body_text)
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise Refused("the body must be an object with a messages array")
    messages = []
    images = 0
    for msg in body["messages"]:
        converted, n = _message(msg, content_format)
        messages.append(converted)
        images += n
    _postprocess(messages)
    return Prepared(messages, _tools(body.get("tools")), _kwargs(body), images)


def add_continue_marker(messages):
    """transformers: append the marker to the final message's content (to its
    last text part for lists). Returns (new messages, the text before)."""
    if not messages:
        raise RenderError("continue_final_message is set but there is no message")
    messages = copy.deepcopy(messages)
    final = messages[-1].get("content")
    if final is None:
        raise RenderError('continue_final_message is set but the final message has no "content" to continue!')
    if isinstance(final, list):
        for part in reversed(final):
            if "text" in part:
                text = part["text"]
                part["text"] = text + CONTINUE_TAG
                return messages, text
        raise RenderError("continue_final_message is set but we could not find any text to continue in the final message!")
    messages[-1]["content"] = final + CONTINUE_TAG
    return messages, final


def cut_at_continue_marker(prompt, final_text):
    """transformers: cut the render at the last marker, rstripped when the
    template changed the space after it."""
    bare = CONTINUE_TAG.strip()
    if final_text.strip() not in prompt or bare not in prompt:
        raise RenderError(
            "continue_final_message is set but the final message does not appear in the chat after applying the chat template!"
        )
    at = prompt.rindex(bare)
    if prompt[at : at + len(CONTINUE_TAG)] == CONTINUE_TAG:
        return prompt[:at]
    return prompt[:at].rstrip()


def template_variables(prepared, messages, tokens):
    """The variables in transformers' order: messages, tools, documents,
    add_generation_prompt, special tokens, then the kwargs (which may replace
    tools, documents and the special tokens)."""
    variables = {"messages": messages, "tools": prepared.tools, "documents": None}
    variables["add_generation_prompt"] = prepared.kwargs["add_generation_prompt"]
    variables.update(tokens)
    for key, value in prepared.kwargs.items():
        if key not in ("add_generation_prompt", "continue_final_message"):
            variables[key] = value
    return variables


def render_request(body_text, content_format, tokens, render):
    """Preprocess, render with render(variables) -> str, apply the continue
    marker. Returns (prompt, images, variables); raises Refused, RenderError
    or whatever render raises."""
    prepared = preprocess(body_text, content_format)
    messages = prepared.messages
    final_text = None
    if prepared.continue_final_message:
        messages, final_text = add_continue_marker(messages)
    variables = template_variables(prepared, messages, tokens)
    prompt = render(variables)
    if final_text is not None:
        prompt = cut_at_continue_marker(prompt, final_text)
    return prompt, prepared.images, variables


def canonical(value):
    """A typed, order-preserving text form of template variables, the same in
    vllm_preprocess.mjs: ints, floats (by their bits) and bools stay distinct."""
    if value is None:
        return "N"
    if value is True:
        return "T"
    if value is False:
        return "F"
    if isinstance(value, int):
        return "i" + str(value)
    if isinstance(value, float):
        return "f" + struct.pack(">d", value).hex()
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(canonical(x) for x in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canonical(v) for k, v in value.items()) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")
