#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds cinfer five ways and runs the whole test
# suite on each: the normal build, a Release build (the build type packagers pick), a
# Clang build, the sanitizer build (ASan + UBSan), and the appliance build (plugins
# linked in, MPI/SSH/CUDA/HTTP left out). Every build treats warnings as errors here
# (CINFER_WERROR, off for users). Then runs every fuzz target for a short bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

bash scripts/setup-debian.sh

run_suite() {  # build-folder, cmake options... (CC in the environment picks the compiler)
  local dir=$1; shift
  echo "=== build $dir (${CC:-cc}: $*)"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCINFER_WERROR=ON "$@" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; return 1; }
  cmake --build "$dir" -j"$jobs"
  echo "=== test $dir"
  (cd "$dir" && ctest --output-on-failure -j"$jobs" --timeout 1500)
}

mkdir -p build build-release build-clang build-asan build-appliance
run_suite build
run_suite build-release -DCMAKE_BUILD_TYPE=Release
CC=clang run_suite build-clang
run_suite build-asan -DCINFER_SANITIZE=ON
run_suite build-appliance -DCINFER_STATIC_PLUGINS=ON -DCINFER_MINIMAL=ON

if [ -x scripts/fuzz.sh ]; then
  # Bounded and repeatable: a fixed seed and input count from a fresh corpus, so CI
  # gives the same verdict every time (scripts/fuzz.sh alone explores freely).
  echo "=== fuzz (bounded, seed ${FUZZ_SEED:-1}, ${FUZZ_RUNS:-20000} inputs per target)"
  rm -rf build-fuzz/fuzz-corpus
  FUZZ_SECONDS="${FUZZ_SECONDS:-60}" FUZZ_SEED="${FUZZ_SEED:-1}" FUZZ_RUNS="${FUZZ_RUNS:-20000}" scripts/fuzz.sh
fi
echo "=== all test suites passed"
