#!/usr/bin/python3
"""Writes the two small tokenizer.json files of tests/data/tokenizers that exercise what the
real tokenizers do not: Metaspace prepend_scheme first, unk fusing, lstrip/rstrip/
single_word added tokens, RoBERTa post-processing, every Split behavior, a normalizer
sequence, a normalized added token, a tokenizer_config.json override, no decoder, Strip decoders."""
import json
import os
D = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'tests', 'data', 'tokenizers') + '/'
def tok(id, content, special, lstrip=False, rstrip=False, single_word=False, normalized=False):
    return {"id": id, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}
# 1. SentencePiece-style pieces, Metaspace "first", unk fusing, added-token flags, RoBERTa post-processor
vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "\u2581": 3, "a": 4, "b": 5, "c": 6, "\u2581a": 7, "ab": 8,
         "\u2581ab": 9, "abc": 10, "d": 11, "<mask>": 12, "cab": 13, "\u2581c": 14}
t1 = {"version": "1.0", "truncation": None, "padding": None,
      "added_tokens": [tok(0, "<unk>", True), tok(1, "<s>", True), tok(2, "</s>", True),
                       tok(12, "<mask>", True, lstrip=True), tok(13, "cab", False, rstrip=True, single_word=True)],
      "normalizer": None,
      "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
      "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1],
                         "trim_offsets": True, "add_prefix_space": True},
      "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
      "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": False, "ignore_merges": False,
                "vocab": vocab, "merges": [["a", "b"], ["\u2581", "a"], ["\u2581", "ab"], ["ab", "c"], ["\u2581", "c"]]}}
json.dump(t1, open(D + 'tiny-metaspace/tokenizer.json', 'w'), ensure_ascii=False, indent=1)
# 1b. the same without a decoder: the library joins the pieces with spaces
os.makedirs(D + 'tiny-nodecoder', exist_ok=True)
json.dump(dict(t1, decoder=None), open(D + 'tiny-nodecoder/tokenizer.json', 'w'), ensure_ascii=False, indent=1)
# 1c. the same with Strip per token (before Fuse) and on the fused text (the library panics
#     on a stop longer than the text or a token stripped from both ends, so neither happens here)
os.makedirs(D + 'tiny-strip', exist_ok=True)
strip_decoder = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "Strip", "content": "b", "start": 0, "stop": 1},
    {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 2, "stop": 0}]}
json.dump(dict(t1, decoder=strip_decoder), open(D + 'tiny-strip/tokenizer.json', 'w'), ensure_ascii=False, indent=1)
# 2. byte-level with every Split behavior, a normalizer sequence, a normalized added token,
#    a template post-processor and a tokenizer_config.json that overrides it
def bytes_to_unicode():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return dict(zip(bs, map(chr, cs)))
alpha = bytes_to_unicode()
v2 = {}
for b in range(256):
    v2[alpha[b]] = len(v2)
merges = [("\u0120", "t"), ("h", "e"), ("\u0120t", "he"), ("1", "2"), ("12", "3"), ("-", "-"), ("e", "r")]
for a, b in merges:
    v2[a + b] = len(v2)
v2["<s>"] = len(v2); v2["</s>"] = len(v2); v2["hello"] = len(v2)
t2 = {"version": "1.0", "truncation": None, "padding": None,
      "added_tokens": [tok(v2["<s>"], "<s>", True), tok(v2["</s>"], "</s>", True),
                       tok(v2["hello"], "hello", False, normalized=True)],
      "normalizer": {"type": "Sequence", "normalizers": [
          {"type": "NFKC"}, {"type": "Lowercase"},
          {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
          {"type": "Digits", "individual_digits": True},
          {"type": "Split", "pattern": {"String": ","}, "behavior": "Removed", "invert": False},
          {"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithPrevious", "invert": False},
          {"type": "Split", "pattern": {"Regex": "\\d"}, "behavior": "Contiguous", "invert": False},
          {"type": "Split", "pattern": {"String": "."}, "behavior": "MergedWithNext", "invert": False},
          {"type": "Split", "pattern": {"Regex": "[a-z]+"}, "behavior": "Isolated", "invert": True},
          {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": False}]},
      "post_processor": {"type": "TemplateProcessing",
                         "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                         "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                         "special_tokens": {"<s>": {"id": "<s>", "ids": [v2["<s>"]], "tokens": ["<s>"]},
                                            "</s>": {"id": "</s>", "ids": [v2["</s>"]], "tokens": ["</s>"]}}},
      "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
      "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                "vocab": v2, "merges": [a + " " + b for a, b in merges]}}
json.dump(t2, open(D + 'tiny-split/tokenizer.json', 'w'), ensure_ascii=False, indent=1)
json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": {"content": "</s>"},
           "model_max_length": 1000000000000000019884624838656,
           "chat_template": [{"name": "default", "template": "{{ messages }}"}, {"name": "tool_use", "template": "x"}]},
          open(D + 'tiny-split/tokenizer_config.json', 'w'), indent=1)
