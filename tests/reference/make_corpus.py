#!/usr/bin/python3
"""Writes the tokenizer parity corpus: a deterministic, seeded JSON file of varied text.

    /usr/bin/python3 tests/reference/make_corpus.py OUT.json [--seed N] [--count N]

Output: {"seed": N, "strings": [...], "invalid_utf8_hex": [...]}

"strings" mixes scripts (Latin with accents, in NFC and NFD, Cyrillic, Greek, Arabic,
Hebrew, Devanagari, Thai, CJK, kana, Hangul), emoji (ZWJ sequences, skin tones, flags,
keycaps), source code, whitespace runs, digit runs, punctuation, contractions, mixed
case, the special-token strings of every tokenizer we test, control characters, the
empty string and a few very long strings. Everything is produced here from small
hand-written pools, so the corpus carries no copyrighted text.

"invalid_utf8_hex" holds byte strings that are not valid UTF-8 (hex encoded, since JSON
cannot carry them): tokenizers must treat them as the text a replacing UTF-8 decoder
yields. The same seed always gives the same file, byte for byte.
"""
import argparse
import json
import random
import sys
import unicodedata

LATIN_ACCENTED = [
    "café", "naïve", "façade", "crème brûlée", "Ærøskøbing", "Straße", "Größe", "Übermut",
    "mañana", "año", "corazón", "pingüino", "São Paulo", "ação", "coração", "Łódź",
    "zażółć gęślą jaźń", "Đà Nẵng", "Tiếng Việt", "người", "ğüşıöç İstanbul", "Þórsmörk",
    "Ångström", "résumé", "déjà vu", "Čeština", "žluťoučký kůň", "ﬁnance", "Œuvre",
    "Ÿvette", "şarkı", "Dvořák", "Škoda", "Gdańsk",
]
CYRILLIC = [
    "Привет, мир!", "съешь же ещё этих мягких французских булок", "Україна", "їжак",
    "Ґанок", "Београд", "Љубљана", "ёлка", "ВЕРХНИЙ регистр", "Щука", "электрификация",
]
GREEK = [
    "Καλημέρα κόσμε", "ΑΒΓΔΕΖΗΘ", "ἀρχή", "ψυχή", "Ὀδυσσεύς", "φιλοσοφία", "ς σ Σ",
]
ARABIC = [
    "مرحبا بالعالم", "اللغة العربية", "كِتَابٌ", "٠١٢٣٤٥٦٧٨٩", "السَّلَامُ عَلَيْكُمْ", "ﷺ", "لا",
]
HEBREW = ["שלום עולם", "עִבְרִית", "בְּרֵאשִׁית", "ירושלים"]
DEVANAGARI = ["नमस्ते दुनिया", "हिन्दी", "क्षत्रिय", "संस्कृतम्", "०१२३४५६७८९", "ज़िन्दगी"]
THAI = ["สวัสดีชาวโลก", "ภาษาไทย", "กรุงเทพมหานคร", "น้ำ", "๑๒๓"]
CJK = [
    "你好，世界", "中文字符", "漢字", "机器学习模型", "繁體中文", "𠀀𠀁𪚥",
    "こんにちは世界", "ひらがな", "カタカナ", "東京都", "ｶﾀｶﾅ半角", "日本語のテキスト。",
]
HANGUL = ["안녕하세요 세계", "한국어", "대한민국", "\u1100\u1161\u11a8", "ㄱㄴㄷ"]
EMOJI = [
    "😀", "🤖", "🚀", "❤️", "👍🏻", "👍🏼", "👍🏽", "👍🏾", "👍🏿", "👩‍💻", "👨‍👩‍👧‍👦",
    "🏳️‍🌈", "🏴‍☠️", "🇺🇸", "🇯🇵", "🇩🇪", "🇫🇷", "🇧🇷", "1️⃣", "#️⃣", "🧑🏽‍🚀",
    "👩🏿‍🤝‍👩🏻", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "☺", "☺️", "✔", "⚡", "🫠", "🥹",
]
SPECIAL_STRINGS = [
    "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
    "<|start_header_id|>", "<|end_header_id|>", "<|im_start|>", "<|im_end|>",
    "<s>", "</s>", "<unk>", "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>",
    "<|fim_prefix|>", "<think>", "</think>", "<|vision_start|>",
    # near misses that must stay ordinary text
    "<|endoftext", "endoftext|>", "<|im_start", "< s>", "<s >", "<|ENDOFTEXT|>", "<||>",
]
# The special and added tokens of Gemma 2/3, gpt-oss (harmony) and Mistral Nemo (Tekken),
# apart from SPECIAL_STRINGS so that the seeded random strings stay what they were.
FAMILY_SPECIAL_STRINGS = [
    "<bos>", "<eos>", "<pad>", "<mask>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>",
    "<image_soft_token>", "<unused0>", "<unused6241>", "[multimodal]", "<div>", "</code>",
    "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>", "<|call|>", "<|constrain|>",
    "<|startoftext|>", "<|endofprompt|>", "<|reserved_200000|>",
    "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/TOOL_RESULTS]", "[PREFIX]", "<SPECIAL_20>", "<SPECIAL_999>",
    # near misses that must stay ordinary text
    "<start_of_turn", "<|channel>", "<|start", "<SPECIAL_>", "[TOOL_CALLS", "<unused>",
]
FAMILY_TURNS = [
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
    "<|start|>assistant<|channel|>analysis<|message|>Think.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hi!<|return|>",
    "[AVAILABLE_TOOLS][{\"name\": \"f\"}][/AVAILABLE_TOOLS][INST] hi [/INST][TOOL_CALLS]",
]
CONTRACTIONS = [
    "it's", "don't", "we're", "they've", "I'm", "you'll", "he'd", "IT'S", "DON'T",
    "We'Re", "rock'n'roll", "o'clock", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d",
    "can’t", "won’t", "y'all'd've", "Rock 'n' roll", "the '90s",
]
PUNCTUATION = [
    "...", "!!!", "?!", "—", "–", "…", "«»", "„“", "‘’", "“quoted”", "(parens)", "[brackets]",
    "{braces}", "<angle>", "@#$%^&*", "~`|\\", "::", "->", "=>", "!=", "===", "¿Qué?",
    "¡Hola!", "。、「」", "！？", "·•", "§¶", "©®™", "°C", "±×÷", "½¼¾", "€£¥₹₿",
]
WHITESPACE = [
    " ", "  ", "   ", "    ", "        ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n",
    "\r\n\r\n", " \n ", "\t \n", "\u00a0", "\u2009", "\u3000", "\u200b", "\u2028", "\u000b",
    "\u000c", "\u0085",
]
CONTROL = ["\u0000", "\u0001", "\u001b[31m", "\u007f", "\ufeff", "\u200d", "\u200e", "\u202e",
           "\ufffd", "\ufe0f", "\U0010ffff", "\ue000"]
WORDS = (
    "the of and to in is was for on that with as by at from it he she they we you this be "
    "are have had not but or an which one all were when there can more if out so what time "
    "up about into than them some could other then now only its over new also after use two "
    "how our work first well way even because any these give day most us model token engine "
    "server request batch cache layer tensor weight kernel thread process socket plugin "
    "Hello World Python JavaScript Linux GPU CPU API HTTP JSON UTF-8 GGUF LLaMA Qwen Mistral "
    "quickly slowly running jumped happiness unbelievable internationalization "
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis"
).split()

CODE = [
    '#include <stdio.h>\n\nint main(int argc, char **argv)\n{\n    printf("hello, %s\\n", argv[0]);\n    return 0;\n}\n',
    "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])\n",
    "const add = (a, b) => a + b;\nexport default function App() {\n  return <div className=\"app\">{add(1, 2)}</div>;\n}\n",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfor i := 0; i < 3; i++ {\n\t\tfmt.Println(i)\n\t}\n}\n",
    "SELECT u.id, COUNT(*) AS n\n  FROM users u JOIN orders o ON o.user_id = u.id\n WHERE o.total > 100.50\n GROUP BY u.id\n ORDER BY n DESC;\n",
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>T</title></head>\n<body><p class='x'>&amp; &lt;ok&gt;</p></body>\n</html>\n",
    "#!/bin/sh\nset -eu\nfor f in *.txt; do\n  wc -l \"$f\" | awk '{print $1}' >> out.log 2>&1\ndone\n",
    '{"name": "cinfer", "version": "0.1.0", "tags": ["llm", "c"], "ok": true, "n": null, "x": -1.5e-3}\n',
    "template <typename T>\nstd::vector<T> twice(const std::vector<T>& v) {\n    std::vector<T> r; r.reserve(v.size() * 2);\n    for (auto& x : v) { r.push_back(x); r.push_back(x); }\n    return r;\n}\n",
    "    if (x != NULL && x->next) {\n\t\tx = x->next; // advance\n    }\n",
    "import numpy as np\nA = np.arange(12).reshape(3, 4)\nprint(A @ A.T, A.sum(axis=-1))\n",
    "public class Main {\n    public static void main(String[] args) {\n        System.out.println(\"Hi\");\n    }\n}\n",
    "-- Lua\nlocal t = {1, 2, 3}\nfor i, v in ipairs(t) do print(i, v) end\n",
    "$ git log --oneline | head -3\nab12cd3 Fix bug\n\\begin{equation} E = mc^2 \\end{equation}\n",
    "main:\n    mov eax, 1\n    xor ebx, ebx\n    int 0x80\n",
]
POOLS = {
    "latin": LATIN_ACCENTED, "cyrillic": CYRILLIC, "greek": GREEK, "arabic": ARABIC,
    "hebrew": HEBREW, "devanagari": DEVANAGARI, "thai": THAI, "cjk": CJK, "hangul": HANGUL,
    "emoji": EMOJI, "special": SPECIAL_STRINGS, "contraction": CONTRACTIONS,
    "punct": PUNCTUATION, "space": WHITESPACE, "control": CONTROL, "word": WORDS,
}


def digits(rng):
    n = rng.choice([1, 2, 3, 4, 5, 6, 7, 9, 12, 16, 20, 33, 40])
    s = "".join(rng.choice("0123456789") for _ in range(n))
    form = rng.randrange(6)
    if form == 1:
        return s + "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 6)))
    if form == 2:
        return "{:,}".format(int(s))
    if form == 3:
        return "-" + s + "e" + str(rng.randint(-30, 30))
    if form == 4:
        return "".join(chr(0xFF10 + int(c)) for c in s)  # fullwidth digits
    return s


def mixed_case(rng, word):
    form = rng.randrange(5)
    if form == 0:
        return word.upper()
    if form == 1:
        return word.capitalize()
    if form == 2:
        return "".join(c.upper() if i % 2 else c for i, c in enumerate(word))
    if form == 3:
        return word[:1].lower() + "".join(w.capitalize() for w in rng.sample(WORDS, 3))
    return word


def sentence(rng, n_words):
    words = [rng.choice(WORDS) for _ in range(n_words)]
    words[0] = words[0].capitalize()
    text = " ".join(words)
    return text + rng.choice([".", "!", "?", ",", ";", ":", "", "..."])


def fragment(rng):
    """One piece of text of a random kind."""
    kind = rng.randrange(14)
    if kind < 9:
        pool = rng.choice(list(POOLS.values()))
        return rng.choice(pool)
    if kind == 9:
        return digits(rng)
    if kind == 10:
        return mixed_case(rng, rng.choice(WORDS))
    if kind == 11:
        return sentence(rng, rng.randint(3, 12))
    if kind == 12:
        return rng.choice(CODE)[: rng.randint(10, 200)]
    return rng.choice(WHITESPACE) * rng.randint(1, 9)


def mixture(rng, n):
    parts = []
    for _ in range(n):
        parts.append(fragment(rng))
        parts.append(rng.choice(["", " ", " ", " ", "\n", "  ", "\t", ", "]))
    return "".join(parts)


def nfd_variant(text):
    return unicodedata.normalize("NFD", text)


# Where tokenizer implementations tend to differ: Unicode classes in the pre-tokenizer
# regexes (\s, \p{L}, \p{N}, \p{M}), case-insensitive contractions under Unicode
# folding, NFC singletons and exclusions, the tokenizers' own marker characters in
# the input, whitespace before newlines and at the end of the text.
UNICODE_SPACES = ["\u0085", "\u00a0", "\u1680", "\u2000", "\u2005", "\u200a", "\u2028",
                  "\u2029", "\u202f", "\u205f", "\u3000", "\u180e", "\u200b", "\ufeff"]
ADVERSARIAL = (
    [f"a{sp}b" for sp in UNICODE_SPACES] + [f"x{sp * 3}\ny" for sp in UNICODE_SPACES]
    + ["".join(UNICODE_SPACES), " ".join(UNICODE_SPACES) + " end"]
    + ["he'\u017f", "IT'\u017f", "'\u017ft", "we'LL", "we'Ll", "we'lL", "I'D", "you'VE", "''s", "'''",
       "don\u2019t", "it\u02bcs", "x'", "' s", "rock'n'roll'd"]
    + ["\U0001d400\U0001d401\U0001d402", "\U0001d7ce\U0001d7cf", "\u0301abc", "a\u0301\u0302\u0303",
       "\u0344", "\u0958", "\uf900\uf901\uf902", "\u2126 \u212a \u212b", "\u1e9b\u0323",
       "\u0378\u0379", "\ufffe\uffff", "\U000e0001\U000e007f", "\U00020000\U0002a6d6"]
    + ["\u0661\u0662\u0663\u0664\u0665", "\u2460\u2461\u2462\u2463", "\u216b\u216b\u216b",
       "\u00b2\u00b3\u00b9\u2074", "\u00bd\u00bc", "1\u00bd", "x\u00b2+y\u00b2", "\uff11\uff12\uff13\uff14"]
    + ["\u2581", "\u2581\u2581x", "a\u2581b", " \u2581 ", "\u0120the", "\u010a\u0120", "<0x41>", "<0xFF>",
       "\u2581<s>", "<s>\u2581"]
    + ["  \n  x", " \t\n\t x", "\r\r\n", "\n\r", "x   ", "x \t", "x\n ", " \n\n ", "a \n b",
       "\t\t\tdef f():\n\t\t\t\treturn 1", "x" + " " * 17 + "y", "\u3000\u3000x"]
    + ["\u0416" * 3000, "\u4e00" * 2000, "\U0001f600" * 500, "ab" * 3000, "a b " * 2000]
)


def fixed_cases():
    """Hand-picked edge cases, always present, in a fixed order."""
    cases = ["", " ", "  ", "\n", "\t", "a", "A", "0", "'", "'s", "Hello", " Hello", "Hello ",
             "Hello world", "hello world!", " leading space", "trailing space ", "two  spaces",
             "a\nb", "a\r\nb", "a\n\nb", "\n\n\n\n", " \n", "\n ", "x" * 3, "ab" * 50,
             "1", "12", "123", "1234", "12345", "123456789012", "3.14159", "1,000,000",
             "U.S.A.", "e.g.", "i.e.", "Mr. O'Neil's car", "I'M", "DON'T", "they'RE",
             "\u0000", "\u0000a\u0000", "\ufeffBOM", "e\u0301", "\u00e9", "A\u030a", "\u212b",
             "ﬁ", "Ⅻ", "①②③", "x²", "H₂O", "µ", "\u03bc", "Å", "한", "\u1112\u1161\u11ab"]
    for group in (SPECIAL_STRINGS, EMOJI, CONTRACTIONS, PUNCTUATION, WHITESPACE, CONTROL,
                  LATIN_ACCENTED, CYRILLIC, GREEK, ARABIC, HEBREW, DEVANAGARI, THAI, CJK,
                  HANGUL, CODE, ADVERSARIAL):
        cases.extend(group)
    cases.extend(FAMILY_SPECIAL_STRINGS + FAMILY_TURNS)
    for s in SPECIAL_STRINGS + FAMILY_SPECIAL_STRINGS:  # special tokens inside, beside and between text
        cases += [f"Hello{s}world", f" {s} ", f"{s}{s}", f"a {s}\nb", f"{s}Hello", f"Hello {s}"]
    cases += [nfd_variant(s) for s in LATIN_ACCENTED if nfd_variant(s) != s]
    for n in (5, 16, 17, 64, 100, 1000):
        cases += [" " * n, "\t" * n, "\n" * n, " \t\n" * (n // 3 + 1), "0" * n, "9" * n]
    return cases


def long_cases(rng):
    """Very long strings: prose, one repeated character, one huge word, mixed content."""
    prose = " ".join(sentence(rng, rng.randint(5, 20)) for _ in range(1500))
    return [
        prose,                                     # ~ 90 KB of plain words
        "a" * 20000,                               # one long run: stresses BPE merging
        "".join(rng.choice("abcdefghij") for _ in range(8000)),  # one long random "word"
        "".join(rng.choice("0123456789") for _ in range(10000)),
        " " * 10000,
        mixture(rng, 3000),                        # every kind of fragment, mixed
        "".join(rng.choice(CJK) for _ in range(3000)),
        "".join(rng.choice(EMOJI) for _ in range(2000)),
    ]


def invalid_utf8(rng):
    """Byte strings that a replacing decoder must repair."""
    fixed = [b"\xff", b"\xfe\xff", b"\x80", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe2\x82",
             b"\xe2\x82(", b"\xf0\x9f\x98", b"\xf0\x9f\x98 ok", b"\xed\xa0\x80",  # surrogate
             b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80",
             b"Hello \xff world", b"\xe6\x97\xa5\xe6\x9c", b"caf\xc3", b"\xc3\xa9\xc3"]
    out = list(fixed)
    valid = "héllo wörld 日本 😀 ok".encode("utf-8")
    for _ in range(60):
        b = bytearray(valid)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(b) + 1)
            b[pos:pos] = bytes([rng.choice([0x80, 0xbf, 0xc0, 0xc3, 0xe2, 0xed, 0xf0, 0xf5, 0xff])])
        out.append(bytes(b))
    for _ in range(20):  # truncate valid text in the middle of a character
        s = mixture(rng, 4).encode("utf-8")
        out.append(s[: rng.randrange(len(s) + 1)] + bytes([rng.choice([0xe6, 0xf0, 0xd0])]))
    return [b.hex() for b in out]


def build(seed, count):
    rng = random.Random(seed)
    strings = list(dict.fromkeys(fixed_cases() + long_cases(rng)))  # unique, in order
    seen = set(strings)
    while len(strings) < count:
        before = len(strings)
        kind = rng.randrange(10)
        if kind < 6:
            strings.append(mixture(rng, rng.randint(1, 30)))
        elif kind == 6:
            strings.append(" ".join(sentence(rng, rng.randint(4, 25)) for _ in range(rng.randint(1, 6))))
        elif kind == 7:
            code = rng.choice(CODE)
            strings.append(code * rng.randint(1, 3))
        elif kind == 8:
            s = mixture(rng, rng.randint(2, 12))
            strings.append(nfd_variant(s) if rng.random() < 0.5 else s)
        else:
            strings.append(rng.choice(SPECIAL_STRINGS).join(
                mixture(rng, rng.randint(1, 4)) for _ in range(rng.randint(2, 4))))
        if strings[-1] in seen:  # keep every string distinct
            del strings[before:]
        else:
            seen.add(strings[-1])
    for s in strings:  # JSON and every tokenizer need Unicode scalar values
        s.encode("utf-8")
    return {"seed": seed, "strings": strings, "invalid_utf8_hex": invalid_utf8(rng)}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=20260101)
    ap.add_argument("--count", type=int, default=2650)
    args = ap.parse_args(argv)
    corpus = build(args.seed, args.count)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(corpus, f, ensure_ascii=False, indent=0)
        f.write("\n")
    n_bytes = sum(len(s.encode("utf-8")) for s in corpus["strings"])
    print(f"make_corpus: {len(corpus['strings'])} strings ({n_bytes} bytes), "
          f"{len(corpus['invalid_utf8_hex'])} invalid UTF-8 byte strings -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
