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

Usage: make_smollm_shaped.py OUT_DIR [--types f32,f16,bf16,q8_0] [--layers N]
Files that already exist are kept (each is written to a temporary name, then renamed).
Needs /usr/bin/python3 with Debian's python3-numpy.
"""
import argparse
import os
import sys
import zlib

import struct

import numpy as np

SHAPE = dict(vocab=49152, hidden=576, intermediate=1536, layers=30, heads=9, kv_heads=3,
             context=2048, rope_theta=10000.0, rms_eps=1e-5)

# general.file_type values (llama.cpp's enum llama_ftype)
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}


class MinimalGGUFWriter:
    """GGUF v3 with the few value types this generator needs; tensors are produced
    lazily (one at a time) so the f32 file never sits whole in memory."""
    ALIGN = 32
    GGML = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q8_0": (8, 32, 34), "bf16": (30, 1, 2)}

    def __init__(self):
        self.kv = []
        self.tensors = []

    @staticmethod
    def _str(s):
        b = s.encode()
        return struct.pack("<Q", len(b)) + b

    def add_string(self, k, v): self.kv.append(self._str(k) + struct.pack("<I", 8) + self._str(v))
    def add_uint32(self, k, v): self.kv.append(self._str(k) + struct.pack("<II", 4, v))
    def add_float32(self, k, v): self.kv.append(self._str(k) + struct.pack("<If", 6, v))
    def add_bool(self, k, v): self.kv.append(self._str(k) + struct.pack("<IB", 7, 1 if v else 0))

    def add_array_string(self, k, vs):
        self.kv.append(self._str(k) + struct.pack("<IIQ", 9, 8, len(vs)) + b"".join(self._str(v) for v in vs))

    def add_array_float32(self, k, vs):
        self.kv.append(self._str(k) + struct.pack("<IIQ", 9, 6, len(vs)) + np.asarray(vs, "<f4").tobytes())

    def add_array_int32(self, k, vs):
        self.kv.append(self._str(k) + struct.pack("<IIQ", 9, 5, len(vs)) + np.asarray(vs, "<i4").tobytes())

    def add_tensor_lazy(self, name, ne, ttype, make):
        self.tensors.append((name, ne, ttype, make))

    def _nbytes(self, ne, ttype):
        _, block, block_bytes = self.GGML[ttype]
        n = 1
        for d in ne:
            n *= d
        return n // block * block_bytes

    @staticmethod
    def _pad(n, a):
        return (n + a - 1) // a * a

    def write(self, path):
        infos, offset = [], 0
        for name, ne, ttype, _ in self.tensors:
            infos.append(self._str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
                         + struct.pack("<IQ", self.GGML[ttype][0], offset))
            offset = self._pad(offset + self._nbytes(ne, ttype), self.ALIGN)
        with open(path, "wb") as f:
            f.write(b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)))
            for kv in self.kv:
                f.write(kv)
            for info in infos:
                f.write(info)
            f.write(b"\0" * (self._pad(f.tell(), self.ALIGN) - f.tell()))
            for name, ne, ttype, make in self.tensors:
                data = encode(make(), ttype)
                assert len(data) == self._nbytes(ne, ttype), name
                f.write(data)
                f.write(b"\0" * (self._pad(len(data), self.ALIGN) - len(data)))


def encode(x, ttype):
    """f32 values (rows, cols) to the bytes of a ggml tensor of type ttype."""
    if ttype == "f32":
        return x.astype("<f4").tobytes()
    if ttype == "f16":
        return x.astype("<f2").tobytes()
    if ttype == "bf16":  # round to nearest even, as ggml_compute_fp32_to_bf16
        u = x.astype("<f4").view("<u4").astype(np.uint64)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()
    if ttype == "q8_0":  # ggml's quantize_row_q8_0_ref: d = amax / 127, q = round(x / d)
        blocks = x.reshape(-1, 32)
        d = np.abs(blocks).max(axis=1) / np.float32(127)
        inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
        q = blocks * inv[:, None]
        q = np.trunc(q + np.copysign(np.float32(0.5), q)).astype(np.int8)  # roundf: half away from 0
        out = np.empty(len(blocks), dtype=[("d", "<f2"), ("qs", "i1", 32)])
        out["d"] = d.astype("<f2")
        out["qs"] = q
        return out.tobytes()
    raise ValueError(ttype)


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
    """The f32 values of a tensor, (rows, row length), same in every file."""
    rows = 1 if len(ne) == 1 else ne[1]
    if is_norm:
        return np.ones((rows, ne[0]), dtype=np.float32)
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
    w = MinimalGGUFWriter()
    w.add_string("general.architecture", "llama")
    w.add_string("general.name", f"smollm-135m-shaped random {wtype}")
    w.add_uint32("general.file_type", FILE_TYPE[wtype])
    w.add_uint32("llama.context_length", shape["context"])
    w.add_uint32("llama.embedding_length", shape["hidden"])
    w.add_uint32("llama.block_count", shape["layers"])
    w.add_uint32("llama.feed_forward_length", shape["intermediate"])
    w.add_uint32("llama.attention.head_count", shape["heads"])
    w.add_uint32("llama.attention.head_count_kv", shape["kv_heads"])
    w.add_uint32("llama.rope.dimension_count", head_dim)
    w.add_float32("llama.rope.freq_base", shape["rope_theta"])
    w.add_float32("llama.attention.layer_norm_rms_epsilon", shape["rms_eps"])
    w.add_uint32("llama.vocab_size", shape["vocab"])
    tokens, scores, types = vocabulary(shape["vocab"])
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array_string("tokenizer.ggml.tokens", tokens)
    w.add_array_float32("tokenizer.ggml.scores", scores)
    w.add_array_int32("tokenizer.ggml.token_type", types)
    w.add_uint32("tokenizer.ggml.unknown_token_id", 0)
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    for name, ne, is_norm in tensor_list(shape):
        ttype = "f32" if is_norm else wtype
        w.add_tensor_lazy(name, ne, ttype,
                          lambda name=name, ne=ne, is_norm=is_norm: random_values(name, ne, is_norm))
    tmp = path + ".tmp"
    w.write(tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--types", default="f32,f16,bf16,q8_0")
    ap.add_argument("--layers", type=int, default=SHAPE["layers"],
                    help="fewer layers for quick checks (default 30, as SmolLM-135M)")
    args = ap.parse_args()
    shape = dict(SHAPE, layers=args.layers)
    os.makedirs(args.out_dir, exist_ok=True)
    suffix = "" if args.layers == SHAPE["layers"] else f"-{args.layers}l"
    for t in args.types.split(","):
        if t not in FILE_TYPE:
            sys.exit(f"make_smollm_shaped: unknown type '{t}': expected one of {', '.join(FILE_TYPE)}")
        path = os.path.join(args.out_dir, f"smollm-shaped{suffix}-{t}.gguf")
        if os.path.exists(path):
            print(f"{path}: exists, kept")
            continue
        write_model(path, t, shape)
        print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
