#!/usr/bin/env python3
"""The `openai` SDK against inferd's HTTP API (run by http_api_test.py with
the test venv's python, where the pinned SDK is installed). Prints one JSON
object with what each call returned, for the test to check against gRPC;
errors are recorded as {"error": class name, "status": HTTP status,
"message": ...}.

usage: http_openai_client.py BASE_URL API_KEY LLM EMBEDDER
"""
import json
import sys

import openai


def err(e):
    return {"error": type(e).__name__, "status": getattr(e, "status_code", None),
            "message": str(e)}


def main():
    base, key, llm, embedder = sys.argv[1:5]
    c = openai.OpenAI(base_url=base, api_key=key, max_retries=0, timeout=300)
    out = {}
    out["models"] = sorted(m.id for m in c.models.list())
    out["model"] = c.models.retrieve(llm).id
    q = [{"role": "system", "content": "You are a helpful assistant."},
         {"role": "user", "content": "What is the capital of France?"}]
    r = c.chat.completions.create(model=llm, messages=q, max_tokens=24,
                                  temperature=0)
    out["chat"] = {"text": r.choices[0].message.content,
                   "role": r.choices[0].message.role,
                   "finish": r.choices[0].finish_reason,
                   "usage": [r.usage.prompt_tokens, r.usage.completion_tokens,
                             r.usage.total_tokens],
                   "object": r.object}
    # Text parts, as newer clients send content.
    r = c.chat.completions.create(
        model=llm, max_tokens=24, temperature=0,
        messages=[{"role": "developer", "content": "You are a helpful assistant."},
                  {"role": "user", "content": [
                      {"type": "text", "text": "What is the capital "},
                      {"type": "text", "text": "of France?"}]}])
    out["chat_parts"] = r.choices[0].message.content
    stream = c.chat.completions.create(
        model=llm, messages=q, max_tokens=24, temperature=0, stream=True,
        stream_options={"include_usage": True})
    deltas, finish, usage, roles = [], None, None, []
    for chunk in stream:
        if chunk.usage is not None:
            usage = [chunk.usage.prompt_tokens, chunk.usage.completion_tokens]
        for ch in chunk.choices:
            if ch.delta.role:
                roles.append(ch.delta.role)
            if ch.delta.content:
                deltas.append(ch.delta.content)
            if ch.finish_reason:
                finish = ch.finish_reason
    out["stream"] = {"text": "".join(deltas), "pieces": len(deltas),
                     "finish": finish, "usage": usage, "roles": roles}
    r = c.chat.completions.create(model=llm, messages=q, max_tokens=8,
                                  temperature=0.8, n=3, seed=5)
    out["n3"] = [ch.index for ch in r.choices]
    r = c.chat.completions.create(
        model=llm, max_tokens=80, temperature=0,
        messages=[{"role": "user", "content": "Describe a cat as JSON."}],
        response_format={"type": "json_schema", "json_schema": {
            "name": "cat", "strict": True, "schema": {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": 20},
                               "age": {"type": "integer", "minimum": 0,
                                       "maximum": 30}},
                "required": ["name", "age"]}}})
    out["json_schema"] = r.choices[0].message.content
    r = c.chat.completions.create(model=llm, messages=q, max_tokens=4,
                                  temperature=0, logprobs=True, top_logprobs=2)
    lp = r.choices[0].logprobs.content
    out["logprobs"] = [[t.token, t.logprob, len(t.top_logprobs)] for t in lp]
    out["logprobs_text"] = [r.choices[0].message.content,
                            "".join(t.token for t in lp),
                            all(bytes(t.bytes) == t.token.encode() for t in lp)]
    r = c.completions.create(model=llm, prompt="Once upon a time",
                             max_tokens=8, temperature=0, logprobs=2)
    lpc = r.choices[0].logprobs
    out["completion_logprobs"] = {
        "text": r.choices[0].text, "tokens": lpc.tokens,
        "token_logprobs": lpc.token_logprobs,
        "top": [len(t) for t in lpc.top_logprobs],
        "text_offset": lpc.text_offset}
    r = c.completions.create(model=llm, prompt="Once upon a time",
                             max_tokens=16, temperature=0)
    out["completion"] = {"text": r.choices[0].text,
                         "finish": r.choices[0].finish_reason,
                         "object": r.object}
    text = []
    for chunk in c.completions.create(model=llm, prompt="Once upon a time",
                                      max_tokens=16, temperature=0,
                                      stream=True):
        text += [ch.text for ch in chunk.choices]
    out["completion_stream"] = "".join(text)
    texts = ["A man is playing a guitar.", "The weather is cold today."]
    e = c.embeddings.create(model=embedder, input=texts)  # base64 on the wire
    out["embeddings"] = [d.embedding for d in e.data]
    out["embeddings_usage"] = e.usage.prompt_tokens
    e = c.embeddings.create(model=embedder, input=texts[0],
                            encoding_format="float", dimensions=8)
    out["embedding_dims8"] = e.data[0].embedding
    cases = {
        "unknown_model": lambda: c.chat.completions.create(
            model="no-such-model", messages=q),
        "bad_n": lambda: c.chat.completions.create(model=llm, messages=q, n=0),
        "tools": lambda: c.chat.completions.create(
            model=llm, messages=q, tools=[{"type": "function", "function": {
                "name": "f", "parameters": {"type": "object"}}}]),
        "bad_temperature": lambda: c.chat.completions.create(
            model=llm, messages=q, temperature=-1),
        "embed_with_llm_only_model": lambda: c.embeddings.create(
            model=llm, input="x"),
        "bad_key": lambda: openai.OpenAI(base_url=base, api_key="wrong",
                                         max_retries=0).models.list(),
    }
    for name, call in cases.items():
        try:
            call()
            out[name] = {"error": None}
        except openai.APIError as e:  # noqa: PERF203
            out[name] = err(e)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
