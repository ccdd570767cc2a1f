#!/usr/bin/env python3
"""Differential test: inferd's chat template renderer (runtime/chat) against
transformers' own (transformers.utils.chat_template_utils.render_jinja_template,
the function behind apply_chat_template(..., tokenize=False)).

Every real template in tests/data/chat_templates is rendered for a set of
conversations (with add_generation_prompt false and true); the texts must be
equal byte for byte, and where transformers raises (e.g. role alternation
checks), inferd must return an error too.
"""
import argparse
import copy
import datetime as _dt
import json
import pathlib
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore")

from transformers.utils import chat_template_utils as ctu  # noqa: E402

FIXED_NOW = _dt.datetime(2025, 3, 7, 14, 5, 9)


class _FixedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_NOW


# strftime_now() in transformers calls the module's datetime.now().
ctu.datetime = _FixedDatetime

SPECIAL = {
    "SmolLM2": ("<|im_start|>", "<|im_end|>"),
    "meta-llama": ("<|begin_of_text|>", "<|eot_id|>"),
    "Qwen": ("", "<|im_end|>"),
    "mistralai": ("<s>", "</s>"),
    "google-gemma": ("<bos>", "<eos>"),
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather for a city — «unicode» \"quoted\"",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
                },
                "required": ["city"],
            },
        },
    }
]


def conversations():
    sys_msg = {"role": "system", "content": "You are a terse assistant."}
    u = lambda c: {"role": "user", "content": c}  # noqa: E731
    a = lambda c: {"role": "assistant", "content": c}  # noqa: E731
    convs = {
        "system_user": ([sys_msg, u("Hello!")], {}),
        "user_only": ([u("What is 2+2?")], {}),
        "multi_turn": ([u("Hi"), a("Hello, how can I help?"), u("Tell me a joke.")], {}),
        "system_multi_turn": (
            [sys_msg, u("One"), a("Two"), u("Three"), a("Four")], {}),
        "unicode": ([u("héllo 世界 🙂 — ünïcödé\u00a0nbsp")], {}),
        "newlines": ([sys_msg, u("line1\nline2\n\n  indented\ttab\n"), a("\nok\n"),
                      u("  padded  ")], {}),
        "quotes": ([u("He said \"hi\" and 'bye' \\ backslash {{ not jinja }} {% x %}")], {}),
        "empty_content": ([u(""), a(""), u("")], {}),
        "assistant_first": ([a("I start."), u("ok")], {}),
        "two_users": ([u("a"), u("b")], {}),
        "empty_conversation": ([], {}),
        "tools": ([sys_msg, u("Weather in Paris?")], {"tools": TOOLS}),
        "tools_no_system": ([u("Weather in Paris?")], {"tools": TOOLS}),
        "tool_call_round": (
            [u("Weather in Paris?"),
             {"role": "assistant", "content": "",
              "tool_calls": [{"id": "call0abc9", "type": "function",
                              "function": {"name": "get_weather",
                                           "arguments": {"city": "Paris", "days": 2}}}]},
             {"role": "tool", "name": "get_weather", "tool_call_id": "call0abc9",
              "content": "{\"temp\": 21.5}"},
             ], {"tools": TOOLS}),
        "reasoning": (
            [u("Why?"), {"role": "assistant", "content": "Because.",
                         "reasoning_content": "Let me think\nabout it."},
             u("And then?")], {}),
        "thinking_off": ([u("Quick answer please")], {"enable_thinking": False}),
        "system_list_content_free": ([sys_msg, u("x"), a("y"), u("z")],
                                     {"date_string": "01 Jan 2024"}),
    }
    return convs


def render_reference(template, messages, extra, agp, bos, eos):
    kwargs = dict(extra)
    tools = kwargs.pop("tools", None)
    try:
        rendered, _ = ctu.render_jinja_template(
            conversations=[copy.deepcopy(messages)], tools=tools,
            chat_template=template, add_generation_prompt=agp,
            bos_token=bos, eos_token=eos, **kwargs)
        return True, rendered[0]
    except Exception as e:  # any exception is an error outcome
        return False, f"{type(e).__name__}: {e}"


def context_for(messages, extra, agp, bos, eos):
    # What transformers puts in front of the template (render_jinja_template):
    # reasoning fields aliased, tools/documents defaulting to None.
    ctx = {"messages": ctu._alias_reasoning_fields(copy.deepcopy(messages))}
    kwargs = dict(extra)
    ctx["tools"] = kwargs.pop("tools", None)
    ctx["documents"] = None
    ctx["add_generation_prompt"] = agp
    ctx["bos_token"] = bos
    ctx["eos_token"] = eos
    ctx.update(kwargs)
    return ctx


def check_smollm2_template(templates_dir, models_dir):
    gguf_path = pathlib.Path(models_dir) / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not gguf_path.exists():
        print(f"note: {gguf_path} absent; not re-checking the stored SmolLM2 template")
        return True
    import gguf
    reader = gguf.GGUFReader(str(gguf_path))
    field = reader.fields["tokenizer.chat_template"]
    text = bytes(field.parts[field.data[0]]).decode("utf-8")
    stored = (pathlib.Path(templates_dir) / "SmolLM2-135M-Instruct.jinja").read_text(encoding="utf-8")
    if text != stored:
        print("FAIL: SmolLM2-135M-Instruct.jinja differs from the GGUF's tokenizer.chat_template")
        return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--templates", required=True)
    ap.add_argument("--models", default="")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    ok = check_smollm2_template(args.templates, args.models) if args.models else True
    cases = []
    for path in sorted(pathlib.Path(args.templates).glob("*.jinja")):
        template = path.read_text(encoding="utf-8")
        bos, eos = next((v for k, v in SPECIAL.items() if path.stem.startswith(k)), ("<s>", "</s>"))
        for conv_name, (messages, extra) in conversations().items():
            for agp in (False, True):
                expected = render_reference(template, messages, extra, agp, bos, eos)
                line = {"template": template,
                        "context": context_for(messages, extra, agp, bos, eos),
                        "now": FIXED_NOW.strftime("%Y-%m-%dT%H:%M:%S")}
                cases.append((path.stem, conv_name, agp, expected, line))

    proc = subprocess.run([args.cli], input="".join(json.dumps(c[4], ensure_ascii=False) + "\n" for c in cases),
                          capture_output=True, text=True, encoding="utf-8", timeout=240)
    if proc.returncode != 0:
        print("render_cli failed:", proc.stderr)
        return 1
    outputs = [json.loads(l) for l in proc.stdout.splitlines()]
    if len(outputs) != len(cases):
        print(f"render_cli gave {len(outputs)} answers for {len(cases)} inputs")
        return 1

    summary = {}
    for (name, conv, agp, (exp_ok, exp), _), got in zip(cases, outputs):
        s = summary.setdefault(name, {"compared": 0, "match": 0, "errors_both": 0})
        s["compared"] += 1
        if exp_ok and got["ok"] and got["text"] == exp:
            s["match"] += 1
        elif not exp_ok and not got["ok"] and (
                not exp.startswith("TemplateError: ")
                or exp[len("TemplateError: "):] in got["error"]):
            # raise_exception(msg) must surface msg itself.
            s["match"] += 1
            s["errors_both"] += 1
            if args.verbose:
                print(f"  {name}/{conv}/agp={agp}: error in both: ref={exp!r} inferd={got['error']!r}")
        else:
            ok = False
            print(f"MISMATCH {name} / {conv} / add_generation_prompt={agp}")
            print("  transformers:", "ok" if exp_ok else "error", repr(exp)[:2000])
            print("  inferd:      ", "ok" if got["ok"] else "error",
                  repr(got.get("text", got.get("error")))[:2000])
    for name, s in summary.items():
        print(f"{name}: {s['match']}/{s['compared']} conversations match "
              f"({s['errors_both']} are errors in both)")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
