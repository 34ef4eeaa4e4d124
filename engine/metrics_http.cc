// The metrics pull endpoint (engine/metrics_http.h): socket(2), bind(2),
// poll(2), accept4(2), recv(2), send(2); nothing else.
#include "engine/metrics_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace spillway {

#ifdef SPILLWAY_HAVE_METRICS_HTTP
namespace {

constexpr size_t kMaxHead = 8192;
constexpr int kIoTimeoutS = 2;

std::string Response(const char* status, const char* type, const std::string& body, bool head,
                     const char* extra = "") {
  std::string out = "HTTP/1.0 ";
  out += status;
  out += "\r\nContent-Type: ";
  out += type;
  out += "\r\nContent-Length: " + std::to_string(body.size());
  out += "\r\nConnection: close\r\n";
  out += extra;
  out += "\r\n";
  if (!head) out += body;
  return out;
}

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // peer gone or the send timeout passed
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string MetricsHttpServer::Respond(std::string_view head, const std::function<std::string()>& render) {
  // Request line: METHOD SP TARGET SP HTTP/x.y
  const size_t eol = head.find_first_of("\r\n");
  const std::string_view line = head.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || line.substr(sp2 + 1).rfind("HTTP/", 0) != 0) {
    return Response("400 Bad Request", "text/plain; charset=utf-8", "bad request\n", false);
  }
  const std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  const bool is_head = method == "HEAD";
  if (method != "GET" && !is_head) {
    return Response("405 Method Not Allowed", "text/plain; charset=utf-8", "only GET and HEAD\n", false,
                    "Allow: GET, HEAD\r\n");
  }
  if (target == "/metrics") {
    return Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", render(), is_head);
  }
  if (target == "/") {
    return Response("200 OK", "text/plain; charset=utf-8", "spillway: metrics at /metrics\n", is_head);
  }
  return Response("404 Not Found", "text/plain; charset=utf-8", "not found; metrics are at /metrics\n", is_head);
}

StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& listen,
                                                                      std::function<std::string()> render) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return Status::InvalidArgument("metrics.listen '" + listen + "': expected HOST:PORT");
  std::string host = listen.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  char* end = nullptr;
  const long port = std::strtol(listen.c_str() + colon + 1, &end, 10);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (colon + 1 == listen.size() || *end != '\0' || port < 0 || port > 65535 ||
      ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return Status::InvalidArgument("metrics.listen '" + listen + "': expected an IPv4 address or localhost and a port");
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "metrics.listen: socket");
  const int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 16) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno(err, "metrics.listen: binding " + listen);
  }
  socklen_t len = sizeof(addr);
  (void)::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno(err, "metrics.listen: pipe");
  }
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(fd, wake[0], wake[1], ntohs(addr.sin_port), std::move(render)));
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int wake_read, int wake_write, int port,
                                     std::function<std::string()> render)
    : listen_fd_(listen_fd), wake_read_(wake_read), wake_write_(wake_write), port_(port), render_(std::move(render)) {
  thread_ = std::thread([this] { Loop(); });
}

MetricsHttpServer::~MetricsHttpServer() {
  const char b = 1;
  while (::write(wake_write_, &b, 1) < 0 && errno == EINTR) {
  }
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_read_);
  ::close(wake_write_);
}

void MetricsHttpServer::Loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    const int n = ::poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "spillway: metrics.listen: poll: %s; the endpoint stops\n", std::strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;  // ECONNABORTED, EMFILE, ...: try again on the next poll
    Serve(c);
    ::close(c);
  }
}

void MetricsHttpServer::Serve(int fd) {
  timeval tv{kIoTimeoutS, 0};
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::string head;
  char buf[1024];
  // Read until the blank line ending the head; the body (none for GET) is ignored.
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    if (head.size() >= kMaxHead) {
      (void)SendAll(fd, Response("431 Request Header Fields Too Large", "text/plain; charset=utf-8",
                                 "request head over 8 KiB\n", false));
      return;
    }
    const ssize_t n = ::recv(fd, buf, std::min(sizeof(buf), kMaxHead - head.size()), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (head.empty()) return;  // closed or timed out before saying anything
      break;                     // answer what came (it may be a bare request line)
    }
    head.append(buf, static_cast<size_t>(n));
  }
  requests_.fetch_add(1, std::memory_order_relaxed);
  (void)SendAll(fd, Respond(head, render_));
}

#else  // !SPILLWAY_HAVE_METRICS_HTTP

std::string MetricsHttpServer::Respond(std::string_view, const std::function<std::string()>&) { return ""; }

StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& listen,
                                                                      std::function<std::string()>) {
  return Status::NotSupported("metrics.listen '" + listen +
                              "': this spillway was built without the HTTP endpoint (SPILLWAY_METRICS_HTTP=OFF)");
}

MetricsHttpServer::~MetricsHttpServer() = default;
void MetricsHttpServer::Loop() {}
void MetricsHttpServer::Serve(int) {}

#endif

}  // namespace spillway
