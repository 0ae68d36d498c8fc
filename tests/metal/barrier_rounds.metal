// Write, barrier, read across simdgroups, in rounds: each round writes one threadgroup array,
// waits, reads a neighbour's slot (another simdgroup for most threads), writes a second array
// (a [[threadgroup(0)]] argument), waits, and reads a slot 37 threads away. Two barriers per round.
#include <metal_stdlib>
using namespace metal;

[[kernel]] void mtile_barrier_rounds(
    device const uint* In [[buffer(0)]],
    device uint* Out [[buffer(1)]],
    constant int& rounds [[buffer(2)]],
    threadgroup uint* scratch [[threadgroup(0)]],
    uint tgp_id_x [[threadgroup_position_in_grid]],
    uint lid [[thread_index_in_threadgroup]],
    uint tpg [[threads_per_threadgroup]]) {
    threadgroup uint ring[1024];
    uint v = In[tgp_id_x * tpg + lid];
    for (int r = 0; r < rounds; ++r) {
        ring[lid] = v;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        uint left = ring[(lid + tpg - 1u) % tpg];
        scratch[lid] = left * 3u + v;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        v = scratch[(lid + 37u) % tpg] ^ static_cast<uint>(r);
    }
    Out[tgp_id_x * tpg + lid] = v;
}

// A 2-D threadgroup: every builtin, flattened into the output.
[[kernel]] void mtile_builtins(
    device uint* Out [[buffer(0)]],
    uint3 gid [[thread_position_in_grid]],
    uint2 tg [[threadgroup_position_in_grid]],
    ushort2 local [[thread_position_in_threadgroup]],
    uint index [[thread_index_in_threadgroup]],
    uint3 tpg [[threads_per_threadgroup]],
    uint3 ntg [[threadgroups_per_grid]],
    uint3 tpgrid [[threads_per_grid]],
    ushort lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]],
    uint width [[threads_per_simdgroup]],
    uint sgs [[simdgroups_per_threadgroup]]) {
    uint linear = gid.y * tpgrid.x + gid.x;
    device uint* o = Out + linear * 16;
    o[0] = gid.x;
    o[1] = gid.y;
    o[2] = gid.z;
    o[3] = tg.x;
    o[4] = tg.y;
    o[5] = local.x;
    o[6] = local.y;
    o[7] = index;
    o[8] = tpg.x * 100u + tpg.y;
    o[9] = ntg.x * 100u + ntg.y;
    o[10] = tpgrid.x * 100u + tpgrid.y;
    o[11] = lane;
    o[12] = sg;
    o[13] = width;
    o[14] = sgs;
    o[15] = tpg.z + ntg.z + tpgrid.z;
}
