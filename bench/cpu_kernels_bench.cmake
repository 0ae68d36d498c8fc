# The cpu suite's kernels and the plain C++ loops it is compared with.
target_sources(cpu_kernels_bench PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/bench_kernels.cpp
               ${CMAKE_CURRENT_SOURCE_DIR}/plain_loops.cpp)
# The reference loops get the flags a careful user would give them, whatever the build type.
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/plain_loops.cpp PROPERTIES
                            COMPILE_OPTIONS "-O3;-march=native")
