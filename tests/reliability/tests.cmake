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

# The fault stress (stress_faults_test.sh) runs seeds 1-10 in CI. One CTest
# entry per pair of seeds lets CTest run them side by side: the same seeds,
# about a fifth of the wall time of one serial entry.
if(TEST reliability/stress_faults_test)
  set_tests_properties(reliability/stress_faults_test PROPERTIES
    ENVIRONMENT "SPILLWAY_STRESS_FIRST_SEED=1;SPILLWAY_STRESS_SEEDS=2" COST 50)
  foreach(_first 3 5 7 9)
    math(EXPR _last "${_first} + 1")
    set(_t reliability/stress_faults_test_seeds_${_first}_${_last})
    add_test(NAME ${_t} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/stress_faults_test.sh
             $<TARGET_FILE:spillway_cli> ${PROJECT_SOURCE_DIR})
    set_tests_properties(${_t} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 COST 50
      ENVIRONMENT "SPILLWAY_STRESS_FIRST_SEED=${_first};SPILLWAY_STRESS_SEEDS=2")
  endforeach()
endif()
