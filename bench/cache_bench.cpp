// Compile-cache benchmarks (method and results: bench/README-cache.md).
//
// Entry: encode (serialize + deflate + header) and decode (verify + inflate + crc) of a real
// artifact, and the full disk store (temp file + rename) and lookup (read + verify + touch), with
// the compression ratio as a counter. Payloads: the whole artifact of a small cpu kernel (its .so
// and generated C++), where the cpu device works, and libz.so as loaded by this process (a real
// ELF the size of a larger kernel library).
//
// Fresh process: tests/cache/cache_driver.c run as a subprocess on the cpu device, once with an
// empty cache directory (cold: compile) and once with a populated one (warm: disk hit). The
// reported time is the driver's own measurement from device open to the first launch finished,
// i.e. after the library is loaded; counters break it down and add the process's wall time and
// the compile time of a second kernel in the same process (once the device's setup is done).
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <metile/metile.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "cache/cache.h"
#include "support/sha256.h"
#include "handles.h"
#include "driver/compile.h"

extern char** environ;

namespace metile {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string temp_dir() {
  std::string tmpl =
      (std::filesystem::temp_directory_path() / "metile-cache-bench-XXXXXX").string();
  return ::mkdtemp(tmpl.data());
}

std::optional<CachedArtifact> libz_artifact() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&crc32), &info) == 0 || info.dli_fname == nullptr)
    return std::nullopt;
  CachedArtifact a;
  a.artifact.kind = ArtifactKind::shared_object;
  a.artifact.bytes = read_file(std::filesystem::canonical(info.dli_fname).string());
  a.build_seconds = 0.3;
  return a;
}

// The artifact of a small kernel compiled by the cpu device, when there is one.
std::optional<CachedArtifact> cpu_kernel_artifact() {
  metile_device* dev = nullptr;
  if (metile_device_open(&dev, "cpu") != METILE_OK) return std::nullopt;
  Builder b("bench_axpb");
  ValueId x = b.param("X", Type::ptr(DType::f32));
  ValueId offs =
      b.binary(OpKind::ADD,
               b.binary(OpKind::MUL, b.grid(OpKind::PROGRAM_ID, 0), b.const_int(DType::i32, 256)),
               b.arange(kNoValue, 256));
  ValueId p = b.binary(OpKind::ADD, x, offs);
  b.store(p, b.binary(OpKind::MUL, b.load(p, kNoValue, kNoValue), b.const_float(DType::f32, 3)),
          kNoValue);
  CompileOptions no_cache;
  no_cache.no_cache = true;
  auto ck = compile_kernel(dev->impl, std::make_shared<const Program>(b.finish()), no_cache);
  metile_device_release(dev);
  return CachedArtifact{ck->artifact, ck->seconds};
}

const std::map<std::string, CachedArtifact>& payloads() {
  static const auto* all = [] {
    auto* m = new std::map<std::string, CachedArtifact>();
    if (auto z = libz_artifact()) (*m)["libz.so"] = std::move(*z);
    if (auto k = cpu_kernel_artifact()) (*m)["cpu_kernel"] = std::move(*k);
    return m;
  }();
  return *all;
}

void set_payload_counters(benchmark::State& state, size_t raw, size_t compressed) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * raw));
  state.counters["raw_bytes"] = static_cast<double>(raw);
  state.counters["entry_bytes"] = static_cast<double>(compressed);
  state.counters["ratio"] = static_cast<double>(raw) / static_cast<double>(compressed);
}

void BM_EntryEncode(benchmark::State& state, const std::string& name) {
  const CachedArtifact& a = payloads().at(name);
  KeyDigest key = parse_key_hex(sha256_hex(name)).value();
  size_t raw = 0, out = 0;
  for (auto _ : state) {
    Bytes payload = serialize_artifact(a);
    Bytes file = encode_entry(key, PayloadKind::artifact, payload);
    raw = payload.size();
    out = file.size();
    benchmark::DoNotOptimize(file.data());
  }
  set_payload_counters(state, raw, out);
}

void BM_EntryDecode(benchmark::State& state, const std::string& name) {
  KeyDigest key = parse_key_hex(sha256_hex(name)).value();
  Bytes payload = serialize_artifact(payloads().at(name));
  Bytes file = encode_entry(key, PayloadKind::artifact, payload);
  for (auto _ : state) {
    auto raw = decode_entry(file, key, PayloadKind::artifact);
    auto a = deserialize_artifact(*raw);
    benchmark::DoNotOptimize(a->artifact.bytes.data());
  }
  set_payload_counters(state, payload.size(), file.size());
}

void BM_DiskStore(benchmark::State& state, const std::string& name) {
  std::string dir = temp_dir();
  Cache cache;
  cache.set_dir(dir);
  cache.set_enabled(true);
  const CachedArtifact& a = payloads().at(name);
  std::string key = sha256_hex(name);
  for (auto _ : state) cache.store_on_disk(key, a);
  uint64_t written = cache.stats().bytes_written;
  set_payload_counters(state, serialize_artifact(a).size(), written / state.iterations());
  std::filesystem::remove_all(dir);
}

void BM_DiskLookup(benchmark::State& state, const std::string& name) {
  std::string dir = temp_dir();
  Cache cache;
  cache.set_dir(dir);
  cache.set_enabled(true);
  const CachedArtifact& a = payloads().at(name);
  std::string key = sha256_hex(name);
  cache.store_on_disk(key, a);
  uint64_t entry = cache.stats().bytes_written;
  for (auto _ : state) {
    auto hit = cache.find_on_disk(key);
    if (!hit) state.SkipWithError("the entry was not found");
    benchmark::DoNotOptimize(hit);
  }
  set_payload_counters(state, serialize_artifact(a).size(), entry);
  std::filesystem::remove_all(dir);
}

struct DriverResult {
  int status = -1;
  std::map<std::string, double> values;
  double wall_ms = 0;
};

DriverResult run_driver(const std::string& device, const std::string& dir) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "METILE_CACHE", 12) != 0) env.emplace_back(*e);
  env.push_back("METILE_CACHE_DIR=" + dir);
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = METILE_CACHE_DRIVER;
  std::vector<std::string> args = {exe, device};
  std::vector<char*> argv = {args[0].data(), args[1].data(), nullptr};
  int fds[2];
  DriverResult r;
  if (::pipe(fds) != 0) return r;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  auto start = std::chrono::steady_clock::now();
  pid_t pid;
  int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  std::string out;
  if (rc == 0) {
    char buf[1024];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ::close(fds[0]);
  std::istringstream ss(out);
  std::string kv;
  while (ss >> kv) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos) r.values[kv.substr(0, eq)] = std::atof(kv.c_str() + eq + 1);
  }
  return r;
}

// One fresh driver process per iteration; `warm` pre-populates the cache directory.
void BM_FreshProcess(benchmark::State& state, bool warm) {
  std::string dir = temp_dir();
  if (warm && run_driver("cpu", dir).status != 0) {
    state.SkipWithError("the cpu device is not available (or the driver failed)");
    return;
  }
  double wall = 0, compile = 0, launch = 0, open = 0, second = 0;
  for (auto _ : state) {
    if (!warm) {
      state.PauseTiming();
      std::filesystem::remove_all(dir);
      state.ResumeTiming();
    }
    DriverResult r = run_driver("cpu", dir);
    if (r.status != 0 || r.values["from_cache"] != (warm ? 1 : 0)) {
      state.SkipWithError("the driver failed or the cache level was not the expected one");
      break;
    }
    state.SetIterationTime(r.values["total_ms"] / 1e3);
    wall += r.wall_ms;
    compile += r.values["compile_ms"];
    launch += r.values["launch_ms"];
    open += r.values["open_ms"];
    second += r.values["second_compile_ms"];
  }
  double n = static_cast<double>(std::max<int64_t>(state.iterations(), 1));
  state.counters["process_wall_ms"] = wall / n;
  state.counters["open_ms"] = open / n;
  state.counters["compile_or_load_ms"] = compile / n;
  state.counters["first_launch_ms"] = launch / n;
  state.counters["second_compile_or_load_ms"] = second / n;
  std::filesystem::remove_all(dir);
}

int register_all() {
  for (const auto& [name, bytes] : payloads()) {
    benchmark::RegisterBenchmark(("EntryEncode/" + name).c_str(), BM_EntryEncode, name);
    benchmark::RegisterBenchmark(("EntryDecode/" + name).c_str(), BM_EntryDecode, name);
    benchmark::RegisterBenchmark(("DiskStore/" + name).c_str(), BM_DiskStore, name);
    benchmark::RegisterBenchmark(("DiskLookup/" + name).c_str(), BM_DiskLookup, name);
  }
  benchmark::RegisterBenchmark("FreshProcess/cpu/cold_compile", BM_FreshProcess, false)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(5);
  benchmark::RegisterBenchmark("FreshProcess/cpu/warm_first_launch", BM_FreshProcess, true)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(20);
  return 0;
}

}  // namespace
}  // namespace metile

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  metile::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
