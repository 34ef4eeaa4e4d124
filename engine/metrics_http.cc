// The metrics pull endpoint (engine/metrics_http.h): socket(2), bind(2),
// poll(2), accept4(2), recv(2), send(2), shutdown(2); nothing else.
#include "engine/metrics_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

namespace spillway {

#ifdef SPILLWAY_HAVE_METRICS_HTTP
namespace {

using Clock = std::chrono::steady_clock;

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
    std::string body;
    try {
      body = render();
    } catch (const std::exception& e) {
      return Response("500 Internal Server Error", "text/plain; charset=utf-8",
                      std::string("rendering the metrics failed: ") + e.what() + "\n", is_head);
    }
    return Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body, is_head);
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
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::FromErrno(errno, "metrics.listen: socket");
  const int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, SOMAXCONN) != 0) {
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

// One accepted socket and where its exchange stands.
struct MetricsHttpServer::Connection {
  enum class Phase { kHead, kSend, kDrain };
  int fd = -1;
  Phase phase = Phase::kHead;
  Clock::time_point accepted, deadline;
  std::string in, out;
  size_t sent = 0;
  bool done = false;
};

namespace {

// Reads what is there; returns false at end of stream or on an error.
bool ReadSome(int fd, std::string* in, size_t limit) {
  char buf[4096];
  for (;;) {
    const size_t want = limit > in->size() ? std::min(sizeof(buf), limit - in->size()) : sizeof(buf);
    const ssize_t n = ::recv(fd, buf, want, MSG_DONTWAIT);
    if (n > 0) {
      if (in->size() < limit) in->append(buf, static_cast<size_t>(n));
      if (in->size() >= limit) return true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
}

bool HeadComplete(const std::string& in) {
  return in.find("\r\n\r\n") != std::string::npos || in.find("\n\n") != std::string::npos;
}

}  // namespace

void MetricsHttpServer::Loop() {
  using Phase = Connection::Phase;
  std::vector<Connection> conns;
  conns.reserve(kMaxConnections);
  std::vector<pollfd> fds;
  Clock::time_point accept_paused_until{};

  const auto start_response = [this](Connection& c, std::string response, Clock::time_point now) {
    c.out = std::move(response);
    c.sent = 0;
    c.phase = Phase::kSend;
    c.deadline = now + kSendDeadline;
  };
  // Sends what the socket takes; once all is sent, half-closes and drains
  // what the client may still send, so closing cannot reset the connection
  // before the client has read the response.
  const auto pump = [](Connection& c, Clock::time_point now) {
    while (c.sent < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.done = true;  // the peer is gone
      return;
    }
    (void)::shutdown(c.fd, SHUT_WR);
    c.phase = Phase::kDrain;
    c.deadline = std::min(c.deadline, now + std::chrono::seconds(1));
    c.out.clear();
    c.out.shrink_to_fit();
  };

  bool stop = false;
  while (!stop) {
    Clock::time_point now = Clock::now();
    for (Connection& c : conns) {
      if (c.done || now < c.deadline) continue;
      if (c.phase == Phase::kHead && !c.in.empty()) {
        // One best-effort attempt to say why; never waits.
        const std::string r = Response("408 Request Timeout", "text/plain; charset=utf-8",
                                       "the request head did not arrive in time\n", false);
        (void)::send(c.fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      if (c.phase != Phase::kDrain) dropped_.fetch_add(1, std::memory_order_relaxed);
      c.done = true;
    }
    std::erase_if(conns, [](const Connection& c) {
      if (c.done) ::close(c.fd);
      return c.done;
    });

    const bool accepting = now >= accept_paused_until;
    fds.clear();
    fds.push_back({wake_read_, POLLIN, 0});
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    Clock::time_point wake_at = accepting ? Clock::time_point::max() : accept_paused_until;
    for (const Connection& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.phase == Phase::kSend ? POLLOUT : POLLIN), 0});
      wake_at = std::min(wake_at, c.deadline);
    }
    int timeout_ms = -1;
    if (wake_at != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(wake_at - now).count();
      timeout_ms = static_cast<int>(std::clamp<long long>(left, 0, 60'000));
    }
    const int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "spillway: metrics.listen: poll: %s; the endpoint stops\n", std::strerror(errno));
      break;
    }
    if (fds[0].revents) break;
    now = Clock::now();

    for (size_t i = 0; i < conns.size(); ++i) {
      Connection& c = conns[i];
      if (!fds[i + 2].revents) continue;
      if (c.phase == Phase::kHead) {
        const bool open = ReadSome(c.fd, &c.in, kMaxHead);
        if (HeadComplete(c.in) || (!open && !c.in.empty())) {
          // A complete head, or a bare request line ended by a half-close.
          requests_.fetch_add(1, std::memory_order_relaxed);
          start_response(c, Respond(c.in, render_), now);
        } else if (!open) {
          c.done = true;  // closed before saying anything
          continue;
        } else if (c.in.size() >= kMaxHead) {
          start_response(c, Response("431 Request Header Fields Too Large", "text/plain; charset=utf-8",
                                     "request head over 8 KiB\n", false),
                         now);
        } else {
          continue;
        }
        c.in.clear();
        c.in.shrink_to_fit();
        pump(c, now);
      } else if (c.phase == Phase::kSend) {
        pump(c, now);
      } else {
        std::string discard;
        if (!ReadSome(c.fd, &discard, 1 << 16)) c.done = true;
      }
    }

    if (accepting && (fds[1].revents & POLLIN)) {
      // Take every pending connection (bounded, so clients cannot starve the others).
      for (size_t taken = 0; taken < kMaxConnections; ++taken) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          if (errno == EINTR || errno == ECONNABORTED) continue;
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            accept_paused_until = now + std::chrono::milliseconds(100);  // retry once descriptors free up
          }
          break;
        }
        if (conns.size() >= kMaxConnections) {
          auto oldest = std::min_element(conns.begin(), conns.end(), [](const Connection& a, const Connection& b) {
            return a.accepted < b.accepted;
          });
          ::close(oldest->fd);
          conns.erase(oldest);
          dropped_.fetch_add(1, std::memory_order_relaxed);
        }
        Connection c;
        c.fd = fd;
        c.accepted = now;
        c.deadline = now + kHeadDeadline;
        conns.push_back(std::move(c));
      }
    }
  }
  for (const Connection& c : conns) ::close(c.fd);
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

#endif

}  // namespace spillway
