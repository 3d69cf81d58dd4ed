#!/usr/bin/env python3
"""Runs examples/cpu_timeline into a fresh folder and checks the trace file it wrote, with Python's
json module, and the same trace converted from its recording by devtap-recording.

    check_trace.py --tool DEVTAP_RECORDING --devices N --taps N --scope-ends N --prints N --calls N -- PROGRAM

Checks, for both traces: the file is JSON; every event is well-formed (ph, pid, tid, name; ts for
every non-metadata event); each device's track has its name; on each track the times never go
back (in file order); scopes begin and end in nested pairs with matching names; the counts of taps,
scope ends, printed lines and calls are the given ones; no drop, loss or error markers. And the summary of
the recording names the tap point and the call point with their kinds and counts (no row of an
unknown id); the trace converted to standard output ("-") is JSON only, the same as the file.
"""
import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

PHASES = {"M", "i", "B", "E"}


def check(path: Path, args, problems: list, converted: bool) -> None:
    where = f"{path.name}{' (converted)' if converted else ''}"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        problems.append(f"{where}: not JSON: {e}")
        return
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        problems.append(f"{where}: no traceEvents list")
        return
    names, last_ts, stacks, counts = {}, {}, defaultdict(list), Counter()
    for n, e in enumerate(events):
        bad = lambda why: problems.append(f"{where}: event {n} {why}: {e}")
        if not isinstance(e, dict) or e.get("ph") not in PHASES:
            bad("has no known phase")
            continue
        if not isinstance(e.get("pid"), int) or not isinstance(e.get("tid"), int) or not isinstance(e.get("name"), str):
            bad("lacks pid, tid or name")
            continue
        ph, tid = e["ph"], e["tid"]
        if ph == "M":
            if e["name"] == "thread_name":
                names[tid] = e["args"]["name"]
            continue
        if not isinstance(e.get("ts"), (int, float)):
            bad("has no numeric ts")
            continue
        if tid not in names:
            bad("is on a track with no name")
        if e["ts"] < last_ts.get(tid, float("-inf")):
            bad(f"goes back in time on its track (previous ts {last_ts[tid]})")
        last_ts[tid] = e["ts"]
        cat = e.get("cat")
        if ph == "B":
            stacks[tid].append(e["name"])
            counts["scope"] += 1
        elif ph == "E":
            if not stacks[tid] or stacks[tid].pop() != e["name"]:
                bad("ends a scope that is not the innermost open one")
            counts["scope"] += 1
        elif cat == "tap":
            counts["tap"] += 1
            if not converted and set(e.get("args", {})) != {"step", "loss", "grad_norm", "sequence"}:
                bad("lacks its named fields (devtap::field_names) or its sequence")
        elif cat == "call":
            counts["call"] += 1
            if "sequence" not in e.get("args", {}):
                bad("has no sequence")
        elif cat == "print":
            counts["print"] += 1
            if "line" not in e.get("args", {}):
                bad("has no line")
        elif cat == "marker":
            bad("is a drop, loss or error marker")
    for tid, stack in stacks.items():
        if stack:
            problems.append(f"{where}: track {tid} leaves scopes open: {stack}")
    if len(names) != args.devices:
        problems.append(f"{where}: {len(names)} named device tracks, expected {args.devices}")
    for what, expected in (("tap", args.taps), ("scope", args.scope_ends), ("print", args.prints), ("call", args.calls)):
        if counts[what] != expected:
            problems.append(f"{where}: {counts[what]} {what} events, expected {expected}")
    print(f"{where}: {len(events)} events, {dict(counts)}, tracks {sorted(names.values())}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag in ("--devices", "--taps", "--scope-ends", "--prints", "--calls"):
        parser.add_argument(flag, type=int, required=True)
    parser.add_argument("--tool", required=True, help="the devtap-recording program")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        run = subprocess.run(command + [str(out)], capture_output=True, text=True, check=False)
        sys.stdout.write(run.stdout + run.stderr)
        if run.returncode != 0:
            print(f"FAIL: the example exited {run.returncode}")
            return 1
        check(out / "timeline.json", args, problems, converted=False)
        summary = subprocess.run([args.tool, "summary", str(out / "timeline.devtap")], capture_output=True, text=True)
        sys.stdout.write(summary.stdout + summary.stderr)
        if summary.returncode != 0:
            problems.append(f"devtap-recording summary exited {summary.returncode}")
        else:
            rows = {cells[0]: cells for cells in (line.split() for line in summary.stdout.splitlines()) if cells}
            for name, kind, count in (("step", "tap", args.taps), ("schedule", "call", args.calls)):
                if rows.get(name, [])[1:3] != [kind, str(count)]:
                    problems.append(f"the summary does not show the {kind} point '{name}' with {count} records: "
                                    f"{rows.get(name)}")
            if "unknown" in summary.stdout:
                problems.append("the summary has a row of an unknown id")
        convert = subprocess.run([args.tool, "trace", str(out / "timeline.devtap"), str(out / "converted.json")],
                                 capture_output=True, text=True)
        sys.stdout.write(convert.stdout + convert.stderr)
        if convert.returncode != 0:
            problems.append(f"devtap-recording trace exited {convert.returncode}")
        else:
            check(out / "converted.json", args, problems, converted=True)
            piped = subprocess.run([args.tool, "trace", str(out / "timeline.devtap"), "-"], capture_output=True, text=True)
            try:
                same = piped.returncode == 0 and json.loads(piped.stdout) == json.loads(
                    (out / "converted.json").read_text(encoding="utf-8"))
            except ValueError as e:
                same = False
                problems.append(f"devtap-recording trace ... - wrote more than JSON to standard output: {e}")
            if not same:
                problems.append(f"devtap-recording trace ... - (exit {piped.returncode}) differs from the file it writes")
    for p in problems[:40]:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
