/** \file walk.h
 * The one pre-order walker over nested blocks, for Tile IR and GPU IR alike (a Block holds
 * `ops`, an Op holds `regions` of Blocks).
 */
#pragma once

namespace metile {

/** Visits every op of `block` and its nested blocks, pre-order. */
template <typename Block, typename F>
void walk(const Block& block, F&& f) {
  for (const auto& op : block.ops) {
    f(op);
    for (const auto& r : op.regions) walk(r, f);
  }
}

/** The same, allowing in-place rewrites of each op (not of the op lists being walked). */
template <typename Block, typename F>
void walk_mut(Block& block, F&& f) {
  for (auto& op : block.ops) {
    f(op);
    for (auto& r : op.regions) walk_mut(r, f);
  }
}

}  // namespace metile
