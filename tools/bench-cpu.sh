#!/usr/bin/env bash
# The CPU benchmark suite (docs/performance.md, issue 4) in one command: configures and builds
# build-bench (release), runs devtap-bench-cpu, prints the table, and writes
#   docs/bench-cpu.csv          throughput, one row per (implementation, payload size, producers)
#   docs/bench-cpu-latency.csv  tap -> consumer latency and idle consumer CPU
#   docs/bench-cpu.png          the plot (gnuplot)
# Extra arguments go to the benchmark (see `build-bench/bench/devtap-bench-cpu --help`); with
# --smoke or a filtering argument (--only, --sizes, --no-...) the files go to build-bench/ instead,
# so docs/ keeps full runs; a run on a busy machine (exit 3) does not reach docs/ either.
# Needs the Debian packages in .ci/install-deps.sh (libboost-dev, libconcurrentqueue-dev,
# libreaderwriterqueue-dev, gnuplot-nox). About 2 minutes on 2 cores; keep the machine otherwise idle
# (DEVTAP_BENCH_WAIT_IDLE=600 waits up to 10 minutes for it to become idle).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=${DEVTAP_BENCH_BUILD:-build-bench}
out=docs
for a in "$@"; do  # a partial or smoke run must not overwrite the full results in docs/
  case $a in --smoke|--only|--sizes|--devtap-producers|--no-*) out=$build ;; esac
done

if [[ ! -f $build/build.ninja ]]; then
  meson setup "$build" --buildtype=release -Doptimization=3 -Dcuda=disabled -Dtests=false -Dexamples=false -Dbench=true
fi
meson compile -C "$build" >/dev/null
bin=$build/bench/devtap-bench-cpu
if [[ ! -x $bin ]]; then
  echo "bench-cpu: $bin was not built (are libboost-dev, libconcurrentqueue-dev and libreaderwriterqueue-dev installed?)" >&2
  exit 1
fi

# Other work on the machine skews every figure: optionally wait (up to DEVTAP_BENCH_WAIT_IDLE seconds)
# for the 1-minute load average to fall under 0.7 first.
wait_s=${DEVTAP_BENCH_WAIT_IDLE:-0}
while (( wait_s > 0 )) && awk '{exit !($1 >= 0.7)}' /proc/loadavg; do
  sleep 10; wait_s=$((wait_s - 10))
done
load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" 'BEGIN{exit !(l >= 0.7)}'; then
  echo "bench-cpu: warning: load average $load: other work is running, the figures will be noisy" >&2
fi

# Ahead of other work where allowed (root): background builds then take less from the benchmark.
prio=()
if [[ ${DEVTAP_BENCH_NICE:-1} != 0 ]] && nice -n -20 true 2>/dev/null; then prio=(nice -n -20); fi

# The run writes into $build/run; its files reach docs/ only when the machine stayed quiet (the
# program exits 3 when the load average at start or a calibration loop says it was busy), unless
# DEVTAP_BENCH_ALLOW_BUSY=1.
run=$build/run
mkdir -p "$run" "$out"
allow=()
if [[ ${DEVTAP_BENCH_ALLOW_BUSY:-0} == 1 ]]; then allow=(--allow-busy); fi
echo "bench-cpu: devtap $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- include 2>/dev/null || echo ' (include/ modified)'), $(nproc) cores, ${prio[*]:-default priority}, results -> $out/"
rc=0
"${prio[@]}" "$bin" --csv "$run/bench-cpu.csv" --latency-csv "$run/bench-cpu-latency.csv" --markdown "$build/bench-cpu.md" \
  "${allow[@]}" "$@" || rc=$?
if [[ $rc -eq 3 ]]; then
  echo "bench-cpu: the machine was busy (see above): nothing written to $out/; this run's files are in $run/" \
    "(rerun on a quiet machine, or DEVTAP_BENCH_ALLOW_BUSY=1 to publish them anyway)" >&2
  out=$run
elif [[ $rc -ne 0 ]]; then
  exit "$rc"
elif [[ $out != "$run" ]]; then
  cp "$run/bench-cpu.csv" "$run/bench-cpu-latency.csv" "$out/"
fi

if command -v gnuplot >/dev/null; then
  gnuplot -e "csv='$out/bench-cpu.csv'; png='$out/bench-cpu.png'" bench/plot-cpu.gp
  echo "bench-cpu: wrote $out/bench-cpu.csv, $out/bench-cpu-latency.csv, $out/bench-cpu.png"
else
  echo "bench-cpu: wrote $out/bench-cpu.csv, $out/bench-cpu-latency.csv (no gnuplot: no plot; apt-get install gnuplot-nox)"
fi
exit "$rc"
