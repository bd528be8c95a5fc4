// JSON as Python's json module reads it. json.dumps, the most common writer of JSON Lines corpora, writes two
// things RFC 8259 does not allow and json.loads reads back: the literals NaN, Infinity and -Infinity for floats
// that are not finite, and a UTF-16 surrogate escape without its partner ("\ud83d" alone: a string cut inside an
// emoji, or bytes decoded with surrogateescape); json.loads also reads a number beyond double's range (1e400) as
// infinity. nlohmann::json refuses all three, so one such line in gigabytes stopped `loco prepare` where
// Python's tools read the file.
#pragma once

#include <cstddef>
#include <string>

namespace loco {

// Rewrites those into JSON nlohmann reads: each non-finite literal or number outside strings into null (in a
// field loco does not read; a text field of NaN is how pandas writes a missing text, no document as null is),
// each lone surrogate escape inside a string into "\ufffd" (U+FFFD, the replacement character: UTF-8 cannot hold
// a lone surrogate). Returns how many it rewrote; 0 leaves `json` as it was. Text without them is never
// changed, and need not be valid JSON: the parser judges it afterwards (callers rewrite only a line it refused).
std::size_t rewrite_python_json_extensions(std::string& json);

}  // namespace loco
