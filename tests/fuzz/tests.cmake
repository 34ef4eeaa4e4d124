# libFuzzer targets: tests/fuzz/*_fuzz.cc, built when SPILLWAY_BUILD_FUZZERS is
# ON and the compiler is clang. Seed corpora live in tests/fuzz/corpus/<name>/.
# Run: build-fuzz/tests/<name> -max_total_time=60 tests/fuzz/corpus/<name>
if(SPILLWAY_BUILD_FUZZERS AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  file(GLOB _fuzzers CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*_fuzz.cc)
  foreach(src ${_fuzzers})
    get_filename_component(_name ${src} NAME_WE)
    add_executable(${_name} ${src})
    target_link_libraries(${_name} PRIVATE spillway::spillway)
    target_compile_options(${_name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${_name} PRIVATE -fsanitize=fuzzer)
  endforeach()
  # The CLI's option parsers live beside the subcommands, not in the library.
  if(TARGET cli_options_fuzz)
    target_sources(cli_options_fuzz PRIVATE ${PROJECT_SOURCE_DIR}/tools/cli_util.cc)
    target_link_libraries(cli_options_fuzz PRIVATE spillway::dep_cli11)
  endif()
endif()
