#!/usr/bin/env bash
# expect_compile_error.sh EXPECTED FILE COMPILER [ARGS...]
# Passes when FILE compiles with -DDEVTAP_CONTROL (the case is otherwise sound) and fails to compile
# without it, with EXPECTED in the diagnostics (it fails for the intended reason).
set -euo pipefail
expected=$1 file=$2
shift 2
# DEVTAP_CONTROLS_CHECKED=1 (the second compiler's run): the twin was built by the first; not again.
if [[ ${DEVTAP_CONTROLS_CHECKED:-} != 1 ]] && ! "$@" -DDEVTAP_CONTROL "$file" 2>&1; then
  echo "FAIL: the control variant of $file does not compile" >&2
  exit 1
fi
if out=$("$@" "$file" 2>&1); then
  echo "FAIL: $file compiled, but it must not" >&2
  exit 1
fi
if ! grep -qF -- "$expected" <<<"$out"; then
  printf 'FAIL: %s failed to compile, but not with "%s":\n%s\n' "$file" "$expected" "$out" >&2
  exit 1
fi
echo "ok: $file is rejected with \"$expected\""
