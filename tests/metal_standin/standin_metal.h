/** \file standin_metal.h
 * Test controls of the stand-in Metal.framework (libmetile_standin_metal.so). A test reaches
 * them with dlsym on the library the metal device opened ($METILE_METAL_FRAMEWORK).
 */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/** newBufferWithLength:options: returns nil for lengths over `bytes` (0: no limit). */
void standin_metal_fail_allocations_over(unsigned long bytes);
/** maxTotalThreadsPerThreadgroup of pipelines created from now on (default 1024). */
void standin_metal_set_pipeline_max_threads(unsigned long threads);
/** How many newBufferWithBytesNoCopy calls were refused (unaligned pointer or length). */
long standin_metal_rejected_no_copy(void);

#ifdef __cplusplus
}
#endif
