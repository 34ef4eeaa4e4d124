// Checksum64: xxh3-64, the checksum of every record on disk (docs/format.md).
//
// The generic implementation is the xxhash library; where the CPU has AVX2
// the one in checksum_avx2.cc runs instead (checksum_impl.h says why). Both
// give the same values.
#include <xxhash.h>

#include <new>

#include "codecs/checksum_impl.h"
#include "codecs/codec.h"

namespace spillway {
namespace checksum_internal {
namespace {

#define SPILLWAY_CHECKSUM_NAME "generic"
#include "codecs/checksum_table.inc"
#undef SPILLWAY_CHECKSUM_NAME

bool CpuHasAvx2() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // Safe before main too (a checksum in a static initializer): the CPU
  // model is read here, not left to the runtime's own constructor.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

}  // namespace

const Impl& Generic() { return kTable; }

const Impl* Avx2() {
  static const Impl* const impl = kAvx2Table != nullptr && CpuHasAvx2() ? kAvx2Table : nullptr;
  return impl;
}

const Impl& Selected() {
  static const Impl& impl = Avx2() != nullptr ? *Avx2() : Generic();
  return impl;
}

}  // namespace checksum_internal

uint64_t Checksum64(const void* data, size_t size, uint64_t seed) {
  return checksum_internal::Selected().hash(data, size, seed);
}

const char* Checksum64Implementation() { return checksum_internal::Selected().name; }

Checksum64Stream::Checksum64Stream(uint64_t seed) : state_(checksum_internal::Selected().create(seed)) {
  if (state_ == nullptr) throw std::bad_alloc();  // like any other allocation failure
}

Checksum64Stream::~Checksum64Stream() { checksum_internal::Selected().destroy(state_); }

void Checksum64Stream::Update(const void* data, size_t size) { checksum_internal::Selected().update(state_, data, size); }

uint64_t Checksum64Stream::Digest() const { return checksum_internal::Selected().digest(state_); }

}  // namespace spillway
