#!/usr/bin/env bash
# Installs the Debian 12 packages devtap needs to build, test and benchmark; only the missing ones,
# so it is quick (and works offline) on a machine that already has them. Run as root or with sudo.
# CUDA is not installed here: with nvcc on PATH (e.g. /usr/local/cuda/bin) the CUDA parts build too.
set -euo pipefail

packages=(
  g++ meson ninja-build pkg-config   # toolchain
  cmake                              # consumption test of the installed CMake package (CI)
  catch2 libfmt-dev                  # tests, formatting
  nlohmann-json3-dev                 # trace file tests: JSON escaping checked against it
  clang-16 libclang-rt-16-dev        # second compiler and its sanitizer runtimes (CI)
  llvm-16                            # /usr/bin/llvm-symbolizer-16: clang-16's sanitizers need it (CI)
  libboost-dev libconcurrentqueue-dev libreaderwriterqueue-dev gnuplot-nox   # benchmarks
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all packages present"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
echo "install-deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
