#!/usr/bin/env python3
"""Writes tests/fixtures/csv/: CSV and TSV files written by Python's csv module in the dialects loco's reader
meets (src/loco/data/csv_text.h), a few written by hand in forms writers should not produce but readers
accept, and expected.json: what Python's csv.DictReader reads back from each file, the reference. For each
file, the rows (numbered from 1 after the header, blank lines not counted) that reach the "text" column, with
that column's value.

    python3 tests/reference/make_csv_fixtures.py tests/fixtures/csv
"""
import csv
import io
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)

# Texts that need quoting (delimiters, quotes, line ends of each kind), and some that do not.
texts = []
for i in range(240):
    if i % 13 == 4:
        texts.append("")
    elif i % 11 == 3:
        texts.append("   ")
    elif i % 7 == 0:
        texts.append(f'Row {i} says "hello", twice: ""quoted"".')
    elif i % 7 == 1:
        texts.append(f"Row {i}\nspans\r\nthree lines, with\ta tab")
    elif i % 7 == 2:
        texts.append(f"é中 row {i}; " + "word " * (i % 17))
    else:
        texts.append(f"Plain row {i} " + "text " * (i % 5))
rows = [{"id": i, "text": t, "score": i / 8} for i, t in enumerate(texts)]

files = {
    "minimal_crlf.csv": dict(delimiter=",", quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n"),
    "all_quoted.tsv": dict(delimiter="\t", quoting=csv.QUOTE_ALL, lineterminator="\n"),
    "nonnumeric_cr.csv": dict(delimiter=",", quoting=csv.QUOTE_NONNUMERIC, lineterminator="\r"),
}
for name, dialect in files.items():
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=["id", "text", "score"], **dialect)
    writer.writeheader()
    for k, row in enumerate(rows):
        writer.writerow(row)
        if k % 50 == 49:
            buffer.write(dialect["lineterminator"])  # a blank line: no row
    (out / name).write_bytes(buffer.getvalue().encode("utf-8"))

# A byte-order mark before the header, the text column first, rows that end before the text column or after
# it, characters after a closing quote, quotes inside an unquoted field, and no line end after the last row.
(out / "by_hand.csv").write_bytes(
    "\ufefftext,id\n"
    '"abc"def,1\n'
    'ab"c"d,2\n'
    '"x""y",3\n'
    '\n'
    ',4\n'
    '"",5\n'
    "only\n"
    '"last, no line end",9'.encode("utf-8"))

expected = {}
for path in sorted(out.glob("*.[ct]sv")):
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f, delimiter="\t" if path.suffix == ".tsv" else ",")
        expected[path.name] = [[n, row["text"]] for n, row in enumerate(reader, 1) if row.get("text") is not None]
(out / "expected.json").write_text(json.dumps(expected, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
