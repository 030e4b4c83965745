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


def write_model_card(out_dir, report, command):
    """README.md of the folder: what the model is, its data and licence, its figures."""
    cfg = report["config"]
    model, unigram, training = report["model"], report["unigram"], report["training"]
    size_bytes = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
    samples = "\n".join(
        "- `%s` → greedy: %s\n  sampled (T 0.8, top-k 40): %s"
        % (s["prompt"], json.dumps(s["greedy"]), json.dumps([v for k, v in s.items()
                                                              if k.startswith("sampled")][0]))
        for s in report["samples"])
    text = """# cinfer default model (KJV Llama, %(params).1fM parameters)

The small model cinfer ships so that it runs with no download. It writes
King-James-style English; it knows nothing else and follows no instructions.

- Architecture: Llama (`LlamaForCausalLM`): %(layers)d layers, hidden %(hidden)d, MLP %(ff)d
  (SwiGLU), %(heads)d query heads and %(kv)d key/value heads of size %(hd)d, RoPE θ %(theta)g,
  RMSNorm ε %(eps)g, context %(ctx)d, tied input/output embeddings, float32.
- Tokenizer: byte-level BPE (GPT-2 pre-tokenizer and byte map), %(vocab)d ids: 256 bytes,
  %(merges)d merges, `<|endoftext|>` (id %(eos)d, also BOS/EOS). No BOS is added.
- Data: the King James Bible (1611/1769, public domain) from Debian's `bible-kjv-text`,
  read with `bible` from `bible-kjv`: one verse per line, chapters separated by a blank
  line, each book one document ending in `<|endoftext|>`. %(train_tokens)d training tokens.
  Held out (never trained on): %(held)s.
- Training: numpy only, hand-written backward pass, AdamW (β 0.9/0.95, weight decay
  0.1), peak learning rate with warm-up and a cosine decay over a %(budget)g-minute
  wall-time budget on a shared CPU: %(steps)d steps of %(batch)d × %(ctx)d tokens, %(tokens)d
  tokens (%(epochs).1f epochs), %(minutes).1f minutes.
- Size: %(size_mb).1f MB (weights, tokenizer and configs).

## Held-out figures (%(ho_tokens)d tokens, %(ho_bytes)d bytes)

| | perplexity per token | bits per byte |
| --- | --- | --- |
| this model | %(ppl).2f | %(bpb).3f |
| unigram baseline (training token frequencies) | %(uppl).2f | %(ubpb).3f |

## Samples (numpy forward, prompt then continuation)

%(samples)s

## Licence and reproduction

The text is in the public domain; the weights and tokenizer are released with cinfer
under its licence. Reproduce with:

    %(command)s

`reference_greedy.json` holds the greedy ids that cinfer's test
(tests/test_default_model.c) requires the C runtime to reproduce.
""" % {
        "params": report["parameters"] / 1e6, "layers": cfg["num_hidden_layers"],
        "hidden": cfg["hidden_size"], "ff": cfg["intermediate_size"],
        "heads": cfg["num_attention_heads"], "kv": cfg["num_key_value_heads"],
        "hd": cfg["hidden_size"] // cfg["num_attention_heads"], "theta": cfg["rope_theta"],
        "eps": cfg["rms_norm_eps"], "ctx": cfg["max_position_embeddings"],
        "vocab": cfg["vocab_size"], "merges": cfg["vocab_size"] - 257,
        "eos": cfg["vocab_size"] - 1, "train_tokens": report["train_tokens"],
        "held": ", ".join(report["heldout_books"]), "budget": training["time_budget_min"],
        "steps": training["step"], "batch": report["batch_size"], "tokens": training["tokens"],
        "epochs": training["epochs"], "minutes": training["elapsed_s"] / 60,
        "size_mb": size_bytes / 1e6, "ho_tokens": report["heldout_tokens_predicted"],
        "ho_bytes": report["heldout_bytes_predicted"],
        "ppl": model["perplexity_per_token"], "bpb": model["bits_per_byte"],
        "uppl": unigram["perplexity_per_token"], "ubpb": unigram["bits_per_byte"],
        "samples": samples, "command": command,
    }
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write(text)
