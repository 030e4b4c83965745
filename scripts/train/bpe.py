"""Byte-level BPE in the GPT-2 style: training, encoding, decoding, tokenizer.json.

Text is split by the GPT-2 pre-tokenizer regex; each piece becomes its UTF-8 bytes,
each byte a printable unicode character (GPT-2's bytes_to_unicode map), and merges
learnt from pair counts join neighbouring symbols. Ids: 0-255 are the single bytes
in byte order, then one id per merge in the order learnt, then <|endoftext|> last.
"""

import collections
import json

import regex

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
END_OF_TEXT = "<|endoftext|>"

_pretokenizer = regex.compile(GPT2_PATTERN)


def bytes_to_unicode():
    """GPT-2's map from each byte to a printable character (so merges never hold spaces)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def pretokenize(text):
    return _pretokenizer.findall(text)


def _symbols(piece):
    return tuple(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))


def train(texts, vocab_size):
    """Learns merges from an iterable of texts; returns the list of merges (a, b)."""
    n_merges = vocab_size - 256 - 1  # 256 bytes and <|endoftext|>
    counts = collections.Counter()
    for text in texts:
        counts.update(pretokenize(text))
    words = [list(_symbols(piece)) for piece in counts]
    freq = list(counts.values())

    pair_count = collections.Counter()
    pair_words = collections.defaultdict(set)  # pair -> indices of words holding it
    for i, word in enumerate(words):
        for pair in zip(word, word[1:]):
            pair_count[pair] += freq[i]
            pair_words[pair].add(i)

    merges = []
    while len(merges) < n_merges and pair_count:
        # Highest count; ties broken by the pair itself so training is deterministic.
        best = max(pair_count.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if pair_count[best] < 2:
            break
        merges.append(best)
        joined = best[0] + best[1]
        for i in list(pair_words[best]):
            word = words[i]
            for pair in zip(word, word[1:]):
                pair_count[pair] -= freq[i]
                if pair_count[pair] <= 0:
                    del pair_count[pair]
                pair_words[pair].discard(i)
            merged = []
            j = 0
            while j < len(word):
                if j + 1 < len(word) and word[j] == best[0] and word[j + 1] == best[1]:
                    merged.append(joined)
                    j += 2
                else:
                    merged.append(word[j])
                    j += 1
            words[i] = merged
            for pair in zip(merged, merged[1:]):
                pair_count[pair] += freq[i]
                pair_words[pair].add(i)
        pair_words.pop(best, None)
    return merges


class Tokenizer:
    def __init__(self, merges):
        self.merges = [tuple(m) for m in merges]
        self.rank = {m: r for r, m in enumerate(self.merges)}
        self.vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
        for r, (a, b) in enumerate(self.merges):
            self.vocab[a + b] = 256 + r
        self.eos_id = len(self.vocab)
        self.vocab[END_OF_TEXT] = self.eos_id
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self._cache = {}

    @property
    def vocab_size(self):
        return len(self.vocab)

    def _bpe(self, piece):
        cached = self._cache.get(piece)
        if cached is not None:
            return cached
        word = list(_symbols(piece))
        while len(word) > 1:
            # Merge the lowest-ranked adjacent pair, leftmost first (as HF's BPE does).
            best_rank, best_at = None, -1
            for j in range(len(word) - 1):
                r = self.rank.get((word[j], word[j + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best_rank, best_at = r, j
            if best_rank is None:
                break
            word[best_at:best_at + 2] = [word[best_at] + word[best_at + 1]]
        ids = [self.vocab[s] for s in word]
        self._cache[piece] = ids
        return ids

    def encode(self, text):
        """Ids of text; <|endoftext|> in the text becomes the special id."""
        ids = []
        for k, part in enumerate(text.split(END_OF_TEXT)):
            if k:
                ids.append(self.eos_id)
            for piece in pretokenize(part):
                ids.extend(self._bpe(piece))
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            token = self.id_to_token[int(i)]
            if token == END_OF_TEXT:
                out += token.encode("utf-8")
            else:
                out += bytes(CHAR_TO_BYTE[c] for c in token)
        return out.decode("utf-8", errors="replace")

    def to_hf_json(self):
        """The Hugging Face tokenizers' tokenizer.json document."""
        byte_level = {"type": "ByteLevel", "add_prefix_space": False,
                      "trim_offsets": True, "use_regex": True}
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [{
                "id": self.eos_id, "content": END_OF_TEXT, "single_word": False,
                "lstrip": False, "rstrip": False, "normalized": False, "special": True,
            }],
            "normalizer": None,
            "pre_tokenizer": byte_level,
            "post_processor": dict(byte_level, trim_offsets=False),
            "decoder": byte_level,
            "model": {
                "type": "BPE", "dropout": None, "unk_token": None,
                "continuing_subword_prefix": None, "end_of_word_suffix": None,
                "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                "vocab": dict(sorted(self.vocab.items(), key=lambda kv: kv[1])),
                "merges": ["%s %s" % m for m in self.merges],
            },
        }

    def save(self, path):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_hf_json(), f, ensure_ascii=False, indent=1)
            f.write("\n")

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
                  for m in doc["model"]["merges"]]
        tok = cls(merges)
        if tok.vocab != doc["model"]["vocab"]:
            raise ValueError("%s: vocab does not follow this tokenizer's id layout" % path)
        return tok
