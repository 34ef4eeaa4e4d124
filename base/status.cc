#include "spillway/status.h"

#include <cerrno>
#include <cstring>

namespace spillway {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kIOError: return "IOError";
    case StatusCode::kNoSpace: return "NoSpace";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotSupported: return "NotSupported";
    case StatusCode::kBusy: return "Busy";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

Status Status::FromErrno(int err, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) return NoSpace(std::move(msg));
  return IOError(std::move(msg));
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(StatusCodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

}  // namespace spillway
