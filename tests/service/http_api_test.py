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
import subprocess
import sys
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

    models = [("llm", a.smollm2), ("embedder", a.minilm),
              ("reranker", os.path.join(a.test_models, "xlmr-reranker"))]
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
                                   "reranker": "ready"},
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

        check(out["models"] == ["embedder", "llm", "reranker"],
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
                ("tools", 400, "BadRequestError", "tools"),
                ("bad_temperature", 400, "BadRequestError", "temperature"),
                ("embed_with_llm_only_model", 400, "BadRequestError", "embed"),
                ("bad_key", 401, "AuthenticationError", "API key")]:
            e = out[name]
            check(e["error"] == cls and e["status"] == status and
                  word in e["message"],
                  f"{name}: want {status} {cls} naming {word!r}, got {e}")

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
        st, body = http("POST", base + "/v1/completions",
                        {"model": "llm", "prompt": "x", "echo": True,
                         "logprobs": 1})
        check(st == 400 and body["error"]["message"].startswith("echo:"),
              f"echo with logprobs: {st} {body}")

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
