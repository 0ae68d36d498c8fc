/** \file assign_layouts.h
 * Layout assignment: the pass that decides, before any op is lowered, how many threads a
 * threadgroup has, which matrix atom and warp grid each dot uses, and which (thread, register)
 * layout each Tile IR tile value lives in. Lowering (lower.cpp) consumes its result; the
 * METILE_DEBUG stage "layouts" prints it as Tile IR with a layout comment on each op. The choices
 * it makes beyond a dot's warp-level atom are in dot_choices.h, the reductions that stay in
 * registers in in_place_reduce.h; it includes nothing of lowering.
 */
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/gpu_ir.h"
#include "ir/tile_ir.h"
#include "passes/lower_options.h"
#include "target/gpu_target.h"
#include "target/swizzled_tile.h"

namespace metile {

/** What layout assignment chose for one dot. */
struct DotChoice {
  const MatrixAtom* atom = nullptr;  // nullptr: exact FMAs in layout_for(acc shape)
  DType stage = DType::invalid;      // operand element type in threadgroup memory
  int warps_m = 0, warps_n = 0;
  gpu::LayoutId acc = gpu::kUniform;  // the accumulator's fragment layout (atoms only)
  int64_t kc = 0;                     // K columns staged at a time (dot_chunk)
  /** The tile_loads of A and B copied straight into threadgroup memory (else nullptr). */
  const Op* direct[2] = {nullptr, nullptr};
  /** direct[1] is the tile_load under B = trans(load), staged as loaded: n rows of k
   * (lower_trans_operand.cpp; on the warpgroup atom, K-major: dot_choices.cpp). */
  bool b_kmajor = false;
  /** B = trans(t), t computed in registers: stored each time as t is laid out, n rows of k, into
   * the warpgroup atom's K-major B tile (b_kmajor; dot_choices.cpp, lower_pipeline.cpp). */
  bool b_stored = false;
  SwizzledTile staged[2];  // warpgroup(): the swizzled layouts A and B are copied into
  bool tf32x3 = false;  // the relaxed atom runs three MMAs on TF32 hi/lo parts (MatrixAtom::splits)
  bool transposed = false;  // warpgroup tf32 with B N-major: C^T = B^T A^T, B^T from registers (dot_choices.cpp)
  /** warpgroup FP8 (dot_choices.cpp): K elements per f32 promotion of the warpgroup partial sums
   * (0: fast accumulation, every k step into the accumulator itself). */
  int64_t promote = 0;
  /** atom is a warpgroup atom (more than one warp issues it: choose_warpgroup_atom, dot_choices.h). */
  bool warpgroup() const { return atom != nullptr && atom_kind_threads(atom->kind) > 32; }
  /** warpgroup f16/bf16 with A from registers (dot_choices.cpp): A's fragment layout, that of the
   * accumulator A is an element-wise function of (kUniform: A is staged in threadgroup memory). */
  gpu::LayoutId register_a = gpu::kUniform;
};

struct LayoutAssignment {
  /** The GPU function lowering fills: name, threads, simd width and the layout table the ids
   * below index (lowering adds its own layouts after these). */
  gpu::Function function;
  /** Tile IR value -> layout; kUniform: the canonical layout of its shape (canonical_layout). */
  std::vector<gpu::LayoutId> of;
  std::map<const Op*, DotChoice> dots;  // by the program's dot ops
  /** Elements per chunk of the canonical layouts (canonical_chunk). */
  int64_t chunk = 4;
};

/**
 * Assigns layouts for `program` on `target`. Anchors: a dot's accumulator takes its atom's
 * fragment layout tiled over the warp grid; element-wise ops with an operand of the same shape
 * in that layout (the epilogue) and loop-carried tiles whose yielded value has it (the K-loop
 * accumulator) follow, so a K loop never leaves fragment layout; a row or column reduction of
 * such a tile takes the layout the fragments leave it in, and the index math and broadcasts
 * feeding such ops are computed in their layout. Every other tile keeps its canonical layout.
 * Needs: verified Tile IR. Throws METILE_ERROR_INVALID_ARGUMENT for an impossible num_threads,
 * METILE_ERROR_UNSUPPORTED for a thread count over the target's limit.
 */
LayoutAssignment assign_layouts(const Program& program, const GpuTarget& target,
                                const LowerOptions& options);

/**
 * The canonical layout of an n-element tile over `threads` threads (see assign_layouts.cpp) in
 * chunks of at most `chunk` elements; simt: the SIMT thread count T (0 without SIMT ops), whose
 * T-element tiles are the identity.
 */
gpu::Layout canonical_layout(int64_t n, int64_t threads, int64_t simt, int64_t chunk = 4);

/**
 * Elements per chunk of `program`'s canonical layouts over `threads` threads: 4, or up to 8
 * where `chunk_bytes` (GpuTarget::chunk_bytes) asks for more to span that many bytes of the
 * narrowest tile the program loads or stores in global memory and every such tile with whole
 * chunks of 4 for every thread also has whole chunks of that size. One value for the whole
 * program, so element-wise ops between tiles of different dtypes meet in one layout.
 */
int64_t canonical_chunk(const Program& program, int64_t chunk_bytes, int64_t threads);

/**
 * The matrix atom of `target` for a dot of these types and sizes (nullptr: none) and the dtype
 * its operands stage as (bf16 without an atom of its own widens to an exact f32 atom; FP8
 * stages as f16, exactly, unless choose_warpgroup_atom later takes an FP8 warpgroup atom).
 */
std::pair<const MatrixAtom*, DType> dot_atom(const GpuTarget& target, DotPrecision precision, DType ab,
                                             DType acc, int64_t m, int64_t n, int64_t k);

/** `dot`'s precision on `target`: its input_precision, else the compile's, else the target's. */
DotPrecision gpu_dot_precision(const Op& dot, const GpuTarget& target, const LowerOptions& options);

/**
 * Appends the leaves of `mode`, one mode of a matrix atom's (lane, value) -> element layout, to
 * a tile layout's (shape, stride), each stride mapped to the tile's element numbering by to_tile.
 * The fragment layouts of warp-level (assign_layouts.cpp) and warpgroup (dot_choices.cpp) atoms are built of these.
 */
void append_atom_mode(const metile::Layout& mode, const std::function<int64_t(int64_t)>& to_tile,
                      std::vector<IntTuple>& shape, std::vector<IntTuple>& stride);

/**
 * Elements each row of a dot operand staged in threadgroup memory is padded by: 16 bytes, so
 * one warp's row-strided fragment reads spread over banks (the atom choice counts it too).
 */
int64_t staging_pad(DType t);

/** K columns of a dot staged at a time: halved until A and B fit half the threadgroup memory. */
int64_t dot_chunk(const GpuTarget& target, const DotChoice& c, int64_t m, int64_t n, int64_t k);

/** The "layouts" stage text: `program` with a `// layout` comment on each op with tile results. */
std::string print_layouts(const Program& program, const LayoutAssignment& layouts);

/** Text in, text out (tests): parses Tile IR, assigns layouts and prints them (print_layouts). */
std::string assign_layouts_on_text(std::string_view tile_ir, const GpuTarget& target,
                                   const LowerOptions& options = {});

}  // namespace metile
