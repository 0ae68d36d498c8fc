# Embeds every file of a directory (device preludes, shim headers) into the library as strings.
# (The build identity for compile-cache keys is MetileBuildIdentity.cmake.)

# metile_embed_files(<out_var> <dir> [extra files...]): generates generated/embedded_files.cpp with
# a table {relative name, contents} readable through src/support/embedded.h. Extra files (a
# dialect's own preludes, shared sources that generated code pastes in such as src/ir/swizzle.h)
# are named by their file name.
function(metile_embed_files out_var dir)
  file(GLOB_RECURSE files CONFIGURE_DEPENDS "${dir}/*")
  string(REPLACE ";" "|" extra "${ARGN}")
  set(gen "${CMAKE_CURRENT_BINARY_DIR}/generated/embedded_files.cpp")
  add_custom_command(OUTPUT ${gen}
    COMMAND ${CMAKE_COMMAND} -DDIR=${dir} "-DEXTRA=${extra}" -DOUT=${gen} -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed.cmake
    DEPENDS ${files} ${ARGN} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed.cmake
    COMMENT "Embedding device preludes"
    VERBATIM)  # quotes the "|" between extra files for the shell
  set(${out_var} ${gen} PARENT_SCOPE)
endfunction()
