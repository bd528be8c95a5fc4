// Charts through the gnuplot program (Debian package gnuplot-nox): loco writes a self-contained
// script (data inline as datablocks) next to the PNG, so a chart can be restyled and redrawn.
#pragma once

#include <filesystem>
#include <string>

namespace loco::sim {

// Quotes a string for a gnuplot script: '...' with ' doubled, in which gnuplot substitutes nothing (no `command`,
// no @macro); control characters become spaces.
std::string gnuplot_quote(const std::string& text);

// Saves `script` as `png` with extension .gp and runs gnuplot on it. The script must draw to the
// file named by the gnuplot variable `output`, which this function sets. Throws loco::Error naming
// the package when gnuplot is missing, and with gnuplot's own message when it fails.
void draw_chart(const std::string& script, const std::filesystem::path& png);

}  // namespace loco::sim
