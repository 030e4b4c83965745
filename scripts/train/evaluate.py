"""Held-out perplexity of the model and of a unigram baseline, and text generation."""

import math

import numpy as np

import model


def heldout_windows(stream, seq_len):
    """Non-overlapping windows (N, seq_len + 1) covering the held-out stream; every
    token but each window's first is predicted once."""
    n = (len(stream) - 1) // seq_len
    return np.stack([stream[i * seq_len:i * seq_len + seq_len + 1] for i in range(n)])


def model_nll(params, cfg, windows, max_windows=None, batch=8):
    """Mean negative log-likelihood (nats per token) over the windows."""
    if max_windows:
        windows = windows[:max_windows]
    total, count = 0.0, 0
    for i in range(0, len(windows), batch):
        w = windows[i:i + batch]
        _, loss, _ = model.forward(params, cfg, w[:, :-1], w[:, 1:])
        total += loss * w[:, 1:].size
        count += w[:, 1:].size
    return total / count


def unigram_nll(train_stream, windows, vocab_size):
    """Mean NLL (nats per token) of the predicted held-out tokens under token
    frequencies counted on the training stream (add-one smoothing)."""
    counts = np.bincount(train_stream, minlength=vocab_size).astype(np.float64) + 1.0
    log_p = np.log(counts / counts.sum())
    return -float(np.mean(log_p[windows[:, 1:].reshape(-1)]))


def generate(params, cfg, prompt_ids, n_new, temperature=0.0, top_k=0, seed=0):
    """Greedy (temperature 0) or sampled continuation, recomputing the full forward
    each step (fine for a few hundred tokens)."""
    rng = np.random.default_rng(seed)
    ids = list(prompt_ids)
    for _ in range(n_new):
        context = np.array([ids[-cfg.max_position_embeddings:]])
        logits = model.forward(params, cfg, context)[0, -1].astype(np.float64)  # (V,)
        if temperature <= 0.0:
            ids.append(int(np.argmax(logits)))
            continue
        logits = logits / temperature
        if top_k:
            cutoff = np.sort(logits)[-top_k]
            logits = np.where(logits < cutoff, -np.inf, logits)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        ids.append(int(rng.choice(len(p), p=p)))
    return ids[len(prompt_ids):]


def perplexity_report(nll_per_token, n_tokens, n_bytes):
    """Perplexity per token, and bits per byte (tokenizer-independent)."""
    return {"nll_per_token": nll_per_token, "perplexity_per_token": math.exp(nll_per_token),
            "bits_per_byte": nll_per_token * n_tokens / n_bytes / math.log(2)}
