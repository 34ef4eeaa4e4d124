# Third-party dependencies as imported targets spillway::dep_<name>.
# With SPILLWAY_STATIC_DEPS the static archives (.a) are used so the binaries
# carry no shared third-party dependency besides glibc (and the CUDA driver).

function(spillway_find_dep target header libname)
  if(SPILLWAY_STATIC_DEPS)
    find_library(_lib_${libname} NAMES lib${libname}.a ${libname} REQUIRED)
  else()
    find_library(_lib_${libname} NAMES ${libname} REQUIRED)
  endif()
  find_path(_inc_${libname} NAMES ${header} REQUIRED)
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES
    INTERFACE_LINK_LIBRARIES "${_lib_${libname}}"
    INTERFACE_INCLUDE_DIRECTORIES "${_inc_${libname}}")
endfunction()

if(NOT TARGET spillway::dep_yaml)
spillway_find_dep(spillway::dep_yaml yaml-cpp/yaml.h yaml-cpp)
spillway_find_dep(spillway::dep_uring liburing.h uring)
spillway_find_dep(spillway::dep_xxhash xxhash.h xxhash)
spillway_find_dep(spillway::dep_zstd zstd.h zstd)
spillway_find_dep(spillway::dep_lz4 lz4.h lz4)
endif()

find_package(Threads REQUIRED)

# Header-only libraries (CLI11, nlohmann-json, doctest) are found by their
# headers so a machine without their CMake packages can still build. Only the
# build uses them: in the installed package (spillwayConfig.cmake sets
# SPILLWAY_INSTALLED_PACKAGE) the targets are empty, so users of the package
# need neither.
if(NOT TARGET spillway::dep_json)
  add_library(spillway::dep_cli11 INTERFACE IMPORTED GLOBAL)
  add_library(spillway::dep_json INTERFACE IMPORTED GLOBAL)
endif()
if(NOT SPILLWAY_INSTALLED_PACKAGE AND NOT SPILLWAY_JSON_INCLUDE)
  find_path(SPILLWAY_CLI11_INCLUDE CLI/CLI.hpp REQUIRED)
  find_path(SPILLWAY_JSON_INCLUDE nlohmann/json.hpp REQUIRED)
  set_target_properties(spillway::dep_cli11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${SPILLWAY_CLI11_INCLUDE})
  set_target_properties(spillway::dep_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${SPILLWAY_JSON_INCLUDE})
endif()

# ---- CUDA ----------------------------------------------------------------
set(SPILLWAY_HAVE_CUDA OFF)
if(NOT SPILLWAY_CUDA STREQUAL "OFF")
  if(SPILLWAY_CUDA STREQUAL "ON")
    find_package(CUDAToolkit REQUIRED)
  else()
    find_package(CUDAToolkit QUIET)
  endif()
  if(CUDAToolkit_FOUND)
    set(SPILLWAY_HAVE_CUDA ON)
    add_library(spillway::dep_cuda INTERFACE IMPORTED GLOBAL)
    # The CUDA runtime is linked statically, always: it loads the driver
    # (libcuda) itself when first called, so a CUDA build's binaries start on a
    # node without CUDA (no libcudart at load time) and see no devices there.
    target_link_libraries(spillway::dep_cuda INTERFACE CUDA::cudart_static)
  endif()
endif()
message(STATUS "spillway: CUDA support ${SPILLWAY_HAVE_CUDA}; static deps ${SPILLWAY_STATIC_DEPS}")

if(SPILLWAY_STATIC_DEPS)
  add_link_options(-static-libstdc++ -static-libgcc)
endif()

# spillway_component(name SOURCES...): a static library for one component folder.
function(spillway_component name)
  add_library(spillway_${name} STATIC ${ARGN})
  add_library(spillway::${name} ALIAS spillway_${name})
  # Public headers: #include "spillway/engine.h" (include/); internal headers:
  # "tiers/tier.h" (the source root, never installed).
  target_include_directories(spillway_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:include>)
endfunction()
