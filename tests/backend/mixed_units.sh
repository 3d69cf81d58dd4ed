#!/usr/bin/env bash
# mixed_units.sh FILE COMPILER [ARGS...]
# Units built with different devtap settings must not make one program silently (config.hpp: each
# setting has its ABI namespace). FILE's caller and callee link and run when both have the same
# setting; a callee with DEVTAP_WITH_CUDA=1, or DEVTAP_COMPILED=1, beside a caller without it must
# fail to link, naming the caller's devtap::v0::device.
set -euo pipefail
file=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

build() {  # build CALLEE_FLAG: the caller as is, the callee with CALLEE_FLAG (may be empty)
  "$@" -c "$file" -o "$tmp/caller.o" || return 3
  "$@" ${callee_flag:+"$callee_flag"} -DDEVTAP_MIXED_CALLEE -c "$file" -o "$tmp/callee.o" || return 3
  "$@" "$tmp/caller.o" "$tmp/callee.o" -o "$tmp/program"
}

callee_flag='' build "$@" || { echo "FAIL: the same setting on both sides does not build" >&2; exit 1; }
"$tmp/program" || { echo "FAIL: the program of one setting does not run" >&2; exit 1; }
for flag in -DDEVTAP_WITH_CUDA=1 -DDEVTAP_COMPILED=1; do
  status=0
  out=$(callee_flag=$flag build "$@" 2>&1) || status=$?
  if [[ $status == 0 ]]; then
    echo "FAIL: a callee built with $flag linked with a caller without it" >&2
    exit 1
  fi
  if [[ $status == 3 ]] || ! grep -qF -- "devtap::v0::device" <<<"$out"; then
    printf 'FAIL: with %s, not a link error naming devtap::v0::device:\n%s\n' "$flag" "$out" >&2
    exit 1
  fi
  echo "ok: a callee built with $flag does not link with a caller without it"
done
