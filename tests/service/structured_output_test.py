#!/usr/bin/env python3
"""Structured output (GenerateRequest.response_format) over gRPC against the
real inferd binary:

- random-weight models (llama-tiny: byte-level BPE with padded vocabulary
  rows; stories260K: SentencePiece with byte fallback) sampling at
  temperature 1 with many seeds: every output of many random JSON Schemas
  parses (json.loads) and validates (a small validator below, independent of
  inferd), every regex output fully matches (Python re.fullmatch), every
  choice output is one of the choices, and each ends by itself
  (FINISH_REASON_STOP or EOS, never LENGTH);
- the real SmolLM2-135M-Instruct asked in a chat for JSON objects per schema
  (greedy and sampled) answers valid JSON that validates;
- recursive schemas, open objects, oneOf and Lark grammars work; a keyword
  or regex feature the engine (llguidance) cannot honour is
  INVALID_ARGUMENT naming it. Outputs are validated with the `jsonschema`
  library.

usage: structured_output_test.py --inferd BIN --stubs DIR --test-models DIR
       --smollm2 GGUF --stories DIR
"""
import argparse
import json
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import inferd_testlib as lib  # noqa: E402

ARGS = None


def valid(v, s):
    """v (a json.loads value) against schema s, by the `jsonschema` library
    (Debian python3-jsonschema; independent of inferd and llguidance)."""
    import jsonschema
    cls = jsonschema.validators.validator_for(s, default=jsonschema.Draft202012Validator)
    return cls(s, format_checker=cls.FORMAT_CHECKER).is_valid(v)


def random_schema(r, depth):
    k = r.randrange(2, 9) if depth <= 0 else r.randrange(10)
    if k in (0, 1):
        props = {f"f{i}": random_schema(r, depth - 1) for i in range(r.randint(1, 3))}
        req = [p for p in props if r.random() < 0.5]
        # Closed: with additionalProperties true (the default) a random
        # model could add keys until max_tokens.
        s = {"type": "object", "properties": props, "additionalProperties": False}
        if req:
            s["required"] = req
        return s
    if k == 2:
        mx = r.randint(0, 6)
        return {"type": "string", "minLength": r.randint(0, mx), "maxLength": mx}
    if k == 3:
        lo = r.randint(-500, 500)
        return {"type": "integer", "minimum": lo, "maximum": lo + r.randint(0, 2000)}
    if k == 4:
        return {"type": "number"}
    if k == 5:
        return {"type": r.choice(["boolean", "null"])}
    if k == 6:
        return {"enum": ["alpha", "beta", 3, None, 1.5]}
    if k == 7:
        return {"type": ["string", "null"], "maxLength": 4}
    if k == 8:
        return {"anyOf": [random_schema(r, depth - 1), random_schema(r, depth - 1)]}
    mn = r.randint(0, 2)
    return {"type": "array", "items": random_schema(r, depth - 1),
            "minItems": mn, "maxItems": mn + r.randint(0, 2)}


def generate(stub, pb, model, fmt, seed, prompt="x", messages=None,
             temperature=1.0, max_tokens=500, strict=False, usage=None,
             logprobs=0):
    req = pb.GenerateRequest(model=model)
    if messages:
        for role, content in messages:
            req.messages.add(role=role, content=content)
    else:
        req.prompt = prompt
    req.sampling.max_tokens = max_tokens
    req.sampling.logprobs = logprobs
    req.sampling.temperature = temperature
    req.sampling.seed = seed
    kind, value = fmt
    if kind == "json_schema":
        req.response_format.json_schema = json.dumps(value)
        req.response_format.strict = strict
    elif kind == "regex":
        req.response_format.regex = value
    elif kind == "grammar":
        req.response_format.grammar = value
    else:
        req.response_format.choice.values.extend(value)
    text, finish = "", None
    for chunk in stub.Generate(req, timeout=300):
        text += chunk.text
        if chunk.finish_reason:
            finish = chunk.finish_reason
            if usage is not None:
                usage.append(chunk.usage)
    return text, finish


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--inferd", required=True)
    p.add_argument("--stubs", required=True)
    p.add_argument("--test-models", required=True)
    p.add_argument("--smollm2", required=True)
    p.add_argument("--stories", required=True)
    a = p.parse_args()
    sys.path.insert(0, a.stubs)
    import grpc
    from inferd.v1 import inference_pb2 as pb, inference_pb2_grpc

    models = [("tiny", os.path.join(a.test_models, "llama-tiny")),
              ("stories", a.stories), ("smollm2", a.smollm2)]
    failures = []
    checked = 0
    with lib.InferdProcess(a.inferd, models, log_prefix="inferd-so-") as srv:
        srv.wait_ready(a.stubs, [n for n, _ in models])
        stub = inference_pb2_grpc.InferenceStub(grpc.insecure_channel(srv.address))
        ended = (pb.FINISH_REASON_STOP, pb.FINISH_REASON_EOS)

        # Random models, random schemas, sampling on. A grammar may allow
        # outputs without end (JSON numbers have no digit limit), which a
        # random model can wander into until max_tokens: every output that
        # ends must validate, and most must end.
        r = random.Random(16)
        random_outputs = random_ended = 0
        for i in range(30):
            schema = random_schema(r, 2)
            for model in ("tiny", "stories"):
                for seed in range(3):
                    text, finish = generate(stub, pb, model, ("json_schema", schema),
                                            seed=1000 * i + seed)
                    checked += 1
                    random_outputs += 1
                    if finish == pb.FINISH_REASON_LENGTH:
                        continue
                    random_ended += 1
                    try:
                        ok = finish in ended and valid(json.loads(text), schema)
                    except ValueError:
                        ok = False
                    if not ok:
                        failures.append(f"{model} seed {seed} {json.dumps(schema)}: "
                                        f"{text!r} (finish {finish})")
        print(f"random models: {random_ended} of {random_outputs} outputs ended "
              f"by themselves, each validated")
        if random_ended < 0.7 * random_outputs:
            failures.append(f"only {random_ended} of {random_outputs} random-model "
                            f"outputs ended")
        # Bounded: a random model rarely picks EOS, so an open-ended pattern
        # would run to max_tokens.
        # (\d and \w are Unicode classes in llguidance's regex syntax, as in
        # Rust's; Python's \w leaves out marks, so ASCII classes here.)
        regexes = [r"(yes|no)", r"[0-9]{3}-[a-z]{2,5}( [A-Z][A-Za-z0-9_]{0,8})?",
                   r"[^\n]{0,12}\.", r"(ab|c[de]?){1,4}x", "日本|é{1,6}|😀"]
        for pattern in regexes:
            for model in ("tiny", "stories"):
                for seed in range(4):
                    text, finish = generate(stub, pb, model, ("regex", pattern), seed)
                    checked += 1
                    if finish not in ended or not re.fullmatch(pattern, text):
                        failures.append(f"{model} regex {pattern!r}: {text!r} ({finish})")
        choices = ["red", "green", "blue sky", "日本"]
        for model in ("tiny", "stories"):
            for seed in range(6):
                text, finish = generate(stub, pb, model, ("choice", choices), seed)
                checked += 1
                if finish not in ended or text not in choices:
                    failures.append(f"{model} choice: {text!r} ({finish})")

        # The real SmolLM2 asked for JSON.
        person = {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 40},
            "age": {"type": "integer", "minimum": 0, "maximum": 130},
            "city": {"type": "string", "maxLength": 40}},
            "required": ["name", "age", "city"]}
        shopping = {"type": "object", "properties": {
            "items": {"type": "array", "minItems": 1, "maxItems": 5, "items": {
                "type": "object", "properties": {
                    "item": {"type": "string", "maxLength": 30},
                    "quantity": {"type": "integer", "minimum": 1, "maximum": 99}},
                "required": ["item", "quantity"]}},
            "store": {"enum": ["grocery", "bakery", "market"]}},
            "required": ["items", "store"]}
        weather = {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 30},
            "sunny": {"type": "boolean"},
            "temperature_c": {"type": "number"},
            "date": {"type": "string", "format": "date"}},
            "required": ["city", "sunny", "temperature_c", "date"]}
        # As pydantic writes it: $defs + $ref, a pattern.
        order = {"$defs": {"Line": {"type": "object", "properties": {
            "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
            "qty": {"type": "integer", "minimum": 1, "maximum": 9}},
            "required": ["sku", "qty"], "title": "Line"}},
            "type": "object", "title": "Order", "properties": {
                "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"},
                          "minItems": 1, "maxItems": 3},
                "express": {"type": "boolean"}},
            "required": ["lines", "express"]}
        asks = [(order, "Write an order with two lines as JSON."),
                (person, "Describe a fictional person as JSON with name, age and city."),
                (shopping, "Write a shopping list as JSON: items with quantities, and the store."),
                (weather, "Give today's weather in Paris as JSON.")]
        usages = []
        for schema, question in asks:
            # Sampled, the objects are closed (`strict`, as OpenAI's
            # structured outputs do): open ones let a sampled model add keys
            # until max_tokens.
            for temperature, seed, strict in ((0.0, 0, False), (1.0, 7, True)):
                text, finish = generate(
                    stub, pb, "smollm2", ("json_schema", schema), seed,
                    messages=[("user", question)], temperature=temperature,
                    max_tokens=300, strict=strict, usage=usages)
                checked += 1
                print(f"smollm2 (t={temperature}): {text}")
                try:
                    ok = finish in ended and valid(json.loads(text), schema)
                except ValueError:
                    ok = False
                if not ok:
                    failures.append(f"smollm2 {question!r}: {text!r} ({finish})")
                if temperature == 0.0:
                    # Forced tokens are taken without logits; with logprobs
                    # each is checked on its own row (the verification
                    # path). Greedy, both write the same text.
                    checked_text, _ = generate(
                        stub, pb, "smollm2", ("json_schema", schema), seed,
                        messages=[("user", question)], temperature=0.0,
                        max_tokens=300, logprobs=1)
                    if checked_text != text:
                        failures.append(f"fast-forward changed the greedy text "
                                        f"of {question!r}: {text!r} vs "
                                        f"{checked_text!r} (logprobs path)")

        # Fast-forward: the text these schemas force (property names, the
        # punctuation between them) is fed as drafts, several tokens per
        # forward pass, and every forced token is kept (speculation is off
        # on this server, so every draft is a forced one).
        drafts = sum(u.draft_tokens for u in usages)
        kept = sum(u.accepted_draft_tokens for u in usages)
        outs = sum(u.completion_tokens for u in usages)
        print(f"smollm2: {drafts} of {outs} output tokens were forced "
              f"(fed as drafts), {kept} kept")
        if drafts < 0.1 * outs or kept != drafts:
            failures.append(f"fast-forward: {drafts} forced tokens of {outs}, "
                            f"{kept} kept (want >= 10% forced, all kept)")

        # What the old regular-language engine refused now compiles:
        # recursion, open objects, any-value arrays, oneOf.
        for fmt in [
                ("json_schema", {"$defs": {"node": {"type": "object", "properties": {
                    "v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}},
                    "required": ["v"], "additionalProperties": False}},
                    "$ref": "#/$defs/node"}),
                ("json_schema", {"type": "object", "id": "urn:x", "javaType": "X",
                                 "properties": {"a": {"oneOf": [
                                     {"type": "integer"}, {"type": "string", "maxLength": 3}]}},
                                 "required": ["a"], "additionalProperties": False}),
                ("json_schema", {"type": "array", "maxItems": 2})]:
            text, finish = generate(stub, pb, "smollm2", fmt, 0, temperature=0.0,
                                    messages=[("user", "Answer in JSON.")],
                                    max_tokens=200)
            checked += 1
            print(f"accepted {json.dumps(fmt[1])[:60]}: {text[:200]}")
            if finish == pb.FINISH_REASON_LENGTH:
                continue  # (a recursive schema lets greedy output nest on)
            try:
                ok = finish in ended and valid(json.loads(text), fmt[1])
            except ValueError:
                ok = False
            if not ok:
                failures.append(f"{fmt}: {text!r} ({finish})")

        # A Lark grammar (with a recursive rule).
        grammar = ('start: expr\n'
                   'expr: NUM | "(" expr "+" expr ")"\n'
                   'NUM: /[0-9]{1,2}/\n')
        for model in ("tiny", "stories"):
            for seed in range(4):
                text, finish = generate(stub, pb, model, ("grammar", grammar), seed,
                                        max_tokens=300)
                checked += 1
                depth, good = 0, True
                for ch in text:
                    depth += {"(": 1, ")": -1}.get(ch, 0)
                    good = good and depth >= 0 and (ch.isdigit() or ch in "()+")
                if finish == pb.FINISH_REASON_LENGTH:
                    continue  # a random model may nest past max_tokens
                if not good or depth != 0 or finish not in ended:
                    failures.append(f"{model} grammar: {text!r} ({finish})")

        # What the engine cannot honour is named.
        for fmt, want in [
                (("json_schema", {"type": "array", "uniqueItems": True}),
                 "uniqueItems"),
                (("json_schema", {"type": "object", "if": {"type": "object"}}), "if"),
                (("regex", r"(a)\1"), "response_format.regex"),
                (("regex", r"a(?=b)"), "response_format.regex"),
                (("grammar", "start: missing\n"), "missing"),
                (("choice", []), "response_format.choice needs 1 to")]:
            try:
                generate(stub, pb, "tiny", fmt, 0)
                failures.append(f"{fmt} was accepted")
            except grpc.RpcError as e:
                if (e.code() != grpc.StatusCode.INVALID_ARGUMENT or
                        want not in e.details()):
                    failures.append(f"{fmt}: {e.code()} {e.details()!r}")
                else:
                    print(f"rejected as expected: {e.details()}")
    print(f"{checked} constrained generations checked")
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
