# Compile-cache test helpers; included from tests/CMakeLists.txt after metile_unit is defined.
include(${CMAKE_CURRENT_LIST_DIR}/driver.cmake)
add_dependencies(metile_unit metile_cache_driver)
target_compile_definitions(metile_unit PRIVATE
  METILE_CACHE_DRIVER="$<TARGET_FILE:metile_cache_driver>")
