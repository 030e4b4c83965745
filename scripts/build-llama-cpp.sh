#!/usr/bin/env bash
# Builds llama.cpp from source for this CPU, once, as the benchmarks' peer
# (docs/benchmarks.md, "The peer"). The source is the one node-llama-cpp ships: the
# version pinned in bench/peers/package-lock.json carries llama.cpp as a git bundle
# (llama/gitRelease.bundle) and one patch (llama/patches/*.diff) that node-llama-cpp
# applies before it builds; this script clones that bundle and applies the same patch,
# so the source-built peer and the prebuilt one in the npm package are the same code.
#
#   scripts/build-llama-cpp.sh            # build if needed, then print where things are
#   scripts/build-llama-cpp.sh --bin-dir  # the same, then print only the bin folder on stdout
#
# The build: cmake, Release, shared libraries, GGML_NATIVE (gcc's -march=native), no
# GPU backend, no CURL or OpenSSL, no web UI download, tools llama-bench, llama-server,
# llama-quantize and llama-cli. AMX is off (GGML_AMX_TILE/INT8/BF16=OFF and
# -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 in the C and C++ flags, which win over
# -march=native): on a machine where the compiler's -march=native turns on __AMX_INT8__
# the AMX path for quantized types died with an illegal instruction in a worker thread.
# After the build the script checks libggml-cpu.so: no AMX tile instruction, and
# AVX-512 (zmm) instructions present.
#
# It lives in $CINFER_LLAMA_CPP_CACHE (default .cache/llama.cpp in the repository):
#   src/            the clone, patched
#   build/bin/      libllama.so, libggml*.so and the tools
#   build.key       what the build was made from; a different key rebuilds from scratch
#                   (build.key.pending while it builds: an interrupted build resumes)
#   build.name      one line naming the build, for the benchmark reports
#   build.log       configure and build output
# It is rebuilt only when that key changes: the node-llama-cpp version, the bundle's
# commit, the patch, the cmake flags, the compiler or the CPU features -march=native
# selects. Building takes 10-20 minutes on 2 busy cores; one build at a time (flock).
# Environment: CINFER_LLAMA_CPP_JOBS (parallel jobs, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-common.sh

print_bin_only=0
case "${1:-}" in
  --bin-dir) print_bin_only=1 ;;
  "") ;;
  *) echo "usage: scripts/build-llama-cpp.sh [--bin-dir]" >&2; exit 2 ;;
esac
say() { echo "build-llama-cpp: $*" >&2; }

cache=${CINFER_LLAMA_CPP_CACHE:-$PWD/.cache/llama.cpp}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
src=$cache/src build=$cache/build bin=$cache/build/bin
exec 9>"$cache/.lock"
flock 9

bench_install_peer # node-llama-cpp, pinned: the source comes from its package
pkg=$CINFER_BENCH_NODE_MODULES/node-llama-cpp
version=$(node -p "require('$pkg/package.json').version")
bundle=$pkg/llama/gitRelease.bundle
release=$(node -p "require('$pkg/llama/binariesGithubRelease.json').release")
bundle_head=$(git bundle list-heads "$bundle" | awk '$2 == "HEAD" { print $1 }')
[ -n "$bundle_head" ] || { say "$bundle: no HEAD in the bundle"; exit 1; }

avx512=
if grep -qw avx512f /proc/cpuinfo; then avx512=yes; fi
amx_off=(-mno-amx-tile -mno-amx-int8 -mno-amx-bf16)
cmake_args=(
  -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON
  -DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
  "-DCMAKE_C_FLAGS=${amx_off[*]}" "-DCMAKE_CXX_FLAGS=${amx_off[*]}"
  -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_HIP=OFF -DGGML_SYCL=OFF
  -DGGML_OPENCL=OFF -DGGML_BLAS=OFF -DGGML_RPC=OFF -DGGML_BACKEND_DL=OFF
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON
  -DLLAMA_BUILD_APP=OFF
)
targets=(llama llama-bench llama-server llama-quantize llama-cli)

key=$(
  echo "node-llama-cpp $version, llama.cpp release $release, bundle HEAD $bundle_head"
  for p in "$pkg"/llama/patches/*.diff; do
    [ -e "$p" ] && echo "patch $(basename "$p") $(sha256sum <"$p" | cut -c1-16)"
  done
  echo "cmake ${cmake_args[*]}"
  echo "targets ${targets[*]}"
  echo "cc $(gcc --version | head -1); c++ $(g++ --version | head -1)"
  echo "native $(gcc -march=native -Q --help=target 2>/dev/null |
    awk '$1 == "-march=" { printf "-march=%s ", $2 } $2 == "[enabled]" { printf "%s ", $1 }')"
)

built() {
  [ -f "$cache/build.key" ] && [ "$(cat "$cache/build.key")" = "$key" ] || return 1
  local t
  for t in llama-bench llama-server llama-quantize llama-cli libllama.so libggml-cpu.so; do
    [ -e "$bin/$t" ] || return 1
  done
}

if ! built; then
  if [ -f "$cache/build.key.pending" ] && [ "$(cat "$cache/build.key.pending")" = "$key" ] && [ -d "$build" ]; then
    say "resuming the interrupted build in $cache; log $cache/build.log"
  else
    say "building llama.cpp $release (node-llama-cpp $version, commit ${bundle_head:0:12}) in $cache;" \
        "log $cache/build.log"
    rm -rf "$src" "$build" "$cache/build.key"
    : >"$cache/build.log"
    git -c advice.detachedHead=false clone --quiet "$bundle" "$src"
    git -C "$src" checkout --quiet "$bundle_head"
    for p in "$pkg"/llama/patches/*.diff; do
      [ -e "$p" ] || continue
      # as node-llama-cpp does: skip a patch the source already has
      if git -C "$src" apply --check "$p" 2>/dev/null; then
        git -C "$src" apply "$p"
        say "applied $(basename "$p")"
      else
        say "skipped $(basename "$p") (does not apply: the source has it already)"
      fi
    done
    echo "$key" >"$cache/build.key.pending"
  fi
  {
    echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC') configure $src"
    cmake -S "$src" -B "$build" "${cmake_args[@]}"
    echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC') build ${targets[*]}"
    cmake --build "$build" -j "${CINFER_LLAMA_CPP_JOBS:-$(nproc)}" --target "${targets[@]}"
    echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC') done"
  } >>"$cache/build.log" 2>&1 || { tail -40 "$cache/build.log" >&2; say "build failed; log $cache/build.log"; exit 1; }

  # no AMX, and AVX-512 where the CPU has it, in the CPU backend that was built
  disasm=$(objdump -d --no-show-raw-insn "$bin/libggml-cpu.so")
  amx_insns='ldtilecfg|sttilecfg|tileloadd|tileloaddt1|tilestored|tilezero|tilerelease|tdpb[su][su]d|tdpbf16ps'
  amx=$(grep -cE "\b($amx_insns)\b" <<<"$disasm" || true)
  zmm=$(grep -c '%zmm' <<<"$disasm" || true)
  if [ "$amx" -ne 0 ] || { [ -n "$avx512" ] && [ "$zmm" -eq 0 ]; }; then
    say "$bin/libggml-cpu.so: $amx AMX instructions (expected 0), $zmm using zmm registers (expected many on this CPU)"
    exit 1
  fi
  echo "== libggml-cpu.so: $amx AMX instructions, $zmm instructions on zmm registers" >>"$cache/build.log"
  echo "$key" >"$cache/build.key"
  rm -f "$cache/build.key.pending"
fi
march=$(gcc -march=native -Q --help=target 2>/dev/null | awk '$1 == "-march=" { print $2 }')
name="llama.cpp $release (commit ${bundle_head:0:7}, the source of node-llama-cpp $version) built from source:"
name+=" $(gcc --version | head -1 | awk '{ print "gcc " $NF }'), Release, GGML_NATIVE (-march=native: $march"
name+="${avx512:+ with AVX-512}), AMX off, CPU only"
echo "$name" >"$cache/build.name"

if [ "$print_bin_only" = 1 ]; then
  echo "$bin"
  exit 0
fi
cat <<EOF
$name
  source    $src
  build     $build (Release, GGML_NATIVE, AMX off, CPU only)
  bin       $bin
  tools     $bin/llama-bench $bin/llama-server $bin/llama-quantize $bin/llama-cli
  library   $bin/libllama.so, headers $src/include $src/ggml/include
  key       $cache/build.key, log $cache/build.log
EOF
