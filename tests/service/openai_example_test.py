#!/usr/bin/env python3
"""examples/openai/agent.py, the unmodified `openai` SDK program of the
README, against a real inferd serving scripts/serve.sh's models under their
names (smollm2: the real SmolLM2-135M-Instruct GGUF; minilm: the real
all-MiniLM-L6-v2) over the HTTP API. Checks what the program received:
  chat        non-empty, and the streamed text equals it (greedy);
  tools       tool_choice "required" came back as tool calls of get_weather
              with a string city, finish_reason tool_calls; the tool-result
              round trip was answered;
  json        the JSON Schema output parsed with the required typed fields;
  embeddings  384 dims; the two guitar sentences closer than the weather one;
  errors      an unknown model raised openai.NotFoundError naming it.

usage: openai_example_test.py --inferd BIN --stubs DIR --smollm2 GGUF
       --minilm DIR --venv-python PY
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import inferd_testlib as lib  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--smollm2", required=True)
    ap.add_argument("--minilm", required=True)
    ap.add_argument("--venv-python", required=True)
    a = ap.parse_args()
    failures = []

    def check(cond, what):
        print(("ok    " if cond else "FAIL  ") + what)
        if not cond:
            failures.append(what)

    models = [("smollm2", a.smollm2), ("minilm", a.minilm)]
    with lib.InferdProcess(a.inferd, models, log_prefix="inferd-openai-",
                           extra=["--http-listen", "127.0.0.1:0"]) as srv:
        srv.wait_for(r"(\d+) of \d+ model\(s\) ready after", timeout=300)
        with tempfile.TemporaryDirectory() as tmp:
            out_path = os.path.join(tmp, "out.json")
            p = subprocess.run(
                [a.venv_python, os.path.join(ROOT, "examples/openai/agent.py"),
                 "--base-url", f"http://127.0.0.1:{srv.http_port}/v1",
                 "--json", out_path],
                capture_output=True, text=True, timeout=900)
            print(p.stdout)
            if p.returncode != 0:
                print(p.stderr)
                print("FAIL: examples/openai/agent.py exited", p.returncode)
                return 1
            with open(out_path) as f:
                out = json.load(f)
    check(isinstance(out["chat"], str) and out["chat"] != "",
          f"chat text {out['chat']!r}")
    check(out["stream"] == out["chat"], "the streamed text equals the chat text")
    calls = out["tool_calls"]
    check(len(calls) >= 1 and all(c["name"] == "get_weather" and
                                  isinstance(c["arguments"].get("city"), str)
                                  for c in calls),
          f"tool calls of get_weather with a city: {calls}")
    check(out["tool_finish"] == "tool_calls",
          f"finish_reason {out['tool_finish']!r}")
    check(isinstance(out["after_tool"], str),
          f"the tool-result round trip answered {out['after_tool']!r}")
    j = out["json"]
    check(isinstance(j, dict) and isinstance(j.get("name"), str) and
          isinstance(j.get("age"), int) and set(j) == {"name", "age"},
          f"JSON Schema output {j}")
    cos = out["cosine"]
    check(out["embedding_dims"] == 384 and abs(cos[0] - 1) < 1e-5 and
          cos[1] > cos[2], f"embeddings: dims {out['embedding_dims']}, cos {cos}")
    check("no-such-model" in out["unknown_model"],
          f"unknown model: {out['unknown_model']!r}")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("examples/openai/agent.py: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
