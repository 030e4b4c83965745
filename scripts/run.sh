#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds cinfer and runs the main job: generating
# text with the embedded default model (models/default). Extra arguments go to
# `cinfer generate` (for example --max-new-tokens 64 "In the beginning").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >build.configure.log 2>&1 || { cat build.configure.log; exit 1; }
cmake --build build -j"$(nproc)"
if [ $# -eq 0 ]; then
  # Sampled (seeded, so the text repeats run to run); greedy decoding of so small a
  # model falls into loops.
  set -- --log-level warning --max-new-tokens 64 --temperature 0.8 --top-p 0.95 --seed 7 "And God said"
fi
exec ./build/bin/cinfer generate "$@"
