#!/usr/bin/python3
"""hf_to_gguf — a Hugging Face Llama folder (config.json, model.safetensors in f32/f16/bf16,
tokenizer.json with a byte-level BPE model) to a GGUF file in f32, as llama.cpp's
convert_hf_to_gguf.py would write it, for machines where that converter cannot run (it
needs torch and transformers). What it writes follows the converter's LlamaModel:

  - general.architecture "llama", llama.* hyperparameters (context_length,
    embedding_length, block_count, feed_forward_length, head_count, head_count_kv,
    rope.dimension_count, rope.freq_base, layer_norm_rms_epsilon, vocab_size, key_length
    and value_length when head_dim is not hidden / heads);
  - tensors renamed to token_embd / blk.N.attn_* / ffn_* / output_norm / output (none when
    the embeddings are tied), Q and K rows permuted for interleaved RoPE
    (LlamaModel.permute), all in f32 (norms included, as the converter keeps 1-D tensors);
  - the tokenizer as tokenizer.ggml.model "gpt2": tokens in id order, token types
    (1 normal, 3 control for special added tokens, 4 user-defined for other added ones),
    merges, bos/eos ids, add_bos_token / add_eos_token from tokenizer_config.json, and
    tokenizer.ggml.pre from --pre (the converter derives it from a hash of the
    tokenizer's output on a fixed text; a model it does not know gets none, so say which:
    "gpt-2" for GPT-2's split, as cinfer's default model uses), chat template.

usage: hf_to_gguf.py HF_FOLDER OUT.gguf [--pre gpt-2] [--name NAME]
Needs /usr/bin/python3 with numpy.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_writer import GGMLType, GGUFWriter, ValueType  # noqa: E402

NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
DTYPES = {"F32": "<f4", "F16": "<f2"}


def read_safetensors(folder):
    """Every tensor of the folder's model.safetensors (or its shards) as float32."""
    index = os.path.join(folder, "model.safetensors.index.json")
    files = (sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index)
             else ["model.safetensors"])
    out = {}
    for name in files:
        with open(os.path.join(folder, name), "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
            blob = f.read()
        for key, info in header.items():
            if key == "__metadata__":
                continue
            a, b = info["data_offsets"]
            raw = blob[a:b]
            if info["dtype"] == "BF16":
                bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
                arr = bits.view(np.float32)
            elif info["dtype"] in DTYPES:
                arr = np.frombuffer(raw, dtype=DTYPES[info["dtype"]]).astype(np.float32)
            else:
                sys.exit(f"hf_to_gguf: {name}: tensor {key} is {info['dtype']}; expected F32, F16 or BF16")
            out[key] = arr.reshape(info["shape"])
    return out


def permute(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def bpe_vocab(folder):
    """tokens (by id), token types, merges and special ids from tokenizer.json."""
    tok = json.load(open(os.path.join(folder, "tokenizer.json")))
    model = tok["model"]
    if model.get("type") != "BPE":
        sys.exit(f"hf_to_gguf: {folder}/tokenizer.json: model type {model.get('type')}; expected BPE")
    vocab = dict(model["vocab"])
    added = {t["id"]: t for t in tok.get("added_tokens", [])}
    for i, t in added.items():
        vocab[t["content"]] = i
    n = max(vocab.values()) + 1
    tokens = [f"[PAD{i}]" for i in range(n)]
    types = [1] * n
    for piece, i in vocab.items():
        tokens[i] = piece
    for i, t in added.items():
        types[i] = 3 if t.get("special") else 4
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    return tokens, types, merges


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("out")
    ap.add_argument("--pre", default="gpt-2", help="tokenizer.ggml.pre (default gpt-2: GPT-2's split)")
    ap.add_argument("--name", default=None)
    args = ap.parse_args()
    c = json.load(open(os.path.join(args.folder, "config.json")))
    if c.get("model_type") not in ("llama", "mistral"):
        sys.exit(f"hf_to_gguf: model_type {c.get('model_type')}: this converter writes Llama-family folders only")
    tcfg_path = os.path.join(args.folder, "tokenizer_config.json")
    tcfg = json.load(open(tcfg_path)) if os.path.exists(tcfg_path) else {}
    hidden, heads = c["hidden_size"], c["num_attention_heads"]
    kv_heads = c.get("num_key_value_heads", heads)
    head_dim = c.get("head_dim") or hidden // heads
    w = read_safetensors(args.folder)
    tied = c.get("tie_word_embeddings", False) or "lm_head.weight" not in w

    g = GGUFWriter()
    u32, f32 = ValueType.UINT32, ValueType.FLOAT32
    g.add("general.architecture", "llama")
    g.add("general.name", args.name or os.path.basename(os.path.abspath(args.folder)))
    g.add("general.file_type", 0, u32)
    g.add("llama.context_length", c.get("max_position_embeddings", 2048), u32)
    g.add("llama.embedding_length", hidden, u32)
    g.add("llama.block_count", c["num_hidden_layers"], u32)
    g.add("llama.feed_forward_length", c["intermediate_size"], u32)
    g.add("llama.attention.head_count", heads, u32)
    g.add("llama.attention.head_count_kv", kv_heads, u32)
    g.add("llama.rope.dimension_count", head_dim, u32)
    g.add("llama.rope.freq_base", float(c.get("rope_theta", 10000.0)), f32)
    g.add("llama.attention.layer_norm_rms_epsilon", float(c.get("rms_norm_eps", 1e-6)), f32)
    g.add("llama.vocab_size", c["vocab_size"], u32)
    if head_dim != hidden // heads:
        g.add("llama.attention.key_length", head_dim, u32)
        g.add("llama.attention.value_length", head_dim, u32)
    if c.get("rope_scaling"):
        sys.exit("hf_to_gguf: rope_scaling is not written by this converter")
    tokens, types, merges = bpe_vocab(args.folder)
    g.add("tokenizer.ggml.model", "gpt2")
    g.add("tokenizer.ggml.pre", args.pre)
    g.add("tokenizer.ggml.tokens", tokens, elem_type=ValueType.STRING)
    g.add("tokenizer.ggml.token_type", types, elem_type=ValueType.INT32)
    g.add("tokenizer.ggml.merges", merges, elem_type=ValueType.STRING)
    ids = {t: i for i, t in enumerate(tokens)}
    for key, field in (("bos", "bos_token_id"), ("eos", "eos_token_id")):
        value = c.get(field)
        if value is None and isinstance(tcfg.get(f"{key}_token"), str):
            value = ids.get(tcfg[f"{key}_token"])
        if isinstance(value, list):
            value = value[0]
        if value is not None:
            g.add(f"tokenizer.ggml.{key}_token_id", int(value), u32)
    g.add("tokenizer.ggml.add_bos_token", bool(tcfg.get("add_bos_token", False)))
    g.add("tokenizer.ggml.add_eos_token", bool(tcfg.get("add_eos_token", False)))
    if tcfg.get("chat_template"):
        g.add("tokenizer.chat_template", tcfg["chat_template"])

    g.add_tensor("token_embd.weight", w["model.embed_tokens.weight"], GGMLType.F32)
    for i in range(c["num_hidden_layers"]):
        for hf, gg in NAMES.items():
            t = w[f"model.layers.{i}.{hf}"]
            if hf.startswith("self_attn.q_proj"):
                t = permute(t, heads, heads)
            elif hf.startswith("self_attn.k_proj"):
                t = permute(t, heads, kv_heads)
            g.add_tensor(f"blk.{i}.{gg}", t, GGMLType.F32)
    g.add_tensor("output_norm.weight", w["model.norm.weight"], GGMLType.F32)
    if not tied:
        g.add_tensor("output.weight", w["lm_head.weight"], GGMLType.F32)
    tmp = args.out + ".tmp"
    g.write(tmp)
    os.replace(tmp, args.out)
    print(f"{args.out}: {os.path.getsize(args.out) / 1e6:.1f} MB, {len(tokens)} tokens, {len(merges)} merges")


if __name__ == "__main__":
    main()
