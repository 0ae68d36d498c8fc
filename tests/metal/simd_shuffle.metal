// SIMD-group exchanges: every lane records what each function gave it, so the test can check
// each lane's value exactly.
#include <metal_stdlib>
using namespace metal;

[[kernel]] void mtile_shuffles(
    device const float* In [[buffer(0)]],
    device float* Out [[buffer(1)]],
    uint tid [[thread_position_in_grid]],
    uint slid [[thread_index_in_simdgroup]]) {
    float v = In[tid];
    device float* o = Out + tid * 10;
    o[0] = simd_shuffle_xor(v, 1);
    o[1] = simd_shuffle_xor(v, 6);
    o[2] = simd_shuffle_xor(v, 16);
    o[3] = simd_broadcast(v, 5);
    o[4] = simd_shuffle_down(v, 3);
    o[5] = simd_shuffle_up(v, 2);
    o[6] = simd_sum(v);
    o[7] = simd_prefix_exclusive_sum(v);
    o[8] = simd_shuffle(v, static_cast<ushort>(31 - slid));
    o[9] = simd_max(v);
}

// The same exchanges on other types: uint, half and float4 (component-wise).
[[kernel]] void mtile_shuffle_types(
    device const uint* In [[buffer(0)]],
    device uint* OutU [[buffer(1)]],
    device half* OutH [[buffer(2)]],
    device float* OutV [[buffer(3)]],
    uint tid [[thread_position_in_grid]]) {
    uint u = In[tid];
    OutU[tid * 3 + 0] = simd_shuffle_xor(u, 3u);
    OutU[tid * 3 + 1] = simd_max(u);
    OutU[tid * 3 + 2] = simd_sum(u);
    half h = half(u) * 0.5h;
    OutH[tid] = simd_broadcast(h, 7);
    float4 f = float4(float(u), float(u) + 1.0f, -float(u), 2.0f);
    *(device float4*)(OutV + tid * 4) =
        simd_shuffle_xor(f, 8) + float4(simd_sum(f.x), 0.0f, simd_min(f.z), 0.0f);
}
