#!/usr/bin/env python3
"""Renders chat templates with jinja2 the way Hugging Face transformers does, over a set of
conversations, and writes one JSON line per case (template, conversation, settings, and the
expected text or the error). tests/chat_template_parity.sh feeds these cases to our renderer.

usage: chat_template_oracle.py OUT.jsonl TOKENIZER_CONFIG.json... TEMPLATE.jinja...
(a .jinja file is rendered with bos_token "<s>" and eos_token "</s>")
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


# transformers' chat-template environment (transformers/utils/chat_template_utils.py).
def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception
ENV.globals["strftime_now"] = strftime_now

SPECIAL = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


def token_text(t):
    if isinstance(t, str):
        return t
    if isinstance(t, dict) and isinstance(t.get("content"), str):
        return t["content"]
    return None


def special_tokens(config):
    out = {}
    for key in SPECIAL:
        t = token_text(config.get(key))
        if t is not None:
            out[key] = t
    if isinstance(config.get("additional_special_tokens"), list):
        out["additional_special_tokens"] = [s for s in map(token_text, config["additional_special_tokens"]) if s is not None]
    return out


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "description": "Local time.", "parameters": {
    "type": "object", "properties": {"tz": {"type": "string"}}, "required": []}}}


def call(name, args, as_string=False, with_id=True):
    c = {"type": "function", "function": {"name": name, "arguments": json.dumps(args) if as_string else args}}
    if with_id:
        c["id"] = "call_" + name
    return c


CONVERSATIONS = {
    "user": ([{"role": "user", "content": "Hello! How are you?"}], None),
    "system_user": ([{"role": "system", "content": "You are a helpful assistant."},
                     {"role": "user", "content": "What is 2 + 2?"}], None),
    "multi_turn": ([{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hi there"},
                    {"role": "assistant", "content": "Hello. How can I help?"},
                    {"role": "user", "content": "Tell me a joke."}], None),
    "ends_with_assistant": ([{"role": "user", "content": "Name a color."},
                             {"role": "assistant", "content": "Blue."},
                             {"role": "user", "content": "Another?"},
                             {"role": "assistant", "content": "Green."}], None),
    "whitespace_unicode": ([{"role": "user", "content": "  café ☕ — 你好, naïve Zürich!  \n\n"},
                            {"role": "assistant", "content": "\n  Grüße 👋 \"quoted\" and 'single' \\ back\tslash\n"},
                            {"role": "user", "content": "\tOK? "}], None),
    "thinking_history": ([{"role": "user", "content": "What is 3 * 4?"},
                          {"role": "assistant", "content": "<think>\nThree fours.\n</think>\n\n12"},
                          {"role": "user", "content": "And 5 * 6?"}], None),
    "reasoning_field": ([{"role": "user", "content": "Why is the sky blue?"},
                         {"role": "assistant", "content": "Rayleigh scattering.", "reasoning_content": "Short wavelengths scatter."},
                         {"role": "user", "content": "Thanks"}], None),
    "tools": ([{"role": "system", "content": "You can call tools."},
               {"role": "user", "content": "Weather in Paris?"},
               {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"city": "Paris", "unit": "celsius"})]},
               {"role": "tool", "content": "{\"temp\": 21}"},
               {"role": "assistant", "content": "It is 21 °C in Paris."},
               {"role": "user", "content": "And the time?"}], [WEATHER, TIME]),
    "tool_args_string": ([{"role": "user", "content": "Weather in Zürich?"},
                          {"role": "assistant", "content": None, "tool_calls": [call("get_weather", {"city": "Zürich"}, as_string=True)]},
                          {"role": "tool", "content": "sunny"}], [WEATHER]),
    "parallel_tools": ([{"role": "user", "content": "Weather and time in Rome?"},
                        {"role": "assistant", "content": "Checking.", "tool_calls": [
                            call("get_weather", {"city": "Rome"}), call("get_time", {"tz": "Europe/Rome"})]},
                        {"role": "tool", "content": "cloudy"},
                        {"role": "tool", "content": "14:05"},
                        {"role": "assistant", "content": "Cloudy, and it is 14:05."}], [WEATHER, TIME]),
    "tools_no_system": ([{"role": "user", "content": "Hi"}], [WEATHER]),
    "content_parts": ([{"role": "system", "content": [{"type": "text", "text": "Look carefully."}]},
                       {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " Describe this. "}]}], None),
    "not_alternating": ([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}], None),
    "empty": ([], None),
}

EXTRAS = [{}, {"enable_thinking": False}, {"enable_thinking": True}]


def main():
    out_path, sources = sys.argv[1], sys.argv[2:]
    cases = []
    for src in sources:
        if src.endswith(".json"):
            with open(src, encoding="utf-8") as f:
                config = json.load(f)
            ref = {"config_path": src}
        else:
            with open(src, encoding="utf-8") as f:
                config = {"chat_template": f.read(), "bos_token": "<s>", "eos_token": "</s>"}
            ref = {"config": config}
        template = ENV.from_string(config["chat_template"])
        tokens = special_tokens(config)
        for name, (messages, tools) in CONVERSATIONS.items():
            for add_generation_prompt in (True, False):
                for extra in EXTRAS:
                    case = dict(ref, id=f"{src.split('/')[-3] if src.endswith('.json') else src.split('/')[-1]}/{name}"
                                f"/gen={int(add_generation_prompt)}/{json.dumps(extra)}",
                                messages=messages, tools=tools, add_generation_prompt=add_generation_prompt, extra=extra)
                    try:
                        case["expected"] = template.render(messages=messages, tools=tools, documents=None,
                                                           add_generation_prompt=add_generation_prompt, **tokens, **extra)
                    except Exception as e:  # the renderer must fail too
                        case["error"] = f"{type(e).__name__}: {e}"
                    cases.append(case)
    with open(out_path, "w", encoding="utf-8") as f:
        for c in cases:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    print(f"jinja2 {jinja2.__version__}: {len(cases)} cases, {sum('error' in c for c in cases)} of them errors")


if __name__ == "__main__":
    main()
