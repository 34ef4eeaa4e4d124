// Sizes as written in config files and as printed back to people.
//
//   1073741824   plain bytes (a whole number)
//   64GiB 1.5TiB binary units: KiB MiB GiB TiB PiB (and B)
//   500GB 1.5TB  decimal units: KB MB GB TB PB
//   80%          a share of a total the caller supplies (device memory,
//                physical memory, filesystem size); above 0 and at most 100
// A space between number and unit is allowed; units are case-sensitive.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "spillway/status.h"

namespace spillway {

struct SizeSpec {
  bool is_percent = false;
  double percent = 0;  // 0 < percent <= 100 when is_percent
  uint64_t bytes = 0;  // when !is_percent
};

// InvalidArgument says what is wrong ("unknown unit 'gb', did you mean 'GB'?").
// Zero is accepted; callers that need a positive size check for it.
StatusOr<SizeSpec> ParseSize(std::string_view text);

bool LooksLikePercent(std::string_view text);

// Bytes that `spec` stands for, given the total a percentage refers to.
uint64_t ResolveSize(const SizeSpec& spec, uint64_t total_bytes);

// "512 B", "256 MiB", "1.5 GiB", "7.28 TiB": binary units, at most two decimals.
std::string FormatBytes(uint64_t bytes);

}  // namespace spillway
