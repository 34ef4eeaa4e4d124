// The on-disk record (record.h): encoding, validation and decoding. The byte
// layout is documented in docs/format.md; keep the two in step.
//
// Encoding decides once per object: a codec that is not kNone first samples
// the object (EncodeAdaptive's sampler); data the sample says will not shrink
// is copied raw without compressing it. Otherwise objects up to the chunk size
// become one codec frame, and larger ones independent chunks, encoded in
// parallel when there are many, so a reader can decode them in parallel too.
//
// Parsing trusts nothing: every size read from the input is checked against
// the limits in record.h and against the input length before it is used to
// allocate, index or copy.
#include "tiers/record.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>

#include "base/align.h"
#include "base/thread_pool.h"

namespace spillway {
namespace {

// Header field offsets (docs/format.md). Little-endian on disk whatever the host.
enum : size_t {
  kOffMagic = 0, kOffVersion = 4, kOffCodec = 6, kOffFlags = 7, kOffKeyLen = 8,
  kOffNumBuffers = 12, kOffRawSize = 16, kOffStoredSize = 24, kOffChunkBytes = 32,
  kOffNumChunks = 36, kOffSequence = 40, kOffPayloadChecksum = 48, kOffHeaderChecksum = 56,
};

template <typename T>
void PutLE(std::byte* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = std::byte(static_cast<uint8_t>(v >> (8 * i)));
}

template <typename T>
T GetLE(const std::byte* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// Raw payloads of at least this size are hashed while they are copied, in
// blocks that stay in L2 between the copy and the hash.
inline constexpr uint64_t kHashWhileCopyingBytes = 1u << 20;
inline constexpr size_t kCopyBlockBytes = 128u << 10;

uint64_t DivCeil(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Bytes after the header up to the end of the payload, i.e. what
// payload_checksum covers.
uint64_t BodySize(const RecordHeader& h) {
  return uint64_t{h.key_len} + 8ull * h.num_buffers + 4ull * h.num_chunks + h.stored_size;
}

void WriteHeader(const RecordHeader& h, std::byte* p) {
  PutLE<uint32_t>(p + kOffMagic, h.magic);
  PutLE<uint16_t>(p + kOffVersion, h.version);
  PutLE<uint8_t>(p + kOffCodec, h.codec);
  PutLE<uint8_t>(p + kOffFlags, h.flags);
  PutLE<uint32_t>(p + kOffKeyLen, h.key_len);
  PutLE<uint32_t>(p + kOffNumBuffers, h.num_buffers);
  PutLE<uint64_t>(p + kOffRawSize, h.raw_size);
  PutLE<uint64_t>(p + kOffStoredSize, h.stored_size);
  PutLE<uint32_t>(p + kOffChunkBytes, h.chunk_bytes);
  PutLE<uint32_t>(p + kOffNumChunks, h.num_chunks);
  PutLE<uint64_t>(p + kOffSequence, h.sequence);
  PutLE<uint64_t>(p + kOffPayloadChecksum, h.payload_checksum);
  PutLE<uint64_t>(p + kOffHeaderChecksum, h.header_checksum);
}

RecordHeader ReadHeader(const std::byte* p) {
  RecordHeader h;
  h.magic = GetLE<uint32_t>(p + kOffMagic);
  h.version = GetLE<uint16_t>(p + kOffVersion);
  h.codec = GetLE<uint8_t>(p + kOffCodec);
  h.flags = GetLE<uint8_t>(p + kOffFlags);
  h.key_len = GetLE<uint32_t>(p + kOffKeyLen);
  h.num_buffers = GetLE<uint32_t>(p + kOffNumBuffers);
  h.raw_size = GetLE<uint64_t>(p + kOffRawSize);
  h.stored_size = GetLE<uint64_t>(p + kOffStoredSize);
  h.chunk_bytes = GetLE<uint32_t>(p + kOffChunkBytes);
  h.num_chunks = GetLE<uint32_t>(p + kOffNumChunks);
  h.sequence = GetLE<uint64_t>(p + kOffSequence);
  h.payload_checksum = GetLE<uint64_t>(p + kOffPayloadChecksum);
  h.header_checksum = GetLE<uint64_t>(p + kOffHeaderChecksum);
  return h;
}

// The object's buffers seen as one byte range, without copying them.
class ConcatView {
 public:
  explicit ConcatView(std::span<const std::span<const std::byte>> buffers) : buffers_(buffers) {
    starts_.reserve(buffers.size());
    uint64_t off = 0;
    for (const auto& b : buffers) {
      starts_.push_back(off);
      off += b.size();
    }
  }

  // Bytes [off, off + len): a view into the buffer that holds them all when
  // one does (the common case, no copy), else gathered into scratch(len).
  template <typename ScratchFn>
  std::span<const std::byte> Range(uint64_t off, size_t len, ScratchFn&& scratch) const {
    size_t b = Find(off);
    if (b < buffers_.size() && off + len <= starts_[b] + buffers_[b].size()) {
      return buffers_[b].subspan(off - starts_[b], len);
    }
    std::byte* dst = scratch(len);
    Copy(off, len, dst);
    return {dst, len};
  }

  void Copy(uint64_t off, size_t len, std::byte* dst) const {
    for (size_t b = Find(off); len > 0 && b < buffers_.size(); ++b) {
      size_t from = off - starts_[b];
      size_t n = std::min(len, buffers_[b].size() - from);
      if (n > 0) std::memcpy(dst, buffers_[b].data() + from, n);
      dst += n;
      off += n;
      len -= n;
    }
  }

 private:
  // The last buffer starting at or before `off`: skips zero-length buffers.
  size_t Find(uint64_t off) const {
    auto it = std::upper_bound(starts_.begin(), starts_.end(), off);
    return it == starts_.begin() ? 0 : static_cast<size_t>(it - starts_.begin() - 1);
  }

  std::span<const std::span<const std::byte>> buffers_;
  std::vector<uint64_t> starts_;
};

// Per-thread gather buffer for inputs that cross buffer boundaries; holds at
// most one chunk (or one unchunked object no larger than a chunk).
std::byte* GatherScratch(size_t n) {
  thread_local std::vector<std::byte> scratch;
  if (scratch.size() < n) scratch.resize(n);
  return scratch.data();
}

// Runs of incompressible objects, per thread and codec. Spilled data comes in
// runs of one kind (a column, a tensor, a batch of encrypted blobs): after
// kRawRunBeforeSkipping objects in a row that were not worth compressing,
// only every kProbeEvery-th object is sampled and the rest are stored raw at
// once, so such a run costs what codec none costs. A probe that finds
// compressible data ends the run; until then at most kProbeEvery - 1 objects
// that would have compressed are stored raw (bytes, never correctness).
constexpr uint32_t kRawRunBeforeSkipping = 8;
constexpr uint32_t kProbeEvery = 8;
struct RawRun {
  uint64_t codec = 0;  // Codec::instance()
  uint32_t length = 0;
  uint32_t skipped = 0;
};

// Runs the object-level sample; true when it is worth compressing.
StatusOr<bool> SampleObject(const ConcatView& view, uint64_t raw, const Codec& codec,
                            double min_savings) {
  if (raw < kMinSampledInput) return true;
  thread_local RawRun run;
  if (run.codec != codec.instance()) run = RawRun{codec.instance(), 0, 0};
  if (run.length >= kRawRunBeforeSkipping && ++run.skipped % kProbeEvery != 0) return false;
  const size_t slice = SampleSliceBytes(raw);
  thread_local std::vector<std::byte> scratch;
  scratch.resize(kSampleSlices * slice);
  std::span<const std::byte> slices[kSampleSlices];
  for (size_t i = 0; i < kSampleSlices; ++i) {
    slices[i] = view.Range(SampleSliceOffset(raw, i), slice,
                           [&](size_t) { return scratch.data() + i * slice; });
  }
  StatusOr<bool> shrinks = SampleShrinks(codec, min_savings, slices);
  if (shrinks.ok()) run.length = *shrinks ? 0 : run.length + 1;
  return shrinks;
}

// The stored bytes of one chunk (or of an unchunked object) and whether they
// are raw.
struct ChunkOut {
  Status status;
  size_t size = 0;
  bool raw = false;
};

ChunkOut EncodeChunk(const ConcatView& view, uint64_t off, size_t len, const Codec& codec,
                     double min_savings, std::span<std::byte> out) {
  std::span<const std::byte> in = view.Range(off, len, GatherScratch);
  StatusOr<EncodeResult> r = EncodeOrCopy(codec, min_savings, in, out);
  if (!r.ok()) return ChunkOut{r.status()};
  return ChunkOut{Status::OK(), r->size, r->stored_raw};
}

// Encodes all chunks into payload and fills `table`; returns the stored size.
StatusOr<uint64_t> EncodeChunks(const ConcatView& view, uint64_t raw, uint64_t chunk,
                                const Codec& codec, double min_savings, std::byte* payload,
                                std::span<uint32_t> table) {
  const size_t n = table.size();
  const size_t slot = std::max<size_t>(codec.MaxEncodedSize(chunk), chunk);
  auto chunk_len = [&](size_t i) { return static_cast<size_t>(std::min(chunk, raw - i * chunk)); };
  std::vector<ChunkOut> outs(n);
  uint64_t cursor = 0;
  if (n >= kParallelChunks && ParallelWidth() > 1) {
    // Each chunk goes to its own slot of `slot` bytes (MaxRecordSize reserves
    // them), then the results are moved down to be contiguous.
    ParallelFor(n, [&](size_t i) {
      outs[i] = EncodeChunk(view, i * chunk, chunk_len(i), codec, min_savings,
                            {payload + i * slot, slot});
    });
    for (size_t i = 0; i < n; ++i) {
      if (!outs[i].status.ok()) return outs[i].status.WithContext("chunk " + std::to_string(i));
      if (i > 0) std::memmove(payload + cursor, payload + i * slot, outs[i].size);
      cursor += outs[i].size;
    }
  } else {
    // Serially the write cursor never passes chunk i's slot start, so each
    // chunk can be written in place.
    for (size_t i = 0; i < n; ++i) {
      outs[i] = EncodeChunk(view, i * chunk, chunk_len(i), codec, min_savings,
                            {payload + cursor, slot});
      if (!outs[i].status.ok()) return outs[i].status.WithContext("chunk " + std::to_string(i));
      cursor += outs[i].size;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    table[i] = static_cast<uint32_t>(outs[i].size) | (outs[i].raw ? kChunkStoredRawBit : 0u);
  }
  return cursor;
}

const Codec& DecoderFor(CodecKind kind) {
  // Decoding does not depend on the level, so one default codec per kind serves.
  auto make = [](CodecKind k) {
    CodecConfig config;
    config.kind = k;
    return MakeCodec(config);
  };
  static const std::unique_ptr<Codec> codecs[] = {
      make(CodecKind::kNone), make(CodecKind::kZstd), make(CodecKind::kLz4)};
  return *codecs[static_cast<size_t>(kind)];
}

Status ValidateHeader(const RecordHeader& h) {
  auto bad = [](std::string what) { return Status::Corruption("record header: " + what); };
  const bool chunked = h.flags & kFlagChunked;
  const bool stored_raw = h.flags & kFlagStoredRaw;
  if (h.codec > static_cast<uint8_t>(CodecKind::kLz4)) {
    return bad("unknown codec id " + std::to_string(h.codec));
  }
  if (h.flags & ~(kFlagStoredRaw | kFlagChunked | kFlagErased | kFlagEngineSequence)) {
    return bad("unknown flags " + std::to_string(h.flags));
  }
  if (h.key_len > kMaxKeyLen) return bad("key length " + std::to_string(h.key_len) + " over limit");
  if (h.num_buffers > kMaxBuffers) {
    return bad("buffer count " + std::to_string(h.num_buffers) + " over limit");
  }
  if (h.raw_size > kMaxObjectBytes) {
    return bad("raw size " + std::to_string(h.raw_size) + " over limit");
  }
  if (h.stored_size > h.raw_size) {
    return bad("stored size " + std::to_string(h.stored_size) + " exceeds raw size " +
               std::to_string(h.raw_size));
  }
  // kFlagErased is set in place on any record (MarkRecordErased) and
  // kFlagEngineSequence on every new one; neither says anything about the
  // payload.
  if (h.codec == static_cast<uint8_t>(CodecKind::kNone) &&
      (h.flags & ~(kFlagErased | kFlagEngineSequence)) != 0) {
    return bad("flags set on a record without codec");
  }
  if (chunked) {
    if (stored_raw) return bad("both stored-raw and chunked flags set");
    if (h.chunk_bytes < kMinChunkBytes || h.chunk_bytes > kMaxChunkBytes) {
      return bad("chunk size " + std::to_string(h.chunk_bytes) + " out of range");
    }
    if (h.raw_size <= h.chunk_bytes || h.num_chunks != DivCeil(h.raw_size, h.chunk_bytes)) {
      return bad("chunk count " + std::to_string(h.num_chunks) + " inconsistent with raw size " +
                 std::to_string(h.raw_size));
    }
    return Status::OK();
  }
  if (h.chunk_bytes != 0 || h.num_chunks != 0) return bad("chunk fields set on an unchunked record");
  const bool raw_payload = stored_raw || h.codec == static_cast<uint8_t>(CodecKind::kNone);
  if (raw_payload ? h.stored_size != h.raw_size : h.stored_size == 0 || h.stored_size >= h.raw_size) {
    return bad("stored size " + std::to_string(h.stored_size) + " inconsistent with raw size " +
               std::to_string(h.raw_size));
  }
  return Status::OK();
}

}  // namespace

uint64_t RecordChunkBytes(const CodecConfig& config) {
  if (config.chunk_bytes == 0) return kDefaultChunkBytes;
  return std::clamp(config.chunk_bytes, kMinChunkBytes, kMaxChunkBytes);
}

size_t RecordSize(const RecordHeader& h) { return AlignUp(kRecordHeaderSize + BodySize(h), kRecordAlign); }
size_t RecordBodySize(const RecordHeader& h) { return BodySize(h); }

uint64_t RecordSeed(uint32_t segment_id, uint64_t offset) {
  // Both inputs through distinct odd multipliers: distinct positions give
  // distinct seeds for any segment id and any offset below 2^64.
  return (offset + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t{segment_id} + 1) * 0xC2B2AE3D27D4EB4Full;
}

void ResealRecordHeader(std::byte* header, uint64_t seed) {
  PutLE<uint64_t>(header + kOffHeaderChecksum, Checksum64(header, kOffHeaderChecksum, seed));
}

size_t MaxRecordSize(size_t key_len, size_t num_buffers, uint64_t raw_size, const Codec& codec,
                     const CodecConfig& config) {
  uint64_t fixed = kRecordHeaderSize + key_len + 8ull * num_buffers;
  if (codec.kind() == CodecKind::kNone) return AlignUp(fixed + raw_size, kRecordAlign);
  const uint64_t chunk = RecordChunkBytes(config);
  if (raw_size > chunk) {
    uint64_t n = DivCeil(raw_size, chunk);
    uint64_t slot = std::max<uint64_t>(codec.MaxEncodedSize(chunk), chunk);
    return AlignUp(fixed + 4 * n + n * slot, kRecordAlign);
  }
  return AlignUp(fixed + std::max<uint64_t>(codec.MaxEncodedSize(raw_size), raw_size), kRecordAlign);
}

StatusOr<size_t> EncodeRecord(const ObjectView& object, uint64_t sequence, const Codec& codec,
                              const CodecConfig& config, std::span<std::byte> out,
                              uint64_t seed) {
  const uint64_t raw = object.raw_size();
  if (object.key.size() > kMaxKeyLen) {
    return Status::InvalidArgument("key of " + std::to_string(object.key.size()) +
                                   " bytes exceeds the " + std::to_string(kMaxKeyLen) + " limit");
  }
  if (object.buffers.size() > kMaxBuffers || raw > kMaxObjectBytes) {
    return Status::InvalidArgument("object of " + std::to_string(object.buffers.size()) +
                                   " buffers and " + std::to_string(raw) +
                                   " bytes exceeds the record limits");
  }
  const size_t need = MaxRecordSize(object.key.size(), object.buffers.size(), raw, codec, config);
  if (out.size() < need) {
    return Status::InvalidArgument("record buffer of " + std::to_string(out.size()) +
                                   " bytes, need " + std::to_string(need));
  }
  const ConcatView view(object.buffers);
  const bool compress = codec.kind() != CodecKind::kNone;
  bool stored_raw = compress && raw == 0;
  if (compress && raw > 0) {
    StatusOr<bool> shrinks = SampleObject(view, raw, codec, config.min_savings);
    if (!shrinks.ok()) return shrinks.status();
    stored_raw = !*shrinks;
  }
  const uint64_t chunk = RecordChunkBytes(config);
  const bool chunked = compress && !stored_raw && raw > chunk;

  RecordHeader h{};
  h.magic = kRecordMagic;
  h.version = kRecordVersion;
  h.codec = static_cast<uint8_t>(codec.kind());
  h.key_len = static_cast<uint32_t>(object.key.size());
  h.num_buffers = static_cast<uint32_t>(object.buffers.size());
  h.raw_size = raw;
  h.chunk_bytes = chunked ? static_cast<uint32_t>(chunk) : 0;
  h.num_chunks = chunked ? static_cast<uint32_t>(DivCeil(raw, chunk)) : 0;
  h.sequence = sequence;

  std::byte* p = out.data() + kRecordHeaderSize;
  if (!object.key.empty()) std::memcpy(p, object.key.data(), object.key.size());
  p += object.key.size();
  for (const auto& b : object.buffers) {
    PutLE<uint64_t>(p, b.size());
    p += 8;
  }
  std::byte* table_at = p;
  std::byte* payload = p + 4ull * h.num_chunks;
  std::optional<uint64_t> payload_checksum;
  if (!compress || stored_raw) {
    // Straight from the caller's buffers, no gather. Large payloads are hashed
    // block by block right after each copy, while the block is still in
    // cache: one pass over memory instead of two.
    if (raw >= kHashWhileCopyingBytes) {
      Checksum64Stream sum;
      sum.Update(out.data() + kRecordHeaderSize, payload - (out.data() + kRecordHeaderSize));
      for (uint64_t off = 0; off < raw; off += kCopyBlockBytes) {
        const size_t n = std::min<uint64_t>(kCopyBlockBytes, raw - off);
        view.Copy(off, n, payload + off);
        sum.Update(payload + off, n);
      }
      payload_checksum = sum.Digest();
    } else {
      view.Copy(0, raw, payload);
    }
    h.stored_size = raw;
  } else if (!chunked) {
    ChunkOut r = EncodeChunk(view, 0, raw, codec, config.min_savings,
                             {payload, static_cast<size_t>(out.data() + out.size() - payload)});
    if (!r.status.ok()) return r.status;
    h.stored_size = r.size;
    stored_raw = r.raw;
  } else {
    std::vector<uint32_t> table(h.num_chunks);
    StatusOr<uint64_t> stored =
        EncodeChunks(view, raw, chunk, codec, config.min_savings, payload, table);
    if (!stored.ok()) return stored.status();
    h.stored_size = *stored;
    for (uint32_t entry : table) {
      PutLE<uint32_t>(table_at, entry);
      table_at += 4;
    }
  }
  h.flags = static_cast<uint8_t>((chunked ? kFlagChunked : 0) |
                                 (compress && stored_raw ? kFlagStoredRaw : 0) | kFlagEngineSequence);

  const size_t body = BodySize(h);
  const size_t size = RecordSize(h);
  std::memset(out.data() + kRecordHeaderSize + body, 0, size - kRecordHeaderSize - body);
  h.payload_checksum = payload_checksum ? *payload_checksum
                                        : Checksum64(out.data() + kRecordHeaderSize, body);
  WriteHeader(h, out.data());
  ResealRecordHeader(out.data(), seed);
  return size;
}

Status RawRecordStream::Start(const ObjectView& object, uint64_t sequence) {
  raw_ = object.raw_size();
  if (object.key.size() > kMaxKeyLen) {
    return Status::InvalidArgument("key of " + std::to_string(object.key.size()) +
                                   " bytes exceeds the " + std::to_string(kMaxKeyLen) + " limit");
  }
  if (object.buffers.size() > kMaxBuffers || raw_ > kMaxObjectBytes) {
    return Status::InvalidArgument("object of " + std::to_string(object.buffers.size()) +
                                   " buffers and " + std::to_string(raw_) +
                                   " bytes exceeds the record limits");
  }
  buffers_ = object.buffers;
  sequence_ = sequence;
  key_len_ = static_cast<uint32_t>(object.key.size());
  prefix_.assign(kRecordHeaderSize + object.key.size() + 8 * object.buffers.size(), std::byte{0});
  std::byte* p = prefix_.data() + kRecordHeaderSize;
  if (!object.key.empty()) std::memcpy(p, object.key.data(), object.key.size());
  p += object.key.size();
  for (const auto& b : object.buffers) {
    PutLE<uint64_t>(p, b.size());
    p += 8;
  }
  size_ = AlignUp(prefix_.size() + raw_, kRecordAlign);
  sum_ = std::make_unique<Checksum64Stream>();
  pos_ = 0, buf_ = 0, buf_off_ = 0;
  return Status::OK();
}

void RawRecordStream::Next(std::span<std::byte> dst) {
  std::byte* out = dst.data();
  uint64_t n = std::min<uint64_t>(dst.size(), size_ - pos_);
  if (pos_ < prefix_.size() && n > 0) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n, prefix_.size() - pos_));
    std::memcpy(out, prefix_.data() + pos_, k);
    // The checksum starts after the header.
    const uint64_t from = std::max<uint64_t>(pos_, kRecordHeaderSize);
    if (pos_ + k > from) sum_->Update(prefix_.data() + from, pos_ + k - from);
    pos_ += k, out += k, n -= k;
  }
  const uint64_t payload_end = prefix_.size() + raw_;
  while (n > 0 && pos_ < payload_end) {
    while (buf_off_ == buffers_[buf_].size()) ++buf_, buf_off_ = 0;  // skips empty buffers
    const std::span<const std::byte>& b = buffers_[buf_];
    const size_t k = static_cast<size_t>(std::min<uint64_t>({n, b.size() - buf_off_, kCopyBlockBytes}));
    std::memcpy(out, b.data() + buf_off_, k);
    sum_->Update(out, k);  // still in cache
    buf_off_ += k, pos_ += k, out += k, n -= k;
  }
  if (n > 0) {  // padding
    std::memset(out, 0, n);
    pos_ += n;
  }
}

void RawRecordStream::FinishHeader(std::byte* header, uint64_t seed) const {
  RecordHeader h{};
  h.magic = kRecordMagic;
  h.version = kRecordVersion;
  h.codec = static_cast<uint8_t>(CodecKind::kNone);
  h.flags = kFlagEngineSequence;
  h.key_len = key_len_;
  h.num_buffers = static_cast<uint32_t>(buffers_.size());
  h.raw_size = raw_;
  h.stored_size = raw_;
  h.sequence = sequence_;
  h.payload_checksum = sum_->Digest();
  WriteHeader(h, header);
  ResealRecordHeader(header, seed);
}

StatusOr<RecordHeader> ParseRecordHeader(std::span<const std::byte> data, uint64_t seed) {
  if (data.size() < kRecordHeaderSize) {
    return Status::Corruption("truncated record header: " + std::to_string(data.size()) +
                              " of " + std::to_string(kRecordHeaderSize) + " bytes");
  }
  RecordHeader h = ReadHeader(data.data());
  if (h.magic != kRecordMagic) return Status::Corruption("bad record magic");
  if (h.version != kRecordVersion) {
    return Status::Corruption("unsupported record version " + std::to_string(h.version));
  }
  if (Checksum64(data.data(), kOffHeaderChecksum, seed) != h.header_checksum) {
    return Status::Corruption("record header checksum mismatch");
  }
  SPILLWAY_RETURN_IF_ERROR(ValidateHeader(h));
  return h;
}

namespace {

// The key and tables after a validated header `h`, from `p` (the byte after
// the header). REQUIRES: the header and tables lie inside the caller's data.
StatusOr<RecordInfo> ParseTables(const RecordHeader& h, const std::byte* p) {
  RecordInfo info;
  info.header = h;
  info.record_size = RecordSize(h);
  info.key = std::string_view(reinterpret_cast<const char*>(p), h.key_len);
  p += h.key_len;
  info.buffer_sizes.resize(h.num_buffers);
  uint64_t sum = 0;
  for (auto& s : info.buffer_sizes) {
    s = GetLE<uint64_t>(p);
    p += 8;
    if (s > h.raw_size - sum) return Status::Corruption("record buffer sizes exceed raw size");
    sum += s;
  }
  if (sum != h.raw_size) {
    return Status::Corruption("record buffer sizes sum to " + std::to_string(sum) +
                              ", header says " + std::to_string(h.raw_size));
  }
  info.chunk_sizes.resize(h.num_chunks);
  uint64_t stored = 0;
  for (uint32_t i = 0; i < h.num_chunks; ++i) {
    const uint32_t entry = GetLE<uint32_t>(p);
    p += 4;
    const uint64_t raw_len = std::min<uint64_t>(h.chunk_bytes, h.raw_size - uint64_t{i} * h.chunk_bytes);
    const uint64_t len = entry & ~kChunkStoredRawBit;
    const bool ok = (entry & kChunkStoredRawBit) ? len == raw_len : len > 0 && len < raw_len;
    if (!ok) return Status::Corruption("record chunk " + std::to_string(i) + " has a bad size");
    info.chunk_sizes[i] = entry;
    stored += len;
  }
  if (h.num_chunks > 0 && stored != h.stored_size) {
    return Status::Corruption("record chunk sizes disagree with the stored size");
  }
  info.payload_offset = kRecordHeaderSize + BodySize(h) - h.stored_size;
  return info;
}

}  // namespace

size_t RecordPrefixSize(const RecordHeader& h) {
  return kRecordHeaderSize + h.key_len + 8ull * h.num_buffers + 4ull * h.num_chunks;
}

StatusOr<RecordInfo> ParseRecordPrefix(std::span<const std::byte> data, uint64_t seed) {
  StatusOr<RecordHeader> parsed = ParseRecordHeader(data, seed);
  if (!parsed.ok()) return parsed.status();
  if (data.size() < RecordPrefixSize(*parsed)) {
    return Status::Corruption("truncated record tables: " + std::to_string(data.size()) + " of " +
                              std::to_string(RecordPrefixSize(*parsed)) + " bytes");
  }
  return ParseTables(*parsed, data.data() + kRecordHeaderSize);
}

StatusOr<RecordInfo> ParseRecord(std::span<const std::byte> data, uint64_t seed) {
  StatusOr<RecordHeader> parsed = ParseRecordHeader(data, seed);
  if (!parsed.ok()) return parsed.status();
  const RecordHeader& h = *parsed;
  const size_t size = RecordSize(h);
  if (data.size() < size) {
    return Status::Corruption("truncated record: " + std::to_string(data.size()) + " of " +
                              std::to_string(size) + " bytes");
  }
  // From here every table lies inside `data`, so allocations below are
  // bounded by the input length.
  const size_t body = BodySize(h);
  const std::byte* p = data.data() + kRecordHeaderSize;
  if (Checksum64(p, body) != h.payload_checksum) {
    return Status::Corruption("record payload checksum mismatch");
  }
  for (size_t i = kRecordHeaderSize + body; i < size; ++i) {
    if (data[i] != std::byte{0}) return Status::Corruption("record padding is not zero");
  }
  return ParseTables(h, p);
}

Status DecodeRecordPayload(const RecordInfo& info, std::span<const std::byte> data,
                           std::span<std::byte> out) {
  const RecordHeader& h = info.header;
  SPILLWAY_RETURN_IF_ERROR(ValidateHeader(h));  // cheap; guards a hand-built `info`
  if (out.size() != h.raw_size) {
    return Status::InvalidArgument("decode: output of " + std::to_string(out.size()) +
                                   " bytes for a record of " + std::to_string(h.raw_size));
  }
  if (info.payload_offset > data.size() || data.size() - info.payload_offset < h.stored_size ||
      info.chunk_sizes.size() != h.num_chunks) {
    return Status::InvalidArgument("decode: record info does not match the record bytes");
  }
  std::span<const std::byte> payload = data.subspan(info.payload_offset, h.stored_size);
  const Codec& codec = DecoderFor(static_cast<CodecKind>(h.codec));
  if (!(h.flags & kFlagChunked)) {
    const Codec& c = (h.flags & kFlagStoredRaw) ? DecoderFor(CodecKind::kNone) : codec;
    return c.Decode(payload, out).WithContext("record payload");
  }
  std::vector<uint64_t> starts(h.num_chunks + 1, 0);
  for (size_t i = 0; i < h.num_chunks; ++i) {
    starts[i + 1] = starts[i] + (info.chunk_sizes[i] & ~kChunkStoredRawBit);
  }
  if (starts.back() != h.stored_size) {
    return Status::InvalidArgument("decode: chunk table does not match the stored size");
  }
  std::vector<Status> results(h.num_chunks);
  auto decode_one = [&](size_t i) {
    const uint64_t off = i * uint64_t{h.chunk_bytes};
    const size_t len = std::min<uint64_t>(h.chunk_bytes, h.raw_size - off);
    const Codec& c =
        (info.chunk_sizes[i] & kChunkStoredRawBit) ? DecoderFor(CodecKind::kNone) : codec;
    results[i] = c.Decode(payload.subspan(starts[i], starts[i + 1] - starts[i]),
                          out.subspan(off, len));
  };
  if (h.num_chunks >= kParallelChunks) {
    ParallelFor(h.num_chunks, decode_one);
  } else {
    for (size_t i = 0; i < h.num_chunks; ++i) decode_one(i);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) return results[i].WithContext("record chunk " + std::to_string(i));
  }
  return Status::OK();
}

}  // namespace spillway
