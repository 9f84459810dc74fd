# cmake --install: the headers, the static libraries behind codebox::box with a CMake package
# and a pkg-config file, the codebox CLI (bin/), the helpers the library starts
# (libexec/codebox/) and the image recipes (share/codebox/images/). The library finds the
# helpers and recipes from where the program that links it is, or from the install dirs
# compiled into src/base (base/paths.h); the package holds no path of this build tree
# (scripts/lib/test-packaging.sh checks).
include(CMakePackageConfigHelpers)

# codebox::box and what it links, in link order.
set(CODEBOX_EXPORTED_LIBRARIES codebox_box codebox_remote codebox_options codebox_host_files codebox_http codebox_interpreter codebox_agent_client codebox_jail codebox_jail_core
    codebox_vm codebox_image codebox_net codebox_protocol codebox_api codebox_base)
set(cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/codebox)

install(TARGETS codebox_headers ${CODEBOX_EXPORTED_LIBRARIES} EXPORT codebox-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/codebox DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS codebox RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${CODEBOX_HELPERS} RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/codebox)
install(DIRECTORY images/ DESTINATION ${CMAKE_INSTALL_DATADIR}/codebox/images)

install(EXPORT codebox-targets NAMESPACE codebox:: DESTINATION ${cmake_dir})
configure_package_config_file(cmake/codebox-config.cmake.in
  ${PROJECT_BINARY_DIR}/codebox-config.cmake INSTALL_DESTINATION ${cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/codebox-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/codebox-config.cmake
              ${PROJECT_BINARY_DIR}/codebox-config-version.cmake DESTINATION ${cmake_dir})

# pkg-config: the prefix is found from the .pc file's own folder, so an install moved with
# --prefix or DESTDIR stays right.
file(RELATIVE_PATH CODEBOX_PC_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
set(CODEBOX_PC_LIBS "")
foreach(lib ${CODEBOX_EXPORTED_LIBRARIES})
  string(APPEND CODEBOX_PC_LIBS " -l${lib}")
endforeach()
configure_file(cmake/codebox.pc.in ${PROJECT_BINARY_DIR}/codebox.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/codebox.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# cpack -G DEB: one package with the CLI, helpers, recipes and the C++ development files.
# Configure with -DCMAKE_INSTALL_PREFIX=/usr so the compiled-in install dirs are the
# package's (scripts/lib/test-packaging.sh does).
set(CPACK_PACKAGE_NAME codebox)
set(CPACK_PACKAGE_VENDOR codebox)
set(CPACK_PACKAGE_CONTACT "codebox developers <root@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# dpkg-shlibdeps adds libc6, libstdc++6, libgcc-s1, libseccomp2, libcurl4 and libedit2 from the
# binaries.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# debootstrap builds the recipe images; skopeo pulls and imports OCI images (one of the two is
# needed before anything runs); the vm driver needs QEMU, mkfs.erofs and xz (the cloud
# kernel's modules), and `codebox doctor` says when they lack.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "debootstrap")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "skopeo, qemu-system-x86, erofs-utils, xz-utils")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libseccomp-dev")
include(CPack)
