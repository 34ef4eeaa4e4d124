// The lz4 codec: one raw LZ4 block per Encode (LZ4_compress_fast), decoded
// with LZ4_decompress_safe, which never reads or writes out of bounds on any
// input.
//
// The compression state lives per thread (thread_local, reused) and is passed
// explicitly through the *_extState API: no allocation per call and no state
// shared between threads. LZ4 blocks carry no length of their own; the record
// stores the raw size, and a block that decodes to any other size is
// Corruption.
#include <lz4.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec_factories.h"

namespace spillway {
namespace {

// The calling thread's compression state (LZ4_sizeofState bytes, aligned for
// the library's internal table of pointers).
void* ThreadLz4State() {
  thread_local std::unique_ptr<void*[]> state(
      new void*[(LZ4_sizeofState() + sizeof(void*) - 1) / sizeof(void*)]);
  return state.get();
}

class Lz4Codec final : public Codec {
 public:
  explicit Lz4Codec(int acceleration) : acceleration_(acceleration) {}

  CodecKind kind() const override { return CodecKind::kLz4; }

  size_t MaxEncodedSize(size_t raw_size) const override {
    // LZ4_compressBound is 0 beyond LZ4_MAX_INPUT_SIZE; Encode refuses such
    // inputs, so any finite bound is correct there.
    if (raw_size > LZ4_MAX_INPUT_SIZE) return raw_size + raw_size / 255 + 16;
    return static_cast<size_t>(LZ4_compressBound(static_cast<int>(raw_size)));
  }

  StatusOr<size_t> Encode(std::span<const std::byte> in, std::span<std::byte> out) const override {
    if (in.size() > LZ4_MAX_INPUT_SIZE) {
      return Status::InvalidArgument("lz4: input of " + std::to_string(in.size()) +
                                     " bytes exceeds LZ4_MAX_INPUT_SIZE (encode it in chunks)");
    }
    if (in.empty()) return size_t{0};
    const int capacity = static_cast<int>(std::min<size_t>(out.size(), INT_MAX));
    int n = LZ4_compress_fast_extState(ThreadLz4State(), reinterpret_cast<const char*>(in.data()),
                                       reinterpret_cast<char*>(out.data()),
                                       static_cast<int>(in.size()), capacity, acceleration_);
    if (n <= 0) {
      return Status::InvalidArgument("lz4 compress failed: output buffer of " +
                                     std::to_string(out.size()) + " bytes is too small for " +
                                     std::to_string(in.size()) + " input bytes");
    }
    return static_cast<size_t>(n);
  }

  Status Decode(std::span<const std::byte> in, std::span<std::byte> out) const override {
    if (in.size() > INT_MAX || out.size() > INT_MAX) {
      return Status::Corruption("lz4 decompress: block of " + std::to_string(in.size()) +
                                " bytes for " + std::to_string(out.size()) +
                                " bytes exceeds the lz4 block limit");
    }
    if (in.empty()) {
      if (out.empty()) return Status::OK();
      return Status::Corruption("lz4 decompress: empty input for " +
                                std::to_string(out.size()) + " bytes");
    }
    int n = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data()),
                                reinterpret_cast<char*>(out.data()), static_cast<int>(in.size()),
                                static_cast<int>(out.size()));
    if (n < 0) return Status::Corruption("lz4 decompress: malformed block");
    if (static_cast<size_t>(n) != out.size()) {
      return Status::Corruption("lz4 decompress: produced " + std::to_string(n) +
                                " bytes, expected " + std::to_string(out.size()));
    }
    return Status::OK();
  }

 private:
  const int acceleration_;
};

}  // namespace

std::unique_ptr<Codec> NewLz4Codec(int acceleration) {
  if (acceleration <= 0) acceleration = kLz4DefaultAcceleration;
  return std::make_unique<Lz4Codec>(acceleration);
}

}  // namespace spillway
