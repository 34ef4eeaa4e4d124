// The on-disk record: how one object is laid out in a file tier's segment.
// Documented in docs/format.md; the enum values and field offsets never change.
//
//   RecordHeader (64 bytes, little-endian)
//   key bytes                      (key_len)
//   u64 buffer sizes               (num_buffers)
//   u32 stored chunk sizes         (num_chunks, only when kFlagChunked)
//   payload                        (stored_size bytes)
//   zero padding to a multiple of kRecordAlign
//
// header_checksum covers header bytes [0, 56), seeded with the record's
// position (RecordSeed: segment id and offset), so a record is valid only where
// it was written: a well-formed record stored inside another object's payload,
// or copied from another segment, never passes when a scan lands on it.
// payload_checksum covers everything after the header up to the end of the
// payload (key, tables, payload), so a record is self-describing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/codec.h"
#include "spillway/status.h"

namespace spillway {

inline constexpr uint32_t kRecordMagic = 0x52575053;  // "SPWR"
inline constexpr uint16_t kRecordVersion = 2;  // 2: position-seeded header checksum
inline constexpr size_t kRecordHeaderSize = 64;
inline constexpr size_t kRecordAlign = 8;
// Sanity limits checked before anything is allocated from on-disk sizes.
inline constexpr uint32_t kMaxKeyLen = 64u << 10;
inline constexpr uint32_t kMaxBuffers = 1u << 16;
inline constexpr uint64_t kMaxObjectBytes = 1ull << 40;

// Chunking (docs/format.md "Chunked payloads"). config.chunk_bytes is clamped
// into [kMinChunkBytes, kMaxChunkBytes] (0 means the default, 1 MiB): the
// chunk table's u32 entries need a free high bit, and tiny chunks would make
// the table and the per-chunk codec overhead dominate.
inline constexpr uint64_t kMinChunkBytes = 4u << 10;
inline constexpr uint64_t kMaxChunkBytes = 1u << 30;
inline constexpr uint64_t kDefaultChunkBytes = 1u << 20;
// Chunk table entry: the low 31 bits are the chunk's stored size; this bit
// set means the chunk is stored raw (it did not shrink).
inline constexpr uint32_t kChunkStoredRawBit = 0x80000000u;
// Records with at least this many chunks are encoded and decoded in parallel.
inline constexpr uint32_t kParallelChunks = 8;

enum RecordFlags : uint8_t {
  kFlagStoredRaw = 1,  // codec configured but payload stored raw (did not shrink)
  kFlagChunked = 2,    // payload is num_chunks independently encoded chunks
  kFlagErased = 4,     // the object was erased or moved away; scanners skip the record
  // `sequence` is the object version's number from the engine-wide counter
  // (kept by copies the mover makes), so it orders records across all the
  // persistent tiers of a chain. Records written before this flag existed
  // lack it: their sequence orders records within one tier only.
  kFlagEngineSequence = 8,
};

struct RecordHeader {
  uint32_t magic;
  uint16_t version;
  uint8_t codec;  // CodecKind
  uint8_t flags;  // RecordFlags
  uint32_t key_len;
  uint32_t num_buffers;
  uint64_t raw_size;     // sum of buffer sizes
  uint64_t stored_size;  // payload bytes on disk
  uint32_t chunk_bytes;  // raw bytes per chunk (last may be shorter); 0 when not chunked
  uint32_t num_chunks;
  uint64_t sequence;     // the object version's number (newest wins on recovery; see kFlagEngineSequence)
  uint64_t payload_checksum;
  uint64_t header_checksum;
};
static_assert(sizeof(RecordHeader) == kRecordHeaderSize);

// An object as the caller sees it: a key and one or more byte buffers.
struct ObjectView {
  std::string_view key;
  std::span<const std::span<const std::byte>> buffers;
  // The version's sequence number for its record (the engine's, kept across
  // copies); 0: the tier numbers the record itself.
  uint64_t sequence = 0;
  uint64_t raw_size() const {
    uint64_t n = 0;
    for (auto& b : buffers) n += b.size();
    return n;
  }
};

// The header-checksum seed of a record at `offset` in segment `segment_id`.
// Callers without a position (tests, fuzzers, in-memory records) use 0.
uint64_t RecordSeed(uint32_t segment_id, uint64_t offset);

// The chunk size EncodeRecord uses for `config` (clamped as described above).
uint64_t RecordChunkBytes(const CodecConfig& config);

// Upper bound of the encoded record length (including padding).
size_t MaxRecordSize(size_t key_len, size_t num_buffers, uint64_t raw_size, const Codec& codec,
                     const CodecConfig& config);

// Encodes `object` as a record into `out` (at least MaxRecordSize bytes) and
// returns the record length (a multiple of kRecordAlign). Chunks are encoded
// in parallel when the object is large.
// `seed` seeds the header checksum (RecordSeed); a writer that learns the
// record's position only after encoding calls ResealRecordHeader.
StatusOr<size_t> EncodeRecord(const ObjectView& object, uint64_t sequence, const Codec& codec,
                              const CodecConfig& config, std::span<std::byte> out,
                              uint64_t seed = 0);

// Rewrites the header checksum of an encoded header (kRecordHeaderSize bytes)
// with `seed`, e.g. once the record's place in a segment is known.
void ResealRecordHeader(std::byte* header, uint64_t seed);

// Produces the record EncodeRecord would make with codec none, a piece at a
// time, so a writer can stream a large object to disk through a few bounded
// buffers instead of staging the whole record: without a codec the layout
// follows from the object alone. The payload is hashed right after each copy,
// while it is still in cache. The header holds the checksum of everything
// after it, so it is known only at the end: Next() writes zeros in its place
// and FinishHeader() writes it once every byte has been produced.
//
// REQUIRES: the object's buffers stay alive and unchanged until FinishHeader.
class RawRecordStream {
 public:
  // InvalidArgument, as EncodeRecord, for an object over the record limits.
  Status Start(const ObjectView& object, uint64_t sequence);
  // Record length, padded (what EncodeRecord returns).
  uint64_t size() const { return size_; }
  // Bytes produced so far.
  uint64_t produced() const { return pos_; }
  // Writes the next dst.size() bytes of the record (at most size() -
  // produced()); pieces come in order.
  void Next(std::span<std::byte> dst);
  // After all size() bytes were produced: writes the final header
  // (kRecordHeaderSize bytes) over the zeros, sealed with `seed` (RecordSeed).
  void FinishHeader(std::byte* header, uint64_t seed) const;

 private:
  std::span<const std::span<const std::byte>> buffers_;
  std::vector<std::byte> prefix_;  // header zeros, key, buffer sizes
  std::unique_ptr<Checksum64Stream> sum_;
  uint64_t raw_ = 0, sequence_ = 0, size_ = 0, pos_ = 0;
  size_t buf_ = 0;      // the buffer the payload cursor is in
  uint64_t buf_off_ = 0;  // offset within it
  uint32_t key_len_ = 0;
};

// Parsed view of a record's header and tables (points into the input bytes).
struct RecordInfo {
  RecordHeader header;
  std::string_view key;
  std::vector<uint64_t> buffer_sizes;
  std::vector<uint32_t> chunk_sizes;  // table entries as stored (kChunkStoredRawBit included)
  size_t payload_offset = 0;  // from the start of the record
  size_t record_size = 0;     // total, padded
};

// Validates the header (magic, version, header checksum, limits). `data` may
// hold only the header: returns the header-only info with record_size set, so
// the caller can read the rest. Corruption on any mismatch.
// `seed` must be the one the record was sealed with (RecordSeed of its position).
StatusOr<RecordHeader> ParseRecordHeader(std::span<const std::byte> data, uint64_t seed = 0);

// Parses a whole record (data.size() >= record size) and verifies the payload
// checksum. Corruption on any mismatch or bound violation; never reads past data.
StatusOr<RecordInfo> ParseRecord(std::span<const std::byte> data, uint64_t seed = 0);

// Bytes of the header, key and tables (where the payload starts). Assumes
// the header was validated.
size_t RecordPrefixSize(const RecordHeader& h);
// ParseRecord's checks of the header, key and tables only, for a reader that
// has just the record's first bytes (data.size() >= RecordPrefixSize) and
// verifies the rest itself as it arrives: the payload checksum (over
// RecordBodySize bytes after the header) and the zero padding are NOT checked.
StatusOr<RecordInfo> ParseRecordPrefix(std::span<const std::byte> data, uint64_t seed = 0);

// Decodes the payload of a parsed record into `out` (exactly raw_size bytes:
// the buffers concatenated). `data` is the same span given to ParseRecord.
Status DecodeRecordPayload(const RecordInfo& info, std::span<const std::byte> data,
                           std::span<std::byte> out);

// Sets kFlagErased in an encoded header (kRecordHeaderSize bytes) and
// rewrites its header checksum, so recovery skips the whole record without
// reporting it and never resynchronizes inside its payload.
void MarkRecordErased(std::byte* header, uint64_t seed = 0);

// Record length for a header (padded). Assumes the header was validated.
size_t RecordSize(const RecordHeader& h);
// Bytes covered by payload_checksum (key, tables, payload), i.e. the record
// without its header and padding. Assumes the header was validated.
size_t RecordBodySize(const RecordHeader& h);

}  // namespace spillway
