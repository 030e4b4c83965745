#!/usr/bin/env bash
# The CPU model runtime benchmark against llama.cpp (docs/benchmarks.md, "CPU model
# runtime"): builds bench_model, writes the SmolLM-135M-shaped random-weight GGUF
# files (f32, f16, bf16, Q8_0; about 1.2 GB, kept in the build folder), builds
# llama.cpp from source for this CPU (scripts/build-llama-cpp.sh: once, 10-20 minutes
# the first time; the source is the one node-llama-cpp ships, pinned by
# bench/peers/package-lock.json) with its peer bench/peers/llama_cpp_peer.c, and runs
# both sides on every file in one run.
#
#   scripts/bench-model.sh [bench_model options]
#   scripts/bench-model.sh --rounds 3 --decode-steps 24   # the documented run
#
# Environment: CINFER_BENCH_PEER (source, the default, or node: node-llama-cpp's
# prebuilt CPU binaries through bench/peers/llama_cpp_bench.mjs),
# CINFER_BENCH_BUILD (build folder, default build-bench),
# CINFER_BENCH_TYPES (default f32,f16,bf16,q8_0; llama-quantize's types such as
# Q4_K_M,Q6_K,Q4_0 are made from the f32 file by the source build's llama-quantize),
# CINFER_BENCH_THREADS (default 2),
# CINFER_BENCH_SHAPE (default smollm-135m; llama-3.2-1b writes Llama-3.2-1B-shaped files,
# 4.9 GB in f32, whose rows are multiples of 256 as most real models' are),
# CINFER_BENCH_NICE (default -20 as root; 0 to leave priorities alone). On a shared
# machine both sides, cinfer and the llama.cpp child alike, then win the cores from
# background jobs for the minutes the run takes. The kernel's autogroup scheduling
# shares CPU between sessions first and applies nice only inside one, so the script
# re-runs itself in a session of its own (setsid) and sets that session's autogroup
# nice (/proc/self/autogroup) as well as the processes' nice.
# The table goes to stdout and to $CINFER_BENCH_BUILD/bench-model.md, the figures to
# $CINFER_BENCH_BUILD/bench-model.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-common.sh
bench_own_session "$@"
build=${CINFER_BENCH_BUILD:-build-bench}
types=${CINFER_BENCH_TYPES:-f32,f16,bf16,q8_0}
shape=${CINFER_BENCH_SHAPE:-smollm-135m}
case "$shape" in
  smollm-135m) prefix=smollm-shaped ;;
  llama-3.2-1b) prefix=llama1b-shaped ;;
  *) echo "bench-model: CINFER_BENCH_SHAPE: expected smollm-135m or llama-3.2-1b, found '$shape'" >&2; exit 2 ;;
esac
threads=${CINFER_BENCH_THREADS:-2}

mkdir -p "$build"
cmake -S . -B "$build" -DCINFER_BUILD_TESTS=OFF >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j2 --target bench_model

# llama.cpp built from source (or node-llama-cpp's prebuilt build with CINFER_BENCH_PEER=node)
bench_peer "$build"

quantize=()
if [ -n "${llama_cpp_bin:-}" ]; then
  quantize=(--llama-quantize "$llama_cpp_bin/llama-quantize")
fi
/usr/bin/python3 bench/make_smollm_shaped.py "$build/models" --shape "$shape" --types "$types" "${quantize[@]}"

models=""
IFS=, read -r -a type_list <<<"$types"
for t in "${type_list[@]}"; do
  models+="${models:+,}$build/models/$prefix-$t.gguf"
done

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores" | tee "$build/bench-model.md"
echo "# CINFER_BENCH_SHAPE=$shape CINFER_BENCH_TYPES=$types scripts/bench-model.sh $*, commit $(git rev-parse --short HEAD), nice $nice_level" |
  tee -a "$build/bench-model.md"
echo "# peer: $peer_name" | tee -a "$build/bench-model.md"
nice_cmd=()
if [ -n "${CINFER_BENCH_OWN_SESSION:-}" ]; then
  nice_cmd=(nice -n "$nice_level")
fi
"${nice_cmd[@]}" "$build/bin/bench_model" --models "$models" --threads "$threads" \
  --peer "$peer_program" --json "$build/bench-model.json" "$@" | tee -a "$build/bench-model.md"
