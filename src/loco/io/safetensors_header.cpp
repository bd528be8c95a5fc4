#include "loco/io/safetensors_header.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "loco/util/error.h"
#include "loco/util/json_integer.h"
#include "loco/util/json_problem.h"

namespace loco {

namespace {

std::optional<SafetensorsDtype> dtype_from_name(const std::string& name) {
  for (SafetensorsDtype dtype : kSafetensorsDtypes) {
    if (name == safetensors_dtype_name(dtype)) return dtype;
  }
  return std::nullopt;
}

}  // namespace

const char* safetensors_dtype_name(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::f64: return "F64";
    case SafetensorsDtype::f32: return "F32";
    case SafetensorsDtype::bf16: return "BF16";
    case SafetensorsDtype::f16: return "F16";
    case SafetensorsDtype::i64: return "I64";
    case SafetensorsDtype::i32: return "I32";
    case SafetensorsDtype::i16: return "I16";
    case SafetensorsDtype::i8: return "I8";
    case SafetensorsDtype::u8: return "U8";
    case SafetensorsDtype::boolean: return "BOOL";
  }
  LOCO_CHECK(false, "unknown safetensors dtype {}", static_cast<int>(dtype));
}

std::size_t safetensors_element_size(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::f64:
    case SafetensorsDtype::i64: return 8;
    case SafetensorsDtype::f32:
    case SafetensorsDtype::i32: return 4;
    case SafetensorsDtype::bf16:
    case SafetensorsDtype::f16:
    case SafetensorsDtype::i16: return 2;
    case SafetensorsDtype::i8:
    case SafetensorsDtype::u8:
    case SafetensorsDtype::boolean: return 1;
  }
  LOCO_CHECK(false, "unknown safetensors dtype {}", static_cast<int>(dtype));
}

SafetensorsHeader parse_safetensors_header(const std::uint8_t* buffer, std::size_t size,
                                           const std::filesystem::path& source) {
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
  // A name twice: the JSON parser would keep the last entry, and the file would hold data nobody reads.
  std::set<std::string> names;
  std::optional<std::string> repeated;
  const auto note_repeated_names = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && !names.insert(parsed.get<std::string>()).second) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  try {
    header = nlohmann::json::parse(buffer + 8, buffer + 8 + header_length, note_repeated_names);
  } catch (const nlohmann::json::exception& e) {
    throw corrupt(std::string("header is not JSON: ") + json_problem(e));
  }
  if (!header.is_object()) throw corrupt("header is not a JSON object");
  if (repeated) throw corrupt(fmt::format("the header names '{}' twice", *repeated));
  const std::size_t data_size = size - 8 - header_length;

  SafetensorsHeader out;
  out.data = buffer + 8 + header_length;
  try {
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        for (const auto& [k, v] : entry.items()) out.metadata[k] = v.get<std::string>();
        continue;
      }
      auto dtype = dtype_from_name(entry.at("dtype").get<std::string>());
      if (!dtype) throw corrupt(fmt::format("tensor '{}' has unsupported dtype {}", name, entry.at("dtype").dump()));
      std::vector<std::int64_t> shape = json_integers<std::int64_t>(entry.at("shape"));
      auto offsets = json_integers<std::uint64_t>(entry.at("data_offsets"));
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size) {
        throw corrupt(fmt::format("tensor '{}' lies outside the file", name));
      }
      // Shape checked against the byte range before anything is allocated: a garbled header must not
      // ask for terabytes or negative sizes.
      std::uint64_t bytes = safetensors_element_size(*dtype);
      for (auto d : shape) {
        if (d < 0 || __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes)) {
          throw corrupt(fmt::format("tensor '{}' has an impossible shape", name));
        }
      }
      if (offsets[1] - offsets[0] != bytes) throw corrupt(fmt::format("tensor '{}' has the wrong byte size", name));
      out.tensors.push_back({name, *dtype, std::move(shape), offsets[0], offsets[1]});
    }
  } catch (const nlohmann::json::exception& e) {
    throw corrupt(std::string("malformed header entry: ") + json_problem(e));
  }
  // Each tensor's bytes are its own: two that share bytes would change together once loaded as views.
  std::vector<const SafetensorsEntry*> by_start;
  for (const SafetensorsEntry& entry : out.tensors) {
    if (entry.end > entry.begin) by_start.push_back(&entry);
  }
  std::sort(by_start.begin(), by_start.end(), [](const auto* a, const auto* b) { return a->begin < b->begin; });
  for (std::size_t i = 1; i < by_start.size(); ++i) {
    if (by_start[i]->begin < by_start[i - 1]->end) {
      throw corrupt(fmt::format("tensors '{}' and '{}' share bytes", by_start[i - 1]->name, by_start[i]->name));
    }
  }
  return out;
}

}  // namespace loco
