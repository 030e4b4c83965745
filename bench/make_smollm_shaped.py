#!/usr/bin/python3
"""Writes random-weight GGUF files shaped like SmolLM-135M, for the model benchmark.

SmolLM-135M: Llama architecture, hidden 576, intermediate 1536, 30 layers, 9 attention
heads and 3 KV heads (head_dim 64), vocabulary 49152, tied embeddings (no output.weight:
llama.cpp and cinfer both fall back to token_embd.weight for the LM head).

The weights are random (normal, std 0.02; norms 1.0), drawn from a generator seeded by
the tensor name, so every file holds the same model in a different storage type:
  smollm-shaped-f32.gguf, -f16.gguf, -bf16.gguf, -q8_0.gguf
Norm vectors stay f32 in every file, as llama.cpp's converter and quantizer keep them.

The vocabulary is a valid SentencePiece-style ("llama") vocabulary of 49152 entries so
llama.cpp accepts the file: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF> (its
loader looks up <0x0A> for the newline token) and unique word pieces. The benchmark
feeds token ids directly; the vocabulary only has to load.

The types people download (Q4_K_M, Q5_K_M, Q6_K, Q4_0, IQ4_XS, ... in llama-quantize's
spelling) are made from the f32 file by llama.cpp's own llama-quantize (--llama-quantize,
the binary scripts/build-llama-cpp.sh builds): smollm-shaped-Q4_K_M.gguf etc. SmolLM's rows
of 576 are no multiple of 256, so llama-quantize falls back there as it does for the real
SmolLM-135M (Q4_K_M: q5_0 for the 576-wide matrices, q4_K/q6_K for ffn_down, q8_0 for the
embeddings; Q6_K: q8_0 and q6_K; Q4_0: q4_0 and a q8_0 embedding).

--heads H --kv-heads K write the same model with other head counts (head_dim = 576 / H),
named smollm-shaped-hHkvK-TYPE.gguf: SmolLM-135M's 9 heads and 3 KV heads split over
tensor-parallel sizes 3 and 9 only, and bench_comm compares tp_size 2 on 8 and 4.

Usage: make_smollm_shaped.py OUT_DIR [--types f32,f16,bf16,q8_0,Q4_K_M] [--layers N]
                             [--heads H --kv-heads K] [--llama-quantize PATH]
Files that already exist are kept (each is written to a temporary name, then renamed).
Needs /usr/bin/python3 with Debian's python3-numpy.
"""
import argparse
import os
import subprocess
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from gguf_writer import GGMLType, GGUFWriter, ValueType  # noqa: E402  (tools/gguf_writer.py)

SHAPE = dict(vocab=49152, hidden=576, intermediate=1536, layers=30, heads=9, kv_heads=3,
             context=2048, rope_theta=10000.0, rms_eps=1e-5)
# --shape: the files' name prefix and shape. llama-3.2-1b (scripts/gpu-check's benchmark):
# Llama-3.2-1B's matrices (hidden 2048, 16 layers, 32 heads, 8 KV heads, ffn 8192,
# vocabulary 128256, tied embeddings) with the same random values and vocabulary scheme.
SHAPES = {
    "smollm-135m": ("smollm-shaped", SHAPE),
    "llama-3.2-1b": ("llama1b-shaped", dict(vocab=128256, hidden=2048, intermediate=8192, layers=16, heads=32,
                                            kv_heads=8, context=8192, rope_theta=500000.0, rms_eps=1e-5)),
}

# general.file_type values (llama.cpp's enum llama_ftype)
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}
GGML_TYPE = {"f32": GGMLType.F32, "f16": GGMLType.F16, "q8_0": GGMLType.Q8_0, "bf16": GGMLType.BF16}


def tensor_list(shape):
    """(name, ggml shape [ne0 = row length, ne1 = rows], is_norm) in file order."""
    h, ff = shape["hidden"], shape["intermediate"]
    head_dim = h // shape["heads"]
    kv = shape["kv_heads"] * head_dim
    out = [("token_embd.weight", [h, shape["vocab"]], False)]
    for i in range(shape["layers"]):
        p = f"blk.{i}."
        out += [
            (p + "attn_norm.weight", [h], True),
            (p + "attn_q.weight", [h, h], False),
            (p + "attn_k.weight", [h, kv], False),
            (p + "attn_v.weight", [h, kv], False),
            (p + "attn_output.weight", [h, h], False),
            (p + "ffn_norm.weight", [h], True),
            (p + "ffn_gate.weight", [h, ff], False),
            (p + "ffn_up.weight", [h, ff], False),
            (p + "ffn_down.weight", [ff, h], False),
        ]
    out.append(("output_norm.weight", [h], True))
    return out


def random_values(name, ne, is_norm):
    """The f32 values of a tensor, numpy-shaped (rows, row length) or (row length) for
    1-D tensors; the same in every file."""
    if is_norm:
        return np.ones(ne[0], dtype=np.float32)
    rows = ne[1]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return (rng.standard_normal((rows, ne[0]), dtype=np.float32) * np.float32(0.02))


def vocabulary(n):
    """A SentencePiece-style vocabulary: tokens, scores, token types (llama.cpp's
    LLAMA_TOKEN_TYPE: 1 normal, 2 unknown, 3 control, 6 byte)."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    letters = "abcdefghijklmnopqrstuvwxyz"
    i = 0
    while len(tokens) < n:
        word, k = "", i
        while True:  # bijective base 26: a, b, ..., z, aa, ab, ...
            word = letters[k % 26] + word
            k = k // 26 - 1
            if k < 0:
                break
        tokens.append("\u2581" + word)
        types.append(1)
        i += 1
    scores = [0.0] * 259 + [-float(j) for j in range(n - 259)]
    return tokens, scores, types


def write_model(path, wtype, shape):
    head_dim = shape["hidden"] // shape["heads"]
    u32 = ValueType.UINT32
    w = GGUFWriter()
    w.add("general.architecture", "llama")
    w.add("general.name", f"{shape.get('name', 'smollm-135m')}-shaped random {wtype}")
    w.add("general.file_type", FILE_TYPE[wtype], u32)
    w.add("llama.context_length", shape["context"], u32)
    w.add("llama.embedding_length", shape["hidden"], u32)
    w.add("llama.block_count", shape["layers"], u32)
    w.add("llama.feed_forward_length", shape["intermediate"], u32)
    w.add("llama.attention.head_count", shape["heads"], u32)
    w.add("llama.attention.head_count_kv", shape["kv_heads"], u32)
    w.add("llama.rope.dimension_count", head_dim, u32)
    w.add("llama.rope.freq_base", shape["rope_theta"], ValueType.FLOAT32)
    w.add("llama.attention.layer_norm_rms_epsilon", shape["rms_eps"], ValueType.FLOAT32)
    w.add("llama.vocab_size", shape["vocab"], u32)
    tokens, scores, types = vocabulary(shape["vocab"])
    w.add("tokenizer.ggml.model", "llama")
    w.add("tokenizer.ggml.tokens", tokens, elem_type=ValueType.STRING)
    w.add("tokenizer.ggml.scores", scores, elem_type=ValueType.FLOAT32)
    w.add("tokenizer.ggml.token_type", types, elem_type=ValueType.INT32)
    w.add("tokenizer.ggml.unknown_token_id", 0, u32)
    w.add("tokenizer.ggml.bos_token_id", 1, u32)
    w.add("tokenizer.ggml.eos_token_id", 2, u32)
    w.add("tokenizer.ggml.add_bos_token", True)
    w.add("tokenizer.ggml.add_eos_token", False)
    for name, ne, is_norm in tensor_list(shape):
        w.add_tensor(name, random_values(name, ne, is_norm), GGML_TYPE["f32" if is_norm else wtype])
    tmp = path + ".tmp"
    w.write(tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--types", default="f32,f16,bf16,q8_0")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="smollm-135m",
                    help="the model shape (default smollm-135m; llama-3.2-1b names files llama1b-shaped-*)")
    ap.add_argument("--layers", type=int, default=None,
                    help="fewer layers for quick checks (default the shape's: 30 for SmolLM-135M)")
    ap.add_argument("--llama-quantize", default=None, help="llama.cpp's llama-quantize, for Q4_K_M and the like")
    ap.add_argument("--heads", type=int, default=None, help="attention heads (default the shape's: 9)")
    ap.add_argument("--kv-heads", type=int, default=None, help="key-value heads (default the shape's: 3)")
    args = ap.parse_args()
    prefix, base = SHAPES[args.shape]
    layers = args.layers if args.layers is not None else base["layers"]
    heads = args.heads if args.heads is not None else base["heads"]
    kv_heads = args.kv_heads if args.kv_heads is not None else base["kv_heads"]
    if base["hidden"] % heads or heads % kv_heads or (base["hidden"] // heads) % 2:
        sys.exit(f"make_smollm_shaped: {heads} heads and {kv_heads} KV heads do not fit hidden "
                 f"{base['hidden']} (head_dim must be a whole even number, heads a multiple of KV heads)")
    shape = dict(base, layers=layers, heads=heads, kv_heads=kv_heads, name=args.shape)
    os.makedirs(args.out_dir, exist_ok=True)
    suffix = "" if layers == base["layers"] else f"-{layers}l"
    if (heads, kv_heads) != (base["heads"], base["kv_heads"]):
        suffix += f"-h{heads}kv{kv_heads}"
    types = args.types.split(",")
    quantized = [t for t in types if t not in FILE_TYPE]
    if quantized and "f32" not in types:
        types.insert(0, "f32")  # what llama-quantize starts from
    for t in types:
        path = os.path.join(args.out_dir, f"{prefix}{suffix}-{t}.gguf")
        if os.path.exists(path):
            print(f"{path}: exists, kept")
            continue
        if t in FILE_TYPE:
            write_model(path, t, shape)
        else:
            if not args.llama_quantize:
                sys.exit(f"make_smollm_shaped: type '{t}' is made by llama-quantize: give --llama-quantize PATH "
                         f"(or one of {', '.join(FILE_TYPE)})")
            source = os.path.join(args.out_dir, f"{prefix}{suffix}-f32.gguf")
            done = subprocess.run([args.llama_quantize, source, path + ".tmp", t], capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"make_smollm_shaped: llama-quantize {t} failed:\n{done.stderr[-2000:]}")
            os.replace(path + ".tmp", path)
        print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
