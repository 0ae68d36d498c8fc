/** \file tile_emit.h
 * What Tile IR passes that add ops and hidden parameters share: appending a typed op, a
 * parameter name no other parameter has, and the one hidden error flag the runtime reads.
 */
#pragma once

#include <string>
#include <vector>

#include "passes/tile/tile_pass.h"

namespace metile {

/**
 * Appends `k(operands) {attrs}` at `loc` to `out` with a new result of type `t`; returns it.
 * `t` is taken by value: new_value() may move the table an argument points into.
 */
inline ValueId append_op(Program& p, std::vector<Op>& out, OpKind k, std::vector<ValueId> operands,
                         Type t, const Loc& loc, std::vector<Attr> attrs = {}) {
  ValueId r = p.new_value(t);
  Op op;
  op.kind = k;
  op.operands = std::move(operands);
  op.results = {r};
  op.attrs = std::move(attrs);
  op.loc = loc;
  out.push_back(std::move(op));
  return r;
}

/** `name`, with "_" appended until no parameter of `p` is called that. */
inline std::string fresh_param_name(const Program& p, std::string name) {
  for (bool taken = true; taken;) {
    taken = false;
    for (const Param& prm : p.params)
      if (prm.name == name) {
        name += "_";
        taken = true;
      }
  }
  return name;
}

/**
 * The hidden i32 error flag (TileHiddenArgs::error_flag): the one an earlier pass appended as
 * the last parameter, else a new last parameter called `name` (made fresh).
 */
inline ValueId hidden_error_flag(Program& p, TileHiddenArgs& hidden, const std::string& name) {
  if (hidden.error_flag) return p.params.back().value;
  ValueId flag = p.new_value(Type::ptr(DType::i32));
  p.params.push_back({fresh_param_name(p, name), flag});
  hidden.error_flag = true;
  return flag;
}

}  // namespace metile
