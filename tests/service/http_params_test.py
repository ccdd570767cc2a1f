#!/usr/bin/env python3
"""Every request field of the HTTP front end, sent wrong: each answer is
OpenAI's error object with the right HTTP status and `param` naming the
field as the request sent it (`max_tokens`, `tools[0].function.parameters`,
`input`), whichever layer found the error (the body reader, the request
layer, the sampling ranges, the engine's input processor). The message
names the same field when it starts with one.

usage: http_params_test.py --inferd BIN --stubs DIR --test-models DIR
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import inferd_testlib as lib  # noqa: E402

# More tokens than --max-input-tokens allows.
LONG = " ".join(["word"] * 200)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}


def chat(**fields):
    body = {"model": "llm", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4}
    body.update(fields)
    return body


def completion(**fields):
    body = {"model": "llm", "prompt": "hi", "max_tokens": 4}
    body.update(fields)
    return body


def embed(**fields):
    body = {"model": "embedder", "input": "hi"}
    body.update(fields)
    return body


def rerank(**fields):
    body = {"model": "reranker", "query": "q", "documents": ["a", "b"]}
    body.update(fields)
    return body


def tei(**fields):
    body = {"model": "reranker", "query": "q", "texts": ["a", "b"]}
    body.update(fields)
    return body


def without(body, key):
    body = dict(body)
    del body[key]
    return body


ASSISTANT_CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function",
     "function": {"name": "get_weather", "arguments": "{}"}}]}


def assistant_call(**function):
    call = {"id": "c1", "type": "function",
            "function": dict({"name": "get_weather", "arguments": "{}"},
                             **function)}
    return [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call]}]


# (label, route, body, HTTP status, param)
CASES = [
    # --- chat: the body reader
    ("chat model not a string", "/v1/chat/completions", chat(model=5), 400, "model"),
    ("chat unknown model", "/v1/chat/completions", chat(model="nope"), 404, "model"),
    ("chat model cannot generate", "/v1/chat/completions", chat(model="embedder"),
     400, "model"),
    ("messages missing", "/v1/chat/completions", without(chat(), "messages"),
     400, "messages"),
    ("messages empty", "/v1/chat/completions", chat(messages=[]), 400, "messages"),
    ("message not an object", "/v1/chat/completions", chat(messages=["hi"]),
     400, "messages[0]"),
    ("message content a number", "/v1/chat/completions",
     chat(messages=[{"role": "user", "content": 5}]), 400, "messages[0].content"),
    ("message content part not text", "/v1/chat/completions",
     chat(messages=[{"role": "user", "content": [{"type": "image_url"}]}]),
     400, "messages[0].content[0]"),
    ("message role empty", "/v1/chat/completions",
     chat(messages=[{"role": "", "content": "hi"}]), 400, "messages[0].role"),
    ("user message calls tools", "/v1/chat/completions",
     chat(messages=[{"role": "user", "content": "hi", "tool_calls": []}]),
     400, "messages[0].tool_calls"),
    ("tool_calls not an array", "/v1/chat/completions",
     chat(messages=[{"role": "assistant", "content": None, "tool_calls": {}}]),
     400, "messages[0].tool_calls"),
    ("tool call without function", "/v1/chat/completions",
     chat(messages=[{"role": "assistant", "content": None,
                     "tool_calls": [{"id": "c1"}]}]),
     400, "messages[0].tool_calls[0]"),
    ("tool call type", "/v1/chat/completions",
     chat(messages=[{"role": "assistant", "content": None, "tool_calls": [
         {"id": "c1", "type": "x", "function": {"name": "f"}}]}]),
     400, "messages[0].tool_calls[0].type"),
    ("tool call name missing", "/v1/chat/completions",
     chat(messages=assistant_call(name=None)), 400,
     "messages[1].tool_calls[0].function.name"),
    ("tool call name empty", "/v1/chat/completions",
     chat(messages=assistant_call(name="")), 400,
     "messages[1].tool_calls[0].function.name"),
    ("tool call arguments a number", "/v1/chat/completions",
     chat(messages=assistant_call(arguments=5)), 400,
     "messages[1].tool_calls[0].function.arguments"),
    ("tool call arguments not JSON", "/v1/chat/completions",
     chat(messages=assistant_call(arguments="{bad")), 400,
     "messages[1].tool_calls[0].function.arguments"),
    ("tool_call_id a number", "/v1/chat/completions",
     chat(messages=[{"role": "tool", "content": "x", "tool_call_id": 5}]),
     400, "messages[0].tool_call_id"),
    ("prompt too long", "/v1/chat/completions",
     chat(messages=[{"role": "user", "content": LONG}]), 400, "messages"),
    # --- chat: sampling (body reader, then the sampling ranges)
    ("max_tokens zero", "/v1/chat/completions", chat(max_tokens=0), 400, "max_tokens"),
    ("max_tokens a string", "/v1/chat/completions", chat(max_tokens="4"),
     400, "max_tokens"),
    ("max_tokens past the context", "/v1/chat/completions", chat(max_tokens=100000),
     400, "max_tokens"),
    ("max_completion_tokens zero", "/v1/chat/completions",
     without(chat(max_completion_tokens=0), "max_tokens"), 400,
     "max_completion_tokens"),
    ("max_completion_tokens past the context", "/v1/chat/completions",
     without(chat(max_completion_tokens=100000), "max_tokens"), 400,
     "max_completion_tokens"),
    ("temperature a string", "/v1/chat/completions", chat(temperature="hot"),
     400, "temperature"),
    ("temperature negative", "/v1/chat/completions", chat(temperature=-1),
     400, "temperature"),
    ("top_p zero", "/v1/chat/completions", chat(top_p=0), 400, "top_p"),
    ("top_p above one", "/v1/chat/completions", chat(top_p=1.5), 400, "top_p"),
    ("top_k a string", "/v1/chat/completions", chat(top_k="x"), 400, "top_k"),
    ("min_p above one", "/v1/chat/completions", chat(min_p=2), 400, "min_p"),
    ("presence_penalty", "/v1/chat/completions", chat(presence_penalty=5),
     400, "presence_penalty"),
    ("frequency_penalty", "/v1/chat/completions", chat(frequency_penalty=-5),
     400, "frequency_penalty"),
    ("repetition_penalty zero", "/v1/chat/completions", chat(repetition_penalty=0),
     400, "repetition_penalty"),
    ("seed a string", "/v1/chat/completions", chat(seed="x"), 400, "seed"),
    ("n zero", "/v1/chat/completions", chat(n=0), 400, "n"),
    ("n too many", "/v1/chat/completions", chat(n=500), 400, "n"),
    ("stop a number", "/v1/chat/completions", chat(stop=5), 400, "stop"),
    ("stop holds a number", "/v1/chat/completions", chat(stop=[1]), 400, "stop"),
    ("stop holds an empty string", "/v1/chat/completions", chat(stop=[""]),
     400, "stop"),
    ("logit_bias a list", "/v1/chat/completions", chat(logit_bias=[]),
     400, "logit_bias"),
    ("logit_bias key not an id", "/v1/chat/completions", chat(logit_bias={"x": 1}),
     400, "logit_bias"),
    ("logit_bias out of range", "/v1/chat/completions",
     chat(logit_bias={"1": 500}), 400, "logit_bias"),
    ("logit_bias id past the vocabulary", "/v1/chat/completions",
     chat(logit_bias={"99999999": 1}), 400, "logit_bias"),
    ("logprobs a string", "/v1/chat/completions", chat(logprobs="yes"),
     400, "logprobs"),
    ("top_logprobs without logprobs", "/v1/chat/completions", chat(top_logprobs=2),
     400, "top_logprobs"),
    ("top_logprobs too many", "/v1/chat/completions",
     chat(logprobs=True, top_logprobs=50), 400, "top_logprobs"),
    ("ignore_eos a string", "/v1/chat/completions", chat(ignore_eos="x"),
     400, "ignore_eos"),
    ("min_tokens negative", "/v1/chat/completions", chat(min_tokens=-1),
     400, "min_tokens"),
    ("min_tokens above max_tokens", "/v1/chat/completions", chat(min_tokens=10),
     400, "min_tokens"),
    ("stream a string", "/v1/chat/completions", chat(stream="yes"), 400, "stream"),
    # --- chat: response_format
    ("response_format a number", "/v1/chat/completions", chat(response_format=3),
     400, "response_format"),
    ("response_format type", "/v1/chat/completions",
     chat(response_format={"type": "xml"}), 400, "response_format.type"),
    ("response_format schema missing", "/v1/chat/completions",
     chat(response_format={"type": "json_schema", "json_schema": {"name": "x"}}),
     400, "response_format.json_schema"),
    ("response_format schema not a schema", "/v1/chat/completions",
     chat(response_format={"type": "json_schema",
                           "json_schema": {"name": "x", "schema": 5}}),
     400, "response_format.json_schema"),
    # --- chat: tools
    ("tools an object", "/v1/chat/completions", chat(tools={}), 400, "tools"),
    ("tool type", "/v1/chat/completions", chat(tools=[{"type": "x"}]),
     400, "tools[0].type"),
    ("tool without function", "/v1/chat/completions",
     chat(tools=[{"type": "function"}]), 400, "tools[0].function"),
    ("tool name missing", "/v1/chat/completions",
     chat(tools=[{"type": "function", "function": {}}]), 400,
     "tools[0].function.name"),
    ("tool name with a space", "/v1/chat/completions",
     chat(tools=[{"type": "function", "function": {"name": "a b"}}]), 400,
     "tools[0].function.name"),
    ("tool defined twice", "/v1/chat/completions", chat(tools=[WEATHER, WEATHER]),
     400, "tools[1].function.name"),
    ("tool description a number", "/v1/chat/completions",
     chat(tools=[{"type": "function",
                  "function": {"name": "f", "description": 5}}]),
     400, "tools[0].function.description"),
    ("tool parameters a string", "/v1/chat/completions",
     chat(tools=[{"type": "function",
                  "function": {"name": "f", "parameters": "x"}}]),
     400, "tools[0].function.parameters"),
    ("tool parameters not an object schema", "/v1/chat/completions",
     chat(tools=[{"type": "function",
                  "function": {"name": "f", "parameters": {"type": "string"}}}]),
     400, "tools[0].function.parameters"),
    ("tool_choice unknown word", "/v1/chat/completions",
     chat(tools=[WEATHER], tool_choice="maybe"), 400, "tool_choice"),
    ("tool_choice names no tool", "/v1/chat/completions",
     chat(tools=[WEATHER], tool_choice={"type": "function",
                                        "function": {"name": "nope"}}),
     400, "tool_choice"),
    ("tool_choice without tools", "/v1/chat/completions",
     chat(tool_choice="required"), 400, "tool_choice"),
    ("parallel_tool_calls a string", "/v1/chat/completions",
     chat(tools=[WEATHER], parallel_tool_calls="x"), 400, "parallel_tool_calls"),
    ("legacy functions", "/v1/chat/completions",
     chat(functions=[{"name": "f"}]), 400, "functions"),
    ("response_format beside a required tool call", "/v1/chat/completions",
     chat(tools=[WEATHER], tool_choice="required",
          response_format={"type": "json_object"}), 400, "response_format"),
    # --- completions
    ("prompt missing", "/v1/completions", without(completion(), "prompt"),
     400, "prompt"),
    ("prompt a number", "/v1/completions", completion(prompt=5), 400, "prompt"),
    ("prompt ids negative", "/v1/completions", completion(prompt=[-1]),
     400, "prompt"),
    ("prompt ids past the vocabulary", "/v1/completions",
     completion(prompt=[99999999]), 400, "prompt"),
    ("prompt too long", "/v1/completions", completion(prompt=LONG), 400, "prompt"),
    ("suffix", "/v1/completions", completion(suffix="x"), 400, "suffix"),
    ("echo a string", "/v1/completions", completion(echo="x"), 400, "echo"),
    ("logprobs a string", "/v1/completions", completion(logprobs="x"),
     400, "logprobs"),
    ("logprobs too many", "/v1/completions", completion(logprobs=50),
     400, "logprobs"),
    ("echo with logprobs streamed", "/v1/completions",
     completion(echo=True, logprobs=1, stream=True), 400, "stream"),
    ("completion max_tokens negative", "/v1/completions", completion(max_tokens=-3),
     400, "max_tokens"),
    ("completion temperature", "/v1/completions", completion(temperature=500),
     400, "temperature"),
    # --- embeddings
    ("input missing", "/v1/embeddings", without(embed(), "input"), 400, "input"),
    ("input a number", "/v1/embeddings", embed(input=5), 400, "input"),
    ("input empty", "/v1/embeddings", embed(input=[]), 400, "input"),
    ("input mixes strings and ids", "/v1/embeddings", embed(input=["a", 5]),
     400, "input"),
    ("input ids past the vocabulary", "/v1/embeddings", embed(input=[99999999]),
     400, "input"),
    ("input too long", "/v1/embeddings", embed(input=LONG), 400, "input"),
    ("too many inputs", "/v1/embeddings", embed(input=["a"] * 300), 400, "input"),
    ("dimensions negative", "/v1/embeddings", embed(dimensions=-1),
     400, "dimensions"),
    ("dimensions past the model's", "/v1/embeddings", embed(dimensions=100000),
     400, "dimensions"),
    ("encoding_format", "/v1/embeddings", embed(encoding_format="int8"),
     400, "encoding_format"),
    ("embeddings from a model that cannot embed", "/v1/embeddings",
     embed(model="reranker"), 400, "model"),
    ("embeddings model not a string", "/v1/embeddings", embed(model=[]),
     400, "model"),
    # --- rerank (vLLM's shape)
    ("query missing", "/v1/rerank", without(rerank(), "query"), 400, "query"),
    ("query empty", "/v1/rerank", rerank(query=""), 400, "query"),
    ("documents missing", "/v1/rerank", without(rerank(), "documents"),
     400, "documents"),
    ("document a number", "/v1/rerank", rerank(documents=["a", 5]),
     400, "documents[1]"),
    ("too many documents", "/v1/rerank", rerank(documents=["a"] * 300),
     400, "documents"),
    ("top_n negative", "/v1/rerank", rerank(top_n=-1), 400, "top_n"),
    ("return_documents a string", "/v1/rerank", rerank(return_documents="x"),
     400, "return_documents"),
    ("raw_scores a string", "/v1/rerank", rerank(raw_scores="x"), 400, "raw_scores"),
    ("truncate a string", "/v1/rerank", rerank(truncate="x"), 400, "truncate"),
    ("query plus document too long", "/v1/rerank",
     rerank(documents=[LONG], truncate=False), 400, "documents"),
    ("rerank with a model that cannot", "/v1/rerank", rerank(model="embedder"),
     400, "model"),
    # --- rerank (TEI's shape)
    ("TEI texts missing", "/rerank", without(tei(), "texts"), 400, "texts"),
    ("TEI text a number", "/rerank", tei(texts=["a", 5]), 400, "texts[1]"),
    ("TEI too many texts", "/rerank", tei(texts=["a"] * 300), 400, "texts"),
    ("TEI return_text a string", "/rerank", tei(return_text="x"),
     400, "return_text"),
    ("TEI query plus text too long", "/rerank", tei(texts=[LONG], truncate=False),
     400, "texts"),
    # --- tokenize / detokenize
    ("tokenize prompt missing", "/tokenize", {"model": "llm"}, 400, "prompt"),
    ("tokenize prompt and messages", "/tokenize",
     {"model": "llm", "prompt": "x", "messages": [{"role": "user", "content": "x"}]},
     400, "messages"),
    ("tokenize messages empty", "/tokenize", {"model": "llm", "messages": []},
     400, "messages"),
    ("tokenize message role empty", "/tokenize",
     {"model": "llm", "messages": [{"role": "", "content": "x"}]},
     400, "messages[0].role"),
    ("tokenize add_special_tokens", "/tokenize",
     {"model": "llm", "prompt": "x", "add_special_tokens": "x"},
     400, "add_special_tokens"),
    ("tokenize add_generation_prompt", "/tokenize",
     {"model": "llm", "messages": [{"role": "user", "content": "x"}],
      "add_generation_prompt": "x"}, 400, "add_generation_prompt"),
    ("tokenize tool name", "/tokenize",
     {"model": "llm", "messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "a b"}}]},
     400, "tools[0].function.name"),
    ("tokenize unknown model", "/tokenize", {"model": "nope", "prompt": "x"},
     404, "model"),
    ("detokenize tokens missing", "/detokenize", {"model": "llm"}, 400, "tokens"),
    ("detokenize tokens a string", "/detokenize", {"model": "llm", "tokens": "x"},
     400, "tokens"),
    ("detokenize token negative", "/detokenize", {"model": "llm", "tokens": [-1]},
     400, "tokens"),
    ("detokenize token past the vocabulary", "/detokenize",
     {"model": "llm", "tokens": [99999999]}, 400, "tokens"),
    ("detokenize skip_special_tokens", "/detokenize",
     {"model": "llm", "tokens": [1], "skip_special_tokens": "x"},
     400, "skip_special_tokens"),
]


def post(base, route, body):
    req = urllib.request.Request(base + route, data=json.dumps(body).encode(),
                                 method="POST")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def get(base, route):
    try:
        with urllib.request.urlopen(base + route, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def main():
    ap = argparse.ArgumentParser()
    lib.add_common_args(ap)
    a = ap.parse_args()
    names = ["qwen2-tiny", "bert-embed", "xlmr-reranker"]
    if not lib.models_present(a.test_models, names):
        return 77
    models = [("llm", os.path.join(a.test_models, "qwen2-tiny")),
              ("embedder", os.path.join(a.test_models, "bert-embed")),
              ("reranker", os.path.join(a.test_models, "xlmr-reranker"))]
    failures = []
    with lib.InferdProcess(a.inferd, models, log_prefix="inferd-http-params-",
                           extra=["--http-listen", "127.0.0.1:0",
                                  "--max-input-tokens", "64"]) as srv:
        srv.wait_for(r"(\d+) of \d+ model\(s\) ready after", timeout=300)
        base = f"http://127.0.0.1:{srv.http_port}"
        results = [(label, want_status, want_param, post(base, route, body))
                   for label, route, body, want_status, want_param in CASES]
        results.append(("unknown model by id", 404, "model",
                        get(base, "/v1/models/nope")))
        for label, want_status, want_param, (status, body) in results:
            err = (body or {}).get("error") if isinstance(body, dict) else None
            if status != want_status or err is None or \
                    err.get("param") != want_param or not err.get("message"):
                failures.append(f"{label}: want {want_status} param "
                                f"{want_param!r}, got {status} {body}")
                continue
            # A message that starts with a field path starts with this one.
            msg = err["message"]
            head = msg.split(":")[0].split(" ")[0]
            if ("." in head or "[" in head or head == want_param) and \
                    not msg.startswith(want_param):
                failures.append(f"{label}: the message names another field "
                                f"than param {want_param!r}: {msg!r}")
        # The server is still up and serves a well-formed request.
        status, body = post(base, "/v1/chat/completions", chat())
        if status != 200:
            failures.append(f"after the table: a good request got {status} {body}")
    print(f"{len(results)} wrong requests checked")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
