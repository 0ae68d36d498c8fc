// IntTuple and Layout basics: construction checks, coordinates, printing and parsing. The algebra
// lives in layout_algebra.cpp, swizzles and fragment atoms in layout_atoms.cpp.
#include "ir/layout.h"

#include <algorithm>
#include <cctype>
#include <ostream>

#include "support/error.h"

namespace metile {

namespace detail {

int64_t checked_mul(int64_t a, int64_t b, const char* op) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", op, ": ", a, " * ", b, " overflows int64");
  return r;
}

std::vector<Mode> flat_modes(const Layout& l) {
  std::vector<int64_t> s = l.shape().leaves(), d = l.stride().leaves();
  std::vector<Mode> out;
  for (size_t i = 0; i < s.size(); ++i) out.push_back({s[i], d[i]});
  return out;
}

Layout layout_of_modes(const std::vector<Mode>& modes) {
  if (modes.empty()) return Layout();
  if (modes.size() == 1) return Layout(modes[0].shape, modes[0].stride);
  std::vector<IntTuple> s, d;
  for (const Mode& m : modes) {
    s.emplace_back(m.shape);
    d.emplace_back(m.stride);
  }
  return Layout(IntTuple(std::move(s)), IntTuple(std::move(d)));
}

}  // namespace detail

using detail::checked_mul;

// ---- IntTuple ------------------------------------------------------------------------------

IntTuple::IntTuple(std::vector<IntTuple> elems) : elems_(std::move(elems)) {
  if (elems_.empty()) fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "IntTuple: empty tuple");
}

int64_t IntTuple::value() const {
  if (!is_int()) fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "IntTuple::value: ", str(), " is a tuple");
  return value_;
}

int IntTuple::depth() const {
  if (is_int()) return 0;
  int d = 0;
  for (const IntTuple& e : elems_) d = std::max(d, e.depth());
  return d + 1;
}

int64_t IntTuple::size() const {
  if (is_int()) return value_;
  int64_t p = 1;
  for (const IntTuple& e : elems_) p = checked_mul(p, e.size(), "size");
  return p;
}

const IntTuple& IntTuple::operator[](int i) const {
  if (i < 0 || i >= rank())
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "IntTuple: index ", i, " out of range for ", str());
  return is_int() ? *this : elems_[i];
}

std::vector<int64_t> IntTuple::leaves() const {
  if (is_int()) return {value_};
  std::vector<int64_t> out;
  for (const IntTuple& e : elems_) {
    std::vector<int64_t> sub = e.leaves();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::string IntTuple::str() const {
  if (is_int()) return std::to_string(value_);
  std::string s = "(";
  for (size_t i = 0; i < elems_.size(); ++i) s += (i ? "," : "") + elems_[i].str();
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const IntTuple& t) { return os << t.str(); }

namespace {

class LayoutParser {
 public:
  explicit LayoutParser(std::string_view text) : text_(text) {}

  IntTuple tuple() {
    skip_space();
    if (peek() == '(') {
      ++pos_;
      std::vector<IntTuple> elems{tuple()};
      for (skip_space(); peek() == ','; skip_space()) {
        ++pos_;
        elems.push_back(tuple());
      }
      expect(')');
      return IntTuple(std::move(elems));
    }
    if (!std::isdigit(static_cast<unsigned char>(peek()))) error("expected an integer or '('");
    int64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, peek() - '0', &v))
        error("integer overflows int64");
      ++pos_;
    }
    return IntTuple(v);
  }

  bool accept(char c) {
    skip_space();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }

  void expect_end() {
    skip_space();
    if (pos_ != text_.size()) error("unexpected trailing text");
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (std::isspace(static_cast<unsigned char>(peek()))) ++pos_;
  }
  void expect(char c) {
    if (!accept(c)) error(std::string("expected '") + c + "'");
  }
  [[noreturn]] void error(const std::string& what) const {
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "parse: ", what, " at position ", pos_, " in '",
         text_, "'");
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// Offset of crd under shape:stride. An integer on a tuple mode is split colexicographically; when
// `extend` is set the last mode takes whatever is left, otherwise each integer must fit its mode.
int64_t offset_of(const IntTuple& crd, const IntTuple& shape, const IntTuple& stride, bool extend,
                  const IntTuple& top_crd, const IntTuple& top_shape) {
  if (crd.is_int()) {
    int64_t c = crd.value();
    if (c < 0 || (!extend && c >= shape.size()))
      fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "crd2idx: coordinate ", top_crd,
           " is outside shape ", top_shape);
    if (shape.is_int()) return checked_mul(c, stride.value(), "crd2idx");
    int64_t off = 0;
    for (int i = 0; i < shape.rank(); ++i) {
      bool last = i + 1 == shape.rank();
      int64_t n = shape[i].size();
      int64_t ci = last ? c : c % n;
      off += offset_of(IntTuple(ci), shape[i], stride[i], extend && last, top_crd, top_shape);
      c /= n;
    }
    return off;
  }
  if (shape.is_int() || crd.rank() != shape.rank())
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "crd2idx: coordinate ", top_crd,
         " does not match shape ", top_shape);
  int64_t off = 0;
  for (int i = 0; i < shape.rank(); ++i)
    off += offset_of(crd[i], shape[i], stride[i], false, top_crd, top_shape);
  return off;
}

void check_layout(const IntTuple& shape, const IntTuple& stride) {
  if (!congruent(shape, stride))
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "make_layout: shape ", shape, " and stride ",
         stride, " are not congruent");
  for (int64_t s : shape.leaves())
    if (s < 1)
      fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "make_layout: shape ", shape,
           " has a non-positive extent ", s);
  for (int64_t d : stride.leaves())
    if (d < 0)
      fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "make_layout: stride ", stride,
           " has a negative entry ", d);
  (void)shape.size();  // rejects shapes whose size overflows
}

}  // namespace

IntTuple parse_int_tuple(std::string_view text) {
  LayoutParser p(text);
  IntTuple t = p.tuple();
  p.expect_end();
  return t;
}

IntTuple flatten(const IntTuple& t) {
  if (t.is_int()) return t;
  std::vector<IntTuple> out;
  for (int64_t v : t.leaves()) out.emplace_back(v);
  return IntTuple(std::move(out));
}

bool congruent(const IntTuple& a, const IntTuple& b) {
  if (a.is_int() || b.is_int()) return a.is_int() == b.is_int();
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i)
    if (!congruent(a[i], b[i])) return false;
  return true;
}

bool compatible(const IntTuple& a, const IntTuple& b) {
  if (a.is_int()) return a.value() == b.size();
  if (b.is_int() || a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i)
    if (!compatible(a[i], b[i])) return false;
  return true;
}

namespace {

IntTuple compact_strides(const IntTuple& shape, int64_t& current, bool row_major) {
  if (shape.is_int()) {
    IntTuple d(current);
    current = checked_mul(current, shape.value(), "compact strides");
    return d;
  }
  std::vector<IntTuple> out(shape.rank());
  for (int k = 0; k < shape.rank(); ++k) {
    int i = row_major ? shape.rank() - 1 - k : k;
    out[i] = compact_strides(shape[i], current, row_major);
  }
  return IntTuple(std::move(out));
}

}  // namespace

IntTuple compact_col_major(const IntTuple& shape, int64_t start) {
  return compact_strides(shape, start, false);
}

IntTuple compact_row_major(const IntTuple& shape, int64_t start) {
  return compact_strides(shape, start, true);
}

IntTuple shape_div(const IntTuple& a, const IntTuple& b) {
  if (!b.is_int()) {
    if (a.is_int()) return shape_div(a, IntTuple(b.size()));
    if (a.rank() != b.rank())
      fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "shape_div: ranks of ", a, " and ", b,
           " differ");
    std::vector<IntTuple> out;
    for (int i = 0; i < a.rank(); ++i) out.push_back(shape_div(a[i], b[i]));
    return IntTuple(std::move(out));
  }
  int64_t d = b.value();
  if (a.is_int()) {
    int64_t n = a.value();
    if (n < 1 || d < 1 || (n % d != 0 && d % n != 0))
      fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "shape_div: neither of ", n, " and ", d,
           " divides the other");
    return IntTuple(n % d == 0 ? n / d : 1);
  }
  std::vector<IntTuple> out;
  for (const IntTuple& e : a.elems()) {
    out.push_back(shape_div(e, IntTuple(d)));
    int64_t n = e.size();
    d = d % n == 0 ? d / n : 1;
  }
  return IntTuple(std::move(out));
}

IntTuple idx2crd(int64_t idx, const IntTuple& shape) {
  if (idx < 0)
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "idx2crd: negative index ", idx);
  if (shape.is_int()) return IntTuple(idx);
  std::vector<IntTuple> out;
  for (int i = 0; i < shape.rank(); ++i) {
    int64_t n = shape[i].size();
    bool last = i + 1 == shape.rank();
    out.push_back(idx2crd(last ? idx : idx % n, shape[i]));
    idx /= n;
  }
  return IntTuple(std::move(out));
}

int64_t crd2idx(const IntTuple& crd, const IntTuple& shape) {
  return crd2idx(crd, shape, compact_col_major(shape));
}

int64_t crd2idx(const IntTuple& crd, const IntTuple& shape, const IntTuple& stride) {
  if (!congruent(shape, stride))
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "crd2idx: shape ", shape, " and stride ", stride,
         " are not congruent");
  return offset_of(crd, shape, stride, crd.is_int(), crd, shape);
}

// ---- Layout --------------------------------------------------------------------------------

Layout::Layout(IntTuple shape, IntTuple stride) : shape_(std::move(shape)), stride_(std::move(stride)) {
  check_layout(shape_, stride_);
}

Layout::Layout(IntTuple shape) : shape_(std::move(shape)) {
  check_layout(shape_, shape_);  // shape checks before the strides are derived from it
  stride_ = compact_col_major(shape_);
}

int64_t Layout::cosize() const {
  std::vector<int64_t> s = shape_.leaves(), d = stride_.leaves();
  int64_t hi = 0;
  for (size_t i = 0; i < s.size(); ++i) hi += checked_mul(s[i] - 1, d[i], "cosize");
  return hi + 1;
}

Layout Layout::mode(int i) const {
  if (i < 0 || i >= rank())
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "mode: index ", i, " out of range for ", str());
  return Layout(shape_[i], stride_[i]);
}

namespace {

// Splits the index over the leaves colexicographically; only the very last leaf is unbounded.
// This is what the hierarchical split in offset_of amounts to, without building coordinates.
void index_offset(const IntTuple& shape, const IntTuple& stride, bool last, int64_t& rest,
                  int64_t& offset) {
  if (shape.is_int()) {
    int64_t n = shape.value();
    int64_t c = last ? rest : rest % n;
    rest = last ? 0 : rest / n;
    offset += checked_mul(c, stride.value(), "layout evaluation");
    return;
  }
  for (int i = 0; i < shape.rank(); ++i)
    index_offset(shape[i], stride[i], last && i + 1 == shape.rank(), rest, offset);
}

}  // namespace

int64_t Layout::operator()(int64_t idx) const {
  if (idx < 0) fail(METILE_ERROR_INVALID_ARGUMENT, "layout", str(), ": negative index ", idx);
  int64_t offset = 0;
  index_offset(shape_, stride_, true, idx, offset);
  return offset;
}

int64_t Layout::operator()(const IntTuple& crd) const {
  return offset_of(crd, shape_, stride_, false, crd, shape_);
}

std::string Layout::str() const { return shape_.str() + ":" + stride_.str(); }

std::ostream& operator<<(std::ostream& os, const Layout& l) { return os << l.str(); }

Layout make_layout(const IntTuple& shape, const IntTuple& stride) { return Layout(shape, stride); }

Layout make_layout(const IntTuple& shape) { return Layout(shape); }

Layout make_layout_row_major(const IntTuple& shape) {
  check_layout(shape, shape);
  return Layout(shape, compact_row_major(shape));
}

Layout make_layout(const std::vector<Layout>& modes) {
  if (modes.empty())
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "make_layout: no modes to concatenate");
  std::vector<IntTuple> s, d;
  for (const Layout& m : modes) {
    s.push_back(m.shape());
    d.push_back(m.stride());
  }
  return Layout(IntTuple(std::move(s)), IntTuple(std::move(d)));
}

Layout parse_layout(std::string_view text) {
  LayoutParser p(text);
  IntTuple shape = p.tuple();
  if (!p.accept(':')) {
    p.expect_end();
    return Layout(shape);
  }
  IntTuple stride = p.tuple();
  p.expect_end();
  return Layout(shape, stride);
}

Layout flatten(const Layout& l) { return Layout(flatten(l.shape()), flatten(l.stride())); }

}  // namespace metile
