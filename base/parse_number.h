// Strict parsing of numbers a user typed (CLI options, bench specs): plain
// decimal only, in a range, with a message that names the text on failure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace spillway {

// Decimal digits only (no sign, exponent, hex or octal), in [lo, hi].
bool ParseWholeNumber(std::string_view text, uint64_t lo, uint64_t hi, uint64_t* value, std::string* why);
// A finite decimal number in [lo, hi], or (lo, hi] when `above_lo`.
bool ParseRealNumber(std::string_view text, double lo, double hi, bool above_lo, double* value, std::string* why);

}  // namespace spillway
