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
    "NousResearch": ("<|begin_of_text|>", "<|im_end|>"),
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


# Constructs checked one by one against transformers' Jinja environment,
# rendered with SNIPPET_CONTEXT.
SNIPPET_CONTEXT = {"d": {"a": 1, "b": "x"}, "xs": [3, 1, 2], "s": "héllo wörld",
                   "ms": [{"role": "user", "c": 1}, {"role": "bot", "c": 2}]}
SNIPPETS = [
    "{{ u }}|{{ u|length }}|{{ u ~ 'a' }}|{{ 'a' in u }}|{{ u is none }}|{{ not u }}|{{ u|default('x') }}|{{ u|string }}|{{ u|trim }}",
    "{{ u.x }}", "{{ u['x'] }}", "{{ u + 'a' }}", "{{ u|tojson }}", "{% for x in u %}a{% endfor %}b",
    "{{ d.missing }}|{{ [1,'a',None,True,1.5,{'k':(1,2)}] }}|{{ 1e16 }} {{ 1e-5 }} {{ 0.1+0.2 }} {{ 7//2 }} {{ -7//2 }} {{ -7%3 }} {{ 7/2 }} {{ 2**10 }} {{ 'ab'*3 }}",
    "{{ [1,2].append(3) }}", "{{ 'x' ~ 1.0 ~ True ~ None }}", "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ [] |tojson(indent=2)}}",
    "{{ '\\u00e9\\n\\\"\\'' }}|{{ ['\\n', \"it's\", 'a\"b', 'é'] }}",
    "{{ 1 == 1.0 }} {{ True == 1 }} {{ 'a' < 'b' }} {{ [1,2] < [1,3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 5 }}",
    "{{ d.a.b }}", "{{ range(3)|list }} {{ (1,2) }} {{ range(1, 7, 2)|list }}",
    "{% if true %}\n  x\n  {% endif %}\n  {%- if true %}y{% endif %}  \n{# c #}\nz {{ 'v' }}\n",
    "a  {% if true -%}  \n b {%+ if true %} c{% endif %}{% endif %}",
    "  {% for x in xs %}\n    {{ x }}\n  {% endfor %}\n\t{#- c -#}\n end  {{- ' e ' -}}  !",
    "{{ 'abc'[::-1] }} {{ xs[1:] }} {{ xs[:-1] }} {{ xs[::2] }} {{ s[1] }} {{ s[-3:] }} {{ 'a,b'.split(',') }} {{ ' a '.strip() }} {{ 'Hello World'.title() }} {{ 'aXb'|lower }}",
    "{{ x if false }}|{{ 3 is integer }} {{ True is integer }} {{ True is number }} {{ 'a' is sequence }} {{ {} is sequence }} {{ {} is iterable }} {{ 3 is odd }}",
    "{{ 2.5|round }} {{ 3|round }} {{ -3|abs }} {{ 'x'|int }} {{ '3.7'|int }} {{ 3.0|int }} {{ 'a b'|capitalize }} {{ 2.567|round(2) }} {{ 2.5|round(0, 'floor') }}",
    "{{ raise_exception('boom') }}", "{{ nofilter|foo }}", "{% set x = 1 %}{% for i in [1,2] %}{% set x = i %}{% endfor %}{{ x }}",
    "{{ {'a':1}.get('b', 5) }} {{ {'a':1}.a }} {{ 'abc'.find('c') }} {{ s.find('w') }} {{ s|length }} {{ s.upper() }}",
    "{{ [1,2]|join(',') }} {{ 'abc'|list }} {{ 'abc'|first }} {{ [3,1]|last }} {{ xs|sort }} {{ xs|max }} {{ xs|min }} {{ xs|sum }} {{ [1,1,2]|unique|list }}",
    "{{ {'b':1,'a':[1,{'c':None}], 'e': [], 'f': {}}|tojson(indent=4) }}",
    "{{ 1.5e300*1e300 }} {{ (0.1)|string }} {{ 100000000000000000.0 }} {{ 1.23e-7 }} {{ 1/3 }} {{ -0.0 }} {{ 2.0**0.5 }}",
    "{% macro f(a, b='z') %}[{{ a }}{{ b }}]{% endmacro %}{{ f(1) }}{{ f(2, b=3) }}",
    "{% for k, v in d.items() %}{{ loop.index }}{{ k }}={{ v }}{{ loop.last }};{% else %}none{% endfor %}",
    "{% for x in xs if x > 1 %}{{ x }}/{{ loop.length }}/{{ loop.revindex }};{% endfor %}",
    "{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% if x == 1 %}{% break %}{% endif %}{% endfor %}",
    "{% set ns = namespace(n=0, l=[]) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% set ns.l = ns.l + [x] %}{% endfor %}{{ ns.n }} {{ ns.l }}",
    "{{ ms|selectattr('role', 'equalto', 'user')|list }} {{ ms|rejectattr('role', 'eq', 'user')|map(attribute='c')|list }} {{ ms|map(attribute='role')|join('+') }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t %}blk{{ a }}{% endset %}{{ t }}",
    "{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'x'|escape }}|{{ '<&>'|e }}",
    "{{ 'hi {} {}'.format(1, 'a') }} {{ 'a b  c'.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'xxhixx'.strip('x') }}",
    "{{ d['a'] }} {{ d.keys()|list }} {{ d.values()|list }} {{ d|length }} {{ 'a' in d }} {{ dict(x=1) }} {{ namespace(a=1).a }}",
    "{{ 'Hello'|replace('l', 'L', 1) }} {{ 'abc'|replace('', '-') }} {{ 'hello world'|title }} {{ 'hello-world x'|title }} {{ 'x'|float }} {{ '1e3'|float }}",
    "{{ 10 % 3 }} {{ -10 % 3 }} {{ 10.5 % 3 }} {{ -7.5 // 2 }} {{ 5 / 2 * 2 }} {{ 2 ** -1 }} {{ -2 ** 2 }} {{ not 1 == 2 }}",
    "{% if xs is defined and xs|length > 2 and xs[0] is number %}yes{% elif false %}no{% else %}else{% endif %}",
    "{{ xs|reverse|list }} {{ 'ab'|reverse }} {{ xs|length is even }} {{ none is not none }}",
    "{% with v = 5 %}{{ v }}{% endwith %}{{ v }}",
    "{% generation %}gen{% endgeneration %}",
    "{{ 1 / 0 }}", "{{ xs + 1 }}", "{% for a, b in xs %}{% endfor %}", "{{ 'a' < 1 }}", "{{ d.items }}x",
    "{% if %}", "{{ (1 }}", "{% for x in xs %}", "{% endif %}", "{{ 'unterminated }}", "{% include 'x' %}",
]


# Conversations as an OpenAI client sends them (tool-call arguments as JSON
# text, content null beside tool calls), rendered through the server's own
# conversion (render_cli "api") and, for the reference, the way vLLM hands
# them to transformers: content None -> "", arguments parsed into dicts
# (empty -> {}), tools as given.
def api_conversations():
    u = lambda c: {"role": "user", "content": c}  # noqa: E731
    call = lambda i, name, args: {"id": i, "type": "function",  # noqa: E731
                                  "function": {"name": name, "arguments": args}}
    tools2 = TOOLS + [{"type": "function", "function": {
        "name": "get_time", "description": "Current time in a zone",
        "parameters": {"type": "object", "properties": {
            "zone": {"type": "string", "enum": ["UTC", "CET"]}}, "required": []}}}]
    first = [{"role": "system", "content": "You can use tools."}, u("Weather in Paris, and the time?")]
    calls = {"role": "assistant", "content": None, "tool_calls": [
        call("call0abc9", "get_weather", "{\"city\": \"Paris\", \"days\": 2}"),
        call("call1xyz8", "get_time", "{\"zone\": \"CET\"}")]}
    results = [{"role": "tool", "tool_call_id": "call0abc9", "name": "get_weather",
                "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
               {"role": "tool", "tool_call_id": "call1xyz8", "name": "get_time",
                "content": "14:05"}]
    return {
        "api_tools_user": (first, tools2),
        "api_tool_calls": (first + [calls], tools2),
        "api_tool_results": (first + [calls] + results, tools2),
        "api_second_turn": (first + [calls] + results + [
            {"role": "assistant", "content": "Sunny, 21.5 °C; it is 14:05."},
            u("Thanks! And tomorrow?")], tools2),
        "api_content_and_call": ([u("Weather?"), {
            "role": "assistant", "content": "Checking.",
            "tool_calls": [call("call2abc7", "get_weather", "")]},
            {"role": "tool", "tool_call_id": "call2abc7", "content": "rain"}], TOOLS),
        "api_no_tools": ([u("Hi")], []),
    }


def vllm_view(messages):
    out = copy.deepcopy(messages)
    for m in out:
        if m.get("content") is None:
            m["content"] = ""
        for c in m.get("tool_calls") or []:
            a = c["function"].get("arguments")
            c["function"]["arguments"] = json.loads(a) if a else {}
    return out


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

    for path in sorted(pathlib.Path(args.templates).glob("*.jinja")):
        template = path.read_text(encoding="utf-8")
        bos, eos = next((v for k, v in SPECIAL.items() if path.stem.startswith(k)), ("<s>", "</s>"))
        for conv_name, (messages, tools) in api_conversations().items():
            for agp in (False, True):
                extra = {"tools": tools} if tools else {}
                expected = render_reference(template, vllm_view(messages), extra, agp, bos, eos)
                line = {"template": template,
                        "api": {"messages": messages, "tools": tools,
                                "add_generation_prompt": agp,
                                "bos_token": bos, "eos_token": eos},
                        "now": FIXED_NOW.strftime("%Y-%m-%dT%H:%M:%S")}
                cases.append((path.stem, conv_name, agp, expected, line))

    for i, snippet in enumerate(SNIPPETS):
        try:
            expected = (True, ctu._compile_jinja_template(snippet).render(**SNIPPET_CONTEXT))
        except Exception as e:
            expected = (False, f"{type(e).__name__}: {e}")
        if expected[0] and "<built-in method" in expected[1]:
            continue  # Python object reprs are not reproduced.
        cases.append(("snippets", f"#{i} {snippet!r}", False, expected,
                      {"template": snippet, "context": SNIPPET_CONTEXT}))

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
