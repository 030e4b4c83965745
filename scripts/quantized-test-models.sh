#!/usr/bin/env bash
# Writes tests/data/models/quantized/: the two real trained models cinfer's tests run
# (stories260K, the default model) quantized by llama.cpp's own llama-quantize in the
# types people download (Q4_K_M, Q5_K_M, Q6_K, Q4_0, IQ4_XS, Q3_K_M, Q2_K), the types
# each file holds per tensor, and llama.cpp's greedy continuations of a few prompts
# (expected.json), which tests/test_quantized_models.c requires cinfer to reproduce.
# CI does not build llama.cpp, so the files are committed; this script says how they
# were made and remakes them (deterministically, for one llama.cpp source).
#
#   scripts/quantized-test-models.sh
#
# Needs llama.cpp built by scripts/build-llama-cpp.sh (CINFER_LLAMA_CPP_CACHE, default
# .cache/llama.cpp) and /usr/bin/python3 with numpy. The default model goes to GGUF
# through tools/hf_to_gguf.py (llama.cpp's convert_hf_to_gguf.py needs torch and
# transformers, which Debian's python lacks), with tokenizer.ggml.pre "gpt-2".
set -euo pipefail
cd "$(dirname "$0")/.."
out=tests/data/models/quantized
types=(Q4_K_M Q5_K_M Q6_K Q4_0 IQ4_XS Q3_K_M Q2_K)
cache=${CINFER_LLAMA_CPP_CACHE:-$PWD/.cache/llama.cpp}
bin=$cache/build/bin
[ -x "$bin/llama-quantize" ] || scripts/build-llama-cpp.sh >&2
build_name=$(cat "$cache/build.name")
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

greedy=$work/llama_cpp_greedy
cc -O2 -std=c11 -Wall -Wextra -Werror -I"$cache/src/include" -I"$cache/src/ggml/include" \
  "-DLLAMA_CPP_PEER_BUILD=\"$build_name\"" bench/peers/llama_cpp_greedy.c -o "$greedy" -L"$bin" -lllama

# llama.cpp's gguf-split (not among the tools scripts/build-llama-cpp.sh builds), compiled
# here against that build's libraries
split_tool=$work/llama-gguf-split
g++ -O1 -std=c++17 -I"$cache/src/include" -I"$cache/src/ggml/include" -I"$cache/src/common" -I"$cache/src/vendor" \
  "$cache/src/tools/gguf-split/gguf-split.cpp" -o "$split_tool" -L"$bin" -L"$cache/build/common" \
  -lllama-common -lllama-common-base -lllama -lggml -lggml-base -Wl,-rpath-link,"$bin"

mkdir -p "$out"
/usr/bin/python3 tools/hf_to_gguf.py models/default "$work/default-f32.gguf" --name "cinfer default model" >&2
cp tests/data/models/stories260K.gguf "$work/stories260K-f32.gguf"
for model in stories260K default; do
  for t in "${types[@]}"; do
    "$bin/llama-quantize" "$work/$model-f32.gguf" "$out/$model-$t.gguf" "$t" >"$work/$model-$t.log" 2>&1 ||
      { cat "$work/$model-$t.log" >&2; exit 1; }
  done
done

# one model split as gguf-split writes it: three files, metadata in the first
rm -rf "$out/split"
mkdir -p "$out/split"
"$split_tool" --split-max-tensors 20 "$out/stories260K-Q4_K_M.gguf" "$out/split/stories260K-Q4_K_M" >"$work/split.log" 2>&1 ||
  { cat "$work/split.log" >&2; exit 1; }

# llama.cpp's greedy continuations, 48 tokens each, its own tokenizer on the prompts
{
  echo "{\"llama_cpp_build\": \"$build_name\", \"n_new\": 48, \"runs\": ["
  first=1
  for model in stories260K default; do
    if [ $model = stories260K ]; then prompts=("Once upon a time" "Lily and Tom went to the park"); else
      prompts=("And God said" "In the beginning"); fi
    for t in "${types[@]}"; do
      for p in "${prompts[@]}"; do
        [ $first = 1 ] || echo ","
        first=0
        printf '{"file": "%s", "prompt": "%s", "llama_cpp": ' "$model-$t.gguf" "$p"
        "$greedy" --model "$out/$model-$t.gguf" --prompt "$p" --n-new 48 2>/dev/null | tr -d '\n'
        printf '}'
      done
    done
  done
  for p in "Once upon a time" "Lily and Tom went to the park"; do  # llama.cpp reading the split model
    printf ',\n{"file": "split/stories260K-Q4_K_M-00001-of-00003.gguf", "prompt": "%s", "llama_cpp": ' "$p"
    "$greedy" --model "$out/split/stories260K-Q4_K_M-00001-of-00003.gguf" --prompt "$p" --n-new 48 2>/dev/null |
      tr -d '\n'
    printf '}'
  done
  echo "]}"
} >"$work/expected.json"
# Where greedy is a coin toss: the float64 numpy reference (tests/reference/model_reference.py:
# the files' weights dequantized, exact arithmetic) along llama.cpp's tokens gives each
# step's top-two logit gap (negative where its argmax is not llama.cpp's token). Both
# llama.cpp and cinfer round activations to int8 blocks (logits move by up to about 0.2
# on stories260K, 0.08 on the default model), so at a gap below NEAR_TIE they may part.
/usr/bin/python3 - "$work/expected.json" "$out" >"$out/expected.json" <<'EOF'
import json, sys
import numpy as np
sys.path.insert(0, "tests/reference")
from model_reference import Model
d = json.load(open(sys.argv[1]))
d["near_tie_logit_gap"] = 0.5
models = {}
for r in d["runs"]:
    # the numpy reader takes single files: a split model's reference is the file it was split from
    whole = r["file"].replace("split/", "").replace("-00001-of-00003.gguf", ".gguf")
    m = models.setdefault(whole, Model(f"{sys.argv[2]}/{whole}"))
    p, g = r["llama_cpp"]["prompt_ids"], r["llama_cpp"]["greedy_ids"]
    logits = m.forward(p + g[:-1])[len(p) - 1:]  # (n_new, vocab)
    top2 = np.sort(logits, axis=1)[:, -2:]
    gaps = [float(top2[j, 1] - top2[j, 0]) if int(np.argmax(logits[j])) == g[j] else
            float(logits[j, g[j]] - top2[j, 1]) for j in range(len(g))]
    r["reference_gaps"] = [round(x, 4) for x in gaps]
runs = d.pop("runs")
print("{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in d.items()) + ', "runs": [')
print(",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in runs))
print("]}")
EOF

# what each file holds: tensor types and counts
/usr/bin/python3 - "$out" "$build_name" "${types[@]}" >"$out/README.md" <<'EOF'
import os, sys
sys.path.insert(0, "tests/reference")
from model_reference import GGUFReader
import ggml_quants
out, build, types = sys.argv[1], sys.argv[2], sys.argv[3:]
names = {0: "f32", 1: "f16", 30: "bf16", **ggml_quants.TYPE_BY_ID}
print("""# Quantized models for tests

Made by `scripts/quantized-test-models.sh` (which remakes every file here) with the
`llama-quantize` of """ + build + """:

- `stories260K-*.gguf` from `../stories260K.gguf` (F32, llama.cpp's own conversion);
- `default-*.gguf` from `models/default` (the Hugging Face folder) converted to GGUF F32 by
  `tools/hf_to_gguf.py` (llama.cpp's `convert_hf_to_gguf.py` needs torch and transformers),
  tokenizer.ggml.pre `gpt-2`.

Each in Q4_K_M, Q5_K_M, Q6_K, Q4_0 and IQ4_XS. Where a row is not a multiple of 256
(stories260K: rows of 64 and 172; the default model: rows of 688 in ffn_down)
llama-quantize falls back to other types (q5_0, q5_1, q8_0, iq4_nl; f16 where a row is
not even a multiple of 32), so the files hold these types (1-D norms stay f32):
""")
print("| file | bytes | tensor types (count) |")
print("|---|---:|---|")
for model in ("stories260K", "default"):
    for t in types:
        path = os.path.join(out, f"{model}-{t}.gguf")
        g = GGUFReader(path)
        count = {}
        for name, info in g.tensor_types.items():
            count[names.get(info, str(info))] = count.get(names.get(info, str(info)), 0) + 1
        desc = ", ".join(f"{k} ({v})" for k, v in sorted(count.items(), key=lambda kv: -kv[1]))
        print(f"| {model}-{t}.gguf | {os.path.getsize(path)} | {desc} |")
print("""
`expected.json`: llama.cpp's greedy continuation (48 tokens, its own tokenizer on the
prompt, f16 KV cache; `bench/peers/llama_cpp_greedy.c`) of two prompts per file, and for
each step the float64 numpy reference's top-two logit gap (negative where its argmax is
not llama.cpp's token), which `tests/test_quantized_models.c` uses to tell near ties.
`split/`: stories260K-Q4_K_M split into three files by llama.cpp's `gguf-split`
(`--split-max-tensors 20`), loaded from its first part.
`SHA256SUMS`: the files as made.""")
EOF
(cd "$out" && sha256sum ./*.gguf split/*.gguf | sed 's| \./| |') >"$out/SHA256SUMS"
echo "wrote $out: $(find "$out" -type f | wc -l) files" >&2
