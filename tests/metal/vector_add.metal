// Element-wise vector add as the MSL emitter writes it (metile-spec §8.3): one element per thread,
// guarded by the length.
#include <metal_stdlib>
using namespace metal;

[[kernel]] void mtile_vector_add(
    device const float* X [[buffer(0)]],
    device const float* Y [[buffer(1)]],
    device float* Out [[buffer(2)]],
    constant int& N [[buffer(3)]],
    uint tid [[thread_position_in_grid]]) {
    uint v0 = static_cast<uint>(N);
    bool v1 = tid < v0;
    if (v1) {
        float v2 = X[tid];
        float v3 = Y[tid];
        float v4 = v2 + v3;
        Out[tid] = v4;
    }
}
