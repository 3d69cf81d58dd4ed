#!/usr/bin/env python3
"""Finds CUDA kernels that nvcc compiled to run off their end.

When device code reaches something nvcc treats as undefined (a host-only call hidden by
`nv_exec_check_disable`, `strlen` behind `std::string_view("text")`, a default-constructed tuple
of a print record and a span in nvcc 13), it compiles the rest of the kernel as unreachable,
silently: the PTX entry then has no `ret`, and on a GPU the kernel runs into whatever follows it
(an illegal instruction, or prints that vanish; both seen on an H200). This builds the PTX of
every .cu file of a configured build (its compile_commands.json, with -ptx for one virtual
architecture) and fails if any kernel has no `ret`, `exit` or `trap`.

  tools/check-ptx.py [BUILD_DIR]     (default: build; configured with -Dcuda=enabled)
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ENTRY = re.compile(r"^\.visible \.entry (\S+)\(|^\.entry (\S+)\(", re.M)
ENDS = re.compile(r"^\s*(?:@%p\d+\s+)?(?:ret|exit|trap)\s*;", re.M)


def ptx_command(entry, out):
    """The entry's nvcc command, made to write PTX for compute_90 to `out` (device pass only)."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    keep, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-c", "-g", "-G", "-lineinfo") or a.startswith("-gencode") or a.startswith("--generate-code"):
            continue
        if a in ("-o", "-MF", "-MQ", "-MT"):
            skip = True
            continue
        if a in ("-MD", "-MMD"):
            continue
        keep.append(a)
    if keep and os.path.basename(keep[0]) == "nvcc" and shutil.which(keep[0]) is None:
        keep[0] = "/usr/local/cuda/bin/nvcc"  # where meson found it, off PATH
    return keep + ["-ptx", "-arch=compute_90", "-o", out]


def kernels_without_end(ptx):
    """Names of the .entry functions whose body has no ret, exit or trap."""
    bad = []
    starts = [(m.start(), m.group(1) or m.group(2)) for m in ENTRY.finditer(ptx)]
    for i, (start, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(ptx)
        body = ptx[start:end]
        close = re.search(r"^}", body, re.M)
        if not ENDS.search(body[: close.end()] if close else body):
            bad.append(name)
    return bad


def check(entry, tmp):
    src = entry["file"]
    out = os.path.join(tmp, re.sub(r"[^A-Za-z0-9_.]", "_", src) + ".ptx")
    run = subprocess.run(ptx_command(entry, out), cwd=entry["directory"], capture_output=True, text=True)
    if run.returncode != 0:
        return src, None, run.stderr[-2000:]
    with open(out) as f:
        return src, kernels_without_end(f.read()), ""


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    db = os.path.join(build, "compile_commands.json")
    if not os.path.exists(db):
        print(f"check-ptx: {db} not found (configure the build first)", file=sys.stderr)
        return 2
    with open(db) as f:
        entries = [e for e in json.load(f) if e["file"].endswith(".cu")]
    seen, unique = set(), []
    for e in entries:  # one check per source file
        if e["file"] not in seen:
            seen.add(e["file"])
            unique.append(e)
    if not unique:
        print(f"check-ptx: no .cu file in {db} (is the build configured with -Dcuda=enabled?)", file=sys.stderr)
        return 2
    failed = 0
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for src, bad, error in pool.map(lambda e: check(e, tmp), unique):
            if bad is None:
                print(f"check-ptx: {src}: nvcc -ptx failed:\n{error}", file=sys.stderr)
                failed += 1
            for name in bad or []:
                print(f"check-ptx: {src}: kernel {name} has no ret: nvcc compiled part of it as unreachable",
                      file=sys.stderr)
                failed += 1
    print(f"check-ptx: {len(unique)} .cu files, {failed} problem(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
