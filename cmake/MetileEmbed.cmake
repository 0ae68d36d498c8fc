# Embeds every file of a directory (device preludes, shim headers) into the library as strings,
# and derives the build identity (a hash of every compiler source) for compile-cache keys.

# metile_embed_files(<out_var> <dir> [extra files...]): generates generated/embedded_files.cpp with
# a table {relative name, contents} readable through src/support/embedded.h. Extra files (shared
# sources that generated code pastes in, such as src/ir/swizzle.h) are named by their file name.
function(metile_embed_files out_var dir)
  file(GLOB_RECURSE files CONFIGURE_DEPENDS "${dir}/*")
  string(REPLACE ";" "|" extra "${ARGN}")
  set(gen "${CMAKE_CURRENT_BINARY_DIR}/generated/embedded_files.cpp")
  add_custom_command(OUTPUT ${gen}
    COMMAND ${CMAKE_COMMAND} -DDIR=${dir} "-DEXTRA=${extra}" -DOUT=${gen} -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed.cmake
    DEPENDS ${files} ${ARGN} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed.cmake
    COMMENT "Embedding device preludes")
  set(${out_var} ${gen} PARENT_SCOPE)
endfunction()

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
