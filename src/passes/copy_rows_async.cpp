// copy-rows-async: the copy loops of kept rows (keep_rows' threadgroup rows: stores, into an
// alloc marked {row}, of what a load from device memory just read) issue their copies as
// async_copy, every copy of the row before any is waited for; one async_commit, async_wait 0
// and a barrier then stand in front of the first op that reads a row, and, where the rows are
// filled inside an enclosing loop, a barrier in front of the copies (the last turn's reads are
// done). Needs: verified GPU IR from lowering, loads and stores per register (before
// vectorize-access). Guarantees: when the reads start, every element a copy loop stored holds
// what it stored (a copied register whose load was predicated off reads 0, as lowering's load
// did, which the pass requires; the register's store predicate becomes the copy's `live`), and
// every thread sees every other thread's copies. Runs at every opt level: the barrier is what
// orders a row's writes before its reads (a tile program has no barrier of its own).
// A copy of an unpredicated store whose registers come in runs of 16 bytes of consecutive
// elements (whole_tiles' loop over whole tiles) takes a run per chunk (reg_gather of the
// pointers), marked {row} so that the dialect tests each chunk's threadgroup address as well
// as its device address; the rest copy element by element.
// Why: a kept row (up to the device's threadgroup memory, 128 KB at 32768 f32) makes one
// program per SM, which must keep the row's bytes in flight to approach DRAM bandwidth: with
// register loads one tile (16 KB over 256 threads) would be in flight at a time, with cp.async
// the whole row is.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "passes/pass.h"

namespace metile {

namespace {

using gpu::GpuOpKind;

class RowCopies {
 public:
  RowCopies(gpu::Function& f, const GpuTarget& target) : f_(f), target_(target), masks_(gpu::array_masks(f)) {
    int index = 0;
    for (const gpu::Op& op : f.body.ops) {
      if (op.kind != GpuOpKind::ALLOC) continue;
      if (op.find_attr("row") != nullptr && op.attr_int("row") != 0 && index < 64) rows_ |= uint64_t{1} << index;
      ++index;
    }
    defs_ = defining_ops(f.body);
  }

  bool any() const { return rows_ != 0; }

  // Stores into rows whose value a device load just read become async copies.
  void convert(gpu::Block& b) {
    for (gpu::Op& op : b.ops)
      for (gpu::Block& r : op.regions) convert(r);
    // First what each store copies (the loads are looked up while the block is intact).
    const std::vector<int> uses = gpu::use_counts(f_);
    struct Copy {
      ValueId src, pred;
    };
    std::unordered_map<size_t, Copy> copies;
    std::unordered_set<ValueId> copied;  // results of the loads the copies replace
    for (size_t k = 0; k < b.ops.size(); ++k)
      if (const gpu::Op* load = copy_source(b.ops[k], uses)) {
        copies[k] = {load->operands[0], load->operands.size() > 1 ? load->operands[1] : kNoValue};
        copied.insert(load->result());
      }
    if (copies.empty()) return;
    gpu::Block made;
    gpu::GpuBuilder g(f_, &made);
    std::vector<gpu::Op> ops;
    for (size_t k = 0; k < b.ops.size(); ++k) {
      gpu::Op& op = b.ops[k];
      auto it = copies.find(k);
      if (it == copies.end()) {
        // The loads are left unread: dropped here (dce may not run).
        if (!(op.kind == GpuOpKind::LOAD && copied.count(op.result()))) ops.push_back(std::move(op));
        continue;
      }
      g.set_loc(op.loc);
      ValueId dst = op.operands[0], src = it->second.src;
      const int64_t width = op.operands.size() == 2 && it->second.pred == kNoValue ? chunk_width(dst) : 1;
      const ValueId lo = g.constant_int(DType::i32, 0), one = g.constant_int(DType::i32, width);
      const ValueId hi = it->second.pred != kNoValue ? g.ew(OpKind::SELECT, {it->second.pred, one, lo}) : one;
      if (width > 1) {  // each thread's runs of `width` elements as one chunk each
        const gpu::Layout& l = f_.layout_of(dst);
        const int64_t n = l.regs();
        const gpu::LayoutId chunks = f_.add_layout(
            gpu::tile_layout(l.numel, l.thr, composition(l.reg, metile::Layout(n / width, width))));
        std::vector<int64_t> from;
        for (int64_t r = 0; r < n; r += width) from.push_back(r);
        dst = g.reg_gather(dst, chunks, from);
        src = g.reg_gather(src, chunks, from);
      }
      gpu::Op copy;
      copy.kind = GpuOpKind::ASYNC_COPY;
      copy.loc = op.loc;
      copy.operands = {dst, src, lo, hi};
      if (op.operands.size() > 2) copy.operands.push_back(op.operands[2]);
      // row: the dialect tests each chunk's threadgroup address too (a row's tiles start where
      // the loop index puts them, which this pass does not see).
      const DType d = f_.value(dst).dtype;
      const bool vector = width > 1 && std::find(target_.vector_dtypes.begin(), target_.vector_dtypes.end(), d) !=
                                           target_.vector_dtypes.end();
      copy.attrs = {{"width", width}, {"vector", int64_t{vector}}, {"row", int64_t{1}}};
      for (gpu::Op& m : made.ops) ops.push_back(std::move(m));
      made.ops.clear();
      ops.push_back(std::move(copy));
    }
    b.ops = std::move(ops);
  }

  // The commit, wait and barriers around the copies (see the file comment).
  void order(gpu::Block& b, bool top) {
    std::vector<gpu::Op> ops;
    bool pending = false;
    auto sync = [&](GpuOpKind k, std::vector<Attr> attrs = {}) {
      gpu::Op s;
      s.kind = k;
      s.attrs = std::move(attrs);
      ops.push_back(std::move(s));
    };
    for (gpu::Op& op : b.ops) {
      const bool writes = touches(op, true), reads = touches(op, false);
      if (writes && reads) {
        for (gpu::Block& r : op.regions) order(r, false);
      } else if (reads && pending) {
        sync(GpuOpKind::ASYNC_COMMIT);
        sync(GpuOpKind::ASYNC_WAIT, {{"pending", int64_t{0}}});
        sync(GpuOpKind::BARRIER);
        pending = false;
      } else if (writes && !pending) {
        if (!top) sync(GpuOpKind::BARRIER);
        pending = true;
      }
      ops.push_back(std::move(op));
    }
    b.ops = std::move(ops);
  }

 private:
  uint64_t arrays(ValueId ptrs) const {
    const gpu::Value& v = f_.value(ptrs);
    if (!v.is_ptr || v.space != AddrSpace::threadgroup) return 0;
    // A value this pass made after the masks were taken (its own copies' pointers) may be any.
    if (ptrs >= masks_.size() || masks_[ptrs] == 0) return ~uint64_t{0};
    return masks_[ptrs];
  }

  // Whether `op` (its regions included) writes (`write`) or reads a row.
  bool touches(const gpu::Op& op, bool write) const {
    bool found = false;
    auto visit = [&](const gpu::Op& o) {
      switch (o.kind) {
        case GpuOpKind::LOAD:
        case GpuOpKind::VLOAD:
          found = found || (!write && (arrays(o.operands[0]) & rows_) != 0);
          break;
        case GpuOpKind::STORE:
        case GpuOpKind::VSTORE:
        case GpuOpKind::ASYNC_COPY:
          found = found || (write && (arrays(o.operands[0]) & rows_) != 0);
          break;
        default:
          break;
      }
    };
    visit(op);
    for (const gpu::Block& r : op.regions) gpu::walk(r, visit);
    return found;
  }

  // 16 bytes of elements when every register of `ptrs` (unpredicated) starts or continues a
  // run of that many consecutive elements starting at a multiple of it in the tile; else 1.
  int64_t chunk_width(ValueId ptrs) const {
    const gpu::Layout& l = f_.layout_of(ptrs);
    const int64_t width = 16 / static_cast<int64_t>(dtype_size(f_.value(ptrs).dtype));
    if (!l.is_tile() || l.padded || width < 2 || l.regs() % width != 0) return 1;
    for (int64_t r = 0; r < l.regs(); r += width) {
      if (l.reg(r) % width != 0) return 1;
      for (int64_t j = 1; j < width; ++j)
        if (l.reg(r + j) != l.reg(r) + j) return 1;
    }
    for (int64_t t = 0; t < f_.threads; ++t)
      if (l.thr(t) % width != 0) return 1;
    return width;
  }

  // The device load whose value `store` writes into a row, when a copy can stand for both:
  // its only use, same layout, and 0 where its predicate is false.
  const gpu::Op* copy_source(const gpu::Op& store, const std::vector<int>& uses) const {
    if (store.kind != GpuOpKind::STORE || (arrays(store.operands[0]) & rows_) == 0 ||
        (arrays(store.operands[0]) & ~rows_) != 0)
      return nullptr;
    auto it = defs_.find(store.operands[1]);
    if (it == defs_.end()) return nullptr;
    const gpu::Op& load = *it->second;
    if (load.kind != GpuOpKind::LOAD || uses[load.result()] != 1 ||
        f_.value(load.operands[0]).space != AddrSpace::device ||
        f_.value(load.operands[0]).layout != f_.value(store.operands[0]).layout)
      return nullptr;
    if (load.operands.size() > 2) {
      auto other = defs_.find(load.operands[2]);
      if (other == defs_.end() || other->second->kind != GpuOpKind::CONST ||
          other->second->attr_num("value") != 0.0)
        return nullptr;
    }
    return &load;
  }

  gpu::Function& f_;
  const GpuTarget& target_;
  std::vector<uint64_t> masks_;
  uint64_t rows_ = 0;
  DefiningOps<gpu::Block> defs_;
};

}  // namespace

void copy_rows_async(gpu::Function& f, const PassContext& ctx) {
  RowCopies rows(f, ctx.target);
  if (!rows.any()) return;
  rows.convert(f.body);
  rows.order(f.body, true);
}

}  // namespace metile
