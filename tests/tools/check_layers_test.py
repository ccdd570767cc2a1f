#!/usr/bin/env python3
"""tools/check_layers.py on small trees: the repository passes; an include
from a layer above, or of gRPC / cpp-httplib where a layer must not use
them, fails naming the file, the line and the rule.

usage: check_layers_test.py SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(checker, tree):
    return subprocess.run([sys.executable, checker, tree],
                          capture_output=True, text=True)


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    source = sys.argv[1]
    checker = os.path.join(source, "tools", "check_layers.py")
    failures = []
    r = run(checker, source)
    if r.returncode != 0:
        failures.append(f"the repository breaks its own layers:\n{r.stderr}")
    cases = [
        # (file, its include, whether it is allowed)
        ("runtime/engine/a.cc", '"runtime/model/model.h"', True),
        ("runtime/engine/a.cc", '"service/request/requests.h"', False),
        ("runtime/loader/a.cc", '"runtime/engine/engine.h"', False),
        ("device/cpu/a.cc", '"runtime/common/registry.h"', True),
        ("device/cpu/a.cc", '"runtime/loader/weights.h"', False),
        ("runtime/common/a.cc", '"device/device.h"', False),
        ("runtime/model/a.cc", '"inferd/v1/inference.pb.h"', False),
        ("service/request/a.cc", '"service/grpc/convert.h"', False),
        ("service/request/a.cc", '"grpcpp/server_context.h"', False),
        ("service/http/a.cc", '"service/request/requests.h"', True),
        ("service/http/a.cc", '"service/grpc/status.h"', False),
        ("service/http/a.cc", "<httplib.h>", True),
        ("service/grpc/a.cc", "<httplib.h>", False),
        ("service/grpc/a.cc", '"inferd/v1/inference.pb.h"', True),
        ("service/a.cc", '"service/http/http_api.h"', True),
    ]
    for rel, include, allowed in cases:
        with tempfile.TemporaryDirectory() as tree:
            write(tree, rel, f"#include {include}\nint x;\n")
            r = run(checker, tree)
            if allowed and r.returncode != 0:
                failures.append(f"{rel} including {include} was refused: "
                                f"{r.stderr}")
            if not allowed and (r.returncode == 0 or
                                f"{rel}:1: includes" not in r.stderr):
                failures.append(f"{rel} including {include} passed "
                                f"(rc {r.returncode}): {r.stderr}")
    print(f"{len(cases)} cases and the repository checked")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
