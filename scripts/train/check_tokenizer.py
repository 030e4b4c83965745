#!/usr/bin/python3
"""Checks a tokenizer.json against Hugging Face's own tokenizers library: encodes every
held-out book (and a few awkward strings) with our Python encoder, then has
check_tokenizer_hf.js encode the same texts with the official library and compare.

  npm install --prefix .cache/train ./scripts/train   # once (or see docs/default-model.md)
  /usr/bin/python3 scripts/train/check_tokenizer.py models/default/tokenizer.json
"""

import json
import os
import subprocess
import sys
import tempfile

import bpe
import corpus

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

AWKWARD = [
    "Hello, world! It's 2026; they'll say: \"we've\" 3.14 -- ok?",
    "  leading spaces,\ttabs\n\n\nand   runs   of spaces  ",
    "caf\u00e9 na\u00efve \u00fcber \u4f60\u597d \U0001F600 emoji",
    "The end.<|endoftext|>A new beginning",
    "",
]


def main(argv):
    tok_path = argv[0] if argv else os.path.join(REPO, "models", "default", "tokenizer.json")
    node_modules = argv[1] if len(argv) > 1 else os.path.join(REPO, ".cache", "train",
                                                              "node_modules")
    tok = bpe.Tokenizer.load(tok_path)
    _, heldout = corpus.load_split()
    texts = [(name, text) for name, text in heldout]
    texts += [("awkward %d" % i, t) for i, t in enumerate(AWKWARD)]
    cases = []
    for name, text in texts:
        ids = tok.encode(text)
        if tok.decode(ids) != text:
            print("python round trip failed for %s" % name)
            return 1
        cases.append({"name": name, "text": text, "ids": ids})
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cases, f)
    env = dict(os.environ, NODE_PATH=node_modules)
    try:
        return subprocess.run(["node", os.path.join(HERE, "check_tokenizer_hf.js"), tok_path,
                               f.name], env=env).returncode
    finally:
        os.unlink(f.name)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
