#!/usr/bin/env python3
"""Draws a devtap trace file (receiver_options::trace_file) as a PNG with gnuplot: one row per
device, scopes as bars (nested ones thinner), taps as dots, printed lines as triangles, markers as
crosses. The picture of docs/timeline.md is this script's, from examples/cpu_timeline's trace:

    DEVTAP_CPU_DEVICES=4 build/examples/cpu_timeline /tmp/t
    tools/plot-timeline.py /tmp/t/timeline.json docs/timeline.png [--first-ms 8]

Python 3 standard library and gnuplot only.
"""
import argparse
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

COLOURS = ["#9ecae1", "#fd8d3c", "#74c476", "#9e9ac8", "#fdd0a2", "#c7e9c0"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("png")
    parser.add_argument("--first-ms", type=float, default=None, help="draw only the first milliseconds")
    args = parser.parse_args()

    events = json.loads(Path(args.trace).read_text(encoding="utf-8"))["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    timed = [e for e in events if e["ph"] != "M"]
    if not timed:
        print("plot-timeline: no events", file=sys.stderr)
        return 1
    t0 = min(e["ts"] for e in timed)
    limit = args.first_ms * 1000 if args.first_ms else float("inf")
    row = {tid: n for n, tid in enumerate(sorted(tracks))}
    names, bars, points = {}, defaultdict(list), defaultdict(list)
    stacks = defaultdict(list)
    for e in timed:
        t = e["ts"] - t0
        y = row.get(e["tid"], 0)
        if e["ph"] == "B":
            stacks[e["tid"]].append((e["name"], t))
        elif e["ph"] == "E" and stacks[e["tid"]]:
            name, start = stacks[e["tid"]].pop()
            depth = len(stacks[e["tid"]])
            if start <= limit:
                names.setdefault(name, (depth, len(names)))
                half = 0.36 - 0.1 * depth
                bars[name].append(f"{(start + min(t, limit)) / 2000} {y} {(min(t, limit) - start) / 2000} {half}")
        elif t <= limit:
            points[e.get("cat", "tap")].append(f"{t / 1000} {y}")

    with tempfile.TemporaryDirectory() as tmp:
        plots = []
        # Outer scopes first, so that the ones nested in them are drawn on top.
        for index, (name, _) in enumerate(sorted(names.items(), key=lambda kv: kv[1])):
            data = Path(tmp) / f"bar{index}.dat"
            data.write_text("\n".join(bars[name]) + "\n")
            plots.append(f"'{data}' using 1:2:3:4 with boxxyerror fs solid 0.9 noborder "
                         f"lc rgb '{COLOURS[index % len(COLOURS)]}' title 'scope {name}'")
        style = {"tap": "pt 7 ps 0.6 lc rgb '#d62728'", "print": "pt 9 ps 1.2 lc rgb '#2ca02c'",
                 "marker": "pt 2 ps 1.5 lc rgb 'black'", "call": "pt 5 ps 0.8 lc rgb '#1f77b4'"}
        for cat, rows in points.items():
            data = Path(tmp) / f"pt_{cat}.dat"
            data.write_text("\n".join(rows) + "\n")
            plots.append(f"'{data}' using 1:2 with points {style.get(cat, 'pt 1')} title '{cat}s'")
        labels = ", ".join(f"'{tracks[tid]}' {n}" for tid, n in row.items())
        script = f"""
set terminal pngcairo size 1400,{180 + 70 * len(row)} font ",11"
set output '{args.png}'
set title "devtap trace: {len(timed)} events on {len(row)} devices (scopes as bars, taps as dots)"
set xlabel "ms since the first event"
set ytics ({labels})
set yrange [-0.6:{len(row) - 0.4}]
set key outside right top
set grid xtics
plot {", ".join(plots)}
"""
        gp = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        if gp.returncode != 0:
            print(gp.stderr, file=sys.stderr)
            return 1
    print(f"plot-timeline: wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
