// Scalar and vector types: swizzles, vector arithmetic, comparisons into bool vectors and select,
// half and bfloat rounding, as_type, integer vectors and a few math functions.
#include <metal_stdlib>
using namespace metal;

[[kernel]] void mtile_types(
    device const float* In [[buffer(0)]],
    device float* Out [[buffer(1)]],
    device uint* Bits [[buffer(2)]],
    uint tid [[thread_position_in_grid]]) {
    float x = In[tid];
    float4 v = float4(x, x + 1.0f, -x, 2.0f * x);
    float4 w = v.wzyx;
    float2 p = v.xy * w.zw + 1.0f;
    bool4 b = bool4(v < w);
    float4 s = select(v, w, b);
    half h = half(x);
    half4 hv = half4(v) * 0.5h;
    bfloat bf = bfloat(x);
    int4 iv = int4(v) * 3 - 1;
    uint2 uv = uint2(abs(iv.xy));
    device float* o = Out + tid * 20;
    *(device float4*)(o) = s;
    o[4] = p.x;
    o[5] = p.y;
    o[6] = float(h);
    o[7] = float(hv.y);
    o[8] = float(bf);
    o[9] = bf * bf;
    o[10] = exp(x);
    o[11] = tanh(x);
    o[12] = float(all(b)) + 2.0f * float(any(b));
    o[13] = float(b.x) + 2.0f * float(b.y) + 4.0f * float(b.z) + 8.0f * float(b.w);
    o[14] = float(iv.z);
    o[15] = float(uv.x + uv.y);
    o[16] = max(x, -x) + min(v.z, 0.0f) + clamp(x, -0.5f, 0.5f);
    o[17] = as_type<float>(as_type<uint>(x) ^ 0x80000000u);
    o[18] = dot(v, w);
    o[19] = v.rgba.g + w.ab.x;
    Bits[tid * 2 + 0] = as_type<ushort>(h);
    Bits[tid * 2 + 1] = uint(as_type<ushort>(bf));
}
