#!/usr/bin/env bash
# Consumption tests: builds and runs consumer.cpp (a cpu receiver, taps, a consumer coroutine)
# against devtap the three ways a user gets it, in a temporary directory:
#   (a) a Meson subproject: meson/ with subprojects/devtap -> this repository, dependency('devtap');
#   (b) the installed devtap.pc, after `meson install --destdir` (plain c++ + pkg-config);
#   (c) the installed CMake package: find_package(devtap CONFIG REQUIRED), target devtap::devtap,
#       from a moved install tree (the package is relocatable).
# Each must pass DEVTAP_WITH_CUDA on exactly when devtap was built with CUDA.
#   bash tests/consumers/run.sh     (CUDA=disabled|enabled|auto: devtap's `cuda` option, default auto;
#                                    KEEP=1 keeps the temporary directory)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here=$repo/tests/consumers
tmp=$(mktemp -d "${TMPDIR:-/tmp}/devtap-consumers.XXXXXX")
if [[ "${KEEP:-0}" == 1 ]]; then echo "consumers: keeping $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi
export DEVTAP_CPU_DEVICES=3
cuda=${CUDA:-auto}

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
run_consumer() { "$1" "$expect"; }

step "install devtap: meson setup + meson install --destdir, then unpack at its prefix"
quiet meson setup "$tmp/devtap-build" "$repo" --prefix "$tmp/prefix" -Dcuda="$cuda" \
  -Dtests=false -Dexamples=false -Dbench=false
quiet meson install -C "$tmp/devtap-build" --destdir "$tmp/stage"
mkdir -p "$tmp/prefix"
cp -a "$tmp/stage$tmp/prefix/." "$tmp/prefix/"
pc=$(find "$tmp/prefix" -name devtap.pc)
cmake_dir=$(dirname "$(find "$tmp/prefix" -name devtapConfig.cmake)")
expect=nocuda
if grep -q DEVTAP_WITH_CUDA "$pc"; then expect=cuda; fi
echo "installed: $pc, $cmake_dir/devtapConfig.cmake; devtap built with: $expect"

step "(a) Meson subproject: dependency('devtap')"
quiet meson setup "$tmp/meson" "$here/meson" --force-fallback-for=devtap --wrap-mode=nodownload \
  -Ddevtap:cuda="$cuda"
quiet meson compile -C "$tmp/meson"
run_consumer "$tmp/meson/consumer"

step "(b) pkg-config: c++ \$(pkg-config --cflags --libs devtap)"
export PKG_CONFIG_PATH=$(dirname "$pc")
echo "devtap.pc $(grep '^Libs:' "$pc")  (LIBRARY_PATH='${LIBRARY_PATH:-}' PKG_CONFIG_SYSTEM_LIBRARY_PATH='${PKG_CONFIG_SYSTEM_LIBRARY_PATH:-}')"
echo "pkg-config --cflags --libs devtap: $(pkg-config --cflags --libs devtap)"
test "$(pkg-config --modversion devtap)" = "$(meson introspect --projectinfo "$tmp/devtap-build" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')"
# shellcheck disable=SC2046  # pkg-config's flags are meant to split
quiet "${CXX:-c++}" -std=c++20 -Wall -Wextra -Wpedantic -Werror "$here/consumer.cpp" -o "$tmp/pc-consumer" \
  $(pkg-config --cflags --libs devtap)
run_consumer "$tmp/pc-consumer"
unset PKG_CONFIG_PATH

step "(c) CMake: find_package(devtap CONFIG REQUIRED), devtap::devtap, from a moved install"
mv "$tmp/prefix" "$tmp/moved"
cmake -DVERSION_FILE="${cmake_dir/$tmp\/prefix/$tmp/moved}/devtapConfigVersion.cmake" -P "$here/cmake/version_check.cmake"
quiet cmake -S "$here/cmake" -B "$tmp/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/moved"
quiet cmake --build "$tmp/cmake"
run_consumer "$tmp/cmake/consumer"

step "all three consumers passed"
