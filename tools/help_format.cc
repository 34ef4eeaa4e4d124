// Help text without CLI11's type names (tools/help_format.h).
#include "tools/help_format.h"

#include <cctype>
#include <regex>
#include <set>
#include <vector>

namespace spillway::cli {
namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool IsCli11Type(const std::string& t) {
  return t == "TEXT" || t == "INT" || t == "UINT" || t == "FLOAT" || t == "NUMBER" || t == "BOOLEAN" || t == "CHAR";
}

// "N", "SIZE", "MIN:MAX", "N (1-256)" for one option.
std::string Placeholder(const CLI::Option* opt) {
  static const std::regex kRange(R"(^(INT|UINT|FLOAT|NUMBER) in \[(.+) - (.+)\]$)");
  std::string base, range, named;
  const std::string full = opt->get_type_name();
  size_t pos = 0;
  while (pos <= full.size()) {
    const size_t colon = std::min(full.find(':', pos), full.size());
    const std::string part = full.substr(pos, colon - pos);
    pos = colon + 1;
    std::smatch m;
    if (part.empty()) continue;
    if (IsCli11Type(part)) {
      if (base.empty()) base = part;
    } else if (part == "N" || part == "X") {
      // The generic placeholders of the numeric validators (cli_util.h):
      // used only when nothing names the value better.
      base = part == "N" ? "INT" : "FLOAT";
    } else if (std::regex_match(part, m, kRange)) {
      if (base.empty()) base = m[1];
      range = m[2].str() + "-" + m[3].str();
    } else if (named != part) {  // "SECONDS:SECONDS": a type_name and a validator of one name
      named += (named.empty() ? "" : ":") + part;
    }
  }
  if (!named.empty()) return named;
  std::string p = base == "INT" || base == "UINT" ? "N" : base == "FLOAT" || base == "NUMBER" ? "X"
                                                                                             : Upper(opt->get_single_name());
  if (!range.empty()) p += " (" + range + ")";
  return p;
}

}  // namespace

std::string HelpFormatter::make_option_name(const CLI::Option* opt, bool is_positional) const {
  if (is_positional) return Upper(opt->get_name(true, false));
  // "--verify,--no-verify{false}": the braces name the value the negation sets.
  std::string name = opt->get_name(false, true);
  for (size_t open; (open = name.find('{')) != std::string::npos;) {
    const size_t close = name.find('}', open);
    name.erase(open, close == std::string::npos ? std::string::npos : close - open + 1);
  }
  return name;
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
  std::string out;
  if (opt->get_type_size() != 0) {
    // A positional's capitalized name is its placeholder already; a flag
    // (no type name) takes no value.
    if (!opt->get_positional() && !opt->get_type_name().empty()) {
      std::string p = Placeholder(opt);
      const size_t paren = p.find(" (");
      const std::string def = opt->get_default_str();
      if (!def.empty()) p.insert(paren == std::string::npos ? p.size() : paren, "=" + def);
      out += " " + p;
    }
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) {
      out += " ...";
    } else if (opt->get_expected_min() > 1) {
      out += " x " + std::to_string(opt->get_expected());
    }
    if (opt->get_required()) out += " " + get_label("REQUIRED");
  }
  if (!opt->get_envname().empty()) out += " (" + get_label("Env") + ":" + opt->get_envname() + ")";
  // "(with --reopen)", "(not with --seconds)": CLI11's "Needs:" and
  // "Excludes:" labels read as a second placeholder after the value's.
  auto names = [](const std::set<CLI::Option*>& opts) {
    std::string list;
    for (const CLI::Option* o : opts) list += (list.empty() ? "" : ", ") + o->get_name();
    return list;
  };
  if (!opt->get_needs().empty()) out += " (with " + names(opt->get_needs()) + ")";
  if (!opt->get_excludes().empty()) out += " (not with " + names(opt->get_excludes()) + ")";
  return out;
}

void UseHelpFormatter(CLI::App& app) { app.formatter(std::make_shared<HelpFormatter>()); }

}  // namespace spillway::cli
