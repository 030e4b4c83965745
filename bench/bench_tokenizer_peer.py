#!/usr/bin/python3
"""Peer of bench_tokenizer.c for the SentencePiece vocabulary: SentencePiece's own
encode throughput (Debian's python3-sentencepiece, C++ underneath) on one thread.

    /usr/bin/python3 bench_tokenizer_peer.py MODEL CORPUS_JSON MIN_SECONDS [MIN_STRING_BYTES]

Encodes every corpus string with EncodeAsIds, one after the other, one warm-up pass,
then whole passes until MIN_SECONDS have gone by (only strings of at least
MIN_STRING_BYTES when given); prints the same JSON line as
bench_tokenizer_peer.js (CPU time: time.process_time). (SentencePiece does not split out special-token text; the
corpus has little of it, so the work is the same to within a fraction of a percent.)
"""
import json
import sys
import time

import sentencepiece


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    model, corpus_path, min_seconds = argv[0], argv[1], float(argv[2])
    sp = sentencepiece.SentencePieceProcessor()
    sp.Load(model)
    with open(corpus_path, encoding="utf-8") as f:
        strings = json.load(f)["strings"]
    min_string_bytes = int(argv[3]) if len(argv) == 4 else 0
    strings = [s for s in strings if len(s.encode("utf-8")) >= min_string_bytes]
    n_bytes = sum(len(s.encode("utf-8")) for s in strings)

    def one_pass():
        return sum(len(sp.EncodeAsIds(s)) for s in strings)

    one_pass()  # warm-up
    passes = tokens = 0
    start = time.perf_counter()
    cpu_start = time.process_time()
    while True:
        tokens += one_pass()
        passes += 1
        seconds = time.perf_counter() - start
        if seconds >= min_seconds:
            break
    cpu_seconds = time.process_time() - cpu_start
    print(json.dumps({"bytes": n_bytes, "passes": passes, "seconds": seconds, "cpu_seconds": cpu_seconds,
                      "tokens": tokens, "mb_per_s": n_bytes * passes / seconds / 1e6,
                      "mb_per_cpu_s": n_bytes * passes / cpu_seconds / 1e6}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
