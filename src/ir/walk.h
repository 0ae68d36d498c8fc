/** \file walk.h
 * The one pre-order walker over nested blocks, for Tile IR and GPU IR alike (a Block holds
 * `ops`, an Op holds `regions` of Blocks).
 */
#pragma once

#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

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

/** The op that defines each result of the ops of `block` and its nested blocks (a block's
 * arguments, such as a loop's induction variable, have none). The pointers are into `block`:
 * they hold while no op list in it changes. */
template <typename Block>
auto defining_ops(const Block& block) {
  using Op = std::decay_t<decltype(block.ops.front())>;
  using Value = typename decltype(Op::results)::value_type;
  std::unordered_map<Value, const Op*> defs;
  walk(block, [&](const Op& op) {
    for (Value r : op.results) defs[r] = &op;
  });
  return defs;
}

/** The type defining_ops returns for a block type, for members and parameters. */
template <typename Block>
using DefiningOps = decltype(defining_ops(std::declval<const Block&>()));

/** Removes the ops of `block` and its nested blocks for which `pred` holds (a removed op's blocks
 * go with it; the others keep their order). Returns whether any op was removed. */
template <typename Block, typename Pred>
bool erase_ops_if(Block& block, Pred&& pred) {
  bool erased = false;
  std::vector<std::decay_t<decltype(block.ops.front())>> kept;
  kept.reserve(block.ops.size());
  for (auto& op : block.ops) {
    if (pred(op)) {
      erased = true;
      continue;
    }
    for (auto& r : op.regions) erased = erase_ops_if(r, pred) || erased;
    kept.push_back(std::move(op));
  }
  block.ops = std::move(kept);
  return erased;
}

}  // namespace metile
