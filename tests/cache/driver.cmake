# The cache driver (cache_driver.c): a separate process that uses the public C API, for the
# cross-process cache test and the cold/warm benchmark. Included from tests/ and bench/.
if(NOT TARGET metile_cache_driver)
  add_executable(metile_cache_driver ${CMAKE_CURRENT_LIST_DIR}/cache_driver.c)
  target_link_libraries(metile_cache_driver PRIVATE metile)
endif()
