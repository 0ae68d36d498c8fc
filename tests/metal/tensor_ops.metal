// Metal 4 tensor_ops as metal-sim's shim runs them (metal_shim_tensor.h): one simdgroup runs a
// 16 x 16 matmul2d whose K comes from A's extents (dynamic_extent), over device tensors whose
// extents may be smaller than the descriptor (edges), mixed float x half operands.
#include <metal_stdlib>
#include <metal_tensor>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;

[[kernel]] void mtile_matmul2d(
    device const float* A [[buffer(0)]],
    device const half* B [[buffer(1)]],
    device float* C [[buffer(2)]],
    constant int& M [[buffer(3)]],
    constant int& N [[buffer(4)]],
    constant int& K [[buffer(5)]],
    constant int& accumulate [[buffer(6)]]) {
    auto ta = tensor<device const float, dextents<int32_t, 2>, tensor_inline>(
        A, dextents<int32_t, 2>(K, M));
    auto tb = tensor<device const half, dextents<int32_t, 2>, tensor_inline>(
        B, dextents<int32_t, 2>(N, K), array<int32_t, 2>({1, N}));
    auto tc = tensor<device float, dextents<int32_t, 2>, tensor_inline>(
        C, dextents<int32_t, 2>(N, M), array<int32_t, 2>({1, N}));
    if (accumulate != 0) {
        constexpr auto desc = mpp::tensor_ops::matmul2d_descriptor(
            16, 16, static_cast<int>(dynamic_extent), false, false, false,
            mpp::tensor_ops::matmul2d_descriptor::mode::multiply_accumulate);
        mpp::tensor_ops::matmul2d<desc, execution_simdgroup> op;
        auto ct = op.get_destination_cooperative_tensor<decltype(ta), decltype(tb), float>();
        ct.load(tc);
        op.run(ta, tb, ct);
        ct.store(tc);
    } else {
        constexpr auto desc = mpp::tensor_ops::matmul2d_descriptor(16, 16);
        mpp::tensor_ops::matmul2d<desc, execution_simdgroup> op;
        auto ct = op.get_destination_cooperative_tensor<decltype(ta), decltype(tb), float>();
        op.run(ta, tb, ct);
        ct.store(tc);
    }
}

// Half the lanes call run, the other half a simd reduction: the scope is not uniform.
[[kernel]] void mtile_matmul2d_divergent(
    device float* C [[buffer(0)]],
    uint slid [[thread_index_in_simdgroup]]) {
    auto tc = tensor<device float, dextents<int32_t, 2>, tensor_inline>(
        C, dextents<int32_t, 2>(8, 8));
    constexpr auto desc = mpp::tensor_ops::matmul2d_descriptor(8, 8, 8);
    mpp::tensor_ops::matmul2d<desc, execution_simdgroup> op;
    auto ct = op.get_destination_cooperative_tensor<decltype(tc), decltype(tc), float>();
    if (slid < 16) {
        op.run(tc, tc, ct);
    } else {
        C[slid] = simd_sum(1.0f);
    }
}
