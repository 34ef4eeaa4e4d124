// A parsed YAML document as the schema reader sees it. yaml_loader.cc builds
// it from yaml-cpp nodes so that yaml-cpp stays inside that one file.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spillway {

struct ConfigEntry;

struct ConfigNode {
  enum class Kind : unsigned char { kNull, kScalar, kSequence, kMap };

  Kind kind = Kind::kNull;
  std::string scalar;  // kScalar: the text, before ${VAR} expansion
  int line = 0;        // 1-based position of the value (of the key, for a null value)
  int column = 0;
  std::vector<ConfigNode> items;                           // kSequence
  std::vector<ConfigEntry> entries;  // kMap, in file order

  bool is_null() const { return kind == Kind::kNull; }
  bool is_scalar() const { return kind == Kind::kScalar; }
  bool is_sequence() const { return kind == Kind::kSequence; }
  bool is_map() const { return kind == Kind::kMap; }

  // The value of the first entry whose key is `key`; null when absent.
  const ConfigNode* Find(std::string_view key) const;

  // "a map", "a list", "a string", "nothing": for "expected X, found Y".
  const char* Describe() const {
    switch (kind) {
      case Kind::kNull: return "nothing";
      case Kind::kScalar: return "a scalar";
      case Kind::kSequence: return "a list";
      case Kind::kMap: return "a map";
    }
    return "?";
  }
};

struct ConfigEntry {
  ConfigNode key;
  ConfigNode value;
};

inline const ConfigNode* ConfigNode::Find(std::string_view key) const {
  for (const ConfigEntry& e : entries) {
    if (e.key.is_scalar() && e.key.scalar == key) return &e.value;
  }
  return nullptr;
}

}  // namespace spillway
