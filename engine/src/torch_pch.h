// SPDX-License-Identifier: MIT
// The precompiled header of the targets that include LibTorch (engine/CMakeLists.txt,
// target_precompile_headers): ATen's headers were 40% of each engine unit's compile time
// (docs/building.md). ATen and the standard library only: torch/torch.h and torch/script.h
// made the header 770 MB, loading it cost 4.4 s in every unit, more than the 11 units that
// include them save; nlohmann-json is left to the units that use it; never the engine's own
// headers (a change to one would rebuild everything).
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>
