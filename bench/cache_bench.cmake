# cache_bench also runs a fresh process (the cache driver) for cold vs warm first launch.
include(${CMAKE_CURRENT_SOURCE_DIR}/../tests/cache/driver.cmake)
add_dependencies(cache_bench metile_cache_driver)
target_compile_definitions(cache_bench PRIVATE
  METILE_CACHE_DRIVER="$<TARGET_FILE:metile_cache_driver>")
