/** \file swizzle.h
 * The index math of `tile_swizzle(pid_m, pid_n, pattern, block_size)`: one definition for the
 * interp device and for every code generator. It is written in the subset of C++ that is also
 * valid CUDA C++ and Metal Shading Language (a template over the integer type, no library
 * calls, no pointers), so an emitter can paste this file into its prelude after defining
 * METILE_SWIZZLE_FN (e.g. `__device__ inline` for CUDA). Each function is a bijection on
 * [0, grid_m) x [0, grid_n) for every grid shape and block size >= 1.
 */
#ifndef METILE_IR_SWIZZLE_H
#define METILE_IR_SWIZZLE_H

#ifndef METILE_SWIZZLE_FN
#define METILE_SWIZZLE_FN inline
#endif

template <typename I>
struct metile_swizzled {
  I m;
  I n;
};

/** Pattern codes, as generated code passes them. */
enum metile_swizzle_pattern {
  METILE_SWIZZLE_DIAGONAL = 0,
  METILE_SWIZZLE_GROUPED = 1,
  METILE_SWIZZLE_MORTON = 2,
  METILE_SWIZZLE_HILBERT = 3,
  METILE_SWIZZLE_LINEAR = 4
};

/** Column pid_n is rotated by the row: consecutive programs of a column hit different columns. */
template <typename I>
METILE_SWIZZLE_FN metile_swizzled<I> metile_swizzle_diagonal(I pid_m, I pid_n, I grid_m, I grid_n) {
  (void)grid_m;
  metile_swizzled<I> r = {pid_m, (pid_n + pid_m) % grid_n};
  return r;
}

/**
 * Triton's GROUP_M ordering: the column-major launch index L walks groups of `group` rows, and
 * inside a group goes down the rows before moving right (the last group may be shorter).
 */
template <typename I>
METILE_SWIZZLE_FN metile_swizzled<I> metile_swizzle_grouped(I pid_m, I pid_n, I grid_m, I grid_n,
                                                            I group) {
  I l = pid_n * grid_m + pid_m;
  I per = group * grid_n;
  I first = (l / per) * group;
  I size = grid_m - first < group ? grid_m - first : group;
  I local = l % per;
  metile_swizzled<I> r = {first + local % size, local / size};
  return r;
}

/** Position `d` along the Hilbert curve that fills a side x side square (side a power of two). */
template <typename I>
METILE_SWIZZLE_FN metile_swizzled<I> metile_hilbert_point(I d, I side) {
  I x = 0, y = 0;
  for (I s = 1; s < side; s *= 2) {
    I rx = 1 & (d / 2);
    I ry = 1 & (d ^ rx);
    if (ry == 0) {  // rotate the quadrant so the sub-curves join end to end
      if (rx == 1) {
        x = s - 1 - x;
        y = s - 1 - y;
      }
      I t = x;
      x = y;
      y = t;
    }
    x += s * rx;
    y += s * ry;
    d /= 4;
  }
  metile_swizzled<I> r = {y, x};
  return r;
}

/**
 * A space-filling walk inside block x block squares: the column-major launch index L walks
 * bands of `block` rows, each band in squares from left to right; a full square with a
 * power-of-two side is walked in Morton (Z) order or along a Hilbert curve, a clipped square at
 * the grid's edge row-major, so every grid shape is covered exactly once.
 */
template <typename I>
METILE_SWIZZLE_FN metile_swizzled<I> metile_swizzle_squares(I pid_m, I pid_n, I grid_m, I grid_n,
                                                            I block, bool hilbert) {
  I l = pid_n * grid_m + pid_m;
  I band = l / (block * grid_n);
  I first_row = band * block;
  I h = grid_m - first_row < block ? grid_m - first_row : block;
  I in_band = l - band * block * grid_n;
  I square = in_band / (h * block);
  I first_col = square * block;
  I w = grid_n - first_col < block ? grid_n - first_col : block;
  I local = in_band - square * h * block;
  I row = 0, col = 0;
  if (h == block && w == block && (block & (block - 1)) == 0) {
    if (hilbert) {
      metile_swizzled<I> p = metile_hilbert_point(local, block);
      row = p.m;
      col = p.n;
    } else {
      for (I bit = 0; (local >> (2 * bit)) != 0; ++bit) {
        row |= ((local >> (2 * bit)) & 1) << bit;
        col |= ((local >> (2 * bit + 1)) & 1) << bit;
      }
    }
  } else {
    row = local / w;
    col = local % w;
  }
  metile_swizzled<I> r = {first_row + row, first_col + col};
  return r;
}

/** Dispatches on a pattern code; `block` is the block_size attribute. */
template <typename I>
METILE_SWIZZLE_FN metile_swizzled<I> metile_swizzle(int pattern, I pid_m, I pid_n, I grid_m,
                                                    I grid_n, I block) {
  if (pattern == METILE_SWIZZLE_GROUPED)
    return metile_swizzle_grouped(pid_m, pid_n, grid_m, grid_n, block);
  if (pattern == METILE_SWIZZLE_MORTON || pattern == METILE_SWIZZLE_HILBERT)
    return metile_swizzle_squares(pid_m, pid_n, grid_m, grid_n, block,
                                  pattern == METILE_SWIZZLE_HILBERT);
  if (pattern == METILE_SWIZZLE_LINEAR) {
    metile_swizzled<I> r = {pid_m, pid_n};
    return r;
  }
  return metile_swizzle_diagonal(pid_m, pid_n, grid_m, grid_n);
}

#endif  // METILE_IR_SWIZZLE_H
