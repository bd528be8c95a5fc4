// Writes tests/fixtures/arrow/: Arrow IPC files (what Hugging Face datasets keeps in its cache and writes
// with save_to_disk, and Feather v2) written by Apache Arrow's JavaScript implementation and by polars (Rust,
// through nodejs-polars), in the layouts loco's reader meets (src/loco/data/arrow_text.h), and texts.json, the
// text column's values (null where a row has none).
//
//   cd "$(mktemp -d)" &&
//     npm install -E apache-arrow@17 nodejs-polars@0.25.2 nodejs-polars-linux-x64-gnu@0.25.2 &&
//     node /path/to/loco/tests/reference/make_arrow_fixtures.mjs /path/to/loco/tests/fixtures/arrow
//
// The files are committed; this script is how they were made (npm is reachable where loco is developed).
import { createRequire } from "module";
import { writeFileSync } from "fs";
import { join } from "path";

// The package is the one installed in the working directory (not next to this script).
const require = createRequire(join(process.cwd(), "package.json"));
const arrow = require("apache-arrow");
const out = process.argv[2];

// 600 rows: short and long texts, repeats, multi-byte characters, quotes, an empty and a blank text, and a
// null every 17th row.
const rows = 600;
const allTexts = [];
for (let i = 0; i < rows; i++) {
  if (i % 17 === 5) allTexts.push(null);
  else if (i === 7) allTexts.push("");
  else if (i === 8) allTexts.push("   ");
  else if (i % 5 === 0) allTexts.push("The same text, again.");
  else allTexts.push(`Document ${i}: ` + "é中 \"quoted\" ".repeat(i % 4) + "word ".repeat(i % 23));
}

// Columns before the text column, of each kind of layout (fixed width, list, struct, dictionary, none), so
// that the reader must count their field nodes and buffers to find the text's; one after it.
const languages = ["en", "fr", "de"];
const languageType = new arrow.Dictionary(new arrow.Utf8(), new arrow.Int32(), 0);
const languageDictionary = arrow.vectorFromArray(languages, new arrow.Utf8());
function columns(textType, start, end) {
  const texts = allTexts.slice(start, end).map((text, k) => [start + k, text]);
  const ids = BigInt64Array.from(texts.map(([i]) => BigInt(i)));
  return {
    id: arrow.makeVector(ids),
    tags: arrow.vectorFromArray(texts.map(([i]) => (i % 7 === 0 ? null : [i, i + 1].slice(0, i % 3))),
                                new arrow.List(new arrow.Field("item", new arrow.Int32(), true))),
    meta: arrow.vectorFromArray(texts.map(([i]) => ({ source: `s${i % 11}`, n: i })),
                                new arrow.Struct([new arrow.Field("source", new arrow.Utf8(), true),
                                                  new arrow.Field("n", new arrow.Int32(), true)])),
    lang: arrow.makeVector(arrow.makeData({ type: languageType, length: texts.length, nullCount: 0,
                                            data: Int32Array.from(texts.map(([i]) => i % 3)),
                                            dictionary: languageDictionary })),
    nothing: arrow.vectorFromArray(texts.map(() => null), new arrow.Null()),
    text: arrow.vectorFromArray(texts.map(([, text]) => text), textType),
    score: arrow.vectorFromArray(texts.map(([i]) => i / 7), new arrow.Float64()),
  };
}

// Record batches of 64 rows (the last shorter) and one of none, as datasets' writer_batch_size cuts them;
// each made from its own rows (apache-arrow 17 cannot write a slice of a LargeUtf8 column).
function batched(textType) {
  const batch = (start, end) => {
    const vectors = columns(textType, start, end);
    const schema = new arrow.Schema(Object.entries(vectors).map(([name, v]) => new arrow.Field(name, v.type, true)));
    const data = arrow.makeData({ type: new arrow.Struct(schema.fields), length: end - start, nullCount: 0,
                                  children: Object.values(vectors).map((v) => v.data[0]) });
    return new arrow.RecordBatch(schema, data);
  };
  const batches = [];
  for (let start = 0; start < rows; start += 64) {
    batches.push(batch(start, Math.min(start + 64, rows)));
    if (start === 128) batches.push(batch(start, start));
  }
  return new arrow.Table(batches);
}

const utf8 = batched(new arrow.Utf8());
const largeUtf8 = batched(new arrow.LargeUtf8());
const variants = [
  // name, table, writer
  ["stream_utf8.arrow", utf8, arrow.RecordBatchStreamWriter, {}],
  ["stream_large_utf8.arrow", largeUtf8, arrow.RecordBatchStreamWriter, {}],
  ["file_utf8.feather", utf8, arrow.RecordBatchFileWriter, {}],
  ["file_large_utf8.arrow", largeUtf8, arrow.RecordBatchFileWriter, {}],
  // Before Arrow 0.15 a message's length had no continuation marker in front of it.
  ["legacy_stream_utf8.arrow", utf8, arrow.RecordBatchStreamWriter, { writeLegacyIpcFormat: true }],
];
for (const [name, table, Writer, options] of variants) {
  writeFileSync(join(out, name), Writer.writeAll(table, options).toUint8Array(true));
}
// polars writes its file format with the text as Utf8View (16-byte views into data buffers), and compresses
// each buffer (LZ4 frames, zstd) as pyarrow's Feather writer does by default: six record batches of 100 rows.
const pl = require("nodejs-polars");
const frames = [];
for (let start = 0; start < rows; start += 100) {
  const part = allTexts.slice(start, start + 100).map((text, k) => [start + k, text]);
  frames.push(pl.DataFrame({
    id: part.map(([i]) => i),
    tags: part.map(([i]) => [i, i + 1].slice(0, i % 3)),
    text: part.map(([, text]) => text),
    score: part.map(([i]) => i / 7),
  }));
}
const frame = pl.concat(frames, { rechunk: false, how: "vertical" });
frame.writeIPC(join(out, "polars_view_lz4.arrow"), { compression: "lz4" });
frame.writeIPCStream(join(out, "polars_zstd.arrows"), { compression: "zstd" });
writeFileSync(join(out, "texts.json"), JSON.stringify(allTexts) + "\n");
