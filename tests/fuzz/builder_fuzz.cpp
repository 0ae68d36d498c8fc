// libFuzzer target for the builder C API: the input bytes are a script of metile_builder_* calls
// (one opcode byte, then the call's operands, each read from the following bytes). Every call
// must either succeed or fail with a status and a message; a crash, a sanitizer report, a
// METILE_ERROR_INTERNAL status, or a finished program that does not print and parse back to
// the same text is a bug. Values are referred to by index into the values built so far, and
// now and then by raw (possibly invalid) ids, so both valid programs and misuse are explored.
#include <metile/metile.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Reader {
  const uint8_t* p;
  size_t n;
  bool empty() const { return n == 0; }
  uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  int64_t i64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | byte();
    return static_cast<int64_t>(v);
  }
  // Small numbers mostly, with the extremes now and then.
  int64_t num() {
    uint8_t k = byte();
    if (k < 200) return static_cast<int64_t>(k) - 16;
    if (k < 230) return int64_t{1} << (byte() % 63);
    return i64();
  }
  double real() {
    uint8_t k = byte();
    if (k < 200) return (static_cast<double>(k) - 100.0) / 8.0;
    uint64_t bits = static_cast<uint64_t>(i64());
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
};

void check(metile_status st) {
  if (st == METILE_ERROR_INTERNAL) __builtin_trap();  // an assertion inside metile
  if (st != METILE_OK && metile_last_error()[0] == '\0') __builtin_trap();  // no message
}

const metile_dtype kDtypes[] = {METILE_DTYPE_F32, METILE_DTYPE_F16, METILE_DTYPE_BF16,
                                METILE_DTYPE_I32, METILE_DTYPE_U32, METILE_DTYPE_I64,
                                METILE_DTYPE_BOOL, METILE_DTYPE_I8,  METILE_DTYPE_U8};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r{data, size};
  metile_builder* b = nullptr;
  if (metile_builder_create(&b, "fz") != METILE_OK) __builtin_trap();
  std::vector<metile_value> vals;
  auto value = [&]() -> metile_value {
    uint8_t k = r.byte();
    if (vals.empty() || k >= 250) return static_cast<metile_value>(k);  // possibly invalid
    return vals[k % vals.size()];
  };
  auto dtype = [&]() -> metile_dtype {
    uint8_t k = r.byte();
    if (k >= 250) return static_cast<metile_dtype>(k);  // invalid dtypes too
    return kDtypes[k % 9];
  };
  auto keep = [&](metile_status st, metile_value v) {
    check(st);
    if (st == METILE_OK) vals.push_back(v);
  };
  const std::vector<metile_op> binaries = {
      METILE_OP_ADD, METILE_OP_SUB, METILE_OP_MUL, METILE_OP_DIV, METILE_OP_FLOORDIV,
      METILE_OP_MOD, METILE_OP_MAXIMUM, METILE_OP_MINIMUM, METILE_OP_BITAND, METILE_OP_BITOR,
      METILE_OP_BITXOR, METILE_OP_SHL, METILE_OP_SHR, METILE_OP_POW, METILE_OP_LT, METILE_OP_LE,
      METILE_OP_GT, METILE_OP_GE, METILE_OP_EQ, METILE_OP_NE};
  const std::vector<metile_op> unaries = {
      METILE_OP_NEG, METILE_OP_NOT, METILE_OP_EXP, METILE_OP_LOG, METILE_OP_SQRT, METILE_OP_RSQRT,
      METILE_OP_ABS, METILE_OP_TANH, METILE_OP_SIN, METILE_OP_COS, METILE_OP_EXP2, METILE_OP_LOG2,
      METILE_OP_FLOOR, METILE_OP_CEIL, METILE_OP_ERF, METILE_OP_SIGMOID};
  int calls = 0;
  while (!r.empty() && calls++ < 256) {
    metile_value out = 0;
    metile_type t{};
    switch (r.byte() % 20) {
      case 0: {
        t.dtype = dtype();
        t.is_pointer = r.byte() & 1;
        std::string name = "p" + std::to_string(r.byte() % 8);
        keep(metile_builder_param(b, name.c_str(), &t, &out), out);
        break;
      }
      case 1: {
        metile_dtype d = dtype();
        keep(metile_builder_const_int(b, d, r.num(), &out), out);
        break;
      }
      case 2: {
        metile_dtype d = dtype();
        keep(metile_builder_const_float(b, d, r.real(), &out), out);
        break;
      }
      case 3:
        keep(metile_builder_grid(b, (r.byte() & 1) ? METILE_OP_PROGRAM_ID : METILE_OP_NUM_PROGRAMS,
                                 static_cast<int32_t>(r.byte() % 4), &out),
             out);
        break;
      case 4: {
        metile_value start = (r.byte() & 1) ? 0 : value();
        keep(metile_builder_arange(b, start, r.num(), &out), out);
        break;
      }
      case 5: {
        metile_value x = value();
        auto convert = r.byte() & 1 ? metile_builder_bitcast : metile_builder_cast;
        keep(convert(b, x, dtype(), &out), out);
        break;
      }
      case 6: {
        metile_value x = value();
        int32_t rank = r.byte() % 3;
        int64_t dims[2] = {r.num(), r.num()};
        keep((r.byte() & 1) ? metile_builder_broadcast(b, x, rank, dims, &out)
                            : metile_builder_reshape(b, x, rank, dims, &out),
             out);
        break;
      }
      case 7: {
        metile_op op = unaries[r.byte() % unaries.size()];
        keep(metile_builder_unary(b, op, value(), &out), out);
        break;
      }
      case 8:
      case 9: {
        metile_op op = binaries[r.byte() % binaries.size()];
        metile_value x = value(), y = value();
        keep(metile_builder_binary(b, op, x, y, &out), out);
        break;
      }
      case 10: {
        metile_value c = value(), x = value(), y = value();
        keep(metile_builder_select(b, c, x, y, &out), out);
        break;
      }
      case 11: {
        metile_value p = value(), o = value();
        keep(metile_builder_ptr_offset(b, p, o, &out), out);
        break;
      }
      case 12: {
        metile_value p = value(), m = (r.byte() & 1) ? 0 : value(), other = (r.byte() & 1) ? 0 : value();
        keep(metile_builder_load(b, p, m, other, &out), out);
        break;
      }
      case 13: {
        metile_value p = value(), v = value(), m = (r.byte() & 1) ? 0 : value();
        check(metile_builder_store(b, p, v, m));
        break;
      }
      case 14: {
        const metile_op reds[] = {METILE_OP_REDUCE_SUM, METILE_OP_REDUCE_MAX, METILE_OP_REDUCE_MIN};
        metile_op op = reds[r.byte() % 3];
        metile_value x = value();
        keep(metile_builder_reduce(b, op, x, static_cast<int32_t>(r.byte() % 4) - 1, &out), out);
        break;
      }
      case 15: {
        metile_value s = value(), e = value(), st = value();
        size_t n = r.byte() % 3;
        metile_value inits[2] = {value(), value()}, carried[2] = {0, 0}, iv = 0;
        metile_status status = metile_builder_for_begin(b, s, e, st, inits, n, &iv, carried);
        check(status);
        if (status == METILE_OK) {
          vals.push_back(iv);
          for (size_t i = 0; i < n; ++i) vals.push_back(carried[i]);
        }
        break;
      }
      case 16: {
        size_t n = r.byte() % 3;
        metile_value ys[2] = {value(), value()}, res[2] = {0, 0};
        metile_status status = metile_builder_for_end(b, ys, n, res);
        check(status);
        if (status == METILE_OK) {
          for (size_t i = 0; i < n; ++i) vals.push_back(res[i]);
        }
        break;
      }
      case 17: {
        metile_value a = value(), bm = value(), acc = value();
        keep(metile_builder_dot(b, a, bm, acc, &out), out);
        break;
      }
      case 18: {
        std::string file = "f" + std::to_string(r.byte() % 4) + ".py";
        check(metile_builder_set_loc(b, file.c_str(), static_cast<int32_t>(r.num())));
        break;
      }
      case 19: {
        metile_value v = value();
        check(metile_builder_value_type(b, v, &t));
        break;
      }
    }
  }
  metile_program* p = nullptr;
  metile_status st = metile_builder_finish(b, &p);
  check(st);
  if (st == METILE_OK) {
    // A finished program prints and parses back to the same text.
    char* text = nullptr;
    if (metile_program_print(p, &text) != METILE_OK) __builtin_trap();
    metile_program* q = nullptr;
    if (metile_program_parse(&q, text) != METILE_OK) __builtin_trap();
    char* again = nullptr;
    if (metile_program_print(q, &again) != METILE_OK || std::strcmp(text, again) != 0) __builtin_trap();
    metile_free(text);
    metile_free(again);
    metile_program_release(q);
    metile_program_release(p);
  }
  metile_builder_release(b);
  return 0;
}
