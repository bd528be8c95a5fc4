#!/usr/bin/env python3
"""Writes a JSONL corpus of a given size for `loco prepare` benchmarks, seeded and reproducible.

Usage: bench/make_jsonl_corpus.py SOURCE_DIR OUT.jsonl SIZE_MB [--seed S]

Each line is {"id": ..., "url": ..., "text": ...}, the shape of web dumps (C4, FineWeb). A document's
text is a run of paragraphs drawn at random from the text files under SOURCE_DIR (the Brown corpus:
data/brown-text, about 17,600 paragraphs), its length in paragraphs drawn from a geometric law with
mean 8 (about 2.7 KB of text a document). So the words, their frequencies and the tokenizer's work
are those of English prose, while no two documents are alike. Writing stops at the first document
that reaches SIZE_MB megabytes (10^6 bytes) of output. Python standard library only.
"""

import argparse
import json
import os
import random
import sys


def paragraphs_under(source_dir):
    found = []
    for root, dirs, files in os.walk(source_dir):
        dirs.sort()
        for name in sorted(files):
            with open(os.path.join(root, name), encoding="utf-8") as f:
                found.extend(line.rstrip("\n") for line in f if line.strip())
    if not found:
        sys.exit(f"make_jsonl_corpus: no text under {source_dir}; run scripts/fetch_brown.sh first.")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source_dir")
    parser.add_argument("out")
    parser.add_argument("size_mb", type=float)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    paragraphs = paragraphs_under(args.source_dir)
    rng = random.Random(args.seed)
    target = int(args.size_mb * 1e6)
    written = 0
    temporary = args.out + ".partial"
    with open(temporary, "w", encoding="utf-8") as out:
        document = 0
        while written < target:
            count = 1
            while rng.random() > 1 / 8:  # geometric, mean 8
                count += 1
            text = "\n".join(rng.choice(paragraphs) for _ in range(count))
            line = json.dumps({"id": document, "url": f"https://example.org/{document}", "text": text}) + "\n"
            out.write(line)
            written += len(line.encode("utf-8"))
            document += 1
    os.replace(temporary, args.out)
    print(f"{args.out}: {document} documents, {written / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
