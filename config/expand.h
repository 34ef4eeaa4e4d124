// ${VAR} and ${VAR:-default} in config strings.
//
// ${VAR:-default} uses the default when VAR is unset or empty; the default may
// itself contain ${...}. "$$" is a literal "$"; a "$" not followed by "{" or
// "$" is kept as is. An unset variable without a default is an error that
// names the variable.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "spillway/config_loader.h"
#include "spillway/status.h"

namespace spillway {

// Returns the variable's value, or nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment. HOSTNAME, which shells set but rarely export,
// falls back to gethostname().
std::optional<std::string> ProcessEnv(const std::string& name);

StatusOr<std::string> ExpandVars(std::string_view text, const EnvLookup& env = ProcessEnv);
// The same, asking `vars` (LoadOptions::vars) before `env` for every variable.
StatusOr<std::string> ExpandVars(std::string_view text, const EnvLookup& env, const VarResolver& vars);

}  // namespace spillway
