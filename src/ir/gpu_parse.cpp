// Parser for the GPU IR text that gpu_print.cpp writes (one op per line):
//
//   gpu_kernel @NAME(%p: TYPE, ...) threads=N simd=W {
//     #2 = tile<NUMEL> thr=LAYOUT reg=LAYOUT [padded]         layouts, numbered from 2
//     [%r: TYPE, ... =] OP[.SUFFIX] [#L] [%a, ...] [key=VALUE ...]
//     for %iv: TYPE = %s to %e step %st [iter(%c: TYPE = %init, ...) -> (%r, ...)] {
//       ...
//       yield %next, ...
//     }
//     [%r: TYPE, ... =] if %cond {  ...  yield %a, ...  } else {  ...  yield %b, ...  }
//     [%r: TYPE, ... =] while [iter(%c: TYPE = %init, ...)] {  ...  yield %cond, %pass, ...
//     } do (%a: TYPE, ...) {  ...  yield %next, ...  }
//   }
// (each `{` ends its line and each `}` starts one, as for `for`)
//
// TYPE is DTYPE, ptr<DTYPE> or ptr<DTYPE, threadgroup>, then ` thread` or ` xREGS #LAYOUT` for
// non-uniform values. OP is a name from gpu_ops.def, or a Tile IR op name from ops.def for
// element-wise ops and atomics; builtins read `builtin NAME.AXIS`, reductions `simd_reduce.sum`,
// coord/valid name their layout. Names are unique in a function and scoped like the IR: a loop
// body's names are not visible after the loop.
//
// The text may come from anyone (a file a user edits, a fuzzer), so every size is bounded
// before it is used: threads, layout sizes and the pairs a layout enumerates, tuple nesting and
// loop nesting. Then the function is verified, and a verifier complaint is reported at the line
// of the op it is about.
#include "ir/gpu_parse.h"

#include <charconv>
#include <unordered_map>
#include <unordered_set>

#include "support/error.h"
#include "support/text.h"

namespace metile::gpu {

namespace {

constexpr GpuOpKind kKinds[] = {
#define GPU_OP(E, name, traits) GpuOpKind::E,
#include "ir/gpu_ops.def"
};

// A lowering never makes more threads (every target allows at most 1024) or more (thread,
// register) pairs per layout (1024 registers of 1024 threads); these bounds only keep hostile
// text from making add_layout enumerate billions of pairs.
constexpr int64_t kMaxThreads = 4096;
constexpr int64_t kMaxLayoutPairs = int64_t{1} << 21;
constexpr int64_t kMaxCosize = int64_t{1} << 40;
constexpr int kMaxTupleDepth = 16;
constexpr size_t kMaxLayoutLeaves = 64;
constexpr int kMaxLoopDepth = 64;

struct Pos {
  int line = 1;
  int col = 1;
};

struct Named {
  std::string name;
  Value value;
  Pos pos;
};

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  Function run() {
    header();
    layouts();
    block(f_.body, 0, nullptr);
    skip_empty_lines();
    if (pos_ < src_.size()) expected("the end of the text after the function's '}'");
    check();
    return std::move(f_);
  }

 private:
  // ---- errors and positions ----------------------------------------------------------------

  Pos here() const { return {line_, static_cast<int>(pos_ - line_start_) + 1}; }

  template <typename... Args>
  [[noreturn]] void bad_at(Pos p, Args&&... parts) const {
    fail(METILE_ERROR_INVALID_PROGRAM, "gpu-parse", "line ", p.line, ":", p.col, ": ",
         std::forward<Args>(parts)...);
  }
  std::string found() const {
    if (pos_ >= src_.size()) return "the end of the text";
    if (src_[pos_] == '\n') return "the end of the line";
    size_t end = std::min(src_.find('\n', pos_), pos_ + 24);
    return "'" + printable_ascii(src_.substr(pos_, end - pos_)) + "'";
  }
  [[noreturn]] void expected(std::string_view what) {
    blanks();
    bad_at(here(), "expected ", what, ", found ", found());
  }

  // ---- characters ---------------------------------------------------------------------------

  char peek_char() const { return pos_ < src_.size() ? src_[pos_] : '\0'; }
  void blanks() {
    while (pos_ < src_.size() && (src_[pos_] == ' ' || src_[pos_] == '\t' || src_[pos_] == '\r'))
      ++pos_;
  }
  bool at_line_end() {
    blanks();
    return pos_ >= src_.size() || src_[pos_] == '\n' || src_.substr(pos_, 2) == "//";
  }
  void newline() {
    ++pos_;
    ++line_;
    line_start_ = pos_;
  }
  void end_line() {
    if (!at_line_end()) expected("the end of the line");
    while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;  // a `//` comment
    if (pos_ < src_.size()) newline();
  }
  void skip_empty_lines() {
    while (at_line_end() && pos_ < src_.size()) end_line();
  }
  bool accept(std::string_view s) {
    blanks();
    if (src_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }
  void expect(std::string_view s) {
    if (!accept(s)) expected(cat("'", s, "'"));
  }
  bool accept_word(std::string_view w) {
    blanks();
    if (src_.substr(pos_, w.size()) != w || ident_char(pos_ + w.size() < src_.size() ? src_[pos_ + w.size()] : ' '))
      return false;
    pos_ += w.size();
    return true;
  }
  void expect_word(std::string_view w) {
    if (!accept_word(w)) expected(cat("'", w, "'"));
  }
  std::string word(std::string_view what) {
    blanks();
    size_t b = pos_;
    while (pos_ < src_.size() && ident_char(src_[pos_])) ++pos_;
    if (b == pos_) expected(what);
    if (pos_ - b > kMaxNameBytes) bad_at(here(), "a name longer than ", kMaxNameBytes, " bytes");
    return std::string(src_.substr(b, pos_ - b));
  }
  int64_t integer(std::string_view what) {
    blanks();
    Pos p = here();
    size_t b = pos_;
    if (peek_char() == '-') ++pos_;
    while (std::isdigit(static_cast<unsigned char>(peek_char()))) ++pos_;
    std::string_view t = src_.substr(b, pos_ - b);
    int64_t v = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec == std::errc::result_out_of_range) bad_at(p, "integer ", t, " does not fit 64 bits");
    if (ec != std::errc() || end != t.data() + t.size()) {
      pos_ = b;
      expected(what);
    }
    return v;
  }
  int64_t bounded(std::string_view what, int64_t lo, int64_t hi) {
    blanks();
    Pos p = here();
    int64_t v = integer(what);
    if (v < lo || v > hi) bad_at(p, what, " ", v, " is outside [", lo, ", ", hi, "]");
    return v;
  }

  // ---- values and types ---------------------------------------------------------------------

  std::string value_name() {
    blanks();
    if (peek_char() != '%') expected("a value name (%name)");
    ++pos_;
    if (!ident_char(peek_char())) expected("a value name after '%'");
    return word("a value name");
  }
  ValueId define(const Named& n) {
    if (!defined_.insert(n.name).second) bad_at(n.pos, "%", n.name, " is defined twice");
    Value v = n.value;
    v.stem = n.name;
    ValueId id = f_.new_value(std::move(v));
    scope_[n.name] = id;
    scopes_.back().push_back(n.name);
    return id;
  }
  ValueId use() {
    blanks();
    Pos p = here();
    std::string name = value_name();
    auto it = scope_.find(name);
    if (it == scope_.end())
      bad_at(p, "%", name, defined_.count(name) ? " is not visible here (it is defined in a loop body or an if or while block)"
                                                : " is not defined before this use");
    return it->second;
  }
  void open_scope() { scopes_.emplace_back(); }
  void close_scope() {
    for (const std::string& n : scopes_.back()) scope_.erase(n);
    scopes_.pop_back();
  }
  Named typed_name() {
    blanks();
    Named n;
    n.pos = here();
    n.name = value_name();
    expect(":");
    n.value = type();
    return n;
  }
  // `(%a: T = %init, ...)` after a loop's `iter`: the carried args, their inits as operands.
  void iter_args(Op& op, std::vector<Named>& args) {
    expect("(");
    do {
      args.push_back(typed_name());
      expect("=");
      op.operands.push_back(use());
    } while (accept(","));
    expect(")");
  }
  DType dtype() {
    blanks();
    Pos p = here();
    std::string w = word("an element type (f32, i32, bool, ...)");
    std::optional<DType> d = parse_dtype(w);
    if (!d || *d == DType::invalid) bad_at(p, "unknown element type '", w, "'");
    return *d;
  }
  LayoutId layout_ref() {
    blanks();
    Pos p = here();
    expect("#");
    int64_t l = integer("a layout number");
    if (l < 2 || l >= static_cast<int64_t>(f_.layouts.size()))
      bad_at(p, "layout #", l, " is not declared (declared: #2 to #", f_.layouts.size() - 1, ")");
    return static_cast<LayoutId>(l);
  }
  Value type() {
    Value v;
    if (accept_word("ptr")) {
      v.is_ptr = true;
      expect("<");
      v.dtype = dtype();
      if (accept(",")) {
        expect_word("threadgroup");
        v.space = AddrSpace::threadgroup;
      }
      expect(">");
    } else {
      v.dtype = dtype();
    }
    blanks();
    if (accept_word("thread")) {
      v.layout = kThread;
    } else if (peek_char() == 'x' && pos_ + 1 < src_.size() &&
               std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      ++pos_;
      Pos p = here();
      int64_t regs = integer("a register count");
      v.layout = layout_ref();
      if (f_.layout(v.layout).regs() != regs)
        bad_at(p, "layout #", v.layout, " has ", f_.layout(v.layout).regs(), " registers, not ", regs);
    }
    return v;
  }

  // ---- the function header and its layouts -------------------------------------------------

  void header() {
    skip_empty_lines();
    header_pos_ = here();
    expect_word("gpu_kernel");
    expect("@");
    f_.name = word("the function's name");
    expect("(");
    open_scope();  // the parameters: visible everywhere
    if (!accept(")")) {
      do {
        Named n = typed_name();
        f_.params.push_back({n.name, define(n)});
      } while (accept(","));
      expect(")");
    }
    expect_word("threads");
    expect("=");
    f_.threads = static_cast<int>(bounded("threads", 1, kMaxThreads));
    expect_word("simd");
    expect("=");
    f_.simd_width = static_cast<int>(bounded("simd", 1, kMaxThreads));
    if (accept_word("maxnreg")) {
      expect("=");
      f_.max_registers = static_cast<int>(bounded("maxnreg", kMinMaxRegisters, kMaxMaxRegisters));
    }
    expect("{");
    end_line();
  }

  metile::Layout cute_layout(std::string_view what) {
    blanks();
    Pos p = here();
    size_t b = pos_;
    int depth = 0;
    while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) ||
                                  std::string_view("(),:").find(src_[pos_]) != std::string_view::npos)) {
      depth += src_[pos_] == '(' ? 1 : src_[pos_] == ')' ? -1 : 0;
      if (depth > kMaxTupleDepth) bad_at(here(), "tuples nest deeper than ", kMaxTupleDepth, " levels");
      ++pos_;
    }
    std::string_view text = src_.substr(b, pos_ - b);
    if (text.empty()) expected(cat("a layout (shape:stride) after '", what, "='"));
    metile::Layout l;
    try {
      l = parse_layout(text);
    } catch (const Error& e) {
      bad_at(p, "bad layout ", what, "=", text, ": ", e.what());
    }
    std::vector<int64_t> shape = l.shape().leaves(), stride = l.stride().leaves();
    if (shape.size() > kMaxLayoutLeaves) bad_at(p, "layout ", what, " has more than ", kMaxLayoutLeaves, " modes");
    int64_t cosize = 1;  // computed here with overflow checks: Layout::cosize assumes sane strides
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t term = 0;
      if (__builtin_mul_overflow(shape[i] - 1, stride[i], &term) ||
          __builtin_add_overflow(cosize, term, &cosize) || cosize > kMaxCosize)
        bad_at(p, "layout ", what, "=", text, " reaches offsets past 2^40");
    }
    return l;
  }

  void layouts() {
    for (skip_empty_lines(); (blanks(), peek_char() == '#'); skip_empty_lines()) {
      Pos p = here();
      ++pos_;
      int64_t id = integer("a layout number");
      if (id != static_cast<int64_t>(f_.layouts.size()))
        bad_at(p, "expected layout #", f_.layouts.size(), " next (layouts are numbered in order from #2)");
      expect("=");
      expect_word("tile");
      expect("<");
      int64_t numel = bounded("the element count", 1, kMaxTileElements);
      expect(">");
      expect_word("thr");
      expect("=");
      metile::Layout thr = cute_layout("thr");
      expect_word("reg");
      expect("=");
      metile::Layout reg = cute_layout("reg");
      bool padded = accept_word("padded");
      end_line();
      if (thr.size() != f_.threads)
        bad_at(p, "layout #", id, " covers ", thr.size(), " threads; the function has ", f_.threads);
      if (reg.size() > kMaxLayoutPairs / f_.threads)
        bad_at(p, "layout #", id, " has ", reg.size(), " registers of ", f_.threads,
               " threads, more than ", kMaxLayoutPairs, " pairs");
      Layout l = tile_layout(numel, thr, reg);
      for (LayoutId k = 2; k < f_.layouts.size(); ++k)
        if (f_.layout(k) == l) bad_at(p, "layout #", id, " is the same as #", k);
      LayoutId got = f_.add_layout(l);
      if (f_.layout(got).padded != padded)
        bad_at(p, "layout #", id, padded ? " is marked padded but every pair holds an element"
                                         : " has pairs past its elements but is not marked padded");
    }
  }

  // ---- ops --------------------------------------------------------------------------------

  // Parses ops up to the '}' that closes the block. `carried` is the loop's carried values (for
  // the yield), or null outside loops.
  void block(Block& b, int depth, const std::vector<ValueId>* carried) {
    for (;;) {
      skip_empty_lines();
      if (pos_ >= src_.size()) expected("an op or '}'");
      if (accept("}")) {
        end_line();
        return;
      }
      Pos p = here();
      op_pos_.push_back(p);  // pre-order, as walk() visits the ops
      if (accept_word("for")) loop(b, p, depth);
      else plain(b, p, carried, depth);
    }
  }

  GpuOpKind op_kind(const std::string& name, Pos p, Op& op) {
    for (GpuOpKind k : kKinds) {
      // Element-wise ops and atomics print their Tile IR op; loops have their own syntax.
      if (k == GpuOpKind::ELEMENTWISE || k == GpuOpKind::ATOMIC || k == GpuOpKind::FOR ||
          k == GpuOpKind::IF || k == GpuOpKind::WHILE || k == GpuOpKind::WARP_SPECIALIZE)
        continue;
      if (gpu_op_name(k) == name) return k;
    }
    if (name == "for") bad_at(p, "a loop starts its line ('for %iv: ... {'), it has no results");
    if (std::optional<OpKind> t = parse_op_name(name)) {
      op.tile_op = *t;
      if (is_elementwise(*t) || *t == OpKind::SELECT || *t == OpKind::PTR_OFFSET)
        return GpuOpKind::ELEMENTWISE;
      if (has_trait(*t, kAtomic)) return GpuOpKind::ATOMIC;
      bad_at(p, "'", name, "' is a Tile IR op with no GPU IR form (only element-wise ops and atomics have one)");
    }
    bad_at(p, "unknown op '", name, "'");
  }

  void suffix(Op& op, const std::vector<Named>& results) {
    switch (op.kind) {
      case GpuOpKind::BUILTIN: {
        blanks();
        Pos p = here();
        std::string name = word("a builtin (thread_index, simd_lane, ...)");
        bool found_it = false;
        for (int i = 0; i < kBuiltinCount && !found_it; ++i)
          if (builtin_name(static_cast<Builtin>(i)) == name) {
            op.builtin = static_cast<Builtin>(i);
            found_it = true;
          }
        if (!found_it) bad_at(p, "unknown builtin '", name, "'");
        if (!accept(".")) expected("'.' and an axis (x, y or z)");
        static constexpr std::string_view kAxes[] = {"x", "y", "z"};
        blanks();
        Pos ap = here();
        std::string axis = word("an axis (x, y or z)");
        for (int64_t a = 0; a < 3; ++a)
          if (axis == kAxes[a]) op.attrs = {{"axis", a}};
        if (op.attrs.empty()) bad_at(ap, "unknown axis '", axis, "' (x, y or z)");
        return;
      }
      case GpuOpKind::SIMD_REDUCE:
      case GpuOpKind::REG_REDUCE: {
        if (!accept(".")) expected("'.' and a reduction (sum, max or min)");
        Pos p = here();
        std::string r = word("a reduction (sum, max or min)");
        for (Reduction x : {Reduction::sum, Reduction::max, Reduction::min})
          if (reduction_name(x) == r) {
            op.reduce = x;
            return;
          }
        bad_at(p, "unknown reduction '", r, "' (sum, max or min)");
      }
      case GpuOpKind::COORD:
      case GpuOpKind::VALID: {
        blanks();
        Pos p = here();
        LayoutId l = layout_ref();
        if (results.size() == 1 && results[0].value.layout != l)
          bad_at(p, gpu_op_name(op.kind), " #", l, " must produce a value of layout #", l);
        return;
      }
      default:
        return;
    }
  }

  AttrValue attr_value() {
    blanks();
    Pos p = here();
    if (peek_char() == '"') {
      ++pos_;
      std::string s;
      while (pos_ < src_.size() && src_[pos_] != '"' && src_[pos_] != '\n') {
        char c = src_[pos_++];
        if (c == '\\' && pos_ < src_.size() && src_[pos_] != '\n') {
          c = src_[pos_++];
          if (c == 'n') c = '\n';
          else if (c != '\\' && c != '"') bad_at(p, "unknown escape '\\", printable_ascii(std::string(1, c)), "' in a string");
        }
        s += c;
      }
      if (peek_char() != '"') bad_at(p, "unterminated string");
      ++pos_;
      // Strings (device_print text) may reach generated source.
      std::string why = text_problem(s);
      if (!why.empty()) bad_at(p, "the string \"", printable_ascii(s.substr(0, 80)), "\" ", why);
      return s;
    }
    size_t b = pos_;
    while (pos_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos_])) ||
                                  std::string_view("+-.").find(src_[pos_]) != std::string_view::npos))
      ++pos_;
    std::string_view t = src_.substr(b, pos_ - b);
    if (t.empty()) expected("an attribute value (a number or a \"string\")");
    if (t == "inf") return 1.0 / 0.0;
    if (t == "-inf") return -1.0 / 0.0;
    if (t == "nan") return 0.0 / 0.0;
    if (t.find_first_of(".eE") != std::string_view::npos) {
      double d = 0;
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
      if (ec != std::errc() || end != t.data() + t.size()) bad_at(p, "bad number '", printable_ascii(t), "'");
      return d;
    }
    int64_t i = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), i);
    if (ec == std::errc::result_out_of_range) bad_at(p, "integer ", t, " does not fit 64 bits");
    if (ec != std::errc() || end != t.data() + t.size()) bad_at(p, "bad number '", printable_ascii(t), "'");
    return i;
  }

  void plain(Block& b, Pos p, const std::vector<ValueId>* carried, int depth) {
    std::vector<Named> results;
    blanks();
    if (peek_char() == '%') {
      do results.push_back(typed_name());
      while (accept(","));
      expect("=");
    }
    blanks();
    Pos np = here();
    Op op;
    std::string name = word("an op name");
    if (name == "if" || name == "while") {
      control(b, p, name == "if", results, depth);
      return;
    }
    if (name == "warp_specialize") {
      if (!results.empty()) bad_at(np, "warp_specialize has no results");
      specialize(b, p, depth);
      return;
    }
    op.kind = op_kind(name, np, op);
    suffix(op, results);
    blanks();
    if (peek_char() == '%') {
      do op.operands.push_back(use());
      while (accept(","));
    }
    while (!at_line_end()) attribute(op, "the end of the line");
    end_line();
    if (op.kind == GpuOpKind::BUILTIN && (op.attrs.size() != 1 || !op.operands.empty()))
      bad_at(np, "a builtin takes no operands or attributes besides its axis");
    if (op.kind == GpuOpKind::YIELD && carried != nullptr && op.operands.size() != carried->size())
      bad_at(p, "yield passes ", op.operands.size(), " values; the loop carries ", carried->size());
    for (const Named& r : results) op.results.push_back(define(r));
    b.ops.push_back(std::move(op));
  }

  void loop(Block& b, Pos p, int depth) {
    if (depth >= kMaxLoopDepth) bad_at(p, "loops nest deeper than ", kMaxLoopDepth, " levels");
    Op op;
    op.kind = GpuOpKind::FOR;
    Named iv = typed_name();
    expect("=");
    op.operands.push_back(use());
    expect_word("to");
    op.operands.push_back(use());
    expect_word("step");
    op.operands.push_back(use());
    std::vector<Named> args, results;
    if (accept_word("iter")) {
      iter_args(op, args);
      expect("->");
      expect("(");
      do {
        blanks();
        Named r;
        r.pos = here();
        r.name = value_name();
        results.push_back(std::move(r));
      } while (accept(","));
      expect(")");
      if (results.size() != args.size())
        bad_at(p, "the loop carries ", args.size(), " values but names ", results.size(), " results");
      for (size_t i = 0; i < args.size(); ++i) results[i].value = args[i].value;
    }
    expect("{");
    end_line();
    Block body;
    open_scope();
    body.args.push_back(define(iv));
    for (const Named& a : args) body.args.push_back(define(a));
    std::vector<ValueId> carried(body.args.begin() + 1, body.args.end());
    block(body, depth + 1, &carried);
    close_scope();
    op.regions.push_back(std::move(body));
    for (const Named& r : results) op.results.push_back(define(r));
    b.ops.push_back(std::move(op));
  }

  // One block of an if or while, from after its `{` through its `}` (which ends the line only
  // when `last`).
  Block scoped_block(std::vector<Named> args, int depth, bool last) {
    Block body;
    open_scope();
    for (const Named& a : args) body.args.push_back(define(a));
    if (last) {
      block(body, depth + 1, nullptr);
    } else {
      // The block ends at a line that starts with `}` and goes on (`} else {`, `} do (...) {`).
      for (;;) {
        skip_empty_lines();
        if (pos_ >= src_.size()) expected("an op or '}'");
        if (accept("}")) break;
        Pos q = here();
        op_pos_.push_back(q);
        if (accept_word("for")) loop(body, q, depth + 1);
        else plain(body, q, nullptr, depth + 1);
      }
    }
    close_scope();
    return body;
  }

  // `if %cond {` ... `} else {` ... `}`, or `while [iter(...)] {` ... `} do (...) {` ... `}`:
  // the results were read before the op's name.
  void control(Block& b, Pos p, bool is_if, const std::vector<Named>& results, int depth) {
    if (depth >= kMaxLoopDepth) bad_at(p, "regions nest deeper than ", kMaxLoopDepth, " levels");
    Op op;
    op.kind = is_if ? GpuOpKind::IF : GpuOpKind::WHILE;
    std::vector<Named> args;
    if (is_if) {
      op.operands.push_back(use());
    } else if (accept_word("iter")) {
      iter_args(op, args);
    }
    expect("{");
    end_line();
    op.regions.push_back(scoped_block(args, depth, false));
    std::vector<Named> passed;
    if (is_if) {
      expect_word("else");
    } else {
      expect_word("do");
      expect("(");
      blanks();
      if (peek_char() == '%') {
        do passed.push_back(typed_name());
        while (accept(","));
      }
      expect(")");
    }
    expect("{");
    end_line();
    op.regions.push_back(scoped_block(passed, depth, true));
    for (const Named& r : results) op.results.push_back(define(r));
    b.ops.push_back(std::move(op));
  }

  // One `name=value` of op's attributes; `or_else` names what else may stand there.
  void attribute(Op& op, std::string_view or_else) {
    Pos ap = here();
    std::string key = word(cat("an attribute (name=value) or ", or_else));
    if (!accept("=")) expected(cat("'=' after attribute ", key));
    if (op.find_attr(key) != nullptr) bad_at(ap, "attribute ", key, " is given twice");
    op.attrs.push_back({key, attr_value()});
  }

  // `warp_specialize producers=N {` ... `} consumers {` ... `}`.
  void specialize(Block& b, Pos p, int depth) {
    if (depth >= kMaxLoopDepth) bad_at(p, "regions nest deeper than ", kMaxLoopDepth, " levels");
    Op op;
    op.kind = GpuOpKind::WARP_SPECIALIZE;
    blanks();
    while (peek_char() != '{') {
      attribute(op, "'{'");
      blanks();
    }
    expect("{");
    end_line();
    op.regions.push_back(scoped_block({}, depth, false));
    expect_word("consumers");
    expect("{");
    end_line();
    op.regions.push_back(scoped_block({}, depth, true));
    b.ops.push_back(std::move(op));
  }

  // ---- verification -------------------------------------------------------------------------

  void check() {
    const Op* failed = nullptr;
    try {
      verify(f_, &failed);
    } catch (const Error& e) {
      Pos at = header_pos_;
      size_t i = 0;
      walk(f_.body, [&](const Op& op) {
        if (&op == failed) at = op_pos_.at(i);
        ++i;
      });
      bad_at(at, "the function does not verify: ", e.what());
    }
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
  Pos header_pos_;
  Function f_;
  std::unordered_map<std::string, ValueId> scope_;  // the names visible here
  std::vector<std::vector<std::string>> scopes_;    // names each open block defined
  std::unordered_set<std::string> defined_;          // every name so far: unique in a function
  std::vector<Pos> op_pos_;                          // where each op starts, in walk() order
};

}  // namespace

Function parse(std::string_view text) { return Parser(text).run(); }

}  // namespace metile::gpu
