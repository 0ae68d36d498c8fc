#include "runtime/metal_sim/trampoline.h"

#include <sstream>

namespace metile::metal_sim {

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
      case MslArg::Kind::stop:  // spelled as an atomic u32 buffer's: the metal stand-in, which
        // reads the word as one, then finds metal-sim's build of the same MSL in the cache
        os << "static_cast<::metal::atomic<" << cpp_type_name(DType::u32) << ">*>(a[" << i << "])";
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
