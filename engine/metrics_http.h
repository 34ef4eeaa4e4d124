// MetricsHttpServer: the optional pull endpoint (metrics.listen). A small
// HTTP/1.0 responder on one background thread that answers
//   GET /metrics  -> 200, the Prometheus text (text/plain; version=0.0.4)
//   GET /         -> 200, a line pointing to /metrics
//   HEAD          -> the same headers, no body
//   other paths   -> 404; other methods -> 405; a malformed request -> 400
// and closes every connection after one response (HTTP/1.0, no keep-alive).
//
// Careful rather than fast: one connection at a time, the request head
// limited to 8 KiB and read and written with a 2 s socket timeout each, so a
// slow or hostile client delays a scrape by at most a few seconds and cannot
// grow memory. Sockets are not files of a tier: this uses the socket calls
// directly, not FileIo (fault injection on tier I/O must not hit it).
//
// Built only with the CMake option SPILLWAY_METRICS_HTTP (default ON; it
// needs nothing outside libc); without it Start returns NotSupported.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "spillway/status.h"

namespace spillway {

class MetricsHttpServer {
 public:
  // Binds `listen` ("127.0.0.1:9464", "localhost:0"; port 0 picks a free
  // one, see port()) and starts the thread. `render` is called on that thread
  // once per GET /metrics and must stay callable until the destructor returns.
  static StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen,
                                                             std::function<std::string()> render);
  // Stops the thread (waking it at once) and closes the socket.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }
  uint64_t requests() const { return requests_.load(std::memory_order_relaxed); }

  // The response to one request head (exposed for tests): status line,
  // headers and body.
  static std::string Respond(std::string_view request_head, const std::function<std::string()>& render);

 private:
  MetricsHttpServer(int listen_fd, int wake_read, int wake_write, int port, std::function<std::string()> render);
  void Loop();
  void Serve(int fd);

  const int listen_fd_, wake_read_, wake_write_, port_;
  const std::function<std::string()> render_;
  std::atomic<uint64_t> requests_{0};
  std::thread thread_;
};

}  // namespace spillway
