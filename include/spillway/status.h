// Status and StatusOr<T>: how every data path in spillway reports failure.
//
// Errors are values, never exceptions (exceptions are caught at the API
// boundary). Codes are stable: callers branch on them, messages are for
// humans and name the object, tier, file and offset involved.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace spillway {

enum class StatusCode : unsigned char {
  kOk = 0,
  kNotFound = 1,
  kCorruption = 2,       // checksum mismatch, bad magic, torn record
  kIOError = 3,          // the OS or device failed a read/write/fsync
  kNoSpace = 4,          // no tier in the chain can hold the object
  kInvalidArgument = 5,  // bad config, bad key, bad call
  kNotSupported = 6,     // feature missing in this build or on this machine
  kBusy = 7,             // object pinned or being moved; retry later
  kInternal = 8,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status NoSpace(std::string m) { return {StatusCode::kNoSpace, std::move(m)}; }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotSupported(std::string m) { return {StatusCode::kNotSupported, std::move(m)}; }
  static Status Busy(std::string m) { return {StatusCode::kBusy, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  // IOError or NoSpace from an errno value; `what` names the operation and file.
  static Status FromErrno(int err, std::string_view what);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  bool IsNotFound() const { return code_ == StatusCode::kNotFound; }
  bool IsCorruption() const { return code_ == StatusCode::kCorruption; }
  bool IsIOError() const { return code_ == StatusCode::kIOError; }
  bool IsNoSpace() const { return code_ == StatusCode::kNoSpace; }
  // "Corruption: checksum mismatch in tier 'nvme' file ... offset 4096"
  std::string ToString() const;

  // Prepends context: Status::IOError("x").WithContext("demote") -> "demote: x".
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) { assert(!status_.ok()); }
  StatusOr(T value) : value_(std::move(value)) {}

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace spillway

// Returns early from the enclosing function when `expr` is not OK.
#define SPILLWAY_RETURN_IF_ERROR(expr)          \
  do {                                          \
    ::spillway::Status _st = (expr);            \
    if (!_st.ok()) return _st;                  \
  } while (0)
