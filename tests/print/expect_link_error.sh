#!/usr/bin/env bash
# expect_link_error.sh EXPECTED FILE TUS COMPILER [ARGS...]
# Builds FILE into a program (TUS=2: FILE again with -DDEVTAP_PRINT_SECOND_TU as a second object)
# and passes when it links with -DDEVTAP_CONTROL and fails to link without it, with EXPECTED in the
# linker's output. Compile errors fail the test: only the link may fail.
set -euo pipefail
expected=$1 file=$2 tus=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

build() {  # build EXTRA_FLAGS...: compiles, then links; exit 3 when a compile fails
  local objs=("$tmp/first.o")
  "$@" -c "$file" -o "$tmp/first.o" || return 3
  if [[ $tus == 2 ]]; then
    "$@" -DDEVTAP_PRINT_SECOND_TU -c "$file" -o "$tmp/second.o" || return 3
    objs+=("$tmp/second.o")
  fi
  "$@" "${objs[@]}" -o "$tmp/program"
}

# DEVTAP_CONTROLS_CHECKED=1 (the second compiler's run): the twin was built by the first; not again.
if [[ ${DEVTAP_CONTROLS_CHECKED:-} != 1 ]] && ! build "$@" -DDEVTAP_CONTROL 2>&1; then
  echo "FAIL: the control variant of $file does not build" >&2
  exit 1
fi
status=0
out=$(build "$@" 2>&1) || status=$?
if [[ $status == 0 ]]; then
  echo "FAIL: $file linked, but it must not" >&2
  exit 1
fi
if [[ $status == 3 ]] || ! grep -qF -- "$expected" <<<"$out"; then
  printf 'FAIL: %s did not fail to link with "%s":\n%s\n' "$file" "$expected" "$out" >&2
  exit 1
fi
echo "ok: $file fails to link with \"$expected\""
