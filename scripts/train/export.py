"""Writes the trained model as a Hugging Face folder that cinfer (and transformers) load."""

import json
import os

import numpy as np

import safetensors_io


def write_json(path, doc):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False)
        f.write("\n")


def hf_config(cfg, eos_id):
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_position_embeddings,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": True,
        "bos_token_id": eos_id,
        "eos_token_id": eos_id,
        "initializer_range": 0.02,
        "torch_dtype": "float32",
        "use_cache": True,
    }


# The chat template is deliberately plain: the model never saw chat data, so the
# template only lays the turns out as text it can continue.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ 'Question: ' + message['content'] + '\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ 'Answer: ' + message['content'] + '<|endoftext|>' }}"
    "{% else %}{{ message['content'] + '\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Answer:' }}{% endif %}"
)


def write_model_folder(out_dir, cfg, params, tokenizer, max_new_tokens=64):
    os.makedirs(out_dir, exist_ok=True)
    eos = tokenizer.eos_id
    write_json(os.path.join(out_dir, "config.json"), hf_config(cfg, eos))
    write_json(os.path.join(out_dir, "generation_config.json"), {
        "bos_token_id": eos, "eos_token_id": eos, "do_sample": True,
        "temperature": 0.8, "top_k": 40, "max_new_tokens": max_new_tokens,
    })
    tokenizer.save(os.path.join(out_dir, "tokenizer.json"))
    write_json(os.path.join(out_dir, "tokenizer_config.json"), {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
        "unk_token": None, "pad_token": None,
        "add_bos_token": False, "add_eos_token": False,
        "model_max_length": cfg.max_position_embeddings,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {str(eos): {
            "content": "<|endoftext|>", "lstrip": False, "normalized": False,
            "rstrip": False, "single_word": False, "special": True}},
    })
    # Tied embeddings: lm_head.weight is not stored; loaders reuse embed_tokens.
    safetensors_io.save(os.path.join(out_dir, "model.safetensors"),
                        {k: np.asarray(v, dtype=np.float32) for k, v in params.items()},
                        metadata={"format": "pt"})
