// The header of a safetensors file (format in safetensors.h), parsed and checked without libtorch: every
// tensor's dtype, shape and byte range, each range inside the data section and exactly the size its shape
// needs. safetensors.cpp only allocates and copies what this accepted, so everything a file's bytes decide
// is here, and its fuzz target (tests/fuzz/safetensors_fuzzer.cpp) needs no libtorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace loco {

enum class SafetensorsDtype { f64, f32, bf16, f16, i64, i32, i16, i8, u8, boolean };
inline constexpr SafetensorsDtype kSafetensorsDtypes[] = {
    SafetensorsDtype::f64, SafetensorsDtype::f32, SafetensorsDtype::bf16, SafetensorsDtype::f16,
    SafetensorsDtype::i64, SafetensorsDtype::i32, SafetensorsDtype::i16,  SafetensorsDtype::i8,
    SafetensorsDtype::u8,  SafetensorsDtype::boolean};

// The header's name of a dtype ("F32", "BF16", "BOOL", ...), and the bytes of one element.
const char* safetensors_dtype_name(SafetensorsDtype dtype);
std::size_t safetensors_element_size(SafetensorsDtype dtype);

struct SafetensorsEntry {
  std::string name;
  SafetensorsDtype dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte range [begin, end) in the data section
  std::uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;  // by name
  std::map<std::string, std::string> metadata;
  const std::uint8_t* data = nullptr;  // the data section, inside the parsed buffer
};

// Parses and checks the header of the `size` bytes at `buffer`; throws CheckpointError naming `source` and
// what is wrong.
SafetensorsHeader parse_safetensors_header(const std::uint8_t* buffer, std::size_t size,
                                           const std::filesystem::path& source);

}  // namespace loco
