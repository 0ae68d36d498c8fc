// Simdgroup-matrix GEMM in the emitter's shape (metile-spec §8.6): BM = BN = 16, BK = 16,
// 4 simdgroups in a 2x2 grid, one 8x8 accumulator each; bounds-checked cooperative loads into
// padded threadgroup tiles, simdgroup_load with a stride, multiply-accumulate, guarded store.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

[[kernel]] void mtile_gemm_f32(
    device const float* A [[buffer(0)]],
    device const float* B [[buffer(1)]],
    device float* C [[buffer(2)]],
    constant int& M [[buffer(3)]],
    constant int& N [[buffer(4)]],
    constant int& K [[buffer(5)]],
    uint3 tgp_id [[threadgroup_position_in_grid]],
    uint sgid [[simdgroup_index_in_threadgroup]],
    uint slid [[thread_index_in_simdgroup]]) {
    const uint linear_tid = sgid * 32u + slid;
    const uint block_row = tgp_id.x * 16u;
    const uint block_col = tgp_id.y * 16u;
    const uint sg_row = (sgid / 2u) * 8u;
    const uint sg_col = (sgid % 2u) * 8u;
    threadgroup float shared_a[16 * 17];
    threadgroup float shared_b[16 * 17];
    simdgroup_matrix<float, 8, 8> acc[1][1];
    acc[0][0] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_matrix<float, 8, 8> a_tile[1];
    simdgroup_matrix<float, 8, 8> b_tile[1];
    for (int kb = 0; kb < K; kb += 16) {
        for (uint _i = linear_tid; _i < 256u; _i += 128u) {
            uint _r = _i / 16u;
            uint _c = _i % 16u;
            uint _gr = block_row + _r;
            uint _gc = static_cast<uint>(kb) + _c;
            shared_a[_r * 17u + _c] = (_gr < uint(M) && _gc < uint(K)) ? A[_gr * uint(K) + _gc] : float(0);
        }
        for (uint _i = linear_tid; _i < 256u; _i += 128u) {
            uint _r = _i / 16u;
            uint _c = _i % 16u;
            uint _gr = static_cast<uint>(kb) + _r;
            uint _gc = block_col + _c;
            shared_b[_r * 17u + _c] = (_gr < uint(K) && _gc < uint(N)) ? B[_gr * uint(N) + _gc] : float(0);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        #pragma clang loop unroll(full)
        for (int kk = 0; kk < 16; kk += 8) {
            simdgroup_load(a_tile[0], shared_a + (sg_row + 0u) * 17u + kk, 17);
            simdgroup_load(b_tile[0], shared_b + kk * 17 + (sg_col + 0u), 17);
            simdgroup_multiply_accumulate(acc[0][0], a_tile[0], b_tile[0], acc[0][0]);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    {
        uint _or = block_row + sg_row + 0u;
        uint _oc = block_col + sg_col + 0u;
        if (_or + 8u <= uint(M) && _oc + 8u <= uint(N)) {
            simdgroup_store(acc[0][0], C + _or * uint(N) + _oc, N);
        }
    }
}

// Half inputs, float accumulators, a fused relu epilogue on the fragments, half output.
[[kernel]] void mtile_gemm_f16(
    device const half* A [[buffer(0)]],
    device const half* B [[buffer(1)]],
    device half* C [[buffer(2)]],
    constant int& M [[buffer(3)]],
    constant int& N [[buffer(4)]],
    constant int& K [[buffer(5)]],
    uint3 tgp_id [[threadgroup_position_in_grid]],
    uint sgid [[simdgroup_index_in_threadgroup]],
    uint slid [[thread_index_in_simdgroup]]) {
    const uint linear_tid = sgid * 32u + slid;
    const uint block_row = tgp_id.x * 16u;
    const uint block_col = tgp_id.y * 16u;
    const uint sg_row = (sgid / 2u) * 8u;
    const uint sg_col = (sgid % 2u) * 8u;
    threadgroup half shared_a[16 * 16];
    threadgroup half shared_b[16 * 24];
    simdgroup_matrix<float, 8, 8> acc[1][1];
    acc[0][0] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_matrix<half, 8, 8> a_tile[1];
    simdgroup_matrix<half, 8, 8> b_tile[1];
    for (int kb = 0; kb < K; kb += 16) {
        for (uint _i = linear_tid; _i < 64u; _i += 128u) {
            uint _r = _i >> 2;
            uint _c = (_i & 3u) * 4u;
            half4 _v = *(device const half4*)(A + (block_row + _r) * uint(K) + uint(kb) + _c);
            *(threadgroup half4*)(shared_a + _r * 16u + _c) = _v;
        }
        for (uint _i = linear_tid; _i < 64u; _i += 128u) {
            uint _r = _i >> 2;
            uint _c = (_i & 3u) * 4u;
            half4 _v = *(device const half4*)(B + (uint(kb) + _r) * uint(N) + block_col + _c);
            shared_b[_r * 24u + _c + 0u] = _v.x;
            shared_b[_r * 24u + _c + 1u] = _v.y;
            shared_b[_r * 24u + _c + 2u] = _v.z;
            shared_b[_r * 24u + _c + 3u] = _v.w;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        #pragma clang loop unroll(full)
        for (int kk = 0; kk < 16; kk += 8) {
            simdgroup_load(a_tile[0], shared_a + (sg_row + 0u) * 16u + kk, 16);
            simdgroup_load(b_tile[0], shared_b + kk * 24 + (sg_col + 0u), 24);
            simdgroup_multiply_accumulate(acc[0][0], a_tile[0], b_tile[0], acc[0][0]);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    // epilogue: relu
    acc[0][0].thread_elements()[0] = max(acc[0][0].thread_elements()[0], 0.0f);
    acc[0][0].thread_elements()[1] = max(acc[0][0].thread_elements()[1], 0.0f);
    {
        uint _or = block_row + sg_row + 0u;
        uint _oc = block_col + sg_col + 0u;
        if (_or + 8u <= uint(M) && _oc + 8u <= uint(N)) {
            simdgroup_matrix<half, 8, 8> _h;
            _h.thread_elements()[0] = half(acc[0][0].thread_elements()[0]);
            _h.thread_elements()[1] = half(acc[0][0].thread_elements()[1]);
            simdgroup_store(_h, C + _or * uint(N) + _oc, N);
        }
    }
}

// One simdgroup: which matrix elements each lane holds after simdgroup_load (plain and
// transposed), a fragment filled by hand with the swizzle-path ownership rule of §8.6, a product
// with the diagonal matrix 2I, and a transposed store.
[[kernel]] void mtile_fragment_layout(
    device const float* In [[buffer(0)]],
    device float* Out [[buffer(1)]],
    uint slid [[thread_index_in_simdgroup]]) {
    simdgroup_float8x8 m;
    simdgroup_load(m, In, 8);
    Out[slid * 2u + 0u] = m.thread_elements()[0];
    Out[slid * 2u + 1u] = m.thread_elements()[1];
    simdgroup_float8x8 t;
    simdgroup_load(t, In, 8, ulong2(0, 0), true);
    simdgroup_store(t, Out + 64, 8);
    simdgroup_float8x8 f;
    {
        const uint _row = ((slid & 7u) >> 1) + ((slid >> 4) << 2);
        const uint _col = ((slid & 1u) << 1) | ((slid & 8u) >> 1);
        f.thread_elements()[0] = In[_row * 8u + _col];
        f.thread_elements()[1] = In[_row * 8u + _col + 1u];
    }
    simdgroup_store(f, Out + 128, 8);
    simdgroup_float8x8 eye = simdgroup_float8x8(2.0f);
    simdgroup_float8x8 prod;
    simdgroup_multiply(prod, m, eye);
    simdgroup_barrier(mem_flags::mem_none);
    simdgroup_store(prod, Out + 192, 8);
    simdgroup_store(m, Out + 256, 8, ulong2(0, 0), true);
}
