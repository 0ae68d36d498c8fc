#include "codegen/metal/msl_signature.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "support/error.h"

namespace metile::metal_sim {

namespace {

constexpr const char* kBuiltinNames[kMslBuiltinCount] = {
    "thread_position_in_grid",
    "thread_position_in_threadgroup",
    "thread_index_in_threadgroup",
    "threadgroup_position_in_grid",
    "threads_per_threadgroup",
    "threadgroups_per_grid",
    "threads_per_grid",
    "thread_index_in_simdgroup",
    "simdgroup_index_in_threadgroup",
    "threads_per_simdgroup",
    "simdgroups_per_threadgroup",
};

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

const char* kind_word(MslArg::Kind k) {
  switch (k) {
    case MslArg::Kind::buffer:
      return "buffer";
    case MslArg::Kind::scalar:
      return "scalar";
    case MslArg::Kind::threadgroup:
      return "threadgroup";
    case MslArg::Kind::builtin:
      return "builtin";
    case MslArg::Kind::packed:
      return "packed";
    case MslArg::Kind::member:
      return "member";
    case MslArg::Kind::stop:
      return "stop";
  }
  return "";
}

[[noreturn]] void bad(const MslSignature& s, const std::string& what) {
  fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", "signature of kernel '", s.kernel, "': ", what);
}

}  // namespace

const char* builtin_name(MslBuiltin b) { return kBuiltinNames[static_cast<int>(b)]; }

std::optional<MslBuiltin> parse_builtin(std::string_view name) {
  for (int i = 0; i < kMslBuiltinCount; ++i)
    if (name == kBuiltinNames[i]) return static_cast<MslBuiltin>(i);
  return std::nullopt;
}

MslArg MslArg::buffer(std::string name, int binding, DType dtype, bool is_const) {
  MslArg a;
  a.kind = Kind::buffer;
  a.name = std::move(name);
  a.binding = binding;
  a.dtype = dtype;
  a.is_const = is_const;
  return a;
}

MslArg MslArg::atomic_buffer(std::string name, int binding, DType dtype) {
  MslArg a = buffer(std::move(name), binding, dtype, false);
  a.atomic = true;
  return a;
}

MslArg MslArg::scalar(std::string name, int binding, DType dtype) {
  MslArg a = buffer(std::move(name), binding, dtype, true);
  a.kind = Kind::scalar;
  return a;
}

MslArg MslArg::threadgroup(std::string name, int binding, DType dtype, uint64_t count) {
  MslArg a = buffer(std::move(name), binding, dtype, false);
  a.kind = Kind::threadgroup;
  a.count = count;
  return a;
}

MslArg MslArg::builtin_arg(std::string name, MslBuiltin which) {
  MslArg a;
  a.kind = Kind::builtin;
  a.name = std::move(name);
  a.builtin = which;
  return a;
}

MslArg MslArg::packed(std::string name, int binding, std::string struct_name) {
  MslArg a;
  a.kind = Kind::packed;
  a.name = std::move(name);
  a.binding = binding;
  a.struct_name = std::move(struct_name);
  return a;
}

MslArg MslArg::member(std::string name, DType dtype) {
  MslArg a;
  a.kind = Kind::member;
  a.name = std::move(name);
  a.dtype = dtype;
  return a;
}

MslArg MslArg::stop_word(std::string name, int binding) {
  MslArg a;
  a.kind = Kind::stop;
  a.name = std::move(name);
  a.binding = binding;
  a.dtype = DType::u32;
  return a;
}

size_t MslSignature::launch_arg_count() const {
  size_t n = 0;
  for (const MslArg& a : args)
    n += a.kind == MslArg::Kind::buffer || a.kind == MslArg::Kind::scalar ||
         a.kind == MslArg::Kind::member;
  return n;
}

std::vector<uint64_t> MslSignature::packed_layout(uint64_t* bytes) const {
  std::vector<uint64_t> offsets(args.size(), 0);
  uint64_t end = 0, align = 1;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind != MslArg::Kind::member) continue;
    uint64_t size = dtype_size(args[i].dtype);
    offsets[i] = (end + size - 1) / size * size;
    end = offsets[i] + size;
    align = std::max(align, size);
  }
  *bytes = (end + align - 1) / align * align;
  return offsets;
}

uint64_t MslSignature::threadgroup_arg_bytes() const {
  uint64_t total = 0;
  for (const MslArg& a : args)
    if (a.kind == MslArg::Kind::threadgroup)
      total = align_threadgroup(total) + a.count * dtype_size(a.dtype);
  return total;
}

const char* cpp_type_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "float";
    case DType::f16:
      return "::metal::half";
    case DType::bf16:
      return "::metal::bfloat";
    case DType::i32:
      return "int";
    case DType::u32:
      return "::metal::uint";
    case DType::i64:
      return "long";
    case DType::boolean:  // bytes, as the MSL emitter stores bool (any non-zero byte is true)
      return "::metal::uchar";
    case DType::i8:
      return "char";
    case DType::u8:
    case DType::f8e4m3:  // MSL has no FP8 type: the kernel sees the bytes
    case DType::f8e5m2:
      return "::metal::uchar";
    case DType::invalid:
      break;
  }
  return "";
}

const char* msl_type_name(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return "half";
    case DType::bf16:
      return "bfloat";
    case DType::u32:
      return "uint";
    case DType::boolean:
      return "bool";
    case DType::u8:
    case DType::f8e4m3:
    case DType::f8e5m2:
      return "uchar";
    default:
      return cpp_type_name(dtype);
  }
}

void validate(const MslSignature& s) {
  if (!is_identifier(s.kernel))
    fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", "kernel name '", s.kernel,
         "' is not an identifier");
  std::set<std::string> names;
  std::set<int> buffers, threadgroups;
  size_t packs = 0, members = 0, stops = 0;
  for (const MslArg& a : s.args) {
    if (!is_identifier(a.name)) bad(s, cat("argument name '", a.name, "' is not an identifier"));
    if (!names.insert(a.name).second) bad(s, cat("two arguments are named '", a.name, "'"));
    if (a.kind == MslArg::Kind::builtin) continue;
    if (a.kind == MslArg::Kind::member) {
      ++members;
      if (a.dtype == DType::invalid) bad(s, cat("member '", a.name, "' has no element type"));
      continue;
    }
    if (a.kind == MslArg::Kind::packed) {
      if (++packs > 1) bad(s, "more than one packed argument");
      if (!is_identifier(a.struct_name) || names.count(a.struct_name) || a.struct_name == s.kernel)
        bad(s, cat("packed argument '", a.name, "': struct name '", a.struct_name,
                   "' is not a fresh identifier"));
    } else if (a.dtype == DType::invalid) {
      bad(s, cat("argument '", a.name, "' has no element type"));
    }
    if (a.binding < 0 || a.binding > kMaxBinding)
      bad(s, cat("argument '", a.name, "': binding ", a.binding, " is outside 0..", kMaxBinding));
    std::set<int>& space = a.kind == MslArg::Kind::threadgroup ? threadgroups : buffers;
    if (!space.insert(a.binding).second)
      bad(s, cat("argument '", a.name,
                 "': ", a.kind == MslArg::Kind::threadgroup ? "[[threadgroup(" : "[[buffer(",
                 a.binding, ")]] is already taken"));
    if (a.atomic && (a.kind != MslArg::Kind::buffer ||
                     (a.dtype != DType::i32 && a.dtype != DType::u32 && a.dtype != DType::f32)))
      bad(s, cat("argument '", a.name, "': atomics are device buffers of i32, u32 or f32"));
    if (a.kind == MslArg::Kind::threadgroup && (a.count == 0 || a.count > kThreadgroupMemoryLimit))
      bad(s, cat("threadgroup argument '", a.name, "' has ", a.count, " elements"));
    if (a.kind == MslArg::Kind::stop && (++stops > 1 || a.dtype != DType::u32))
      bad(s, cat("stop word '", a.name, "': a kernel has at most one, of type u32"));
  }
  if ((members == 0) != (packs == 0))
    bad(s, members == 0 ? "a packed argument without members" : "members without a packed argument");
  uint64_t packed_bytes = 0;
  s.packed_layout(&packed_bytes);
  if (packed_bytes > kMaxPackedBytes)
    bad(s, cat("its scalars take ", packed_bytes, " bytes, over Metal's limit of ", kMaxPackedBytes));
}

std::string print_signature(const MslSignature& s) {
  std::ostringstream os;
  os << "kernel " << s.kernel << "\n";
  for (const MslArg& a : s.args) {
    if (a.kind == MslArg::Kind::builtin) {
      os << "builtin " << a.name << " " << builtin_name(a.builtin) << "\n";
      continue;
    }
    if (a.kind == MslArg::Kind::packed) {
      os << "packed " << a.name << " " << a.binding << " " << a.struct_name << "\n";
      continue;
    }
    if (a.kind == MslArg::Kind::member) {
      os << "member " << a.name << " " << dtype_name(a.dtype) << "\n";
      continue;
    }
    os << (a.atomic ? "atomic" : kind_word(a.kind)) << " " << a.name << " " << a.binding << " "
       << dtype_name(a.dtype);
    if (a.kind == MslArg::Kind::buffer && a.is_const) os << " const";
    if (a.kind == MslArg::Kind::threadgroup) os << " " << a.count;
    os << "\n";
  }
  if (s.stack_bytes != 0) os << "stack " << s.stack_bytes << "\n";
  return os.str();
}

MslSignature parse_signature(std::string_view text) {
  MslSignature s;
  std::istringstream in{std::string(text)};
  std::string line;
  int line_no = 0;
  auto malformed = [&](const std::string& why) {
    fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", "signature line ", line_no, " (\"", line,
         "\"): ", why);
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (line_no == 1) {
      if (w.size() != 2 || w[0] != "kernel") malformed("expected `kernel NAME`");
      s.kernel = w[1];
      continue;
    }
    if (w.size() == 2 && w[0] == "stack") {
      try {
        s.stack_bytes = std::stoull(w[1]);
      } catch (const std::exception&) {
        malformed("the stack size is not a number");
      }
      if (s.stack_bytes > kMaxThreadStackBytes) malformed("the stack size is over the limit");
      continue;
    }
    if (w.size() < 3) malformed("too few fields");
    if (w[0] == "builtin") {
      auto b = parse_builtin(w[2]);
      if (w.size() != 3 || !b) malformed("expected `builtin NAME ATTRIBUTE`");
      s.args.push_back(MslArg::builtin_arg(w[1], *b));
      continue;
    }
    if (w[0] == "member") {
      auto dtype = parse_dtype(w[2]);
      if (w.size() != 3 || !dtype) malformed("expected `member NAME TYPE`");
      s.args.push_back(MslArg::member(w[1], *dtype));
      continue;
    }
    if (w.size() < 4) malformed("too few fields");
    int binding = 0;
    try {
      binding = std::stoi(w[2]);
    } catch (const std::exception&) {
      malformed("the binding is not a number");
    }
    if (w[0] == "packed") {
      if (w.size() != 4) malformed("expected `packed NAME BINDING STRUCT`");
      s.args.push_back(MslArg::packed(w[1], binding, w[3]));
      continue;
    }
    auto dtype = parse_dtype(w[3]);
    if (!dtype) malformed(cat("unknown element type '", w[3], "'"));
    if (w[0] == "buffer" && (w.size() == 4 || (w.size() == 5 && w[4] == "const"))) {
      s.args.push_back(MslArg::buffer(w[1], binding, *dtype, w.size() == 5));
    } else if (w[0] == "atomic" && w.size() == 4) {
      s.args.push_back(MslArg::atomic_buffer(w[1], binding, *dtype));
    } else if (w[0] == "stop" && w.size() == 4 && *dtype == DType::u32) {
      s.args.push_back(MslArg::stop_word(w[1], binding));
    } else if (w[0] == "scalar" && w.size() == 4) {
      s.args.push_back(MslArg::scalar(w[1], binding, *dtype));
    } else if (w[0] == "threadgroup" && w.size() == 5) {
      uint64_t count = 0;
      try {
        count = std::stoull(w[4]);
      } catch (const std::exception&) {
        malformed("the element count is not a number");
      }
      s.args.push_back(MslArg::threadgroup(w[1], binding, *dtype, count));
    } else {
      malformed("expected buffer|atomic|scalar|packed|member|threadgroup|builtin|stop with its fields");
    }
  }
  if (line_no == 0) fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", "empty signature");
  validate(s);
  return s;
}

}  // namespace metile::metal_sim
