// The interp executor's memory ops: load, store, atomics, tile_load/tile_store and shared
// memory, every access bounds-checked (semantics: the opening comment of executor.cpp).
#include "runtime/interp/instance.h"

#include <cstring>

namespace metile::interp {

void Instance::load(const Op& op) {
  const Val& ptr = val(op.operands[0]);
  const Val* mask = op.operands.size() > 1 ? &val(op.operands[1]) : nullptr;
  const Val* other = op.operands.size() > 2 ? &val(op.operands[2]) : nullptr;
  const DType d = type(op.operands[0]).dtype;
  const size_t n = static_cast<size_t>(type(op.result()).shape.numel());
  Val out;
  out.e.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (mask && !at(*mask, i).i) {
      out.e[i] = other ? at(*other, i) : int_elem(0);
      continue;
    }
    out.e[i] = read_elem(address(region_at(ptr, i), at(ptr, i).i), d);
  }
  set(op, std::move(out));
}

void Instance::store(const Op& op) {
  const Val &ptr = val(op.operands[0]), &v = val(op.operands[1]);
  const Val* mask = op.operands.size() > 2 ? &val(op.operands[2]) : nullptr;
  const Type& pt = type(op.operands[0]);
  size_t lo = 0, hi = static_cast<size_t>(pt.shape.numel());
  if (in_role_ && pt.shape.rank == 1 && pt.shape.dims[0] == threads_) {
    lo = static_cast<size_t>(role_lo_);
    hi = static_cast<size_t>(role_hi_);
  }
  for (size_t i = lo; i < hi; ++i) {
    if (mask && !at(*mask, i).i) continue;
    write_elem(address(region_at(ptr, i), at(ptr, i).i), pt.dtype, at(v, i));
  }
}

void Instance::atomic(const Op& op) {
  const bool cas = op.kind == OpKind::ATOMIC_CAS;
  const size_t value_i = cas ? 2 : 1;
  const Val& ptr = val(op.operands[0]);
  const Val& v = val(op.operands[value_i]);
  const Val* cmp = cas ? &val(op.operands[1]) : nullptr;
  const Val* mask = op.operands.size() > value_i + 1 ? &val(op.operands[value_i + 1]) : nullptr;
  const DType d = type(op.operands[0]).dtype;
  const size_t n = static_cast<size_t>(type(op.result()).shape.numel());
  Val out;
  out.e.assign(n, int_elem(0));
  size_t lo = 0, hi = n;  // a role keeps its threads' lanes, as for stores
  if (in_role_ && type(op.operands[0]).shape.rank == 1 && static_cast<int64_t>(n) == threads_) {
    lo = static_cast<size_t>(role_lo_);
    hi = static_cast<size_t>(role_hi_);
  }
  std::lock_guard<std::mutex> lock(*l_.atomics);
  for (size_t i = lo; i < hi; ++i) {
    if (mask && !at(*mask, i).i) continue;
    uint8_t* addr = address(region_at(ptr, i), at(ptr, i).i);
    const Elem old = read_elem(addr, d), x = at(v, i);
    Elem now = x;
    switch (op.kind) {
      case OpKind::ATOMIC_ADD: now = binary_elem(OpKind::ADD, d, old, x); break;
      case OpKind::ATOMIC_MAX: now = binary_elem(OpKind::MAXIMUM, d, old, x); break;
      case OpKind::ATOMIC_MIN: now = binary_elem(OpKind::MINIMUM, d, old, x); break;
      case OpKind::ATOMIC_CAS: {
        // Bitwise, as the hardware compares: -0.0 differs from 0.0 and a NaN equals itself.
        uint8_t expected[8] = {}, stored[8] = {};
        write_elem(expected, d, at(*cmp, i));
        write_elem(stored, d, old);
        if (std::memcmp(expected, stored, dtype_size(d)) != 0) now = old;
        break;
      }
      default: break;  // xchg writes x
    }
    write_elem(addr, d, now);
    out.e[i] = old;
  }
  set(op, std::move(out));
}

void Instance::tile_access(const Op& op) {
  const bool is_load = op.kind == OpKind::TILE_LOAD;
  const Val& ptr = val(op.operands[0]);
  const int64_t row = scalar(op.operands[1]), col = scalar(op.operands[2]);
  const int64_t stride = scalar(op.operands[3]);
  const size_t first_bound = is_load ? 4 : 5;
  const bool bounded = op.operands.size() > first_bound;
  const int64_t bound_rows = bounded ? scalar(op.operands[first_bound]) : 0;
  const int64_t bound_cols = bounded ? scalar(op.operands[first_bound + 1]) : 0;
  const Type& tt = is_load ? type(op.result()) : type(op.operands[4]);
  const DType d = type(op.operands[0]).dtype;
  const int64_t rows = tt.shape.dims[0], cols = tt.shape.dims[1];
  Val out;
  if (is_load) out.e.assign(static_cast<size_t>(rows * cols), int_elem(0));
  const Val* value = is_load ? nullptr : &val(op.operands[4]);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t r = checked_add(row, i);
    if (bounded && (r < 0 || r >= bound_rows)) continue;
    const int64_t row_base = checked_add(ptr.e[0].i, checked_mul(r, stride));
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t c = checked_add(col, j);
      if (bounded && (c < 0 || c >= bound_cols)) continue;
      uint8_t* addr = address(ptr.region[0], checked_add(row_base, c));
      const size_t k = static_cast<size_t>(i * cols + j);
      if (is_load)
        out.e[k] = read_elem(addr, d);
      else
        write_elem(addr, d, value->e[k]);
    }
  }
  if (is_load) set(op, std::move(out));
}

void Instance::shared(const Op& op) {
  auto it = shared_region_.find(op.result());
  if (it == shared_region_.end()) {
    const DType d = type(op.result()).dtype;
    const int64_t size = op.attr_int("size");
    shared_.push_back(std::make_unique<uint8_t[]>(static_cast<size_t>(size) * dtype_size(d)));
    regions_.push_back(
        Region{cat("shared memory #", shared_.size() - 1), shared_.back().get(), size, d});
    it = shared_region_.emplace(op.result(), static_cast<uint32_t>(regions_.size() - 1)).first;
  }
  set(op, Val{{int_elem(0)}, {it->second}});
}

}  // namespace metile::interp
