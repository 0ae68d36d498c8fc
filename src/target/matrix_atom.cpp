#include "target/matrix_atom.h"

#include "support/error.h"

namespace metile {

namespace {

struct KindRow {
  std::string_view name;
  int threads;
  unsigned flags;
};

constexpr KindRow kKinds[] = {
#define ATOM_KIND(ENUM, name, threads, flags) {name, threads, flags},
#include "target/matrix_atoms.def"
};

const KindRow& kind_row(AtomKind kind) { return kKinds[static_cast<size_t>(kind)]; }

}  // namespace

const std::vector<MatrixAtom>& matrix_atom_table() {
  static const std::vector<MatrixAtom> table = [] {
    auto row = [](Atom id, AtomKind kind, int m, int n, int k, DType ab, DType acc, unsigned b_major,
                  unsigned flags, Layout c) {
      return MatrixAtom{id, kind, m, n, k, ab, acc, b_major, (flags & kAtomRelaxed) != 0,
                        (flags & kAtomSplits) != 0,
                        (kind_row(kind).flags & kAtomAccThroughThreadgroup) != 0, std::move(c)};
    };
    return std::vector<MatrixAtom>{
#define ATOM(ENUM, kind, m, n, k, ab, acc, b_major, flags, c) \
  row(Atom::ENUM, AtomKind::kind, m, n, k, DType::ab, DType::acc, b_major, flags, c()),
#include "target/matrix_atoms.def"
    };
  }();
  return table;
}

const MatrixAtom& matrix_atom(Atom atom) { return matrix_atom_table()[static_cast<size_t>(atom)]; }

std::string_view atom_kind_name(AtomKind kind) { return kind_row(kind).name; }

int atom_kind_threads(AtomKind kind) { return kind_row(kind).threads; }

AtomKind mma_atom_kind(const gpu::Op& mma) {
  const std::string& name = mma.attr_str("atom");
  for (size_t i = 0; i < std::size(kKinds); ++i)
    if (kKinds[i].name == name) return static_cast<AtomKind>(i);
  fail(METILE_ERROR_INVALID_PROGRAM, "gpu_ir", "mma atom=\"", name, "\" is no matrix atom kind");
}

bool ldmatrix_fits(DType staged, bool tf32, int64_t lda, int64_t ldb) {
  return (dtype_size(staged) == 2 && lda % 8 == 0 && ldb % 8 == 0) ||
         (tf32 && dtype_size(staged) == 4 && lda % 4 == 0);
}

}  // namespace metile
