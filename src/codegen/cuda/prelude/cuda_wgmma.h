// ---- warpgroup matrix multiply (wgmma, sm_90a) ---------------------------------------------
// A shared-memory matrix descriptor: `hi` holds the leading and stride byte offsets and the
// swizzle mode (src/target/swizzled_tile.h), the low 14 bits the start address / 16.
MT_FN ullong mt_wgmma_desc(uint addr, ullong hi) { return hi | (ullong)((addr & 0x3FFFF) >> 4); }
// Before the first wgmma that reads or writes accumulator registers other code touched.
MT_FN void mt_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
MT_FN void mt_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
MT_FN void mt_wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
// Before the barrier that publishes the next operands: this warpgroup's wgmmas are done with the
// arrays and the accumulators, and threadgroup memory this thread wrote (cp.async) is ordered
// before the async proxy's reads.
MT_FN void mt_wgmma_sync() {
  mt_wgmma_wait_all();
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
