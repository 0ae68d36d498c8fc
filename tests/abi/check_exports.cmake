# Script mode. Checks the exported C ABI against the checked-in list capi/metile.exports (sorted,
# one symbol per line):
#   -DMODE=library -DNM=<nm> -DLIB=<libmetile.so> -DEXPORTS=<list>
#       the dynamic symbols the library defines (nm -D --defined-only) equal the list;
#   -DMODE=header -DHEADER=<metile.h> -DEXPORTS=<list>
#       the functions metile.h declares with METILE_API equal the list.
# A failure names every added and missing symbol.

function(read_exports out)
  file(STRINGS "${EXPORTS}" lines)
  set(names "")
  foreach(l IN LISTS lines)
    string(STRIP "${l}" l)
    if(NOT l STREQUAL "")
      list(APPEND names "${l}")
    endif()
  endforeach()
  set(sorted ${names})
  list(SORT sorted)
  list(REMOVE_DUPLICATES sorted)
  if(NOT sorted STREQUAL names)
    message(FATAL_ERROR "${EXPORTS} must be sorted and free of duplicates "
                        "(regenerate it with scripts/update-exports.sh)")
  endif()
  set(${out} ${names} PARENT_SCOPE)
endfunction()

function(library_symbols out)
  execute_process(COMMAND "${NM}" -D --defined-only "${LIB}"
                  OUTPUT_VARIABLE text ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} -D --defined-only ${LIB} failed (${rc}): ${err}")
  endif()
  string(REGEX MATCHALL "[^\n]+" lines "${text}")
  set(names "")
  foreach(l IN LISTS lines)
    # "<address> <type> <name>[@<version>]"
    if(l MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ @]+)")
      list(APPEND names "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  list(SORT names)
  list(REMOVE_DUPLICATES names)
  set(${out} ${names} PARENT_SCOPE)
endfunction()

# Names of the functions declared `METILE_API ... name(...)`, ignoring comments and the
# preprocessor lines that define METILE_API itself.
function(header_symbols out)
  file(READ "${HEADER}" text)
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" " " text "${text}")
  string(REGEX REPLACE "//[^\n]*" "" text "${text}")
  string(REGEX REPLACE "\\\\\n" " " text "${text}")
  string(REGEX REPLACE "(^|\n)[ \t]*#[^\n]*" "\\1" text "${text}")
  # Newlines, and the characters that are special in CMake lists, become spaces.
  string(REGEX REPLACE "[][\n]" " " text "${text}")
  string(REGEX MATCHALL "METILE_API[^;]*" decls "${text}")
  set(names "")
  foreach(d IN LISTS decls)
    if(NOT d MATCHES "([A-Za-z_][A-Za-z_0-9]*)[ \t]*\\(")
      message(FATAL_ERROR "cannot find the function name in: ${d}")
    endif()
    list(APPEND names "${CMAKE_MATCH_1}")
  endforeach()
  list(SORT names)
  set(dups ${names})
  list(REMOVE_DUPLICATES names)
  if(NOT dups STREQUAL names)
    message(FATAL_ERROR "${HEADER} declares a METILE_API function twice")
  endif()
  set(${out} ${names} PARENT_SCOPE)
endfunction()

# Fails listing what `have` has beyond `want` and what it lacks.
function(compare have_label have want_label want hint)
  set(added ${have})
  set(missing ${want})
  if(want)
    list(REMOVE_ITEM added ${want})
  endif()
  if(have)
    list(REMOVE_ITEM missing ${have})
  endif()
  if(NOT added AND NOT missing)
    list(LENGTH have n)
    message(STATUS "ok: ${have_label} and ${want_label} agree (${n} symbols)")
    return()
  endif()
  set(msg "${have_label} and ${want_label} differ.\n")
  foreach(s IN LISTS added)
    string(APPEND msg "  in ${have_label} but not in ${want_label}: ${s}\n")
  endforeach()
  foreach(s IN LISTS missing)
    string(APPEND msg "  in ${want_label} but not in ${have_label}: ${s}\n")
  endforeach()
  message(FATAL_ERROR "${msg}${hint}")
endfunction()

read_exports(exports)
if(MODE STREQUAL "library")
  library_symbols(lib)
  compare("the library (nm -D)" "${lib}" "capi/metile.exports" "${exports}"
          "An exported symbol is part of the ABI: export only METILE_API functions declared in "
          "metile.h, and update capi/metile.exports (scripts/update-exports.sh) on purpose.")
elseif(MODE STREQUAL "header")
  header_symbols(hdr)
  compare("metile.h (METILE_API)" "${hdr}" "capi/metile.exports" "${exports}"
          "Every function metile.h declares must be implemented and exported, and nothing else.")
else()
  message(FATAL_ERROR "MODE must be library or header")
endif()
