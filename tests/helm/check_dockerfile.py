#!/usr/bin/env python3
"""Offline checks of inferd's Dockerfile (no Docker engine needed).

Rules, in the spirit of hadolint:
  base-pinned      every FROM names a tag (or digest), never :latest
  apt-recommends   apt-get install uses --no-install-recommends
  apt-lists        a RUN that runs apt-get update/install (or install-deps.sh)
                   removes /var/lib/apt/lists in the same layer
  user-nonroot     the final stage ends as a non-root USER
  entrypoint-exec  the final stage's ENTRYPOINT is in exec (JSON) form
  no-add           no ADD (COPY for local files)
  copy-from        the final stage COPYs the entrypoint binary --from a
                   build stage
With --binary BIN also:
  runtime-libs     every shared library `ldd BIN` resolves belongs (dpkg -S)
                   to a package the final stage installs, to a dependency of
                   one (dpkg-query Depends, transitively), or to the base image

--expect-violations RULE,... / --expect-missing PKG,... turn the check into
a negative test: exactly those rules / packages must be reported.
Prints 'N passed, N failed' and exits 1 on any unexpected result.
"""
import argparse
import json
import re
import shlex
import subprocess
import sys

# Packages debian:bookworm-slim already has (its shared libraries).
BASE_IMAGE_PACKAGES = {
    "libc6", "libgcc-s1", "libstdc++6", "zlib1g", "gcc-12-base",
    "libacl1", "libattr1", "libaudit1", "libblkid1", "libbz2-1.0",
    "libcap-ng0", "libcap2", "libcom-err2", "libcrypt1", "libdb5.3",
    "libffi8", "libgcrypt20", "libgmp10", "libgnutls30", "libgpg-error0",
    "libgssapi-krb5-2", "libhogweed6", "libidn2-0", "libk5crypto3",
    "libkeyutils1", "libkrb5-3", "libkrb5support0", "liblz4-1", "liblzma5",
    "libmd0", "libmount1", "libnettle8", "libnsl2", "libp11-kit0",
    "libpcre2-8-0", "libseccomp2", "libselinux1", "libsemanage2",
    "libsepol2", "libsmartcols1", "libsystemd0", "libtasn1-6", "libtinfo6",
    "libtirpc3", "libudev1", "libunistring2", "libuuid1", "libxxhash0",
    "libzstd1",
}


def logical_lines(text):
    """Dockerfile instructions with continuations joined, comments dropped."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not cur and (not line or line.startswith("#")):
            continue
        if cur and line.startswith("#"):
            continue  # comment inside a continued RUN
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        out.append(cur)
        cur = ""
    if cur:
        out.append(cur)
    return out


def parse(text):
    """[(stage_name, [(INSTR, args)])] per FROM."""
    stages = []
    for line in logical_lines(text):
        instr, _, args = line.partition(" ")
        instr = instr.upper()
        args = args.strip()
        if instr == "FROM":
            m = re.match(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$", args, re.I)
            stages.append({"image": m.group(1) if m else args,
                           "name": m.group(2) if m and m.group(2) else str(len(stages)),
                           "instrs": []})
        elif stages:
            stages[-1]["instrs"].append((instr, args))
    return stages


def exec_form(args):
    try:
        v = json.loads(args)
    except ValueError:
        return None
    return v if isinstance(v, list) and all(isinstance(s, str) for s in v) else None


def apt_packages(run):
    """Package names an `apt-get install` in this RUN installs."""
    pkgs = []
    for cmd in re.split(r"&&|;|\|\|", run):
        words = shlex.split(cmd)
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]  # DEBIAN_FRONTEND=... prefix
        if words[:1] == ["apt-get"] and "install" in words:
            rest = words[words.index("install") + 1:]
            pkgs += [w for w in rest if not w.startswith("-")]
    return pkgs


def lint(stages):
    """List of (rule, message) violations."""
    v = []
    names = {s["name"] for s in stages}
    for s in stages:
        img = s["image"]
        if img in names or img == "scratch":
            continue
        if "@sha256:" not in img:
            tag = img.rsplit("/", 1)[-1].partition(":")[2]
            if not tag or tag == "latest":
                v.append(("base-pinned", f"FROM {img}: pin a tag other than latest"))
    for s in stages:
        for instr, args in s["instrs"]:
            if instr == "ADD":
                v.append(("no-add", f"ADD {args}: use COPY"))
            if instr != "RUN":
                continue
            if "apt-get install" in args and "--no-install-recommends" not in args:
                v.append(("apt-recommends", f"RUN {args[:60]}...: add --no-install-recommends"))
            touches_apt = re.search(r"apt-get (update|install)|install-deps\.sh", args)
            if touches_apt and not re.search(r"rm -rf /var/lib/apt/lists", args):
                v.append(("apt-lists", f"RUN {args[:60]}...: rm -rf /var/lib/apt/lists/* in the same RUN"))
    if not stages:
        return v + [("copy-from", "no FROM")]
    final = stages[-1]
    users = [a for i, a in final["instrs"] if i == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        v.append(("user-nonroot", "the final stage must end with a non-root USER"))
    eps = [a for i, a in final["instrs"] if i == "ENTRYPOINT"]
    ep = exec_form(eps[-1]) if eps else None
    if not ep:
        v.append(("entrypoint-exec", "ENTRYPOINT must be in exec form [\"/path/inferd\", ...]"))
    copied = False
    for instr, args in final["instrs"]:
        if instr == "COPY" and ep:
            m = re.match(r"--from=(\S+)\s+.*\s(\S+)$", args)
            if m and m.group(1) in names and m.group(2) == ep[0]:
                copied = True
    if not copied:
        v.append(("copy-from", "the final stage must COPY --from=<build stage> its ENTRYPOINT binary"))
    return v


def packages_of(paths):
    """{path: Debian package owning it}, from one dpkg -S call."""
    def alt(path):
        # usrmerge: /lib/x86_64-linux-gnu/... may be recorded as /usr/lib/...
        return path[4:] if path.startswith("/usr/") else "/usr" + path
    queries = sorted(set(paths) | {alt(p) for p in paths})
    out = subprocess.run(["dpkg", "-S", *queries], capture_output=True, text=True)
    owner = {}
    for line in out.stdout.splitlines():
        pkgs, _, path = line.partition(": ")
        # "libfoo:amd64" (or "a, b" for diversions): take the first package.
        owner[path.strip()] = pkgs.split(",")[0].split(":")[0].strip()
    return {p: owner.get(p) or owner.get(alt(p)) for p in paths}


def depends_closure(pkgs):
    """pkgs plus everything they depend on, as installed on this machine."""
    seen, todo = set(), list(pkgs)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        out = subprocess.run(["dpkg-query", "-W", "-f=${Pre-Depends}, ${Depends}", p],
                             capture_output=True, text=True)
        for alt in out.stdout.split(","):
            for name in alt.split("|"):
                name = name.strip().split(" ")[0].split(":")[0]
                if name and name not in seen:
                    todo.append(name)
    return seen


def linked_libraries(binary):
    out = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"ldd {binary} failed: {out.stderr or out.stdout}")
    libs = []
    for line in out.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (\S+) \(", line)
        if m:
            libs.append((m.group(1), m.group(2)))
        elif "not found" in line:
            raise SystemExit(f"ldd {binary}: {line.strip()}")
    return libs


def missing_runtime_packages(stages, binary):
    installed = []
    for instr, args in stages[-1]["instrs"]:
        if instr == "RUN":
            installed += apt_packages(args)
    provided = depends_closure(installed) | BASE_IMAGE_PACKAGES
    missing = {}
    libs = linked_libraries(binary)
    owners = packages_of([path for _, path in libs])
    for soname, path in libs:
        pkg = owners[path]
        if pkg is None:
            missing.setdefault(f"(no package owns {path})", []).append(soname)
        elif pkg not in provided:
            missing.setdefault(pkg, []).append(soname)
    return missing, installed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dockerfile")
    ap.add_argument("--binary", help="built inferd to check the runtime libraries of")
    ap.add_argument("--expect-violations", default=None)
    ap.add_argument("--expect-missing", default=None)
    a = ap.parse_args()

    with open(a.dockerfile) as f:
        stages = parse(f.read())
    passed = failed = 0

    def result(ok, msg):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAIL: {msg}")

    violations = lint(stages)
    got = sorted({r for r, _ in violations})
    if a.expect_violations is not None:
        want = sorted(set(filter(None, a.expect_violations.split(","))))
        result(got == want, f"violations {got}, expected {want}: {violations}")
    else:
        for rule, msg in violations:
            result(False, f"[{rule}] {msg}")
        result(stages and len(stages) >= 2, "expected a multi-stage build")
        final_from = stages[-1]["image"] if stages else ""
        result(final_from.startswith("debian:bookworm-slim"), f"runtime stage is {final_from}, expected debian:bookworm-slim")
        if not violations:
            passed += 1

    if a.binary:
        missing, installed = missing_runtime_packages(stages, a.binary)
        result(bool(installed), "the final stage installs no packages")
        if a.expect_missing is not None:
            want = sorted(set(filter(None, a.expect_missing.split(","))))
            result(sorted(missing) == want, f"missing {sorted(missing)}, expected {want}")
        else:
            for pkg, sonames in sorted(missing.items()):
                result(False, f"{a.binary} links {', '.join(sonames)} from {pkg}, "
                              "which the runtime stage does not install")
            if not missing:
                passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
