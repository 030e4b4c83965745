"""The training text: the King James Bible from Debian's bible-kjv-text package.

The package stores the text compressed in its own format (/usr/lib/bible.data), so
we read it through the package's own reader, /usr/bin/bible (package bible-kjv).
Each book becomes one document: its chapters separated by a blank line, one verse
per line, without chapter and verse numbers (numbers would only teach the model to
count). A fixed set of whole books (about 5% of the text) is held out for evaluation.
"""

import re
import subprocess

# Whole books held out from training, chosen once to total about 5% of the bytes
# and to mix law, wisdom, prophecy, gospel and letters.
HELD_OUT_BOOKS = ("Ruth", "Ecclesiastes", "Joel", "Jonah", "Mark", "Galatians", "Hebrews",
                  "1 Peter")

_CHAPTER_HEADING = re.compile(r"^(?P<book>(?:[1-3] )?[A-Z][A-Za-z ]+?) (?P<chapter>\d+)$")
_VERSE = re.compile(r"^\s+(?P<verse>\d+) (?P<text>.*)$")


def read_bible_text(bible_program="bible"):
    """Returns the whole text as printed by `bible -l0` (one verse per line)."""
    result = subprocess.run([bible_program, "-l0", "gen1:1-rev22:21"],
                            check=True, capture_output=True, text=True)
    return result.stdout


def split_books(raw_text):
    """Parses `bible -l0` output into [(book name, document text)] in canonical order."""
    books = []  # [(name, [chapter text])]
    verses = None
    for line in raw_text.splitlines():
        heading = _CHAPTER_HEADING.match(line)
        if heading:
            name = heading.group("book")
            if not books or books[-1][0] != name:
                books.append((name, []))
            verses = []
            books[-1][1].append(verses)
            continue
        verse = _VERSE.match(line)
        if verse:
            if verses is None:
                raise ValueError("verse before any chapter heading: %r" % line)
            verses.append(verse.group("text").strip())
        elif line.strip():
            raise ValueError("unexpected line in bible output: %r" % line)
    return [(name, "\n\n".join("\n".join(ch) for ch in chapters))
            for name, chapters in books]


def load_split(bible_program="bible"):
    """Returns (train_books, heldout_books), each a list of (name, text)."""
    books = split_books(read_bible_text(bible_program))
    if len(books) != 66:
        raise ValueError("expected 66 books from bible-kjv, found %d" % len(books))
    names = {name for name, _ in books}
    missing = [b for b in HELD_OUT_BOOKS if b not in names]
    if missing:
        raise ValueError("held-out books not found in the text: %s" % ", ".join(missing))
    train = [(n, t) for n, t in books if n not in HELD_OUT_BOOKS]
    heldout = [(n, t) for n, t in books if n in HELD_OUT_BOOKS]
    return train, heldout


_WORD = re.compile(r"[A-Za-z]+")


def word_list(books):
    """The distinct words (runs of ASCII letters, lower-cased) of the books, sorted."""
    words = set()
    for _, text in books:
        words.update(w.lower() for w in _WORD.findall(text))
    return sorted(words)


def write_word_list(path, books):
    with open(path, "w", encoding="ascii") as f:
        f.write("\n".join(word_list(books)) + "\n")


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "--word-list":
        write_word_list(sys.argv[2], load_split()[0])
        sys.exit(0)
    train, heldout = load_split()
    total = sum(len(t) for _, t in train + heldout)
    held = sum(len(t) for _, t in heldout)
    print("books: %d train, %d held out; held-out share %.2f%% of %d bytes"
          % (len(train), len(heldout), 100.0 * held / total, total))
