// FileTier: the Tier interface over its SegmentManager and WritePipeline.
// See file_tier.h for the design; the read path is in file_tier_read.cc.
#include "tiers/file_tier.h"

#include <algorithm>

namespace spillway {

FileTier::FileTier(TierConfig config, int index, FileIo* io, HostAllocator* host_alloc)
    : Tier(std::move(config), index), io_(io), host_alloc_(host_alloc), encoder_(this->config().codec) {
  segments_ = std::make_unique<SegmentManager>(this->config(), io_);
  pipeline_ = std::make_unique<WritePipeline>(this->config(), io_, segments_.get(), &encoder_,
                                              [this](Location& loc) { FreeImpl(loc); });
}

FileTier::~FileTier() {
  // Writers first, then the segments, whose punches their cleanup queued;
  // each pool finishes its queue before it stops.
  pipeline_.reset();
  segments_.reset();
}

Status FileTier::Open() { return segments_->Open(); }

Status FileTier::Recover(const std::function<void(RecoveredObject&&)>& found, uint64_t* skipped,
                         std::string* report, uint64_t* missing) {
  uint64_t max_seq = 0;
  Status st = segments_->Recover(
      [&](RecoveredObject&& obj) {
        max_seq = std::max(max_seq, obj.sequence);
        ForceReserve(obj.location.length);
        counters_.objects.fetch_add(1);
        counters_.raw_bytes.fetch_add(obj.location.raw_bytes);
        found(std::move(obj));
      },
      skipped, report, missing);
  if (!st.ok()) return st;
  pipeline_->set_next_sequence(max_seq + 1);
  return Status::OK();
}

void FileTier::ReleaseCachedMemory() {
  pipeline_->ReleaseCachedMemory();
  read_buffers_.Release();
}

uint64_t FileTier::ReserveEstimate(const ObjectView& object) const {
  return encoder_.MaxSize(object);
}

StatusOr<std::vector<Location>> FileTier::StoreImpl(std::span<const ObjectView> objects) {
  return pipeline_->Store(objects);
}

void FileTier::FreeImpl(Location& loc) {
  Unreserve(loc.stored_bytes);
  segments_->Free(loc);
  loc.length = 0;
}

void FileTier::RetireImpl(const Location& loc) { segments_->Retire(loc); }

Status FileTier::CommitFrees(bool* wrote) {
  uint64_t failed = 0;
  Status st = segments_->CommitFrees(wrote, &failed);
  counters_.io_errors.fetch_add(failed, std::memory_order_relaxed);
  return st;
}

Status FileTier::SyncImpl() {
  if (!config().persistent) return SyncData();
  // Used alone (no engine orders the tiers): the three steps of a Flush.
  PrepareFrees();
  SPILLWAY_RETURN_IF_ERROR(SyncData());
  bool wrote = false;
  Status st = CommitFrees(&wrote);
  if (wrote) {
    Status again = SyncData();
    if (st.ok()) st = std::move(again);
  }
  return st;
}

}  // namespace spillway
