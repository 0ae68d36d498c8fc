#include "runtime/metal_sim/trampoline.h"

#include <sstream>

namespace metile::metal_sim {

namespace {

// The trampoline's spelling (qualified, so it does not depend on `using namespace metal`).
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

}  // namespace

std::string make_trampoline(const MslSignature& s) {
  std::ostringstream os;
  os << "// metal-sim trampoline: binds launch arguments and builtins to the kernel's parameters.\n"
     << "extern \"C\" __attribute__((visibility(\"default\"))) const int metal_sim_abi_version = "
        "METAL_SIM_ABI_VERSION;\n"
     << "extern \"C\" __attribute__((visibility(\"default\"))) void metal_sim_entry("
        "metal_sim_thread* t, void* const* a) {\n"
     << "  ::metal::detail::current = t;\n"
     << "  " << s.kernel << "(";
  bool first = true;
  for (size_t i = 0; i < s.args.size(); ++i) {
    const MslArg& a = s.args[i];
    if (a.kind == MslArg::Kind::member) continue;  // inside the packed struct
    os << (first ? "\n      " : ",\n      ");
    first = false;
    std::string type = cpp_type_name(a.dtype);
    switch (a.kind) {
      case MslArg::Kind::buffer:
        if (a.atomic) type = "::metal::atomic<" + type + ">";
        os << "static_cast<" << (a.is_const ? "const " : "") << type << "*>(a[" << i << "])";
        break;
      case MslArg::Kind::scalar:
        os << "*static_cast<const " << type << "*>(a[" << i << "])";
        break;
      case MslArg::Kind::packed:
        os << "*static_cast<const " << a.struct_name << "*>(a[" << i << "])";
        break;
      case MslArg::Kind::member:
        break;
      case MslArg::Kind::threadgroup:
        os << "static_cast<" << type << "*>(a[" << i << "])";
        break;
      case MslArg::Kind::builtin:
        os << "::metal::detail::builtin(t, " << static_cast<int>(a.builtin) << " /* "
           << builtin_name(a.builtin) << " */)";
        break;
    }
  }
  os << ");\n}\n";
  return os.str();
}

}  // namespace metile::metal_sim
