// ScanSegment: walks the records of one segment file and classifies every
// record and every damaged range. One scanner serves both readers of segment
// files that cannot trust them: FileTier::Recover (rebuilding a persistent
// tier at Open) and `spillway inspect`, so what inspect calls live is exactly
// what a reopen serves.
//
// How the walk stays safe on hostile or damaged files:
//   - A header is valid only at the position it was written for: its checksum
//     is seeded with RecordSeed(segment id, offset). Records stored inside an
//     object's payload (or copied from elsewhere) never validate, so resyncing
//     after damage can never surface bytes of another object as a record.
//   - A record that verifies (or is flagged erased) is stepped over whole.
//     After anything else the walk steps 8 bytes at a time (kRecordAlign) to
//     the next valid header; holes (punched or never written) are skipped
//     with SEEK_DATA.
//   - Payloads are verified by streaming through a fixed window (4 MiB), so
//     memory stays bounded whatever lengths a file claims.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "spillway/status.h"
#include "spillway/file_io.h"
#include "tiers/record.h"

namespace spillway {

enum class ScanState : unsigned char {
  kLive,        // a valid record that was not erased (recovery may serve it)
  kErased,      // a valid record flagged erased (kFlagErased): skipped whole
  kCorrupt,     // a header or payload failing its checksum or limits, or bytes
                // that are neither a record nor zero padding where one should start
  kTorn,        // a record cut off by the end of the file (an interrupted write)
  kFreed,       // a record whose blocks are punched out or were never written
  kUnreadable,  // an I/O error or no memory for the window: the walk stopped here
};
const char* ScanStateName(ScanState s);

struct ScanItem {
  ScanState state = ScanState::kLive;
  uint64_t offset = 0;
  uint64_t length = 0;      // the record's length when its header was valid, else 0
  bool has_header = false;  // `header` holds a valid header
  RecordHeader header{};
  std::string key;          // the record's key when readable
  std::string message;      // why, for every state but kLive and kErased
};

// Walks `file` (opened for reading, O_DIRECT or not; `size` bytes) of segment
// `segment_id` from offset 0 and calls `emit` for each record and problem in
// file order. `progress` (may be empty) is called with the offset reached.
// Returns the I/O status that stopped the walk early (also emitted as a
// kUnreadable item), else OK.
Status ScanSegment(FileIo& io, const FileHandle& file, uint64_t size, uint32_t segment_id,
                   const std::function<void(ScanItem&&)>& emit,
                   const std::function<void(uint64_t)>& progress = {});

}  // namespace spillway
