#!/usr/bin/env bash
# The mixture-of-experts decode benchmark against llama.cpp (docs/benchmarks.md,
# "Mixture of experts"): builds bench_model, writes a Qwen3-MoE-shaped random GGUF file
# (bench/make_qwen3moe_shaped.py: 128 experts, 8 active, hidden 512, 6 layers; Q8_0 by
# default, kept in the build folder), builds llama.cpp from source with its peer
# (scripts/bench-common.sh, as scripts/bench-model.sh does) and runs both sides on it in
# one run: decode at batch 1 and 32, prefill, and batch-1 decode as a fraction of its
# floor counted over the active weights only (router + 8 experts a layer).
#
#   scripts/bench-moe.sh [bench_model options]
#   scripts/bench-moe.sh --rounds 2 --decode-steps 24   # the documented run
#
# Environment: as scripts/bench-model.sh (CINFER_BENCH_BUILD, CINFER_BENCH_THREADS,
# CINFER_BENCH_NICE, CINFER_BENCH_PEER), and CINFER_BENCH_MOE_TYPES (default q8_0;
# f32, f16, bf16 also).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-common.sh
bench_own_session "$@"
build=${CINFER_BENCH_BUILD:-build-bench}
types=${CINFER_BENCH_MOE_TYPES:-q8_0}
threads=${CINFER_BENCH_THREADS:-2}

mkdir -p "$build"
cmake -S . -B "$build" -DCINFER_BUILD_TESTS=OFF >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j2 --target bench_model
bench_peer "$build"
/usr/bin/python3 bench/make_qwen3moe_shaped.py "$build/models" --types "$types"

models=""
IFS=, read -r -a type_list <<<"$types"
for t in "${type_list[@]}"; do
  models+="${models:+,}$build/models/qwen3moe-shaped-6l-$t.gguf"
done

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores" |
  tee "$build/bench-moe.md"
echo "# scripts/bench-moe.sh $*, commit $(git rev-parse --short HEAD), nice $nice_level" | tee -a "$build/bench-moe.md"
echo "# peer: $peer_name" | tee -a "$build/bench-moe.md"
nice_cmd=()
if [ -n "${CINFER_BENCH_OWN_SESSION:-}" ]; then
  nice_cmd=(nice -n "$nice_level")
fi
"${nice_cmd[@]}" "$build/bin/bench_model" --models "$models" --threads "$threads" --batches 1,32 \
  --peer "$peer_program" --json "$build/bench-moe.json" "$@" | tee -a "$build/bench-moe.md"
