/** \file matrix_atom.h
 * Matrix atoms, the matrix-multiply instructions dots lower to, expanded from the table in
 * matrix_atoms.def: what layout assignment plans with, what lowering writes into `mma` ops and
 * what the emitters switch on. Code names atoms and kinds by enum; the names are for IR text.
 */
#pragma once

#include <string_view>
#include <vector>

#include "ir/gpu_ir.h"
#include "ir/layout.h"
#include "ir/types.h"

namespace metile {

/** The instruction families (ATOM_KIND rows). */
enum class AtomKind {
#define ATOM_KIND(ENUM, name, threads, flags) ENUM,
#include "target/matrix_atoms.def"
};

/** One instruction shape and dtype (ATOM rows). */
enum class Atom {
#define ATOM(ENUM, kind, m, n, k, ab, acc, b_major, flags, c) ENUM,
#include "target/matrix_atoms.def"
};

/** The B layouts an atom reads from threadgroup memory (the table's b_major column). */
enum : unsigned { kBNMajor = 1, kBKMajor = 2 };
/** The table's flags columns. */
enum : unsigned { kAtomRelaxed = 1, kAtomSplits = 2, kAtomAccThroughThreadgroup = 4 };

/** One matrix-multiply instruction shape: D(m x n) = A(m x k) * B(k x n) + C. */
struct MatrixAtom {
  Atom id;
  AtomKind kind;
  int m = 0, n = 0, k = 0;
  DType ab = DType::invalid;   // input type
  DType acc = DType::invalid;  // accumulator type
  unsigned b_major = 0;        // kBNMajor | kBKMajor
  bool relaxed = false;        // rounds f32 inputs (TF32): only for dots whose precision allows it
  /** Relaxed, and its emitter also runs "tf32x3": three MMAs on TF32 hi/lo parts. */
  bool splits = false;
  /**
   * The instruction's accumulator lives in a layout the hardware does not document (Metal 4
   * cooperative tensors), so each `mma` passes the registers through an f32 m x n threadgroup
   * array: lowering allocates it and counts it in the threadgroup-memory budget.
   */
  bool acc_through_threadgroup = false;
  /**
   * The accumulator fragment: (lane, value) -> offset row + rows * col of one warp's rows of
   * the atom (src/ir/layout_atoms.cpp). Lowering tiles it over warps and repeats to lay out a
   * dot's accumulator, so the registers an atom instruction updates are named by this map.
   */
  metile::Layout c;
};

/** The table's row for `atom`. */
const MatrixAtom& matrix_atom(Atom atom);
/** Every row of the table, in its order. */
const std::vector<MatrixAtom>& matrix_atom_table();
/** The GPU IR name of `kind` ("mma.sync", "tensor_ops", ...). */
std::string_view atom_kind_name(AtomKind kind);
/** Threads that issue one instruction of `kind` (32: a warp; 128: a warpgroup). */
int atom_kind_threads(AtomKind kind);
/** The kind an `mma` op's "atom" attribute names; METILE_ERROR_INVALID_PROGRAM for another. */
AtomKind mma_atom_kind(const gpu::Op& mma);
/**
 * Whether mma.sync reads its fragments with ldmatrix from threadgroup arrays of `staged`
 * elements whose rows are `lda` (A) and `ldb` (B) elements apart: 16-bit operands with both
 * arrays' rows 16-byte aligned, or a tf32 atom's (`tf32`) f32 A with its rows 16-byte aligned
 * (B's k pairs would be 16-bit halves of two elements under .trans). The ldmatrix-fragments pass
 * marks the ops where it holds; K-major B (dot_choices.cpp) is chosen only where it holds.
 */
bool ldmatrix_fits(DType staged, bool tf32, int64_t lda, int64_t ldb);

}  // namespace metile
