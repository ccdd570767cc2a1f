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
- an unsupported schema keyword or regex feature is INVALID_ARGUMENT naming
  it.

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


def valid(v, s, root=None):
    """v (a json.loads value) against schema s (the keywords inferd supports)."""
    root = s if root is None else root
    if "$ref" in s:
        target = root
        for part in s["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return valid(v, target, root)
    if "const" in s:
        return v == s["const"] and type(v) is type(s["const"])
    if "enum" in s:
        return any(v == e and type(v) is type(e) for e in s["enum"])
    if "anyOf" in s:
        return any(valid(v, a, root) for a in s["anyOf"])
    types = s["type"] if isinstance(s["type"], list) else [s["type"]]

    def is_type(t):
        return {
            "null": v is None,
            "boolean": isinstance(v, bool),
            "string": isinstance(v, str),
            "integer": isinstance(v, int) and not isinstance(v, bool),
            "number": isinstance(v, (int, float)) and not isinstance(v, bool),
            "array": isinstance(v, list),
            "object": isinstance(v, dict),
        }[t]
    if not any(is_type(t) for t in types):
        return False
    if isinstance(v, str):
        if len(v) < s.get("minLength", 0) or len(v) > s.get("maxLength", 1 << 30):
            return False
        if "pattern" in s and not re.search(s["pattern"], v):
            return False
    if isinstance(v, int) and not isinstance(v, bool):
        if "minimum" in s and v < s["minimum"]:
            return False
        if "maximum" in s and v > s["maximum"]:
            return False
    if isinstance(v, list):
        if len(v) < s.get("minItems", 0) or len(v) > s.get("maxItems", 1 << 30):
            return False
        return all(valid(x, s["items"], root) for x in v)
    if isinstance(v, dict):
        props = s.get("properties", {})
        if any(k not in props or not valid(x, props[k], root) for k, x in v.items()):
            return False
        return all(k in v for k in s.get("required", []))
    return True


def random_schema(r, depth):
    k = r.randrange(2, 9) if depth <= 0 else r.randrange(10)
    if k in (0, 1):
        props = {f"f{i}": random_schema(r, depth - 1) for i in range(r.randint(1, 3))}
        req = [p for p in props if r.random() < 0.5]
        s = {"type": "object", "properties": props}
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
             temperature=1.0, max_tokens=500):
    req = pb.GenerateRequest(model=model)
    if messages:
        for role, content in messages:
            req.messages.add(role=role, content=content)
    else:
        req.prompt = prompt
    req.sampling.max_tokens = max_tokens
    req.sampling.temperature = temperature
    req.sampling.seed = seed
    kind, value = fmt
    if kind == "json_schema":
        req.response_format.json_schema = json.dumps(value)
    elif kind == "regex":
        req.response_format.regex = value
    else:
        req.response_format.choice.values.extend(value)
    text, finish = "", None
    for chunk in stub.Generate(req, timeout=300):
        text += chunk.text
        if chunk.finish_reason:
            finish = chunk.finish_reason
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

        # Random models, random schemas, sampling on.
        r = random.Random(16)
        for i in range(30):
            schema = random_schema(r, 2)
            for model in ("tiny", "stories"):
                for seed in range(3):
                    text, finish = generate(stub, pb, model, ("json_schema", schema),
                                            seed=1000 * i + seed)
                    checked += 1
                    try:
                        ok = finish in ended and valid(json.loads(text), schema)
                    except ValueError:
                        ok = False
                    if not ok:
                        failures.append(f"{model} seed {seed} {json.dumps(schema)}: "
                                        f"{text!r} (finish {finish})")
        # Bounded: a random model rarely picks EOS, so an open-ended pattern
        # would run to max_tokens.
        regexes = [r"(yes|no)", r"\d{3}-[a-z]{2,5}( [A-Z]\w{0,8})?",
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
        for schema, question in asks:
            for temperature, seed in ((0.0, 0), (1.0, 7)):
                text, finish = generate(
                    stub, pb, "smollm2", ("json_schema", schema), seed,
                    messages=[("user", question)], temperature=temperature,
                    max_tokens=300)
                checked += 1
                print(f"smollm2 (t={temperature}): {text}")
                try:
                    ok = finish in ended and valid(json.loads(text), schema)
                except ValueError:
                    ok = False
                if not ok:
                    failures.append(f"smollm2 {question!r}: {text!r} ({finish})")

        # Unsupported features are named.
        for fmt, want in [
                (("json_schema", {"$defs": {"node": {"type": "object", "properties": {
                    "next": {"$ref": "#/$defs/node"}}}}, "$ref": "#/$defs/node"}),
                 "recursive '$ref' \"#/$defs/node\" is not supported"),
                (("json_schema", {"type": "object", "properties": {
                    "a": {"type": "string", "oneOf": []}}}),
                 "at /properties/a: 'oneOf' is not supported"),
                (("json_schema", {"type": "array"}), "an array without 'items'"),
                (("regex", r"(a)\1"), "backreference"),
                (("regex", r"a(?=b)"), "lookahead"),
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
