#include "loco/io/safetensors.h"

#include <fmt/format.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "loco/io/safetensors_header.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"

namespace loco {

namespace {

torch::ScalarType torch_dtype(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::f64: return torch::kFloat64;
    case SafetensorsDtype::f32: return torch::kFloat32;
    case SafetensorsDtype::bf16: return torch::kBFloat16;
    case SafetensorsDtype::f16: return torch::kFloat16;
    case SafetensorsDtype::i64: return torch::kInt64;
    case SafetensorsDtype::i32: return torch::kInt32;
    case SafetensorsDtype::i16: return torch::kInt16;
    case SafetensorsDtype::i8: return torch::kInt8;
    case SafetensorsDtype::u8: return torch::kUInt8;
    case SafetensorsDtype::boolean: return torch::kBool;
  }
  LOCO_CHECK(false, "unknown safetensors dtype {}", static_cast<int>(dtype));
}

const char* dtype_name(torch::ScalarType type) {
  for (SafetensorsDtype dtype : kSafetensorsDtypes) {
    if (torch_dtype(dtype) == type) return safetensors_dtype_name(dtype);
  }
  LOCO_CHECK(false, "no safetensors name for dtype {}", c10::toString(type));
}

}  // namespace

const torch::Tensor& SafetensorsContent::at(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) {
    throw CheckpointError(fmt::format("{} has no tensor named '{}'; it was written by a different model "
                                      "or version",
                                      source.string(), name));
  }
  return it->second;
}

std::string encode_safetensors(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> contiguous;
  std::size_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    std::size_t bytes = t.numel() * t.element_size();
    header[name] = {{"dtype", dtype_name(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(std::move(t));
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // data section aligned to 8 bytes
  std::string out;
  out.reserve(8 + json.size() + offset);
  std::uint64_t length = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  out += json;
  for (const auto& t : contiguous) {
    out.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  }
  return out;
}

void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, encode_safetensors(tensors, metadata));
}

SafetensorsContent decode_safetensors(const std::uint8_t* buffer, std::size_t size, const std::filesystem::path& source) {
  SafetensorsHeader header = parse_safetensors_header(buffer, size, source);
  SafetensorsContent content;
  content.source = source;
  content.metadata = std::move(header.metadata);
  for (auto& entry : header.tensors) {
    torch::Tensor t = torch::empty(entry.shape, torch::TensorOptions().dtype(torch_dtype(entry.dtype)));
    if (entry.end > entry.begin) std::memcpy(t.data_ptr(), header.data + entry.begin, entry.end - entry.begin);
    content.tensors.emplace(std::move(entry.name), std::move(t));
  }
  return content;
}

SafetensorsContent load_safetensors(const std::filesystem::path& path) {
  MappedFile file(path);
  return decode_safetensors(file.data(), file.size(), path);
}

}  // namespace loco
