// Writes tests/fixtures/parquet/: Parquet files of one string column written by parquet-rs (the Rust
// implementation of Apache Arrow, through npm's parquet-wasm), in the layouts loco's reader meets
// (src/loco/data/parquet_text.h), and texts.json, the column's values (null where a row has none).
//
//   cd "$(mktemp -d)" && npm install parquet-wasm@0.6.1 apache-arrow@17 &&
//     node /path/to/loco/tests/reference/make_parquet_fixtures.mjs /path/to/loco/tests/fixtures/parquet
//
// The files are committed; this script is how they were made (npm is reachable where loco is developed).
import { createRequire } from "module";
import { writeFileSync } from "fs";
import { join } from "path";

// The packages are those installed in the working directory (not next to this script).
const require = createRequire(join(process.cwd(), "package.json"));
const arrow = require("apache-arrow");
const pq = require(join(process.cwd(), "node_modules/parquet-wasm/node/parquet_wasm.js"));  // its exports name no CommonJS build
const out = process.argv[2];

// 600 rows: short and long texts, repeats (for the dictionary), shared prefixes (for DELTA_BYTE_ARRAY),
// multi-byte characters, quotes, an empty and a blank text, and a null every 17th row.
const rows = 600;
const texts = [];
for (let i = 0; i < rows; i++) {
  if (i % 17 === 5) texts.push(null);
  else if (i === 7) texts.push("");
  else if (i === 8) texts.push("   ");
  else if (i % 5 === 0) texts.push("The same text, again.");
  else texts.push(`Document ${i}: ` + "é中 \"quoted\" ".repeat(i % 4) + "word ".repeat(i % 23));
}
const ids = BigInt64Array.from(texts.map((_, i) => BigInt(i)));
const nullable = arrow.tableFromArrays({ id: ids, text: arrow.vectorFromArray(texts, new arrow.Utf8()) });
const present = texts.map((t) => (t === null ? "" : t));
// The same texts in a column that cannot be null (no definition levels), nulls as "".
const requiredSchema = new arrow.Schema([new arrow.Field("id", new arrow.Int64(), false),
                                         new arrow.Field("text", new arrow.Utf8(), false)]);
const requiredData = arrow.makeData({
  type: new arrow.Struct(requiredSchema.fields), length: rows, nullCount: 0,
  children: [arrow.makeVector(ids).data[0], arrow.vectorFromArray(present, new arrow.Utf8()).data[0]],
});
const required = new arrow.Table(requiredSchema, [new arrow.RecordBatch(requiredSchema, requiredData)]);

const variants = [
  // name, table, compression, writer version, dictionary, encoding, data page size limit
  ["snappy_v1_dictionary", nullable, pq.Compression.SNAPPY, pq.WriterVersion.V1, true, null, 2048],
  ["zstd_v2_delta_byte_array", nullable, pq.Compression.ZSTD, pq.WriterVersion.V2, false, null, 1 << 20],
  ["gzip_v1_plain", nullable, pq.Compression.GZIP, pq.WriterVersion.V1, false, null, 2048],
  ["uncompressed_v2_dictionary", nullable, pq.Compression.UNCOMPRESSED, pq.WriterVersion.V2, true, null, 4096],
  ["snappy_v1_delta_length", nullable, pq.Compression.SNAPPY, pq.WriterVersion.V1, false,
   pq.Encoding.DELTA_LENGTH_BYTE_ARRAY, 1 << 20],
  ["snappy_v1_required", required, pq.Compression.SNAPPY, pq.WriterVersion.V1, true, null, 8192],
  ["lz4raw_v2_plain", nullable, pq.Compression.LZ4_RAW, pq.WriterVersion.V2, false, null, 2048],
];
for (const [name, table, compression, version, dictionary, encoding, pageSize] of variants) {
  let builder = new pq.WriterPropertiesBuilder().setCompression(compression).setWriterVersion(version)
    .setDictionaryEnabled(dictionary).setMaxRowGroupSize(256).setDataPageSizeLimit(pageSize).setWriteBatchSize(64);
  if (encoding !== null) builder = builder.setColumnEncoding("text", encoding);
  const wasmTable = pq.Table.fromIPCStream(arrow.tableToIPC(table, "stream"));
  writeFileSync(join(out, name + ".parquet"), pq.writeParquet(wasmTable, builder.build()));
}
writeFileSync(join(out, "texts.json"), JSON.stringify(texts) + "\n");
