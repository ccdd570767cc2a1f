#!/usr/bin/env python3
"""The layering of inferd's code, checked on every build (the
`inferd_layers` target every library depends on): each folder may include
only its own headers and those of the layers below it
(docs/architecture.md "Layers"). An include from a layer above, or of a
library a layer must not use (gRPC or protobuf below the gRPC front end,
cpp-httplib outside the HTTP front end), fails the build naming the file,
the line and the rule.

usage: check_layers.py SOURCE_DIR [STAMP]
"""
import os
import re
import sys

# Folder -> the project folders its files may include (besides its own).
# Bottom up: runtime/common (headers with no project dependency); device;
# runtime's tokenizer, chat, loader; model; gen; engine. The service: request layer; the two front ends on it; the server.
RUNTIME_BELOW = ["runtime/common", "runtime/tokenizer", "runtime/chat",
                 "runtime/loader", "runtime/model", "runtime/gen",
                 "runtime/engine", "device"]
ALLOWED = {
    "runtime/common": [],
    # The registry template (runtime/common/registry.h) is the one header
    # of runtime/common the device layer uses (its kind "device").
    "device": ["runtime/common"],
    "runtime/tokenizer": ["runtime/common"],
    "runtime/chat": ["runtime/common"],
    "runtime/loader": ["runtime/common", "device"],
    "runtime/model": ["runtime/common", "runtime/loader", "device"],
    "runtime/gen": ["runtime/common", "runtime/model", "runtime/loader",
                    "device"],
    "runtime/engine": RUNTIME_BELOW,
    "service/request": RUNTIME_BELOW,
    "service/grpc": RUNTIME_BELOW + ["service/request", "inferd/v1",
                                     "grpc/health"],
    "service/http": RUNTIME_BELOW + ["service/request"],
    "service": RUNTIME_BELOW + ["service/request", "service/grpc",
                                "service/http", "inferd/v1", "grpc/health"],
}
# Third-party headers only some layers may use.
RESTRICTED = [
    (re.compile(r'^(grpcpp|grpc|google/protobuf)/'),
     ["service/grpc", "service"], "gRPC and protobuf"),
    (re.compile(r'^httplib\.h$'), ["service/http"], "cpp-httplib"),
]
PROJECT = re.compile(r'^(device|runtime/[a-z_]+|service(/[a-z_]+)?|inferd/v1|'
                     r'grpc/health)/')
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def layer_of(path):
    """The ALLOWED key a source path belongs to (longest prefix)."""
    best = None
    for key in ALLOWED:
        if path == key or path.startswith(key + "/"):
            if best is None or len(key) > len(best):
                best = key
    return best


def target_of(include):
    """The ALLOWED key (or external prefix) an included project header is
    in; None for other libraries' headers."""
    m = PROJECT.match(include)
    if not m:
        return None
    if include.startswith(("inferd/v1/", "grpc/health/")):
        return m.group(1)
    return layer_of(os.path.dirname(include)) or m.group(1)


def check(source_dir):
    problems = []
    for top in ("device", "runtime", "service"):
        for dirpath, _, files in os.walk(os.path.join(source_dir, top)):
            for name in sorted(files):
                if not name.endswith((".cc", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, source_dir)
                layer = layer_of(os.path.dirname(rel))
                if layer is None:
                    continue
                with open(path, encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        inc = m.group(1)
                        for pattern, layers, what in RESTRICTED:
                            if pattern.match(inc) and layer not in layers:
                                problems.append(
                                    f"{rel}:{lineno}: includes {inc}: {what} "
                                    f"is for {', '.join(layers)} only")
                        target = target_of(inc)
                        if target is None or target == layer:
                            continue
                        if target not in ALLOWED[layer]:
                            problems.append(
                                f"{rel}:{lineno}: includes {inc}: {layer}/ may "
                                f"include only {', '.join(ALLOWED[layer]) or 'itself'}")
    return problems


def main():
    source_dir = sys.argv[1]
    problems = check(source_dir)
    for p in problems:
        print("layering:", p, file=sys.stderr)
    if problems:
        print(f"layering: {len(problems)} include(s) against the layers "
              "(tools/check_layers.py, docs/architecture.md)", file=sys.stderr)
        return 1
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w", encoding="utf-8") as f:
            f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
