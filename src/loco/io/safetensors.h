// Reading and writing the safetensors format (the format Hugging Face loads):
//   u64 little-endian header length | JSON header | raw little-endian tensor data
// The header maps each name to {dtype, shape, data_offsets}; "__metadata__" holds strings.
// Used for checkpoints, exports and the Python-generated test fixtures.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loco/util/fs.h"

namespace loco {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

struct SafetensorsContent {
  std::map<std::string, torch::Tensor> tensors;  // on CPU, owning their memory
  std::map<std::string, std::string> metadata;

  // The tensor `name`; throws CheckpointError naming the file when it is absent.
  const torch::Tensor& at(const std::string& name) const;
  std::filesystem::path source;
};

// Serialises to bytes (tensors are moved to CPU and made contiguous).
std::string encode_safetensors(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata);

// The same bytes, handed to `sink` piece by piece (the header, then each tensor's data): one tensor's CPU
// copy at a time, never the whole file (a checkpoint of a model that barely fits).
void write_safetensors(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata,
                       const std::function<void(std::string_view)>& sink);

// Writes atomically (temporary file, fsync, rename), streamed (write_safetensors): the file's size and CRC.
WrittenFile save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                             const std::map<std::string, std::string>& metadata = {});

// Reads and validates (header bounds, offsets inside the file, sizes matching shapes: safetensors_header.h);
// throws CheckpointError naming the file and what is wrong.
SafetensorsContent load_safetensors(const std::filesystem::path& path);

// The same from bytes in memory (a state sent by another replica); `source` names them in errors.
SafetensorsContent decode_safetensors(const std::uint8_t* buffer, std::size_t size, const std::filesystem::path& source);

}  // namespace loco
