#!/usr/bin/python3
"""Expected ids for a Llama-2-style (SentencePiece BPE) vocabulary, from SentencePiece itself.

    /usr/bin/python3 spm_reference.py MODEL GGUF CORPUS_JSON OUT_JSON

MODEL is the SentencePiece .model; GGUF is the vocabulary-only file that
tools/spm_to_gguf.py made from it (the path cinfer opens, written into OUT_JSON). The
output has the layout of reference_ids.js's files ("tokenizer": "llama2-spm").

Encoding follows llama.cpp with special-token parsing on, which is also what Hugging
Face's tokenizers do with added special tokens: the text is split at the control and
unknown pieces' text (<s>, </s>, <unk>), which become their ids; every other fragment is
encoded by SentencePiece, with the dummy-prefix space only when the fragment starts the
text or follows a special token (llama.cpp's is_prev_special rule; SentencePiece gets a
copy of the model with add_dummy_prefix off for the other fragments). ids_special puts
BOS first (add_bos_token true, add_eos_token false).

Decoding: decoded_skip is SentencePiece's own decode of the ids without control/unknown
ids. decoded keeps them as their text: pieces concatenated, "▁" read as a space, byte
pieces <0xXX> as bytes, then one leading space dropped when the first id is an ordinary
piece (the dummy prefix), as llama.cpp and the tokenizers' Strip decoder do; it is
checked against SentencePiece's decode on every case without special ids.

Splits (where a prompt's text ends in the whole text, for the detokenizer's output after
a prompt) are as reference_ids.js writes them, [k, bytes, is_prefix] per split point,
except where decode(ids[:k]) is not a prefix of decode(ids): there bytes is -1 (no
expectation). That happens where the prompt ends inside a character spelled by byte
pieces, and SentencePiece replaces such a run by one U+FFFD per invalid subsequence where
Hugging Face's ByteFallback decoder (which the plugin follows) gives one per byte, so the
two libraries disagree on the prompt's text there.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from spm_to_gguf import with_add_dummy_prefix  # noqa: E402


class SpmReference:
    def __init__(self, model_path):
        import sentencepiece

        with open(model_path, "rb") as f:
            model = f.read()
        self.sp = sentencepiece.SentencePieceProcessor()
        self.sp.LoadFromSerializedProto(model)
        self.sp_no_prefix = sentencepiece.SentencePieceProcessor()
        self.sp_no_prefix.LoadFromSerializedProto(with_add_dummy_prefix(model, False))
        n = self.sp.GetPieceSize()
        self.special = {self.sp.IdToPiece(i): i for i in range(n)
                        if self.sp.IsControl(i) or self.sp.IsUnknown(i)}
        self.special_ids = set(self.special.values())
        longest_first = sorted(self.special, key=len, reverse=True)
        self.splitter = re.compile("(" + "|".join(re.escape(t) for t in longest_first) + ")")

    def encode(self, text, add_bos):
        ids = [self.sp.bos_id()] if add_bos else []
        prev_special = True
        for part in self.splitter.split(text):
            if part == "":
                continue
            if part in self.special:
                ids.append(self.special[part])
                prev_special = True
                continue
            sp = self.sp if prev_special else self.sp_no_prefix
            ids.extend(sp.EncodeAsIds(part))
            prev_special = False
        return ids

    def decode_keep_special(self, ids):
        out = bytearray()
        for i in ids:
            piece = self.sp.IdToPiece(i)
            if i in self.special_ids:
                out += piece.encode("utf-8")
            elif self.sp.IsByte(i):
                out.append(int(piece[3:5], 16))
            else:
                out += piece.replace("\u2581", " ").encode("utf-8")
        if ids and ids[0] not in self.special_ids and out[:1] == b" ":
            del out[:1]
        return out.decode("utf-8", errors="replace")

    def decode_skip_special(self, ids):
        return self.sp.DecodeIds([i for i in ids if i not in self.special_ids])


SPLITS_PER_CASE = 16


def split_points(n):
    """Every split of a short sequence; of a longer one the first and last three and ten
    spread between (reference_ids.js's splitPoints)."""
    if n - 1 <= SPLITS_PER_CASE:
        return list(range(1, n))
    points = {1, 2, 3, n - 3, n - 2, n - 1}
    for j in range(1, SPLITS_PER_CASE - 5):
        points.add(3 + (j * (n - 6)) // (SPLITS_PER_CASE - 5))
    return sorted(points)


def splits(decode, ids, whole, points=None):
    """[k, bytes, is_prefix]: the UTF-8 bytes decode(ids[:k]) shares with whole, in whole
    characters, and whether that is all of it."""
    out = []
    for k in split_points(len(ids)) if points is None else points:
        prefix = decode(ids[:k])
        i = 0
        n = min(len(prefix), len(whole))
        while i < n and prefix[i] == whole[i]:
            i += 1
        is_prefix = i == len(prefix)
        out.append([k, len(prefix[:i].encode("utf-8")) if is_prefix else -1, int(is_prefix)])
    return out


def with_splits(ref, case, ids, ids_skip):
    case["splits"] = splits(ref.decode_keep_special, ids, case["decoded"])
    case["splits_skip"] = splits(ref.decode_skip_special, ids_skip, case["decoded_skip"])
    return case


BOUNDARY_PROMPTS = ["The cat", "Once upon a time", "naïve café", "日本語", "x = f(1"]
BOUNDARY_OUTPUTS = ["and the dog ran", " and the dog ran", "\u00e9t\u00e9 🚀"]
BOUNDARY_SPECIAL_RUNS = [1, 8, 24, 31]


def boundary_cases(ref):
    """Prompts whose last ids are special tokens (1 to 31, fewer than the 32 prompt ids
    the detokenizer gets), then an output that starts a word."""
    special = sorted(ref.special_ids)
    cases = []
    for prompt in BOUNDARY_PROMPTS:
        for output in BOUNDARY_OUTPUTS:
            for run in BOUNDARY_SPECIAL_RUNS:
                ids = ref.encode(prompt, add_bos=False)
                ids += [special[(i * 7) % len(special)] for i in range(run)]
                ids += ref.sp.EncodeAsIds(output)
                case = {"ids": ids, "decoded": ref.decode_keep_special(ids),
                        "decoded_skip": ref.decode_skip_special(ids)}
                cases.append(with_splits(ref, case, ids, ids))
    return cases


def random_decode_cases(ref, n=300, seed=2581):
    """Decoding ids no encoder would make: random sequences of ordinary pieces and special
    ids. Byte pieces are left out: where a run of them is not valid UTF-8, SentencePiece
    replaces each invalid subsequence with one U+FFFD while Hugging Face's ByteFallback
    decoder (which the plugin follows, see its Mistral results) replaces every byte of
    the run; the two references would disagree, so neither is asserted here."""
    import random
    rng = random.Random(seed)
    size = ref.sp.GetPieceSize()
    ordinary = [i for i in range(size) if not ref.sp.IsByte(i) and i not in ref.special_ids]
    special = sorted(ref.special_ids)
    cases = []
    for _ in range(n):
        ids = [rng.choice(special) if rng.random() < 0.1 else rng.choice(ordinary)
               for _ in range(rng.randint(1, 24))]
        decoded = ref.decode_keep_special(ids)
        if not ref.special_ids.intersection(ids) and decoded != ref.sp.DecodeIds(ids):
            raise SystemExit(f"spm_reference: piece-wise decode disagrees with SentencePiece on ids {ids}")
        case = {"ids": ids, "decoded": decoded, "decoded_skip": ref.decode_skip_special(ids)}
        cases.append(with_splits(ref, case, ids, ids))
    return cases


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    model_path, gguf_path, corpus_path, out_path = argv
    ref = SpmReference(model_path)
    with open(corpus_path, encoding="utf-8") as f:
        corpus = json.load(f)
    inputs = [({"text": s}, s) for s in corpus["strings"]]
    inputs += [({"hex": h}, bytes.fromhex(h).decode("utf-8", errors="replace"))
               for h in corpus["invalid_utf8_hex"]]
    cases = []
    roundtrips = 0
    for given, text in inputs:
        ids = ref.encode(text, add_bos=False)
        ids_special = ref.encode(text, add_bos=True)
        decoded = ref.decode_keep_special(ids)
        if not ref.special_ids.intersection(ids) and decoded != ref.sp.DecodeIds(ids):
            raise SystemExit(f"spm_reference: piece-wise decode disagrees with SentencePiece on {text!r}: "
                             f"{decoded!r} vs {ref.sp.DecodeIds(ids)!r}")
        case = dict(given, ids=ids, ids_special=ids_special, decoded=decoded,
                    decoded_skip=ref.decode_skip_special(ids_special), roundtrip=decoded == text)
        if not case["roundtrip"]:
            case["why_no_roundtrip"] = (
                "special-token text: the decoder spaces around it" if ref.splitter.search(text)
                else "input holds U+2581, the tokenizer's own space mark" if "\u2581" in text
                else "other")
        roundtrips += case["roundtrip"]
        cases.append(with_splits(ref, case, ids, ids_special))
    import sentencepiece
    out = {"tokenizer": "llama2-spm", "path": os.path.abspath(gguf_path),
           "library": f"sentencepiece {sentencepiece.__version__} (python)", "cases": cases,
           "decode_cases": random_decode_cases(ref), "boundary_cases": boundary_cases(ref)}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    print(f"spm_reference: llama2-spm: {len(cases)} cases, {roundtrips} round-trip through decode")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
