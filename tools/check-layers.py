#!/usr/bin/env python3
"""Checks the header layering and header sizes of include/devtap/ (run by .ci/run).

Rules:
  * Layering: every header belongs to one layer of LAYERS below. A `#include <devtap/...>` or
    `#include "devtap/..."` (also inside #if blocks; not in comments) may name only a header of
    its own layer or a lower one, and it must exist. A quoted include relative to the including
    file that lands in include/devtap/ is held to the same rule.
  * Size: no header has more than MAX_LINES lines, except generated ones (SIZE_EXEMPT).

Usage:
  tools/check-layers.py            check; one line per violation, exit 1 if there are any
  tools/check-layers.py --list     print every header with its layer and line count (for docs)
  --root DIR                       the include/devtap/ to check (default: the one of this repo)

Python 3 standard library only.
"""

import argparse
import fnmatch
import os
import re
import sys
from pathlib import Path, PurePosixPath

# The layer table, lowest layer first. A header may include its own layer and the layers above it
# in this list, never one below. Each entry: (layer number, name, patterns). Patterns are matched
# against the path relative to include/devtap/ (POSIX separators): "dir/" means everything below
# that folder, anything else is an exact file name. The first matching entry wins, so the "*"
# catch-all for top-level headers must stay last; a header in a folder no entry names is a
# violation of its own (add the folder here when you create it).
LAYERS = [
    (1, "base", ["config.hpp", "errors.hpp", "log.hpp", "log_impl.hpp", "fwd.hpp", "detail/"]),
    (2, "ring", ["ring/"]),
    (3, "tap", ["tap/"]),
    (4, "cuda", ["cuda/"]),
    (5, "backend", ["backend/"]),
    # outfeed/ is the receiver side's former folder: layer 6 as well while the move is under way.
    (6, "receiver", ["receiver/", "outfeed/"]),
    (7, "print", ["print/"]),
    # Top-level headers not named above: the umbrellas (devtap.hpp, backend.hpp, receiver.hpp,
    # outfeed.hpp, print.hpp, print_host.hpp, format.hpp, cuda.cuh, ...).
    (8, "umbrella", ["*"]),
]

HEADER_SUFFIXES = (".hpp", ".cuh", ".h")  # which files are headers (checked and listed)
MAX_LINES = 400
SIZE_EXEMPT = ["detail/*_generated.hpp"]  # fnmatch patterns, relative to include/devtap/

# `#include <devtap/x>` / `#include "x"`, with optional blanks around '#' (`#  include` in #if blocks).
INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]')


def layer_of(rel):
    """(number, name) of the header at `rel` (relative to include/devtap/), or None if no entry fits."""
    for number, name, patterns in LAYERS:
        for pattern in patterns:
            if pattern == "*":
                if "/" not in rel:
                    return number, name
            elif pattern.endswith("/"):
                if rel.startswith(pattern):
                    return number, name
            elif rel == pattern:
                return number, name
    return None


def strip_comments(text):
    """The text with // and /* */ comments blanked out (newlines kept, so line numbers stay right).
    String and character literals are skipped so that "/*" inside them does not open a comment."""
    out = []
    i, n = 0, len(text)
    state = None  # None, "line", "block", '"' or "'"
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if state is None:
            if c == "/" and nxt == "/":
                state = "line"
                i += 2
                continue
            if c == "/" and nxt == "*":
                state = "block"
                out.append("  ")
                i += 2
                continue
            if c in "\"'":
                state = c
            out.append(c)
        elif state == "line":
            if c == "\\" and nxt == "\n":  # a backslash-continued // comment goes on
                out.append("\n")
                i += 2
                continue
            if c == "\n":
                state = None
                out.append(c)
        elif state == "block":
            if c == "*" and nxt == "/":
                state = None
                out.append("  ")
                i += 2
                continue
            out.append("\n" if c == "\n" else " ")
        else:  # inside a string or character literal
            out.append(c)
            if c == "\\" and nxt:
                out.append(nxt)
                i += 2
                continue
            if c == state or c == "\n":  # closing quote (or an unterminated literal's line end)
                state = None
        i += 1
    return "".join(out)


def line_count(text):
    return len(text.splitlines())


def collect(root):
    """Sorted relative paths of all headers below `root`."""
    headers = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in filenames:
            if f.endswith(HEADER_SUFFIXES):
                headers.append(Path(dirpath, f).relative_to(root).as_posix())
    return sorted(headers)


def check(root, display_root):
    headers = collect(root)
    violations = []

    def report(rel, line, message):
        where = f"{display_root}/{rel}" + (f":{line}" if line else "")
        violations.append(f"{where}: {message}")

    for rel in headers:
        path = root / rel
        text = path.read_text(encoding="utf-8", errors="replace")
        layer = layer_of(rel)
        if layer is None:
            report(rel, 0, "not in any layer (a folder missing from the LAYERS table of "
                           "tools/check-layers.py)")

        lines = line_count(text)
        if lines > MAX_LINES and not any(fnmatch.fnmatch(rel, p) for p in SIZE_EXEMPT):
            report(rel, 0, f"size: {lines} lines, more than {MAX_LINES}")

        for lineno, line in enumerate(strip_comments(text).splitlines(), start=1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            delim, target = m.group(1), m.group(2).strip()
            if target.startswith("devtap/"):
                target_rel = target[len("devtap/"):]
            elif delim == '"':
                # A relative quoted include: the compiler looks next to the including file first.
                # Only ones that land inside include/devtap/ concern us.
                resolved = os.path.normpath(str(PurePosixPath(rel).parent / target))
                if resolved.startswith("..") or not (root / resolved).is_file():
                    continue
                target_rel = PurePosixPath(resolved).as_posix()
            else:
                continue  # not ours: <vector>, <fmt/format.h>, <cuda/atomic>, ...

            if not (root / target_rel).is_file():
                report(rel, lineno, f"includes <devtap/{target_rel}>, which does not exist")
                continue
            target_layer = layer_of(target_rel)
            if layer is None or target_layer is None:
                continue  # already reported as "not in any layer"
            if target_layer[0] > layer[0]:
                report(rel, lineno,
                       f"layering: {rel} (layer {layer[0]} {layer[1]}) includes "
                       f"<devtap/{target_rel}> (layer {target_layer[0]} {target_layer[1]}), "
                       f"a higher layer")
    return headers, violations


def list_headers(root, display_root):
    headers = collect(root)
    print(f"{'layer':<14} {'lines':>5}  header ({display_root}/)")
    for rel in headers:
        layer = layer_of(rel)
        label = f"{layer[0]} {layer[1]}" if layer else "? (none)"
        lines = line_count((root / rel).read_text(encoding="utf-8", errors="replace"))
        print(f"{label:<14} {lines:>5}  {rel}")
    return 0


def main():
    repo = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true",
                        help="print each header with its layer and line count, check nothing")
    parser.add_argument("--root", type=Path, default=repo / "include" / "devtap",
                        help="the include/devtap/ folder to check (default: %(default)s)")
    args = parser.parse_args()

    root = args.root.resolve()
    if not root.is_dir():
        print(f"check-layers: {args.root}: no such folder", file=sys.stderr)
        return 2
    try:
        display_root = root.relative_to(Path.cwd()).as_posix()
    except ValueError:
        display_root = root.as_posix()

    if args.list:
        return list_headers(root, display_root)

    headers, violations = check(root, display_root)
    for v in violations:
        print(v)
    print(f"check-layers: {len(headers)} headers, {len(violations)} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
