#!/usr/bin/env python3
"""Writes tests/data/regex_cases.jsonl: random patterns in the regex subset
of runtime/gen/regex_dfa.h with strings and whether Python's re.fullmatch
(re.ASCII, so \\d \\w \\s are ASCII as in inferd) matches them. The C++ test
(tests/runtime/gen/regex_dfa_test.cc) checks ByteDfa::FullMatch against
these answers. Deterministic: python3 tools/make_regex_cases.py [--seed N].
"""
import argparse
import json
import random
import re

ALPHABET = ["a", "b", "c", "0", "1", "9", " ", "-", ".", "\n", "é", "日", "😀", "_", "Z"]
META = set("\\.^$|?*+()[]{}")


def esc(c):
    return "\\" + c if c in META else ("\\n" if c == "\n" else c)


class Gen:
    def __init__(self, rng):
        self.r = rng

    def node(self, depth):
        r = self.r
        k = r.random()
        if depth <= 0 or k < 0.35:
            return self.atom()
        if k < 0.6:
            return ("cat", [self.node(depth - 1) for _ in range(r.randint(2, 4))])
        if k < 0.75:
            return ("alt", [self.node(depth - 1) for _ in range(r.randint(2, 3))])
        if k < 0.92:
            q = r.choice(["*", "+", "?", "{n}", "{n,m}", "{n,}", "{,m}"])
            n = r.randint(0, 3)
            m = n + r.randint(0, 3)
            if q == "{n}":
                q = "{%d}" % n
            elif q == "{n,m}":
                q = "{%d,%d}" % (n, m)
            elif q == "{n,}":
                q = "{%d,}" % n
            elif q == "{,m}":
                q = "{,%d}" % m
            lazy = "?" if r.random() < 0.15 else ""
            return ("rep", self.group_if_needed(self.node(depth - 1)), q, lazy)
        return ("grp", r.choice(["(", "(?:", "(?P<g%d>" % r.randint(0, 99)]),
                self.node(depth - 1))

    def group_if_needed(self, n):
        if n[0] in ("cat", "alt", "rep"):
            return ("grp", "(?:", n)
        return n

    def atom(self):
        r = self.r
        k = r.random()
        if k < 0.45:
            return ("lit", r.choice(ALPHABET))
        if k < 0.55:
            return ("dot",)
        if k < 0.65:
            return ("esc", r.choice(["\\d", "\\w", "\\s", "\\D", "\\W", "\\S"]))
        items = []
        for _ in range(r.randint(1, 3)):
            t = r.random()
            if t < 0.5:
                items.append(r.choice(ALPHABET))
            elif t < 0.8:
                a, b = sorted(r.sample(["a", "c", "0", "9", "A", "Z", "é", "日"], 2),
                              key=ord)
                items.append((a, b))
            else:
                items.append(r.choice(["\\d", "\\w", "\\s"]))
        return ("cls", r.random() < 0.25, items)


def render(n):
    t = n[0]
    if t == "lit":
        return esc(n[1])
    if t == "dot":
        return "."
    if t == "esc":
        return n[1]
    if t == "cls":
        out = "[" + ("^" if n[1] else "")
        for it in n[2]:
            if isinstance(it, tuple):
                out += esc(it[0]) + "-" + esc(it[1])
            elif it.startswith("\\"):
                out += it
            else:
                out += "\\" + it if it in "\\]^-[" else ("\\n" if it == "\n" else it)
        return out + "]"
    if t == "cat":
        return "".join(render(k) for k in n[1])
    if t == "alt":
        return "|".join(render(k) for k in n[1])
    if t == "rep":
        return render(n[1]) + n[2] + n[3]
    if t == "grp":
        return n[1] + render(n[2]) + ")"
    raise ValueError(t)


def sample(n, r, pattern_of):
    """A string meant to match n (checked by re afterwards anyway)."""
    t = n[0]
    if t in ("lit",):
        return n[1]
    if t in ("dot", "esc", "cls"):
        p = re.compile(pattern_of(n), re.ASCII | re.DOTALL * 0)
        cands = [c for c in ALPHABET if p.fullmatch(c)]
        return r.choice(cands) if cands else "a"
    if t == "cat":
        return "".join(sample(k, r, pattern_of) for k in n[1])
    if t == "alt":
        return sample(r.choice(n[1]), r, pattern_of)
    if t == "grp":
        return sample(n[2], r, pattern_of)
    if t == "rep":
        q = n[2]
        if q == "*":
            lo, hi = 0, 3
        elif q == "+":
            lo, hi = 1, 3
        elif q == "?":
            lo, hi = 0, 1
        else:
            body = q[1:-1]
            if "," in body:
                a, b = body.split(",")
                lo = int(a) if a else 0
                hi = int(b) if b else lo + 3
            else:
                lo = hi = int(body)
        return "".join(sample(n[1], r, pattern_of) for _ in range(r.randint(lo, hi)))
    raise ValueError(t)


def mutate(s, r):
    s = list(s)
    for _ in range(r.randint(1, 2)):
        k = r.random()
        if k < 0.33 and s:
            del s[r.randrange(len(s))]
        elif k < 0.66:
            s.insert(r.randint(0, len(s)), r.choice(ALPHABET))
        elif s:
            s[r.randrange(len(s))] = r.choice(ALPHABET)
    return "".join(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--patterns", type=int, default=400)
    ap.add_argument("--out", default="tests/data/regex_cases.jsonl")
    a = ap.parse_args()
    r = random.Random(a.seed)
    g = Gen(r)
    lines = []
    while len(lines) < a.patterns:
        node = g.node(r.randint(1, 4))
        if r.random() < 0.1:
            node = ("cat", [node, ("lit", "$")])  # placeholder replaced below
            pat = render(node[1][0]) + "$"
            if r.random() < 0.5:
                pat = "^" + pat
        else:
            pat = render(node)
        try:
            prog = re.compile(pat, re.ASCII)
        except re.error:
            continue
        base = node[1][0] if pat.endswith("$") and node[0] == "cat" else node
        strings = set()
        for _ in range(8):
            strings.add(sample(base, r, render))
        for s in list(strings):
            strings.add(mutate(s, r))
        for _ in range(4):
            strings.add("".join(r.choice(ALPHABET) for _ in range(r.randint(0, 6))))
        cases = [[s, prog.fullmatch(s) is not None] for s in sorted(strings)]
        lines.append(json.dumps({"pattern": pat, "cases": cases}, ensure_ascii=False))
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    n = sum(len(json.loads(l)["cases"]) for l in lines)
    m = sum(c[1] for l in lines for c in json.loads(l)["cases"])
    print(f"{len(lines)} patterns, {n} strings, {m} matching -> {a.out}")


if __name__ == "__main__":
    main()
