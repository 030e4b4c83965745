#!/usr/bin/python3
"""SentencePiece-BPE tokenization by merge scores, from a GGUF file's embedded
vocabulary (tokenizer.ggml.tokens / scores), as llama.cpp's llm_tokenizer_spm does it:

1. prepend a space (add_space_prefix, on unless the GGUF says otherwise) and write every
   space as U+2581 "▁";
2. start from one symbol per UTF-8 character and queue every adjacent pair that is a
   vocabulary entry, keyed by that entry's score (highest first, leftmost on ties);
3. merge the best pair, skipping queue entries whose symbols already changed, and queue
   the new neighbours, until the queue is empty;
4. emit each final symbol as its token; a symbol that is not in the vocabulary is split
   back along the merges that made it, and what still is not a token falls back to
   byte tokens "<0xXX>".

Used by the stories260K check to derive the prompt's ids independently of the C
tokenizer plugin, and to turn greedy ids back into text.
"""

import heapq
import sys

SPACE_MARK = "\u2581"


class SpmVocab:
    def __init__(self, metadata):
        self.tokens = list(metadata["tokenizer.ggml.tokens"])
        self.scores = [float(s) for s in metadata["tokenizer.ggml.scores"]]
        self.types = [int(t) for t in metadata.get("tokenizer.ggml.token_type", [1] * len(self.tokens))]
        self.ids = {}
        for i, t in enumerate(self.tokens):
            self.ids.setdefault(t, i)
        self.bos_id = int(metadata.get("tokenizer.ggml.bos_token_id", 1))
        self.add_space_prefix = bool(metadata.get("tokenizer.ggml.add_space_prefix", True))

    def byte_token(self, byte):
        return self.ids[f"<0x{byte:02X}>"]

    def encode(self, text, add_bos=True):
        ids = [self.bos_id] if add_bos else []
        if self.add_space_prefix:
            text = " " + text
        text = text.replace(" ", SPACE_MARK)
        if text:
            ids += self._merge(text)
        return ids

    def _merge(self, text):
        # symbols: [text, prev, next]; a merged-away symbol has text ""
        chars = list(text)
        symbols = [[c, i - 1, i + 1 if i + 1 < len(chars) else -1] for i, c in enumerate(chars)]
        queue = []
        rev_merge = {}
        order = 0

        def try_add_pair(left, right):
            nonlocal order
            if left == -1 or right == -1:
                return
            joined = symbols[left][0] + symbols[right][0]
            token = self.ids.get(joined)
            if token is None:
                return
            order += 1
            heapq.heappush(queue, (-self.scores[token], left, order, right, joined))
            rev_merge[joined] = (left, right, symbols[left][0], symbols[right][0])

        for i in range(1, len(symbols)):
            try_add_pair(i - 1, i)
        while queue:
            _, left, _, right, joined = heapq.heappop(queue)
            lsym, rsym = symbols[left], symbols[right]
            if not lsym[0] or not rsym[0] or lsym[0] + rsym[0] != joined:
                continue  # one side already merged into something else
            lsym[0] = joined
            rsym[0] = ""
            lsym[2] = rsym[2]
            if rsym[2] >= 0:
                symbols[rsym[2]][1] = left
            try_add_pair(lsym[1], left)
            try_add_pair(left, lsym[2])

        out = []
        i = 0
        while i != -1:
            self._resegment(symbols[i][0], rev_merge, out)
            i = symbols[i][2]
        return out

    def _resegment(self, text, rev_merge, out):
        token = self.ids.get(text)
        if token is not None:
            out.append(token)
            return
        parts = rev_merge.get(text)
        if parts is None:
            out.extend(self.byte_token(b) for b in text.encode("utf-8"))
            return
        self._resegment(parts[2], rev_merge, out)
        self._resegment(parts[3], rev_merge, out)

    def decode(self, ids):
        """Text of ids: control tokens dropped, byte tokens joined into UTF-8, "▁" read as
        a space, and the space the prefix rule put first removed again."""
        raw = bytearray()
        for i in ids:
            piece = self.tokens[i]
            kind = self.types[i]
            if kind == 3:  # control (BOS/EOS)
                continue
            if kind == 6 and piece.startswith("<0x") and piece.endswith(">"):
                raw.append(int(piece[3:-1], 16))
            else:
                raw += piece.replace(SPACE_MARK, " ").encode("utf-8")
        text = raw.decode("utf-8", errors="replace")
        if self.add_space_prefix and text.startswith(" "):
            text = text[1:]
        return text


def main(argv):
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from model_reference import GGUFReader

    if len(argv) != 3:
        print("usage: spm_tokenize.py FILE.gguf TEXT", file=sys.stderr)
        return 2
    vocab = SpmVocab(GGUFReader(argv[1]).metadata)
    ids = vocab.encode(argv[2])
    print(",".join(str(i) for i in ids))
    print(" ".join(repr(vocab.tokens[i]) for i in ids))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
