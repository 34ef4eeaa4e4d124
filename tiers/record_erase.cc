// MarkRecordErased: how a persistent file tier makes an erase durable without
// tombstone records: the record's own header is flagged and re-checksummed
// in place (see docs/format.md, "Erased records").
#include <cstdint>

#include "codecs/codec.h"
#include "tiers/record.h"

namespace spillway {

void MarkRecordErased(std::byte* header) {
  constexpr size_t kFlagsOffset = 7;
  constexpr size_t kHeaderChecksumOffset = 56;
  header[kFlagsOffset] = std::byte(static_cast<uint8_t>(header[kFlagsOffset]) | kFlagErased);
  const uint64_t c = Checksum64(header, kHeaderChecksumOffset);
  for (size_t i = 0; i < 8; ++i) header[kHeaderChecksumOffset + i] = std::byte(c >> (8 * i));
}

}  // namespace spillway
