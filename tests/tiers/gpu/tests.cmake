# Included by tests/CMakeLists.txt for tests/gpu. The GPU benchmark lives in
# bench/gpu and is built with the GPU tests, so one build has both.
if(NOT TARGET gpu_bench AND EXISTS ${PROJECT_SOURCE_DIR}/bench/gpu/CMakeLists.txt)
  add_subdirectory(${PROJECT_SOURCE_DIR}/bench/gpu ${CMAKE_BINARY_DIR}/bench/gpu)
endif()
