// Kernels that break Metal's rules, which metal-sim must report instead of hanging.
#include <metal_stdlib>
using namespace metal;

// Threads 32.. skip the barrier and finish.
[[kernel]] void mtile_divergent_barrier(
    device float* Out [[buffer(0)]],
    uint lid [[thread_position_in_threadgroup]]) {
    threadgroup float shared[64];
    if (lid < 32u) {
        shared[lid] = float(lid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        Out[lid] = shared[31u - lid];
    }
}

// Two halves wait at two different barriers.
[[kernel]] void mtile_split_barrier(
    device float* Out [[buffer(0)]],
    uint lid [[thread_position_in_threadgroup]]) {
    if (lid < 32u) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
        Out[lid] = 1.0f;
    } else {
        threadgroup_barrier(mem_flags::mem_threadgroup);
        Out[lid] = 2.0f;
    }
}

// Half of each simdgroup reduces with simd_sum, the other half with simd_max.
[[kernel]] void mtile_divergent_simd(
    device float* Out [[buffer(0)]],
    uint tid [[thread_position_in_grid]],
    uint slid [[thread_index_in_simdgroup]]) {
    float v = float(tid);
    Out[tid] = slid < 16u ? simd_sum(v) : simd_max(v);
}

// 36000 bytes of threadgroup memory, over Apple's 32 KiB.
[[kernel]] void mtile_threadgroup_overflow(
    device float* Out [[buffer(0)]],
    uint lid [[thread_position_in_threadgroup]]) {
    threadgroup float big[9000];
    big[lid] = 1.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    Out[lid] = big[lid];
}

// Early exit, then a simd reduction: the exited lanes are inactive, which is legal.
[[kernel]] void mtile_early_exit_sum(
    device const float* In [[buffer(0)]],
    device float* Out [[buffer(1)]],
    constant uint& n [[buffer(2)]],
    uint tid [[thread_position_in_grid]]) {
    if (tid >= n) {
        return;
    }
    Out[tid] = simd_sum(In[tid]);
}

// Lanes 0..15 reduce while lanes 16..31 already wait at the barrier. (Metal would reduce over the
// 16 active lanes; metal-sim needs collectives in simdgroup-uniform control flow.)
[[kernel]] void mtile_simd_vs_barrier(
    device float* Out [[buffer(0)]],
    uint lid [[thread_position_in_threadgroup]]) {
    if (lid < 16u) {
        Out[lid] = simd_sum(1.0f);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
}
