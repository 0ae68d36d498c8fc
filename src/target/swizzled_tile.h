/** \file swizzled_tile.h
 * Where a warpgroup operand tile lives in threadgroup memory: one fact shared by lowering (where the
 * copies write each 16-byte chunk, lower_warpgroup.cpp) and the CUDA emitter (the matrix descriptors
 * that read it, in src/codegen/cuda/).
 *
 * A tile of rows x cols elements whose cols are contiguous (A: M x K, "K-major"; B: K x N,
 * "N-major") is cut along cols into blocks `swizzle` bytes wide; each block holds every row,
 * `swizzle` bytes per row, and the blocks follow one another. Within a block, the 16-byte chunk
 * c of row r sits at chunk c ^ ((r / (128 / swizzle)) % (swizzle / 16)): the hardware's 128-,
 * 64- and 32-byte swizzles (address bits [4, 4 + b) XOR bits [7, 7 + b)), which hold for
 * absolute addresses, so every block starts at a multiple of 8 * swizzle bytes (lowering puts
 * the arrays first in threadgroup memory, 1024-byte aligned).
 */
#pragma once

#include <cstdint>

namespace metile {

struct SwizzledTile {
  int64_t rows = 0, cols = 0, elem = 0;  // elem: bytes per element
  int64_t swizzle = 0;                   // bytes per row of a block: 128, 64 or 32

  int64_t width() const { return swizzle / elem; }  // elements per row of a block
  int64_t chunk() const { return 16 / elem; }       // elements per 16-byte chunk
  int64_t block_bytes() const { return rows * swizzle; }
  /** The chunk index row r's chunk c moves to within its block row. */
  int64_t swizzled_chunk(int64_t r, int64_t c) const {
    return c ^ ((r / (128 / swizzle)) % (swizzle / 16));
  }
  /** The element offset of (r, c), c the first element of a chunk. */
  int64_t offset(int64_t r, int64_t c) const {
    return (c / width()) * rows * width() + r * width() + swizzled_chunk(r, (c % width()) / chunk()) * chunk();
  }
  /** The descriptor's layout-type bits [62, 64): 1 = 128-byte swizzle, 2 = 64, 3 = 32. */
  int64_t descriptor_mode() const { return swizzle == 128 ? 1 : swizzle == 64 ? 2 : 3; }
};

/**
 * The widest swizzle that cols contiguous elements of elem bytes fill: 128 when a row is a
 * multiple of 128 bytes, else 64 or 32 when it is exactly that; 0 when none fits.
 */
inline int64_t tile_swizzle(int64_t cols, int64_t elem) {
  const int64_t bytes = cols * elem;
  if (bytes > 0 && bytes % 128 == 0) return 128;
  return bytes == 64 || bytes == 32 ? bytes : 0;
}

inline SwizzledTile swizzled_tile(int64_t rows, int64_t cols, int64_t elem) {
  return {rows, cols, elem, tile_swizzle(cols, elem)};
}

// --- K-major B: tf32, FP8 and 16-bit trans(tile_load) (src/passes/dot_choices.cpp) ---
/** The warpgroup atom transposes 16-bit operands only: a 4-byte (tf32) or 1-byte (FP8) B is staged K-major,
 * N x K as A. A 16-bit B may be either (its transpose flag says which). */
inline bool warpgroup_b_kmajor(int64_t elem) { return elem == 4 || elem == 1; }
/** B's staged tile for a K x N operand: K x N (N-major), or N x K when kmajor. */
inline SwizzledTile swizzled_b_tile(int64_t k, int64_t n, int64_t elem, bool kmajor) {
  return kmajor ? swizzled_tile(n, k, elem) : swizzled_tile(k, n, elem);
}
/** B's staged tile when only the element size decides (N x K for tf32 and FP8). */
inline SwizzledTile swizzled_b_tile(int64_t k, int64_t n, int64_t elem) {
  return swizzled_b_tile(k, n, elem, warpgroup_b_kmajor(elem));
}
// --- end K-major B ---

}  // namespace metile
