# Install rules: the shared library (SONAME libmetile.so.<major>), the one public header, a
# pkg-config file and a CMake package (find_package(metile) -> metile::metile). capi/ and src/
# headers are never installed.
include(CMakePackageConfigHelpers)

add_library(metile::metile ALIAS metile)
set_target_properties(metile PROPERTIES EXPORT_NAME metile)

install(TARGETS metile EXPORT metileTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# metile.cdef: the same declarations for cffi's ffi.cdef() (bindings/cffi/regen.py).
install(FILES include/metile/metile.h include/metile/metile.cdef
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/metile)

# pkg-config: paths relative to ${pcfiledir}, so `cmake --install --prefix <dir>` (which cannot
# re-run configure_file) still yields a correct file. Absolute install dirs are used as given.
set(METILE_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(METILE_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(METILE_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(METILE_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  string(REGEX REPLACE "[^/]+" ".." up "${METILE_PC_DIR}")
  set(METILE_PC_PREFIX "\${pcfiledir}/${up}")
  set(METILE_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(METILE_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/pkgconfig/metile.pc.in ${PROJECT_BINARY_DIR}/metile.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/metile.pc DESTINATION ${METILE_PC_DIR})

# CMake package. The shared library's own dependencies (zlib, libffi, dl, threads) are private
# and resolved through its DT_NEEDED entries, so consumers need no find_dependency().
set(METILE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/metile)
install(EXPORT metileTargets NAMESPACE metile:: DESTINATION ${METILE_CMAKE_DIR})
file(WRITE ${PROJECT_BINARY_DIR}/metileConfig.cmake
     "# find_package(metile) entry point: defines the imported target metile::metile.\n"
     "include(\"\${CMAKE_CURRENT_LIST_DIR}/metileTargets.cmake\")\n")
write_basic_package_version_file(${PROJECT_BINARY_DIR}/metileConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/metileConfig.cmake ${PROJECT_BINARY_DIR}/metileConfigVersion.cmake
        DESTINATION ${METILE_CMAKE_DIR})
