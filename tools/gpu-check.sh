#!/usr/bin/env bash
# The GPU check: built here, run on a lent GPU machine in one short call.
#
#   tools/gpu-check.sh prepare [--build DIR] [PACK]
#       Builds (in DIR, default `build`; configured with CUDA if it is not yet) every GPU program:
#       the GPU tests, the CUDA examples run as tests, the GPU benches and the JAX peer script,
#       and copies them into PACK (default build-gpu-check/pack, ignored by git) with the shared
#       libraries they need that are not part of the C library or the compiler runtime ({fmt},
#       the CUDA runtime) in PACK/lib. Prints PACK's size; the first word of the last line is PACK,
#       relative to the repository root. Fails if PACK is over 64 MiB. CUDA objects older than
#       the newest header (include/, tests/, examples/, bench/) are rebuilt (Meson 1.0 tracks no
#       header dependencies for nvcc).
#   tools/gpu-check.sh run PACK RESULTS
#       Runs every program of PACK, each under a timeout, prints one table, and writes each log,
#       the bench CSVs and env.txt into RESULTS. The timeouts are cut to a budget of 285 s in all
#       (GPU_CHECK_BUDGET_S), so the run ends under 5 minutes; a program left without time is
#       reported NOT RUN and fails the run. Exit status:
#         77  no GPU driver on this machine (no nvidia-smi): one line says so, nothing ran;
#          1  a program failed or timed out, or one skipped although nvidia-smi lists a GPU;
#          0  everything passed.
#
# On the device machine (nvcc, no Debian packages, no network) nothing is built: copy the working
# tree with PACK (the `run` tool's carry), then `tools/gpu-check.sh run PACK "$OUT"`.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
max_pack_mib=64

usage() { awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0" >&2; exit 2; }

# name | path in the build dir | arguments | timeout (s) | what it is
programs() {
  cat <<'LIST'
cuda_outfeed_gpu|tests/cuda/cuda_outfeed_gpu||120|GPU tests: taps from kernels (tests/cuda/outfeed_gpu.cu)
cuda_tap_host|tests/cuda/cuda_tap_host||60|the device claim protocol on host threads
cuda_fingerprint|tests/cuda/cuda_fingerprint_nvcc||30|fingerprints agree between nvcc's passes
registry_cuda|tests/backend/backend_default_registry_cuda|[default]|30|the default registry picks cuda
print_nvcc|tests/print/print_nvcc||90|devtap::print from kernels, over 1 MB from one kernel
cuda_progress|examples/cuda_progress|--as-test|60|example: a kernel's live progress
cuda_histogram|examples/cuda_histogram|--as-test|60|example: warp taps of a histogram
cuda_call|examples/cuda_call|--as-test|60|example: a kernel asks the host mid-run (devtap::call)
cuda_timeline|examples/cuda_timeline|--as-test @RESULTS@|60|example: GPU timestamps, scopes, trace file, recording and replay
kernel_print|examples/kernel_print|--as-test|60|example: printing from kernels
bench_cuda|bench/cuda/devtap-bench-cuda|--csv @RESULTS@/bench-cuda.csv --compare-csv @RESULTS@/bench-gpu.csv|150|bench: taps vs kernel+cudaMemcpy, mailbox, cudaLaunchHostFunc; latency; open
bench_print_gpu|bench/print/devtap-bench-print-gpu||90|bench: devtap::print vs CUDA printf
LIST
}

prepare() {
  local build=build pack=build-gpu-check/pack
  while [[ $# -gt 0 ]]; do
    case $1 in
      --build) build=$2; shift 2 ;;
      -*) usage ;;
      *) pack=$1; shift ;;
    esac
  done
  if [[ ! -f $build/build.ninja ]]; then
    meson setup "$build" -Dcuda=enabled || { echo "gpu-check: configure failed" >&2; exit 1; }
  fi
  if ! meson introspect "$build" --buildoptions | python3 -c '
import json, sys
sys.exit(0 if any(o["name"] == "cuda" and o["value"] != "disabled" for o in json.load(sys.stdin)) else 1)'; then
    echo "gpu-check: $build is configured with -Dcuda=disabled" >&2; exit 1
  fi
  # Kernels built for device debugging run unoptimized: every figure of the run would be wrong.
  # (Meson 1.0 gives nvcc -G for buildtype=debug, even with optimization=2 and debug=false.)
  if ! python3 - "$build/compile_commands.json" <<'PY'
import json, shlex, sys
bad = sorted({e["file"] for e in json.load(open(sys.argv[1])) if e["file"].endswith(".cu") and
              any(a in ("-G", "--device-debug") for a in (e.get("arguments") or shlex.split(e["command"])))})
if bad:
    print(f"gpu-check: {len(bad)} CUDA files of this build compile with -G (device debug; first: {bad[0]}): "
          "reconfigure it: meson configure BUILD -Dbuildtype=release -Doptimization=2", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  then
    exit 1
  fi
  # Meson 1.0 (Debian 12) records no header dependencies for nvcc objects, so an incremental build
  # keeps CUDA objects older than a changed header: remove those, so the pack is never stale. Any
  # header a .cu file may include counts: the library's and those of the tests, examples and benches.
  local newest
  newest=$(find include tests examples bench -type f \( -name '*.hpp' -o -name '*.cuh' -o -name '*.h' \) \
    -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
  [[ -n $newest ]] && find "$build" -name '*.cu.o' ! -newer "$newest" -delete
  local targets=()
  while IFS='|' read -r name path args limit what; do targets+=("$path"); done < <(programs)
  if ! ninja -C "$build" "${targets[@]}"; then
    echo "gpu-check: building the GPU programs failed (is nvcc found? -Dcuda=enabled)" >&2; exit 1
  fi
  rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib"
  while IFS='|' read -r name path args limit what; do
    cp "$build/$path" "$pack/bin/$name"
    strip --strip-debug "$pack/bin/$name"  # the debug info is most of the size; symbols stay for backtraces
    # What the program needs beyond libc and the compiler runtime (present on any machine).
    ldd "$build/$path" | awk '/=> \// {print $3}' | while read -r lib; do
      case $(basename "$lib") in
        libc.so*|libm.so*|libgcc_s.so*|libstdc++.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) ;;
        *) cp -L -n "$lib" "$pack/lib/" ;;
      esac
    done
  done < <(programs)
  programs > "$pack/programs.txt"
  cp bench/cuda/jax_peer.py "$pack/bin/" 2>/dev/null || true
  git -C "$root" rev-parse --short HEAD > "$pack/commit.txt" 2>/dev/null || true
  # How the kernels were compiled, for the figures' record (run copies it into env.txt).
  python3 -c 'import json, sys
e = next(e for e in json.load(open(sys.argv[1])) if e["file"].endswith("outfeed_gpu.cu"))
print(e.get("command") or " ".join(e["arguments"]))' "$build/compile_commands.json" > "$pack/nvcc.txt" 2>/dev/null || true
  local kib
  kib=$(du -sk "$pack" | cut -f1)
  echo "gpu-check: $(programs | wc -l) programs and the JAX peer script; libraries: $(ls "$pack/lib" | tr '\n' ' ')"
  if (( kib > max_pack_mib * 1024 )); then
    echo "gpu-check: $pack is $((kib / 1024)) MiB, over $max_pack_mib MiB" >&2; exit 1
  fi
  echo "$pack ($((kib / 1024)) MiB, $kib KiB): carry it, then: tools/gpu-check.sh run $pack RESULTS"
}

run() {
  [[ $# -eq 2 ]] || usage
  local pack=$1 results=$2
  [[ -f $pack/programs.txt ]] || { echo "gpu-check: $pack is not a prepared folder (tools/gpu-check.sh prepare)" >&2; exit 2; }
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu-check: no GPU driver here (no nvidia-smi): nothing was run"
    exit 77
  fi
  mkdir -p "$results" && results=$(cd "$results" && pwd)
  pack=$(cd "$pack" && pwd)
  local gpus
  gpus=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | grep -c . || true)
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(cat "$pack/commit.txt" 2>/dev/null)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
    echo "cpus: $(nproc)"
    echo "compiled: $(cat "$pack/nvcc.txt" 2>/dev/null)"
  } > "$results/env.txt"
  export LD_LIBRARY_PATH=$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  local status=0 start=$SECONDS rows=()
  # The whole run stays under 5 minutes: each program's timeout is cut to what is left of the budget.
  local budget=${GPU_CHECK_BUDGET_S:-285}
  while IFS='|' read -r name path args limit what; do
    local t0=$SECONDS rc left=$((budget - (SECONDS - start) - 30))  # 30 s kept for the JAX peer
    if (( left < 5 )); then
      rows+=("$(printf '%-18s %-40s %4ss  %s' "$name" "NOT RUN (out of the ${budget}s budget)" 0 "$what")")
      status=1
      continue
    fi
    (( limit > left )) && limit=$left
    # shellcheck disable=SC2086  # the arguments are words
    env -u DEVTAP_PLATFORMS -u DEVTAP_CPU_DEVICES timeout -k 5 "$limit" "$pack/bin/$name" ${args//@RESULTS@/$results} \
      > "$results/$name.log" 2>&1 < /dev/null
    rc=$?
    local verdict
    case $rc in
      0) verdict=PASS ;;
      77) verdict=SKIP; if (( gpus > 0 )); then verdict="FAIL (skipped, but nvidia-smi lists $gpus GPU(s))"; fi ;;
      124|137) verdict="TIMEOUT (${limit}s)" ;;
      *) verdict="FAIL (exit $rc)" ;;
    esac
    [[ $verdict == PASS || $verdict == SKIP ]] || status=1
    rows+=("$(printf '%-18s %-40s %4ss  %s' "$name" "$verdict" "$((SECONDS - t0))" "$what")")
  done < "$pack/programs.txt"
  if [[ -f $pack/bin/jax_peer.py ]]; then
    local t0=$SECONDS rc verdict
    local jax_limit=$((budget - (SECONDS - start)))
    (( jax_limit > 90 )) && jax_limit=90
    (( jax_limit < 5 )) && jax_limit=5
    timeout -k 5 "$jax_limit" python3 "$pack/bin/jax_peer.py" --csv "$results/bench-jax.csv" > "$results/jax_peer.log" 2>&1
    rc=$?
    case $rc in 0) verdict=PASS ;; 77) verdict="SKIP (no JAX with a GPU)" ;; *) verdict="FAIL (exit $rc)"; status=1 ;; esac
    rows+=("$(printf '%-18s %-40s %4ss  %s' jax_peer "$verdict" "$((SECONDS - t0))" "peer: JAX io_callback / debug.callback")")
  fi
  {
    echo "GPU check, $(head -3 "$results/env.txt" | tail -1)"
    printf '%-18s %-40s %5s  %s\n' program result time what
    printf '%s\n' "${rows[@]}"
    echo "total $((SECONDS - start)) s, status $status; logs and CSVs in $results"
  } | tee "$results/summary.txt"
  exit $status
}

case ${1:-} in
  prepare) shift; prepare "$@" ;;
  run) shift; run "$@" ;;
  *) usage ;;
esac
