#!/usr/bin/python3
"""An independent float64 numpy forward pass of Llama-family models, the yardstick the C
runtime is measured against.

Written from the papers and the Hugging Face `transformers` semantics (LlamaForCausalLM,
MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma2ForCausalLM,
Gemma3ForCausalLM, Phi3ForCausalLM), not from cinfer's C code. Phi-3 stores q, k and v
as one qkv_proj and gate and up as one gate_up_proj (gate rows first); they are split
here back into the Llama names (GGUF: attn_qkv and a fused ffn_up, likewise). Gemma's blocks, from the Gemma 2 paper
(arXiv 2408.00118) and Gemma 3 report (arXiv 2503.19786) and the published configs:
embeddings times sqrt(hidden); RMSNorm scaling by (1 + w); an extra RMSNorm on the
attention output and on the MLP output before each residual add; a GELU (tanh) gated
MLP; scores scaled by query_pre_attn_scalar^-1/2 and soft-capped (cap * tanh(s / cap))
by attn_logit_softcapping, final logits by final_logit_softcapping; sliding-window
attention on alternate layers (Gemma 2: even layers local) or five of six (Gemma 3), a
local token at position i seeing positions j with i - window < j <= i; Gemma 3's local
layers rotate with rope_local_base_freq unscaled, its global ones with rope_theta and
rope_scaling (linear: frequencies divided by factor). Mistral's sliding_window covers
every layer; Qwen2/3's use_sliding_window the layers from max_window_layers on.
Mixtures of experts (Qwen3MoeForCausalLM, MixtralForCausalLM): a sparse layer's MLP is
n experts, each a SwiGLU MLP, and a router (a linear map to n logits). Mixtral, from its
paper (arXiv 2401.04088): y = sum over the top-k logits i of softmax(top-k logits)_i *
expert_i(x), i.e. a softmax over the chosen k alone. Qwen3-MoE, from the published
configs and transformers' Qwen3MoeSparseMoeBlock: softmax over all n logits, keep the
top k probabilities, divide them by their sum when norm_topk_prob is true; layers in
mlp_only_layers, or where (l + 1) % decoder_sparse_step != 0, stay dense. The two agree
when Qwen3 renormalises; they are written here the two ways on purpose. Qwen2-MoE
(Qwen2MoeForCausalLM, transformers' Qwen2MoeSparseMoeBlock and the Qwen1.5-MoE/Qwen2-57B
configs): attention as Qwen2 (q/k/v biases), the router as Qwen3-MoE's (norm_topk_prob
false unless set), plus a shared expert, a SwiGLU MLP of shared_expert_intermediate_size
that every token runs, multiplied by sigmoid(shared_expert_gate . x) (a linear map to one
logit, no bias) and added to the routed experts' sum. GGUF (qwen2moe) stores it as
blk.N.ffn_{gate,up,down}_shexp and blk.N.ffn_gate_inp_shexp, its width as
expert_shared_feed_forward_length; llama.cpp does not renormalise qwen2moe's k weights,
so those files are read with norm_topk_prob false. Here each
token's experts are found and run one token at a time (not grouped by expert as
cinfer does). GGUF holds the experts merged as 3-D tensors blk.N.ffn_{gate,up,down}_exps
(or one blk.N.ffn_gate.E per expert in older Mixtral files) and the router as
blk.N.ffn_gate_inp; llama.cpp renormalises the k weights for qwen3moe and for Mixtral
(arch llama with llama.expert_count), so those files are read with norm_topk_prob true.
It reads the two formats itself:

- Hugging Face folders: config.json and *.safetensors (single file, or sharded with
  model.safetensors.index.json); f32, f16 and bf16 tensors, and gpt-oss experts as the
  published checkpoints store them (quantization_config mxfp4: U8 _blocks and _scales,
  dequantized here from the OCP MX spec and transformers' convert_moe_packed_tensors).
- GGUF v2/v3 files: f32, f16, bf16 and Q8_0 tensors. For llama-arch files, llama.cpp's
  converter permuted the Q and K rows so its RoPE can rotate interleaved pairs; this
  reference un-permutes them back to Hugging Face order and uses rotate_half, so it
  reaches the same answer by a different route than an interleaved kernel would.
  Gemma GGUF files (gemma2, gemma3) hold norm weights with the 1 of (1 + w) added by
  llama.cpp's converter: it is subtracted back. llama.cpp scales Gemma's scores by
  1/sqrt(head_dim) (hidden/heads for the 27B models), so that is the
  query_pre_attn_scalar read from GGUF.
  Llama 3 RoPE scaling in GGUF is the `rope_freqs.weight` tensor (per-frequency
  divisors) the converter precomputes; from Hugging Face folders it is recomputed from
  config.json as `_compute_llama3_parameters` does.
  YaRN in GGUF is rope.scaling.type "yarn" with factor and original_context_length;
  LongRoPE the rope_factors_short/long.weight tensors with rope.scaling.attn_factor.

RoPE scalings beyond Llama 3 and linear, from their papers: YaRN (arXiv 2309.00071):
pairs turning fewer than beta_slow times over the original context are interpolated
(divided by factor), pairs turning more than beta_fast times kept, a linear ramp in
between, and cos/sin multiplied by 0.1 ln(factor) + 1; dynamic NTK: the base raised to
base * (factor * L / max_pos - (factor - 1))^(d / (d - 2)) for a context of L > max_pos
tokens; LongRoPE (Phi-3, arXiv 2402.13753): a divisor per frequency, the long set for
contexts beyond original_max_position_embeddings, and cos/sin multiplied by
sqrt(1 + ln(max_pos / original) / ln(original)). The two whose frequencies depend on a
context length take the served one, SERVED_CONTEXT (what the C test serves), fixed
for the whole sequence.

Command line:
  model_reference.py logits MODEL TOKENS          prints argmax and logits norm per position
  model_reference.py expect MANIFEST              writes the .ref file of every manifest line
  model_reference.py info MODEL                   prints the configuration it read

The .ref format (little-endian), read by tests/test_model_reference.c:
  char magic[8] = "CINFREF1"; u32 vocab; u32 n_seqs;
  per sequence: u32 n_prompt; u32 n_gen; i32 tokens[n_prompt + n_gen];
                f64 logits[(n_prompt + n_gen - 1) * vocab]
  tokens are the prompt followed by the greedy continuation; logits row p are the
  logits after consuming tokens[0..p].
Mixture-of-experts models also get a .ref.route file (write_route).
"""

import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ggml_quants  # noqa: E402  (the block-quantized types, from their layouts)

# --------------------------------------------------------------------------------------
# safetensors


SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": "bf16", "F64": np.float64, "U8": "u8"}

# FP4 e2m1 (OCP Microscaling Formats v1.0, section 5.3.3): 1 sign bit, 2 exponent bits
# (bias 1), 1 mantissa bit; codes 0-7 are +0, +0.5, +1, +1.5, +2, +3, +4, +6, codes 8-15
# the same with the sign set
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def dequantize_published_mxfp4(blocks, scales):
    """The published gpt-oss checkpoints' experts (transformers' Mxfp4 layout:
    convert_moe_packed_tensors) back to transformers' float layout: blocks (E, out, in/32,
    16) bytes holding value 2k of a block in the low nibble of byte k and value 2k + 1 in
    the high one, scales (E, out, in/32) E8M0 exponents (value 2^(s - 127)); rows are
    output features, so the float (E, in, out) tensor for x @ W is the transpose."""
    blocks = blocks.astype(np.uint8)
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1)  # (E, out, in/32, 16, 2): value 2k, 2k + 1
    values = E2M1_VALUES[codes].reshape(*blocks.shape[:3], 32)
    values = values * np.exp2(scales.astype(np.float64) - 127.0)[..., None]
    return values.reshape(blocks.shape[0], blocks.shape[1], -1).transpose(0, 2, 1)


def bf16_bits_to_f64(bits):
    """bf16 is the top half of an IEEE f32: widen by shifting into the high 16 bits."""
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def read_safetensors(path):
    """Returns {name: float64 array} for one .safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: {len(blob)} bytes, too short for a safetensors header")
    (header_bytes,) = struct.unpack_from("<Q", blob, 0)
    if 8 + header_bytes > len(blob):
        raise ValueError(f"{path}: header of {header_bytes} bytes runs past the file end")
    header = json.loads(blob[8 : 8 + header_bytes].decode("utf-8"))
    data = memoryview(blob)[8 + header_bytes :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name}: dtype {info['dtype']} not supported")
        raw = data[begin:end]
        shape = tuple(info["shape"])
        if dtype == "bf16":
            arr = bf16_bits_to_f64(np.frombuffer(raw, dtype="<u2"))
        elif dtype == "u8":  # MXFP4 blocks and exponents: kept as bytes
            arr = np.frombuffer(raw, dtype=np.uint8)
        else:
            arr = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).astype(np.float64)
        expected = int(np.prod(shape)) if shape else 1
        if arr.size != expected:
            raise ValueError(f"{path}: tensor {name}: {arr.size} values for shape {shape}")
        out[name] = arr.reshape(shape)
    return out


def read_hf_folder(folder):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    index_path = os.path.join(folder, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(index_path):
        with open(index_path) as f:
            weight_map = json.load(f)["weight_map"]
        for shard in sorted(set(weight_map.values())):
            tensors.update(read_safetensors(os.path.join(folder, shard)))
        missing = set(weight_map) - set(tensors)
        if missing:
            raise ValueError(f"{index_path}: tensors missing from their shards: {sorted(missing)}")
    else:
        tensors = read_safetensors(os.path.join(folder, "model.safetensors"))
    method = (config.get("quantization_config") or {}).get("quant_method")
    if method not in (None, "mxfp4"):
        raise ValueError(f"{folder}/config.json: quantization_config.quant_method {method!r} not supported")
    for name in [n for n in tensors if n.endswith("_blocks")]:  # gpt-oss experts as published
        base = name[: -len("_blocks")]
        tensors[base] = dequantize_published_mxfp4(tensors.pop(name), tensors.pop(base + "_scales"))
    return config, tensors


# --------------------------------------------------------------------------------------
# GGUF

GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
Q8_0_BLOCK_VALUES = 32
Q8_0_BLOCK_BYTES = 2 + 32  # f16 scale, then 32 int8


class GGUFReader:
    """Reads a GGUF v2/v3 file: metadata into a dict, tensors dequantized to float64."""

    SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
               10: "<Q", 11: "<q", 12: "<d"}

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.blob = f.read()
        self.pos = 0
        magic = self.blob[:4]
        if magic != b"GGUF":
            raise ValueError(f"{path}: magic {magic!r}, expected b'GGUF'")
        self.pos = 4
        self.version = self._u32()
        if self.version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {self.version}, expected 2 or 3")
        n_tensors = self._u64()
        n_kv = self._u64()
        self.metadata = {}
        for _ in range(n_kv):
            key = self._str()
            vtype = self._u32()
            self.metadata[key] = self._value(vtype)
        infos = []
        for _ in range(n_tensors):
            name = self._str()
            n_dims = self._u32()
            ne = [self._u64() for _ in range(n_dims)]
            ttype = self._u32()
            offset = self._u64()
            infos.append((name, ne, ttype, offset))
        alignment = int(self.metadata.get("general.alignment", 32))
        data_start = (self.pos + alignment - 1) // alignment * alignment
        self.tensors = {}
        self.tensor_types = {}  # name -> ggml type id
        for name, ne, ttype, offset in infos:
            self.tensors[name] = self._tensor(name, ne, ttype, data_start + offset)
            self.tensor_types[name] = ttype

    def _unpack(self, fmt):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.blob):
            raise ValueError(f"{self.path}: truncated at byte {self.pos}")
        (v,) = struct.unpack_from(fmt, self.blob, self.pos)
        self.pos += size
        return v

    def _u32(self):
        return self._unpack("<I")

    def _u64(self):
        return self._unpack("<Q")

    def _str(self):
        n = self._u64()
        s = self.blob[self.pos : self.pos + n]
        if len(s) != n:
            raise ValueError(f"{self.path}: string of {n} bytes runs past the end")
        self.pos += n
        return s.decode("utf-8", errors="surrogateescape")

    def _value(self, vtype):
        if vtype in self.SCALARS:
            return self._unpack(self.SCALARS[vtype])
        if vtype == 8:
            return self._str()
        if vtype == 9:
            etype = self._u32()
            count = self._u64()
            if etype in self.SCALARS:  # read numeric arrays in one go
                fmt = self.SCALARS[etype]
                size = struct.calcsize(fmt)
                arr = np.frombuffer(self.blob, dtype=np.dtype(fmt), count=count, offset=self.pos)
                self.pos += size * count
                return arr
            return [self._value(etype) for _ in range(count)]
        raise ValueError(f"{self.path}: metadata value type {vtype} unknown")

    def _tensor(self, name, ne, ttype, start):
        n = int(np.prod(ne)) if ne else 1
        shape = tuple(reversed(ne))  # ggml ne[0] is the contiguous dimension
        if ttype == GGML_F32:
            arr = np.frombuffer(self.blob, dtype="<f4", count=n, offset=start).astype(np.float64)
        elif ttype == GGML_F16:
            arr = np.frombuffer(self.blob, dtype="<f2", count=n, offset=start).astype(np.float64)
        elif ttype == GGML_BF16:
            arr = bf16_bits_to_f64(np.frombuffer(self.blob, dtype="<u2", count=n, offset=start))
        elif ttype == GGML_Q8_0:
            if ne[0] % Q8_0_BLOCK_VALUES:
                raise ValueError(f"{self.path}: tensor {name}: Q8_0 row of {ne[0]} values")
            n_blocks = n // Q8_0_BLOCK_VALUES
            raw = np.frombuffer(self.blob, dtype=np.uint8, count=n_blocks * Q8_0_BLOCK_BYTES,
                                offset=start).reshape(n_blocks, Q8_0_BLOCK_BYTES)
            scale = raw[:, :2].copy().view("<f2").astype(np.float64)  # (n_blocks, 1)
            quants = raw[:, 2:].copy().view(np.int8).astype(np.float64)  # (n_blocks, 32)
            arr = (scale * quants).reshape(-1)
        elif ttype in ggml_quants.TYPE_BY_ID:
            tname = ggml_quants.TYPE_BY_ID[ttype]
            _, bv, bb = ggml_quants.TYPES[tname]
            if ne[0] % bv:
                raise ValueError(f"{self.path}: tensor {name}: {tname} row of {ne[0]} values")
            raw = self.blob[start:start + n // bv * bb]
            arr = ggml_quants.dequantize(tname, raw, n).astype(np.float64)
        else:
            raise ValueError(f"{self.path}: tensor {name}: ggml type {ttype} not supported")
        return arr.reshape(shape)


def unpermute_llama_qk(w, n_heads):
    """Inverts llama.cpp convert_hf_to_gguf.py LlamaModel.permute:
         w.reshape(n_head, 2, rows // n_head // 2, *rest).swapaxes(1, 2).reshape(w.shape)
    which interleaves each head's two halves. Back to Hugging Face row order."""
    rows = w.shape[0]
    half = rows // n_heads // 2
    return w.reshape(n_heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def read_gguf(path):
    """Returns (config in Hugging Face terms, tensors under Hugging Face names)."""
    g = GGUFReader(path)
    md = g.metadata
    arch = md["general.architecture"]

    def key(name, default=None):
        full = f"{arch}.{name}"
        if full in md:
            return md[full]
        if default is None:
            raise KeyError(f"{path}: metadata key {full} missing")
        return default

    n_heads = int(key("attention.head_count"))
    hidden = int(key("embedding_length"))
    head_dim = int(key("attention.key_length", hidden // n_heads))
    n_kv_heads = int(key("attention.head_count_kv", n_heads))
    emb = g.tensors["token_embd.weight"]
    gemma = arch in ("gemma2", "gemma3")
    n_experts = int(key("expert_count", 0))
    model_type = {"gemma3": "gemma3_text", "qwen3moe": "qwen3_moe", "qwen2moe": "qwen2_moe",
                  "gpt-oss": "gpt_oss"}.get(arch, arch)
    if arch == "llama" and n_experts:
        model_type = "mixtral"
    config = {
        "model_type": model_type,
        "hidden_size": hidden,
        "intermediate_size": int(key("feed_forward_length")),
        "num_hidden_layers": int(key("block_count")),
        "num_attention_heads": n_heads,
        "num_key_value_heads": n_kv_heads,
        "head_dim": head_dim,
        "rms_norm_eps": float(key("attention.layer_norm_rms_epsilon")),
        "rope_theta": float(key("rope.freq_base", 10000.0)),
        "vocab_size": emb.shape[0],
        "tie_word_embeddings": "output.weight" not in g.tensors,
    }
    if n_experts:
        config["num_experts"] = n_experts
        config["num_experts_per_tok"] = int(key("expert_used_count"))
        config["moe_intermediate_size"] = int(key("expert_feed_forward_length", config["intermediate_size"]))
        config["norm_topk_prob"] = True
        if arch == "qwen2moe":  # llama.cpp: k weights as the softmax left them; experts n_ff / k wide by default
            config["norm_topk_prob"] = False
            config["moe_intermediate_size"] = int(key("expert_feed_forward_length",
                                                      config["intermediate_size"] // config["num_experts_per_tok"]))
            config["shared_expert_intermediate_size"] = int(key("expert_shared_feed_forward_length",
                                                                config["intermediate_size"]))
            # a layer without a router is dense
            config["mlp_only_layers"] = [i for i in range(config["num_hidden_layers"])
                                         if f"blk.{i}.ffn_gate_inp.weight" not in g.tensors]
    if gemma:
        n_layers = config["num_hidden_layers"]
        large = n_layers == (46 if arch == "gemma2" else 62)  # llama.cpp's 27B rule
        config["query_pre_attn_scalar"] = hidden / n_heads if large else head_dim
        config["sliding_window"] = int(key("attention.sliding_window", 4096))
        if arch == "gemma2":
            config["attn_logit_softcapping"] = float(key("attn_logit_softcapping", 0.0)) or None
            config["final_logit_softcapping"] = float(key("final_logit_softcapping", 0.0)) or None
        else:
            config["attn_logit_softcapping"] = None
            config["final_logit_softcapping"] = None
            config["rope_local_base_freq"] = 10000.0  # llama.cpp's fixed local base
            if md.get(f"{arch}.rope.scaling.type") == "linear":
                config["rope_scaling"] = {"rope_type": "linear",
                                          "factor": float(md[f"{arch}.rope.scaling.factor"])}
    config["max_position_embeddings"] = int(key("context_length", 2048))
    rope_dims = int(key("rope.dimension_count", head_dim))
    if rope_dims != head_dim:
        config["partial_rotary_factor"] = rope_dims / head_dim
    if md.get(f"{arch}.rope.scaling.type") == "yarn":
        config["rope_scaling"] = {"rope_type": "yarn", "factor": float(key("rope.scaling.factor")),
                                  "original_max_position_embeddings": int(key("rope.scaling.original_context_length")),
                                  "beta_fast": float(key("rope.scaling.yarn_beta_fast", 32.0)),
                                  "beta_slow": float(key("rope.scaling.yarn_beta_slow", 1.0))}
    if "rope_factors_long.weight" in g.tensors:  # LongRoPE as llama.cpp's converter stores it
        config["rope_scaling"] = {"rope_type": "longrope",
                                  "short_factor": g.tensors["rope_factors_short.weight"].reshape(-1).tolist(),
                                  "long_factor": g.tensors["rope_factors_long.weight"].reshape(-1).tolist(),
                                  "original_max_position_embeddings": int(key("rope.scaling.original_context_length")),
                                  "attention_factor": float(key("rope.scaling.attn_factor", 1.0))}
    if arch == "gpt-oss":
        return read_gguf_gpt_oss(g, config, key)
    hf = {
        "model.embed_tokens.weight": emb,
        "model.norm.weight": g.tensors["output_norm.weight"],
    }
    if gemma:
        hf["model.norm.weight"] = hf["model.norm.weight"] - 1.0
    if "output.weight" in g.tensors:
        hf["lm_head.weight"] = g.tensors["output.weight"]
    if "rope_freqs.weight" in g.tensors:
        hf["rope_freqs"] = g.tensors["rope_freqs.weight"]
    names = {
        "attn_norm.weight": "input_layernorm.weight",
        "attn_q.weight": "self_attn.q_proj.weight",
        "attn_k.weight": "self_attn.k_proj.weight",
        "attn_v.weight": "self_attn.v_proj.weight",
        "attn_output.weight": "self_attn.o_proj.weight",
        "attn_q.bias": "self_attn.q_proj.bias",
        "attn_k.bias": "self_attn.k_proj.bias",
        "attn_v.bias": "self_attn.v_proj.bias",
        "attn_q_norm.weight": "self_attn.q_norm.weight",
        "attn_k_norm.weight": "self_attn.k_norm.weight",
        "ffn_norm.weight": "pre_feedforward_layernorm.weight" if gemma else "post_attention_layernorm.weight",
        "post_attention_norm.weight": "post_attention_layernorm.weight",
        "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
        "ffn_gate.weight": "mlp.gate_proj.weight",
        "ffn_up.weight": "mlp.up_proj.weight",
        "ffn_down.weight": "mlp.down_proj.weight",
        "attn_qkv.weight": "self_attn.qkv_proj.weight",
    }
    if arch == "phi3":
        names["ffn_up.weight"] = "mlp.gate_up_proj.weight"
    moe_parts = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}
    for i in range(config["num_hidden_layers"]):
        router = g.tensors.get(f"blk.{i}.ffn_gate_inp.weight")
        if router is not None:  # a sparse layer: the experts, under Qwen3-MoE's HF names
            hf[f"model.layers.{i}.mlp.gate.weight"] = router
            for part, hf_part in moe_parts.items():
                merged = g.tensors.get(f"blk.{i}.ffn_{part}_exps.weight")  # (experts, rows, cols)
                for e in range(n_experts):
                    t = merged[e] if merged is not None else g.tensors[f"blk.{i}.ffn_{part}.{e}.weight"]
                    hf[f"model.layers.{i}.mlp.experts.{e}.{hf_part}.weight"] = t
            if f"blk.{i}.ffn_gate_inp_shexp.weight" in g.tensors:  # qwen2moe's shared expert
                for part, hf_part in moe_parts.items():
                    t = g.tensors[f"blk.{i}.ffn_{part}_shexp.weight"]
                    hf[f"model.layers.{i}.mlp.shared_expert.{hf_part}.weight"] = t
                hf[f"model.layers.{i}.mlp.shared_expert_gate.weight"] = \
                    g.tensors[f"blk.{i}.ffn_gate_inp_shexp.weight"].reshape(1, hidden)
        for gguf_name, hf_name in names.items():
            t = g.tensors.get(f"blk.{i}.{gguf_name}")
            if t is None or (router is not None and gguf_name.startswith("ffn_") and gguf_name != "ffn_norm.weight"):
                continue
            if gemma and gguf_name.endswith("norm.weight"):
                t = t - 1.0  # the converter's + 1
            if arch == "llama" and gguf_name.startswith(("attn_q.", "attn_k.")):
                heads = n_heads if gguf_name.startswith("attn_q.") else n_kv_heads
                t = unpermute_llama_qk(t, heads)
            hf[f"model.layers.{i}.{hf_name}"] = t
    return config, hf, md


def read_gguf_gpt_oss(g, config, key):
    """A gpt-oss GGUF file as llama.cpp's converter writes it, back to transformers'
    GptOss names and layouts: the experts' gate and up (ffn_gate_exps, ffn_up_exps:
    (experts, inter, hidden)) re-interleaved into gate_up_proj (experts, hidden, 2 inter),
    down_proj transposed to (experts, inter, hidden); the MLP's norm is
    post_attention_norm; sliding layers every other one from layer 0 (llama.cpp's
    swa pattern 2); YaRN's bounds rounded (llama.cpp's ggml_rope_yarn_corr_dims)."""
    md = g.metadata
    t = g.tensors
    n = config["num_hidden_layers"]
    config["num_local_experts"] = config.pop("num_experts")
    config["intermediate_size"] = config.pop("moe_intermediate_size")
    config.pop("norm_topk_prob")
    config["sliding_window"] = int(key("attention.sliding_window"))
    pattern = int(key("attention.sliding_window_pattern", 2))
    config["layer_types"] = ["sliding_attention" if i % pattern < pattern - 1 else "full_attention" for i in range(n)]
    if "rope_scaling" in config:
        config["rope_scaling"]["truncate"] = True
    else:
        config["rope_scaling"] = None
    config["swiglu_limit"] = 7.0  # llama.cpp's fixed constant
    hf = {"model.embed_tokens.weight": t["token_embd.weight"], "model.norm.weight": t["output_norm.weight"]}
    if "output.weight" in t:
        hf["lm_head.weight"] = t["output.weight"]
    names = {"attn_norm.weight": "input_layernorm.weight", "attn_q.weight": "self_attn.q_proj.weight",
             "attn_k.weight": "self_attn.k_proj.weight", "attn_v.weight": "self_attn.v_proj.weight",
             "attn_output.weight": "self_attn.o_proj.weight", "attn_q.bias": "self_attn.q_proj.bias",
             "attn_k.bias": "self_attn.k_proj.bias", "attn_v.bias": "self_attn.v_proj.bias",
             "attn_output.bias": "self_attn.o_proj.bias", "attn_sinks.weight": "self_attn.sinks",
             "post_attention_norm.weight": "post_attention_layernorm.weight",
             "ffn_gate_inp.weight": "mlp.router.weight", "ffn_gate_inp.bias": "mlp.router.bias"}
    for i in range(n):
        p = f"model.layers.{i}."
        for gguf_name, hf_name in names.items():
            hf[p + hf_name] = t[f"blk.{i}.{gguf_name}"]
        gate, up = t[f"blk.{i}.ffn_gate_exps.weight"], t[f"blk.{i}.ffn_up_exps.weight"]  # (E, inter, hidden)
        gate_up = np.empty((gate.shape[0], gate.shape[2], 2 * gate.shape[1]))
        gate_up[..., ::2], gate_up[..., 1::2] = gate.transpose(0, 2, 1), up.transpose(0, 2, 1)
        hf[p + "mlp.experts.gate_up_proj"] = gate_up
        bias = np.empty((gate.shape[0], 2 * gate.shape[1]))
        bias[:, ::2], bias[:, 1::2] = t[f"blk.{i}.ffn_gate_exps.bias"], t[f"blk.{i}.ffn_up_exps.bias"]
        hf[p + "mlp.experts.gate_up_proj_bias"] = bias
        hf[p + "mlp.experts.down_proj"] = t[f"blk.{i}.ffn_down_exps.weight"].transpose(0, 2, 1)
        hf[p + "mlp.experts.down_proj_bias"] = t[f"blk.{i}.ffn_down_exps.bias"]
    return config, hf, md


# --------------------------------------------------------------------------------------
# the model


class Model:
    def __init__(self, path):
        self.path = path
        self.gguf_metadata = None
        if os.path.isdir(path):
            config, self.w = read_hf_folder(path)
        else:
            config, self.w, self.gguf_metadata = read_gguf(path)
        self.config = config
        self.hidden = config["hidden_size"]
        self.n_layers = config["num_hidden_layers"]
        self.n_heads = config["num_attention_heads"]
        self.n_kv_heads = config.get("num_key_value_heads") or self.n_heads
        self.head_dim = config.get("head_dim") or self.hidden // self.n_heads
        # partial rotary (Phi-4-mini): RoPE turns the first int(head_dim * factor) dims of a head
        self.rotary_dim = int(self.head_dim * config.get("partial_rotary_factor", 1.0))
        self.eps = config.get("rms_norm_eps", 1e-6)
        self.vocab = self.w["model.embed_tokens.weight"].shape[0]
        tied = config.get("tie_word_embeddings", False) or "lm_head.weight" not in self.w
        self.lm_head = self.w["model.embed_tokens.weight"] if tied else self.w["lm_head.weight"]
        self._split_fused()
        family = config.get("model_type")
        self.gemma = family in ("gemma2", "gemma3_text")
        gemma_defaults = {"gemma2": (10000.0, 50.0, 30.0), "gemma3_text": (1000000.0, None, None)}
        theta_default, attn_cap, final_cap = gemma_defaults.get(family, (10000.0, None, None))
        self.rope_theta = config.get("rope_theta", theta_default)
        # a key present as null means no capping
        self.attn_cap = config["attn_logit_softcapping"] if "attn_logit_softcapping" in config else attn_cap
        self.final_cap = config["final_logit_softcapping"] if "final_logit_softcapping" in config else final_cap
        self.scaling = (config.get("query_pre_attn_scalar", 256) ** -0.5 if self.gemma
                        else 1.0 / math.sqrt(self.head_dim))
        self.gpt_oss = family == "gpt_oss"
        if self.gpt_oss:  # GptOssConfig's defaults
            self.eps = config.get("rms_norm_eps", 1e-5)
            self.rope_theta = config.get("rope_theta", 150000.0)
            if "rope_scaling" not in config:
                config["rope_scaling"] = GPT_OSS_DEFAULT_YARN
            self.swiglu_limit = config.get("swiglu_limit", 7.0)
        self.window, self.sliding = self._sliding_layers(family)
        self.inv_freq = self._inv_freq(self.rope_theta, config.get("rope_scaling"))
        self.inv_freq_local = self.inv_freq
        self.rope_attention = self._rope_attention(config.get("rope_scaling") or {})
        if family == "gemma3_text":  # local layers: their own base, no scaling
            self.inv_freq_local = self._inv_freq(config.get("rope_local_base_freq", 10000.0), None)
        self.moe = self._moe_layers(family)
        self.min_route_gap = math.inf

    def _moe_layers(self, family):
        """Per layer: None (a dense MLP) or (HF prefix of router and experts, n, k,
        'mixtral' or 'qwen', renormalise)."""
        c = self.config
        if family == "gpt_oss":  # every layer; gpt_oss_moe runs them
            return [("mlp", c.get("num_local_experts", 128), c.get("num_experts_per_tok", 4), "gpt_oss",
                     True)] * self.n_layers
        if family == "mixtral":
            n, k = c.get("num_local_experts", 8), c.get("num_experts_per_tok", 2)
            if "model.layers.0.mlp.gate.weight" in self.w:  # read from GGUF under Qwen3-MoE names
                return [("mlp", n, k, "mixtral", True)] * self.n_layers
            return [("block_sparse_moe", n, k, "mixtral", True)] * self.n_layers
        qwen2 = family == "qwen2_moe"  # Qwen2MoeConfig's defaults: 60 experts, 4 per token
        if family not in ("qwen3_moe", "qwen2_moe") or not c.get("num_experts", 60 if qwen2 else 128):
            return [None] * self.n_layers
        n, k = c.get("num_experts", 60 if qwen2 else 128), c.get("num_experts_per_tok", 4 if qwen2 else 8)
        step, dense = c.get("decoder_sparse_step", 1), c.get("mlp_only_layers") or []
        return [("mlp", n, k, "qwen", c.get("norm_topk_prob", False))
                if i not in dense and (i + 1) % step == 0 else None for i in range(self.n_layers)]

    def gpt_oss_moe(self, h, layer):
        """(n, hidden) output of gpt-oss's MLP (transformers' GptOssTopKRouter and
        GptOssExperts), token by token: router logits with bias, the top k of them,
        a softmax over those k; each chosen expert's gate_up = h W + b, gate its even
        columns and up its odd ones, both clamped, gate * sigmoid(1.702 gate) * (up + 1),
        then down with its bias, times the expert's weight."""
        w, p = self.w, f"model.layers.{layer}.mlp."
        k = self.config.get("num_experts_per_tok", 4)
        limit, alpha = self.swiglu_limit, 1.702
        logits = linear(h, w[p + "router.weight"], w[p + "router.bias"])  # (n, experts)
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            order = np.argsort(-logits[t], kind="stable")
            chosen = order[:k]
            if k < logits.shape[1]:
                gap = logits[t, order[k - 1]] - logits[t, order[k]]
                self.min_route_gap = min(self.min_route_gap, gap)
                self.route_gaps[t] = min(self.route_gaps[t], gap / np.linalg.norm(logits[t]))
            z = np.exp(logits[t, chosen] - logits[t, chosen].max())
            for e, wt in zip(chosen, z / z.sum()):
                gate_up = h[t] @ w[p + "experts.gate_up_proj"][e] + w[p + "experts.gate_up_proj_bias"][e]
                gate = np.minimum(gate_up[::2], limit)
                up = np.clip(gate_up[1::2], -limit, limit)
                act = (up + 1.0) * gate / (1.0 + np.exp(-alpha * gate))
                out[t] += wt * (act @ w[p + "experts.down_proj"][e] + w[p + "experts.down_proj_bias"][e])
        return out

    def moe_block(self, h, layer):
        """(n, hidden) output of layer's experts, token by token."""
        block, n_experts, k, style, renorm = self.moe[layer]
        p = f"model.layers.{layer}.{block}."
        names = ("gate_proj", "up_proj", "down_proj") if block == "mlp" else ("w1", "w3", "w2")
        logits = linear(h, self.w[p + "gate.weight"])  # (n, experts)
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            order = np.argsort(-logits[t], kind="stable")  # ties: the lower id first
            chosen = order[:k]
            if k < n_experts:  # how near the k-th and (k+1)-th experts came: rounding could swap them
                gap = logits[t, order[k - 1]] - logits[t, order[k]]
                self.min_route_gap = min(self.min_route_gap, gap)
                self.route_gaps[t] = min(self.route_gaps[t], gap / np.linalg.norm(logits[t]))
            if style == "mixtral":  # softmax over the chosen logits (Mixtral paper, eq. 2)
                z = np.exp(logits[t, chosen] - logits[t, chosen].max())
                weights = z / z.sum()
            else:  # softmax over every expert, then the top k, then (optionally) renormalised
                z = np.exp(logits[t] - logits[t].max())
                weights = (z / z.sum())[chosen]
                if renorm:
                    weights = weights / weights.sum()
            for e, wt in zip(chosen, weights):
                q = f"{p}experts.{e}."
                gate = linear(h[t], self.w[q + names[0] + ".weight"])
                up = linear(h[t], self.w[q + names[1] + ".weight"])
                out[t] += wt * linear(silu(gate) * up, self.w[q + names[2] + ".weight"])
        if p + "shared_expert_gate.weight" in self.w:  # Qwen2-MoE: every token's shared expert, gated
            q = p + "shared_expert."
            for t in range(h.shape[0]):
                gate = linear(h[t], self.w[q + "gate_proj.weight"])
                up = linear(h[t], self.w[q + "up_proj.weight"])
                shared = linear(silu(gate) * up, self.w[q + "down_proj.weight"])
                logit = float(linear(h[t], self.w[p + "shared_expert_gate.weight"])[0])
                out[t] += shared / (1.0 + math.exp(-logit))
        return out

    def _split_fused(self):
        """Phi-3's qkv_proj and gate_up_proj into q/k/v and gate/up."""
        q_rows, kv_rows = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        for i in range(self.n_layers):
            p = f"model.layers.{i}."
            qkv = self.w.pop(p + "self_attn.qkv_proj.weight", None)
            if qkv is not None:
                assert qkv.shape[0] == q_rows + 2 * kv_rows, qkv.shape
                self.w[p + "self_attn.q_proj.weight"] = qkv[:q_rows]
                self.w[p + "self_attn.k_proj.weight"] = qkv[q_rows:q_rows + kv_rows]
                self.w[p + "self_attn.v_proj.weight"] = qkv[q_rows + kv_rows:]
            gate_up = self.w.pop(p + "mlp.gate_up_proj.weight", None)
            if gate_up is not None:
                half = gate_up.shape[0] // 2
                self.w[p + "mlp.gate_proj.weight"] = gate_up[:half]
                self.w[p + "mlp.up_proj.weight"] = gate_up[half:]

    def _sliding_layers(self, family):
        """(window, per-layer bools) from layer_types or the family's rule."""
        c = self.config
        n = self.n_layers
        default_window = 4096 if family in ("mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "qwen2_moe") else None
        default_window = 128 if family == "gpt_oss" else default_window
        window = c["sliding_window"] if "sliding_window" in c else default_window
        if not window:
            return None, [False] * n
        if "layer_types" in c:
            return window, [t == "sliding_attention" for t in c["layer_types"]]
        if family in ("mistral", "phi3"):
            return window, [True] * n
        if family in ("qwen2", "qwen3", "qwen2_moe"):
            use = c.get("use_sliding_window", False)
            first = c.get("max_window_layers", 28)
            return window, [use and i >= first for i in range(n)]
        if family in ("gemma2", "gpt_oss"):  # gpt-oss: GptOssConfig's default layer_types
            return window, [i % 2 == 0 for i in range(n)]
        if family == "gemma3_text":
            pattern = c.get("sliding_window_pattern", 6)
            return window, [(i + 1) % pattern != 0 for i in range(n)]
        return None, [False] * n

    def _inv_freq(self, base, scaling):
        """(rotary_dim / 2) rotation frequencies per dimension pair."""
        d = self.rotary_dim
        inv_freq = 1.0 / (base ** (np.arange(0, d, 2, dtype=np.float64) / d))
        if "rope_freqs" in self.w:  # GGUF: the converter's precomputed divisors
            return inv_freq / self.w["rope_freqs"].reshape(-1)
        scaling = scaling or {}
        kind = scaling.get("rope_type", scaling.get("type"))
        max_pos = self.config.get("max_position_embeddings", 2048)
        if kind == "yarn":
            return yarn_inv_freq(base, d, scaling, max_pos)
        if kind == "dynamic":
            if SERVED_CONTEXT > max_pos:
                f = scaling["factor"]
                base = base * (f * SERVED_CONTEXT / max_pos - (f - 1)) ** (d / (d - 2))
            return 1.0 / (base ** (np.arange(0, d, 2, dtype=np.float64) / d))
        if kind in ("longrope", "su"):
            original = scaling.get("original_max_position_embeddings",
                                   self.config.get("original_max_position_embeddings"))
            factors = scaling["long_factor"] if SERVED_CONTEXT > original else scaling["short_factor"]
            return inv_freq / np.asarray(factors, dtype=np.float64)
        if kind == "llama3":
            return llama3_inv_freq(inv_freq, scaling)
        if kind == "linear":
            return inv_freq / scaling["factor"]
        if kind not in (None, "default"):
            raise ValueError(f"{self.path}: rope_scaling type {kind} not implemented")
        return inv_freq

    def _rope_attention(self, scaling):
        """What the global layers' cos and sin are multiplied by (YaRN, LongRoPE)."""
        kind = scaling.get("rope_type", scaling.get("type"))
        if scaling.get("attention_factor"):
            return scaling["attention_factor"]
        if kind == "yarn":
            return 0.1 * math.log(scaling["factor"]) + 1.0 if scaling["factor"] > 1 else 1.0
        if kind in ("longrope", "su"):
            original = scaling.get("original_max_position_embeddings",
                                   self.config.get("original_max_position_embeddings"))
            factor = self.config.get("max_position_embeddings", 2048) / original
            return math.sqrt(1 + math.log(factor) / math.log(original)) if factor > 1 else 1.0
        return 1.0

    def norm(self, x, weight):
        return rms_norm(x, 1.0 + weight if self.gemma else weight, self.eps)

    def forward(self, tokens):
        """(n_tokens, vocab) float64 logits of a whole sequence from position 0."""
        w = self.w
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        self.route_gaps = np.full(n, np.inf)  # (n) per position: the smallest relative router gap
        x = w["model.embed_tokens.weight"][tokens]  # (n, hidden)
        if self.gemma:
            x = x * math.sqrt(self.hidden)
        positions = np.arange(n)
        cos, sin = rope_tables(self.inv_freq, positions)  # (n, head_dim) each
        rope_global = cos * self.rope_attention, sin * self.rope_attention
        # Gemma 3's local layers rotate with their own base, unscaled; other sliding layers as global ones
        rope_local = (rope_global if self.inv_freq_local is self.inv_freq
                      else rope_tables(self.inv_freq_local, positions))
        causal = np.triu(np.full((n, n), -np.inf), k=1)  # (n, n)
        if self.window:  # key j is out of query i's window when j <= i - window
            local_mask = causal + np.tril(np.full((n, n), -np.inf), k=-self.window)
        group = self.n_heads // self.n_kv_heads
        for i in range(self.n_layers):
            p = f"model.layers.{i}."
            sliding = self.sliding[i]
            cos, sin = rope_local if sliding else rope_global
            h = self.norm(x, w[p + "input_layernorm.weight"])
            q = linear(h, w[p + "self_attn.q_proj.weight"], w.get(p + "self_attn.q_proj.bias"))
            k = linear(h, w[p + "self_attn.k_proj.weight"], w.get(p + "self_attn.k_proj.bias"))
            v = linear(h, w[p + "self_attn.v_proj.weight"], w.get(p + "self_attn.v_proj.bias"))
            q = q.reshape(n, self.n_heads, self.head_dim).transpose(1, 0, 2)  # (heads, n, hd)
            k = k.reshape(n, self.n_kv_heads, self.head_dim).transpose(1, 0, 2)  # (kv, n, hd)
            v = v.reshape(n, self.n_kv_heads, self.head_dim).transpose(1, 0, 2)  # (kv, n, hd)
            if p + "self_attn.q_norm.weight" in w:  # Qwen3, Gemma 3: per-head RMSNorm before RoPE
                q = self.norm(q, w[p + "self_attn.q_norm.weight"])
                k = self.norm(k, w[p + "self_attn.k_norm.weight"])
            r = self.rotary_dim  # the dims past r pass through unturned
            q = np.concatenate([apply_rope(q[..., :r], cos, sin), q[..., r:]], axis=-1)
            k = np.concatenate([apply_rope(k[..., :r], cos, sin), k[..., r:]], axis=-1)
            k = np.repeat(k, group, axis=0)  # (heads, n, hd): query head h reads kv head h // group
            v = np.repeat(v, group, axis=0)
            scores = q @ k.transpose(0, 2, 1) * self.scaling  # (heads, n, n)
            if self.attn_cap:
                scores = self.attn_cap * np.tanh(scores / self.attn_cap)
            scores = scores + (local_mask if sliding else causal)
            sinks = w.get(p + "self_attn.sinks")  # gpt-oss: a logit per head in the softmax, with no value
            if sinks is not None:
                scores = np.concatenate([scores, np.broadcast_to(sinks[:, None, None], (self.n_heads, n, 1))], -1)
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            if sinks is not None:
                probs = probs[..., :-1]
            attn = (probs @ v).transpose(1, 0, 2).reshape(n, self.n_heads * self.head_dim)
            out = linear(attn, w[p + "self_attn.o_proj.weight"], w.get(p + "self_attn.o_proj.bias"))
            if self.gemma:
                x = x + self.norm(out, w[p + "post_attention_layernorm.weight"])
                h = self.norm(x, w[p + "pre_feedforward_layernorm.weight"])
            else:
                x = x + out
                h = self.norm(x, w[p + "post_attention_layernorm.weight"])
            if self.gpt_oss:
                out = self.gpt_oss_moe(h, i)
            elif self.moe[i]:
                out = self.moe_block(h, i)
            else:
                gate = linear(h, w[p + "mlp.gate_proj.weight"])
                up = linear(h, w[p + "mlp.up_proj.weight"])
                act = gelu_tanh(gate) if self.gemma else silu(gate)
                out = linear(act * up, w[p + "mlp.down_proj.weight"])
            if self.gemma:
                out = self.norm(out, w[p + "post_feedforward_layernorm.weight"])
            x = x + out
        x = self.norm(x, w["model.norm.weight"])
        logits = x @ self.lm_head.T  # (n, vocab)
        if self.final_cap:
            logits = self.final_cap * np.tanh(logits / self.final_cap)
        return logits

    def greedy(self, prompt, n_new):
        """Greedy continuation, re-running the whole grown sequence each step.
        Returns (new tokens, logits of prompt + new[:-1], smallest top-1/top-2 gap)."""
        seq = list(prompt)
        new = []
        min_gap = math.inf
        for _ in range(n_new):
            last = self.forward(seq)[-1]
            top2 = np.sort(last)[-2:]
            min_gap = min(min_gap, top2[1] - top2[0])
            token = int(np.argmax(last))
            new.append(token)
            seq.append(token)
        logits = self.forward(seq[:-1])
        return new, logits, min_gap, self.route_gaps.copy()


def rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def linear(x, weight, bias=None):
    y = x @ weight.T
    return y if bias is None else y + bias


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    """GELU, tanh approximation (Hendrycks & Gimpel 2016): gelu_pytorch_tanh."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def rope_tables(inv_freq, positions):
    """cos and sin of (n, head_dim) as Hugging Face builds them: the angles repeated
    for both halves, so dimension i pairs with i + head_dim/2."""
    angles = np.outer(positions.astype(np.float64), inv_freq)  # (n, head_dim/2)
    emb = np.concatenate([angles, angles], axis=-1)  # (n, head_dim)
    return np.cos(emb), np.sin(emb)


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def apply_rope(x, cos, sin):
    """x: (heads, n, head_dim)."""
    return x * cos + rotate_half(x) * sin


SERVED_CONTEXT = 1024  # tests/test_model_reference.c serves this context length
# GptOssConfig's rope_scaling when config.json has none
GPT_OSS_DEFAULT_YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                        "original_max_position_embeddings": 4096}


def yarn_inv_freq(base, d, scaling, max_pos):
    """YaRN's frequencies: extrapolated where a pair turns fast, interpolated where slow."""
    factor = scaling["factor"]
    old_context = scaling.get("original_max_position_embeddings") or max_pos
    beta_fast, beta_slow = scaling.get("beta_fast", 32), scaling.get("beta_slow", 1)

    def dim_turning(n_rotations):  # the pair index that turns n_rotations times over old_context
        return d * math.log(old_context / (n_rotations * 2 * math.pi)) / (2 * math.log(base))
    low, high = dim_turning(beta_fast), dim_turning(beta_slow)
    if scaling.get("truncate", True):  # transformers' _compute_yarn_parameters; gpt-oss says false
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    kept = 1.0 / (base ** (np.arange(0, d, 2, dtype=np.float64) / d))
    return kept / factor * ramp + kept * (1 - ramp)


def llama3_inv_freq(inv_freq, scaling):
    """transformers.modeling_rope_utils._compute_llama3_parameters."""
    factor = scaling["factor"]
    low_freq_factor = scaling["low_freq_factor"]
    high_freq_factor = scaling["high_freq_factor"]
    old_context_len = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(is_medium, smoothed, inv_freq_llama)


# --------------------------------------------------------------------------------------
# expected-output files


REF_MAGIC = b"CINFREF1"
MIN_GREEDY_GAP = 1e-3  # a smaller top-1/top-2 gap would make f32 argmax a coin toss


def write_ref(path, vocab, sequences):
    """sequences: list of (prompt, new tokens, logits (n_prompt + n_new - 1, vocab))."""
    with open(path, "wb") as f:
        f.write(REF_MAGIC)
        f.write(struct.pack("<II", vocab, len(sequences)))
        for prompt, new, logits in sequences:
            assert logits.shape == (len(prompt) + len(new) - 1, vocab)
            f.write(struct.pack("<II", len(prompt), len(new)))
            f.write(np.asarray(list(prompt) + list(new), dtype="<i4").tobytes())
            f.write(np.ascontiguousarray(logits, dtype="<f8").tobytes())


ROUTE_MAGIC = b"CINFRTE1"


def write_route(path, route_gaps):
    """Beside a mixture-of-experts model's .ref: per sequence, per logits row, the
    smallest over sparse layers of (k-th - (k+1)-th router logit) / |router logits| at
    that position. A row where rounding could move the router logits that far may pick
    other experts in lower precision (little-endian: magic, u32 n_seqs, per sequence
    u32 n_rows and f64 gaps[n_rows])."""
    with open(path, "wb") as f:
        f.write(ROUTE_MAGIC)
        f.write(struct.pack("<I", len(route_gaps)))
        for gaps in route_gaps:
            f.write(struct.pack("<I", len(gaps)))
            f.write(np.asarray(gaps, dtype="<f8").tobytes())


def expect_manifest(manifest_path):
    """Each line: name, model path, weight type, .ref path, n_new, prompts, family
    (tab-separated; prompts are comma-separated token ids separated by ';'). Models of
    one family hold the same weights, so its f32 files must agree with each other: that
    checks this reference's two routes (Hugging Face order with rotate_half and Llama 3
    scaling from config.json, versus GGUF un-permuted with rope_freqs) against each other."""
    base = os.path.dirname(os.path.abspath(manifest_path))
    with open(manifest_path) as f:
        lines = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    f32_logits = {}
    for name, model_path, wtype, ref_path, n_new, prompts, family in lines:
        model = Model(os.path.join(base, model_path))
        sequences = []
        gaps = []
        route = []
        for prompt_text in prompts.split(";"):
            prompt = [int(t) for t in prompt_text.split(",")]
            new, logits, gap, route_gaps = model.greedy(prompt, int(n_new))
            sequences.append((prompt, new, logits))
            gaps.append(gap)
            route.append(route_gaps)
        if wtype == "f32" and min(gaps) < MIN_GREEDY_GAP:
            raise SystemExit(f"{name}: greedy top-1/top-2 gap {min(gaps):.2e} < {MIN_GREEDY_GAP}: "
                             "pick another prompt seed so the argmax is not a coin toss")
        if wtype == "f32":
            logits = np.concatenate([seq[2] for seq in sequences])
            first = f32_logits.setdefault(family, (name, logits))
            diff = np.linalg.norm(logits - first[1]) / np.linalg.norm(first[1])
            if diff > 1e-6:  # rope_freqs is stored in f32: ~1e-9 apart, a mistake is O(1)
                raise SystemExit(f"{name} and {first[0]} hold the same f32 weights but their "
                                 f"reference logits differ by {diff:.2e} (relative)")
        write_ref(os.path.join(base, ref_path), model.vocab, sequences)
        if any(m is not None for m in model.moe):
            write_route(os.path.join(base, ref_path) + ".route", route)
        scale = float(np.abs(sequences[0][2]).mean())
        route = f", min router gap {model.min_route_gap:.3g}" if model.min_route_gap < math.inf else ""
        print(f"{name}: vocab {model.vocab}, greedy {sequences[0][1][:8]}..., "
              f"mean |logit| {scale:.2f}, min greedy gap {min(gaps):.3g}{route}")


def main(argv):
    if len(argv) >= 2 and argv[1] == "expect" and len(argv) == 3:
        expect_manifest(argv[2])
    elif len(argv) >= 2 and argv[1] == "info" and len(argv) == 3:
        m = Model(argv[2])
        print(json.dumps({k: v for k, v in m.config.items()}, indent=1, default=str))
    elif len(argv) == 4 and argv[1] == "logits":
        m = Model(argv[2])
        logits = m.forward([int(t) for t in argv[3].split(",")])
        for p, row in enumerate(logits):
            print(p, int(np.argmax(row)), float(np.linalg.norm(row)))
    else:
        print(__doc__.split("\n\nThe .ref format")[0], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
