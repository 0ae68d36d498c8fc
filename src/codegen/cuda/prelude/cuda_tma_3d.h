// ---- a 3-D TMA box (a stack of matrices, TmaMap::slabs), after cuda_tma.h ----------------
// One box at coordinates (c0: the contiguous axis, c1: rows, c2: the slab); elements outside
// the tensor are zeros.
MT_FN void mt_tma_load_3d(void* dst, const mt_tensor_map* map, int c0, int c1, int c2, const llong* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(
          mt_smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(mt_smem_addr(bar))
      : "memory");
}
