// loop_steps: a tile_range whose step is 0 at run time is an error on every device.
// Needs: verified Tile IR after the bounds pass. Guarantees:
//   - on devices that run tiles in order on the host (interp, cpu: they report a zero step
//     themselves, with its source line) nothing changes;
//   - elsewhere (metal-sim, metal, cuda, whose loops run no iteration for a zero step) every
//     tile_range whose step is not a constant first stores its site number into the hidden
//     error flag when the step is 0; the runtime then fails the launch with METILE_ERROR_DEVICE
//     naming the loop's source line (runtime/hidden_args.cpp). The flag is the bounds pass's
//     when it made one, else a new last hidden parameter (TileHiddenArgs). A constant step of 0
//     never gets here: the builder and the verifier reject it. Nor does num_programs, the step
//     of persistent_range: a launch that runs a program has at least one on every axis (and
//     a flag is read back after every launch, a synchronization each). A loop at the top of the
//     program body whose step is a scalar parameter needs no flag either: every program runs
//     it, so the runtime checks the argument on the host before the launch (nonzero_params).
#include <optional>
#include <unordered_set>

#include "ir/walk.h"

#include "passes/tile/tile_emit.h"
#include "support/error.h"

namespace metile {

namespace {

class LoopSteps {
 public:
  LoopSteps(Program& p, const TilePassContext& ctx) : p_(p), ctx_(ctx) {}

  void run() {
    walk(p_.body, [&](const Op& op) {
      if (op.kind == OpKind::CONST || op.kind == OpKind::NUM_PROGRAMS)
        for (ValueId r : op.results) constants_.insert(r);
    });
    block(p_.body, true);
  }

 private:
  bool needs_check(const Op& op) const {
    return op.kind == OpKind::FOR && !constants_.count(op.operands[2]) &&
           p_.type(op.operands[2]).is_scalar();
  }

  // The bounds pass's flag when it made one, else a new one; made once per program.
  ValueId flag() {
    if (flag_ == kNoValue) flag_ = hidden_error_flag(p_, ctx_.hidden, "loop_error");
    return flag_;
  }

  ValueId emit(std::vector<Op>& out, OpKind k, std::vector<ValueId> operands, Type t,
               const Loc& loc, std::vector<Attr> attrs = {}) {
    return append_op(p_, out, k, std::move(operands), t, loc, std::move(attrs));
  }

  // The index of the parameter `v` is, if it is one.
  std::optional<size_t> param_of(ValueId v) const {
    for (size_t i = 0; i < p_.params.size(); ++i)
      if (p_.params[i].value == v) return i;
    return std::nullopt;
  }

  void check_step(std::vector<Op>& out, const Op& loop, bool top) {
    const ValueId step = loop.operands[2];
    ctx_.hidden.sites.push_back(
        cat(p_.where(loop.loc), "for: the step is 0 at run time (the loop would never end)"));
    if (const auto param = param_of(step); top && param) {
      ctx_.hidden.nonzero_params.push_back({*param, ctx_.hidden.sites.size()});
      return;
    }
    const DType d = p_.type(step).dtype;
    const ValueId zero = emit(out, OpKind::CONST, {}, Type::scalar(d), loop.loc,
                              {Attr{"value", int64_t{0}}});
    const ValueId is_zero = emit(out, OpKind::EQ, {step, zero}, Type::scalar(DType::boolean),
                                 loop.loc);
    const ValueId site = emit(out, OpKind::CONST, {}, Type::scalar(DType::i32), loop.loc,
                              {Attr{"value", static_cast<int64_t>(ctx_.hidden.sites.size())}});
    Op st;
    st.kind = OpKind::STORE;
    st.operands = {flag(), site, is_zero};
    st.loc = loop.loc;
    out.push_back(std::move(st));
  }

  void block(Block& b, bool top) {
    std::vector<Op> out;
    out.reserve(b.ops.size());
    for (Op& op : b.ops) {
      for (Block& r : op.regions) block(r, false);
      if (needs_check(op)) check_step(out, op, top);
      out.push_back(std::move(op));
    }
    b.ops = std::move(out);
  }

  Program& p_;
  const TilePassContext& ctx_;
  std::unordered_set<ValueId> constants_;  // constants and num_programs: never a zero step here
  ValueId flag_ = kNoValue;
};

}  // namespace

void check_loop_steps(Program& program, const TilePassContext& ctx) {
  if (ctx.whole_tiles_in_order || ctx.device_checks_accesses) return;
  LoopSteps(program, ctx).run();
}

}  // namespace metile
