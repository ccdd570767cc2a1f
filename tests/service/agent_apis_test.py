#!/usr/bin/env python3
"""The APIs agents speak (issue 39) through their real clients: a live
inferd with the real SmolLM2-135M-Instruct GGUF (its template shows no
tool-call format: the generic format serves its tools) and qwen3-tiny with
QwQ's real chat template (the prompt opens <think>), behind an API key;
tests/service/agent_apis_client.py runs the openai SDK (Responses API and
the chat agent loop), the OpenAI Agents SDK, the anthropic SDK and
LangChain against it in build/venv and checks what they got.

usage: agent_apis_test.py --inferd BIN --stubs DIR --smollm2 GGUF
       --venv-python PY --test-models DIR
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import inferd_testlib as lib  # noqa: E402

KEY = "agent-test-key"


def reasoning_model(test_models, tmp):
    """qwen3-tiny with QwQ's chat template (it ends the prompt inside
    <think>)."""
    import json
    src = os.path.abspath(os.path.join(test_models, "qwen3-tiny"))
    for f in os.listdir(src):
        if f != "tokenizer_config.json":
            os.symlink(os.path.join(src, f), os.path.join(tmp, f))
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(os.path.join(HERE, "..", "data", "chat_templates",
                           "Qwen-QwQ-32B.jinja"), encoding="utf-8") as f:
        config["chat_template"] = f.read()
    with open(os.path.join(tmp, "tokenizer_config.json"), "w",
              encoding="utf-8") as f:
        json.dump(config, f)
    return tmp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--smollm2", required=True)
    ap.add_argument("--venv-python", required=True)
    ap.add_argument("--test-models", required=True)
    ap.add_argument("--shared")  # passed to every TEST_MODELS test; unused
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="inferd-qwq-") as tmp:
        models = [("smollm2", a.smollm2),
                  ("reasoner", reasoning_model(a.test_models, tmp))]
        with lib.InferdProcess(a.inferd, models, log_prefix="inferd-agents-",
                               extra=["--http-listen", "127.0.0.1:0",
                                      "--api-key", KEY]) as srv:
            srv.wait_for(r"(\d+) of \d+ model\(s\) ready after", timeout=300)
            p = subprocess.run(
                [a.venv_python, os.path.join(HERE, "agent_apis_client.py"),
                 "--base", f"http://127.0.0.1:{srv.http_port}", "--key", KEY,
                 "--model", "smollm2", "--reasoning-model", "reasoner"],
                text=True, timeout=1500)
            code = srv.stop()
    if code != 0:
        print(f"FAIL: inferd exited with {code}")
        return 1
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
