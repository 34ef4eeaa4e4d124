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

# The generated version header (spillway/version.h) with the public headers.
install(FILES ${PROJECT_BINARY_DIR}/include/spillway/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/spillway)

# pkg-config: `pkg-config --cflags --libs spillway`.
set(SPILLWAY_PC_CFLAGS "")
set(SPILLWAY_PC_LIBS "")
if(SPILLWAY_HAVE_CUDA)
  set(SPILLWAY_PC_CFLAGS " -DSPILLWAY_HAVE_CUDA=1")
  # The static runtime (cmake/Dependencies.cmake): a program built against the
  # library needs no libcudart where it runs.
  set(SPILLWAY_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt")
endif()
file(RELATIVE_PATH SPILLWAY_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")  # ../.. : the prefix from the .pc
configure_file(${PROJECT_SOURCE_DIR}/cmake/spillway.pc.in ${PROJECT_BINARY_DIR}/spillway.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/spillway.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# What `spillway demo` and `spillway bench` look for beside the binary
# (<prefix>/share/spillway, see tools/cli_util.h FindDataFile).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DATADIR}/spillway/examples
        PATTERN "embed/build" EXCLUDE)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/bench/zict_peer.py DESTINATION ${CMAKE_INSTALL_DATADIR}/spillway/bench)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/CHANGELOG.md ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Hand-written man pages (man/*.1) and the bash completion.
file(GLOB SPILLWAY_MAN_PAGES ${PROJECT_SOURCE_DIR}/man/*.1)
install(FILES ${SPILLWAY_MAN_PAGES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${PROJECT_SOURCE_DIR}/tools/completion/spillway.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME spillway)

# Installed binaries and libraries carry no debug info (the build tree's keep
# it): `cmake --install` strips the CLI and the static libraries here, the
# Python module in python/CMakeLists.txt. -DSPILLWAY_INSTALL_STRIP=OFF keeps it.
if(SPILLWAY_INSTALL_STRIP AND SPILLWAY_STRIP)
  install(CODE "
    set(_p \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}\")
    file(GLOB _strip \"\${_p}/${CMAKE_INSTALL_BINDIR}/spillway\" \"\${_p}/${CMAKE_INSTALL_LIBDIR}/libspillway*.a\")
    foreach(f IN LISTS _strip)
      execute_process(COMMAND ${SPILLWAY_STRIP} --strip-debug \"\${f}\" COMMAND_ERROR_IS_FATAL ANY)
    endforeach()
    message(STATUS \"Stripped debug info: \${_strip}\")")
endif()
