// The Tile IR verifier: structure (SSA, scoping, regions, terminators), parameters, the SIMT
// thread count, and every op's type rule (type_rules.cpp). Every message names the op and the
// user's source location.
#include <unordered_set>

#include "ir/tile_ir.h"
#include "support/error.h"
#include "support/text.h"

namespace metile {

namespace {

// The most ops one kernel may have: far beyond real kernels, and small enough that every backend
// compiles such a kernel in bounded time and memory.
constexpr size_t kMaxOps = size_t{1} << 20;

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

struct Verifier {
  const Program& p;
  int64_t threads;
  std::vector<bool> defined;  // by ValueId: defined and currently in scope
  std::vector<bool> ever;     // by ValueId: defined somewhere (SSA: at most once)
  std::unordered_set<ValueId> zeros;  // integer constants equal to 0
  size_t ops = 0;

  template <typename... Args>
  [[noreturn]] void bad(const Op& op, Args&&... parts) {
    fail(METILE_ERROR_INVALID_PROGRAM, "verify", p.where(op.loc), op_name(op.kind), ": ",
         std::forward<Args>(parts)...);
  }

  void define(ValueId v, const Op* op) {
    if (!p.valid(v)) {
      if (op) bad(*op, "defines an invalid value");
      fail(METILE_ERROR_INVALID_PROGRAM, "verify", "invalid parameter value");
    }
    if (ever[v]) {
      if (op) bad(*op, "redefines a value");
      fail(METILE_ERROR_INVALID_PROGRAM, "verify", "value defined twice");
    }
    const Type& t = p.type(v);
    if (t.dtype == DType::invalid) {
      if (op) bad(*op, "has a result without a type");
      fail(METILE_ERROR_INVALID_PROGRAM, "verify", "value without a type");
    }
    for (int i = 0; i < t.shape.rank; ++i)
      if (t.shape.dims[i] <= 0) {
        if (op) bad(*op, "has an invalid shape ", t.str());
        fail(METILE_ERROR_INVALID_PROGRAM, "verify", "invalid shape");
      }
    ever[v] = defined[v] = true;
  }

  void block(const Block& b, const Op* parent, int depth) {
    if (depth > kMaxRegionDepth) bad(*parent, "nests regions deeper than ", kMaxRegionDepth, " levels");
    std::vector<ValueId> scope(b.args.begin(), b.args.end());
    for (ValueId a : b.args) define(a, parent);
    for (size_t i = 0; i < b.ops.size(); ++i) {
      const Op& op = b.ops[i];
      if (++ops > kMaxOps) bad(op, "the kernel has more than ", kMaxOps, " ops");
      bool last = i + 1 == b.ops.size();
      one(op, parent, last, depth);
      for (ValueId r : op.results) {
        define(r, &op);
        scope.push_back(r);
      }
    }
    if (parent && ends_with_yield(parent->kind) &&
        (b.ops.empty() || b.ops.back().kind != OpKind::YIELD))
      bad(*parent, parent->kind == OpKind::FOR ? "body" : "each block", " must end with yield");
    // Values defined in a region do not escape it.
    if (parent)
      for (ValueId v : scope) defined[v] = false;
  }

  void one(const Op& op, const Op* parent, bool last, int depth) {
    for (ValueId v : op.operands)
      if (!p.valid(v) || !defined[v]) bad(op, "uses a value that is not defined before it here");
    const OpInfo& info = op_info(op.kind);
    if (op.kind == OpKind::YIELD) {
      if (!parent || !ends_with_yield(parent->kind) || !last)
        bad(op, "must be the last op of a for, if or while block");
    }
    if (op.kind == OpKind::YIELD && parent->kind == OpKind::FOR) {
      size_t n = parent->operands.size() - 3;
      if (op.operands.size() != n) bad(op, "yields ", op.operands.size(), " values, the loop carries ", n);
      for (size_t i = 0; i < n; ++i)
        if (p.type(op.operands[i]) != p.type(parent->operands[3 + i]))
          bad(op, "carried value ", i, " changes type from ", p.type(parent->operands[3 + i]).str(),
              " to ", p.type(op.operands[i]).str());
    }
    int64_t t = threads;
    TypeContext ctx{&p, &t, false};
    if (has_trait(op.kind, kSimt) && threads == 0)
      bad(op, "needs a thread count: set num_threads (the kernel has no unique arange size)");
    std::vector<Type> want = infer_result_types(op, ctx);
    if (info.num_results >= 0 && op.results.size() != static_cast<size_t>(info.num_results))
      bad(op, "must have ", info.num_results, " results, has ", op.results.size());
    if (want.size() != op.results.size())
      bad(op, "has ", op.results.size(), " results, expected ", want.size());
    for (size_t i = 0; i < want.size(); ++i)
      if (!p.valid(op.results[i]) || p.type(op.results[i]) != want[i])
        bad(op, "result ", i, " has type ",
            p.valid(op.results[i]) ? p.type(op.results[i]).str() : "<none>", ", expected ",
            want[i].str());
    if (op.kind == OpKind::CONST) {
      const int64_t* i = std::get_if<int64_t>(op.find_attr("value"));
      if (i && *i == 0) zeros.insert(op.results[0]);
    }
    bool region = has_trait(op.kind, kRegion);
    if (op.regions.size() != num_regions(op.kind))
      bad(op, !region ? "must not have a region"
                      : num_regions(op.kind) == 1 ? "needs exactly one region" : "needs exactly two regions");
    if (!region) return;
    if (op.kind == OpKind::IF || op.kind == OpKind::WHILE) return control(op, depth);
    const Block& body = op.body();
    if (op.kind == OpKind::FOR) {
      // A runtime step of 0 is each device's launch-time error; a constant one is caught here.
      if (zeros.count(op.operands[2])) bad(op, "step is 0 (the loop would never end)");
      size_t n = op.operands.size() - 3;
      if (body.args.size() != n + 1)
        bad(op, "body needs the induction variable and ", n, " carried values as arguments");
      if (p.valid(body.args[0]) && p.type(body.args[0]) != p.type(op.operands[0]))
        bad(op, "induction variable type differs from start");
      for (size_t i = 0; i < n; ++i)
        if (p.valid(body.args[i + 1]) && p.type(body.args[i + 1]) != p.type(op.operands[3 + i]))
          bad(op, "carried argument ", i, " type differs from its init");
    } else if (!body.args.empty()) {
      bad(op, "body takes no arguments");
    }
    this->block(body, &op, depth + 1);
  }

  static bool ends_with_yield(OpKind k) {
    return k == OpKind::FOR || k == OpKind::IF || k == OpKind::WHILE;
  }

  // The yield ending `b` gives values of `want` types (after a leading bool scalar condition
  // when `cond`); `what` names the block in the message.
  void yields(const Op& op, const Block& b, const std::vector<Type>& want, bool cond, const char* what) {
    const Op& y = b.ops.back();
    const size_t skip = cond ? 1 : 0;
    if (y.operands.size() != want.size() + skip)
      bad(op, what, " yields ", y.operands.size(), " values, expected ", want.size() + skip,
          cond ? " (the condition, then the values passed on)" : "");
    if (cond && p.type(y.operands[0]) != Type::scalar(DType::boolean))
      bad(op, "condition must be a bool scalar (uniform per program), got ", p.type(y.operands[0]).str());
    for (size_t i = 0; i < want.size(); ++i)
      if (p.type(y.operands[skip + i]) != want[i])
        bad(op, what, " value ", i, " has type ", p.type(y.operands[skip + i]).str(), ", expected ",
            want[i].str());
  }

  // if: two blocks without arguments yielding the results. while: a before block (args: the
  // carried types) yielding the condition and the passed values, and an after block (args: the
  // passed values) yielding the next carried values; every type is the inits' type.
  void control(const Op& op, int depth) {
    std::vector<Type> want;
    for (ValueId r : op.results) want.push_back(p.type(r));
    if (op.kind == OpKind::IF) {
      for (const Block& b : op.regions) {
        if (!b.args.empty()) bad(op, "blocks take no arguments");
        block(b, &op, depth + 1);
        yields(op, b, want, false, &b == &op.regions[0] ? "then block" : "else block");
      }
      return;
    }
    for (const Block& b : op.regions) {
      if (b.args.size() != want.size())
        bad(op, "each block needs ", want.size(), " arguments (the carried values)");
      for (size_t i = 0; i < want.size(); ++i)
        if (p.valid(b.args[i]) && p.type(b.args[i]) != want[i])
          bad(op, "block argument ", i, " has type ", p.type(b.args[i]).str(), ", expected ", want[i].str());
      block(b, &op, depth + 1);
    }
    yields(op, op.regions[0], want, true, "condition block");
    yields(op, op.regions[1], want, false, "body");
  }
};

}  // namespace

void verify(const Program& p) {
  // Strings that may reach generated source. The builder and the parser check them where they
  // enter; this covers programs made any other way.
  auto check_string = [](const std::string& s, const std::string& what, size_t max_bytes) {
    std::string why = text_problem(s, max_bytes);
    if (!why.empty())
      fail(METILE_ERROR_INVALID_PROGRAM, "verify", what, " \"", printable_ascii(s.substr(0, 80)),
           "\" ", why);
  };
  check_string(p.name, "kernel name", kMaxNameBytes);
  for (const std::string& f : p.files) check_string(f, "source file name", kMaxTextBytes);
  for (const auto& [k, v] : p.constexprs) {
    check_string(k, "constexpr name", kMaxNameBytes);
    check_string(v, "constexpr value", kMaxTextBytes);
  }
  for (const Param& prm : p.params) check_string(prm.name, "parameter name", kMaxNameBytes);
  walk(p.body, [&](const Op& op) {
    for (const Attr& a : op.attrs)
      if (const auto* sv = std::get_if<std::string>(&a.value))
        check_string(*sv, cat(op_name(op.kind), " attribute ", a.name), kMaxTextBytes);
  });
  if (!is_identifier(p.name))
    fail(METILE_ERROR_INVALID_PROGRAM, "verify", "kernel name \"", p.name,
         "\" is not an identifier");
  Verifier v{p, p.num_threads, std::vector<bool>(p.values.size()),
             std::vector<bool>(p.values.size()), {}};
  if (p.num_threads < 0 || p.num_threads > 4096)
    fail(METILE_ERROR_INVALID_PROGRAM, "verify", "num_threads ", p.num_threads,
         " is out of range [1, 4096]");
  std::unordered_set<std::string> names;
  for (const Param& prm : p.params) {
    if (!is_identifier(prm.name))
      fail(METILE_ERROR_INVALID_PROGRAM, "verify", "parameter name \"", prm.name,
           "\" is not an identifier");
    if (!names.insert(prm.name).second)
      fail(METILE_ERROR_INVALID_PROGRAM, "verify", "parameter ", prm.name, " is declared twice");
    if (!p.valid(prm.value))
      fail(METILE_ERROR_INVALID_PROGRAM, "verify", "parameter ", prm.name, " has no value");
    const Type& t = p.type(prm.value);
    if (t.is_tile() || (t.is_ptr && t.space != AddrSpace::device))
      fail(METILE_ERROR_INVALID_PROGRAM, "verify", "parameter ", prm.name,
           " must be a scalar or a device pointer, got ", t.str());
    if (!t.is_ptr && is_f8(t.dtype))
      fail(METILE_ERROR_INVALID_PROGRAM, "verify", "parameter ", prm.name, " is an ", dtype_name(t.dtype),
           " scalar: FP8 parameters must be pointers (pass an f32 scalar and cast it)");
    v.define(prm.value, nullptr);
  }
  v.block(p.body, nullptr, 0);
}

}  // namespace metile
