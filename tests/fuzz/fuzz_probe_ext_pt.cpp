// SPDX-License-Identifier: MIT
extern const char* const kProbeExtension;
const char* const kProbeExtension = ".pt";
