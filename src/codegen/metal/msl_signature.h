/** \file msl_signature.h
 * The parameter list of an MSL kernel as data. The MSL emitter knows it when it writes the kernel;
 * the devices that run MSL read it: metal-sim generates the C++ trampoline that binds launch
 * arguments and builtins to the kernel function (runtime/metal_sim/trampoline.h), sizes
 * threadgroup memory and checks the kernel's own `[[...]]` attributes; metal binds its arguments
 * by it. It travels inside the Artifact as text (print_signature / parse_signature). It lives in
 * codegen, below both devices; the namespace is its first reader's.
 */
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/types.h"

namespace metile::metal_sim {

/** Builtin parameter attributes; the order matches metal_sim_builtin (metal_sim_abi.h). */
enum class MslBuiltin : uint8_t {
  thread_position_in_grid,
  thread_position_in_threadgroup,
  thread_index_in_threadgroup,
  threadgroup_position_in_grid,
  threads_per_threadgroup,
  threadgroups_per_grid,
  threads_per_grid,
  thread_index_in_simdgroup,
  simdgroup_index_in_threadgroup,
  threads_per_simdgroup,
  simdgroups_per_threadgroup,
};
inline constexpr int kMslBuiltinCount = 11;

const char* builtin_name(MslBuiltin b);
std::optional<MslBuiltin> parse_builtin(std::string_view name);

struct MslArg {
  enum class Kind : uint8_t {
    buffer,       // device [const] T* NAME [[buffer(i)]] (or device atomic<T>*)
    scalar,       // constant T& NAME [[buffer(i)]]
    threadgroup,  // threadgroup T* NAME [[threadgroup(i)]], `count` elements per group
    builtin,      // uint/uintN NAME [[<builtin>]]
    // The scalars packed into one binding, so that a kernel's scalars (its own and the extents
    // metile adds) take one of Metal's 31 buffer bindings rather than one each:
    packed,  // constant STRUCT& NAME [[buffer(i)]], STRUCT holding the signature's members
    member,  // a launch argument that is a field of the packed struct, not a kernel parameter
    // device atomic<uint>* NAME [[buffer(i)]]: the host's stop word (docs/semantics.md,
    // "Stopping a launch"), which the device binds itself: not a launch argument.
    stop,
  };
  Kind kind = Kind::buffer;
  std::string name;
  int binding = 0;
  DType dtype = DType::invalid;
  bool is_const = false;  // buffer: device const T*
  bool atomic = false;    // buffer: device atomic<T>* (i32, u32 or f32)
  uint64_t count = 0;     // threadgroup: elements
  MslBuiltin builtin = MslBuiltin::thread_position_in_grid;
  std::string struct_name;  // packed: the struct's type name

  static MslArg buffer(std::string name, int binding, DType dtype, bool is_const);
  static MslArg atomic_buffer(std::string name, int binding, DType dtype);
  static MslArg scalar(std::string name, int binding, DType dtype);
  static MslArg threadgroup(std::string name, int binding, DType dtype, uint64_t count);
  static MslArg builtin_arg(std::string name, MslBuiltin which);
  static MslArg packed(std::string name, int binding, std::string struct_name);
  static MslArg member(std::string name, DType dtype);
  static MslArg stop_word(std::string name, int binding);
  bool operator==(const MslArg&) const = default;
};

/**
 * A signature lists the kernel's parameters in order, with the members of its packed scalars (at
 * most one `packed` parameter) among them where the launch supplies them: launch arguments are
 * the buffer, scalar and member entries in signature order, kernel parameters every entry but
 * the members. The packed struct holds the members in signature order, each at its C offset
 * (aligned to its size); packed_layout() is that layout.
 */
struct MslSignature {
  std::string kernel;        // the kernel function's name
  std::vector<MslArg> args;  // in parameter order, members among them (see above)
  /** Stack one simulated thread needs, as the compiler laid out the kernel's frames (0: the
   * default fiber stack is enough). Set by build_msl; printed as a `stack BYTES` line. */
  uint64_t stack_bytes = 0;

  /** Arguments a launch supplies (buffers and scalars; not the stop word), in order. */
  size_t launch_arg_count() const;
  /** Threadgroup memory the [[threadgroup(i)]] arguments take, in bytes (16-byte aligned each). */
  uint64_t threadgroup_arg_bytes() const;
  /** Byte offset of each argument in the packed struct (members only; 0 for the others) and,
   * in `*bytes`, the struct's size (a multiple of its largest member; 0 without members). */
  std::vector<uint64_t> packed_layout(uint64_t* bytes) const;
  bool operator==(const MslSignature&) const = default;
};

/** Apple's threadgroup memory limit, in bytes. */
inline constexpr uint64_t kThreadgroupMemoryLimit = 32768;
/** The most stack one simulated thread may have (its frames: mostly the per-thread registers
 * of its tiles); a kernel that needs more is a compile error. */
inline constexpr uint64_t kMaxThreadStackBytes = uint64_t{64} << 20;
/** The most bytes of packed scalars: Metal's setBytes limit (larger data needs a buffer). */
inline constexpr uint64_t kMaxPackedBytes = 4096;
/** The highest [[buffer(i)]] / [[threadgroup(i)]] index Metal accepts (31 buffer bindings). */
inline constexpr int kMaxBinding = 30;

/** Throws METILE_ERROR_INVALID_ARGUMENT naming the first problem. */
void validate(const MslSignature& signature);

/** MSL spelling of an element type: float, half, bfloat, int, uint, long, bool, char, uchar. */
const char* msl_type_name(DType dtype);

/** The same type as C++ code after the MSL sees it (::metal::half, ...; qualified, so it does not
 * depend on `using namespace metal`): metal-sim's trampoline spells its casts with it. */
const char* cpp_type_name(DType dtype);

/** One line per argument; parse_signature(print_signature(s)) == s. */
std::string print_signature(const MslSignature& signature);
/** Throws METILE_ERROR_INVALID_ARGUMENT on malformed text. */
MslSignature parse_signature(std::string_view text);

}  // namespace metile::metal_sim
