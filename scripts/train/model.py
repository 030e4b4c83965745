"""A Llama-architecture decoder in numpy with a hand-written backward pass.

Same maths as Hugging Face's LlamaForCausalLM, so the trained weights load there and
in cinfer unchanged: RMSNorm (weight * x / sqrt(mean(x^2) + eps)), RoPE applied with
rotate_half on the two halves of each head, grouped-query attention, SwiGLU MLP, no
biases, tied input/output embeddings. Parameters use the HF tensor names.

Shapes: B sequences, T positions, C hidden, H query heads, KV key/value heads,
G = H / KV query heads per key/value head, D head size, F MLP size, V vocabulary.
"""

import math

import numpy as np


class Config:
    def __init__(self, vocab_size, hidden_size=192, intermediate_size=512, num_hidden_layers=4,
                 num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=256,
                 rms_norm_eps=1e-5, rope_theta=10000.0):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.max_position_embeddings = max_position_embeddings
        self.rms_norm_eps = rms_norm_eps
        self.rope_theta = rope_theta
        if hidden_size % num_attention_heads or num_attention_heads % num_key_value_heads:
            raise ValueError("hidden_size must divide by heads, heads by key/value heads")

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads

    def to_dict(self):
        return dict(vars(self))


def layer_names(i):
    p = "model.layers.%d." % i
    return {
        "input_norm": p + "input_layernorm.weight",
        "q": p + "self_attn.q_proj.weight",
        "k": p + "self_attn.k_proj.weight",
        "v": p + "self_attn.v_proj.weight",
        "o": p + "self_attn.o_proj.weight",
        "post_norm": p + "post_attention_layernorm.weight",
        "gate": p + "mlp.gate_proj.weight",
        "up": p + "mlp.up_proj.weight",
        "down": p + "mlp.down_proj.weight",
    }


EMBED = "model.embed_tokens.weight"
FINAL_NORM = "model.norm.weight"


def init_params(cfg, rng, dtype=np.float32):
    """GPT-2 style init: N(0, 0.02), output projections scaled by 1/sqrt(2 * layers)."""
    C, F, D = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    H, KV = cfg.num_attention_heads, cfg.num_key_value_heads
    std, out_std = 0.02, 0.02 / math.sqrt(2 * cfg.num_hidden_layers)

    def normal(shape, s):
        return (rng.standard_normal(shape) * s).astype(dtype)

    params = {EMBED: normal((cfg.vocab_size, C), std)}
    for i in range(cfg.num_hidden_layers):
        n = layer_names(i)
        params[n["input_norm"]] = np.ones(C, dtype)
        params[n["q"]] = normal((H * D, C), std)
        params[n["k"]] = normal((KV * D, C), std)
        params[n["v"]] = normal((KV * D, C), std)
        params[n["o"]] = normal((C, H * D), out_std)
        params[n["post_norm"]] = np.ones(C, dtype)
        params[n["gate"]] = normal((F, C), std)
        params[n["up"]] = normal((F, C), std)
        params[n["down"]] = normal((C, F), out_std)
    params[FINAL_NORM] = np.ones(C, dtype)
    return params


def rope_tables(cfg, T, dtype):
    """cos, sin: (T, D), HF layout (the D/2 frequencies repeated for both halves)."""
    D = cfg.head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (np.arange(0, D, 2, dtype=np.float64) / D))
    angles = np.outer(np.arange(T, dtype=np.float64), inv_freq)  # (T, D/2)
    angles = np.concatenate([angles, angles], axis=-1)  # (T, D)
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def rotate_half_transposed(y):
    """The adjoint of rotate_half (rotate_half is a rotation by -90 degrees)."""
    half = y.shape[-1] // 2
    return np.concatenate([y[..., half:], -y[..., :half]], axis=-1)


def rms_norm(x, w, eps):
    inv_rms = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    normed = x * inv_rms
    return normed * w, (normed, inv_rms)


def rms_norm_backward(dy, w, cache):
    normed, inv_rms = cache
    dw = np.sum(dy * normed, axis=tuple(range(dy.ndim - 1)))
    dn = dy * w
    dx = inv_rms * (dn - normed * np.mean(dn * normed, axis=-1, keepdims=True))
    return dx, dw


def silu(x):
    return x / (1.0 + np.exp(-x))


def forward(params, cfg, ids, targets=None):
    """ids: (B, T) ints. Returns logits (B, T, V), and with targets (B, T) also the mean
    cross-entropy loss and the cache the backward pass needs."""
    B, T = ids.shape
    C, D = cfg.hidden_size, cfg.head_dim
    H, KV = cfg.num_attention_heads, cfg.num_key_value_heads
    G = H // KV
    eps = cfg.rms_norm_eps
    embed = params[EMBED]
    dtype = embed.dtype
    cos, sin = rope_tables(cfg, T, dtype)  # (T, D)
    causal = np.triu(np.full((T, T), -np.inf, dtype), k=1)  # (T, T)
    scale = 1.0 / math.sqrt(D)

    x = embed[ids]  # (B, T, C)
    layers = []
    for i in range(cfg.num_hidden_layers):
        n = layer_names(i)
        h, norm1 = rms_norm(x, params[n["input_norm"]], eps)  # (B, T, C)
        q = (h @ params[n["q"]].T).reshape(B, T, H, D).transpose(0, 2, 1, 3)  # (B, H, T, D)
        k = (h @ params[n["k"]].T).reshape(B, T, KV, D).transpose(0, 2, 1, 3)  # (B, KV, T, D)
        v = (h @ params[n["v"]].T).reshape(B, T, KV, D).transpose(0, 2, 1, 3)  # (B, KV, T, D)
        q_rot = q * cos + rotate_half(q) * sin
        k_rot = k * cos + rotate_half(k) * sin
        qg = q_rot.reshape(B, KV, G, T, D)  # query heads grouped by their key/value head
        kg = k_rot[:, :, None]  # (B, KV, 1, T, D)
        vg = v[:, :, None]  # (B, KV, 1, T, D)
        scores = (qg @ kg.swapaxes(-1, -2)) * scale + causal  # (B, KV, G, T, T)
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)  # (B, KV, G, T, T)
        attn = (probs @ vg).reshape(B, H, T, D).transpose(0, 2, 1, 3).reshape(B, T, H * D)
        x_mid = x + attn @ params[n["o"]].T  # (B, T, C)
        h2, norm2 = rms_norm(x_mid, params[n["post_norm"]], eps)  # (B, T, C)
        gate = h2 @ params[n["gate"]].T  # (B, T, F)
        up = h2 @ params[n["up"]].T  # (B, T, F)
        sig = 1.0 / (1.0 + np.exp(-gate))
        act = gate * sig * up  # (B, T, F)
        x_out = x_mid + act @ params[n["down"]].T  # (B, T, C)
        layers.append((h, norm1, qg, kg, vg, probs, attn, h2, norm2, gate, up, sig, act))
        x = x_out
    hf, norm_f = rms_norm(x, params[FINAL_NORM], eps)  # (B, T, C)
    logits = hf @ embed.T  # (B, T, V)
    if targets is None:
        return logits

    flat = logits.reshape(B * T, -1)
    shifted = flat - flat.max(axis=-1, keepdims=True)
    log_z = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    log_probs = shifted - log_z  # (B*T, V)
    tgt = targets.reshape(-1)
    loss = -float(np.mean(log_probs[np.arange(B * T), tgt]))
    cache = (ids, targets, cos, sin, layers, hf, norm_f, log_probs)
    return logits, loss, cache


def backward(params, cfg, cache):
    """Gradients of the mean cross-entropy loss for every parameter."""
    ids, targets, cos, sin, layers, hf, norm_f, log_probs = cache
    B, T = ids.shape
    C, D = cfg.hidden_size, cfg.head_dim
    H, KV = cfg.num_attention_heads, cfg.num_key_value_heads
    scale = 1.0 / math.sqrt(D)
    embed = params[EMBED]
    grads = {}

    dlogits = np.exp(log_probs)  # softmax, (B*T, V)
    dlogits[np.arange(B * T), targets.reshape(-1)] -= 1.0
    dlogits /= B * T
    hf_flat = hf.reshape(B * T, C)
    d_embed = dlogits.T @ hf_flat  # (V, C): output-side use of the tied embedding
    dhf = (dlogits @ embed).reshape(B, T, C)
    dx, grads[FINAL_NORM] = rms_norm_backward(dhf, params[FINAL_NORM], norm_f)

    for i in reversed(range(cfg.num_hidden_layers)):
        n = layer_names(i)
        h, norm1, qg, kg, vg, probs, attn, h2, norm2, gate, up, sig, act = layers[i]
        # MLP: x_out = x_mid + (silu(gate) * up) @ down^T
        grads[n["down"]] = _weight_grad(dx, act)
        dact = dx @ params[n["down"]]  # (B, T, F)
        silu_gate = gate * sig
        dup = dact * silu_gate
        dgate = dact * up * sig * (1.0 + gate * (1.0 - sig))
        grads[n["gate"]] = _weight_grad(dgate, h2)
        grads[n["up"]] = _weight_grad(dup, h2)
        dh2 = dgate @ params[n["gate"]] + dup @ params[n["up"]]
        dx_norm, grads[n["post_norm"]] = rms_norm_backward(dh2, params[n["post_norm"]], norm2)
        dx_mid = dx + dx_norm
        # Attention: x_mid = x + attn @ o^T
        grads[n["o"]] = _weight_grad(dx_mid, attn)
        dattn = (dx_mid @ params[n["o"]]).reshape(B, T, H, D).transpose(0, 2, 1, 3)
        dattn = dattn.reshape(qg.shape)  # (B, KV, G, T, D)
        dprobs = dattn @ vg.swapaxes(-1, -2)  # (B, KV, G, T, T)
        dv = (probs.swapaxes(-1, -2) @ dattn).sum(axis=2)  # (B, KV, T, D)
        dscores = probs * (dprobs - np.sum(dprobs * probs, axis=-1, keepdims=True)) * scale
        dq_rot = (dscores @ kg).reshape(B, H, T, D)
        dk_rot = (dscores.swapaxes(-1, -2) @ qg).sum(axis=2)  # (B, KV, T, D)
        dq = dq_rot * cos + rotate_half_transposed(dq_rot * sin)
        dk = dk_rot * cos + rotate_half_transposed(dk_rot * sin)
        dq = dq.transpose(0, 2, 1, 3).reshape(B, T, H * D)
        dk = dk.transpose(0, 2, 1, 3).reshape(B, T, KV * D)
        dv = dv.transpose(0, 2, 1, 3).reshape(B, T, KV * D)
        grads[n["q"]] = _weight_grad(dq, h)
        grads[n["k"]] = _weight_grad(dk, h)
        grads[n["v"]] = _weight_grad(dv, h)
        dh = dq @ params[n["q"]] + dk @ params[n["k"]] + dv @ params[n["v"]]
        dx_norm, grads[n["input_norm"]] = rms_norm_backward(dh, params[n["input_norm"]], norm1)
        dx = dx_mid + dx_norm

    # Input-side use of the tied embedding: scatter-add each position's gradient.
    flat_ids = ids.reshape(-1)
    order = np.argsort(flat_ids, kind="stable")
    sorted_ids = flat_ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    d_embed[sorted_ids[starts]] += np.add.reduceat(dx.reshape(B * T, C)[order], starts, axis=0)
    grads[EMBED] = d_embed
    return grads


def _weight_grad(dy, x):
    """For y = x @ W^T: dW = dy^T x summed over every leading position."""
    return dy.reshape(-1, dy.shape[-1]).T @ x.reshape(-1, x.shape[-1])


def gradient_check(seed=0, n_probes=6):
    """Compares backward() with central finite differences on a tiny float64 model.

    Returns the worst relative error over all parameters probed."""
    rng = np.random.default_rng(seed)
    cfg = Config(vocab_size=13, hidden_size=8, intermediate_size=12, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8)
    params = init_params(cfg, rng, dtype=np.float64)
    for name in params:  # move norms off 1.0 and make weights large enough to matter
        params[name] = params[name] + rng.standard_normal(params[name].shape) * 0.3
    ids = rng.integers(0, cfg.vocab_size, size=(2, 6))
    targets = rng.integers(0, cfg.vocab_size, size=(2, 6))
    ids[0, 3] = ids[0, 1]  # a repeated id exercises the embedding scatter-add
    _, _, cache = forward(params, cfg, ids, targets)
    grads = backward(params, cfg, cache)
    worst = 0.0
    step = 1e-6
    for name, p in params.items():
        flat = p.reshape(-1)
        g = grads[name].reshape(-1)
        for idx in rng.choice(flat.size, size=min(n_probes, flat.size), replace=False):
            saved = flat[idx]
            flat[idx] = saved + step
            loss_plus = forward(params, cfg, ids, targets)[1]
            flat[idx] = saved - step
            loss_minus = forward(params, cfg, ids, targets)[1]
            flat[idx] = saved
            numeric = (loss_plus - loss_minus) / (2 * step)
            err = abs(numeric - g[idx]) / max(1e-8, abs(numeric) + abs(g[idx]))
            worst = max(worst, err)
            if err > 1e-5:
                print("gradient check: %s[%d] analytic %.8g numeric %.8g rel err %.2e"
                      % (name, idx, g[idx], numeric, err))
    return worst
