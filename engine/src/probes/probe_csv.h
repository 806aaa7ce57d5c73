// SPDX-License-Identifier: MIT
#pragma once
// The CSV probe loader (probe_csv.cpp): one translation unit apart from the .pt loader.

#include <string>

#include "probes/probes.h"

namespace ampscope::detail {

/// A CSV probe file: columns id, tag, label, target / target_*, the rest features (numbers).
/// InputError naming the row and column of what does not parse; UTF-8 only (a BOM is skipped).
ProbeSet load_csv(const std::string& path);

}  // namespace ampscope::detail
