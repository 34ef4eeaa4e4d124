// RecordEncoder: a file tier's codec together with the settings its records
// are encoded with (min_savings, chunk size), built once from the tier's
// CodecConfig. A writer holds one encoder instead of carrying a Codec beside
// the config it was made from to every MaxRecordSize and EncodeRecord call.
//
// Thread-safety: immutable after construction; MaxSize and Encode may run on
// any number of threads at once (a Codec is thread-safe, codecs/codec.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "codecs/codec.h"
#include "tiers/record.h"

namespace spillway {

class RecordEncoder {
 public:
  explicit RecordEncoder(const CodecConfig& config) : config_(config), codec_(MakeCodec(config_)) {}
  RecordEncoder(const RecordEncoder&) = delete;
  RecordEncoder& operator=(const RecordEncoder&) = delete;

  CodecKind kind() const { return codec_->kind(); }
  // Upper bound of `object`'s record length, padding included (MaxRecordSize).
  size_t MaxSize(const ObjectView& object) const {
    return MaxRecordSize(object.key.size(), object.buffers.size(), object.raw_size(), *codec_, config_);
  }
  // EncodeRecord with this encoder's codec and settings: `out` holds at least
  // MaxSize(object) bytes; returns the record length.
  StatusOr<size_t> Encode(const ObjectView& object, uint64_t sequence, std::span<std::byte> out,
                          uint64_t seed = 0) const {
    return EncodeRecord(object, sequence, *codec_, config_, out, seed);
  }

 private:
  // EncodeRecord reads min_savings and chunk_bytes from it; kind and level
  // made codec_.
  const CodecConfig config_;
  const std::unique_ptr<Codec> codec_;
};

}  // namespace spillway
