// Integers read from JSON files that a user or a peer may have changed (meta.json, state.json, a safetensors
// header). nlohmann's get<T>() converts whatever number it finds: a float beyond T's range is undefined
// behaviour (found by tests/fuzz), 4294967296 read as a uint32 becomes 0, and 1.5 becomes 1. These take an
// integer that T holds exactly, or throw nlohmann::json::type_error, which every caller already turns into
// its own error naming the file.
#pragma once

#include <nlohmann/json.hpp>

#include <limits>
#include <string>
#include <vector>

namespace loco {

template <typename T>
T json_integer(const nlohmann::json& value) {
  const bool fits = value.is_number_unsigned()
                        ? value.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())
                        : value.is_number_integer() && value.get<std::int64_t>() >= 0 &&
                              value.get<std::int64_t>() <= static_cast<std::int64_t>(std::numeric_limits<T>::max());
  const bool negative_fits = std::numeric_limits<T>::is_signed && value.is_number_integer() &&
                             !value.is_number_unsigned() && value.get<std::int64_t>() < 0 &&
                             value.get<std::int64_t>() >= static_cast<std::int64_t>(std::numeric_limits<T>::min());
  if (!fits && !negative_fits) {
    throw nlohmann::json::type_error::create(
        302, "type must be an integer from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
                 std::to_string(std::numeric_limits<T>::max()) + ", but is " + value.dump(),
        &value);
  }
  return static_cast<T>(value.is_number_unsigned() ? value.get<std::uint64_t>()
                                                   : static_cast<std::uint64_t>(value.get<std::int64_t>()));
}

// A count: an integer from 0 to T's maximum (json_integer's type_error otherwise).
template <typename T>
T json_count(const nlohmann::json& value) {
  const T v = json_integer<T>(value);
  if (v < 0) {
    throw nlohmann::json::type_error::create(
        302, "type must be an integer from 0 to " + std::to_string(std::numeric_limits<T>::max()) + ", but is " +
                 value.dump(),
        &value);
  }
  return v;
}

// A JSON array of such integers.
template <typename T>
std::vector<T> json_integers(const nlohmann::json& value) {
  if (!value.is_array()) {
    throw nlohmann::json::type_error::create(302, std::string("type must be array, but is ") + value.type_name(),
                                             &value);
  }
  std::vector<T> out;
  out.reserve(value.size());
  for (const auto& item : value) out.push_back(json_integer<T>(item));
  return out;
}

}  // namespace loco
