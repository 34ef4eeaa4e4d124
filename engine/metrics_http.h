// MetricsHttpServer: the optional pull endpoint (metrics.listen). A small
// HTTP/1.0 responder that answers
//   GET /metrics  -> 200, the Prometheus text (text/plain; version=0.0.4)
//   GET /         -> 200, a line pointing to /metrics
//   HEAD          -> the same headers, no body
//   other paths   -> 404; other methods -> 405; a malformed request -> 400
// and closes every connection after one response (no keep-alive).
//
// What no client can do to it: one thread serves up to kMaxConnections
// connections at once with non-blocking sockets and poll(2), so a slow
// client holds a slot, never the thread. Each connection has deadlines for
// the whole exchange, not per read: the request head (at most 8 KiB) must
// arrive within kHeadDeadline of the accept, and the response must be taken
// within kSendDeadline of the head; a connection past its deadline is closed.
// When every slot is taken, the oldest connection is closed to admit a new
// one, so a scrape gets through a flood. The destructor wakes the thread
// through a pipe and joins it; it never waits on a client.
//
// Why not a library: Debian 12's cpp-httplib (0.11.4) and prometheus-cpp
// (1.0.1, over civetweb) ship as shared libraries that pull in OpenSSL (and
// zlib, brotli or libcurl), which the statically linked GPU build cannot take;
// both serve a connection per pool thread with a timeout per read, so a
// hundred slow clients would hold every thread. docs/observability.md says more.
//
// Sockets are not files of a tier: this uses the socket calls directly, not
// FileIo (fault injection on tier I/O must not hit it). Built only with the
// CMake option SPILLWAY_METRICS_HTTP (default ON; libc only); without it
// Start returns NotSupported.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "spillway/status.h"

namespace spillway {

class MetricsHttpServer {
 public:
  static constexpr size_t kMaxConnections = 256;
  static constexpr size_t kMaxHead = 8192;
  static constexpr std::chrono::milliseconds kHeadDeadline{2000};
  static constexpr std::chrono::milliseconds kSendDeadline{10000};

  // Binds `listen` ("127.0.0.1:9464", "localhost:0"; port 0 picks a free
  // one, see port()) and starts the thread. `render` is called on that thread
  // once per GET /metrics and must stay callable until the destructor returns.
  static StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen,
                                                             std::function<std::string()> render);
  // Stops the thread (waking it at once), closes every connection and the socket.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }
  // Requests answered (a response was queued for them).
  uint64_t requests() const { return requests_.load(std::memory_order_relaxed); }
  // Connections closed at a deadline or to make room for a newer one.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

  // The response to one request head (exposed for tests): status line,
  // headers and body.
  static std::string Respond(std::string_view request_head, const std::function<std::string()>& render);

 private:
  struct Connection;
  MetricsHttpServer(int listen_fd, int wake_read, int wake_write, int port, std::function<std::string()> render);
  void Loop();

  const int listen_fd_, wake_read_, wake_write_, port_;
  const std::function<std::string()> render_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;
};

}  // namespace spillway
