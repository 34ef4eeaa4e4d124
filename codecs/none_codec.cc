// The "none" codec: the stored bytes are the raw bytes.
//
// It still goes through the Codec interface so tiers, records and tests treat
// every codec alike; Decode enforces the same exact-size contract as the
// compressing codecs, so a torn or mis-sized payload is Corruption here too.
#include <cstring>
#include <string>

#include "codecs/codec_factories.h"

namespace spillway {
namespace {

class NoneCodec final : public Codec {
 public:
  CodecKind kind() const override { return CodecKind::kNone; }

  size_t MaxEncodedSize(size_t raw_size) const override { return raw_size; }

  StatusOr<size_t> Encode(std::span<const std::byte> in, std::span<std::byte> out) const override {
    if (out.size() < in.size()) {
      return Status::InvalidArgument("none codec: output buffer of " + std::to_string(out.size()) +
                                     " bytes is smaller than the " + std::to_string(in.size()) +
                                     " input bytes");
    }
    if (!in.empty()) std::memcpy(out.data(), in.data(), in.size());
    return in.size();
  }

  Status Decode(std::span<const std::byte> in, std::span<std::byte> out) const override {
    if (in.size() != out.size()) {
      return Status::Corruption("none codec: stored " + std::to_string(in.size()) +
                                " bytes, expected " + std::to_string(out.size()));
    }
    if (!in.empty()) std::memcpy(out.data(), in.data(), in.size());
    return Status::OK();
  }
};

}  // namespace

std::unique_ptr<Codec> NewNoneCodec() { return std::make_unique<NoneCodec>(); }

}  // namespace spillway
