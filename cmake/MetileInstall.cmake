# Install rules: the library, the one public header. (pkg-config and the CMake package config
# are added by the packaging work.)
install(TARGETS metile EXPORT metileTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/metile/metile.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/metile)
