#!/usr/bin/env bash
# The scheduler's continuous batching throughput against llama.cpp (docs/benchmarks.md,
# "Scheduler: continuous batching throughput"; issue 5): builds bench_scheduler with the
# engine's worker and plugins, writes the SmolLM-135M-shaped random-weight GGUF file
# (kept in the build folder; reused when present), builds llama.cpp from source for
# this CPU with its peer bench/peers/llama_cpp_peer.c (scripts/build-llama-cpp.sh, once,
# as scripts/bench-model.sh does) and runs both sides, interleaved, in one run.
#
#   scripts/bench-scheduler.sh [bench_scheduler options]
#   scripts/bench-scheduler.sh --tokens 32 --rounds 3      # the documented run
#
# Environment: CINFER_BENCH_PEER (source, the default, or node: node-llama-cpp's
# prebuilt CPU binaries through bench/peers/llama_cpp_bench.mjs),
# CINFER_BENCH_BUILD (build folder, default build-bench),
# CINFER_BENCH_TYPE (weights of the GGUF file, default q8_0; f32, f16, bf16 also made by
# bench/make_smollm_shaped.py), CINFER_BENCH_THREADS (default 2), CINFER_BENCH_NICE
# (default -20 as root; 0 to leave priorities alone). As in scripts/bench-model.sh the
# script re-runs itself in a session of its own (setsid) and sets that session's
# autogroup nice as well as the processes' nice: the kernel's autogroup scheduling
# shares CPU between sessions first and applies nice only inside one.
# The table goes to stdout and to $CINFER_BENCH_BUILD/bench-scheduler.md, the figures to
# $CINFER_BENCH_BUILD/bench-scheduler.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-common.sh
bench_own_session "$@"
build=${CINFER_BENCH_BUILD:-build-bench}
type=${CINFER_BENCH_TYPE:-q8_0}
threads=${CINFER_BENCH_THREADS:-2}

mkdir -p "$build"
cmake -S . -B "$build" -DCINFER_BUILD_TESTS=OFF >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j2 --target bench_scheduler

model=$build/models/smollm-shaped-$type.gguf
if [ ! -f "$model" ]; then
  /usr/bin/python3 bench/make_smollm_shaped.py "$build/models" --types "$type"
fi

# llama.cpp built from source, as scripts/bench-model.sh does (same cache)
bench_peer "$build"

{
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, commit $(git rev-parse --short HEAD), nice $nice_level"
  echo "# scripts/bench-scheduler.sh $*"
  echo "# peer: $peer_name"
} | tee "$build/bench-scheduler.md"
nice_cmd=()
if [ -n "${CINFER_BENCH_OWN_SESSION:-}" ]; then
  nice_cmd=(nice -n "$nice_level")
fi
"${nice_cmd[@]}" "$build/bin/bench_scheduler" --model "$model" --threads "$threads" \
  --peer "$peer_program" --json "$build/bench-scheduler.json" "$@" | tee -a "$build/bench-scheduler.md"
