#!/usr/bin/env bash
# Consumption tests: builds and runs consumer.cpp (a cpu receiver, taps, a consumer coroutine)
# against devtap the three ways a user gets it, in a temporary directory:
#   (a) a Meson subproject: meson/ with subprojects/devtap -> this repository, dependency('devtap');
#   (b) the installed devtap.pc, after `meson install --destdir` (plain c++ + pkg-config);
#   (c) the installed CMake package: find_package(devtap CONFIG REQUIRED), target devtap::devtap,
#       from a moved install tree (the package is relocatable).
# `devtap` never brings CUDA in (no DEVTAP_WITH_CUDA, no libcudart). Where devtap is built with
# CUDA, each way also builds consumer.cpp against `devtap-cuda` (devtap::cuda in CMake), which
# must bring it, and (b) builds consumer_kernel.cu with nvcc from devtap-cuda.pc's flags alone.
#   bash tests/consumers/run.sh     (CUDA=disabled|enabled|auto: devtap's `cuda` option, default auto;
#                                    COMPILED=true: devtap's compiled mode, default false;
#                                    KEEP=1 keeps the temporary directory)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here=$repo/tests/consumers
tmp=$(mktemp -d "${TMPDIR:-/tmp}/devtap-consumers.XXXXXX")
if [[ "${KEEP:-0}" == 1 ]]; then echo "consumers: keeping $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi
export DEVTAP_CPU_DEVICES=3
cuda=${CUDA:-auto}
compiled=${COMPILED:-false}

for tool in meson pkg-config cmake ninja; do
  command -v "$tool" >/dev/null || { echo "consumers: $tool not found (bash .ci/install-deps.sh installs it)" >&2; exit 1; }
done

step() { printf '\n--- consumers: %s (%ds)\n' "$*" "$SECONDS"; }
# Runs a build command with its output in a log, shown only when it fails.
quiet() {
  local log=$tmp/log.txt
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    echo "consumers: failed: $*" >&2
    return 1
  fi
}
# Runs the consumer and shows what it printed.
run_consumer() { "$1" "$2"; }

step "install devtap: meson setup + meson install --destdir, then unpack at its prefix"
quiet meson setup "$tmp/devtap-build" "$repo" --prefix "$tmp/prefix" -Dcuda="$cuda" -Dcompiled="$compiled" \
  -Dtests=false -Dexamples=false -Dbench=false
quiet meson install -C "$tmp/devtap-build" --destdir "$tmp/stage"
mkdir -p "$tmp/prefix"
cp -a "$tmp/stage$tmp/prefix/." "$tmp/prefix/"
pc=$(find "$tmp/prefix" -name devtap.pc)
pc_cuda=$(find "$tmp/prefix" -name devtap-cuda.pc)
cmake_dir=$(dirname "$(find "$tmp/prefix" -name devtapConfig.cmake)")
with_cuda=0
if [[ -n $pc_cuda ]]; then with_cuda=1; fi
if grep -qE 'DEVTAP_WITH_CUDA|cudart' "$pc"; then
  echo "consumers: devtap.pc brings CUDA in; only devtap-cuda.pc may:" >&2; cat "$pc" >&2; exit 1
fi
if [[ $compiled == true ]] && ! grep -q DEVTAP_COMPILED "$pc"; then
  echo "consumers: compiled mode, but devtap.pc does not say DEVTAP_COMPILED" >&2; exit 1
fi
echo "installed: $pc ${pc_cuda:-(no devtap-cuda.pc: built without CUDA)}, $cmake_dir/devtapConfig.cmake; compiled: $compiled"

step "(a) Meson subproject: dependency('devtap')"
quiet meson setup "$tmp/meson" "$here/meson" --force-fallback-for=devtap,devtap-cuda --wrap-mode=nodownload \
  -Ddevtap:cuda="$cuda" -Ddevtap:compiled="$compiled"
quiet meson compile -C "$tmp/meson"
run_consumer "$tmp/meson/consumer" nocuda
if [[ $with_cuda == 1 ]]; then run_consumer "$tmp/meson/consumer_cuda" cuda; fi

step "(b) pkg-config: c++ \$(pkg-config --cflags --libs devtap)"
export PKG_CONFIG_PATH=$(dirname "$pc")
echo "devtap.pc $(grep '^Libs:' "$pc")  (LIBRARY_PATH='${LIBRARY_PATH:-}' PKG_CONFIG_SYSTEM_LIBRARY_PATH='${PKG_CONFIG_SYSTEM_LIBRARY_PATH:-}')"
echo "pkg-config --cflags --libs devtap: $(pkg-config --cflags --libs devtap)"
test "$(pkg-config --modversion devtap)" = "$(meson introspect --projectinfo "$tmp/devtap-build" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')"
# shellcheck disable=SC2046  # pkg-config's flags are meant to split
quiet "${CXX:-c++}" -std=c++20 -Wall -Wextra -Wpedantic -Werror "$here/consumer.cpp" -o "$tmp/pc-consumer" \
  $(pkg-config --cflags --libs devtap)
run_consumer "$tmp/pc-consumer" nocuda
if [[ $with_cuda == 1 ]]; then
  echo "pkg-config --cflags --libs devtap-cuda: $(pkg-config --cflags --libs devtap-cuda)"
  # shellcheck disable=SC2046
  quiet "${CXX:-c++}" -std=c++20 -Wall -Wextra -Wpedantic -Werror "$here/consumer.cpp" -o "$tmp/pc-consumer-cuda" \
    $(pkg-config --cflags --libs devtap-cuda)
  run_consumer "$tmp/pc-consumer-cuda" cuda
  # nvcc with the same flags, unchanged (no {fmt} in a .cu file: only devtap-cuda's own flags).
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  # shellcheck disable=SC2046
  quiet "$nvcc" -std=c++20 "$here/consumer_kernel.cu" -o "$tmp/pc-consumer-kernel" \
    $(pkg-config --cflags --libs devtap-cuda)
  "$tmp/pc-consumer-kernel"
fi
unset PKG_CONFIG_PATH

step "(c) CMake: find_package(devtap CONFIG REQUIRED), devtap::devtap, from a moved install"
mv "$tmp/prefix" "$tmp/moved"
cmake -DVERSION_FILE="${cmake_dir/$tmp\/prefix/$tmp/moved}/devtapConfigVersion.cmake" -P "$here/cmake/version_check.cmake"
quiet cmake -S "$here/cmake" -B "$tmp/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/moved"
quiet cmake --build "$tmp/cmake"
run_consumer "$tmp/cmake/consumer" nocuda
if [[ $with_cuda == 1 ]]; then run_consumer "$tmp/cmake/consumer_cuda" cuda; fi

step "all three consumers passed"
