# cache_bench: compile-cache entry throughput and cold vs warm first launch in a fresh process.
include(${CMAKE_CURRENT_SOURCE_DIR}/../tests/cache/driver.cmake)
add_executable(cache_bench ${CMAKE_CURRENT_SOURCE_DIR}/cache_bench.cpp)
target_link_libraries(cache_bench PRIVATE metile_static benchmark::benchmark)
add_dependencies(cache_bench metile_cache_driver)
target_compile_definitions(cache_bench PRIVATE
  METILE_CACHE_DRIVER="$<TARGET_FILE:metile_cache_driver>")
