// Codecs turn an object's raw bytes into the bytes a tier stores.
//
// A Codec is immutable and thread-safe: implementations keep their
// compression contexts per thread (no hidden shared state). The adaptive
// logic (store raw when data does not shrink) lives in EncodeAdaptive so every
// codec gets it once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "spillway/config.h"
#include "spillway/status.h"

namespace spillway {

class Codec {
 public:
  Codec() : instance_(NextInstance()) {}
  virtual ~Codec() = default;
  // Unique per codec object ever made (addresses may be reused): lets
  // per-codec state held elsewhere (record.cc's runs) tell codecs apart.
  uint64_t instance() const { return instance_; }
  virtual CodecKind kind() const = 0;
  // Upper bound of Encode's output for `raw_size` input bytes.
  virtual size_t MaxEncodedSize(size_t raw_size) const = 0;
  // Encodes `in` into `out` (at least MaxEncodedSize bytes); returns bytes written.
  virtual StatusOr<size_t> Encode(std::span<const std::byte> in, std::span<std::byte> out) const = 0;
  // Decodes `in` into exactly `out.size()` bytes; anything else is Corruption.
  virtual Status Decode(std::span<const std::byte> in, std::span<std::byte> out) const = 0;

 private:
  static uint64_t NextInstance() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }
  const uint64_t instance_;
};

// Returns the codec for `config` (kNone gives a copying codec). Never null.
std::unique_ptr<Codec> MakeCodec(const CodecConfig& config);

// Result of EncodeAdaptive.
struct EncodeResult {
  size_t size = 0;          // bytes written to `out`
  bool stored_raw = false;  // true: `out` holds the input unchanged (always for kNone)
};

// Encodes with `codec` unless a cheap sample shows the data will not shrink by
// `min_savings`, or the full encode does not; then copies raw. `out` must have
// room for max(MaxEncodedSize(in.size()), in.size()).
StatusOr<EncodeResult> EncodeAdaptive(const Codec& codec, double min_savings,
                                      std::span<const std::byte> in, std::span<std::byte> out);

// EncodeAdaptive's pieces, shared with the record encoder (tiers/record.cc),
// which samples a multi-buffer object once and then encodes it in chunks.
//
// Every input of at least kMinSampledInput bytes is sampled: kSampleSlices
// slices spread over it. First the order-0 entropy of the sampled bytes
// screens out random-looking data (LooksIncompressible, well under a
// microsecond); inputs of at least kSampleThreshold bytes that pass are then
// judged by compressing the slices. Smaller inputs that pass are simply
// compressed (a codec sample would cost as much as the answer).
inline constexpr size_t kMinSampledInput = 64;
inline constexpr size_t kSampleThreshold = 256u << 10;
inline constexpr size_t kSampleSlices = 4;

// Length of each sample slice for an input of `raw_size` bytes: 256 bytes
// below kSampleThreshold; above, about 1/128 of the input per slice, between
// 4 KiB and 16 KiB, so the codec sample costs at most ~3% of a full encode.
size_t SampleSliceBytes(size_t raw_size);

// Offset of sample slice `i` (< kSampleSlices): the slices are spread evenly
// from the start to the end of the input.
size_t SampleSliceOffset(size_t raw_size, size_t i);

// Order-0 entropy, in bits per byte (0..8), of up to 2 KiB of each slice,
// corrected for the small sample (Miller-Madow).
double SampleEntropyBits(std::span<const std::span<const std::byte>> slices);

// True when the slices' bytes are so evenly spread that no codec is likely to
// save `min_savings` (entropy above 8 * (1 - min_savings / 2) bits per byte).
bool LooksIncompressible(std::span<const std::span<const std::byte>> slices, double min_savings);

// True when the slices are worth compressing: they do not LooksIncompressible
// and, when they are codec-sized (from an input of kSampleThreshold or more),
// compressing them with `codec` shrinks them by `min_savings`.
StatusOr<bool> SampleShrinks(const Codec& codec, double min_savings,
                             std::span<const std::span<const std::byte>> slices);

// True when `encoded` bytes are worth keeping for `raw` input bytes: at least
// `min_savings` smaller and always strictly smaller, so a stored payload is
// never larger than the raw bytes (a record invariant the parser relies on).
bool WorthKeeping(size_t encoded, size_t raw, double min_savings);

// EncodeAdaptive without the sample: encodes fully, copies raw when the
// result is not WorthKeeping. Same `out` requirement as EncodeAdaptive.
StatusOr<EncodeResult> EncodeOrCopy(const Codec& codec, double min_savings,
                                    std::span<const std::byte> in, std::span<std::byte> out);

// xxh3-64 of `data`; the checksum of every record on disk.
uint64_t Checksum64(const void* data, size_t size, uint64_t seed = 0);

// Which build of xxh3 Checksum64 runs: "avx2" where the CPU has AVX2, else
// "generic" (the xxhash library). Same values either way (checksum_impl.h).
const char* Checksum64Implementation();

// Checksum64 computed piecewise: Digest() equals Checksum64 of all Update()
// bytes concatenated. Lets a writer hash each block right after copying it,
// while it is still in cache, instead of reading the whole object again.
class Checksum64Stream {
 public:
  explicit Checksum64Stream(uint64_t seed = 0);
  ~Checksum64Stream();
  Checksum64Stream(const Checksum64Stream&) = delete;
  Checksum64Stream& operator=(const Checksum64Stream&) = delete;
  void Update(const void* data, size_t size);
  uint64_t Digest() const;

 private:
  void* state_;  // owned by the selected implementation (checksum_impl.h); opaque so xxhash.h stays in codecs/
};

}  // namespace spillway
