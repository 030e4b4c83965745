#!/usr/bin/env bash
# Writes tests/data/models/architectures/: one random-weight GGUF file (f32) of each
# family cinfer runs, as tests/reference/make_random_models.py writes them (the same
# files test_model_reference holds to the float64 numpy reference), and llama.cpp's
# greedy continuations of two prompts given as ids (expected.json), which
# tests/test_architectures_llama_cpp.c requires cinfer to reproduce. A second
# implementation of each family's blocks (Gemma's norms, soft-capping and sliding
# layers, Phi-3's fused projections, Qwen3's q/k norms, YaRN, LongRoPE, the experts,
# Qwen2-MoE's gated shared expert, gpt-oss's sinks) reading the same
# files: where llama.cpp and cinfer agree on the GGUF side, the conventions of both
# loaders agree too.
#
#   scripts/architecture-test-models.sh
#
# CI does not build llama.cpp, so the files are committed; this script says how they
# were made and remakes them. Needs llama.cpp built by scripts/build-llama-cpp.sh
# (CINFER_LLAMA_CPP_CACHE, default .cache/llama.cpp) and /usr/bin/python3 with numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
out=tests/data/models/architectures
families=(llama mistral qwen2 qwen3 gemma2 gemma3 phi3 qwen3_yarn phi3_longrope phi4_mini qwen3_moe mixtral)
families+=(qwen2_moe)
# gpt-oss: sinks, biases, a window of 8 on alternate layers, YaRN, 8 experts with the clamped SwiGLU
families+=(gpt_oss)
cache=${CINFER_LLAMA_CPP_CACHE:-$PWD/.cache/llama.cpp}
bin=$cache/build/bin
[ -x "$bin/llama-quantize" ] || scripts/build-llama-cpp.sh >&2
build_name=$(cat "$cache/build.name")
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
greedy=$work/llama_cpp_greedy
cc -O2 -std=c11 -Wall -Wextra -Werror -I"$cache/src/include" -I"$cache/src/ggml/include" \
  "-DLLAMA_CPP_PEER_BUILD=\"$build_name\"" bench/peers/llama_cpp_greedy.c -o "$greedy" -L"$bin" -lllama \
  -Wl,-rpath-link,"$bin"
/usr/bin/python3 tests/reference/make_random_models.py "$work/models" >&2
mkdir -p "$out"
rm -f "$out"/*.gguf  # README.md stays
for f in "${families[@]}"; do
  cp "$work/models/models/$f-gguf-f32.gguf" "$out/$f.gguf"
done
# Two prompts of ids: a short one, and one longer than the 32-token sliding windows of
# the Gemma files so that their windows cut in during prefill and decode.
short=1,45,120,33,250,7
long=1,$(/usr/bin/python3 -c 'print(",".join(str(3 + (37 * i * i + 11 * i) % 269) for i in range(44)))')
n_new=24
{
  echo "{\"llama_cpp_build\": \"$build_name\", \"n_new\": $n_new, \"runs\": ["
  first=1
  for f in "${families[@]}"; do
    for p in "$short" "$long"; do
      [ $first = 1 ] || echo ","
      first=0
      printf '{"file": "%s.gguf", "llama_cpp": ' "$f"
      "$greedy" --model "$out/$f.gguf" --prompt-ids "$p" --n-new $n_new --threads 1 2>"$work/$f.log" |
        tr -d '\n' || { cat "$work/$f.log" >&2; exit 1; }
      printf '}'
    done
  done
  echo "]}"
} >"$work/expected.json"
# Each step's top-two logit gap from the float64 numpy reference along llama.cpp's
# tokens (negative where its argmax is not llama.cpp's token): both engines compute in
# f32 with f16 K/V, so below NEAR_TIE two correct implementations may part.
/usr/bin/python3 - "$work/expected.json" "$out" >"$out/expected.json" <<'PY'
import json, sys
import numpy as np
sys.path.insert(0, "tests/reference")
from model_reference import Model
d = json.loads(open(sys.argv[1], "rb").read().decode("utf-8", "replace"))  # the random vocabulary's bytes
d["near_tie_logit_gap"] = 0.01
models = {}
for r in d["runs"]:
    m = models.setdefault(r["file"], Model(f"{sys.argv[2]}/{r['file']}"))
    p, g = r["llama_cpp"]["prompt_ids"], r["llama_cpp"]["greedy_ids"]
    logits = m.forward(p + g[:-1])[len(p) - 1:]  # (n_new, vocab)
    top2 = np.sort(logits, axis=1)[:, -2:]
    gaps = [float(top2[j, 1] - top2[j, 0]) if int(np.argmax(logits[j])) == g[j] else
            float(logits[j, g[j]] - top2[j, 1]) for j in range(len(g))]
    r["reference_gaps"] = [round(x, 5) for x in gaps]
    r["llama_cpp"].pop("text", None)  # the random vocabulary's bytes: nothing to read
runs = d.pop("runs")
print("{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in d.items()) + ', "runs": [')
print(",\n".join("  " + json.dumps(r) for r in runs))
print("]}")
PY
(cd "$out" && sha256sum ./*.gguf >SHA256SUMS)
echo "wrote $out: ${#families[@]} files, $(grep -c '"file"' "$out/expected.json") runs" >&2
