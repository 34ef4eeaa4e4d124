// The names of the fixed files a file tier keeps in each of its directories,
// in base so that every layer that looks into a tier directory (the tiers that
// write them, config's probes, `spillway inspect`) spells them the same way.
// Layout of each file: docs/format.md.
#pragma once

namespace spillway {

// The directory's lock file (FileIo::LockFile): held while an engine has the
// tier open, never deleted.
inline constexpr char kLockName[] = "LOCK";

// What the last Flush of a persistent tier made durable (tiers/segment_manifest.h).
// Its presence marks a directory as holding persistent records.
inline constexpr char kManifestName[] = "MANIFEST";

}  // namespace spillway
