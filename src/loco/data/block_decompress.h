// Decompression of one block of a table file whose decompressed size the file states: a Parquet page, an
// Arrow IPC buffer. The size is allocated once and the data must fill it exactly, so a stranger's block can
// cost no more memory than the size the caller has already bounded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "loco/data/table_file.h"

namespace loco::data {

enum class BlockCodec {
  snappy,     // Parquet's SNAPPY (libsnappy, where the build has it)
  gzip,       // Parquet's GZIP (zlib)
  zstd,       // Parquet's ZSTD, Arrow's ZSTD (libzstd)
  lz4_block,  // Parquet's LZ4_RAW: one LZ4 block without a frame (liblz4)
  lz4_frame,  // Arrow's LZ4_FRAME: the LZ4 frame format (liblz4)
};

// `compressed`, decompressed with `codec` into exactly `size` bytes. `what` names the block in errors ("a
// page", "a buffer"): problems.damaged when the data does not decompress to that size; problems.unsupported for
// snappy in a build without libsnappy.
std::string decompress_block(BlockCodec codec, std::string_view compressed, std::uint64_t size, const char* what,
                             const TableFileProblems& problems);

}  // namespace loco::data
