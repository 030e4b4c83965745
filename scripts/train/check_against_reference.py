#!/usr/bin/python3
"""Cross-checks the exported folder with the project's independent numpy forward
(tests/reference/model_reference.py, written from the transformers semantics with its
own safetensors reader): the trainer's forward and it must give the same logits over
the reference prompt and its greedy continuation, and the same greedy ids.

  /usr/bin/python3 scripts/train/check_against_reference.py [models/default]
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))

import model  # noqa: E402
import model_reference  # noqa: E402
import safetensors_io  # noqa: E402


def main(argv):
    folder = argv[0] if argv else os.path.join(REPO, "models", "default")
    with open(os.path.join(folder, "config.json")) as f:
        hf = json.load(f)
    with open(os.path.join(folder, "reference_greedy.json")) as f:
        ref = json.load(f)
    cfg = model.Config(hf["vocab_size"], hf["hidden_size"], hf["intermediate_size"],
                       hf["num_hidden_layers"], hf["num_attention_heads"],
                       hf["num_key_value_heads"], hf["max_position_embeddings"],
                       hf["rms_norm_eps"], hf["rope_theta"])
    params = {k: v.astype(np.float64)
              for k, v in safetensors_io.load(os.path.join(folder, "model.safetensors")).items()}
    tokens = ref["prompt_ids"] + ref["greedy_ids"]
    ours = model.forward(params, cfg, np.array([tokens]))[0]  # (n, vocab)
    other = model_reference.Model(folder)
    theirs = other.forward(tokens)  # (n, vocab)
    max_diff = float(np.max(np.abs(ours - theirs)))
    scale = float(np.max(np.abs(theirs)))
    greedy, _, min_gap = other.greedy(ref["prompt_ids"], len(ref["greedy_ids"]))
    print("trainer forward vs tests/reference/model_reference.py over %d positions: "
          "max |logit difference| %.3g (logits up to %.3g)" % (len(tokens), max_diff, scale))
    print("greedy ids equal: %s (smallest top-1/top-2 gap %.3f)"
          % (greedy == ref["greedy_ids"], min_gap))
    return 0 if max_diff < 1e-9 * max(1.0, scale) and greedy == ref["greedy_ids"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
