#!/usr/bin/env python3
"""Header checks that reuse the build's own flags (tests/headers/meson.build).

    check_headers.py BUILD_DIR SOURCE_DIR self-contained
        every include/devtap/**/*.hpp compiles on its own, and included twice, with the build's
        compiler and flags (-fsyntax-only). A header that fails only for want of the CUDA runtime's
        headers is skipped when the build has no CUDA (no DEVTAP_WITH_CUDA). Also: every macro a
        devtap header (.hpp, .cuh) defines starts with DEVTAP_ (none leaks into users' code).
    check_headers.py BUILD_DIR SOURCE_DIR self-contained CXX
        the same with another C++ compiler (clang++-16 or g++), with the build's flags.
    check_headers.py BUILD_DIR SOURCE_DIR nvcc NVCC
        every header whose text nvcc reads otherwise than a C++ compiler (CUDA_TEXT below) and
        that does not reach {fmt} (nvcc cannot compile {fmt} 9 at C++20) compiles on its own as
        CUDA with NVCC -std=c++20 (both passes), host warnings as errors. In the other headers
        nvcc sees the same includes and declarations as g++ (DEVTAP_HOST_DEVICE only marks them):
        their self-containment is the C++ compilers' check, and everything.cu compiles them all
        as CUDA in one unit (nvcc takes 4 to 12 s a header: 39 of them cost CI 4 minutes).
    check_headers.py BUILD_DIR SOURCE_DIR compiler CXX
        tests/headers/everything.cpp compiles with CXX (the other compiler: g++ 12 or clang++-16)
        and the build's flags, -Wall -Wextra -Wpedantic -Werror included.

The flags are those meson used for everything.cpp (compile_commands.json), so include paths,
{fmt} and CUDA are found as the build finds them.
"""
import concurrent.futures
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

TARGET = "tests/headers/everything.cpp"


def build_flags(build_dir: pathlib.Path):
    """The compiler, its flags (no output, dependency or source arguments) and the directory to run in."""
    entries = json.loads((build_dir / "compile_commands.json").read_text())
    entry = next((e for e in entries if e["file"].replace(os.sep, "/").endswith(TARGET)), None)
    if entry is None:
        sys.exit(f"check_headers: {TARGET} is not in {build_dir}/compile_commands.json")
    argv = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    flags, skip = [], False
    for arg in argv[1:]:
        if skip:
            skip = False
        elif arg in ("-o", "-MQ", "-MF", "-MT"):
            skip = True
        elif arg in ("-c", "-MD", "-MMD") or arg.endswith(TARGET) or arg == entry["file"]:
            pass
        else:
            flags.append(arg)
    return argv[0], flags, entry["directory"]


def reaches_fmt(include: pathlib.Path):
    """Headers (relative to include/) that include {fmt}, directly or through another devtap header."""
    inc = re.compile(r'^\s*#\s*include\s*<([^>]+)>', re.MULTILINE)
    graph = {p.relative_to(include).as_posix(): inc.findall(p.read_text())
             for p in (include / "devtap").rglob("*") if p.suffix in (".hpp", ".cuh")}
    memo = {}

    def visit(h):
        if h not in memo:
            memo[h] = False
            memo[h] = any(i.startswith("fmt/") or (i in graph and visit(i)) for i in graph.get(h, []))
        return memo[h]

    return {h for h in graph if visit(h)}


# Text that makes nvcc read a header otherwise than g++: a test of the macros only nvcc defines
# (every CUDA keyword in a header stands under one, or in a .cuh file), the CUDA runtime, devtap's
# cuda/ folder. (DEVTAP_WITH_CUDA is no such text: the C++ check of a CUDA build defines it too.)
CUDA_TEXT = re.compile(r"__CUDACC__|__CUDA_ARCH__|cuda_runtime|devtap/cuda/")


def nvcc_self_contained(nvcc, source_dir: pathlib.Path) -> int:
    include = source_dir / "include"
    skip = reaches_fmt(include)
    candidates = [p for p in (include / "devtap").rglob("*")
                  if p.suffix in (".hpp", ".cuh") and p.relative_to(include).as_posix() not in skip]
    headers = sorted(p.relative_to(include).as_posix() for p in candidates
                     if p.suffix == ".cuh" or CUDA_TEXT.search(p.read_text()))
    host_only = len(candidates) - len(headers)
    flags = ["-std=c++20", "-x", "cu", f"-I{include}", "--expt-relaxed-constexpr", "-DDEVTAP_WITH_CUDA=1",
             "-gencode=arch=compute_90,code=sm_90", "-Werror=all-warnings", "-Xcompiler=-Wall,-Wextra,-Werror"]

    def check(header):
        with tempfile.NamedTemporaryFile("w", suffix=".cu") as src:
            src.write(f"#include <{header}>\n#include <{header}>\n")
            src.flush()
            return header, subprocess.run([nvcc, *flags, "-c", src.name, "-o", os.devnull],
                                          capture_output=True, text=True, check=False)

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for header, run in pool.map(check, headers):
            if run.returncode == 0:
                print(f"ok   {header}")
            else:
                failed += 1
                print(f"FAIL {header}\n{run.stderr}")
    print(f"{nvcc}: {len(headers) - failed} headers compile on their own as CUDA, {failed} do not; "
          f"{host_only} read the same under nvcc as under g++ (everything.cu has them); "
          f"{len(skip)} reach {{fmt}} and are left to the C++ compilers")
    return 1 if failed else 0


def self_contained(compiler, flags, cwd, source_dir: pathlib.Path) -> int:
    include = source_dir / "include"
    with_cuda = any("DEVTAP_WITH_CUDA" in f for f in flags)
    headers = sorted(p.relative_to(include).as_posix() for p in (include / "devtap").rglob("*.hpp"))

    def check(header):
        text = f"#include <{header}>\n#include <{header}>\n"
        run = subprocess.run([compiler, *flags, "-fsyntax-only", "-x", "c++", "-"], input=text, cwd=cwd,
                             capture_output=True, text=True, check=False)
        needs_cuda = run.returncode != 0 and not with_cuda and "cuda_runtime" in run.stderr
        return header, None if needs_cuda else run

    define = re.compile(r"^\s*#\s*define\s+(\w+)", re.MULTILINE)
    bad_macros = [f"{path.relative_to(include)} defines {name}"
                  for path in sorted(p for p in (include / "devtap").rglob("*") if p.suffix in (".hpp", ".cuh"))
                  for name in define.findall(path.read_text()) if not name.startswith("DEVTAP_")]
    for bad in bad_macros:
        print(f"FAIL {bad}: devtap's macros start with DEVTAP_")

    failed = skipped = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for header, run in pool.map(check, headers):
            if run is None:
                skipped += 1
                print(f"skip {header} (needs the CUDA runtime's headers; this build has no CUDA)")
            elif run.returncode == 0 and not run.stderr.strip():
                print(f"ok   {header}")
            else:
                failed += 1
                print(f"FAIL {header}\n{run.stderr}")
    print(f"{compiler}: {len(headers) - failed - skipped} headers compile on their own, {failed} do not, "
          f"{skipped} skipped; {len(bad_macros)} macros without the DEVTAP_ prefix")
    return 1 if failed or bad_macros else 0


def other_compiler(compiler, flags, cwd, source_dir: pathlib.Path) -> int:
    command = [compiler, *flags, "-c", str(source_dir / TARGET), "-o", os.devnull]
    print(shlex.join(command), flush=True)
    return subprocess.run(command, cwd=cwd, check=False).returncode


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[3] not in ("self-contained", "compiler", "nvcc"):
        sys.exit(__doc__)
    build_dir, source_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    if sys.argv[3] == "nvcc":
        return nvcc_self_contained(sys.argv[4], source_dir)
    compiler, flags, cwd = build_flags(build_dir)
    if sys.argv[3] == "self-contained":
        return self_contained(sys.argv[4] if len(sys.argv) > 4 else compiler, flags, cwd, source_dir)
    return other_compiler(sys.argv[4], flags, cwd, source_dir)


if __name__ == "__main__":
    sys.exit(main())
