// Helpers shared by the tests: scratch directories and deterministic bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

// SPILLWAY_SANITIZED: defined when the tests are built with AddressSanitizer
// or ThreadSanitizer, whose runtimes reserve shadow address space and keep
// freed memory in quarantine (tests that bound the address space or the
// C library's heap skip under them).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPILLWAY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SPILLWAY_SANITIZED 1
#endif
#endif

namespace spillway::testing {

// Set by SPILLWAY_SKIP_TEST when the current test case skipped (read by the
// skip listener in tests/test_main.cc).
inline bool& CurrentTestSkipped() {
  static bool skipped = false;
  return skipped;
}
// The last skip's reason; never destroyed, so an exit handler can print it.
inline std::string& LastSkipReason() {
  static std::string* reason = new std::string;
  return *reason;
}

// Skips the current test case visibly: prints "SKIPPED: <reason>" and
// returns. A binary whose every test case skipped exits 77 (CTest: skipped).
#define SPILLWAY_SKIP_TEST(reason)                                    \
  do {                                                                \
    ::spillway::testing::LastSkipReason() = (reason);                 \
    MESSAGE("SKIPPED: " << ::spillway::testing::LastSkipReason());    \
    ::spillway::testing::CurrentTestSkipped() = true;                 \
    return;                                                           \
  } while (0)

// A fresh directory under $TMPDIR (or /var/tmp, which is usually a real disk
// that accepts O_DIRECT), removed when the object goes away.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "t") {
    const char* base = std::getenv("SPILLWAY_TEST_DIR");
    std::string root = base ? base : "/var/tmp";
    std::string templ = root + "/spillway-" + tag + "-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    char* p = mkdtemp(buf.data());
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::vector<std::byte> RandomBytes(size_t n, uint64_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x = rng();
    for (int b = 0; b < 8; ++b) v[i + b] = std::byte(x >> (8 * b));
  }
  for (; i < n; ++i) v[i] = std::byte(rng());
  return v;
}

// Bytes that compress well (repeating text-like records).
inline std::vector<std::byte> CompressibleBytes(size_t n, uint64_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937_64 rng(seed);
  static const char* words[] = {"alpha ", "beta ", "gamma ", "delta ", "spill ", "tier ", "\n"};
  size_t i = 0;
  while (i < n) {
    const char* w = words[rng() % 7];
    for (const char* c = w; *c && i < n; ++c) v[i++] = std::byte(*c);
  }
  return v;
}

}  // namespace spillway::testing
