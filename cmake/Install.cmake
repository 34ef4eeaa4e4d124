# `cmake --install` puts the public headers (include/spillway/*.h, nothing
# internal), the static libraries, and a CMake package so outside projects can:
#   find_package(spillway REQUIRED)
#   target_link_libraries(app PRIVATE spillway::spillway)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS spillway_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/spillway/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/spillway
        FILES_MATCHING PATTERN "*.h")
install(TARGETS spillway spillway_engine spillway_config spillway_tiers spillway_codecs spillway_base
        EXPORT spillwayTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT spillwayTargets NAMESPACE spillway:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/spillway)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/spillwayConfig.cmake.in
  ${PROJECT_BINARY_DIR}/spillwayConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/spillway)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/spillwayConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/spillwayConfig.cmake ${PROJECT_BINARY_DIR}/spillwayConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/spillway)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/Dependencies.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/spillway
        RENAME spillwayDependencies.cmake)
