// Expansion of ${VAR} and ${VAR:-default}; see expand.h for the rules.
#include "config/expand.h"

#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdlib>

namespace spillway {
namespace {

constexpr int kMaxNesting = 16;

bool ValidName(std::string_view name) {
  if (name.empty()) return false;
  if (!std::isalpha(static_cast<unsigned char>(name[0])) && name[0] != '_') return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// Index of the '}' closing the "${" at `open`, or npos.
size_t MatchingBrace(std::string_view text, size_t open) {
  int depth = 1;
  size_t j = open + 2;
  while (j < text.size()) {
    if (text[j] == '$' && j + 1 < text.size() && text[j + 1] == '{') {
      ++depth;
      j += 2;
    } else if (text[j] == '}') {
      if (--depth == 0) return j;
      ++j;
    } else {
      ++j;
    }
  }
  return std::string_view::npos;
}

StatusOr<std::string> Expand(std::string_view text, const EnvLookup& env, const VarResolver& vars,
                             int nesting) {
  if (nesting > kMaxNesting) {
    return Status::InvalidArgument("${...} defaults nested more than 16 deep");
  }
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c != '$' || i + 1 >= text.size() || (text[i + 1] != '{' && text[i + 1] != '$')) {
      out += c;
      ++i;
      continue;
    }
    if (text[i + 1] == '$') {
      out += '$';
      i += 2;
      continue;
    }
    size_t close = MatchingBrace(text, i);
    if (close == std::string_view::npos) {
      return Status::InvalidArgument("unterminated '${' in '" + std::string(text) +
                                     "': expected ${VAR} or ${VAR:-default}");
    }
    std::string_view body = text.substr(i + 2, close - i - 2);
    size_t colon = body.find(':');
    std::string name(body.substr(0, colon));
    if (!ValidName(name)) {
      return Status::InvalidArgument("invalid variable name '" + name + "' in '${" +
                                     std::string(body) + "}': expected letters, digits and _");
    }
    std::string_view op = colon == std::string_view::npos ? std::string_view() : body.substr(colon);
    if (!op.empty() && op.substr(0, 2) != ":-") {
      return Status::InvalidArgument("unsupported expansion '${" + std::string(body) +
                                     "}': expected ${VAR} or ${VAR:-default}");
    }
    // The default, expanded once: the caller's resolver sees it, and it is used below.
    std::optional<StatusOr<std::string>> expanded_default;
    if (vars) {
      std::optional<std::string> fallback;
      if (!op.empty()) {
        expanded_default = Expand(op.substr(2), env, vars, nesting + 1);
        if (expanded_default->ok()) fallback = **expanded_default;
      }
      StatusOr<std::optional<std::string>> own = vars(name, fallback);
      if (!own.ok()) {
        return Status(own.status().code(), "${" + name + "}: " + std::string(own.status().message()));
      }
      if (own->has_value()) {
        out += **own;
        i = close + 1;
        continue;
      }
    }
    std::optional<std::string> value = env(name);
    if (colon == std::string_view::npos) {
      if (!value) {
        return Status::InvalidArgument("environment variable '" + name +
                                       "' is not set (write ${" + name +
                                       ":-default} to give a default)");
      }
      out += *value;
    } else {
      if (value && !value->empty()) {
        out += *value;
      } else {
        if (!expanded_default) expanded_default = Expand(op.substr(2), env, vars, nesting + 1);
        if (!expanded_default->ok()) return expanded_default->status();
        out += **expanded_default;
      }
    }
    i = close + 1;
  }
  return out;
}

}  // namespace

std::optional<std::string> ProcessEnv(const std::string& name) {
  if (const char* v = std::getenv(name.c_str())) return std::string(v);
  if (name == "HOSTNAME") {
    char host[HOST_NAME_MAX + 1] = {};
    if (gethostname(host, sizeof host - 1) == 0) return std::string(host);
  }
  return std::nullopt;
}

StatusOr<std::string> ExpandVars(std::string_view text, const EnvLookup& env) {
  return Expand(text, env, VarResolver(), 0);
}

StatusOr<std::string> ExpandVars(std::string_view text, const EnvLookup& env, const VarResolver& vars) {
  return Expand(text, env, vars, 0);
}

}  // namespace spillway
