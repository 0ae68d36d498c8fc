"""The one timing method of the GPU peer-comparison scripts (cuda_rows, cuda_vs_triton,
gemm_vs_cublas, attention_gpu): every framework is timed the same way."""

import statistics
import time


def time_per_call(fn, sync, calls, repeats=5):
    """Seconds per call: after a warm-up call, the median over `repeats` of (`calls` calls
    back-to-back, then `sync()`) / calls."""
    fn()
    sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / calls)
    return statistics.median(samples)
