// ${VAR} and ${VAR:-default} expansion.
#include <doctest/doctest.h>

#include <map>

#include "config/expand.h"

namespace spillway {
namespace {

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string Expanded(const char* text, const EnvLookup& env) {
  StatusOr<std::string> s = ExpandVars(text, env);
  REQUIRE_MESSAGE(s.ok(), text, ": ", s.status().ToString());
  return *s;
}

std::string Failure(const char* text, const EnvLookup& env) {
  StatusOr<std::string> s = ExpandVars(text, env);
  REQUIRE_MESSAGE(!s.ok(), text, " expanded unexpectedly");
  return s.status().message();
}

TEST_CASE("variables are replaced") {
  EnvLookup env = FakeEnv({{"DIR", "/mnt/a"}, {"HOST", "n1"}, {"EMPTY", ""}});
  CHECK(Expanded("${DIR}/spill", env) == "/mnt/a/spill");
  CHECK(Expanded("/x/${HOST}/${DIR}", env) == "/x/n1//mnt/a");
  CHECK(Expanded("no variables", env) == "no variables");
  CHECK(Expanded("${EMPTY}", env).empty());
}

TEST_CASE("defaults apply when unset or empty") {
  EnvLookup env = FakeEnv({{"DIR", "/mnt/a"}, {"EMPTY", ""}});
  CHECK(Expanded("${NOPE:-/var/tmp}/s", env) == "/var/tmp/s");
  CHECK(Expanded("${DIR:-/var/tmp}", env) == "/mnt/a");
  CHECK(Expanded("${EMPTY:-fallback}", env) == "fallback");
  CHECK(Expanded("${NOPE:-}", env).empty());
  CHECK(Expanded("${NOPE:-${DIR}/x}", env) == "/mnt/a/x");
  CHECK(Expanded("${NOPE:-${ALSO_NOPE:-deep}}", env) == "deep");
}

TEST_CASE("dollar signs that are not expansions") {
  EnvLookup env = FakeEnv({});
  CHECK(Expanded("cost$5", env) == "cost$5");
  CHECK(Expanded("$$HOME", env) == "$HOME");
  CHECK(Expanded("$${X}", env) == "${X}");
  CHECK(Expanded("end$", env) == "end$");
}

TEST_CASE("an unset variable without a default names the variable") {
  EnvLookup env = FakeEnv({});
  std::string m = Failure("${SPILL_ROOT}/x", env);
  CHECK(m.find("'SPILL_ROOT'") != std::string::npos);
  CHECK(m.find("not set") != std::string::npos);
  CHECK(Failure("${NOPE:-${INNER}}", env).find("'INNER'") != std::string::npos);
}

TEST_CASE("malformed expansions are errors") {
  EnvLookup env = FakeEnv({{"A", "1"}});
  CHECK(Failure("${A", env).find("unterminated") != std::string::npos);
  CHECK(Failure("${}", env).find("invalid variable name") != std::string::npos);
  CHECK(Failure("${1A}", env).find("invalid variable name") != std::string::npos);
  CHECK(Failure("${A:=x}", env).find("unsupported") != std::string::npos);
  std::string deep;
  for (int i = 0; i < 20; ++i) deep += "${N:-";
  deep += "x";
  for (int i = 0; i < 20; ++i) deep += "}";
  CHECK(Failure(deep.c_str(), env).find("nested") != std::string::npos);
}

TEST_CASE("the process environment, with a HOSTNAME fallback") {
  setenv("SPILLWAY_EXPAND_TEST", "v", 1);
  CHECK(ProcessEnv("SPILLWAY_EXPAND_TEST") == std::optional<std::string>("v"));
  unsetenv("SPILLWAY_EXPAND_TEST");
  CHECK_FALSE(ProcessEnv("SPILLWAY_EXPAND_TEST").has_value());
  const char* saved = std::getenv("HOSTNAME");
  std::string keep = saved ? saved : "";
  unsetenv("HOSTNAME");
  std::optional<std::string> host = ProcessEnv("HOSTNAME");
  REQUIRE(host.has_value());
  CHECK_FALSE(host->empty());
  if (saved) setenv("HOSTNAME", keep.c_str(), 1);
}

TEST_CASE("a caller's variables come before the environment and see the default") {
  EnvLookup env = FakeEnv({{"DIR", "/env"}, {"OTHER", "/o"}});
  std::vector<std::pair<std::string, std::optional<std::string>>> asked;
  VarResolver vars = [&](const std::string& name,
                         const std::optional<std::string>& fallback) -> StatusOr<std::optional<std::string>> {
    asked.emplace_back(name, fallback);
    if (name == "DIR") return std::optional<std::string>("/mine #1 \"q\"");
    if (name == "BAD") return Status::InvalidArgument("no value for it");
    return std::optional<std::string>();
  };
  StatusOr<std::string> s = ExpandVars("${DIR}/a:${OTHER}:${NONE:-${OTHER}/d}", env, vars);
  REQUIRE(s.ok());
  CHECK(*s == "/mine #1 \"q\"/a:/o:/o/d");
  REQUIRE(asked.size() == 4);  // DIR, OTHER, OTHER inside NONE's default (expanded once), NONE
  CHECK(asked[0] == std::make_pair(std::string("DIR"), std::optional<std::string>()));
  CHECK(asked[3] == std::make_pair(std::string("NONE"), std::optional<std::string>("/o/d")));
  StatusOr<std::string> bad = ExpandVars("x/${BAD}", env, vars);
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() == "${BAD}: no value for it");
}

}  // namespace
}  // namespace spillway
