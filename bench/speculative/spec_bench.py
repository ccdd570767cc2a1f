#!/usr/bin/python3
"""Speculative decoding by prompt lookup: decode speed of one stream with
and without drafts on a repetitive task (rewrite a given text with a small
edit), over gRPC against a running inferd.

usage: spec_bench.py --address HOST:PORT --stubs BUILD/python --model NAME
         [--chat] [--drafts 0,4,8] [--runs 3] [--max-tokens 256]
         [--instruction TEXT | --prompt TEXT]

Each run sends the same greedy request per draft setting, in alternating
order; it prints, per setting, the median decode rate (completion tokens /
(last message - first token message)), end-to-end seconds, and the drafts
accepted. The tokens must be identical across settings (checked).
"""
import argparse
import statistics
import sys
import time

TEXT = ("The old lighthouse keeper climbed the winding stairs every evening "
        "at dusk. He lit the great lamp, wiped the salt from the windows, and "
        "wrote the weather in his logbook: wind from the west, clouds low, "
        "sea calm. Ships passed far out on the water, and none of them knew "
        "his name, but every one of them saw his light. In the morning he "
        "put out the lamp, climbed down the stairs, and made a pot of tea.")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--address", required=True)
    p.add_argument("--stubs", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--chat", action="store_true",
                   help="send a chat message (instruct models)")
    p.add_argument("--drafts", default="0,4,8")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--instruction", default=None,
                   help="the chat message (default: rewrite TEXT with an edit)")
    p.add_argument("--prompt", default=None,
                   help="the plain prompt (default: TEXT, then its start)")
    a = p.parse_args()
    sys.path.insert(0, a.stubs)
    import grpc
    from inferd.v1 import inference_pb2 as pb, inference_pb2_grpc

    stub = inference_pb2_grpc.InferenceStub(grpc.insecure_channel(a.address))
    instruction = a.instruction or (
        "Rewrite the following text exactly as it is, but replace "
        "'lighthouse keeper' with 'old sailor':\n\n" + TEXT)
    prompt = a.prompt or TEXT + "\n\n" + TEXT[:80]

    def request(drafts):
        req = pb.GenerateRequest(model=a.model)
        if a.chat:
            req.messages.add(role="user", content=instruction)
        else:
            req.prompt = prompt
        req.sampling.temperature = 0.0
        req.sampling.max_tokens = a.max_tokens
        req.speculative.num_draft_tokens = drafts
        return req

    settings = [int(x) for x in a.drafts.split(",")]
    rates = {d: [] for d in settings}
    e2e = {d: [] for d in settings}
    acc = {}
    tokens = {}
    for run in range(a.runs + 1):  # run 0 warms up
        order = settings if run % 2 else list(reversed(settings))
        for d in order:
            t0 = time.perf_counter()
            first = last = None
            got = []
            for c in stub.Generate(request(d), timeout=600):
                now = time.perf_counter()
                if c.token_ids:
                    first = first or now
                    last = now
                    got.extend(c.token_ids)
                if c.finish_reason:
                    acc[d] = (c.usage.accepted_draft_tokens,
                              c.usage.draft_tokens)
            if run == 0:
                tokens[d] = got
                continue
            if got != tokens[settings[0]]:
                print(f"MISMATCH: drafts={d} gave other tokens")
                return 1
            rates[d].append((len(got) - 1) / (last - first))
            e2e[d].append(now - t0)
    print(f"model={a.model} tokens={len(tokens[settings[0]])} "
          f"runs={a.runs}")
    base = statistics.median(rates[settings[0]])
    print("drafts  decode tok/s  e2e s  speed-up  accepted/drafted")
    for d in settings:
        r = statistics.median(rates[d])
        print(f"{d:6d}  {r:12.1f}  {statistics.median(e2e[d]):5.2f}  "
              f"{r / base:8.2f}  {acc[d][0]}/{acc[d][1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
