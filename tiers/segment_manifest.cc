// SegmentManifest encoding, atomic replacement and the check recovery and
// `spillway inspect` share. See segment_manifest.h.
#include "tiers/segment_manifest.h"

#include <cstring>
#include <vector>

#include "codecs/codec.h"

namespace spillway {
namespace {

constexpr size_t kHeaderBytes = 16;
constexpr size_t kEntryBytes = 24;
// More segments than any tier can hold (capacity / 4 KiB segments would be
// absurd long before this): a bound so a damaged count cannot allocate much.
constexpr uint32_t kMaxEntries = 1u << 24;

template <typename T>
void PutLE(std::string* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out->push_back(static_cast<char>(static_cast<uint8_t>(v >> (8 * i))));
}

template <typename T>
T GetLE(const char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

std::string EncodeManifest(const Manifest& manifest) {
  std::string out;
  out.reserve(kHeaderBytes + kEntryBytes * manifest.size() + 8);
  PutLE<uint32_t>(&out, kManifestMagic);
  PutLE<uint16_t>(&out, kManifestVersion);
  PutLE<uint16_t>(&out, 0);
  PutLE<uint32_t>(&out, static_cast<uint32_t>(manifest.size()));
  PutLE<uint32_t>(&out, 0);
  for (const auto& [id, e] : manifest) {
    PutLE<uint32_t>(&out, id);
    PutLE<uint32_t>(&out, 0);
    PutLE<uint64_t>(&out, e.committed_end);
    PutLE<uint64_t>(&out, e.records);
  }
  PutLE<uint64_t>(&out, Checksum64(out.data(), out.size()));
  return out;
}

StatusOr<Manifest> DecodeManifest(std::string_view b) {
  if (b.size() < kHeaderBytes + 8) return Status::Corruption("manifest is too short");
  if (GetLE<uint32_t>(b.data()) != kManifestMagic) return Status::Corruption("bad manifest magic");
  const uint16_t version = GetLE<uint16_t>(b.data() + 4);
  if (version != kManifestVersion) {
    return Status::Corruption("unsupported manifest version " + std::to_string(version));
  }
  const uint32_t n = GetLE<uint32_t>(b.data() + 8);
  if (n > kMaxEntries || b.size() != kHeaderBytes + uint64_t{kEntryBytes} * n + 8) {
    return Status::Corruption("manifest length does not match its entry count");
  }
  const size_t body = b.size() - 8;
  if (GetLE<uint64_t>(b.data() + body) != Checksum64(b.data(), body)) {
    return Status::Corruption("manifest checksum mismatch");
  }
  Manifest m;
  for (uint32_t i = 0; i < n; ++i) {
    const char* p = b.data() + kHeaderBytes + size_t{kEntryBytes} * i;
    m[GetLE<uint32_t>(p)] = ManifestEntry{GetLE<uint64_t>(p + 8), GetLE<uint64_t>(p + 16)};
  }
  return m;
}

StatusOr<Manifest> ReadManifest(FileIo& io, const std::string& dir) {
  OpenOptions opts;
  opts.try_direct = false;
  auto f = io.Open(dir + "/" + kManifestName, opts);
  if (!f.ok()) return f.status();
  FileHandle file = std::move(*f);
  auto size = io.FileSize(file);
  if (!size.ok()) {
    (void)io.Close(file);
    return size.status();
  }
  if (*size > kHeaderBytes + uint64_t{kEntryBytes} * kMaxEntries + 8) {
    (void)io.Close(file);
    return Status::Corruption(file.path + ": manifest is too large");
  }
  std::string bytes(*size, '\0');
  Status st = bytes.empty() ? Status::OK() : io.Read(file, 0, bytes.data(), bytes.size());
  (void)io.Close(file);
  if (!st.ok()) return st;
  auto m = DecodeManifest(bytes);
  if (!m.ok()) return Status::Corruption(dir + "/" + kManifestName + ": " + m.status().message());
  return m;
}

Status WriteManifest(FileIo& io, const std::string& dir, const Manifest& manifest) {
  const std::string bytes = EncodeManifest(manifest);
  const std::string tmp = dir + "/" + kManifestName + ".tmp";
  (void)io.Remove(tmp);  // left by a crash mid-write
  OpenOptions opts;
  opts.create = true;
  opts.exclusive = true;
  opts.write = true;
  opts.try_direct = false;
  auto f = io.Open(tmp, opts);
  if (!f.ok()) return f.status().WithContext("writing the manifest");
  FileHandle file = std::move(*f);
  Status st = io.Write(file, 0, bytes.data(), bytes.size());
  if (st.ok()) st = io.Sync(file);
  (void)io.Close(file);
  if (st.ok()) st = io.Rename(tmp, dir + "/" + kManifestName);
  if (st.ok()) st = io.SyncDir(dir);
  if (!st.ok()) (void)io.Remove(tmp);
  return st.WithContext("writing the manifest");
}

uint64_t MissingRecords(const ManifestEntry& e, const SegmentTally& t) {
  return t.headers_below < e.records ? e.records - t.headers_below : 0;
}

std::string CheckSegment(const ManifestEntry& e, const SegmentTally& t) {
  std::string out;
  if (t.file_size < e.committed_end) {
    out = "truncated: the file has " + std::to_string(t.file_size) + " bytes, the last Flush covered " +
          std::to_string(e.committed_end);
  }
  if (const uint64_t missing = MissingRecords(e, t)) {
    if (!out.empty()) out += "; ";
    out += std::to_string(missing) + (missing == 1 ? " record" : " records") +
           " missing: the last Flush left " + std::to_string(e.records) + " below offset " +
           std::to_string(e.committed_end) + ", " + std::to_string(t.headers_below) +
           " found (zeroed, truncated or lost blocks)";
  }
  return out;
}

}  // namespace spillway
