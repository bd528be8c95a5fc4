// Encodes and decodes texts with Hugging Face's tokenizers.js reading a tokenizer directory as Hugging Face's
// libraries do (tokenizer.json + tokenizer_config.json): the reference for the tokenizer `loco export` writes
// (tests/cli/hf_tokenizer_reference_test.cpp, note "hf-tokenizer" in src/loco/data/hf_tokenizer.h).
//
//   node hf_tokenizer_encode.mjs TOKENIZERS_JS_MODULE TOKENIZER_DIR TEXTS.json OUT.json
//
// TEXTS.json is an array of strings; OUT.json gets, for each, {"ids": [...], "text": decode(ids) without
// the special tokens}.
import { readFileSync, writeFileSync } from "fs";
import { join } from "path";
import { pathToFileURL } from "url";

const [moduleFile, dir, textsFile, outFile] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(moduleFile).href);
const read = (name) => JSON.parse(readFileSync(join(dir, name), "utf8"));
const tokenizer = new Tokenizer(read("tokenizer.json"), read("tokenizer_config.json"));
const results = JSON.parse(readFileSync(textsFile, "utf8")).map((text) => {
  const ids = tokenizer.encode(text).ids;
  return { ids, text: tokenizer.decode(ids, { skip_special_tokens: true }) };
});
writeFileSync(outFile, JSON.stringify(results));
