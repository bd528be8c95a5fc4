#include "loco/io/safetensors.h"

#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <nlohmann/json.hpp>

#include "loco/util/error.h"
#include "loco/util/fs.h"

namespace loco {

namespace {

struct DtypeName {
  torch::ScalarType type;
  const char* name;
};
constexpr DtypeName kDtypes[] = {
    {torch::kFloat64, "F64"}, {torch::kFloat32, "F32"}, {torch::kBFloat16, "BF16"},
    {torch::kFloat16, "F16"}, {torch::kInt64, "I64"},   {torch::kInt32, "I32"},
    {torch::kInt16, "I16"},   {torch::kInt8, "I8"},     {torch::kUInt8, "U8"},
    {torch::kBool, "BOOL"},
};

const char* dtype_name(torch::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  LOCO_CHECK(false, "no safetensors name for dtype {}", c10::toString(type));
}

std::optional<torch::ScalarType> dtype_from_name(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return d.type;
  }
  return std::nullopt;
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
  auto corrupt = [&](const std::string& what) {
    return CheckpointError(fmt::format("{} is not a valid safetensors file ({}); it is truncated or "
                                       "corrupted: restore it or use another checkpoint",
                                       source.string(), what));
  };
  if (size < 8) throw corrupt("shorter than its 8-byte header length");
  std::uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i) header_length |= static_cast<std::uint64_t>(buffer[i]) << (8 * i);
  if (header_length > size - 8) throw corrupt("header length beyond the end of the file");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(buffer + 8, buffer + 8 + header_length);
  } catch (const nlohmann::json::exception& e) {
    throw corrupt(std::string("header is not JSON: ") + e.what());
  }
  if (!header.is_object()) throw corrupt("header is not a JSON object");
  const std::uint8_t* data = buffer + 8 + header_length;
  const std::size_t data_size = size - 8 - header_length;

  SafetensorsContent content;
  content.source = source;
  try {
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        for (const auto& [k, v] : entry.items()) content.metadata[k] = v.get<std::string>();
        continue;
      }
      auto dtype = dtype_from_name(entry.at("dtype").get<std::string>());
      if (!dtype) throw corrupt(fmt::format("tensor '{}' has unsupported dtype {}", name, entry.at("dtype").dump()));
      std::vector<std::int64_t> shape = entry.at("shape").get<std::vector<std::int64_t>>();
      auto offsets = entry.at("data_offsets").get<std::vector<std::uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size) {
        throw corrupt(fmt::format("tensor '{}' lies outside the file", name));
      }
      // Shape checked against the byte range before anything is allocated: a garbled header must not
      // ask for terabytes or negative sizes.
      std::uint64_t bytes = c10::elementSize(*dtype);
      for (auto d : shape) {
        if (d < 0 || __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes)) {
          throw corrupt(fmt::format("tensor '{}' has an impossible shape", name));
        }
      }
      if (offsets[1] - offsets[0] != bytes) throw corrupt(fmt::format("tensor '{}' has the wrong byte size", name));
      torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(*dtype));
      if (bytes > 0) std::memcpy(t.data_ptr(), data + offsets[0], bytes);
      content.tensors.emplace(name, std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    throw corrupt(std::string("malformed header entry: ") + e.what());
  }
  return content;
}

SafetensorsContent load_safetensors(const std::filesystem::path& path) {
  MappedFile file(path);
  return decode_safetensors(file.data(), file.size(), path);
}

}  // namespace loco
