// The zstd codec: one zstd frame per Encode, single-shot in both directions.
//
// Contexts are explicit and per thread (thread_local, created on first use and
// reused for every later call on that thread), as zstd's own tools do: no
// shared state between threads, no allocation per call once warm. Every zstd
// call is checked with ZSTD_isError and turned into a Status; a frame that
// decodes to any size other than out.size() is Corruption.
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <memory>
#include <string>

#include "codecs/codec_factories.h"

namespace spillway {
namespace {

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// The calling thread's contexts; null only when zstd cannot allocate one.
ZSTD_CCtx* ThreadCCtx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx(ZSTD_createCCtx());
  return cctx.get();
}
ZSTD_DCtx* ThreadDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx(ZSTD_createDCtx());
  return dctx.get();
}

std::string ZstdError(const char* what, size_t code) {
  return std::string("zstd ") + what + ": " + ZSTD_getErrorName(code);
}

class ZstdCodec final : public Codec {
 public:
  explicit ZstdCodec(int level) : level_(level) {}

  CodecKind kind() const override { return CodecKind::kZstd; }

  size_t MaxEncodedSize(size_t raw_size) const override { return ZSTD_compressBound(raw_size); }

  StatusOr<size_t> Encode(std::span<const std::byte> in, std::span<std::byte> out) const override {
    ZSTD_CCtx* cctx = ThreadCCtx();
    if (cctx == nullptr) return Status::Internal("zstd: cannot allocate a compression context");
    // ZSTD_compressCCtx sets the level and resets the session on every call
    // while keeping the context's memory, and sizes its tables from in.size().
    size_t n = ZSTD_compressCCtx(cctx, out.data(), out.size(), in.data(), in.size(), level_);
    if (ZSTD_isError(n)) {
      if (ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall) {
        return Status::InvalidArgument(ZstdError("compress", n) + " (output buffer of " +
                                       std::to_string(out.size()) + " bytes)");
      }
      return Status::Internal(ZstdError("compress", n));
    }
    return n;
  }

  Status Decode(std::span<const std::byte> in, std::span<std::byte> out) const override {
    ZSTD_DCtx* dctx = ThreadDCtx();
    if (dctx == nullptr) return Status::Internal("zstd: cannot allocate a decompression context");
    if (in.empty()) {
      // zstd accepts zero frames as a valid empty input; we never write that,
      // so an empty payload for a non-empty object is a torn record.
      if (out.empty()) return Status::OK();
      return Status::Corruption("zstd decompress: empty input for " +
                                std::to_string(out.size()) + " bytes");
    }
    // Single-shot decoding writes straight into `out` and never beyond it; a
    // frame that would exceed it fails with dstSize_tooSmall.
    size_t n = ZSTD_decompressDCtx(dctx, out.data(), out.size(), in.data(), in.size());
    if (ZSTD_isError(n)) return Status::Corruption(ZstdError("decompress", n));
    if (n != out.size()) {
      return Status::Corruption("zstd decompress: produced " + std::to_string(n) +
                                " bytes, expected " + std::to_string(out.size()));
    }
    return Status::OK();
  }

 private:
  const int level_;
};

}  // namespace

std::unique_ptr<Codec> NewZstdCodec(int level) {
  if (level == 0) level = kZstdDefaultLevel;
  level = std::clamp(level, std::max(kZstdMinLevel, ZSTD_minCLevel()),
                     std::min(kZstdMaxLevel, ZSTD_maxCLevel()));
  return std::make_unique<ZstdCodec>(level);
}

}  // namespace spillway
