#!/usr/bin/env python3
"""The OpenAI-compatible HTTP API (--http-listen) of the real inferd binary,
called by the real `openai` SDK (tests/service/http_openai_client.py, run
with the test venv's python) and by raw HTTP, checked against the same
server's gRPC answers (the same engines: the greedy texts and the
embedding floats must be identical):

- /v1/models, /v1/models/{id}; chat completions (string and text-part
  content, the developer role, streaming with usage, n = 3, a JSON Schema
  response_format whose output validates with `jsonschema`, logprobs);
  completions (plain and streamed); embeddings (base64, the SDK's default,
  and float with `dimensions`);
- errors: OpenAI's error object with the HTTP status of the gRPC code
  (unknown model 404, bad fields 400 naming them, tools 400, a model that
  cannot embed 400, a wrong key 401), invalid JSON, unknown routes;
- /health 200 once the models are ready.

usage: http_api_test.py --inferd BIN --stubs DIR --smollm2 GGUF --minilm DIR
       --venv-python PY
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import inferd_testlib as lib  # noqa: E402

KEY = "test-key-123"


def http(method, url, body=None, key=KEY):
    data = None if body is None else (
        body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


WEATHER_PARAMS = {
    "type": "object",
    "properties": {"city": {"type": "string", "enum": ["Paris", "Berlin", "Rome"]},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"], "additionalProperties": False}
TIME_PARAMS = {
    "type": "object",
    "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
    "required": ["zone"], "additionalProperties": False}
PARAMS = {"get_weather": WEATHER_PARAMS, "get_time": TIME_PARAMS}


def valid_calls(calls, jsonschema, only=None):
    """Every call names a tool and its arguments validate against its schema."""
    try:
        for t in calls:
            if only is not None and t["name"] != only:
                return False
            jsonschema.validate(json.loads(t["arguments"]), PARAMS[t["name"]])
        return True
    except Exception:  # noqa: BLE001
        return False


def check_tools(out, check, failures, jsonschema):
    for name, only in [("required", None), ("named", "get_weather")]:
        r = out[f"tools_{name}"]
        s = out[f"tools_{name}_stream"]
        check(r["finish"] == "tool_calls" and r["content"] is None and
              len(r["calls"]) >= 1 and valid_calls(r["calls"], jsonschema, only) and
              all(t["type"] == "function" and t["id"].startswith("call_")
                  for t in r["calls"]),
              f"tool_choice {name}: {r}")
        check(s["finish"] == "tool_calls" and s["content"] == "" and
              [(t["name"], t["arguments"]) for t in s["calls"]] ==
              [(t["name"], t["arguments"]) for t in r["calls"]] and
              s["firsts"] == list(range(len(s["calls"]))) and
              all(t["type"] == "function" and t["id"] for t in s["calls"]),
              f"tool_choice {name} streamed: {s} vs {r}")
    check(len(out["tools_single"]) == 1 and valid_calls(out["tools_single"], jsonschema),
          f"parallel_tool_calls false: {out['tools_single']}")
    n = out["tools_none"]
    check(n["calls"] == [] and isinstance(n["content"], str) and
          n["finish"] in ("stop", "length") and
          out["tools_none_stream"]["content"] == n["content"],
          f"tool_choice none: {n} / {out['tools_none_stream']}")
    a, s = out["tools_auto"], out["tools_auto_stream"]
    # Whatever the tiny model says, the answer is well-formed: calls with
    # JSON arguments and finish tool_calls, or content.
    if a["calls"]:
        check(a["finish"] == "tool_calls" and
              all(t["name"] and json.loads(t["arguments"]) is not None
                  for t in a["calls"]), f"tool_choice auto: {a}")
    else:
        check(isinstance(a["content"], str) and "<tool_call>" not in a["content"] and
              a["finish"] in ("stop", "length"), f"tool_choice auto: {a}")
    check(s["content"] == (a["content"] or "") and
          [(t["name"], t["arguments"]) for t in s["calls"]] ==
          [(t["name"], t["arguments"]) for t in a["calls"]],
          f"tool_choice auto streamed: {s} vs {a}")
    rt = out["tools_round_trip"]
    check(isinstance(rt["content"], str) and rt["finish"] in ("stop", "length") and
          rt["prompt_tokens"] > 0, f"tool result round trip: {rt}")


def check_tools_grpc(stub, pb, md, out, check, jsonschema):
    """The same tool requests over gRPC: the same calls as over HTTP."""
    import grpc

    def request(**choice):
        r = pb.GenerateRequest(model="llm")
        r.messages.add(role="user", content="What is the weather in Paris, in celsius?")
        r.sampling.max_tokens = 120
        r.sampling.temperature = 0
        for name, desc, params in [("get_weather", "The weather in a city", WEATHER_PARAMS),
                                   ("get_time", "The time in a zone", TIME_PARAMS)]:
            r.tools.add(name=name, description=desc, parameters=json.dumps(params))
        if "mode" in choice:
            r.tool_choice.mode = choice["mode"]
        else:
            r.tool_choice.function_name = choice["function"]
        return r

    for label, req, http in [
            ("required", request(mode=pb.TOOL_CHOICE_MODE_REQUIRED), out["tools_required"]),
            ("named", request(function="get_weather"), out["tools_named"])]:
        calls, text, finish, ids = {}, "", None, []
        for m in stub.Generate(req, metadata=md, timeout=300):
            text += m.text
            for t in m.tool_calls:
                cur = calls.setdefault(t.index, {"name": "", "arguments": ""})
                if t.id:
                    ids.append(t.id)
                    cur["name"] = t.name
                cur["arguments"] += t.arguments
            if m.finish_reason:
                finish = m.finish_reason
        got = [calls[i] for i in sorted(calls)]
        check(finish == pb.FINISH_REASON_TOOL_CALLS and text == "" and
              len(ids) == len(got) and
              got == [{"name": t["name"], "arguments": t["arguments"]}
                      for t in http["calls"]],
              f"gRPC tool_choice {label}: {got} finish {finish} vs HTTP {http}")
    # tool_choice auto parses the model's own format (hermes here): the
    # output forced by a regex, so the tiny model "calls" a tool; two
    # samples, each parsed on its own; the markup never reaches the text.
    forced = ('<think>\nThe user wants the time.\n</think>\n\nSure.\n<tool_call>\n'
              '{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>')
    req = request(mode=pb.TOOL_CHOICE_MODE_AUTO)
    req.response_format.regex = re.escape(forced)
    req.sampling.n = 2
    samples = {}
    for m in stub.Generate(req, metadata=md, timeout=300):
        s = samples.setdefault(m.sample_index, {"text": "", "reasoning": "", "calls": {},
                                                "finish": None})
        s["text"] += m.text
        s["reasoning"] += m.reasoning
        for t in m.tool_calls:
            cur = s["calls"].setdefault(t.index, {"id": "", "name": "", "arguments": ""})
            cur["id"] += t.id
            cur["name"] += t.name
            cur["arguments"] += t.arguments
        if m.finish_reason:
            s["finish"] = m.finish_reason
    for i in (0, 1):
        s = samples.get(i, {})
        calls = list(s.get("calls", {}).values())
        check(s.get("text") == "Sure." and
              s.get("reasoning") == "\nThe user wants the time.\n" and
              s.get("finish") == pb.FINISH_REASON_TOOL_CALLS and len(calls) == 1 and
              calls[0]["name"] == "get_time" and calls[0]["id"].startswith("call_") and
              json.loads(calls[0]["arguments"]) == {"zone": "UTC"},
              f"gRPC tool_choice auto (hermes) sample {i}: {s}")
    bad = request(function="nope")
    try:
        list(stub.Generate(bad, metadata=md, timeout=60))
        check(False, "gRPC: an undefined tool_choice function was accepted")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and
              "tool_choice.function_name" in e.details(),
              f"gRPC undefined function: {e.code()} {e.details()}")


REFERENCE = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
from transformers.utils import chat_template_utils as ctu
q = json.load(sys.stdin)
out, _ = ctu.render_jinja_template(conversations=[q["messages"]], tools=q["tools"],
                                   chat_template=q["template"],
                                   add_generation_prompt=True, **q["special"])
print(json.dumps(out[0]))
"""


def check_template_tools(stub, pb, md, check, venv_python, template, tok_config):
    """A tool conversation sent over gRPC renders (Tokenize's rendered_prompt)
    as transformers renders it after vLLM's preprocessing; the template alone
    picks the model's tool format and reasoning."""
    weather = {"type": "object", "properties": {"city": {"type": "string"}},
               "required": ["city"]}
    req = pb.TokenizeRequest(model="qwen3")
    req.messages.add(role="system", content="Use tools.")
    req.messages.add(role="user", content="Weather in Paris?")
    a = req.messages.add(role="assistant")
    a.tool_calls.add(id="call_1", name="get_weather", arguments='{"city": "Paris"}')
    req.messages.add(role="tool", tool_call_id="call_1", name="get_weather",
                     content='{"temp": 21}')
    req.messages.add(role="assistant", content="It is 21.",
                     reasoning_content="The tool said 21.")
    req.messages.add(role="user", content="And Rome?")
    req.tools.add(name="get_weather", description="The weather",
                  parameters=json.dumps(weather))
    got = stub.Tokenize(req, metadata=md, timeout=60).rendered_prompt
    ref_messages = [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": '{"temp": 21}', "tool_call_id": "call_1",
         "name": "get_weather"},
        {"role": "assistant", "content": "It is 21.",
         "reasoning_content": "The tool said 21."},
        {"role": "user", "content": "And Rome?"}]
    ref_tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather", "parameters": weather}}]
    p = subprocess.run([venv_python, "-c", REFERENCE], capture_output=True, text=True,
                       timeout=120, input=json.dumps({
                           "messages": ref_messages, "tools": ref_tools,
                           "template": template,
                           "special": {"bos_token": tok_config.get("bos_token") or "",
                                       "eos_token": tok_config.get("eos_token") or ""}}))
    want = json.loads(p.stdout) if p.returncode == 0 else p.stderr
    check(got == want and "<tools>" in got and '"arguments": {"city": "Paris"}' in got,
          f"Qwen3 template with tools over gRPC:\n{got!r}\n!= transformers:\n{want!r}")

    # No tool_parser= given: Qwen3's template says hermes and <think>.
    forced = ('<think>\nCheck Rome.\n</think>\n\n<tool_call>\n{"name": "get_weather", '
              '"arguments": {"city": "Rome"}}\n</tool_call>')
    gen = pb.GenerateRequest(model="qwen3")
    gen.messages.add(role="user", content="Weather in Rome?")
    gen.tools.add(name="get_weather", parameters=json.dumps(weather))
    gen.response_format.regex = re.escape(forced)
    gen.sampling.max_tokens = 200
    text, reasoning, calls, finish = "", "", [], None
    for m in stub.Generate(gen, metadata=md, timeout=300):
        text += m.text
        reasoning += m.reasoning
        calls += [(t.index, t.id, t.name, t.arguments) for t in m.tool_calls]
        if m.finish_reason:
            finish = m.finish_reason
    names = [c[2] for c in calls if c[2]]
    args = "".join(c[3] for c in calls)
    check(text == "" and reasoning == "\nCheck Rome.\n" and names == ["get_weather"] and
          json.loads(args or "null") == {"city": "Rome"} and
          finish == pb.FINISH_REASON_TOOL_CALLS,
          f"qwen3 auto (format from its template): {text!r} {reasoning!r} {calls} {finish}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--smollm2", required=True)
    ap.add_argument("--minilm", required=True)
    ap.add_argument("--venv-python", required=True)
    ap.add_argument("--test-models", required=True)
    ap.add_argument("--shared")  # passed to every TEST_MODELS test; unused
    a = ap.parse_args()
    sys.path.insert(0, a.stubs)
    import grpc
    import jsonschema
    from inferd.v1 import inference_pb2 as pb, inference_pb2_grpc as rpc

    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    # qwen3-tiny (random weights) with Qwen3's real chat template: its tool
    # format (hermes) and reasoning (<think>) come from the template alone.
    qwen_tmp = tempfile.TemporaryDirectory(prefix="inferd-qwen3-template-")
    qwen_dir = qwen_tmp.name
    src = os.path.join(a.test_models, "qwen3-tiny")
    for f in os.listdir(src):
        if f != "tokenizer_config.json":
            os.symlink(os.path.join(src, f), os.path.join(qwen_dir, f))
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        tok_config = json.load(f)
    with open(os.path.join(HERE, "..", "data", "chat_templates", "Qwen-Qwen3-0.6B.jinja"),
              encoding="utf-8") as f:
        qwen3_template = f.read()
    tok_config["chat_template"] = qwen3_template
    with open(os.path.join(qwen_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tok_config, f)
    # SmolLM2's template shows no tool format: tool_choice auto parses its
    # output as hermes (<tool_call>) by the per-model override.
    # and <think> text as reasoning by reasoning_parser=think.
    models = [("llm", a.smollm2 + ",tool_parser=hermes,reasoning_parser=think"),
              ("embedder", a.minilm),
              ("reranker", os.path.join(a.test_models, "xlmr-reranker")),
              ("qwen3", qwen_dir),
              ("plain", os.path.join(a.test_models, "qwen2-tiny"))]
    with lib.InferdProcess(a.inferd, models, log_prefix="inferd-http-",
                           extra=["--http-listen", "127.0.0.1:0",
                                  "--api-key", KEY]) as srv:
        base = f"http://127.0.0.1:{srv.http_port}"
        # /health (no key needed) says 503 until every model is ready, 200
        # after; the log says when they are.
        st, health = http("GET", base + "/health", key=None)
        check(st in (200, 503), f"/health: {st} {health}")
        srv.wait_for(r"(\d+) of \d+ model\(s\) ready after", timeout=300)
        st, health = http("GET", base + "/health", key=None)
        check(st == 200 and health["status"] == "ok" and
              health["models"] == {"llm": "ready", "embedder": "ready",
                                   "reranker": "ready", "qwen3": "ready",
                                   "plain": "ready"},
              f"/health once ready: {st} {health}")

        # The same requests over gRPC, for reference.
        stub = rpc.InferenceStub(grpc.insecure_channel(srv.address))
        md = [("authorization", f"Bearer {KEY}")]

        def grpc_text(req):
            return "".join(c.text for c in stub.Generate(req, metadata=md,
                                                         timeout=300))
        chat = pb.GenerateRequest(model="llm")
        chat.messages.add(role="system", content="You are a helpful assistant.")
        chat.messages.add(role="user", content="What is the capital of France?")
        chat.sampling.max_tokens = 24
        chat.sampling.temperature = 0
        want_chat = grpc_text(chat)
        comp = pb.GenerateRequest(model="llm", prompt="Once upon a time")
        comp.sampling.max_tokens = 16
        comp.sampling.temperature = 0
        want_comp = grpc_text(comp)
        texts = ["A man is playing a guitar.", "The weather is cold today."]
        emb = stub.EmbedBatch(pb.EmbedRequest(model="embedder", texts=texts),
                              metadata=md, timeout=300)
        want_emb = [list(e.values) for e in emb.embeddings]
        emb8 = stub.EmbedBatch(pb.EmbedRequest(model="embedder", texts=texts[:1],
                                               dimensions=8),
                               metadata=md, timeout=300)

        p = subprocess.run([a.venv_python, os.path.join(HERE, "http_openai_client.py"),
                            base + "/v1", KEY, "llm", "embedder"],
                           capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            print(p.stdout, p.stderr)
            print("FAIL: the openai client failed")
            return 1
        out = json.loads(p.stdout)
        print(json.dumps(out)[:3000])
        print(json.dumps({k: v for k, v in out.items() if k.startswith("tool")}))

        check(out["models"] == ["embedder", "llm", "plain", "qwen3", "reranker"],
              f"models: {out['models']}")
        check(out["model"] == "llm", f"models.retrieve: {out['model']}")
        c = out["chat"]
        check(c["text"] == want_chat, f"chat text {c['text']!r} != gRPC {want_chat!r}")
        check(c["role"] == "assistant" and c["object"] == "chat.completion",
              f"chat shape: {c}")
        check(c["finish"] in ("stop", "length"), f"chat finish: {c['finish']}")
        pt, ct, tt = c["usage"]
        check(pt > 0 and ct > 0 and tt == pt + ct, f"chat usage: {c['usage']}")
        check(out["chat_parts"] == want_chat,
              f"text parts / developer role: {out['chat_parts']!r} != {want_chat!r}")
        s = out["stream"]
        check(s["text"] == want_chat, f"stream text {s['text']!r} != {want_chat!r}")
        check(s["pieces"] > 1 and s["roles"] == ["assistant"],
              f"stream chunks: {s}")
        check(s["finish"] == c["finish"] and s["usage"] == [pt, ct],
              f"stream finish/usage: {s} vs {c}")
        check(out["n3"] == [0, 1, 2], f"n=3 choices: {out['n3']}")
        schema = {"type": "object",
                  "properties": {"name": {"type": "string", "maxLength": 20},
                                 "age": {"type": "integer", "minimum": 0,
                                         "maximum": 30}},
                  "required": ["name", "age"], "additionalProperties": False}
        try:
            jsonschema.validate(json.loads(out["json_schema"]), schema)
        except Exception as e:  # noqa: BLE001
            failures.append(f"json_schema output {out['json_schema']!r}: {e}")
        lp = out["logprobs"]
        check(len(lp) == 4 and all(t[1] <= 0 and t[2] == 2 for t in lp),
              f"logprobs: {lp}")
        content, joined, bytes_ok = out["logprobs_text"]
        check(joined == content and bytes_ok,
              f"chat logprobs tokens are the decoded text: {out['logprobs_text']}")
        cl = out["completion_logprobs"]
        offsets = [sum(len(t) for t in cl["tokens"][:k])
                   for k in range(len(cl["tokens"]))]
        check("".join(cl["tokens"]) == cl["text"] and
              len(cl["tokens"]) == 8 and cl["text_offset"] == offsets and
              all(t <= 0 for t in cl["token_logprobs"]) and
              all(1 <= n <= 2 for n in cl["top"]),
              f"completions logprobs (legacy shape): {cl}")
        check(out["completion"]["text"] == want_comp and
              out["completion"]["object"] == "text_completion",
              f"completion {out['completion']} != gRPC {want_comp!r}")
        check(out["completion_stream"] == want_comp,
              f"streamed completion {out['completion_stream']!r} != {want_comp!r}")
        check(out["embeddings"] == want_emb,
              "embeddings over HTTP (base64) differ from gRPC's floats")
        check(out["embeddings_usage"] > 0, f"embedding usage {out['embeddings_usage']}")
        check(out["embedding_dims8"] == list(emb8.embeddings[0].values),
              f"dimensions=8: {out['embedding_dims8']}")
        for name, status, cls, word in [
                ("unknown_model", 404, "NotFoundError", "no-such-model"),
                ("bad_n", 400, "BadRequestError", "n"),
                # Messages name the fields as the request sent them.
                ("tool_choice_undefined", 400, "BadRequestError", "tool_choice: 'nope'"),
                ("tool_parameters_not_object", 400, "BadRequestError",
                 "tools[0].function.parameters"),
                ("tool_parameters_unsupported", 400, "BadRequestError", "tools"),
                ("tool_choice_without_tools", 400, "BadRequestError", "tool_choice"),
                ("tool_call_on_user_message", 400, "BadRequestError", "messages[0].tool_calls"),
                ("bad_temperature", 400, "BadRequestError", "temperature"),
                ("embed_with_llm_only_model", 400, "BadRequestError", "embed"),
                ("bad_key", 401, "AuthenticationError", "API key")]:
            e = out[name]
            check(e["error"] == cls and e["status"] == status and
                  word in e["message"],
                  f"{name}: want {status} {cls} naming {word!r}, got {e}")

        check_tools(out, check, failures, jsonschema)
        check_tools_grpc(stub, pb, md, out, check, jsonschema)
        check_template_tools(stub, pb, md, check, a.venv_python, qwen3_template,
                             tok_config)

        # A model whose template shows no tool format (and no tool_parser=)
        # takes the generic format: the tools described in a system turn,
        # the output constrained to a JSON array of calls or text. Under
        # auto this random model writes one or the other, whole; required
        # is a call (one: else this random model would call until
        # max_tokens); none is plain content.
        tool = {"type": "function", "function": {
            "name": "f", "parameters": {"type": "object", "properties": {
                "x": {"type": "integer", "minimum": 0, "maximum": 9}},
                "required": ["x"], "additionalProperties": False}}}
        plain = {"model": "plain", "messages": [{"role": "user", "content": "hi"}],
                 "tools": [tool], "max_tokens": 300, "temperature": 0}
        st, body = http("POST", base + "/v1/chat/completions",
                        dict(plain, parallel_tool_calls=False))
        msg = body["choices"][0]["message"] if st == 200 else {}
        if msg.get("tool_calls"):
            check(body["choices"][0]["finish_reason"] == "tool_calls" and
                  msg["tool_calls"][0]["function"]["name"] == "f" and
                  0 <= json.loads(msg["tool_calls"][0]["function"]["arguments"])["x"] <= 9,
                  f"auto, generic format, a call: {st} {body}")
        else:
            check(st == 200 and isinstance(msg.get("content"), str) and
                  msg["content"][:1] not in ("[", "{", "", " ", "\n"),
                  f"auto, generic format, an answer: {st} {body}")
        st, body = http("POST", base + "/v1/chat/completions",
                        dict(plain, tool_choice="required",
                             parallel_tool_calls=False))
        calls = body.get("choices", [{}])[0].get("message", {}).get("tool_calls") \
            if st == 200 else None
        check(st == 200 and body["choices"][0]["finish_reason"] == "tool_calls" and
              calls and calls[0]["function"]["name"] == "f" and
              0 <= json.loads(calls[0]["function"]["arguments"])["x"] <= 9,
              f"required without a known format: {st} {body}")
        st, body = http("POST", base + "/v1/chat/completions",
                        dict(plain, tool_choice="none"))
        check(st == 200 and "tool_calls" not in body["choices"][0]["message"] and
              isinstance(body["choices"][0]["message"]["content"], str),
              f"none without a known format: {st} {body}")

        # Raw HTTP: the error object's shape.
        st, body = http("POST", base + "/v1/chat/completions", b"{not json")
        check(st == 400 and body["error"]["type"] == "invalid_request_error" and
              "JSON" in body["error"]["message"], f"bad JSON: {st} {body}")
        st, body = http("GET", base + "/v1/nothing")
        check(st == 404 and "no route" in body["error"]["message"],
              f"unknown route: {st} {body}")
        st, body = http("GET", base + "/v1/models", key=None)
        check(st == 401 and body["error"]["type"] == "authentication_error",
              f"no key: {st} {body}")
        st, body = http("POST", base + "/v1/chat/completions",
                        {"model": "llm", "messages": [{"role": "user",
                                                       "content": 5}]})
        check(st == 400 and body["error"]["message"].startswith(
            "messages[0].content"), f"bad content: {st} {body}")

        # Completions with echo: the prompt, then the same completion.
        st, body = http("POST", base + "/v1/completions",
                        {"model": "llm", "prompt": "Once upon a time",
                         "max_tokens": 16, "temperature": 0, "echo": True})
        check(st == 200 and body["choices"][0]["text"] ==
              "Once upon a time" + want_comp, f"echo: {st} {body}")
        ids = list(stub.Tokenize(pb.TokenizeRequest(
            model="llm", text="Once upon a time", add_special_tokens=False),
            metadata=md, timeout=60).token_ids)
        st, body = http("POST", base + "/v1/completions",
                        {"model": "llm", "prompt": ids, "max_tokens": 16,
                         "temperature": 0, "echo": True})
        check(st == 200 and body["choices"][0]["text"] ==
              "Once upon a time" + want_comp, f"echo of token ids: {st} {body}")
        req = urllib.request.Request(
            base + "/v1/completions", method="POST",
            data=json.dumps({"model": "llm", "prompt": "Once upon a time",
                             "max_tokens": 16, "temperature": 0,
                             "echo": True, "stream": True}).encode())
        req.add_header("Content-Type", "application/json")
        req.add_header("Authorization", f"Bearer {KEY}")
        streamed = ""
        with urllib.request.urlopen(req, timeout=120) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("data: {"):
                    for ch in json.loads(line[6:])["choices"]:
                        streamed += ch["text"]
        check(streamed == "Once upon a time" + want_comp,
              f"streamed echo: {streamed!r}")
        # Echo with logprobs (evaluation harnesses' loglikelihood): the
        # prompt's tokens lead the logprobs, the first with null, the others
        # equal to gRPC's prompt_logprobs; max_tokens 0 answers the prompt
        # alone.
        plp = pb.GenerateRequest(model="llm", prompt="Once upon a time")
        plp.sampling.max_tokens = 1
        plp.sampling.temperature = 0
        plp.sampling.prompt_logprobs = 2
        first = next(iter(stub.Generate(plp, metadata=md, timeout=300)))
        want_plp = [(e.sampled.token_id, e.sampled.logprob)
                    for e in first.prompt_logprobs]
        for max_tokens in (0, 4):
            st, body = http("POST", base + "/v1/completions",
                            {"model": "llm", "prompt": "Once upon a time",
                             "max_tokens": max_tokens, "temperature": 0,
                             "echo": True, "logprobs": 2})
            ok = st == 200
            if ok:
                c, u = body["choices"][0], body["usage"]
                lp = c["logprobs"]
                n_prompt = u["prompt_tokens"]
                ok = (c["text"].startswith("Once upon a time") and
                      (max_tokens > 0 or c["text"] == "Once upon a time") and
                      u["completion_tokens"] == max_tokens and
                      len(lp["tokens"]) == n_prompt + max_tokens and
                      n_prompt == len(want_plp) + 1 and
                      lp["token_logprobs"][0] is None and
                      lp["top_logprobs"][0] is None and
                      all(abs(a - b) < 1e-6 for a, (_, b) in
                          zip(lp["token_logprobs"][1:n_prompt], want_plp)) and
                      all(len(t) <= 2 for t in lp["top_logprobs"][1:]) and
                      lp["text_offset"] == sorted(lp["text_offset"]) and
                      (max_tokens == 0 or
                       c["text"] == "Once upon a time" + want_comp[:len(
                           c["text"]) - len("Once upon a time")]))
            check(ok, f"echo + logprobs, max_tokens {max_tokens}: {st} {body}")
        st, body = http("POST", base + "/v1/completions",
                        {"model": "llm", "prompt": "x", "echo": True,
                         "logprobs": 1, "stream": True})
        check(st == 400 and body["error"]["param"] == "stream",
              f"streamed echo with logprobs: {st} {body}")
        st, body = http("POST", base + "/v1/completions",
                        {"model": "llm", "prompt": "x", "max_tokens": 0})
        check(st == 400 and body["error"]["param"] == "max_tokens",
              f"max_tokens 0 without echo: {st} {body}")

        # Rerank, tokenize and detokenize, against the same gRPC calls.
        query = "what plays music?"
        docs = ["A man is playing a guitar.", "The weather is cold today.",
                "Someone strums a guitar."]
        want = stub.Rerank(pb.RerankRequest(model="reranker", query=query,
                                            documents=docs, top_n=2,
                                            return_documents=True),
                           metadata=md, timeout=300)
        st, body = http("POST", base + "/v1/rerank",
                        {"model": "reranker", "query": query,
                         "documents": docs, "top_n": 2})
        check(st == 200 and [r["index"] for r in body["results"]] ==
              [r.index for r in want.results] and
              [r["relevance_score"] for r in body["results"]] ==
              [r.score for r in want.results] and
              [r["document"]["text"] for r in body["results"]] ==
              [docs[r.index] for r in want.results] and
              body["model"] == "reranker" and
              body["usage"]["total_tokens"] == want.usage.total_tokens,
              f"/v1/rerank: {st} {body} vs gRPC {want}")
        want_all = stub.Rerank(pb.RerankRequest(model="reranker", query=query,
                                                documents=docs, raw_scores=True),
                               metadata=md, timeout=300)
        st, body = http("POST", base + "/rerank",
                        {"model": "reranker", "query": query, "texts": docs,
                         "raw_scores": True})
        check(st == 200 and isinstance(body, list) and
              [(r["index"], r["score"]) for r in body] ==
              [(r.index, r.score) for r in want_all.results] and
              all("text" not in r for r in body),
              f"TEI /rerank: {st} {body} vs gRPC {want_all}")
        st, body = http("POST", base + "/v1/rerank",
                        {"model": "reranker", "query": query})
        check(st == 400 and body["error"]["param"] == "documents",
              f"rerank without documents: {st} {body}")
        tok = stub.Tokenize(pb.TokenizeRequest(model="llm", text="Hello there"),
                            metadata=md, timeout=60)
        st, body = http("POST", base + "/tokenize",
                        {"model": "llm", "prompt": "Hello there",
                         "return_token_strs": True})
        check(st == 200 and body["tokens"] == list(tok.token_ids) and
              body["count"] == len(tok.token_ids) and
              body["token_strs"] == list(tok.tokens) and
              body["max_model_len"] > 0, f"/tokenize: {st} {body} vs {tok}")
        treq = pb.TokenizeRequest(model="llm")
        treq.messages.add(role="user", content="Hi")
        tok_chat = stub.Tokenize(treq, metadata=md, timeout=60)
        st, body = http("POST", base + "/tokenize",
                        {"model": "llm",
                         "messages": [{"role": "user", "content": "Hi"}]})
        check(st == 200 and body["tokens"] == list(tok_chat.token_ids),
              f"/tokenize messages: {st} {body} vs {tok_chat}")
        det = stub.Detokenize(pb.DetokenizeRequest(model="llm",
                                                   token_ids=tok.token_ids),
                              metadata=md, timeout=60)
        st, body = http("POST", base + "/detokenize",
                        {"model": "llm", "tokens": list(tok.token_ids)})
        check(st == 200 and body["prompt"] == det.text == "Hello there",
              f"/detokenize: {st} {body} vs {det}")
        st, body = http("POST", base + "/detokenize",
                        {"model": "llm", "tokens": ["x"]})
        check(st == 400 and body["error"]["param"] == "tokens",
              f"/detokenize bad ids: {st} {body}")
        st, body = http("POST", base + "/tokenize",
                        {"model": "nope", "prompt": "x"})
        check(st == 404, f"/tokenize unknown model: {st} {body}")

    if failures:
        print(f"{len(failures)} failure(s):")
        for f in failures:
            print("  " + f)
        return 1
    print("HTTP API: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
