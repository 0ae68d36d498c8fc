/** \file tma.h
 * A tensor map a kernel reads through the tensor memory accelerator (cp.async.bulk.tensor):
 * what lowering (lower_tma.cpp) decides, the CUDA emitter passes on with the kernel, and the
 * runtime builds with cuTensorMapEncodeTiled at each launch (runtime/cuda/tma_map.h).
 *
 * The tensor is a tile_load's view of a kernel parameter: element (r, c) at base + r * ld + c,
 * rows x cols of them (the load's bounds), read in boxes of box_rows x box_cols elements whose
 * rows land `swizzle` bytes apart in threadgroup memory with the hardware swizzle of that width
 * (the warpgroup staging layout, src/target/swizzled_tile.h). Each of rows, cols and ld is a kernel
 * parameter ("p<index>") or a constant ("<value>"), so the runtime can evaluate it from the
 * launch's arguments.
 *
 * With clamp=1 the bounds are the checked mode's (the bounds pass, guard_buffer_bounds.cpp): the
 * given matrix kept inside the buffer, rows = min(rows, avail // ld) and cols = min(cols, ld)
 * with avail the elements from the base pointer to the buffer's end; a bound spelled "*" was not
 * given (the default matrix: avail // ld rows of ld). TMA's zero fill outside the clamped
 * matrix then reads what the guarded loads read. One line of text per map:
 *   param=<index> rows=<src> cols=<src> ld=<src> elem=<bytes> box=<rows>x<cols> swizzle=<bytes>
 *   clamp=<0|1>
 * (on one line), then " slabs=1" for a stack of such matrices (below).
 *
 * With slabs=1 the load's base is the parameter plus slab * rows * ld, for a slab index the
 * kernel computes (flash attention's K + (batch, head) * seq * head_dim): the tensor is 3-D, the
 * slabs rows * ld elements apart (rows the given bound, before any clamp), and each box takes the
 * slab as a third coordinate. Rows past the bound within a slab are zeros, as the guarded loads
 * read them; where the buffer ends inside a slab the clamped matrix is no stack, and where the
 * slabs' offsets pass 2^31 - 1 the kernel's i32 offset would wrap: those launches fall back.
 */
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace metile {

struct TmaMap {
  int64_t param = -1;  // the base pointer's parameter index
  std::string rows, cols, ld;
  int64_t elem = 0, box_rows = 0, box_cols = 0, swizzle = 0;
  bool clamp = false;  // rows and cols also kept inside the buffer (the checked mode's bounds)
  bool slabs = false;  // a stack of rows x cols matrices rows * ld apart, indexed by a third coordinate

  std::string text() const {
    return "param=" + std::to_string(param) + " rows=" + rows + " cols=" + cols + " ld=" + ld +
           " elem=" + std::to_string(elem) + " box=" + std::to_string(box_rows) + "x" + std::to_string(box_cols) +
           " swizzle=" + std::to_string(swizzle) + " clamp=" + (clamp ? "1" : "0") + (slabs ? " slabs=1" : "");
  }
  bool operator==(const TmaMap&) const = default;
};

/** The maps of a kernel text (one line each, TmaMap::text()); false when a line is malformed. */
inline bool parse_tma_maps(const std::string& text, std::vector<TmaMap>* out) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    TmaMap m;
    char x = 0;
    std::istringstream in(line);
    std::string word;
    int fields = 0;
    while (in >> word) {
      const size_t eq = word.find('=');
      if (eq == std::string::npos) return false;
      const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
      std::istringstream v(value);
      if (key == "param") v >> m.param;
      else if (key == "rows") m.rows = value;
      else if (key == "cols") m.cols = value;
      else if (key == "ld") m.ld = value;
      else if (key == "elem") v >> m.elem;
      else if (key == "box") v >> m.box_rows >> x >> m.box_cols;
      else if (key == "swizzle") v >> m.swizzle;
      else if (key == "clamp" && (value == "0" || value == "1")) m.clamp = value == "1";
      else if (key == "slabs" && value == "1") m.slabs = true;
      else return false;
      if (v.fail() || (key == "box" && x != 'x')) return false;
      ++fields;
    }
    if (fields != 8 + (m.slabs ? 1 : 0) || m.param < 0 || m.rows.empty() || m.cols.empty() || m.ld.empty()) return false;
    if (!m.clamp && (m.rows == "*" || m.cols == "*")) return false;  // no bound and no buffer's
    out->push_back(m);
  }
  return true;
}

}  // namespace metile
