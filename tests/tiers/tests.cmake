# The FileIo conformance case on a killed writer's in-flight writes
# (io/file_io_conformance_test.cc) submits them with liburing itself.
target_link_libraries(spillway_test_tiers PRIVATE spillway::dep_uring)
