// Row softmax (BLOCK = 256) in the emitter's shape (metile-spec §19.1): float4 aligned loops, a
// scalar tail, and threadgroup reductions (simd reduction, partials through threadgroup memory,
// barrier, simd reduction of the partials, broadcast through threadgroup memory).
#include <metal_stdlib>
using namespace metal;

[[kernel]] void mtile_softmax(
    device const float* X [[buffer(0)]],
    device float* Out [[buffer(1)]],
    constant int& N [[buffer(2)]],
    uint tgp_id_x [[threadgroup_position_in_grid]],
    uint lid [[thread_position_in_threadgroup]],
    uint sgid [[simdgroup_index_in_threadgroup]],
    uint slid [[thread_index_in_simdgroup]]) {
    const uint row = tgp_id_x * uint(N);
    float _acc_0 = -1e+38f;
    const int _ew_end_0 = (N / 1024) * 1024;
    for (int i = 0; i < _ew_end_0; i += 1024) {
        int v5 = static_cast<int>(lid) * 4;
        int v6 = i + v5;
        uint v8 = row + static_cast<uint>(v6);
        float4 v9 = *(device const float4*)(X + v8);
        _acc_0 = max(_acc_0, max(max(v9.x, v9.y), max(v9.z, v9.w)));
    }
    for (int i = _ew_end_0; i < N; i += 256) {
        int v10 = i + static_cast<int>(lid);
        if (v10 < N) {
            float v11 = X[row + static_cast<uint>(v10)];
            _acc_0 = max(_acc_0, v11);
        }
    }
    threadgroup float shared_reduce_0[8];
    float v12;
    {
        float _simd_val = simd_max(_acc_0);
        if (slid == 0u) {
            shared_reduce_0[sgid] = _simd_val;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        float _partial = (lid < 8u) ? shared_reduce_0[lid] : (-INFINITY);
        float _result = simd_max(_partial);
        if (lid == 0u) {
            shared_reduce_0[0] = _result;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        v12 = shared_reduce_0[0];
    }
    float _acc_1 = 0.0f;
    for (int i = 0; i < _ew_end_0; i += 1024) {
        int v15 = i + static_cast<int>(lid) * 4;
        float4 v16 = *(device const float4*)(X + row + static_cast<uint>(v15));
        float4 v17 = exp(v16 - v12);
        _acc_1 = _acc_1 + (v17.x + v17.y + v17.z + v17.w);
    }
    for (int i = _ew_end_0; i < N; i += 256) {
        int v18 = i + static_cast<int>(lid);
        if (v18 < N) {
            float v19 = exp(X[row + static_cast<uint>(v18)] - v12);
            _acc_1 = _acc_1 + v19;
        }
    }
    threadgroup float shared_reduce_1[8];
    float v26;
    {
        float _simd_val = simd_sum(_acc_1);
        if (slid == 0u) {
            shared_reduce_1[sgid] = _simd_val;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        float _partial = (lid < 8u) ? shared_reduce_1[lid] : 0.0f;
        float _result = simd_sum(_partial);
        if (lid == 0u) {
            shared_reduce_1[0] = _result;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        v26 = shared_reduce_1[0];
    }
    for (int i = 0; i < _ew_end_0; i += 1024) {
        int v30 = i + static_cast<int>(lid) * 4;
        uint v31 = row + static_cast<uint>(v30);
        float4 v32 = *(device const float4*)(X + v31);
        float4 v33 = exp(v32 - v12) / v26;
        *(device float4*)(Out + v31) = v33;
    }
    for (int i = _ew_end_0; i < N; i += 256) {
        int v34 = i + static_cast<int>(lid);
        if (v34 < N) {
            uint v35 = row + static_cast<uint>(v34);
            Out[v35] = exp(X[v35] - v12) / v26;
        }
    }
}
