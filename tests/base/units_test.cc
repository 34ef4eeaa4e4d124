// Sizes: parsing every accepted form, rejecting the rest, and formatting.
#include <doctest/doctest.h>

#include "base/units.h"

namespace spillway {
namespace {

uint64_t Bytes(const char* text) {
  StatusOr<SizeSpec> s = ParseSize(text);
  REQUIRE_MESSAGE(s.ok(), text, ": ", s.status().ToString());
  CHECK_FALSE(s->is_percent);
  return s->bytes;
}

std::string Error(const char* text) {
  StatusOr<SizeSpec> s = ParseSize(text);
  REQUIRE_MESSAGE(!s.ok(), text, " parsed unexpectedly");
  return s.status().message();
}

TEST_CASE("plain byte counts") {
  CHECK(Bytes("0") == 0);
  CHECK(Bytes("4096") == 4096);
  CHECK(Bytes("18446744073709551615") == UINT64_MAX);
  CHECK(Bytes(" 12 ") == 12);
  CHECK(Bytes("512B") == 512);
}

TEST_CASE("binary and decimal units") {
  CHECK(Bytes("1KiB") == 1024);
  CHECK(Bytes("64GiB") == 64ull << 30);
  CHECK(Bytes("2TiB") == 2ull << 40);
  CHECK(Bytes("1PiB") == 1ull << 50);
  CHECK(Bytes("256 MiB") == 256ull << 20);
  CHECK(Bytes("1KB") == 1000);
  CHECK(Bytes("500GB") == 500'000'000'000ull);
  CHECK(Bytes("3TB") == 3'000'000'000'000ull);
}

TEST_CASE("decimal fractions with units") {
  CHECK(Bytes("1.5GiB") == 3ull << 29);
  CHECK(Bytes("0.5KiB") == 512);
  CHECK(Bytes("1.5TB") == 1'500'000'000'000ull);
  CHECK(Bytes("2.25MiB") == 2359296);
}

TEST_CASE("percentages") {
  StatusOr<SizeSpec> s = ParseSize("80%");
  REQUIRE(s.ok());
  CHECK(s->is_percent);
  CHECK(s->percent == doctest::Approx(80));
  CHECK(ResolveSize(*s, 1000) == 800);
  StatusOr<SizeSpec> half = ParseSize("12.5%");
  REQUIRE(half.ok());
  CHECK(ResolveSize(*half, 1ull << 30) == (1ull << 27));
  CHECK(ResolveSize(SizeSpec{false, 0, 42}, 1000) == 42);
  CHECK(LooksLikePercent(" 5% "));
  CHECK_FALSE(LooksLikePercent("5GiB"));
}

TEST_CASE("rejected sizes say why") {
  CHECK(Error("-5GiB").find("negative") != std::string::npos);
  CHECK(Error("").find("expected") != std::string::npos);
  CHECK(Error("GiB").find("expected") != std::string::npos);
  CHECK(Error("1.5").find("whole number") != std::string::npos);
  CHECK(Error("1..5GiB").find("expected") != std::string::npos);
  CHECK(Error("5gb").find("did you mean 'GB'") != std::string::npos);
  CHECK(Error("5 gigs").find("unknown unit 'gigs'") != std::string::npos);
  CHECK(Error("0%").find("above 0") != std::string::npos);
  CHECK(Error("101%").find("at most 100") != std::string::npos);
  CHECK(Error("99999999999999999999").find("2^64") != std::string::npos);
  CHECK(Error("20000PiB").find("2^64") != std::string::npos);
  CHECK(Error("1e9").find("unknown unit") != std::string::npos);
}

TEST_CASE("formatting bytes for people") {
  CHECK(FormatBytes(0) == "0 B");
  CHECK(FormatBytes(1023) == "1023 B");
  CHECK(FormatBytes(1024) == "1 KiB");
  CHECK(FormatBytes(256ull << 20) == "256 MiB");
  CHECK(FormatBytes(3ull << 29) == "1.5 GiB");
  CHECK(FormatBytes(8ull << 40) == "8 TiB");
  CHECK(FormatBytes(1'500'000'000'000ull) == "1.36 TiB");
}

TEST_CASE("formatted sizes parse back to about the same value") {
  for (uint64_t v : {1ull << 20, 3ull << 29, 7ull << 40}) {
    std::string text = FormatBytes(v);
    text.erase(text.find(' '), 1);
    CHECK(Bytes(text.c_str()) == v);
  }
}

}  // namespace
}  // namespace spillway
