"""The training loop: random windows of the training stream, AdamW, a cosine learning
rate over the wall-time budget, and checkpoints so an interruption is not fatal."""

import math
import os
import time

import numpy as np

import model


class AdamW:
    def __init__(self, params, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1):
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.weight_decay = weight_decay
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def step(self, params, grads, lr):
        self.t += 1
        bias1 = 1.0 - self.beta1 ** self.t
        bias2 = 1.0 - self.beta2 ** self.t
        for name, p in params.items():
            g = grads[name]
            m, v = self.m[name], self.v[name]
            m *= self.beta1
            m += (1.0 - self.beta1) * g
            v *= self.beta2
            v += (1.0 - self.beta2) * (g * g)
            if p.ndim >= 2:  # decay matrices, not the norm gains
                p *= 1.0 - lr * self.weight_decay
            p -= (lr / bias1) * m / (np.sqrt(v / bias2) + self.eps)


def learning_rate(step, progress, peak_lr, warmup_steps, min_ratio=0.1):
    """Linear warm-up over the first steps, then cosine decay to min_ratio * peak as
    progress (the fraction of the time budget spent) goes from 0 to 1."""
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return peak_lr * (min_ratio + (1.0 - min_ratio) * cosine)


def clip_gradients(grads, max_norm):
    norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads.values()))
    if norm > max_norm:
        for g in grads.values():
            g *= max_norm / norm
    return norm


def save_checkpoint(path, params, opt, state):
    tmp = path + ".tmp.npz"
    arrays = {"p/" + k: v for k, v in params.items()}
    arrays.update({"m/" + k: v for k, v in opt.m.items()})
    arrays.update({"v/" + k: v for k, v in opt.v.items()})
    arrays["state/step"] = np.array(state["step"])
    arrays["state/elapsed_s"] = np.array(state["elapsed_s"])
    arrays["state/tokens"] = np.array(state["tokens"])
    arrays["state/adam_t"] = np.array(opt.t)
    np.savez(tmp, **arrays)
    os.replace(tmp, path)  # never leave a half-written checkpoint behind


def load_checkpoint(path, params, opt):
    with np.load(path) as f:
        for k in params:
            params[k][...] = f["p/" + k]
            opt.m[k][...] = f["m/" + k]
            opt.v[k][...] = f["v/" + k]
        opt.t = int(f["state/adam_t"])
        return {"step": int(f["state/step"]), "elapsed_s": float(f["state/elapsed_s"]),
                "tokens": int(f["state/tokens"])}


def train(params, cfg, stream, args, eval_fn, log):
    """stream: 1-D int array of training ids. Runs until args.time_budget_min of training
    wall time (summed over resumed runs) is spent."""
    opt = AdamW(params, weight_decay=args.weight_decay)
    ckpt = os.path.join(args.work_dir, "checkpoint.npz")
    state = {"step": 0, "elapsed_s": 0.0, "tokens": 0}
    if args.resume and os.path.exists(ckpt):
        state = load_checkpoint(ckpt, params, opt)
        log("resumed from %s at step %d (%.1f min spent)"
            % (ckpt, state["step"], state["elapsed_s"] / 60))
    budget_s = args.time_budget_min * 60.0
    B, T = args.batch_size, args.seq_len
    last_save = time.time()
    while state["elapsed_s"] < budget_s:
        started = time.time()
        # Windows are drawn from a generator seeded by the step so a resumed run sees
        # the same batches it would have seen without the interruption.
        rng = np.random.default_rng((args.seed, state["step"]))
        starts = rng.integers(0, len(stream) - T - 1, size=B)
        window = np.stack([stream[s:s + T + 1] for s in starts])  # (B, T + 1)
        _, loss, cache = model.forward(params, cfg, window[:, :-1], window[:, 1:])
        grads = model.backward(params, cfg, cache)
        del cache
        grad_norm = clip_gradients(grads, args.grad_clip)
        lr = learning_rate(state["step"], state["elapsed_s"] / budget_s, args.lr,
                           args.warmup_steps)
        opt.step(params, grads, lr)
        state["step"] += 1
        state["tokens"] += B * T
        state["elapsed_s"] += time.time() - started
        if state["step"] % 10 == 0:
            log("step %5d  loss %.4f  lr %.2e  |g| %.2f  %.1f min  %.0f tok/s"
                % (state["step"], loss, lr, grad_norm, state["elapsed_s"] / 60,
                   B * T / (time.time() - started)))
        if args.eval_every and state["step"] % args.eval_every == 0:
            log("step %5d  held-out loss %.4f (first %d windows)"
                % (state["step"], eval_fn(params, 16), 16))
        if time.time() - last_save > args.checkpoint_every_s:
            save_checkpoint(ckpt, params, opt, state)
            last_save = time.time()
    save_checkpoint(ckpt, params, opt, state)
    return state
