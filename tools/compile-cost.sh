#!/usr/bin/env bash
# Compile cost of devtap, measured: builds the fixed translation units in tools/compile-cost/ into
# programs (compile + link, -O2) and prints, per compiler, the CPU time (user+sys of every process
# the build runs) and the peak RSS of each, with the ratio to the baseline (a) measured in the same
# run. Each figure is the median of --reps builds. The units:
#   (a) a_baseline   the same program by hand: std::jthread + condition variable + {fmt}
#   (b) b_callable   one tap, a callable consumer
#   (c) c_coroutine  one tap, a coroutine consumer
#   (d) d_print      devtap::print from a cpu device + its host formatter
#   (e) e_include    includes devtap.hpp, uses nothing
#   (f) f_std_floor  no devtap: the standard headers devtap.hpp includes, + {fmt} (the floor under e)
#
#   tools/compile-cost.sh [--reps N] [--compilers "g++ clang++-16"] [--mode header-only|compiled|pch]
#                         [--csv] [--units "a b c"]
#   --mode compiled: against the compiled mode's library (built here with meson, -Dcompiled=true)
#   --mode pch:      each unit with devtap.hpp as a precompiled header (built once, not counted)
# Run it on a quiet machine: the ratios are meant to be compared, not the seconds.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
units_dir=$repo/tools/compile-cost
reps=3
compilers="g++ clang++-16"
mode=header-only
csv=0
units="a b c d e f"
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --compilers) compilers=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --units) units=$2; shift 2 ;;
    --csv) csv=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "compile-cost: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "compile-cost: --reps wants a positive integer, got '$reps'" >&2; exit 2; }
case $mode in header-only|compiled|pch) ;; *) echo "compile-cost: --mode is header-only, compiled or pch, got '$mode'" >&2; exit 2 ;; esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/devtap-compile-cost.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fmt_flags=$(pkg-config --cflags --libs fmt)

# Runs a command, prints "cpu_seconds peak_rss_kib" of all its descendants (getrusage CHILDREN).
measure() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
if r.returncode != 0:
    sys.stderr.write(r.stderr.decode()); sys.exit(r.returncode)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{u.ru_utime + u.ru_stime:.3f} {u.ru_maxrss}")
PY
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

extra_flags=()
lib_flags=()
if [[ $mode == compiled ]]; then
  build=$tmp/devtap-compiled
  meson setup "$build" "$repo" -Dcompiled=true -Dcuda=disabled -Dtests=false -Dexamples=false -Dbench=false \
    --buildtype=release -Doptimization=3 >/dev/null
  meson compile -C "$build" >/dev/null
  lib=$(find "$build" -maxdepth 1 -name 'libdevtap.a' -o -maxdepth 1 -name 'libdevtap.so' | head -1)
  extra_flags=(-DDEVTAP_COMPILED=1)
  lib_flags=("$lib")
fi

[[ $csv == 1 ]] && echo "compiler,mode,unit,cpu_s,peak_rss_mib,cpu_ratio,rss_ratio"
for cxx in $compilers; do
  command -v "$cxx" >/dev/null || { echo "compile-cost: $cxx not found" >&2; exit 1; }
  pch_flags=()
  if [[ $mode == pch ]]; then
    # The header as a precompiled header, built once with the units' flags (not counted).
    mkdir -p "$tmp/pch-$cxx"
    printf '#include <devtap/devtap.hpp>\n' > "$tmp/pch-$cxx/devtap_pch.hpp"
    if [[ $cxx == clang* ]]; then
      "$cxx" -std=c++20 -O2 -pthread -I"$repo/include" -x c++-header "$tmp/pch-$cxx/devtap_pch.hpp" \
        -o "$tmp/pch-$cxx/devtap_pch.hpp.pch"
      pch_flags=(-include-pch "$tmp/pch-$cxx/devtap_pch.hpp.pch")
    else
      "$cxx" -std=c++20 -O2 -pthread -I"$repo/include" -x c++-header "$tmp/pch-$cxx/devtap_pch.hpp" \
        -o "$tmp/pch-$cxx/devtap_pch.hpp.gch"
      pch_flags=(-include "$tmp/pch-$cxx/devtap_pch.hpp")
    fi
  fi
  [[ $csv == 1 ]] || printf '\n%s -O2, %s, median of %d (cpu = user+sys of the whole build)\n%-14s %8s %9s %8s %8s\n' \
    "$cxx" "$mode" "$reps" unit cpu_s rss_mib cpu_x rss_x
  base_cpu=; base_rss=
  for u in a $units; do
    [[ $u == a && -n $base_cpu ]] && continue
    src=$(ls "$units_dir/$u"_*.cpp)
    flags=(-std=c++20 -O2 -pthread -I"$repo/include")
    [[ $u != a ]] && flags+=("${extra_flags[@]}" "${pch_flags[@]}")
    cpus=(); rsss=()
    for ((r = 0; r < reps; r++)); do
      # shellcheck disable=SC2086  # pkg-config's flags are meant to split
      read -r c m < <(measure "$cxx" "${flags[@]}" "$src" -o "$tmp/$u.out" "${lib_flags[@]}" $fmt_flags)
      cpus+=("$c"); rsss+=("$m")
    done
    cpu=$(printf '%s\n' "${cpus[@]}" | median)
    rss=$(printf '%s\n' "${rsss[@]}" | median)
    "$tmp/$u.out" >/dev/null || { echo "compile-cost: unit $u built but failed to run" >&2; exit 1; }
    if [[ $u == a ]]; then base_cpu=$cpu; base_rss=$rss; fi
    cr=$(awk -v a="$cpu" -v b="$base_cpu" 'BEGIN {printf "%.2f", a / b}')
    rr=$(awk -v a="$rss" -v b="$base_rss" 'BEGIN {printf "%.2f", a / b}')
    mib=$(awk -v k="$rss" 'BEGIN {printf "%.0f", k / 1024}')
    name=$(basename "$src" .cpp)
    if [[ $csv == 1 ]]; then echo "$cxx,$mode,$name,$cpu,$mib,$cr,$rr"
    else printf '%-14s %8.2f %9s %7sx %7sx\n' "$name" "$cpu" "$mib" "$cr" "$rr"; fi
  done
done
