# Reliability suite extras (included by tests/CMakeLists.txt after the
# spillway_test_reliability binary is defined).
#   spillway_crash_child: the crash test's victim process (crash_child.cc),
#   run by crash_test.cc with fork/exec and killed with SIGKILL.
add_executable(spillway_crash_child ${CMAKE_CURRENT_LIST_DIR}/crash_child.cc)
target_link_libraries(spillway_crash_child PRIVATE spillway::spillway)
target_include_directories(spillway_crash_child PRIVATE ${PROJECT_SOURCE_DIR})
if(TARGET spillway_test_reliability)
  add_dependencies(spillway_test_reliability spillway_crash_child spillway_cli)
  target_include_directories(spillway_test_reliability PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(spillway_test_reliability PRIVATE
    SPILLWAY_CRASH_CHILD="$<TARGET_FILE:spillway_crash_child>")
endif()
