// Fuzz target: meta.json of a prepared data directory (data/dataset_meta.h), as training, `loco eval` and
// `loco prepare` read it: every field's presence and type, then the splits and the JSON written back.
#include "fuzz/fuzz_support.h"
#include "loco/data/dataset_meta.h"
#include "loco/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  loco::fuzz::write_scratch_file(loco::data::kMetaFileName, loco::fuzz::as_text(data, size));
  try {
    const loco::data::DatasetMeta meta = loco::data::read_dataset_meta(loco::fuzz::scratch_dir());
    meta.split("train");
    meta.split("val");
    meta.to_json().dump(2);  // what write_dataset_meta writes
  } catch (const loco::DataError&) {
  }
  return 0;
}
