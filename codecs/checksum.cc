// Checksum64: xxh3-64, the checksum of every record on disk (docs/format.md).
//
// The only includer of xxhash.h. xxh3 runs at memory bandwidth, so verifying
// on every read costs little next to the I/O it protects.
#include <xxhash.h>

#include <new>

#include "codecs/codec.h"

namespace spillway {

uint64_t Checksum64(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

Checksum64Stream::Checksum64Stream(uint64_t seed) : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();  // like any other allocation failure
  XXH3_64bits_reset_withSeed(static_cast<XXH3_state_t*>(state_), seed);
}

Checksum64Stream::~Checksum64Stream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Checksum64Stream::Update(const void* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}

uint64_t Checksum64Stream::Digest() const {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_));
}

}  // namespace spillway
