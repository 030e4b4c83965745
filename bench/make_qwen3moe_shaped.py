#!/usr/bin/python3
"""Writes a random-weight GGUF file shaped like a small Qwen3-MoE, for the
mixture-of-experts decode benchmark (scripts/bench-moe.sh).

Qwen3-30B-A3B has 128 experts of which 8 run per token, experts of width 768 on a
hidden size of 2048, 48 layers. This file keeps the expert count and the 8 active
ones and shrinks the rest so the file stays a few hundred MB: hidden 512, expert width
256, 6 layers, 8 attention heads and 4 KV heads of head_dim 64 (q/k norms as Qwen3),
a vocabulary of 8192 and an untied output matrix. Every layer is sparse (qwen3moe as
llama.cpp's converter writes it): the router blk.N.ffn_gate_inp (f32, as the converter
keeps it) and the experts merged as 3-D tensors blk.N.ffn_{gate,up,down}_exps.

A batch-1 decode step reads the attention, the router and 8 of the 128 experts of each
layer (about 1/16 of the expert bytes), the output matrix and one embedding row.

Usage: make_qwen3moe_shaped.py OUT_DIR [--types q8_0,bf16] [--layers 6]
Files that already exist are kept.
"""
import argparse
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_smollm_shaped import FILE_TYPE, GGML_TYPE, vocabulary  # noqa: E402
from gguf_writer import GGUFWriter, ValueType  # noqa: E402  (tools/gguf_writer.py, on make_smollm_shaped's path)

SHAPE = dict(vocab=8192, hidden=512, layers=6, heads=8, kv_heads=4, head_dim=64, experts=128, used=8,
             expert_ff=256, context=4096, rope_theta=1000000.0, rms_eps=1e-6)


def values(name, shape, std=0.02):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


def write_model(path, wtype, s):
    a, u32 = "qwen3moe", ValueType.UINT32
    w = GGUFWriter()
    w.add("general.architecture", a)
    w.add("general.name", f"qwen3-moe-shaped random {wtype}")
    w.add("general.file_type", FILE_TYPE[wtype], u32)
    for key, value in (("context_length", s["context"]), ("embedding_length", s["hidden"]),
                       ("block_count", s["layers"]), ("feed_forward_length", 4 * s["hidden"]),
                       ("attention.head_count", s["heads"]), ("attention.head_count_kv", s["kv_heads"]),
                       ("attention.key_length", s["head_dim"]), ("attention.value_length", s["head_dim"]),
                       ("rope.dimension_count", s["head_dim"]), ("expert_count", s["experts"]),
                       ("expert_used_count", s["used"]), ("expert_feed_forward_length", s["expert_ff"]),
                       ("vocab_size", s["vocab"])):
        w.add(f"{a}.{key}", value, u32)
    w.add(f"{a}.rope.freq_base", s["rope_theta"], ValueType.FLOAT32)
    w.add(f"{a}.attention.layer_norm_rms_epsilon", s["rms_eps"], ValueType.FLOAT32)
    tokens, scores, types = vocabulary(s["vocab"])
    w.add("tokenizer.ggml.model", "llama")
    w.add("tokenizer.ggml.tokens", tokens, elem_type=ValueType.STRING)
    w.add("tokenizer.ggml.scores", scores, elem_type=ValueType.FLOAT32)
    w.add("tokenizer.ggml.token_type", types, elem_type=ValueType.INT32)
    w.add("tokenizer.ggml.unknown_token_id", 0, u32)
    w.add("tokenizer.ggml.bos_token_id", 1, u32)
    w.add("tokenizer.ggml.eos_token_id", 2, u32)
    h, E, ff = s["hidden"], s["experts"], s["expert_ff"]
    q, kv = s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]
    t = GGML_TYPE[wtype]
    f32 = GGML_TYPE["f32"]
    w.add_tensor("token_embd.weight", values("token_embd", (s["vocab"], h)), t)
    for i in range(s["layers"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(h, np.float32), f32)
        w.add_tensor(p + "attn_q.weight", values(p + "q", (q, h)), t)
        w.add_tensor(p + "attn_k.weight", values(p + "k", (kv, h)), t)
        w.add_tensor(p + "attn_v.weight", values(p + "v", (kv, h)), t)
        w.add_tensor(p + "attn_q_norm.weight", np.ones(s["head_dim"], np.float32), f32)
        w.add_tensor(p + "attn_k_norm.weight", np.ones(s["head_dim"], np.float32), f32)
        w.add_tensor(p + "attn_output.weight", values(p + "o", (h, q)), t)
        w.add_tensor(p + "ffn_norm.weight", np.ones(h, np.float32), f32)
        w.add_tensor(p + "ffn_gate_inp.weight", values(p + "router", (E, h), 1.0 / np.sqrt(h)), f32)
        w.add_tensor(p + "ffn_gate_exps.weight", values(p + "gate", (E, ff, h)), t)
        w.add_tensor(p + "ffn_up_exps.weight", values(p + "up", (E, ff, h)), t)
        w.add_tensor(p + "ffn_down_exps.weight", values(p + "down", (E, h, ff)), t)
    w.add_tensor("output_norm.weight", np.ones(h, np.float32), f32)
    w.add_tensor("output.weight", values("output", (s["vocab"], h)), t)
    tmp = path + ".tmp"
    w.write(tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--types", default="q8_0")
    ap.add_argument("--layers", type=int, default=SHAPE["layers"])
    args = ap.parse_args()
    shape = dict(SHAPE, layers=args.layers)
    os.makedirs(args.out_dir, exist_ok=True)
    for t in args.types.split(","):
        if t not in FILE_TYPE:
            sys.exit(f"make_qwen3moe_shaped: type '{t}': expected one of {', '.join(FILE_TYPE)}")
        path = os.path.join(args.out_dir, f"qwen3moe-shaped-{args.layers}l-{t}.gguf")
        if os.path.exists(path):
            print(f"{path}: exists, kept")
            continue
        write_model(path, t, shape)
        print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
