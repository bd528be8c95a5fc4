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

void write_safetensors(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata,
                       const std::function<void(std::string_view)>& sink) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::size_t offset = 0;
  for (const auto& [name, tensor] : tensors) {  // sizes only: no copy yet
    const std::size_t bytes = static_cast<std::size_t>(tensor.numel()) * tensor.element_size();
    header[name] = {{"dtype", dtype_name(tensor.scalar_type())},
                    {"shape", tensor.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // data section aligned to 8 bytes
  std::string length(8, '\0');
  for (int i = 0; i < 8; ++i) length[static_cast<std::size_t>(i)] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  sink(length);
  sink(json);
  for (const auto& [name, tensor] : tensors) {
    const torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();  // a copy only off the CPU or strided
    sink(std::string_view(static_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.numel()) * t.element_size()));
  }
}

std::string encode_safetensors(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  std::string out;
  write_safetensors(tensors, metadata, [&out](std::string_view piece) { out.append(piece); });
  return out;
}

WrittenFile save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                             const std::map<std::string, std::string>& metadata) {
  AtomicFileWriter file(path);
  write_safetensors(tensors, metadata, [&file](std::string_view piece) { file.write(piece); });
  return file.commit();
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
