# shellcheck shell=bash
# scripts/bench-common.sh — what the benchmark scripts share; sourced, not run.
# Each script starts with
#   cd "$(dirname "$0")/.."; . scripts/bench-common.sh; bench_own_session "$@"

nice_level=${CINFER_BENCH_NICE:--20}

# The kernel's autogroup scheduling shares CPU between sessions first and applies nice
# only inside one, so as root the script re-runs itself in a session of its own
# (setsid) and sets that session's autogroup nice as well as the processes' nice.
# CINFER_BENCH_NICE=0 turns this off.
bench_own_session() {
  if [ "$(id -u)" -eq 0 ] && [ "$nice_level" != 0 ] && [ -z "${CINFER_BENCH_OWN_SESSION:-}" ]; then
    export CINFER_BENCH_OWN_SESSION=1
    exec setsid --wait "$0" "$@"
  fi
  if [ -n "${CINFER_BENCH_OWN_SESSION:-}" ] && [ -w /proc/self/autogroup ]; then
    echo "$nice_level" >/proc/self/autogroup || true
  fi
}

# llama.cpp's prebuilt CPU binaries through node-llama-cpp (pinned by
# bench/peers/package-lock.json), installed once into .cache/bench and shared by every
# script; exports CINFER_BENCH_NODE_MODULES for the peers.
bench_install_peer() {
  local peer_dir=$PWD/.cache/bench
  mkdir -p "$peer_dir"
  if ! cmp -s bench/peers/package-lock.json "$peer_dir/package-lock.json" || [ ! -d "$peer_dir/node_modules" ]; then
    cp bench/peers/package.json bench/peers/package-lock.json "$peer_dir/"
    npm ci --prefix "$peer_dir" --omit=optional --ignore-scripts --no-audit --no-fund >&2
  fi
  export CINFER_BENCH_NODE_MODULES=$peer_dir/node_modules
}
