# The build identity (a hash of every compiler source) that compile-cache keys include.

# metile_build_identity(<out_var>): generated/build_identity.cpp defines the sha256 of all sources
# under src/ (plus the version), so cached kernels never outlive a compiler change.
function(metile_build_identity out_var)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS
       ${CMAKE_CURRENT_SOURCE_DIR}/src/* ${CMAKE_CURRENT_SOURCE_DIR}/capi/*)
  set(gen "${CMAKE_CURRENT_BINARY_DIR}/generated/build_identity.cpp")
  add_custom_command(OUTPUT ${gen}
    COMMAND ${CMAKE_COMMAND} -DROOT=${CMAKE_CURRENT_SOURCE_DIR} -DOUT=${gen}
            -DVERSION=${PROJECT_VERSION} -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/build_identity.cmake
    DEPENDS ${srcs} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/build_identity.cmake
    COMMENT "Hashing compiler sources for the build identity")
  set(${out_var} ${gen} PARENT_SCOPE)
endfunction()
