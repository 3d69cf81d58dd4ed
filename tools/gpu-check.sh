#!/usr/bin/env bash
# The whole GPU check in one call, for a machine with a GPU (issue 5):
#   tools/gpu-check.sh [OUTDIR]        (default: $OUT)
# configures and builds with CUDA, runs every GPU test (meson suites `cuda` and `gpu`, then the
# whole suite), the CUDA examples and the GPU bench, and writes into OUTDIR:
#   summary.txt       what ran and how it ended (also on stdout)
#   env.txt           nvidia-smi, nvcc, meson, ninja, compiler versions
#   configure.log build.log
#   test-gpu.log      meson test --suite cuda --suite gpu (each case is its own test)
#   test-all.log      the whole suite; testlog-*.json meson's logs
#   example-*.log     cuda_progress, cuda_histogram
#   bench-cuda.txt bench-cuda.csv
# The device machine has nvcc, meson and ninja (pip) but no Debian packages and no network: {fmt}
# and Catch2 come from .deps/ (TOOLCHAIN.md, "GPU runs"; carry it along). Environment knobs:
#   GPU_CHECK_BUILD=dir     build directory (default build-gpu)
#   GPU_CHECK_BENCH_ARGS    extra arguments for devtap-bench-cuda (e.g. "--mib-per-cell 128")
# Exit status: 0 when every GPU test passed (or skipped) and the build succeeded, else 1.
set -uo pipefail

out=${1:-${OUT:-}}
if [ -z "$out" ]; then
  echo "usage: tools/gpu-check.sh OUTDIR   (or set OUT)" >&2
  exit 2
fi
mkdir -p "$out" && out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
build=${GPU_CHECK_BUILD:-build-gpu}
status=0
: > "$out/summary.txt"
say() { echo "[gpu-check] $*" | tee -a "$out/summary.txt"; }
elapsed() { echo "$(( $(date +%s) - start ))s"; }
start=$(date +%s)

if [ -d .deps/root ]; then
  deps=$root/.deps/root
  export PKG_CONFIG_SYSROOT_DIR=$deps
  export PKG_CONFIG_PATH=$deps/usr/lib/x86_64-linux-gnu/pkgconfig:$deps/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  say "fmt and Catch2 from .deps/"
else
  say "no .deps/: fmt and Catch2 must be installed (see TOOLCHAIN.md, 'GPU runs')"
fi
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH

{
  echo "== nvidia-smi"; nvidia-smi 2>&1
  echo "== nvcc"; nvcc --version 2>&1
  echo "== meson $(meson --version 2>&1), ninja $(ninja --version 2>&1)"
  echo "== c++"; c++ --version 2>&1 | head -1
  echo "== git"; git -C "$root" log --oneline -1 2>&1
  echo "== cpus $(nproc)"
} > "$out/env.txt"
say "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo 'nvidia-smi failed')"

# ---- configure and build (keep going past unrelated failures: the GPU targets still get built)
if [ -d "$build" ]; then setup=(meson setup --reconfigure); else setup=(meson setup); fi
if ! "${setup[@]}" "$build" -Dcuda=enabled -Dbench=true -Dtests=true -Dexamples=true >"$out/configure.log" 2>&1; then
  say "configure FAILED (configure.log)"
  tail -30 "$out/configure.log"
  exit 1
fi
meson configure "$build" -Dcuda_std=c++20 >/dev/null 2>&1
if ninja -C "$build" -k 0 >"$out/build.log" 2>&1; then
  say "build ok ($(elapsed))"
else
  say "build had FAILURES (build.log): $(grep -c '^FAILED' "$out/build.log") target(s); testing what built"
  grep '^FAILED' "$out/build.log" | head -20 | tee -a "$out/summary.txt"
  status=1
fi

# ---- GPU tests: each case of tests/cuda/outfeed_gpu.cu, tap_host, fingerprints, the CUDA examples
meson test -C "$build" --no-rebuild --suite cuda --suite gpu --print-errorlogs --num-processes 1 \
  >"$out/test-gpu.log" 2>&1
gpu_rc=$?
[ -f "$build/meson-logs/testlog.json" ] && cp "$build/meson-logs/testlog.json" "$out/testlog-gpu.json"
say "GPU tests: $(grep -E '^(Ok|Fail|Skipped|Timeout):' "$out/test-gpu.log" | tr -s ' ' | tr '\n' ' ') (test-gpu.log)"
grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT|ERROR)' "$out/test-gpu.log" | tee -a "$out/summary.txt"
if grep -qE '^ *[0-9]+/[0-9]+ .* SKIP ' "$out/test-gpu.log" && nvidia-smi >/dev/null 2>&1; then
  say "note: some GPU tests SKIPPED although nvidia-smi works:"
  grep -E '^ *[0-9]+/[0-9]+ .* SKIP ' "$out/test-gpu.log" | tee -a "$out/summary.txt"
fi
[ $gpu_rc -eq 0 ] || status=1

# ---- the whole suite (CPU tests too), for the record
meson test -C "$build" --no-rebuild --print-errorlogs >"$out/test-all.log" 2>&1
all_rc=$?
[ -f "$build/meson-logs/testlog.json" ] && cp "$build/meson-logs/testlog.json" "$out/testlog-all.json"
say "all tests: $(grep -E '^(Ok|Fail|Skipped|Timeout):' "$out/test-all.log" | tr -s ' ' | tr '\n' ' ') (test-all.log, exit $all_rc)"

# ---- the CUDA examples, as a user runs them
if [ -x "$build/examples/cuda_progress" ]; then
  timeout 60 "$build/examples/cuda_progress" --seconds 3 >"$out/example-cuda_progress.log" 2>&1
  say "cuda_progress: exit $? ($(tail -1 "$out/example-cuda_progress.log"))"
fi
if [ -x "$build/examples/cuda_histogram" ]; then
  timeout 60 "$build/examples/cuda_histogram" >"$out/example-cuda_histogram.log" 2>&1
  say "cuda_histogram: exit $? ($(tail -1 "$out/example-cuda_histogram.log"))"
fi

# ---- the GPU bench (built by meson once bench/meson.build has subdir('cuda'); else built here)
bench=$build/bench/cuda/devtap-bench-cuda
if [ ! -x "$bench" ]; then
  bench=$build/devtap-bench-cuda-direct
  say "bench/cuda not in the Meson build: compiling it with nvcc directly"
  nvcc -std=c++20 -O2 --expt-relaxed-constexpr '-gencode=arch=compute_90,code=[sm_90,compute_90]' \
    -I"$root/include" -DDEVTAP_WITH_CUDA=1 "$root/bench/cuda/cuda.cu" -o "$bench" -lpthread \
    >"$out/bench-build.log" 2>&1 || { say "bench build FAILED (bench-build.log)"; status=1; }
fi
if [ -x "$bench" ]; then
  # shellcheck disable=SC2086
  timeout 400 "$bench" --csv "$out/bench-cuda.csv" ${GPU_CHECK_BENCH_ARGS:-} >"$out/bench-cuda.txt" 2>&1
  bench_rc=$?
  say "bench: exit $bench_rc$([ $bench_rc -eq 77 ] && echo ' (skipped: no usable GPU)') (bench-cuda.txt, bench-cuda.csv)"
  cat "$out/bench-cuda.txt"
  [ $bench_rc -eq 0 ] || [ $bench_rc -eq 77 ] || status=1
fi

say "done in $(elapsed), status $status"
exit $status
