// The checks of each strategy's config section, one function per strategy, each beside the others and
// apart from the run's general checks (load_config.cpp). Every section is checked in every config, chosen
// or not, as every key is parsed; what a strategy needs of the run as a whole (a layer per fragment, the
// limits of an elastic run) is checked with it. ConfigError naming the key and the fix.
#pragma once

#include "loco/config/run_config.h"

namespace loco {

void check_ddp_section(const RunConfig& config);
void check_diloco_section(const RunConfig& config);
void check_localsgd_section(const RunConfig& config);
void check_streaming_section(const RunConfig& config);
void check_noloco_section(const RunConfig& config);
void check_sparseloco_section(const RunConfig& config);

// All of the above.
void check_strategy_sections(const RunConfig& config);

// comm.codec quantises the dense exchanges of diloco and localsgd, and nothing else: with another algorithm it
// would be ignored, and a run asked for int4 would send fp32 (or another codec) without a word. Checked where a
// new run is planned from the user's settings (loco train --config, loco sweep), not in every config read: the
// checkpoints and run directories of earlier versions, which could hold such a pair, stay readable.
void require_comm_codec_used(const RunConfig& config);

}  // namespace loco
