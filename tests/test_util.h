// Helpers shared by the tests: scratch directories and deterministic bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace spillway::testing {

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
