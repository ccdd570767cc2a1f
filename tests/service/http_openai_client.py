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


WEATHER_PARAMS = {
    "type": "object",
    "properties": {"city": {"type": "string", "enum": ["Paris", "Berlin", "Rome"]},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"], "additionalProperties": False}
TIME_PARAMS = {
    "type": "object",
    "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
    "required": ["zone"], "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": WEATHER_PARAMS}},
    {"type": "function", "function": {
        "name": "get_time", "description": "The time in a zone",
        "parameters": TIME_PARAMS}},
]


def calls_of(message):
    return [{"id": t.id, "type": t.type, "name": t.function.name,
             "arguments": t.function.arguments}
            for t in (message.tool_calls or [])]


def streamed_calls(stream):
    """Reassembles streamed tool-call deltas by index, as clients do."""
    calls, content, finish, first_pieces = {}, [], None, []
    for chunk in stream:
        for ch in chunk.choices:
            if ch.delta.content:
                content.append(ch.delta.content)
            for t in ch.delta.tool_calls or []:
                cur = calls.setdefault(t.index, {"id": None, "type": None,
                                                 "name": None, "arguments": ""})
                if t.id:
                    first_pieces.append(t.index)
                    cur["id"], cur["type"] = t.id, t.type
                if t.function and t.function.name:
                    cur["name"] = t.function.name
                if t.function and t.function.arguments:
                    cur["arguments"] += t.function.arguments
            if ch.finish_reason:
                finish = ch.finish_reason
    return {"calls": [calls[i] for i in sorted(calls)], "content": "".join(content),
            "finish": finish, "firsts": first_pieces}


def tools_section(c, llm, out):
    tq = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
    kw = dict(model=llm, messages=tq, tools=TOOLS, max_tokens=120, temperature=0)
    named = {"type": "function", "function": {"name": "get_weather"}}
    for name, choice in [("required", "required"), ("named", named)]:
        r = c.chat.completions.create(tool_choice=choice, **kw)
        m = r.choices[0].message
        out[f"tools_{name}"] = {"calls": calls_of(m), "content": m.content,
                                "finish": r.choices[0].finish_reason}
        out[f"tools_{name}_stream"] = streamed_calls(c.chat.completions.create(
            tool_choice=choice, stream=True, **kw))
    r = c.chat.completions.create(tool_choice="required", parallel_tool_calls=False, **kw)
    out["tools_single"] = calls_of(r.choices[0].message)
    for name in ("none", "auto"):
        r = c.chat.completions.create(tool_choice=name, **kw)
        m = r.choices[0].message
        out[f"tools_{name}"] = {"calls": calls_of(m), "content": m.content,
                                "finish": r.choices[0].finish_reason}
        out[f"tools_{name}_stream"] = streamed_calls(c.chat.completions.create(
            tool_choice=name, stream=True, **kw))
    # The round trip: the call sent back with the tool's answer.
    call = out["tools_required"]["calls"][0]
    back = tq + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call["id"], "type": "function",
             "function": {"name": call["name"], "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["id"],
         "content": json.dumps({"temperature": 21, "sky": "clear"})}]
    r = c.chat.completions.create(model=llm, messages=back, tools=TOOLS,
                                  max_tokens=24, temperature=0)
    out["tools_round_trip"] = {"content": r.choices[0].message.content,
                               "finish": r.choices[0].finish_reason,
                               "prompt_tokens": r.usage.prompt_tokens}


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
        "tool_choice_undefined": lambda: c.chat.completions.create(
            model=llm, messages=q, tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "nope"}}),
        "tool_parameters_not_object": lambda: c.chat.completions.create(
            model=llm, messages=q, tools=[{"type": "function", "function": {
                "name": "f", "parameters": {"type": "string"}}}]),
        "tool_parameters_unsupported": lambda: c.chat.completions.create(
            model=llm, messages=q, tool_choice="required",
            tools=[{"type": "function", "function": {
                "name": "f", "parameters": {"type": "object", "properties": {
                    "a": {"type": "string", "not": {"const": "x"}}}}}}]),
        "tool_choice_without_tools": lambda: c.chat.completions.create(
            model=llm, messages=q, tool_choice="required"),
        "tool_call_on_user_message": lambda: c.chat.completions.create(
            model=llm, tools=TOOLS, messages=[{"role": "user", "content": "x",
                                               "tool_calls": []}]),
        "bad_temperature": lambda: c.chat.completions.create(
            model=llm, messages=q, temperature=-1),
        "embed_with_llm_only_model": lambda: c.embeddings.create(
            model=llm, input="x"),
        "bad_key": lambda: openai.OpenAI(base_url=base, api_key="wrong",
                                         max_retries=0).models.list(),
    }
    tools_section(c, llm, out)
    for name, call in cases.items():
        try:
            call()
            out[name] = {"error": None}
        except openai.APIError as e:  # noqa: PERF203
            out[name] = err(e)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
