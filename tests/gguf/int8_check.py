"""The check of greedy output under inferd's int8 activation policy, shared
by the GGUF tests. Rounding activations to int8 turns float-level
differences (float32 vs the reference's float64) into different int8
levels, so token equality with any reference holds only until a near-tie.
Teacher-forced instead (tests/gguf/gguf_reference.py --score, with inferd's
int8 activation quantization emulated): every token must be the reference's
argmax up to the first one that is not, and that one must be a near-tie:
among the reference's top 3 and within NEAR_TIE of its largest logit
(vLLM's check_logprobs_close, with a gap bound). After it the sequences
diverge and are not compared.
"""
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))

# The largest logit gap (nats) of the first departure from the reference's
# argmax: a near-tie. (Observed on the real SmolLM2 Q4_1: up to 0.2.)
NEAR_TIE = 0.5


class Tally:
    """Tokens checked, and those that were the reference's argmax before a
    first departure, over several check_int8 calls."""

    def __init__(self):
        self.agreed = self.total = 0

    def line(self):
        return (f"int8 activations: {self.agreed} of {self.total} tokens the "
                "reference's argmax before a first near-tie")


def check_int8_into(check, tally, venv_python, ref_args, prompts, outputs, label):
    """check_int8, its failures passed to check(False, message) and its
    counts added to tally."""
    bad, agreed, total = check_int8(venv_python, ref_args, prompts, outputs, label)
    for f in bad:
        check(False, f)
    tally.agreed += agreed
    tally.total += total


def check_int8(venv_python, ref_args, prompts, outputs, label):
    """ref_args: the model's gguf_reference.py arguments (--gguf F, or
    --hf-dir D --quantize T). Returns (failure messages, tokens that were
    the reference's argmax before the first departure, tokens)."""
    ref = subprocess.run(
        [venv_python, os.path.join(HERE, "gguf_reference.py")] + ref_args +
        ["--activations", "int8",
         "--score", json.dumps([[p, g] for p, g in zip(prompts, outputs)])],
        capture_output=True, timeout=1200)
    if ref.returncode != 0:
        return ["reference: " + ref.stderr.decode()[-3000:]], 0, 0
    failures, agreed = [], 0
    for i, sc in enumerate(json.loads(ref.stdout)["scores"]):
        if not sc:
            failures.append(f"{label} prompt {i}: no tokens")
            continue
        dep = next(((j, r, g) for j, (r, g) in enumerate(sc) if r > 0), None)
        agreed += len(sc) if dep is None else dep[0]
        if dep is not None:
            j, rank, gap = dep
            if rank >= 3 or gap > NEAR_TIE:
                failures.append(
                    f"{label} prompt {i}: token {j} of {outputs[i]} is rank "
                    f"{rank}, {gap:.4f} below the reference's best (near-tie "
                    f"bound {NEAR_TIE})")
    return failures, agreed, sum(len(g) for g in outputs)
