#!/usr/bin/python3
"""Reads llama.cpp's src/llama-vocab.cpp and writes, as JSON, every tokenizer.ggml.pre tag
its loader accepts for byte-level BPE vocabularies with what the tag means there:

  - the split regexes, applied one after another (each splits the pieces the previous
    left, keeping matches and the text between them: Hugging Face's Split with
    "isolated" behavior). Where llama.cpp rewrote a Hugging Face regex for its own regex
    engine and kept the original in a comment ("original regex from tokenizer.json"),
    the original is taken: it is what the model's tokenizer does, and what PCRE2 runs;
  - ignore_merges (a whole pre-token found in the vocabulary is one token) and add_bos
    (the default when the file has no tokenizer.ggml.add_bos_token);
  - byte_level false for the types that do not use GPT-2's byte encoding, and custom
    true for the types llama.cpp implements with code rather than regexes.

usage: extract_llama_pre_tags.py LLAMA_VOCAB_CPP OUT_JSON [COMMIT]
The output is committed as tests/data/tokenizers/llama_cpp_pre_tags.json; cinfer's table
(plugins/tokenizer-bpe/tok_pre_tags.c) is checked against it by test_tokenizer_tags.
"""
import json
import re
import sys


def c_string(lit):
    """The bytes of a C string literal's body (between the quotes) as text."""
    out = bytearray()
    raw = lit.encode("utf-8")
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == 0x5C:  # backslash
            n = raw[i + 1]
            out += {ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t", ord("\\"): b"\\", ord('"'): b'"',
                    ord("'"): b"'"}.get(n, bytes([0x5C, n]))
            i += 2
        else:
            out.append(c)
            i += 1
    return out.decode("utf-8")


LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def regex_sets(src):
    """pre_type -> [regexes], from llm_tokenizer_bpe's constructor switch."""
    start = src.index("struct llm_tokenizer_bpe : llm_tokenizer {")
    body = src[start:src.index("std::vector<std::string> regex_exprs;", start)]
    sets, byte_level = {}, {}
    pending = []
    for block in re.split(r"\n\s*break;", body):
        cases = re.findall(r"case (LLAMA_VOCAB_PRE_TYPE_\w+):", block)
        if "default:" in block:
            cases.append("LLAMA_VOCAB_PRE_TYPE_DEFAULT")
        if not cases:
            continue
        m = re.search(r"regex_exprs = \{(.*?)\n\s*\};", block, re.S)
        regexes = []
        original = None
        # comments before regex_exprs (tekken keeps its original there) and inside it
        lines = block[:m.start()].splitlines()[-4:] + m.group(1).splitlines() if m else []
        for line in lines:
            s = line.strip()
            if s.startswith("//"):
                lits = LITERAL.findall(s)
                if "original regex from tokenizer.json" in s and lits:
                    original = c_string(lits[0])
                elif "original regex from tokenizer.json" in s:
                    original = ""  # on the next comment line
                elif original == "" and lits:
                    original = c_string(lits[0])
                continue
            lits = LITERAL.findall(s)
            if not lits:
                continue
            adapted = "".join(c_string(x) for x in lits)
            regexes.append(original if original else adapted)
            original = None
        for c in pending + cases:
            sets[c] = regexes
            byte_level[c] = "byte_encode = false" not in block
        pending = []
    return sets, byte_level


def tags(src):
    """tag -> (pre_type, flags) from the loader's if/else chain."""
    start = src.index('} else if (tokenizer_pre == "default") {')
    end = src.index("unknown pre-tokenizer type", start)
    chain = src[start:end]
    out = {}
    for arm in re.split(r"\}\s*else if\s*\(", chain):
        names = re.findall(r'tokenizer_pre == "([^"]+)"', arm)
        m = re.search(r"pre_type = (LLAMA_VOCAB_PRE_TYPE_\w+);", arm)
        if not names or not m:
            continue
        flags = {"ignore_merges": "ignore_merges = true" in arm, "add_bos": "add_bos = true" in arm}
        for n in names:
            out[n] = (m.group(1), flags)
    return out


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    src = open(argv[1], encoding="utf-8").read()
    sets, byte_level = regex_sets(src)
    result = {}
    for tag, (pre_type, flags) in sorted(tags(src).items()):
        regexes = sets.get(pre_type, sets["LLAMA_VOCAB_PRE_TYPE_DEFAULT"])
        custom = any(r in ("\\p{Han}+", "\\p{AFMoE_digits}") for r in regexes) or pre_type.endswith("SUPERBPE")
        result[tag] = {"pre_type": pre_type[len("LLAMA_VOCAB_PRE_TYPE_"):].lower(), "regexes": regexes,
                       "ignore_merges": flags["ignore_merges"], "add_bos": flags["add_bos"],
                       "byte_level": byte_level.get(pre_type, True), "custom": custom}
    doc = {"source": "llama.cpp src/llama-vocab.cpp" + (f", {argv[3]}" if len(argv) == 4 else ""),
           "extracted_by": "tests/reference/extract_llama_pre_tags.py", "tags": result}
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{len(result)} tags")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
