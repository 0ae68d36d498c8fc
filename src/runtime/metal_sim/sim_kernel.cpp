#include "runtime/metal_sim/sim_kernel.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <optional>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <regex>

#include "codegen/prelude/metal_sim_abi.h"
#include "runtime/host/build_store.h"
#include "runtime/host/cancel.h"
#include "runtime/host/cancel_words.h"
#include "runtime/host/process.h"
#include "runtime/host/parallel_for.h"
#include "runtime/metal_sim/group_runner.h"
#include "runtime/metal_sim/msl_prepare.h"
#include "runtime/metal_sim/toolchain.h"
#include "runtime/metal_sim/trampoline.h"
#include "support/embedded.h"
#include "support/error.h"

namespace metile::metal_sim {

namespace {

const Clang& clang_or_fail() {
  const ClangProbe& p = probe_clang();
  if (!p.unavailable.empty()) fail(METILE_ERROR_DEVICE_UNAVAILABLE, "metal-sim", p.unavailable);
  return p.clang;
}

// Files the MSL's #include lines and the shim itself resolve to.
std::vector<std::pair<std::string, std::string_view>> include_files() {
  std::vector<std::pair<std::string, std::string_view>> files = {
      {"metal_shim.h", embedded_file("metal_shim.h")},
      {"metal_shim_math.h", embedded_file("metal_shim_math.h")},
      {"metal_shim_matrix.h", embedded_file("metal_shim_matrix.h")},
      {"metal_shim_tensor.h", embedded_file("metal_shim_tensor.h")},
      {"metal_sim_abi.h", embedded_file("metal_sim_abi.h")}};
  for (const char* header :
       {"metal_stdlib", "metal_simdgroup_matrix", "metal_simdgroup", "metal_math", "metal_atomic",
        "metal_compute", "metal_integer", "metal_common", "metal_relational", "metal_geometric",
        "metal_tensor", "MetalPerformancePrimitives/MetalPerformancePrimitives.h"})
    files.push_back({header, "#include \"metal_shim.h\"\n"});
  return files;
}

std::string file_name(const MslSignature& s) { return s.kernel + ".metal"; }

// Shared objects are kept in the build store (host/build_store.h: the compile cache's
// directory) under everything clang reads (the translation unit, the shim, clang itself; the
// store's key adds the library's build identity, which covers the flags), so the same MSL is
// compiled once: by the metal-sim device for two programs that lower alike, or by it and the
// Linux stand-in Metal.framework (tests/metal_standin), across processes.
std::string build_key(const Clang& clang, const std::string& tu,
                      const std::vector<std::pair<std::string, std::string_view>>& includes) {
  std::string key = cat("metal-sim clang build 1\n", clang.command, "\n", clang.version, "\n-O",
                        opt_level(), "\n", tu);
  for (const auto& [name, contents] : includes)
    key += cat("\n#file ", name, " ", contents.size(), "\n", contents);
  return key;
}

// The bytes, and the stack a thread needs in `*frames`, of an earlier build.
std::optional<std::vector<uint8_t>> find_build(const std::string& key, uint64_t* frames) {
  host::BuildStore* store = host::build_store();
  auto hit = store ? store->find_artifact(key) : std::nullopt;
  if (!hit) return std::nullopt;
  const Artifact& a = *hit;
  auto measured = a.sources.find(Stage::msl_signature);
  if (a.kind != ArtifactKind::shared_object || a.bytes.empty() || measured == a.sources.end())
    return std::nullopt;
  try {
    *frames = parse_signature(measured->second).stack_bytes;
  } catch (const Error&) {
    return std::nullopt;
  }
  return a.bytes;
}

void store_build(const std::string& key, const std::vector<uint8_t>& bytes,
                 const MslSignature& measured, double seconds) {
  host::BuildStore* store = host::build_store();
  if (!store) return;
  Artifact a;
  a.kind = ArtifactKind::shared_object;
  a.bytes = bytes;
  a.sources[Stage::msl_signature] = print_signature(measured);
  store->store_artifact(key, a, seconds);
}

}  // namespace

std::string translation_unit(std::string_view msl, const MslSignature& signature) {
  validate(signature);
  std::string name = file_name(signature);
  return cat("#line 1 \"", name, "\"\n", prepare_msl(msl, name, &signature),
             "\n#line 1 \"metal_sim_trampoline\"\n", make_trampoline(signature));
}

// The frames clang reported (-Wframe-larger-than in run_clang) summed: an upper bound of any
// call chain, since kernel code does not recurse.
static uint64_t reported_frames(const std::string& log) {
  static const std::regex frame(R"(stack frame size (?:of )?\(?(\d+)\)?)");
  uint64_t total = 0;
  for (std::sregex_iterator it(log.begin(), log.end(), frame), end; it != end; ++it)
    total += std::stoull((*it)[1].str());
  return total;
}

std::vector<uint8_t> build_msl(std::string_view msl, const MslSignature& signature,
                               uint64_t* stack_bytes) {
  std::string tu = translation_unit(msl, signature);
  uint64_t tg_bytes = signature.threadgroup_arg_bytes();
  if (tg_bytes > kThreadgroupMemoryLimit)
    fail(METILE_ERROR_COMPILE, "metal-sim", signature.kernel,
         ": its [[threadgroup(i)]] arguments need ", tg_bytes, " bytes, over Apple's ",
         kThreadgroupMemoryLimit, "-byte threadgroup memory limit");
  const Clang& clang = clang_or_fail();
  const auto includes = include_files();
  const std::string key = build_key(clang, tu, includes);
  uint64_t frames = 0;
  if (auto bytes = find_build(key, &frames)) {
    if (stack_bytes) *stack_bytes = frames;
    return std::move(*bytes);
  }
  const auto start = std::chrono::steady_clock::now();
  ClangRun run = run_clang(clang, tu, file_name(signature) + ".cpp", includes, true);
  if (!run.ok)
    fail(METILE_ERROR_COMPILE, "metal-sim", signature.kernel,
         ": clang failed to compile the MSL:\n", run.log);
  frames = reported_frames(run.log);
  if (frames > kMaxThreadStackBytes)
    fail(METILE_ERROR_COMPILE, "metal-sim", signature.kernel, ": one thread needs ", frames,
         " bytes of stack (its tiles' per-thread registers), over metal-sim's limit of ",
         kMaxThreadStackBytes, "; use smaller tiles or more threads");
  if (stack_bytes) *stack_bytes = frames;
  MslSignature measured = signature;
  measured.stack_bytes = frames;
  store_build(key, run.output, measured,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return run.output;
}

void check_msl(std::string_view msl, std::string_view name) {
  std::string tu = cat("#line 1 \"", name, "\"\n", prepare_msl(msl, name, nullptr));
  ClangRun run = run_clang(clang_or_fail(), tu, cat(name, ".cpp"), include_files(), false);
  if (!run.ok) fail(METILE_ERROR_COMPILE, "metal-sim", name, ": clang rejected it:\n", run.log);
}

SimKernel load_msl(const std::vector<uint8_t>& bytes, MslSignature signature) {
  validate(signature);
  if (signature.threadgroup_arg_bytes() > kThreadgroupMemoryLimit)
    fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", signature.kernel,
         ": its [[threadgroup(i)]] arguments need ", signature.threadgroup_arg_bytes(),
         " bytes, over Apple's ", kThreadgroupMemoryLimit, "-byte threadgroup memory limit");
  SimKernel k;
  k.library_ = std::make_shared<host::SharedObject>(bytes, "metal-sim", signature.kernel);
  auto* version = static_cast<const int*>(k.library_->find("metal_sim_abi_version"));
  k.entry_ = k.library_->find("metal_sim_entry");
  if (version == nullptr || k.entry_ == nullptr)
    fail(METILE_ERROR_DEVICE, "metal-sim", signature.kernel,
         ": the library is not a metal-sim kernel (no metal_sim_entry)");
  if (*version != METAL_SIM_ABI_VERSION)
    fail(METILE_ERROR_DEVICE, "metal-sim", signature.kernel, ": the library was built for ABI ",
         *version, ", this runtime speaks ", METAL_SIM_ABI_VERSION);
  k.signature_ = std::move(signature);
  return k;
}

SimKernel compile_msl(std::string_view msl, const MslSignature& signature) {
  MslSignature measured = signature;
  std::vector<uint8_t> bytes = build_msl(msl, signature, &measured.stack_bytes);
  return load_msl(bytes, measured);
}

void SimKernel::launch(std::array<uint32_t, 3> groups, std::array<uint32_t, 3> threads,
                       const std::vector<SimArg>& args, bool host_stops) const {
  const std::string& name = signature_.kernel;
  uint64_t count = 1, per_group = 1;
  for (int d = 0; d < 3; ++d) {
    if (groups[d] == 0 || threads[d] == 0)
      fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", name, ": launch dimension ", d,
           " is 0 (threadgroups ", groups[d], ", threads ", threads[d], ")");
    count *= groups[d];
    per_group *= threads[d];
  }
  if (per_group > kMaxThreadsPerGroup)
    fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", name, ": ", per_group,
         " threads per threadgroup exceeds the maximum of ", kMaxThreadsPerGroup);
  if (args.size() != signature_.launch_arg_count())
    fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", name, ": the launch passes ", args.size(),
         " arguments, the kernel takes ", signature_.launch_arg_count(),
         " (its buffers and scalars)");

  LaunchPlan plan;
  plan.kernel = name;
  plan.entry = reinterpret_cast<metal_sim_entry_fn>(entry_);
  plan.groups = groups;
  plan.threads = threads;
  plan.stack_bytes = signature_.stack_bytes;
  if (host_stops) plan.stop.emplace();  // the limit counts from now
  // The kernel's stop word, if it has one: metal-sim stops a launch from the host (plan.stop),
  // so the word stays at run and the kernel's checks of it only cost what they cost on a GPU.
  uint32_t stop_word = host::kWordRun;
  std::vector<uint64_t> scalars(signature_.args.size());
  uint64_t packed_bytes = 0;
  const std::vector<uint64_t> offsets = signature_.packed_layout(&packed_bytes);
  std::vector<uint64_t> packed((packed_bytes + 7) / 8);  // 8-aligned, as the struct needs
  size_t next = 0;
  for (size_t i = 0; i < signature_.args.size(); ++i) {
    const MslArg& a = signature_.args[i];
    void* slot = nullptr;
    if (a.kind == MslArg::Kind::member)  // the value sits in the low bytes (little-endian)
      std::memcpy(reinterpret_cast<char*>(packed.data()) + offsets[i], &args[next++].bits,
                  dtype_size(a.dtype));
    if (a.kind == MslArg::Kind::packed) slot = packed.data();
    if (a.kind == MslArg::Kind::stop) slot = &stop_word;
    if (a.kind == MslArg::Kind::buffer) {
      slot = args[next++].pointer;
      if (slot == nullptr)
        fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", name, ": buffer argument '", a.name,
             "' is NULL");
    } else if (a.kind == MslArg::Kind::scalar) {
      scalars[i] = args[next++].bits;
      slot = &scalars[i];
    } else if (a.kind == MslArg::Kind::threadgroup) {
      plan.threadgroup_args.push_back({i, a.count * dtype_size(a.dtype)});
    }
    plan.args.push_back(slot);
  }

  std::mutex mu;
  uint64_t failed_group = UINT64_MAX;
  metile_status status = METILE_OK;
  std::string error;
  std::atomic<bool> stop{false};
  auto run_group = [&](uint64_t g) {
    if (stop.load(std::memory_order_relaxed)) return;
    std::string why;
    metile_status st = METILE_ERROR_DEVICE;
    try {
      if (plan.should_stop())
        why = plan.stop_message(cat("threadgroup ", g, " (not started)"));
      else if (GroupRunner::for_this_thread().run(plan, g, &why))
        return;
      why = cat("[metal-sim] ", why);
    } catch (const Error& e) {
      st = e.status();
      why = e.what();
    }
    stop.store(true, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu);
    // Report the lowest failing group, so the message does not depend on scheduling as long as
    // that group was reached.
    if (g < failed_group) failed_group = g, status = st, error = std::move(why);
  };
  // The pool hands out contiguous runs of groups, a few per thread, rather than single groups:
  // once a group fails or the launch is stopped, each remaining run is left after one check, so a
  // grid of 2^48 groups stops as promptly as a small one.
  const uint64_t runs =
      std::min<uint64_t>(count, uint64_t(host::ThreadPool::instance().concurrency()) * 64);
  const uint64_t per_run = count / runs, extra = count % runs;
  host::parallel_for(runs, 1, kMaxPoolWorkers, [&](uint64_t begin, uint64_t end) {
    for (uint64_t r = begin; r < end; ++r) {
      uint64_t lo = r * per_run + std::min(r, extra), hi = lo + per_run + (r < extra ? 1 : 0);
      for (uint64_t g = lo; g < hi && !stop.load(std::memory_order_relaxed); ++g) run_group(g);
    }
  });
  if (status != METILE_OK) throw Error(status, error);
}

}  // namespace metile::metal_sim
