// MarkRecordErased: how a persistent file tier makes an erase durable without
// tombstone records: the record's own header is flagged and re-checksummed
// in place (see docs/format.md, "Erased records").
#include <cstdint>

#include "codecs/codec.h"
#include "tiers/record.h"

namespace spillway {

void MarkRecordErased(std::byte* header, uint64_t seed) {
  constexpr size_t kFlagsOffset = 7;
  header[kFlagsOffset] = std::byte(static_cast<uint8_t>(header[kFlagsOffset]) | kFlagErased);
  ResealRecordHeader(header, seed);
}

}  // namespace spillway
