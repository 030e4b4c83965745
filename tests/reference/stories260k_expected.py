#!/usr/bin/python3
"""Expected output of stories260K for tests/test_stories260k.c, computed without cinfer:
the prompt's ids by SentencePiece-BPE merging over the GGUF vocabulary (spm_tokenize.py),
then greedy decoding with the float64 numpy reference (model_reference.py). Fails unless
the decoded text equals the llama.cpp output quoted in the models README.

usage: stories260k_expected.py MODELS_DIR N_NEW OUT_FILE
OUT_FILE lines: prompt ids (BOS first), greedy ids, the decoded text — ids comma-separated.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_reference import Model  # noqa: E402
from spm_tokenize import SpmVocab  # noqa: E402

PROMPT = "Once upon a time"


def llama_cpp_text(readme_path):
    """The README quotes llama.cpp's output as the one 4-space-indented line after
    'writes:'."""
    with open(readme_path) as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith("writes:"):
            for quoted in lines[i + 1 :]:
                if quoted.startswith("    ") and quoted.strip():
                    return quoted.strip()
    raise SystemExit(f"{readme_path}: no indented llama.cpp output after a line ending in 'writes:'")


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    models_dir, n_new, out_path = argv[1], int(argv[2]), argv[3]
    model = Model(os.path.join(models_dir, "stories260K.gguf"))
    vocab = SpmVocab(model.gguf_metadata)
    prompt = vocab.encode(PROMPT, add_bos=True)
    new, _, gap, _ = model.greedy(prompt, n_new)
    text = vocab.decode(prompt + new)
    want = llama_cpp_text(os.path.join(models_dir, "README.md"))
    if text != want:
        raise SystemExit(f"numpy reference greedy text differs from llama.cpp's:\n  got  {text!r}\n"
                         f"  want {want!r}")
    with open(out_path, "w") as f:
        f.write(",".join(map(str, prompt)) + "\n")
        f.write(",".join(map(str, new)) + "\n")
        f.write(text + "\n")
    print(f"prompt ids {prompt}; {n_new} greedy ids match llama.cpp's text (min top-2 gap {gap:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
