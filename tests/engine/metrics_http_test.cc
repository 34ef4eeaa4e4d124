// Constant labels, spillway_build_info and the event-log counters in the
// Prometheus export, the error field of failed events, and the pull endpoint
// (metrics.listen): answered over a real socket on 127.0.0.1 and checked with
// `promtool check metrics` (Debian package prometheus; skipped visibly when
// promtool is absent), and held to its promises under slow clients: a scrape
// answers and the server (and an engine serving it) closes within 1 s while
// a hundred loopback clients trickle or stall.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "engine/event_log.h"
#include "engine/metrics_http.h"
#include "engine/stats_export.h"
#include "engine_test_util.h"
#include "spillway/version.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

// Sends `request` to 127.0.0.1:port and returns everything the server sent.
std::string Exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  if (!request.empty()) REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size()));
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// A connected loopback socket to `port`, or -1.
int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// `n` clients that each send the start of a request and then nothing more.
std::vector<int> StalledClients(int port, int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = Connect(port);
    REQUIRE(fd >= 0);
    REQUIRE(::send(fd, "GET /met", 8, MSG_NOSIGNAL) == 8);
    fds.push_back(fd);
  }
  return fds;
}

// A port nothing listens on right now (bound and released; loopback only).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  socklen_t len = sizeof(a);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string Body(const std::string& response) {
  const size_t p = response.find("\r\n\r\n");
  return p == std::string::npos ? "" : response.substr(p + 4);
}

bool HavePromtool() { return std::system("command -v promtool >/dev/null 2>&1") == 0; }

// promtool's verdict on `text` ("" when it accepts it).
std::string Promtool(const std::string& text, const std::string& dir) {
  const std::string in = dir + "/metrics.prom", out = dir + "/promtool.txt";
  std::ofstream(in) << text;
  const int rc = std::system(("promtool check metrics < " + in + " > " + out + " 2>&1").c_str());
  std::ifstream f(out);
  std::string said((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return rc == 0 ? "" : "promtool rc " + std::to_string(rc) + ": " + said;
}

}  // namespace

TEST_CASE("prometheus: constant labels lead every series, build_info and event-log counters are there") {
  EngineStats s;
  s.labels = {{"worker", "w\"1"}, {"node", "n1"}};
  TierStats t;
  t.name = "host";
  t.kind = "host";
  s.tiers.push_back(t);
  s.event_log_lines = 7;
  s.event_log_dropped = 3;
  const std::string text = StatsToPrometheus(s);
  CHECK(text.find("spillway_tier_objects{worker=\"w\\\"1\",node=\"n1\",tier=\"host\",kind=\"host\"} 0\n") !=
        std::string::npos);
  CHECK(text.find(std::string("spillway_build_info{worker=\"w\\\"1\",node=\"n1\",version=\"") + SPILLWAY_VERSION) !=
        std::string::npos);
  CHECK(text.find("spillway_event_log_lines_total{worker=\"w\\\"1\",node=\"n1\"} 7\n") != std::string::npos);
  CHECK(text.find("spillway_event_log_dropped_lines_total{worker=\"w\\\"1\",node=\"n1\"} 3\n") != std::string::npos);
  // No sample line without the constant labels.
  size_t pos = 0;
  while ((pos = text.find("\nspillway_", pos)) != std::string::npos) {
    ++pos;
    const std::string line = text.substr(pos, text.find('\n', pos) - pos);
    CHECK_MESSAGE(line.find("{worker=") != std::string::npos, line);
  }
}

TEST_CASE("prometheus: two engines in one process get distinct default labels") {
  TempDir dir("metrics-labels");
  EngineOptions o;
  o.background_mover = false;
  auto a = Engine::Open(HostFileChain(dir.path() + "/a", 1 << 20, 8 << 20), o);
  auto b = Engine::Open(HostFileChain(dir.path() + "/b", 1 << 20, 8 << 20), o);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  const EngineStats sa = (*a)->Stats(), sb = (*b)->Stats();
  REQUIRE(sa.labels.size() == 1);
  REQUIRE(sb.labels.size() == 1);
  CHECK(sa.labels[0].first == "engine");
  CHECK(sa.labels[0].second != sb.labels[0].second);
  CHECK(sa.labels[0].second.rfind(std::to_string(::getpid()), 0) == 0);

  Config c = HostFileChain(dir.path() + "/c", 1 << 20, 8 << 20);
  c.metrics.labels_set = true;  // `labels: {}`: none at all
  auto none = Engine::Open(c, o);
  REQUIRE(none.ok());
  CHECK((*none)->Stats().labels.empty());
}

TEST_CASE("event log: a failed move says why") {
  MoveEvent e{"k", 10, 0, "host", "disk", "none", true, 5, false, "IOError: writing seg-1: No space left"};
  const std::string line = EventLog::FormatLine(e, 0);
  CHECK(line.find("\"outcome\":\"failed\",\"error\":\"IOError: writing seg-1: No space left\"}") != std::string::npos);
  MoveEvent bare{"k", 10, 0, "host", "disk", "none", true, 5, false};
  CHECK(EventLog::FormatLine(bare, 0).find("\"error\":\"unspecified\"") != std::string::npos);
  MoveEvent ok{"k", 10, 10, "host", "disk", "none", true, 5, true};
  CHECK(EventLog::FormatLine(ok, 0).find("error") == std::string::npos);
}

TEST_CASE("metrics http: request parsing answers 200, 404, 405 and 400") {
  auto render = [] { return std::string("spillway_objects 1\n"); };
  auto r = MetricsHttpServer::Respond("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", render);
  if (r.empty()) {
    MESSAGE("SKIP: built with SPILLWAY_METRICS_HTTP=OFF");
    return;
  }
  CHECK(r.rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
  CHECK(r.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  CHECK(r.find("Content-Length: 19\r\n") != std::string::npos);
  CHECK(Body(r) == "spillway_objects 1\n");
  CHECK(Body(MetricsHttpServer::Respond("HEAD /metrics HTTP/1.0\r\n\r\n", render)).empty());
  CHECK(MetricsHttpServer::Respond("GET /metrics?x=1 HTTP/1.0\r\n\r\n", render).rfind("HTTP/1.0 200", 0) == 0);
  CHECK(MetricsHttpServer::Respond("GET /nope HTTP/1.0\r\n\r\n", render).rfind("HTTP/1.0 404", 0) == 0);
  CHECK(MetricsHttpServer::Respond("POST /metrics HTTP/1.0\r\n\r\n", render).rfind("HTTP/1.0 405", 0) == 0);
  CHECK(MetricsHttpServer::Respond("garbage\r\n\r\n", render).rfind("HTTP/1.0 400", 0) == 0);
  CHECK(MetricsHttpServer::Respond("", render).rfind("HTTP/1.0 400", 0) == 0);
}

TEST_CASE("metrics http: bad addresses are refused") {
  for (const char* bad : {"9464", "127.0.0.1:", "127.0.0.1:99999", "example.com:9464", "127.0.0.1:x"}) {
    auto s = MetricsHttpServer::Start(bad, [] { return std::string(); });
    CHECK_MESSAGE(!s.ok(), bad);
  }
}

TEST_CASE("metrics http: a real engine scraped on 127.0.0.1 passes promtool check metrics") {
  TempDir dir("metrics-http");
  EngineOptions o;
  o.background_mover = false;
  Config c = HostFileChain(dir.path(), 1 << 20, 64 << 20, CodecKind::kLz4);
  c.metrics.labels_set = true;
  c.metrics.labels = {{"worker", "tcp://127.0.0.1:4000"}};
  auto opened = Engine::Open(c, o);
  REQUIRE(opened.ok());
  Engine& e = **opened;
  for (int i = 0; i < 64; ++i) REQUIRE(e.Put("p/" + std::to_string(i), CompressibleBytes(48 << 10, i)).ok());
  for (int i = 0; i < 64; i += 5) REQUIRE(e.Get("p/" + std::to_string(i)).ok());
  REQUIRE(e.Flush().ok());

  auto server = MetricsHttpServer::Start("127.0.0.1:0", [&e] { return StatsToPrometheus(e.Stats()); });
  if (!server.ok() && server.status().code() == StatusCode::kNotSupported) {
    MESSAGE("SKIP: built with SPILLWAY_METRICS_HTTP=OFF");
    return;
  }
  REQUIRE_MESSAGE(server.ok(), server.status().ToString());
  const int port = (*server)->port();
  REQUIRE(port > 0);
  const std::string resp = Exchange(port, "GET /metrics HTTP/1.0\r\n\r\n");
  REQUIRE(resp.rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
  const std::string body = Body(resp);
  CHECK(body.find("spillway_tier_objects{worker=\"tcp://127.0.0.1:4000\",tier=\"disk\",kind=\"file\"}") !=
        std::string::npos);
  CHECK(body.find("spillway_build_info{") != std::string::npos);
  // A client that connects and says nothing, or closes at once, does not stop the next scrape.
  (void)Exchange(port, "");
  CHECK(Exchange(port, "GET / HTTP/1.0\r\n\r\n").rfind("HTTP/1.0 200", 0) == 0);
  CHECK((*server)->requests() >= 2);

  if (!HavePromtool()) {
    MESSAGE("SKIP: promtool not installed (Debian: apt-get install prometheus); the scrape was not checked by it");
    return;
  }
  CHECK_MESSAGE(Promtool(body, dir.path()) == "", body.substr(0, 2000));
}

TEST_CASE("metrics http: 100 stalled clients delay neither a scrape nor the server's close") {
  auto server = MetricsHttpServer::Start("127.0.0.1:0", [] { return std::string("spillway_objects 1\n"); });
  if (!server.ok() && server.status().code() == StatusCode::kNotSupported) {
    MESSAGE("SKIP: built with SPILLWAY_METRICS_HTTP=OFF");
    return;
  }
  REQUIRE(server.ok());
  const int port = (*server)->port();
  std::vector<int> slow = StalledClients(port, 100);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the server take them all first

  auto t = std::chrono::steady_clock::now();
  const std::string resp = Exchange(port, "GET /metrics HTTP/1.0\r\n\r\n");
  const double scrape_s = SecondsSince(t);
  CHECK(resp.rfind("HTTP/1.0 200 OK", 0) == 0);
  CHECK(Body(resp) == "spillway_objects 1\n");
  CHECK_MESSAGE(scrape_s < 1.0, "the scrape took " << scrape_s << " s behind 100 stalled clients");

  t = std::chrono::steady_clock::now();
  server->reset();
  const double close_s = SecondsSince(t);
  CHECK_MESSAGE(close_s < 1.0, "closing took " << close_s << " s with 100 stalled clients connected");
  for (int fd : slow) ::close(fd);
}

TEST_CASE("metrics http: the deadline covers the whole request head, not each read") {
  auto server = MetricsHttpServer::Start("127.0.0.1:0", [] { return std::string("x 1\n"); });
  if (!server.ok() && server.status().code() == StatusCode::kNotSupported) {
    MESSAGE("SKIP: built with SPILLWAY_METRICS_HTTP=OFF");
    return;
  }
  REQUIRE(server.ok());
  const int fd = Connect((*server)->port());
  REQUIRE(fd >= 0);
  // One byte every 50 ms, never finishing: each read is quick, the head never is.
  const auto t = std::chrono::steady_clock::now();
  const std::string head = "GET /metrics HTTP/1.0\r\nX-Padding: " + std::string(4000, 'a');
  bool cut = false;
  for (size_t i = 0; i < head.size() && SecondsSince(t) < 6.0; ++i) {
    if (::send(fd, &head[i], 1, MSG_NOSIGNAL) != 1) {
      cut = true;
      break;
    }
    char c;
    const ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
    if (n == 0 || (n > 0 && c == 'H')) {  // closed, or the start of a 408
      cut = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double s = SecondsSince(t);
  ::close(fd);
  CHECK_MESSAGE(cut, "a client trickling one byte every 50 ms was still connected after " << s << " s");
  CHECK(s >= 1.5);  // not before its deadline
  CHECK(s < 4.0);
  CHECK((*server)->dropped() >= 1);
}

TEST_CASE("metrics http: a client that never reads its answer, or a flood of idle ones, leaves the scrape alone") {
  const std::string big(8 << 20, 'x');  // more than the socket buffers hold
  auto server = MetricsHttpServer::Start("127.0.0.1:0", [&big] { return big; });
  if (!server.ok() && server.status().code() == StatusCode::kNotSupported) {
    MESSAGE("SKIP: built with SPILLWAY_METRICS_HTTP=OFF");
    return;
  }
  REQUIRE(server.ok());
  const int port = (*server)->port();
  const int lazy = Connect(port);
  REQUIRE(lazy >= 0);
  const std::string req = "GET /metrics HTTP/1.0\r\n\r\n";
  REQUIRE(::send(lazy, req.data(), req.size(), MSG_NOSIGNAL) == ssize_t(req.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t = std::chrono::steady_clock::now();
  std::string resp = Exchange(port, req);
  CHECK(Body(resp).size() == big.size());
  CHECK_MESSAGE(SecondsSince(t) < 1.0, "the scrape waited " << SecondsSince(t) << " s on a client not reading");

  // More idle clients than there are slots: the oldest make room.
  std::vector<int> idle = StalledClients(port, int(MetricsHttpServer::kMaxConnections) + 20);
  t = std::chrono::steady_clock::now();
  resp = Exchange(port, "GET / HTTP/1.0\r\n\r\n");
  CHECK(resp.rfind("HTTP/1.0 200 OK", 0) == 0);
  CHECK(SecondsSince(t) < 1.0);
  CHECK((*server)->dropped() >= 20);
  t = std::chrono::steady_clock::now();
  server->reset();
  CHECK(SecondsSince(t) < 1.0);
  for (int fd : idle) ::close(fd);
  ::close(lazy);
}

TEST_CASE("metrics http: an engine serving the endpoint closes within 1 s while 100 clients stall") {
  TempDir dir("metrics-http-close");
  EngineOptions o;
  o.background_mover = false;
  Config c = HostFileChain(dir.path(), 1 << 20, 64 << 20);
  const int port = FreePort();
  c.metrics.listen = "127.0.0.1:" + std::to_string(port);
  auto opened = Engine::Open(c, o);
  if (!opened.ok() && opened.status().code() == StatusCode::kNotSupported) {
    MESSAGE("SKIP: built with SPILLWAY_METRICS_HTTP=OFF");
    return;
  }
  REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
  REQUIRE((*opened)->Put("k", CompressibleBytes(4096, 1)).ok());
  std::vector<int> slow = StalledClients(port, 100);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t = std::chrono::steady_clock::now();
  const std::string resp = Exchange(port, "GET /metrics HTTP/1.0\r\n\r\n");
  CHECK(Body(resp).find("spillway_tier_objects{") != std::string::npos);
  CHECK(SecondsSince(t) < 1.0);
  t = std::chrono::steady_clock::now();
  opened->reset();
  const double close_s = SecondsSince(t);
  CHECK_MESSAGE(close_s < 1.0, "closing the engine took " << close_s << " s with 100 stalled clients");
  for (int fd : slow) ::close(fd);
}

TEST_CASE("stats table: columns sized to their contents, a long tier name keeps the rows aligned") {
  EngineStats s;
  for (const char* name : {"host", "a-very-long-tier-name-on-nvme-0"}) {
    TierStats t;
    t.name = name;
    t.kind = "file";
    t.capacity_bytes = 256ull << 20;
    t.used_bytes = 3ull << 29;
    s.tiers.push_back(t);
  }
  const std::string table = FormatStatsTable(s);
  std::vector<std::string> lines;
  for (size_t p = 0, e; (e = table.find('\n', p)) != std::string::npos && e > p; p = e + 1) {
    lines.push_back(table.substr(p, e - p));
  }
  REQUIRE(lines.size() == 3);  // header + two tiers (the last column is right-aligned)
  CHECK(lines[0].size() == lines[1].size());
  CHECK(lines[1].size() == lines[2].size());
  CHECK(lines[2].rfind("a-very-long-tier-name-on-nvme-0  file", 0) == 0);
  CHECK(table.find("256 MiB") != std::string::npos);  // the one byte formatter
  CHECK(table.find("1.5 GiB") != std::string::npos);
}
