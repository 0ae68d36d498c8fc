# System dependencies, found as Debian packages. A missing one stops configuration with the name
# of the package that provides it.
find_package(PkgConfig QUIET)

function(metile_require found what package)
  if(NOT ${found})
    message(FATAL_ERROR "metile needs ${what}: install it with `apt-get install ${package}`")
  endif()
endfunction()

find_package(ZLIB QUIET)
metile_require(ZLIB_FOUND "zlib" zlib1g-dev)

find_path(FFI_INCLUDE_DIR ffi.h PATH_SUFFIXES ffi)
find_library(FFI_LIBRARY ffi)
if(FFI_INCLUDE_DIR AND FFI_LIBRARY)
  set(FFI_FOUND TRUE)
endif()
metile_require(FFI_FOUND "libffi" libffi-dev)

find_package(Threads REQUIRED)

add_library(metile_deps INTERFACE)
add_library(metile::deps ALIAS metile_deps)
target_include_directories(metile_deps INTERFACE ${FFI_INCLUDE_DIR})
target_link_libraries(metile_deps INTERFACE ZLIB::ZLIB ${FFI_LIBRARY} Threads::Threads ${CMAKE_DL_LIBS})

if(METILE_BUILD_TESTS)
  find_package(GTest QUIET)
  metile_require(GTest_FOUND "GoogleTest" libgtest-dev)
endif()
if(METILE_BUILD_BENCH)
  find_package(benchmark QUIET)
  metile_require(benchmark_FOUND "Google Benchmark" libbenchmark-dev)
endif()
