// SegmentManifest: what the last successful Sync (Flush) of a persistent file
// tier made durable, per segment: how far the segment reached and how many
// records lay below that point. Every record keeps a valid header for as long
// as its segment exists (erase marks keep it valid; punches never touch the
// header block), so fewer headers found below `committed_end` than `records`
// means records were lost (a zeroed sector, a truncation), which the records
// themselves cannot show. Recovery and `spillway inspect` both check a
// segment against it (CheckSegment). Layout: docs/format.md "MANIFEST".
//
// The file (kManifestName in each stripe directory) is replaced atomically:
// written as MANIFEST.tmp, synced, renamed over MANIFEST, directory synced.
// Its presence also marks a directory as holding persistent records: a
// scratch tier refuses to wipe such a directory (wipe_persistent).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/tier_files.h"
#include "spillway/file_io.h"
#include "spillway/status.h"

namespace spillway {

inline constexpr uint32_t kManifestMagic = 0x4D575053;  // "SPWM"
inline constexpr uint16_t kManifestVersion = 1;

struct ManifestEntry {
  uint64_t committed_end = 0;  // bytes of the segment the last Sync covered
  uint64_t records = 0;        // records published in [0, committed_end) before it
  bool operator==(const ManifestEntry&) const = default;
};
using Manifest = std::map<uint32_t, ManifestEntry>;  // by segment id

// Reads `dir`/MANIFEST: NotFound when absent, Corruption when it fails its
// checksum or layout (callers report it and check nothing).
StatusOr<Manifest> ReadManifest(FileIo& io, const std::string& dir);
// Replaces `dir`/MANIFEST atomically and durably (see above).
Status WriteManifest(FileIo& io, const std::string& dir, const Manifest& manifest);

// Encoding, for tests and the fuzzer.
std::string EncodeManifest(const Manifest& manifest);
StatusOr<Manifest> DecodeManifest(std::string_view bytes);

// What the scan of one segment found, to set against its entry.
struct SegmentTally {
  uint64_t file_size = 0;
  uint64_t headers_below = 0;  // valid headers at offsets < entry.committed_end
};
// Empty when the segment holds everything the entry promises; otherwise the
// problem, e.g. "3 records missing: the last Flush left 12 records below
// offset 65536, 9 found (zeroed or lost blocks)".
std::string CheckSegment(const ManifestEntry& entry, const SegmentTally& tally);
// Records the entry promises that the tally lacks (0 when none).
uint64_t MissingRecords(const ManifestEntry& entry, const SegmentTally& tally);

}  // namespace spillway
