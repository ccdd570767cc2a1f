#!/usr/bin/env python3
"""The APIs agents speak, through the real clients (run in build/venv by
agent_apis_test.py against a live inferd serving SmolLM2-135M-Instruct,
whose template shows no tool format: the generic one serves its tools).

  responses   openai SDK: responses.create plain, streamed (typed events in
              order, deltas = final text), a function tool round trip with
              previous_response_id (tool_choice required, then auto), a
              json_schema text format that validates, GET / DELETE /
              input_items of a stored response, a missing id a 404 naming it
  chat loop   openai SDK: the agent loop over chat completions with
              tool_choice left at auto on every turn
  agents      OpenAI Agents SDK: an agent with one function tool through its
              Responses model and its chat-completions model, run to the end
  anthropic   anthropic SDK: messages, streaming (event order, text =
              final), a tool_use / tool_result round trip, count_tokens, and
              its typed errors (auth, bad request, not found)
  langchain   ChatOpenAI(...).bind_tools(...) makes a tool call

Prints one line per check; exits 1 when any failed.
usage: agent_apis_client.py --base URL --key KEY --model NAME
       [--reasoning-model NAME]
"""
import argparse
import asyncio
import json
import sys

FAILURES = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


WEATHER = {
    "type": "function", "name": "get_weather",
    "description": "Get the current weather of a city",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string"}},
                   "required": ["city"], "additionalProperties": False},
}
CHAT_WEATHER = {"type": "function", "function": {
    k: v for k, v in WEATHER.items() if k != "type"}}


def responses_section(openai, client, model):
    r = client.responses.create(model=model, input="Say hello in French.",
                                max_output_tokens=24, temperature=0)
    check(r.object == "response" and r.id.startswith("resp_") and
          r.model == model and r.status in ("completed", "incomplete") and
          len(r.output_text) > 0 and r.usage.input_tokens > 0 and
          0 < r.usage.output_tokens <= 24,
          f"responses: plain answer ({r.status}, {r.output_text!r})")
    if r.status == "incomplete":
        check(r.incomplete_details.reason == "max_output_tokens",
              f"responses: incomplete says why ({r.incomplete_details})")

    # Streamed, greedy: the same text, in typed events.
    events = list(client.responses.create(
        model=model, input="Say hello in French.", max_output_tokens=24,
        temperature=0, stream=True))
    types = [e.type for e in events]
    deltas = "".join(e.delta for e in events
                     if e.type == "response.output_text.delta")
    final = events[-1].response if events else None
    check(types[:2] == ["response.created", "response.in_progress"] and
          types[-1] in ("response.completed", "response.incomplete") and
          "response.output_item.added" in types and
          "response.content_part.added" in types and
          "response.output_text.done" in types and
          "response.output_item.done" in types,
          f"responses stream: event order {types[:4]}...{types[-3:]}")
    check([e.sequence_number for e in events] == list(range(len(events))),
          "responses stream: sequence numbers 0, 1, 2, ...")
    check(deltas == r.output_text and final is not None and
          final.output_text == r.output_text,
          f"responses stream: deltas {deltas!r} = non-streamed {r.output_text!r}")

    # A function tool round trip: required, then the result sent back by
    # previous_response_id, tools still offered under auto.
    first = client.responses.create(
        model=model, input="What is the weather in Paris?", tools=[WEATHER],
        tool_choice="required", temperature=0, max_output_tokens=60)
    calls = [o for o in first.output if o.type == "function_call"]
    check(len(calls) >= 1 and calls[0].name == "get_weather" and
          isinstance(json.loads(calls[0].arguments).get("city"), str) and
          calls[0].call_id and first.output_text == "",
          f"responses: required tool call ({first.output})")
    if calls:
        second = client.responses.create(
            model=model, previous_response_id=first.id, tools=[WEATHER],
            input=[{"type": "function_call_output", "call_id": calls[0].call_id,
                    "output": json.dumps({"temp_c": 21, "sky": "sunny"})}],
            temperature=0, max_output_tokens=60)
        check(second.previous_response_id == first.id and
              second.status in ("completed", "incomplete") and
              second.usage.input_tokens > first.usage.input_tokens and
              all(o.type in ("message", "function_call") for o in second.output),
              f"responses: tool result by previous_response_id "
              f"({second.usage.input_tokens} > {first.usage.input_tokens} "
              f"input tokens; {second.output_text!r})")
        # The same turn streamed: function call events, arguments = final.
        events = list(client.responses.create(
            model=model, input="What is the weather in Paris?", tools=[WEATHER],
            tool_choice="required", temperature=0, max_output_tokens=60,
            stream=True))
        args = "".join(e.delta for e in events
                       if e.type == "response.function_call_arguments.delta")
        done = [e for e in events if e.type == "response.function_call_arguments.done"]
        check(done and done[0].arguments == args == calls[0].arguments,
              f"responses stream: function_call_arguments deltas {args!r}")

    # Structured output.
    schema = {"type": "object", "properties": {
        "city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"], "additionalProperties": False}
    j = client.responses.create(
        model=model, input="Name a city and its population as JSON.",
        text={"format": {"type": "json_schema", "name": "city",
                         "schema": schema, "strict": True}},
        temperature=0, max_output_tokens=60)
    try:
        import jsonschema
        jsonschema.validate(json.loads(j.output_text), schema)
        ok = True
    except Exception as e:  # noqa: BLE001
        ok, j_err = False, e
    check(ok and j.text.format.type == "json_schema",
          f"responses: json_schema output validates ({j.output_text!r})")

    # The stored response, its input items, and its deletion.
    got = client.responses.retrieve(first.id)
    check(got.id == first.id and got.output[0].type == first.output[0].type,
          "responses: GET /v1/responses/{id} returns the stored response")
    items = client.responses.input_items.list(first.id)
    check(len(items.data) == 1 and items.data[0].type == "message",
          f"responses: input_items ({[i.type for i in items.data]})")
    client.responses.delete(first.id)
    try:
        client.responses.retrieve(first.id)
        check(False, "responses: a deleted response is gone")
    except openai.NotFoundError as e:
        check(first.id in str(e), f"responses: deleted -> 404 naming it ({e})")
    try:
        client.responses.create(model=model, input="hi",
                                previous_response_id="resp_nope")
        check(False, "responses: an unknown previous_response_id is refused")
    except openai.NotFoundError as e:
        check("resp_nope" in str(e) and
              e.body.get("param") == "previous_response_id",
              f"responses: unknown previous_response_id -> 404 ({e.body})")
    try:
        client.responses.create(model=model, input=[{"type": "input_image"}])
        check(False, "responses: an image item is refused")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "input[0].type",
              f"responses: unsupported item -> 400 naming it ({e.body})")


def chat_loop_section(client, model):
    """The openai SDK's usual agent loop: tools on every turn, tool_choice
    never set (auto)."""
    messages = [{"role": "user", "content": "What is the weather in Paris? "
                 "Use the get_weather tool."}]
    turns = []
    for _ in range(4):
        r = client.chat.completions.create(
            model=model, messages=messages, tools=[CHAT_WEATHER],
            temperature=0, max_tokens=80)
        m = r.choices[0].message
        turns.append((r.choices[0].finish_reason, bool(m.tool_calls)))
        if not m.tool_calls:
            check(isinstance(m.content, str) and
                  not m.content.lstrip().startswith('[{"name"'),
                  f"chat loop: a text answer ends the loop ({m.content!r})")
            break
        check(r.choices[0].finish_reason == "tool_calls" and
              all(t.function.name == "get_weather" and
                  isinstance(json.loads(t.function.arguments), dict)
                  for t in m.tool_calls),
              f"chat loop: auto tool call ({m.tool_calls})")
        messages.append(m.model_dump(exclude_none=True))
        for t in m.tool_calls:
            messages.append({"role": "tool", "tool_call_id": t.id,
                             "content": json.dumps({"temp_c": 21})})
    check(len(turns) >= 1 and all(f in ("stop", "length", "tool_calls")
                                   for f, _ in turns),
          f"chat loop: every turn with auto answered ({turns})")


def agents_section(base, key, model):
    from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel,
                        OpenAIResponsesModel, Runner, function_tool,
                        set_tracing_disabled)
    from openai import AsyncOpenAI
    set_tracing_disabled(True)
    calls = []

    @function_tool
    def get_weather(city: str) -> str:
        """Get the current weather of a city."""
        calls.append(city)
        return f"Sunny, 21 C in {city}"

    async def run_all():
        client = AsyncOpenAI(base_url=base + "/v1", api_key=key)
        for label, m in [("responses", OpenAIResponsesModel(model, client)),
                         ("chat completions",
                          OpenAIChatCompletionsModel(model, client))]:
            # The tool's output is the answer (stop_on_first_tool): a 135M
            # model, asked again, calls the tool again rather than answer.
            agent = Agent(name="weather", instructions="Answer with the tool.",
                          tools=[get_weather], model=m,
                          tool_use_behavior="stop_on_first_tool",
                          model_settings=ModelSettings(
                              tool_choice="required", temperature=0,
                              max_tokens=80))
            calls.clear()
            result = await Runner.run(agent, "Weather in Paris?", max_turns=3)
            check(len(calls) >= 1 and isinstance(calls[0], str) and
                  result.final_output == f"Sunny, 21 C in {calls[0]}" and
                  any(i.type == "tool_call_output_item"
                      for i in result.new_items),
                  f"agents ({label}): the tool ran ({calls}) and the run "
                  f"completed ({result.final_output!r})")
            # Streamed, the same run.
            calls.clear()
            streamed = Runner.run_streamed(agent, "Weather in Paris?",
                                           max_turns=3)
            kinds = [e.type async for e in streamed.stream_events()]
            check(len(calls) >= 1 and
                  streamed.final_output == f"Sunny, 21 C in {calls[0]}" and
                  "raw_response_event" in kinds,
                  f"agents ({label}, streamed): tool ran ({calls}), "
                  f"final {streamed.final_output!r}")
    asyncio.run(run_all())


def prompt_of(message):
    """A message's prompt tokens: input_tokens leaves out those read from
    the cache (the prefix cache, here)."""
    return message.usage.input_tokens + (message.usage.cache_read_input_tokens or 0)


# Anthropic's SDK no longer offers temperature: greedy rides in the body.
GREEDY = {"temperature": 0}


def anthropic_section(base, key, model):
    import anthropic
    client = anthropic.Anthropic(base_url=base, api_key=key)
    msg = client.messages.create(
        model=model, max_tokens=24, extra_body=GREEDY, system="Be brief.",
        messages=[{"role": "user", "content": "Say hello in French."}])
    text = "".join(b.text for b in msg.content if b.type == "text")
    check(msg.type == "message" and msg.role == "assistant" and
          msg.model == model and text and
          msg.stop_reason in ("end_turn", "max_tokens") and
          msg.usage.input_tokens > 0 and 0 < msg.usage.output_tokens <= 24,
          f"anthropic: message ({msg.stop_reason}, {text!r})")

    # A stop sequence the greedy answer holds: the text ends before it.
    words = text.split()
    if len(words) >= 3:
        stop = words[2]
        cut = client.messages.create(
            model=model, max_tokens=24, extra_body=GREEDY, system="Be brief.",
            stop_sequences=[stop, "never-written"],
            messages=[{"role": "user", "content": "Say hello in French."}])
        cut_text = "".join(b.text for b in cut.content if b.type == "text")
        check(cut.stop_reason == "stop_sequence" and
              cut.stop_sequence == stop and
              text.startswith(cut_text) and stop not in cut_text,
              f"anthropic: stop_sequences -> stop_sequence {cut.stop_sequence!r}"
              f" ({cut_text!r})")

    with client.messages.stream(
            model=model, max_tokens=24, extra_body=GREEDY, system="Be brief.",
            messages=[{"role": "user", "content": "Say hello in French."}]) as s:
        streamed = "".join(s.text_stream)
        final = s.get_final_message()
    check(streamed == text and final.stop_reason == msg.stop_reason,
          f"anthropic: stream text {streamed!r} = {text!r}")
    raw = list(client.messages.create(
        model=model, max_tokens=24, extra_body=GREEDY, stream=True,
        messages=[{"role": "user", "content": "Say hello in French."}]))
    types = [e.type for e in raw]
    check(types[0] == "message_start" and types[1] == "content_block_start" and
          types[-2:] == ["message_delta", "message_stop"] and
          "content_block_delta" in types and "content_block_stop" in types,
          f"anthropic: stream event order {types[:3]}...{types[-3:]}")

    tools = [{"name": "get_weather", "description": "Get the current weather "
              "of a city", "input_schema": WEATHER["parameters"]}]
    q = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.messages.create(model=model, max_tokens=80, extra_body=GREEDY,
                                   tools=tools, tool_choice={"type": "any"},
                                   messages=q)
    uses = [b for b in first.content if b.type == "tool_use"]
    check(first.stop_reason == "tool_use" and len(uses) >= 1 and
          uses[0].name == "get_weather" and isinstance(uses[0].input, dict) and
          isinstance(uses[0].input.get("city"), str) and
          uses[0].id.startswith("toolu_"),
          f"anthropic: tool_use ({first.content})")
    if uses:
        back = q + [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": uses[0].id,
                         "content": "Sunny, 21 C"}]}]
        second = client.messages.create(model=model, max_tokens=60,
                                        extra_body=GREEDY, tools=tools,
                                        messages=back)
        check(second.stop_reason in ("end_turn", "max_tokens", "tool_use") and
              prompt_of(second) > prompt_of(first),
              f"anthropic: tool_result round trip ({second.content})")
        with client.messages.stream(model=model, max_tokens=80, extra_body=GREEDY,
                                    tools=tools, tool_choice={"type": "any"},
                                    messages=q) as s:
            streamed_final = s.get_final_message()
        su = [b for b in streamed_final.content if b.type == "tool_use"]
        check(su and su[0].input == uses[0].input and
              streamed_final.stop_reason == "tool_use",
              f"anthropic: streamed tool_use input {su and su[0].input}")

    schema = {"type": "object", "properties": {"city": {"type": "string"}},
              "required": ["city"], "additionalProperties": False}
    js = client.messages.create(
        model=model, max_tokens=40, extra_body=GREEDY, messages=q,
        output_config={"format": {"type": "json_schema", "schema": schema}})
    js_text = "".join(b.text for b in js.content if b.type == "text")
    try:
        ok = isinstance(json.loads(js_text).get("city"), str)
    except ValueError:
        ok = False
    check(ok, f"anthropic: output_config json_schema ({js_text!r})")

    count = client.messages.count_tokens(model=model, messages=q, tools=tools)
    plain = client.messages.count_tokens(model=model, messages=q)
    check(count.input_tokens > plain.input_tokens > 0,
          f"anthropic: count_tokens ({count.input_tokens} with tools > "
          f"{plain.input_tokens})")
    auto = client.messages.create(model=model, max_tokens=1, extra_body=GREEDY,
                                  tools=tools, messages=q)
    check(prompt_of(auto) == count.input_tokens,
          f"anthropic: count_tokens = the prompt of a request with those "
          f"tools ({prompt_of(auto)} = {count.input_tokens})")

    bad = anthropic.Anthropic(base_url=base, api_key="wrong-key")
    for label, fn, exc in [
            ("wrong key", lambda: bad.messages.create(
                model=model, max_tokens=5, messages=q),
             anthropic.AuthenticationError),
            ("no max_tokens", lambda: client.post(
                "/v1/messages", cast_to=object,
                body={"model": model, "messages": q}),
             anthropic.BadRequestError),
            ("unknown model", lambda: client.messages.create(
                model="nope", max_tokens=5, messages=q),
             anthropic.NotFoundError),
            ("image block", lambda: client.messages.create(
                model=model, max_tokens=5, messages=[{"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64",
                                                 "media_type": "image/png",
                                                 "data": "AA=="}}]}]),
             anthropic.BadRequestError)]:
        try:
            fn()
            check(False, f"anthropic: {label} is refused")
        except exc as e:
            body = e.body if isinstance(e.body, dict) else {}
            check(body.get("type") == "error" and
                  body.get("error", {}).get("type") in (
                      "authentication_error", "invalid_request_error",
                      "not_found_error") and body["error"].get("message"),
                  f"anthropic: {label} -> {type(e).__name__} {body}")


def langchain_section(base, key, model):
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> str:
        """Get the current weather of a city."""
        return "Sunny"

    llm = ChatOpenAI(model=model, base_url=base + "/v1", api_key=key,
                     temperature=0, max_tokens=80)
    msg = llm.bind_tools([get_weather], tool_choice="any").invoke(
        "What is the weather in Paris?")
    check(len(msg.tool_calls) >= 1 and msg.tool_calls[0]["name"] == "get_weather" and
          isinstance(msg.tool_calls[0]["args"].get("city"), str),
          f"langchain: bind_tools made a tool call ({msg.tool_calls})")
    auto = llm.bind_tools([get_weather]).invoke("Hello!")
    check(isinstance(auto.content, str) and
          (auto.tool_calls or auto.content),
          f"langchain: auto answers ({auto.content!r}, {auto.tool_calls})")


def reasoning_section(openai, client, model):
    """A template that opens <think> in the prompt (QwQ's): the output is
    reasoning up to </think>; the Responses API gives it as a reasoning
    item, chat as reasoning_content, the raw completion of the same prompt
    says what the text was."""
    import urllib.request
    q = [{"role": "user", "content": "Think about the number 7."}]
    req = urllib.request.Request(
        client.base_url.__str__().rstrip("/").removesuffix("/v1") + "/tokenize",
        data=json.dumps({"model": model, "messages": q}).encode(),
        headers={"Content-Type": "application/json",
                 "Authorization": f"Bearer {client.api_key}"})
    with urllib.request.urlopen(req) as f:
        tok = json.load(f)
    prompt_ids = tok["tokens"]
    raw = client.completions.create(model=model, prompt=prompt_ids,
                                    max_tokens=30, temperature=0)
    text = raw.choices[0].text
    reasoning, sep, content = text.partition("</think>")
    r = client.responses.create(model=model, input=q, temperature=0,
                                max_output_tokens=30)
    kinds = [o.type for o in r.output]
    got = r.output[0].content[0].text if kinds and kinds[0] == "reasoning" else None
    check(kinds[:1] == ["reasoning"] and got == reasoning and
          r.output_text == content.lstrip(),
          f"reasoning opened by the prompt: reasoning item {got!r} = raw "
          f"{reasoning!r}; text {r.output_text!r}")
    c = client.chat.completions.create(model=model, messages=q,
                                       temperature=0, max_tokens=30)
    m = c.choices[0].message
    check(getattr(m, "reasoning_content", None) == reasoning,
          f"reasoning opened by the prompt: chat reasoning_content "
          f"{getattr(m, 'reasoning_content', None)!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--reasoning-model")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    import openai
    client = openai.OpenAI(base_url=a.base + "/v1", api_key=a.key)
    sections = {
        "responses": lambda: responses_section(openai, client, a.model),
        "chat_loop": lambda: chat_loop_section(client, a.model),
        "agents": lambda: agents_section(a.base, a.key, a.model),
        "anthropic": lambda: anthropic_section(a.base, a.key, a.model),
        "langchain": lambda: langchain_section(a.base, a.key, a.model),
    }
    if a.reasoning_model:
        sections["reasoning"] = lambda: reasoning_section(
            openai, client, a.reasoning_model)
    for name, run in sections.items():
        if a.only and name not in a.only.split(","):
            continue
        try:
            run()
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            check(False, f"{name}: raised {type(e).__name__}: {e}")
    print(f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
