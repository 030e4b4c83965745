#!/usr/bin/env bash
# The HTTP serving benchmark (docs/benchmarks.md, "HTTP serving (bench/bench_serving.c)";
# issue 6): builds bench_serving with cinfer serve, its worker and plugins, and runs the
# documented set against a `cinfer serve` that bench_serving starts and stops itself:
#   - the embedded default model through /generate at 16 and 64 requests/s and all at
#     once, and through /v1/completions at a concurrency of 16;
#   - the SmolLM-135M-shaped random-weight GGUF file (made with
#     bench/make_smollm_shaped.py, kept in the build folder) at a concurrency of 8.
#
#   scripts/bench-serving.sh                  # the documented set
#   scripts/bench-serving.sh --url http://127.0.0.1:30000 --num-prompts 100   # one run of yours
#
# Environment: CINFER_BENCH_BUILD (build folder, default build-bench), CINFER_BENCH_TYPE
# (weights of the SmolLM-shaped file, default q8_0), CINFER_BENCH_THREADS (compute
# threads of the server, default 2), CINFER_BENCH_NICE (default -20 as root; 0 leaves
# priorities alone). As scripts/bench-scheduler.sh, it re-runs itself in a session of
# its own and sets that session's autogroup nice, since the kernel shares CPU between
# sessions before nice applies.
set -euo pipefail
cd "$(dirname "$0")/.."
nice_level=${CINFER_BENCH_NICE:--20}
if [ "$(id -u)" -eq 0 ] && [ "$nice_level" != 0 ] && [ -z "${CINFER_BENCH_OWN_SESSION:-}" ]; then
  export CINFER_BENCH_OWN_SESSION=1
  exec setsid --wait "$0" "$@"
fi
if [ -n "${CINFER_BENCH_OWN_SESSION:-}" ] && [ -w /proc/self/autogroup ]; then
  echo "$nice_level" >/proc/self/autogroup || true
fi
build=${CINFER_BENCH_BUILD:-build-bench}
type=${CINFER_BENCH_TYPE:-q8_0}
threads=${CINFER_BENCH_THREADS:-2}

mkdir -p "$build"
cmake -S . -B "$build" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j2 --target bench_serving >"$build/build-serving.log" 2>&1 ||
  { grep -E 'error' "$build/build-serving.log" | head -20; exit 1; }
bench=$build/bin/bench_serving
run() { echo "+ bench_serving $*"; nice -n "$nice_level" "$bench" "$@"; echo; }

if (($# > 0)); then
  run "$@"
  exit
fi
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD)"
serve=(--serve-arg --num-threads --serve-arg "$threads")
for rate in 16 64 inf; do
  run --model models/default "${serve[@]}" --num-prompts 128 --request-rate "$rate" \
      --random-input-len 128 --random-output-len 64 --random-range-ratio 0.5 --seed 1
done
run --model models/default "${serve[@]}" --backend completions --num-prompts 128 --max-concurrency 16 \
    --random-input-len 128 --random-output-len 64 --random-range-ratio 0.5 --seed 1
model=$build/models/smollm-shaped-$type.gguf
if [ ! -f "$model" ]; then
  /usr/bin/python3 bench/make_smollm_shaped.py "$build/models" --types "$type" >/dev/null
fi
run --model "$model" "${serve[@]}" --num-prompts 32 --max-concurrency 8 \
    --random-input-len 128 --random-output-len 32 --random-range-ratio 0.5 --seed 1
