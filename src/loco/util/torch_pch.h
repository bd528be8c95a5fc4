// Precompiled header for every translation unit that uses libtorch: torch.h alone costs tens of
// seconds to parse, so it is parsed once per target.
#pragma once
#include <torch/torch.h>
