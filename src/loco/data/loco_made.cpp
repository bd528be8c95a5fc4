#include "loco/data/loco_made.h"

#include <system_error>

#include "loco/data/dataset_meta.h"
#include "loco/data/tokenizer.h"

namespace loco::data {

const char* loco_made(const std::filesystem::path& dir) {
  std::error_code ignored;
  auto has = [&](const char* name) {
    return std::filesystem::exists(std::filesystem::symlink_status(dir / name, ignored));
  };
  if (has(kMetaFileName) && has(kTokenizerFileName)) return kPreparedDataDirectory;
  if (has("state.json") && has("model.safetensors")) return kCheckpointDirectory;
  if (has(kPrepareMarkerFileName)) return kInterruptedPreparation;
  return nullptr;
}

}  // namespace loco::data
