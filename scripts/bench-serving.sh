#!/usr/bin/env bash
# The HTTP serving benchmark (docs/benchmarks.md, "HTTP serving (bench/bench_serving.c)";
# issue 6): builds bench_serving with cinfer serve, its worker and plugins, and runs the
# documented set against a `cinfer serve` that bench_serving starts and stops itself:
#   - the embedded default model through /generate at 16 and 64 requests/s and all at
#     once, and through /v1/completions at a concurrency of 16;
#   - the SmolLM-135M-shaped random-weight GGUF file (made with
#     bench/make_smollm_shaped.py, kept in the build folder) at a concurrency of 8.
#
#   - the same SmolLM-shaped file through /v1/completions against cinfer serve and
#     against llama.cpp's llama-server, built from source for this CPU
#     (scripts/build-llama-cpp.sh, once, as the other bench scripts do), both started
#     once and measured in turns (cinfer, peer, cinfer, peer, ...); it prints each
#     side's median over the rounds and the ratios cinfer / peer. With
#     CINFER_BENCH_PEER=node the peer is bench/peers/llama_cpp_server.mjs instead:
#     node-llama-cpp's prebuilt binding behind node's HTTP server.
#
#   scripts/bench-serving.sh                  # the documented set
#   scripts/bench-serving.sh --peer           # only the cinfer / llama.cpp comparison
#   scripts/bench-serving.sh --url http://127.0.0.1:30000 --num-prompts 100   # one run of yours
#
# Environment: CINFER_BENCH_BUILD (build folder, default build-bench), CINFER_BENCH_TYPE
# (weights of the SmolLM-shaped file, default q8_0), CINFER_BENCH_THREADS (compute
# threads of each server, default 2), CINFER_BENCH_ROUNDS (rounds of the peer
# comparison, default 3), CINFER_BENCH_PEER (source, the default, or node),
# CINFER_BENCH_PEER_SEQUENCES (the peer's sequences: llama-server's slots, default 8; the
# node peer's, default 16), CINFER_BENCH_NICE (default -20 as root; 0 leaves
# priorities alone). As scripts/bench-scheduler.sh, it re-runs itself in a session of
# its own and sets that session's autogroup nice, since the kernel shares CPU between
# sessions before nice applies.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-common.sh
bench_own_session "$@"
build=${CINFER_BENCH_BUILD:-build-bench}
type=${CINFER_BENCH_TYPE:-q8_0}
threads=${CINFER_BENCH_THREADS:-2}

mkdir -p "$build"
cmake -S . -B "$build" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j2 --target bench_serving >"$build/build-serving.log" 2>&1 ||
  { grep -E 'error' "$build/build-serving.log" | head -20; exit 1; }
bench=$build/bin/bench_serving
run() { echo "+ bench_serving $*"; nice -n "$nice_level" "$bench" "$@"; echo; }
rounds=${CINFER_BENCH_ROUNDS:-3}

smollm_model() {
  model=$build/models/smollm-shaped-$type.gguf
  if [ ! -f "$model" ] && [ -f "build-bench/models/smollm-shaped-$type.gguf" ]; then
    model=build-bench/models/smollm-shaped-$type.gguf # made by another bench script already
  fi
  if [ ! -f "$model" ]; then
    /usr/bin/python3 bench/make_smollm_shaped.py "$build/models" --types "$type" >/dev/null
  fi
}

# Starts "$@" in the background with stderr to $1's log; sets started_pid and
# started_url once its "listening on URL" line appears.
start_server() {
  local log=$1
  shift
  : >"$log" # exists before the first look at it
  nice -n "$nice_level" "$@" 2>"$log" &
  started_pid=$!
  server_pids+=("$started_pid") # the EXIT trap stops it whatever happens next
  started_url=
  for _ in $(seq 600); do
    started_url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$log" | head -1)
    [ -n "$started_url" ] && return 0
    kill -0 "$started_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench-serving: $1 did not start listening; its log $log:" >&2
  cat "$log" >&2
  return 1
}

url_of() { if [ "$1" = cinfer ]; then echo "$cinfer_url"; else echo "$peer_url"; fi; }

# One figure of a bench_serving report: the number after its label.
figure() { awk -v label="$2" 'index($0, label) == 1 { print $NF; exit }' "$1"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# cinfer serve and the llama.cpp peer on the same file and workload, in turns.
peer_comparison() {
  smollm_model
  bench_peer "$build"
  # the workload keeps 8 requests in flight. llama-server gets 8 slots of 512 tokens: it
  # frees a slot as its request ends, and 8 slots gave a lower ITL than 16 (38-41 ms
  # against 48-58 ms, Q8_0, 2026-12-01). The node peer gets twice as many sequences, so a
  # request never waits for a finished one's KV cells to be cleared (which waits for the
  # batch in flight). cinfer serve admits up to its max_running_requests (64).
  local out=$build/serving-peer parallel=8 sequences=16
  [ "$peer_kind" = source ] && sequences=8
  sequences=${CINFER_BENCH_PEER_SEQUENCES:-$sequences}
  rm -rf "$out" && mkdir -p "$out"
  server_pids=() # global: the EXIT trap reads it after this function is gone
  trap 'if ((${#server_pids[@]})); then kill "${server_pids[@]}" 2>/dev/null; wait "${server_pids[@]}" 2>/dev/null; fi' EXIT
  start_server "$out/cinfer.log" "$build/bin/cinfer" serve --model-path "$model" --port 0 --log-level error \
    --num-threads "$threads"
  cinfer_pid=$started_pid cinfer_url=$started_url
  local peer_server
  if [ "$peer_kind" = source ]; then
    peer_server=("$llama_cpp_bin/llama-server" --model "$model" --host 127.0.0.1 --port 0 --threads "$threads"
                 --threads-batch "$threads" --parallel "$sequences" --ctx-size $((sequences * 512)) --no-webui)
  else
    peer_server=(node bench/peers/llama_cpp_server.mjs --model "$model" --threads "$threads" --parallel "$sequences")
  fi
  start_server "$out/peer.log" "${peer_server[@]}"
  peer_pid=$started_pid peer_url=$started_url
  local work=(--backend completions --num-prompts 32 --max-concurrency "$parallel" --random-input-len 128
              --random-output-len 32 --random-range-ratio 0.5 --seed 1)
  echo "== cinfer serve vs llama.cpp on $model, /v1/completions, 2 x $rounds rounds in turns"
  echo "   cinfer: cinfer serve --num-threads $threads (max_running_requests 64; the workload keeps $parallel in flight)"
  echo "   peer:   $peer_name"
  if [ "$peer_kind" = source ]; then
    echo "           llama-server ${peer_server[*]:1}"
  else
    echo "           through node-llama-cpp's binding behind node's HTTP server (bench/peers/llama_cpp_server.mjs),"
    echo "           $threads threads, $sequences sequences in one context; not llama-server: its batching and HTTP"
    echo "           layer are node-llama-cpp's and node's"
  fi
  echo "   workload: bench_serving ${work[*]}"
  # a few requests each first, so neither side's first round pays for cold caches
  for side in cinfer peer; do
    nice -n "$nice_level" "$bench" --url "$(url_of "$side")" --backend completions --num-prompts 8 --max-concurrency "$parallel" \
      --random-input-len 128 --random-output-len 8 --seed 2 >"$out/$side-warmup.txt" ||
      { cat "$out/$side-warmup.txt"; return 1; }
  done
  for r in $(seq "$rounds"); do
    for side in cinfer peer; do
      nice -n "$nice_level" "$bench" --url "$(url_of "$side")" "${work[@]}" --timeout 120 >"$out/$side-$r.txt" ||
        { cat "$out/$side-$r.txt"; return 1; }
      printf '   round %d %-6s  %s req/s, %s out tok/s, median TTFT %s ms, median ITL %s ms (load %s)\n' "$r" "$side" \
        "$(figure "$out/$side-$r.txt" 'Request throughput')" "$(figure "$out/$side-$r.txt" 'Output token throughput')" \
        "$(figure "$out/$side-$r.txt" 'Median TTFT')" "$(figure "$out/$side-$r.txt" 'Median ITL')" \
        "$(cut -d' ' -f1 /proc/loadavg)"
    done
  done
  local tokens_cinfer tokens_peer
  tokens_cinfer=$(figure "$out/cinfer-1.txt" 'Total generated tokens')
  tokens_peer=$(figure "$out/peer-1.txt" 'Total generated tokens')
  if [ "$tokens_cinfer" != "$tokens_peer" ]; then
    echo "bench-serving: the sides generated $tokens_cinfer and $tokens_peer tokens for the same requests" >&2
    return 1
  fi
  echo "   both sides: $(figure "$out/cinfer-1.txt" 'Total input tokens') prompt tokens," \
       "$tokens_cinfer generated tokens per round; medians over $rounds rounds:"
  printf '   %-32s %12s %12s %14s\n' "" cinfer llama.cpp "cinfer/peer"
  local label
  for label in 'Request throughput (req/s)' 'Output token throughput (tok/s)' 'Median TTFT (ms)' 'P99 TTFT (ms)' \
               'Median ITL (ms)' 'Median E2E Latency (ms)'; do
    local c p
    c=$(for r in $(seq "$rounds"); do figure "$out/cinfer-$r.txt" "$label"; done | median)
    p=$(for r in $(seq "$rounds"); do figure "$out/peer-$r.txt" "$label"; done | median)
    printf '   %-32s %12s %12s %13.2fx\n' "$label" "$c" "$p" "$(awk -v c="$c" -v p="$p" 'BEGIN { print c / p }')"
  done
  echo "   (throughput: above 1x is cinfer faster; latency: below 1x is cinfer faster)"
  kill "$cinfer_pid" "$peer_pid"
  wait "$cinfer_pid" "$peer_pid" 2>/dev/null || true
  trap - EXIT
}

header() {
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
       "load average $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD); nice $nice_level"
}

if [ "${1:-}" = --peer ]; then
  header
  peer_comparison
  exit
fi
if (($# > 0)); then
  run "$@"
  exit
fi
header
serve=(--serve-arg --num-threads --serve-arg "$threads")
for rate in 16 64 inf; do
  run --model models/default "${serve[@]}" --num-prompts 128 --request-rate "$rate" \
      --random-input-len 128 --random-output-len 64 --random-range-ratio 0.5 --seed 1
done
run --model models/default "${serve[@]}" --backend completions --num-prompts 128 --max-concurrency 16 \
    --random-input-len 128 --random-output-len 64 --random-range-ratio 0.5 --seed 1
smollm_model
run --model "$model" "${serve[@]}" --num-prompts 32 --max-concurrency 8 \
    --random-input-len 128 --random-output-len 32 --random-range-ratio 0.5 --seed 1
peer_comparison
