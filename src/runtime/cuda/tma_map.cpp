#include "runtime/cuda/tma_map.h"

#include <algorithm>
#include <limits>

namespace metile::cuda {

std::optional<TmaEncoding> tma_encoding(const TmaMap& m, uint64_t base, uint64_t bytes,
                                        const std::function<std::optional<int64_t>(int64_t)>& param,
                                        std::string* why) {
  auto no = [&](const std::string& reason) -> std::optional<TmaEncoding> {
    *why = reason;
    return std::nullopt;
  };
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();  // "*": no bound given
  auto value = [&](const std::string& src) -> std::optional<int64_t> {
    if (src.empty()) return std::nullopt;
    if (src == "*") return m.clamp ? std::optional<int64_t>(kNone) : std::nullopt;
    if (src[0] == 'p') return param(std::stoll(src.substr(1)));
    return std::stoll(src);
  };
  std::optional<int64_t> rows = value(m.rows), cols = value(m.cols);
  const std::optional<int64_t> ld = value(m.ld);
  if (!rows || !cols || !ld || *ld == kNone) return no("a bound or the row stride is not an integer argument");
  if (m.elem != 1 && m.elem != 2 && m.elem != 4) return no("elements of " + std::to_string(m.elem) + " bytes");
  const std::optional<int64_t> pitch = rows;  // a slab's rows, before the clamp
  if (m.clamp) {
    // The bounds pass's matrix: the given one kept inside the buffer's (avail // ld) x ld, where
    // a row stride below 1 leaves no rows (guard_buffer_bounds.cpp, Bounds::tile_access).
    if (*ld < 1) return no("the row stride (" + std::to_string(*ld) + " elements) is not positive");
    const int64_t avail = static_cast<int64_t>(std::min<uint64_t>(bytes / static_cast<uint64_t>(m.elem), kNone));
    rows = std::min(*rows, avail / *ld);
    cols = std::min(*cols, *ld);
  }
  if (m.swizzle != 32 && m.swizzle != 64 && m.swizzle != 128) return no("no TMA swizzle of that width");
  if (m.box_rows < 1 || m.box_rows > 256 || m.box_cols < 1 || m.box_cols * m.elem > m.swizzle)
    return no("the box does not fit TMA");
  if (base % 16 != 0) return no("the base address is not a multiple of 16 bytes");
  if (*ld < 1 || (*ld * m.elem) % 16 != 0 || *ld * m.elem >= (int64_t{1} << 40))
    return no("the row stride (" + std::to_string(*ld) + " elements) is not a multiple of 16 bytes");
  constexpr int64_t kMax = (int64_t{1} << 31) - 1;
  if (*rows < 1 || *cols < 1 || *rows > kMax || *cols > kMax) return no("a bound is empty or over 2^31 - 1");
  int64_t slabs = 1;  // the slabs wholly inside the buffer
  if (m.slabs) {
    const int64_t elems = static_cast<int64_t>(std::min<uint64_t>(bytes / static_cast<uint64_t>(m.elem), kNone));
    if (*pitch > kMax || *rows != *pitch || *pitch > kNone / *ld || elems < (*pitch - 1) * *ld + *cols)
      return no("no whole slab of " + std::to_string(*pitch) + " rows lies inside the buffer");
    const int64_t last = (*pitch - 1) * *ld + *cols;  // the elements a slab spans
    if (m.clamp && (elems / *ld) % *pitch != 0) return no("the buffer ends inside a slab");
    slabs = std::min(m.clamp ? elems / *ld / *pitch : (elems - last) / (*pitch * *ld) + 1, kMax);
    // The kernel computes a slab's offset slab * rows * ld in i32 (lower_tma.cpp): past 2^31 - 1
    // it wraps where TMA would not.
    if (slabs > kMax / (*pitch * *ld)) return no("the slabs' offsets pass 2^31 - 1 elements");
  }
  // The last element read is (rows - 1) * ld + cols - 1 (below 2^72 bytes: 128-bit arithmetic).
  const unsigned __int128 end =
      (static_cast<unsigned __int128>(slabs - 1) * static_cast<uint64_t>(*pitch) * static_cast<uint64_t>(*ld) +
       static_cast<unsigned __int128>(*rows - 1) * static_cast<uint64_t>(*ld) + static_cast<uint64_t>(*cols)) *
      static_cast<uint64_t>(m.elem);
  if (end > bytes)
    return no("the tensor (" + std::to_string(*rows) + " x " + std::to_string(*cols) + " at a row stride of " +
              std::to_string(*ld) + ") reaches past its buffer (" + std::to_string(bytes) + " bytes)");
  TmaEncoding e;
  e.data_type = m.elem == 1 ? 0 : m.elem == 2 ? 1 : 2;
  e.base = base;
  e.dims[0] = static_cast<uint64_t>(*cols);
  e.dims[1] = static_cast<uint64_t>(*rows);
  e.stride[0] = static_cast<uint64_t>(*ld * m.elem);
  e.box[0] = static_cast<uint32_t>(m.box_cols);
  e.box[1] = static_cast<uint32_t>(m.box_rows);
  if (m.slabs) {
    e.rank = 3;
    e.dims[2] = static_cast<uint64_t>(slabs);
    e.stride[1] = static_cast<uint64_t>(*pitch * *ld * m.elem);
    e.box[2] = 1;
  }
  e.swizzle = m.swizzle == 32 ? 1 : m.swizzle == 64 ? 2 : 3;
  return e;
}

}  // namespace metile::cuda
