#!/usr/bin/python3
"""Writes small seeded random-weight Llama-family models in every format and weight type
cinfer reads, plus a manifest naming them with the token prompts to test.

Families: llama (GQA, untied), llama3 (Llama 3 RoPE scaling, tied, one KV head),
mistral (head_dim 24: not hidden / heads, not a power of two), qwen2 (q/k/v biases, tied), qwen3 (q/k norm,
head_dim != hidden / heads, tied), mistral_swa (a 32-token sliding window on every layer;
Hugging Face folders only: llama.cpp converts Mistral as llama, without the window),
gemma2 (window 32 on even layers, attention and final soft-capping small enough to bend
the values, GELU-tanh, sandwich norms, (1 + w) norms, sqrt(hidden) embedding scale) and
gemma3 (six layers: five local with window 32 and RoPE base 10000, one global with base
1e6 and linear scaling 8; q/k norm), phi3 (q/k/v fused into qkv_proj, gate and up into
gate_up_proj as Phi-3 stores them; GGUF attn_qkv and a fused ffn_up as llama.cpp's
converter writes them), qwen3_moe and mixtral (8 experts, 2 per token; qwen3_moe_mixed,
in HF folders only: norm_topk_prob false and a dense first layer), qwen2_moe (experts
plus a gated shared expert, norm_topk_prob false; qwen2_moe_mixed, in HF folders only: a
dense middle layer), qwen3_moe_uneven (an expert width of 3 Q8_0 blocks, GGUF f32 and Q8_0
only: tensor parallelism over 2 ranks splits it 32/64). The 150-token prompt
is over 4 windows long.
Each family is written as
  - Hugging Face folders: safetensors f32, f16, bf16 (llama's bf16 sharded with
    model.safetensors.index.json);
  - GGUF v3 files: f32, f16, bf16, Q8_0 (1-D tensors stay f32 as llama.cpp keeps them).
GGUF llama-arch files get llama.cpp's Q/K row permutation (convert_hf_to_gguf.py
LlamaModel.permute) and, for Llama 3 scaling, the `rope_freqs.weight` tensor the
converter precomputes; qwen2/qwen3 GGUF tensors are written unpermuted, as llama.cpp
does for those architectures.

Weights are scaled so activations stay O(1) and logits spread over a few units:
embeddings ~N(0, 1) (tied ones ~N(0, 0.3^2)), projections ~N(0, 1/in_features) with the
two residual outputs (o_proj, down_proj) at twice that scale, norm weights
~1 + N(0, 0.1^2), biases ~N(0, 0.1^2), an untied lm_head ~N(0, 4/hidden). Without the
residual gain a tied model's greedy output just repeats the last token (its own
embedding dominates the final hidden state), which would test little.

usage: make_random_models.py OUT_DIR   (writes OUT_DIR/models/..., OUT_DIR/manifest.tsv)
"""

import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ggml_quants  # noqa: E402  (quantizers of every ggml block type)

SEED = 20261129
VOCAB = 272  # <unk> <s> </s>, 256 byte tokens, 13 word pieces
N_NEW = 16
PROMPT_LENGTHS = (11, 6)  # A crosses several 4-token KV pages; B is a second sequence
# A long prompt, for f32 and Q8_0 files only (it triples the expected-logits size):
# attention over more keys than a kernel's block and prefill in several chunks.
LONG_PROMPT_LENGTH = 150
LONG_PROMPT_TYPES = ("f32", "q8_0")

FAMILIES = {
    "llama": dict(model_type="llama", arch="LlamaForCausalLM", hidden=64, heads=4, kv_heads=2,
                  head_dim=16, inter=128, layers=2, tied=False, theta=10000.0),
    "llama3": dict(model_type="llama", arch="LlamaForCausalLM", hidden=64, heads=4, kv_heads=1,
                   head_dim=16, inter=128, layers=2, tied=True, theta=10000.0,
                   # original context 64 puts frequency pairs in all three llama3 bands
                   rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                     high_freq_factor=4.0, original_max_position_embeddings=64)),
    # head_dim 24: neither hidden / heads nor a power of two
    "mistral": dict(model_type="mistral", arch="MistralForCausalLM", hidden=64, heads=4,
                    kv_heads=2, head_dim=24, inter=96, layers=2, tied=False, theta=1000000.0),
    "qwen2": dict(model_type="qwen2", arch="Qwen2ForCausalLM", hidden=64, heads=4, kv_heads=2,
                  head_dim=16, inter=128, layers=2, tied=True, theta=1000000.0, bias=True),
    "qwen3": dict(model_type="qwen3", arch="Qwen3ForCausalLM", hidden=64, heads=4, kv_heads=2,
                  head_dim=32, inter=128, layers=2, tied=True, theta=1000000.0, qk_norm=True),
    "mistral_swa": dict(model_type="mistral", arch="MistralForCausalLM", hidden=64, heads=4,
                        kv_heads=2, head_dim=16, inter=96, layers=2, tied=False, theta=10000.0,
                        sliding_window=32, gguf=False),
    # query_pre_attn_scalar = head_dim: what llama.cpp applies to Gemma GGUF files
    "gemma2": dict(model_type="gemma2", arch="Gemma2ForCausalLM", hidden=64, heads=4, kv_heads=2,
                   head_dim=16, inter=128, layers=2, tied=True, theta=10000.0, gemma=True,
                   sliding_window=32, attn_softcap=5.0, final_softcap=8.0),
    "gemma3": dict(model_type="gemma3_text", arch="Gemma3ForCausalLM", gguf_arch="gemma3", hidden=64,
                   heads=4, kv_heads=1, head_dim=32, inter=128, layers=6, tied=True, theta=1000000.0,
                   gemma=True, qk_norm=True, sliding_window=32, local_theta=10000.0,
                   rope_scaling=dict(rope_type="linear", factor=8.0)),
    "phi3": dict(model_type="phi3", arch="Phi3ForCausalLM", hidden=64, heads=4, kv_heads=2,
                 head_dim=16, inter=96, layers=2, tied=False, theta=10000.0, fused=True),
    # RoPE scalings whose frequencies differ from the plain ones at these sizes: YaRN's
    # ramp spans pairs 0-5 of 16 (original context 64); dynamic NTK's base grows for the
    # served 1024 tokens over max_position_embeddings 256 (llama.cpp has no dynamic NTK:
    # no GGUF); LongRoPE's long divisors apply (1024 > 64) with their attention factor
    "qwen3_yarn": dict(model_type="qwen3", arch="Qwen3ForCausalLM", hidden=64, heads=4, kv_heads=2,
                       head_dim=32, inter=128, layers=2, tied=True, theta=10000.0, qk_norm=True,
                       rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=64)),
    "llama_dynamic": dict(model_type="llama", arch="LlamaForCausalLM", hidden=64, heads=4, kv_heads=2,
                          head_dim=16, inter=128, layers=2, tied=False, theta=10000.0, gguf=False,
                          rope_scaling=dict(type="dynamic", factor=2.0)),
    "phi3_longrope": dict(model_type="phi3", arch="Phi3ForCausalLM", hidden=64, heads=4, kv_heads=2,
                          head_dim=16, inter=96, layers=2, tied=False, theta=10000.0, fused=True,
                          original_max_position_embeddings=64,
                          rope_scaling=dict(type="longrope",
                                            short_factor=[1.0, 1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.0],
                                            long_factor=[1.0, 1.25, 1.6, 2.2, 3.0, 4.0, 5.5, 8.0])),
    # Phi-4-mini's shape: RoPE turns half of each head (partial_rotary_factor), with
    # LongRoPE divisors for the turned pairs only
    "phi4_mini": dict(model_type="phi3", arch="Phi3ForCausalLM", hidden=64, heads=4, kv_heads=2,
                      head_dim=16, inter=96, layers=2, tied=True, theta=10000.0, fused=True,
                      partial_rotary_factor=0.5, original_max_position_embeddings=64,
                      rope_scaling=dict(type="longrope", short_factor=[1.0, 1.2, 1.5, 2.0],
                                        long_factor=[1.0, 1.5, 3.0, 6.0])),
    # mixtures of experts: 8 experts, 2 chosen per token
    "qwen3_moe": dict(model_type="qwen3_moe", arch="Qwen3MoeForCausalLM", gguf_arch="qwen3moe", hidden=64,
                      heads=4, kv_heads=2, head_dim=32, inter=128, layers=2, tied=False, theta=1000000.0,
                      qk_norm=True, moe=dict(experts=8, used=2, inter=32, norm=True)),
    # norm_topk_prob false and a dense first layer (mlp_only_layers): HF folders only, as
    # llama.cpp renormalises and makes every qwen3moe layer sparse
    "qwen3_moe_mixed": dict(model_type="qwen3_moe", arch="Qwen3MoeForCausalLM", hidden=64, heads=4,
                            kv_heads=2, head_dim=16, inter=96, layers=2, tied=False, theta=10000.0,
                            qk_norm=True, moe=dict(experts=8, used=2, inter=32, norm=False, dense_layers=[0]),
                            gguf=False),
    # GGUF as llama.cpp converts Mixtral: arch llama with llama.expert_count; the f16 file
    # holds one tensor per expert as older conversions did, the others merged 3-D tensors
    "mixtral": dict(model_type="mixtral", arch="MixtralForCausalLM", hidden=64, heads=4, kv_heads=2,
                    head_dim=16, inter=64, layers=2, tied=False, theta=1000000.0,
                    moe=dict(experts=8, used=2, inter=64, norm=True)),
    # Qwen2-MoE: Qwen2's attention (q/k/v biases), experts plus a shared expert (128 wide:
    # neither the experts' 32 nor the dense 96) gated by sigmoid(shared_expert_gate . x);
    # norm_topk_prob false, as llama.cpp reads qwen2moe, whose every layer it makes sparse
    "qwen2_moe": dict(model_type="qwen2_moe", arch="Qwen2MoeForCausalLM", gguf_arch="qwen2moe", hidden=64,
                      heads=4, kv_heads=2, head_dim=16, inter=96, layers=2, tied=False, theta=1000000.0,
                      bias=True, moe=dict(experts=8, used=2, inter=32, norm=False, shared=128)),
    # a dense middle layer (mlp_only_layers): HF folders only, as llama.cpp's qwen2moe has none
    "qwen2_moe_mixed": dict(model_type="qwen2_moe", arch="Qwen2MoeForCausalLM", hidden=64, heads=4, kv_heads=2,
                            head_dim=16, inter=96, layers=3, tied=True, theta=10000.0, bias=True,
                            moe=dict(experts=8, used=2, inter=32, norm=False, dense_layers=[1], shared=128),
                            gguf=False),
}
# Rows of 256 values, for the K-quants' super-blocks: written in GGUF only, in f32 and
# every block-quantized type, and in a mix of types per tensor as llama.cpp's Q4_K_M
# recipe writes (with a quantized norm vector, which llama.cpp never writes but a file
# may hold).
FAMILIES_256 = {
    "llamak": dict(model_type="llama", arch="LlamaForCausalLM", hidden=256, heads=4, kv_heads=2,
                   head_dim=64, inter=512, layers=2, tied=False, theta=10000.0),
    # wide enough that tensor parallelism splits the K-quants: wo's 1024 columns and
    # w_down's 1024 leave whole 256-value blocks on each of 2 or 4 ranks (llamak's do not)
    "llamakw": dict(model_type="llama", arch="LlamaForCausalLM", hidden=256, heads=16, kv_heads=4,
                    head_dim=64, inter=1024, layers=2, tied=False, theta=10000.0,
                    types=("q4_K", "q6_K", "mix")),
}
QUANT_TYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs",
               "mxfp4")
MIX = {"token_embd": "q6_K", "attn_q": "q4_K", "attn_k": "q4_K", "attn_v": "q6_K", "attn_output": "q5_K",
       "ffn_gate": "q4_K", "ffn_up": "iq4_xs", "ffn_down": "q6_K", "output": "q8_0", "blk.1.attn_norm": "q8_0",
       "output_norm": "f16"}
SAFETENSORS_TYPES = ("f32", "f16", "bf16")
GGUF_TYPES = ("f32", "f16", "bf16", "q8_0")
SHARDED = ("llama", "bf16")
RMS_EPS = 1e-6


# --------------------------------------------------------------------------------------
# random weights under Hugging Face names


def random_weights(fam, rng):
    if fam.get("gpt_oss"):
        return gpt_oss_weights(fam, rng)
    h, hd, inter = fam["hidden"], fam["head_dim"], fam["inter"]
    q_rows, kv_rows = fam["heads"] * hd, fam["kv_heads"] * hd

    def matrix(rows, cols, gain=1.0):
        return rng.standard_normal((rows, cols)) * (gain / math.sqrt(cols))

    def norm(n):  # Gemma's norms scale by (1 + w): its weights sit around 0
        return (0.0 if fam.get("gemma") else 1.0) + 0.1 * rng.standard_normal(n)

    # Gemma multiplies embeddings by sqrt(hidden): stored smaller by as much, so the scaled
    # embedding does not outweigh the blocks (greedy output would repeat the last token)
    emb_std = (0.3 if fam["tied"] else 1.0) / (math.sqrt(h) if fam.get("gemma") else 1.0)
    w = {"model.embed_tokens.weight": rng.standard_normal((VOCAB, h)) * emb_std}
    for i in range(fam["layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(h)
        w[p + "self_attn.q_proj.weight"] = matrix(q_rows, h)
        w[p + "self_attn.k_proj.weight"] = matrix(kv_rows, h)
        w[p + "self_attn.v_proj.weight"] = matrix(kv_rows, h)
        w[p + "self_attn.o_proj.weight"] = matrix(h, q_rows, gain=2.0)
        if fam.get("bias"):
            w[p + "self_attn.q_proj.bias"] = 0.1 * rng.standard_normal(q_rows)
            w[p + "self_attn.k_proj.bias"] = 0.1 * rng.standard_normal(kv_rows)
            w[p + "self_attn.v_proj.bias"] = 0.1 * rng.standard_normal(kv_rows)
        if fam.get("qk_norm"):
            w[p + "self_attn.q_norm.weight"] = norm(hd)
            w[p + "self_attn.k_norm.weight"] = norm(hd)
        w[p + "post_attention_layernorm.weight"] = norm(h)
        if fam.get("gemma"):  # post_attention_layernorm is the attention output's norm here
            w[p + "post_attention_layernorm.weight"] = norm(h)
            w[p + "pre_feedforward_layernorm.weight"] = norm(h)
            w[p + "post_feedforward_layernorm.weight"] = norm(h)
        moe = fam.get("moe")
        if moe and i not in moe.get("dense_layers", []):  # under Qwen3-MoE's names
            w[p + "mlp.gate.weight"] = matrix(moe["experts"], h, gain=2.0)
            for e in range(moe["experts"]):
                q = f"{p}mlp.experts.{e}."
                w[q + "gate_proj.weight"] = matrix(moe["inter"], h)
                w[q + "up_proj.weight"] = matrix(moe["inter"], h)
                w[q + "down_proj.weight"] = matrix(h, moe["inter"], gain=2.0)
            if moe.get("shared"):  # Qwen2-MoE's shared expert and its gate's map
                q = f"{p}mlp.shared_expert."
                w[q + "gate_proj.weight"] = matrix(moe["shared"], h)
                w[q + "up_proj.weight"] = matrix(moe["shared"], h)
                w[q + "down_proj.weight"] = matrix(h, moe["shared"], gain=2.0)
                w[p + "mlp.shared_expert_gate.weight"] = matrix(1, h, gain=2.0)
            continue
        w[p + "mlp.gate_proj.weight"] = matrix(inter, h)
        w[p + "mlp.up_proj.weight"] = matrix(inter, h)
        w[p + "mlp.down_proj.weight"] = matrix(h, inter, gain=2.0)
    # a tied Gemma's small embeddings give small logits: its final norm (1 + w ~ 5) makes up
    w["model.norm.weight"] = norm(h) + (4.0 if fam.get("gemma") else 0.0)
    if not fam["tied"]:
        w["lm_head.weight"] = matrix(VOCAB, h, gain=2.0)
    return w


def mixtral_names(weights):
    """Qwen3-MoE's expert names to Mixtral's: block_sparse_moe.gate, experts.E.w1 (gate),
    w3 (up), w2 (down)."""
    out = {}
    for name, t in weights.items():
        name = name.replace(".mlp.gate.weight", ".block_sparse_moe.gate.weight").replace(".mlp.experts.",
                                                                                         ".block_sparse_moe.experts.")
        for qwen, mixtral in (("gate_proj", "w1"), ("up_proj", "w3"), ("down_proj", "w2")):
            if ".block_sparse_moe.experts." in name:
                name = name.replace(qwen, mixtral)
        out[name] = t
    return out


def fuse_phi3(weights, n_layers):
    """Phi-3's storage: q, k, v rows stacked into qkv_proj; gate rows, then up rows, in
    gate_up_proj (Phi3MLP splits them with chunk(2))."""
    out = dict(weights)
    for i in range(n_layers):
        p = f"model.layers.{i}."
        parts = [out.pop(p + f"self_attn.{x}_proj.weight") for x in "qkv"]
        out[p + "self_attn.qkv_proj.weight"] = np.concatenate(parts, axis=0)
        gate, up = out.pop(p + "mlp.gate_proj.weight"), out.pop(p + "mlp.up_proj.weight")
        out[p + "mlp.gate_up_proj.weight"] = np.concatenate([gate, up], axis=0)
    return out


def vocabulary(model_type):
    """A SentencePiece-style vocabulary: the loaders and tokenizer need one to exist.
    Phi-3's ends in <|endoftext|>: llama.cpp looks that token up in every Phi-3 file."""
    words = ["\u2581the", "\u2581a", "\u2581and", "\u2581to", "\u2581of", "\u2581in", "\u2581is",
             "\u2581it", "\u2581on", "\u2581was", "\u2581he", "\u2581she", "\u2581we"]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + words
    scores = [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(len(words))]
    types = [2, 3, 3] + [6] * 256 + [1] * len(words)  # unknown, control, byte, normal
    if model_type == "phi3":
        tokens[-1], types[-1] = "<|endoftext|>", 3
    assert len(tokens) == VOCAB
    return tokens, scores, types


# --------------------------------------------------------------------------------------
# storage types


def to_bf16_bits(x):
    """float -> bf16 bit patterns, rounding to nearest even as torch does."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def quantize_q8_0(x):
    """ggml quantize_row_q8_0_ref: per 32 values, d = amax / 127 stored as f16, then
    round(x / d) as int8. Returns the raw block bytes of a (rows, cols) matrix."""
    blocks = np.asarray(x, dtype=np.float32).reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1, keepdims=True)
    d = amax / 127.0
    inv_d = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    scaled = blocks * inv_d
    q = (np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)).astype(np.int8)  # roundf: half away from 0
    out = np.empty((blocks.shape[0], 34), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def encode_tensor(x, wtype):
    if wtype == "f32":
        return np.asarray(x, dtype="<f4").tobytes()
    if wtype == "f16":
        return np.asarray(x, dtype="<f2").tobytes()
    if wtype == "bf16":
        return to_bf16_bits(x).astype("<u2").tobytes()
    if wtype == "q8_0":
        return quantize_q8_0(x)
    if wtype in ggml_quants.TYPES:
        x = np.asarray(x, dtype=np.float32)
        return ggml_quants.quantize(wtype, x.reshape(-1, x.shape[-1]))
    raise ValueError(wtype)


# --------------------------------------------------------------------------------------
# Hugging Face folders


def write_safetensors(path, tensors, wtype):
    names = sorted(tensors)
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name in names:
        data = encode_tensor(tensors[name], wtype)
        header[name] = {"dtype": wtype.upper(), "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header_json = json.dumps(header).encode()
    header_json += b" " * (-len(header_json) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_json)))
        f.write(header_json)
        for b in blobs:
            f.write(b)
    return offset


def write_hf_folder(folder, fam, weights, wtype, sharded):
    os.makedirs(folder, exist_ok=True)
    torch_dtype = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[wtype]
    config = {
        "architectures": [fam["arch"]],
        "model_type": fam["model_type"],
        "vocab_size": VOCAB,
        "hidden_size": fam["hidden"],
        "intermediate_size": fam["inter"],
        "num_hidden_layers": fam["layers"],
        "num_attention_heads": fam["heads"],
        "num_key_value_heads": fam["kv_heads"],
        "head_dim": fam["head_dim"],
        "max_position_embeddings": 256,
        "rms_norm_eps": RMS_EPS,
        "rope_theta": fam["theta"],
        "rope_scaling": fam.get("rope_scaling"),
        "tie_word_embeddings": fam["tied"],
        "hidden_act": "silu",
        "attention_bias": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": torch_dtype,
    }
    if fam.get("partial_rotary_factor"):
        config["partial_rotary_factor"] = fam["partial_rotary_factor"]
    if fam.get("original_max_position_embeddings"):
        config["original_max_position_embeddings"] = fam["original_max_position_embeddings"]
    if fam["model_type"] == "mistral":
        config["sliding_window"] = fam.get("sliding_window")
    moe = fam.get("moe")
    if moe and fam["model_type"] == "mixtral":
        config.update(num_local_experts=moe["experts"], num_experts_per_tok=moe["used"], sliding_window=None)
        weights = mixtral_names(weights)
    elif moe:
        config.update(num_experts=moe["experts"], num_experts_per_tok=moe["used"],
                      moe_intermediate_size=moe["inter"], norm_topk_prob=moe["norm"], decoder_sparse_step=1,
                      mlp_only_layers=moe.get("dense_layers", []))
        if moe.get("shared"):
            config["shared_expert_intermediate_size"] = moe["shared"]
    if fam.get("gpt_oss"):
        config.update(gpt_oss_config(fam))
    if fam.get("gemma"):
        del config["hidden_act"]
        config["hidden_activation"] = "gelu_pytorch_tanh"
        config["query_pre_attn_scalar"] = fam["head_dim"]
        config["sliding_window"] = fam["sliding_window"]
        config["attn_logit_softcapping"] = fam.get("attn_softcap")
        config["final_logit_softcapping"] = fam.get("final_softcap")
        if fam.get("local_theta"):
            config["rope_local_base_freq"] = fam["local_theta"]
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2}, f, indent=2)
    if fam.get("fused"):
        weights = fuse_phi3(weights, fam["layers"])
    if not sharded:
        write_safetensors(os.path.join(folder, "model.safetensors"), weights, wtype)
        return
    names = sorted(weights)
    halves = [names[: len(names) // 2], names[len(names) // 2 :]]
    weight_map, total = {}, 0
    for k, part in enumerate(halves):
        shard = f"model-{k + 1:05d}-of-{len(halves):05d}.safetensors"
        total += write_safetensors(os.path.join(folder, shard), {n: weights[n] for n in part}, wtype)
        weight_map.update({n: shard for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


# --------------------------------------------------------------------------------------
# GGUF files


GGUF_ALIGNMENT = 32
GGML_TYPES = {"f32": 0, "f16": 1, "bf16": 30, **{n: t[0] for n, t in ggml_quants.TYPES.items()}}
GGUF_FILE_TYPES = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32, "q4_0": 2, "q4_1": 3, "q5_0": 8, "q5_1": 9,
                   "q2_K": 10, "q3_K": 12, "q4_K": 15, "q5_K": 17, "q6_K": 18, "iq4_nl": 25, "iq4_xs": 30,
                   "mxfp4": 38, "mix": 15}  # llama_ftype


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(v):
    """(type id, bytes) of a metadata value; ints are written as u32, floats as f32."""
    if isinstance(v, bool):
        return 7, struct.pack("<?", v)
    if isinstance(v, int):
        return 4, struct.pack("<I", v)
    if isinstance(v, float):
        return 6, struct.pack("<f", v)
    if isinstance(v, str):
        return 8, gguf_string(v)
    if isinstance(v, tuple) and v[0] == "i32[]":
        return 9, struct.pack("<IQ", 5, len(v[1])) + np.asarray(v[1], dtype="<i4").tobytes()
    if isinstance(v, tuple) and v[0] == "f32[]":
        return 9, struct.pack("<IQ", 6, len(v[1])) + np.asarray(v[1], dtype="<f4").tobytes()
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return 9, struct.pack("<IQ", 8, len(v)) + b"".join(gguf_string(x) for x in v)
    raise TypeError(f"no GGUF encoding for {v!r}")


def write_gguf(path, metadata, tensors):
    """tensors: list of (name, float array, storage type[, its bytes already encoded])."""
    header = bytearray(b"GGUF")
    header += struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, value in metadata.items():
        vtype, payload = gguf_value(value)
        header += gguf_string(key) + struct.pack("<I", vtype) + payload
    blobs, offset = [], 0
    for name, array, wtype, *raw in tensors:
        header += gguf_string(name) + struct.pack("<I", array.ndim)
        header += b"".join(struct.pack("<Q", n) for n in reversed(array.shape))  # ne[0] innermost
        header += struct.pack("<IQ", GGML_TYPES[wtype], offset)
        data = raw[0] if raw else encode_tensor(array, wtype)
        data += b"\0" * (-len(data) % GGUF_ALIGNMENT)
        blobs.append(data)
        offset += len(data)
    header += b"\0" * (-len(header) % GGUF_ALIGNMENT)
    with open(path, "wb") as f:
        f.write(header)
        for b in blobs:
            f.write(b)


def permute_llama_qk(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py LlamaModel.permute, verbatim in numpy."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2)
            .reshape(w.shape))


def llama3_rope_factors(fam):
    """convert_hf_to_gguf.py LlamaModel.generate_extra_tensors: per frequency pair, the
    divisor llama.cpp applies to the rotation frequency. The converter reads
    original_max_position_embeddings from the top level of config.json, defaulting to
    8192, which is what every Llama 3.x rope_scaling says; this toy model's value (64)
    lives in rope_scaling only, so it is taken from there to keep the GGUF the same model."""
    s = fam["rope_scaling"]
    base, dim = fam["theta"], fam["head_dim"]
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old_context_len = s["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low
    high_freq_wavelen = old_context_len / high
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            factors.append(1.0)
        elif wavelen > low_freq_wavelen:
            factors.append(factor)
        else:
            smooth = (old_context_len / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


GGUF_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "self_attn.qkv_proj.weight": "attn_qkv.weight",
    "mlp.gate_up_proj.weight": "ffn_up.weight",  # llama.cpp's phi3: gate and up fused
}


def gemma_metadata(arch, fam):
    """The Gemma keys convert_hf_to_gguf.py writes (Gemma2Model, Gemma3Model)."""
    if not fam.get("gemma"):
        return {}
    md = {f"{arch}.attention.sliding_window": fam["sliding_window"]}
    if arch == "gemma2":
        md[f"{arch}.attn_logit_softcapping"] = float(fam["attn_softcap"])
        md[f"{arch}.final_logit_softcapping"] = float(fam["final_softcap"])
    if fam.get("rope_scaling", {}).get("rope_type") == "linear":
        md[f"{arch}.rope.scaling.type"] = "linear"
        md[f"{arch}.rope.scaling.factor"] = float(fam["rope_scaling"]["factor"])
    return md


def rope_scaling_metadata(arch, fam):
    """YaRN and LongRoPE keys as convert_hf_to_gguf.py writes them (LongRoPE's divisors
    go in tensors, see write_gguf_model)."""
    s = fam.get("rope_scaling") or {}
    kind = s.get("rope_type", s.get("type"))
    if kind == "yarn":
        return {f"{arch}.rope.scaling.type": "yarn", f"{arch}.rope.scaling.factor": float(s["factor"]),
                f"{arch}.rope.scaling.original_context_length": s["original_max_position_embeddings"]}
    if kind == "longrope":
        original = fam["original_max_position_embeddings"]
        scale = 256 / original  # max_position_embeddings / original
        return {f"{arch}.rope.scaling.type": "longrope",
                f"{arch}.rope.scaling.original_context_length": original,
                f"{arch}.rope.scaling.attn_factor": math.sqrt(1 + math.log(scale) / math.log(original))}
    return {}


def moe_metadata(arch, fam):
    """The expert keys convert_hf_to_gguf.py writes (Qwen3MoeModel; Mixtral through LlamaModel)."""
    moe = fam.get("moe")
    if not moe:
        return {}
    md = {f"{arch}.expert_count": moe["experts"], f"{arch}.expert_used_count": moe["used"]}
    if arch != "llama":
        md[f"{arch}.expert_feed_forward_length"] = moe["inter"]
    if moe.get("shared"):  # Qwen2MoeModel
        md[f"{arch}.expert_shared_feed_forward_length"] = moe["shared"]
    return md


def moe_tensors(fam, weights, i, wtype, stored):
    """Layer i's router (kept f32, as the converter keeps ffn_gate_inp) and experts:
    merged (experts, rows, cols) tensors blk.i.ffn_{gate,up,down}_exps, or for an old-style
    Mixtral file one blk.i.ffn_{gate,up,down}.E per expert."""
    p = f"model.layers.{i}."
    if p + "mlp.gate.weight" not in weights:
        return []
    out = [(f"blk.{i}.ffn_gate_inp.weight", weights[p + "mlp.gate.weight"], "f32")]
    n = fam["moe"]["experts"]
    per_expert = fam["model_type"] == "mixtral" and wtype == "f16"
    for part in ("gate", "up", "down"):
        mats = [weights[f"{p}mlp.experts.{e}.{part}_proj.weight"] for e in range(n)]
        if per_expert:
            out += [(f"blk.{i}.ffn_{part}.{e}.weight", m, stored(m)) for e, m in enumerate(mats)]
        else:
            merged = np.stack(mats)  # (experts, rows, cols): ggml ne [cols, rows, experts]
            out.append((f"blk.{i}.ffn_{part}_exps.weight", merged, stored(merged, f"blk.{i}.ffn_{part}_exps")))
    if p + "mlp.shared_expert_gate.weight" in weights:  # qwen2moe: the gate's map (1, hidden) kept f32
        for part in ("gate", "up", "down"):
            m = weights[f"{p}mlp.shared_expert.{part}_proj.weight"]
            out.append((f"blk.{i}.ffn_{part}_shexp.weight", m, stored(m, f"blk.{i}.ffn_{part}_shexp")))
        out.append((f"blk.{i}.ffn_gate_inp_shexp.weight", weights[p + "mlp.shared_expert_gate.weight"], "f32"))
    return out


def write_gguf_model(path, name, fam, weights, wtype):
    if fam.get("gpt_oss"):
        return write_gguf_gpt_oss(path, name, fam, weights, wtype)
    # llama.cpp converts Mistral with its Llama converter: GGUF architecture "llama"
    arch = ("llama" if fam["model_type"] in ("llama", "mistral", "mixtral")
            else fam.get("gguf_arch", fam["model_type"]))
    gemma = fam.get("gemma", False)
    tokens, scores, types = vocabulary(fam["model_type"])
    md = {
        "general.architecture": arch,
        "general.name": name,
        "general.file_type": GGUF_FILE_TYPES[wtype],
        f"{arch}.vocab_size": VOCAB,
        f"{arch}.context_length": 256,
        f"{arch}.embedding_length": fam["hidden"],
        f"{arch}.block_count": fam["layers"],
        f"{arch}.feed_forward_length": fam["inter"],
        f"{arch}.attention.head_count": fam["heads"],
        f"{arch}.attention.head_count_kv": fam["kv_heads"],
        f"{arch}.attention.key_length": fam["head_dim"],
        f"{arch}.attention.value_length": fam["head_dim"],
        f"{arch}.rope.dimension_count": int(fam["head_dim"] * fam.get("partial_rotary_factor", 1.0)),
        f"{arch}.rope.freq_base": fam["theta"],
        f"{arch}.attention.layer_norm_rms_epsilon": RMS_EPS,
        **gemma_metadata(arch, fam),
        **rope_scaling_metadata(arch, fam),
        **moe_metadata(arch, fam),
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": ("f32[]", scores),
        "tokenizer.ggml.token_type": ("i32[]", types),
        "tokenizer.ggml.unknown_token_id": 0,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
    }

    def stored(array, gguf_name=""):
        if wtype == "mix":  # per tensor, by the longest matching name in MIX
            keys = [k for k in MIX if gguf_name.startswith(k) or f".{k}." in f".{gguf_name}"]
            return MIX[max(keys, key=len)] if keys else "f32"
        return wtype if array.ndim >= 2 else "f32"  # llama.cpp keeps 1-D tensors in f32

    if fam.get("fused"):
        weights = fuse_phi3(weights, fam["layers"])
    out = [("token_embd.weight", weights["model.embed_tokens.weight"],
            stored(weights["model.embed_tokens.weight"], "token_embd.weight"))]
    if fam.get("rope_scaling", {}).get("rope_type") == "llama3":
        out.append(("rope_freqs.weight", llama3_rope_factors(fam), "f32"))
    if fam.get("rope_scaling", {}).get("type") == "longrope":
        out.append(("rope_factors_long.weight", np.asarray(fam["rope_scaling"]["long_factor"]), "f32"))
        out.append(("rope_factors_short.weight", np.asarray(fam["rope_scaling"]["short_factor"]), "f32"))
    for i in range(fam["layers"]):
        for hf_suffix, gguf_suffix in GGUF_NAMES.items():
            w = weights.get(f"model.layers.{i}.{hf_suffix}")
            if w is None:
                continue
            if gemma and hf_suffix == "post_attention_layernorm.weight":
                gguf_suffix = "post_attention_norm.weight"  # Gemma's attention output norm
            if gemma and hf_suffix.endswith("norm.weight"):
                w = w + 1.0  # convert_hf_to_gguf.py Gemma2Model/Gemma3Model: norms hold 1 + w
            if arch == "llama" and hf_suffix.startswith("self_attn.q_proj"):
                w = permute_llama_qk(w, fam["heads"], fam["heads"])
            elif arch == "llama" and hf_suffix.startswith("self_attn.k_proj"):
                w = permute_llama_qk(w, fam["heads"], fam["kv_heads"])
            out.append((f"blk.{i}.{gguf_suffix}", w, stored(w, f"blk.{i}.{gguf_suffix}")))
        out += moe_tensors(fam, weights, i, wtype, stored)
    output_norm = weights["model.norm.weight"] + (1.0 if gemma else 0.0)
    out.append(("output_norm.weight", output_norm,
                stored(output_norm, "output_norm.weight") if wtype == "mix" else "f32"))
    if not fam["tied"]:
        out.append(("output.weight", weights["lm_head.weight"], stored(weights["lm_head.weight"], "output.weight")))
    write_gguf(path, md, out)


# --------------------------------------------------------------------------------------
# gpt-oss: transformers' GptOss names and layouts in HF folders, llama.cpp's in GGUF


# 4 layers alternating sliding (window 8, so it cuts in) and full, 8 experts with 2 per
# token, biases everywhere, attention sinks, YaRN with truncate false (transformers'
# gpt-oss setting; llama.cpp always rounds YaRN's bounds and holds swiglu_limit at 7, so
# the GGUF files are another model: gguf_family keeps the f32 cross-check to files of
# one kind). swiglu_limit 2 in config.json: the clamps bite on about a tenth of the
# experts' gate values and a fifth of their up values (larger weights that reach 7 make
# the model too sensitive to bf16 rounding for the test's tolerance)
FAMILIES["gpt_oss"] = dict(model_type="gpt_oss", arch="GptOssForCausalLM", gguf_arch="gpt-oss", hidden=64, heads=4,
                           kv_heads=2, head_dim=16, inter=32, layers=4, tied=False, theta=150000.0, gpt_oss=True,
                           experts=8, used=2, sliding_window=8, swiglu_limit=2.0, gguf_family="gpt_oss_gguf",
                           gguf_extra_types=("mxfp4",),
                           rope_scaling=dict(rope_type="yarn", factor=4.0, beta_fast=32.0, beta_slow=1.0,
                                             truncate=False, original_max_position_embeddings=64))

# An expert width that does not split evenly under tensor parallelism: 96 is 3 Q8_0 blocks
# of 32, so tp_size 2 gives the ranks 32 and 64 of every expert's columns (tp_size 4 none
# to one of them: refused). GGUF f32 and Q8_0 only, to keep the suite small. After
# gpt_oss, so the families before keep their seeds.
FAMILIES["qwen3_moe_uneven"] = dict(model_type="qwen3_moe", arch="Qwen3MoeForCausalLM", gguf_arch="qwen3moe",
                                    hidden=64, heads=4, kv_heads=2, head_dim=32, inter=128, layers=2, tied=False,
                                    theta=1000000.0, qk_norm=True, moe=dict(experts=8, used=2, inter=96, norm=True),
                                    st_types=(), gguf_types=("f32", "q8_0"))


def gpt_oss_weights(fam, rng):
    """Random weights under transformers' GptOss names: experts stored for x @ W
    (gate_up_proj (E, hidden, 2 inter) with gate and up interleaved, down_proj
    (E, inter, hidden)), biases on q/k/v/o, the router and every expert, sinks ~N(0, 1)
    so they take a visible share of each softmax. Experts' gate/up ~N(0, 1.5^2) per
    token, which the config's swiglu_limit of 2 clamps in part."""
    h, hd, inter, n = fam["hidden"], fam["head_dim"], fam["inter"], fam["experts"]
    q_rows, kv_rows = fam["heads"] * hd, fam["kv_heads"] * hd

    def matrix(rows, cols, gain=1.0):
        return rng.standard_normal((rows, cols)) * (gain / math.sqrt(cols))

    w = {"model.embed_tokens.weight": rng.standard_normal((VOCAB, h))}
    for i in range(fam["layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = 1.0 + 0.1 * rng.standard_normal(h)
        w[p + "self_attn.q_proj.weight"] = matrix(q_rows, h)
        w[p + "self_attn.k_proj.weight"] = matrix(kv_rows, h)
        w[p + "self_attn.v_proj.weight"] = matrix(kv_rows, h)
        w[p + "self_attn.o_proj.weight"] = matrix(h, q_rows, gain=2.0)
        for x, rows in (("q", q_rows), ("k", kv_rows), ("v", kv_rows), ("o", h)):
            w[p + f"self_attn.{x}_proj.bias"] = 0.1 * rng.standard_normal(rows)
        w[p + "self_attn.sinks"] = rng.standard_normal(fam["heads"])
        w[p + "post_attention_layernorm.weight"] = 1.0 + 0.1 * rng.standard_normal(h)
        w[p + "mlp.router.weight"] = matrix(n, h, gain=2.0)
        w[p + "mlp.router.bias"] = 0.3 * rng.standard_normal(n)
        w[p + "mlp.experts.gate_up_proj"] = rng.standard_normal((n, h, 2 * inter)) * (1.5 / math.sqrt(h))
        w[p + "mlp.experts.gate_up_proj_bias"] = 0.1 * rng.standard_normal((n, 2 * inter))
        w[p + "mlp.experts.down_proj"] = rng.standard_normal((n, inter, h)) * (0.5 / math.sqrt(inter))
        w[p + "mlp.experts.down_proj_bias"] = 0.1 * rng.standard_normal((n, h))
    w["model.norm.weight"] = 1.0 + 0.1 * rng.standard_normal(h)
    w["lm_head.weight"] = matrix(VOCAB, h, gain=2.0)
    return w


def gpt_oss_config(fam):
    """config.json keys of GptOssConfig beyond the Llama ones."""
    return {"num_local_experts": fam["experts"], "num_experts_per_tok": fam["used"], "experts_per_token": fam["used"],
            "sliding_window": fam["sliding_window"], "swiglu_limit": fam["swiglu_limit"], "attention_bias": True,
            "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(fam["layers"])]}


def write_gguf_gpt_oss(path, name, fam, weights, wtype):
    """A gpt-oss GGUF file as llama.cpp's converter (conversion/gpt_oss.py) lays it out:
    gate_up_proj split into ffn_gate_exps and ffn_up_exps ((E, inter, hidden): transposed,
    gate the even columns), down_proj transposed into ffn_down_exps, the biases split
    likewise and kept f32 (1-D and the experts' 2-D ones); sinks as attn_sinks.weight, the
    MLP's norm as post_attention_norm. Q/K unpermuted (NeoX RoPE). wtype mxfp4: the
    experts' matrices in MXFP4, converted from the published layout's blocks as
    llama.cpp's converter does (so the blocks are those of the gpt_oss-st-mxfp4 folder),
    every other tensor f32."""
    arch = fam["gguf_arch"]
    tokens, scores, types = vocabulary(fam["model_type"])
    s = fam["rope_scaling"]
    md = {
        "general.architecture": arch, "general.name": name, "general.file_type": GGUF_FILE_TYPES[wtype],
        f"{arch}.vocab_size": VOCAB, f"{arch}.context_length": 256, f"{arch}.embedding_length": fam["hidden"],
        f"{arch}.block_count": fam["layers"], f"{arch}.feed_forward_length": fam["inter"],
        f"{arch}.attention.head_count": fam["heads"], f"{arch}.attention.head_count_kv": fam["kv_heads"],
        f"{arch}.attention.key_length": fam["head_dim"], f"{arch}.attention.value_length": fam["head_dim"],
        f"{arch}.rope.dimension_count": fam["head_dim"], f"{arch}.rope.freq_base": fam["theta"],
        f"{arch}.attention.layer_norm_rms_epsilon": RMS_EPS, f"{arch}.expert_count": fam["experts"],
        f"{arch}.expert_used_count": fam["used"], f"{arch}.expert_feed_forward_length": fam["inter"],
        f"{arch}.attention.sliding_window": fam["sliding_window"],
        f"{arch}.rope.scaling.type": "yarn", f"{arch}.rope.scaling.factor": float(s["factor"]),
        f"{arch}.rope.scaling.original_context_length": s["original_max_position_embeddings"],
        f"{arch}.rope.scaling.yarn_beta_fast": float(s["beta_fast"]),
        f"{arch}.rope.scaling.yarn_beta_slow": float(s["beta_slow"]),
        "tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": ("f32[]", scores),
        "tokenizer.ggml.token_type": ("i32[]", types), "tokenizer.ggml.unknown_token_id": 0,
        "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
    }

    def stored(array):
        if wtype == "mxfp4":
            return "mxfp4" if array.ndim == 3 else "f32"
        return wtype if array.ndim >= 2 else "f32"

    out = [("token_embd.weight", weights["model.embed_tokens.weight"], stored(weights["model.embed_tokens.weight"]))]
    names = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
             "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
             "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_proj.bias": "attn_q.bias",
             "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
             "self_attn.o_proj.bias": "attn_output.bias", "self_attn.sinks": "attn_sinks.weight",
             "post_attention_layernorm.weight": "post_attention_norm.weight"}
    for i in range(fam["layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        for hf_name, gguf_name in names.items():
            out.append((b + gguf_name, weights[p + hf_name], stored(weights[p + hf_name])))
        out.append((b + "ffn_gate_inp.weight", weights[p + "mlp.router.weight"], "f32"))
        out.append((b + "ffn_gate_inp.bias", weights[p + "mlp.router.bias"], "f32"))
        published = published_expert_tensors(fam, weights, i)
        gu_blocks, gu_scales = published[p + "mlp.experts.gate_up_proj"]
        converted = {"gate": gguf_mxfp4_from_published(gu_blocks[:, ::2], gu_scales[:, ::2]),
                     "up": gguf_mxfp4_from_published(gu_blocks[:, 1::2], gu_scales[:, 1::2]),
                     "down": gguf_mxfp4_from_published(*published[p + "mlp.experts.down_proj"])}
        gate_up = weights[p + "mlp.experts.gate_up_proj"].transpose(0, 2, 1)  # (E, 2 inter, hidden)
        bias = weights[p + "mlp.experts.gate_up_proj_bias"]
        down = weights[p + "mlp.experts.down_proj"].transpose(0, 2, 1)  # (E, hidden, inter)
        for part, rows, rows_bias in (("gate", gate_up[:, ::2], bias[:, ::2]), ("up", gate_up[:, 1::2], bias[:, 1::2]),
                                      ("down", down, weights[p + "mlp.experts.down_proj_bias"])):
            rows = np.ascontiguousarray(rows)
            if wtype == "mxfp4":  # what llama.cpp's converter makes of the published checkpoint's blocks
                out.append((b + f"ffn_{part}_exps.weight", rows, "mxfp4", converted[part].tobytes()))
            else:
                out.append((b + f"ffn_{part}_exps.weight", rows, stored(rows)))
            out.append((b + f"ffn_{part}_exps.bias", np.ascontiguousarray(rows_bias), "f32"))
    out.append(("output_norm.weight", weights["model.norm.weight"], "f32"))
    out.append(("output.weight", weights["lm_head.weight"], stored(weights["lm_head.weight"])))
    write_gguf(path, md, out)


# FP4 e2m1 magnitudes by code 0-7 (OCP Microscaling Formats v1.0, section 5.3.3)
E2M1_MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def quantize_mxfp4_published(w):
    """(E, out, in) floats, rows the output features, to the published gpt-oss checkpoints'
    MXFP4 tensors: blocks (E, out, in/32, 16) U8 and scales (E, out, in/32) U8. From the
    OCP MX v1.0 spec (section 6.3): per block of 32 values along a row, the shared exponent
    X = floor(log2(max |v|)) - 2 (2: e2m1's largest exponent), stored as X + 127 (E8M0),
    and each v / 2^X rounded to the nearest e2m1 value, ties to the even code, beyond 6
    saturated to 6; the sign is the code's bit 3. transformers' nibble order: value 2k of
    a block in the low nibble of byte k, value 2k + 1 in the high one."""
    e, rows, cols = w.shape
    v = np.asarray(w, dtype=np.float64).reshape(e, rows, cols // 32, 32)
    amax = np.abs(v).max(axis=-1)
    x = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 2, -127)
    x = np.clip(x, -127, 127)
    scaled = np.abs(v) / np.exp2(x)[..., None]
    dist = np.abs(scaled[..., None] - E2M1_MAGNITUDES)  # (..., 32, 8)
    # ties to even: among equally near codes prefer the even one (a tiny penalty on odd codes)
    code = np.argmin(dist + 1e-12 * (np.arange(8) % 2), axis=-1).astype(np.uint8)
    code |= np.where(v < 0, 8, 0).astype(np.uint8)
    blocks = code[..., 0::2] | (code[..., 1::2] << 4)  # (E, out, in/32, 16)
    scales = (x + 127).astype(np.uint8)
    return np.ascontiguousarray(blocks, dtype=np.uint8), np.ascontiguousarray(scales)


def published_expert_tensors(fam, weights, i):
    """Layer i's experts as published: {name: (blocks, scales)} for gate_up_proj (rows:
    its 2 inter output features, gate and up interleaved as in the float layout's columns)
    and down_proj (rows: hidden)."""
    p = f"model.layers.{i}.mlp.experts."
    return {p + part: quantize_mxfp4_published(weights[p + part].transpose(0, 2, 1))
            for part in ("gate_up_proj", "down_proj")}


def gguf_mxfp4_from_published(blocks, scales):
    """llama.cpp's convert_hf_to_gguf.py (conversion/gpt_oss.py repack_mxfp4 and
    transform_nibble_layout) in numpy: (..., n, 16) published blocks and (..., n) exponents
    to block_mxfp4 bytes (..., n * 17): the exponent, then value j in the low nibble of byte
    j and value j + 16 in the high one. Ported step by step, nibble swaps included."""
    t = blocks.astype(np.uint8)
    t = ((t & 0x0F) << 4) | ((t & 0xF0) >> 4)  # swap nibbles
    blk_a, blk_b = t[..., :8], t[..., 8:]
    a = np.stack([blk_a & 0xF0, (blk_a << 4) & 0xFF], axis=-1).reshape(t.shape)
    b = np.stack([blk_b >> 4, blk_b & 0x0F], axis=-1).reshape(t.shape)
    out = (a | b).astype(np.uint8)
    out = ((out & 0xF0) >> 4) | ((out & 0x0F) << 4)  # swap once more
    return np.concatenate([scales[..., None], out.astype(np.uint8)], axis=-1).reshape(*scales.shape[:-1], -1)


def write_raw_safetensors(path, tensors):
    """tensors: {name: (dtype, shape, bytes)}, written in name order."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header_json = json.dumps(header).encode()
    header_json += b" " * (-len(header_json) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_json)) + header_json + b"".join(blobs))
    return offset


PUBLISHED_QUANTIZATION = {"quant_method": "mxfp4", "modules_to_not_convert": [
    "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}


def published_tensors(fam, weights):
    """Every tensor as the published gpt-oss checkpoints hold them: experts as MXFP4 U8
    blocks and scales, everything else (biases included) bf16."""
    out = {n: ("BF16", t.shape, encode_tensor(t, "bf16")) for n, t in weights.items()
           if not n.endswith(("experts.gate_up_proj", "experts.down_proj"))}
    for i in range(fam["layers"]):
        for name, (blocks, scales) in published_expert_tensors(fam, weights, i).items():
            out[name + "_blocks"] = ("U8", blocks.shape, blocks.tobytes())
            out[name + "_scales"] = ("U8", scales.shape, scales.tobytes())
    return out


def write_gpt_oss_published_folder(folder, fam, weights, tensors=None, quantization=None, sharded=True):
    """An HF folder in the published gpt-oss layout (openai/gpt-oss-20b): config.json with
    quantization_config mxfp4, tensors sharded over two files with an index. tensors and
    quantization replace the published ones (the malformed variants)."""
    write_hf_folder(folder, fam, weights, "bf16", False)
    os.remove(os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = quantization or PUBLISHED_QUANTIZATION
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    tensors = tensors if tensors is not None else published_tensors(fam, weights)
    if not sharded:
        write_raw_safetensors(os.path.join(folder, "model.safetensors"), tensors)
        return
    names = sorted(tensors)
    halves = [names[: len(names) // 2], names[len(names) // 2 :]]
    weight_map, total = {}, 0
    for k, part in enumerate(halves):
        shard = f"model-{k + 1:05d}-of-{len(halves):05d}.safetensors"
        total += write_raw_safetensors(os.path.join(folder, shard), {n: tensors[n] for n in part})
        weight_map.update({n: shard for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def write_gpt_oss_malformed_folders(models_dir, fam, weights):
    """The published layout with one thing wrong each, for test_model_reference's refusals
    (not in the manifest): a _blocks tensor of the wrong shape, one whose _scales is
    missing, one stored as I8, and a quantization_config of another method."""
    good = published_tensors(fam, weights)
    name = "model.layers.1.mlp.experts.gate_up_proj_blocks"
    dtype, shape, data = good[name]
    variants = {
        "bad-shape": ({**good, name: (dtype, (shape[0], shape[1], shape[2] * 2, 8), data)}, None),
        "no-scales": ({n: t for n, t in good.items() if n != "model.layers.1.mlp.experts.down_proj_scales"}, None),
        "i8-blocks": ({**good, name: ("I8", shape, data)}, None),
        "gptq": (good, {"quant_method": "gptq", "bits": 4}),
    }
    for suffix, (tensors, quantization) in variants.items():
        write_gpt_oss_published_folder(os.path.join(models_dir, f"gpt_oss-st-mxfp4-{suffix}"), fam, weights,
                                       tensors, quantization, sharded=False)


# --------------------------------------------------------------------------------------


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = argv[1]
    os.makedirs(os.path.join(out_dir, "models"), exist_ok=True)
    manifest = []
    for k, (family, fam) in enumerate(FAMILIES.items()):
        rng = np.random.default_rng(SEED + k)
        weights = random_weights(fam, rng)
        prompts = [[1] + list(rng.integers(3, VOCAB, size=n - 1)) for n in PROMPT_LENGTHS]
        long_prompt = [1] + list(rng.integers(3, VOCAB, size=LONG_PROMPT_LENGTH - 1))

        def prompts_for(wtype):
            chosen = prompts + ([long_prompt] if wtype in LONG_PROMPT_TYPES else [])
            return ";".join(",".join(str(int(t)) for t in p) for p in chosen)
        for wtype in fam.get("st_types", SAFETENSORS_TYPES):
            sharded = (family, wtype) == SHARDED
            name = f"{family}-st-{wtype}" + ("-sharded" if sharded else "")
            write_hf_folder(os.path.join(out_dir, "models", name), fam, weights, wtype, sharded)
            manifest.append((name, f"models/{name}", wtype, f"{name}.ref", str(N_NEW), prompts_for(wtype),
                             family))
        if fam.get("gpt_oss"):  # the published layout (MXFP4 experts), and malformed copies of it
            name = f"{family}-st-mxfp4"
            write_gpt_oss_published_folder(os.path.join(out_dir, "models", name), fam, weights)
            manifest.append((name, f"models/{name}", "mxfp4", f"{name}.ref", str(N_NEW), prompts_for("mxfp4"),
                             family))
            write_gpt_oss_malformed_folders(os.path.join(out_dir, "models"), fam, weights)
        gguf_types = fam.get("gguf_types", GGUF_TYPES) + fam.get("gguf_extra_types", ())
        for wtype in gguf_types if fam.get("gguf", True) else ():
            name = f"{family}-gguf-{wtype}"
            write_gguf_model(os.path.join(out_dir, "models", name + ".gguf"), name, fam, weights, wtype)
            manifest.append((name, f"models/{name}.gguf", wtype, f"{name}.ref", str(N_NEW), prompts_for(wtype),
                             fam.get("gguf_family", family)))
    for k, (family, fam) in enumerate(FAMILIES_256.items()):
        rng = np.random.default_rng(SEED + 100 + k)
        weights = random_weights(fam, rng)
        prompts = [[1] + list(rng.integers(3, VOCAB, size=n - 1)) for n in PROMPT_LENGTHS]
        prompt_text = ";".join(",".join(str(int(t)) for t in p) for p in prompts)
        for wtype in fam.get("types", ("f32",) + QUANT_TYPES + ("mix",)):
            name = f"{family}-gguf-{wtype}"
            write_gguf_model(os.path.join(out_dir, "models", name + ".gguf"), name, fam, weights, wtype)
            manifest.append((name, f"models/{name}.gguf", wtype, f"{name}.ref", str(N_NEW), prompt_text, family))
    with open(os.path.join(out_dir, "manifest.tsv"), "w") as f:
        for row in manifest:
            f.write("\t".join(row) + "\n")
    print(f"wrote {len(manifest)} models under {out_dir}/models")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
