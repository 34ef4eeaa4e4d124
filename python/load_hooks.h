// The Python caller's hooks into config loading (LoadOptions::vars and
// LoadOptions::scratch_path): Engine(config, vars=..., scratch_path=...) and
// validate_config(). The loader runs with the GIL released; each hook takes
// it for the call into Python only.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>

#include "spillway/config_loader.h"

namespace spillway {

class PyLoadHooks {
 public:
  // `vars`: None, a mapping NAME -> str, or a callable (name, default) -> str
  // or None (None: the environment decides). `scratch_path`: None or a
  // callable (path) -> str.
  PyLoadHooks(pybind11::object vars, pybind11::object scratch_path)
      : vars_(std::move(vars)), scratch_(std::move(scratch_path)) {}

  // REQUIRES: the hooks outlive every use of `options`.
  void Apply(LoadOptions* options) {
    if (!vars_.is_none()) {
      options->vars = [this](const std::string& name,
                             const std::optional<std::string>& fallback) -> StatusOr<std::optional<std::string>> {
        pybind11::gil_scoped_acquire gil;
        try {
          pybind11::object v;
          if (PyMapping_Check(vars_.ptr()) && !PyCallable_Check(vars_.ptr())) {
            pybind11::object get = vars_.attr("get");
            v = get(name);
          } else {
            v = vars_(name, fallback ? pybind11::cast(*fallback) : pybind11::none());
          }
          if (v.is_none()) return std::optional<std::string>();
          return std::optional<std::string>(pybind11::str(v).cast<std::string>());
        } catch (pybind11::error_already_set& e) {
          return Status::InvalidArgument(e.what());
        }
      };
    }
    if (!scratch_.is_none()) {
      options->scratch_path = [this](const std::string& path) -> std::string {
        pybind11::gil_scoped_acquire gil;
        try {
          return pybind11::str(scratch_(path)).cast<std::string>();
        } catch (pybind11::error_already_set& e) {
          if (error_.empty()) error_ = e.what();
          return path;
        }
      };
    }
  }

  // The first exception scratch_path raised, as its message (empty: none).
  const std::string& error() const { return error_; }

 private:
  pybind11::object vars_;
  pybind11::object scratch_;
  std::string error_;
};

}  // namespace spillway
