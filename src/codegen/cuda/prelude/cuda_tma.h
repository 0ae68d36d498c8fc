// ---- tensor memory accelerator (cp.async.bulk.tensor) and mbarriers, sm_90 ----------------
// A tensor map as the driver encodes it (cuTensorMapEncodeTiled): 128 opaque bytes, passed by
// value as a __grid_constant__ kernel parameter and read through its generic address.
struct __align__(64) mt_tensor_map {
  ullong opaque[16];
};
MT_FN void mt_mbar_init(const llong* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(mt_smem_addr(bar)), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the copy engine before the barrier that follows.
MT_FN void mt_mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// This thread's arrival, expecting `bytes` more to complete the phase.
MT_FN void mt_mbar_expect_tx(const llong* bar, uint bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mt_smem_addr(bar)), "r"(bytes)
               : "memory");
}
// One box at coordinates (c0: the contiguous axis, c1: rows); elements outside the tensor are zeros.
MT_FN void mt_tma_load_2d(void* dst, const mt_tensor_map* map, int c0, int c1, const llong* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          mt_smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(mt_smem_addr(bar))
      : "memory");
}
MT_FN void mt_mbar_wait(const llong* bar, int parity) {
  uint done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(mt_smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
