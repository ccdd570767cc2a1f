#!/usr/bin/env python3
"""inferd's OpenAI-compatible HTTP API from the unmodified `openai` SDK.

Against scripts/serve.sh (HTTP on 127.0.0.1:8080; its models smollm2 and
minilm):

  pip install openai
  python3 examples/openai/agent.py

Five things an application does with an OpenAI-compatible server:
  1. a chat completion;
  2. the same, streamed;
  3. a tool call and its round trip: the model must call `get_weather`
     (tool_choice "required"), the program runs the function and sends the
     result back for the final answer;
  4. structured output: a JSON Schema response_format;
  5. embeddings and their cosine similarity.
Errors come back as the SDK's exceptions (openai.NotFoundError for an
unknown model). --json FILE writes what was received.
"""
import argparse
import json
import math

import openai


def get_weather(city):
    """The tool the model may call (a stand-in for a real service)."""
    return {"city": city, "temperature_c": 21, "sky": "clear"}


TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    ap.add_argument("--api-key", default="none",
                    help="inferd's --api-key, if the server has one")
    ap.add_argument("--chat-model", default="smollm2")
    ap.add_argument("--embed-model", default="minilm")
    ap.add_argument("--json", help="write what was received here")
    args = ap.parse_args()
    client = openai.OpenAI(base_url=args.base_url, api_key=args.api_key)
    out = {}

    question = [{"role": "user", "content": "What is the capital of France?"}]
    r = client.chat.completions.create(model=args.chat_model,
                                       messages=question, max_tokens=32,
                                       temperature=0)
    out["chat"] = r.choices[0].message.content
    print("chat:", out["chat"])

    pieces = []
    for chunk in client.chat.completions.create(
            model=args.chat_model, messages=question, max_tokens=32,
            temperature=0, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
            print(chunk.choices[0].delta.content, end="", flush=True)
    print()
    out["stream"] = "".join(pieces)

    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = client.chat.completions.create(model=args.chat_model,
                                       messages=messages, tools=TOOLS,
                                       tool_choice="required", max_tokens=64,
                                       temperature=0)
    msg = r.choices[0].message
    out["tool_calls"] = [{"name": c.function.name,
                          "arguments": json.loads(c.function.arguments)}
                         for c in msg.tool_calls or []]
    out["tool_finish"] = r.choices[0].finish_reason
    print("tool calls:", out["tool_calls"])
    messages.append({"role": "assistant", "content": msg.content,
                     "tool_calls": [c.model_dump() for c in msg.tool_calls]})
    for c in msg.tool_calls:
        result = get_weather(**json.loads(c.function.arguments))
        messages.append({"role": "tool", "tool_call_id": c.id,
                         "content": json.dumps(result)})
    # The answer from the tool's result: a text reply, so tool_choice
    # "none" (with "auto", a model whose template shows no tool-call format,
    # as SmolLM2's, needs the server's tool_parser= option, as vLLM needs
    # --tool-call-parser).
    r = client.chat.completions.create(model=args.chat_model,
                                       messages=messages, tools=TOOLS,
                                       tool_choice="none", max_tokens=48,
                                       temperature=0)
    out["after_tool"] = r.choices[0].message.content
    print("answer:", out["after_tool"])

    schema = {"type": "object",
              "properties": {"name": {"type": "string"},
                             "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    r = client.chat.completions.create(
        model=args.chat_model, max_tokens=64, temperature=0,
        messages=[{"role": "user", "content": "Describe a person as JSON."}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "person", "schema": schema}})
    out["json"] = json.loads(r.choices[0].message.content)
    print("json:", out["json"])

    texts = ["A man is playing a guitar.", "Someone strums a guitar.",
             "The weather is cold today."]
    e = client.embeddings.create(model=args.embed_model, input=texts)
    vecs = [d.embedding for d in e.data]
    cos = [sum(a * b for a, b in zip(vecs[0], v)) /
           (math.sqrt(sum(a * a for a in vecs[0])) *
            math.sqrt(sum(b * b for b in v))) for v in vecs]
    out["embedding_dims"] = len(vecs[0])
    out["cosine"] = cos
    print("cosine to the first text:", [round(c, 3) for c in cos])

    try:
        client.chat.completions.create(model="no-such-model",
                                       messages=question, max_tokens=4)
        out["unknown_model"] = "answered"
    except openai.NotFoundError as err:
        out["unknown_model"] = err.body.get("message") if isinstance(
            err.body, dict) else str(err)
    print("unknown model:", out["unknown_model"])

    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
