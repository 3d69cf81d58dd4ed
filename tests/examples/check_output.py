#!/usr/bin/env python3
"""Runs an example and checks what it printed: the examples' tests (examples/meson.build).

    check_output.py [--expect REGEX]... [--reject REGEX]... -- PROGRAM [ARGS...]

Passes when PROGRAM exits 0, every --expect regex matches some line of its stdout (re.search; in
any order: devices print concurrently), and no --reject regex matches a line of stdout or stderr. Exit code 77 (skip) from PROGRAM is passed on. Prints the program's output,
then what did not match.
"""
import argparse
import re
import subprocess
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expect", action="append", default=[], metavar="REGEX")
    parser.add_argument("--reject", action="append", default=[], metavar="REGEX")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no program given")

    run = subprocess.run(command, capture_output=True, text=True, check=False)
    sys.stdout.write(run.stdout)
    sys.stdout.write(run.stderr)
    if run.returncode == 77:
        return 77

    problems = []
    if run.returncode != 0:
        problems.append(f"exit code {run.returncode}")
    lines = run.stdout.splitlines()
    problems += [f"no line matches {pattern!r}" for pattern in args.expect
                 if not any(re.search(pattern, line) for line in lines)]
    for pattern in args.reject:
        problems += [f"line matches rejected {pattern!r}: {line}"
                     for line in lines + run.stderr.splitlines() if re.search(pattern, line)]

    for problem in problems:
        print(f"check_output: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
