#include "driver/compile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cache/cache.h"
#include "driver/stage_text.h"
#include "support/debug_dump.h"
#include "passes/pass.h"
#include "passes/tile/tile_pipeline.h"
#include "runtime/hidden_args.h"
#include "support/env.h"
#include "support/text.h"
#include "support/error.h"
#include "support/log.h"

namespace metile {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", seconds * 1e3);
  return buf;
}

// The stages the device produced, then those METILE_DEBUG names that it did not (MSL for a
// kernel that runs on cpu, say): generated for the dump only.
void dump_sources(const CompiledKernel& ck) {
  const std::string& kernel = ck.program->name;
  for (const auto& [stage, text] : ck.artifact.sources) debug_dump(stage_name(stage), kernel, text);
  for (Stage s : debug_stages()) {
    if (s == Stage::tile_ir || ck.artifact.sources.count(s)) continue;
    try {
      debug_dump(stage_name(s), kernel, stage_text(s, *ck.program, ck.options));
    } catch (const Error& e) {
      warn_once(cat("METILE_DEBUG:", stage_name(s), ":", kernel),
                cat("METILE_DEBUG: no ", stage_name(s), " text for kernel ", kernel, ": ", e.what()));
    }
  }
}

void log_compile(const CompiledKernel& ck, const std::string& how) {
  if (!log_enabled(LogLevel::info)) return;
  log(LogLevel::info, cat(ck.program->name, " on ", ck.device->info().name, ": ", how));
}

// Loads `artifact` for the pipeline's program, behind the hidden-argument wrapper.
std::shared_ptr<Kernel> load_kernel(Device& device, const std::shared_ptr<Device>& owner,
                                    const TilePipelineResult& lowered,
                                    const CompileOptions& options, const Artifact& artifact) {
  return with_hidden_args(device.load(lowered.program, options, artifact), lowered.program,
                          lowered.hidden, owner);
}

}  // namespace

std::shared_ptr<CompiledKernel> compile_kernel(Cache& cache, const std::shared_ptr<Device>& device,
                                               std::shared_ptr<const Program> program,
                                               const CompileOptions& requested) {
  auto start = Clock::now();
  CompileOptions options = requested;
  if (env_string("METILE_CHECK") == "1") options.check_bounds = true;
  // METILE_GPU_OFF: more passes (or pieces) not to run, for differential tests (the cache key
  // includes them).
  const std::string gpu_off = env_string("METILE_GPU_OFF");  // split_list's views point into it
  for (std::string_view name : split_list(gpu_off))
    if (!options.disables(name)) options.disabled_passes.emplace_back(name);
  check_pass_names(options.disabled_passes);
  // METILE_GPU_ON: opt-in passes to run (kOptInPasses; the cache key includes them).
  const std::string gpu_on = env_string("METILE_GPU_ON");
  for (std::string_view name : split_list(gpu_on))
    if (std::find(options.enabled_passes.begin(), options.enabled_passes.end(), name) == options.enabled_passes.end())
      options.enabled_passes.emplace_back(name);
  check_enabled_pass_names(options.enabled_passes);
  if (options.check_bounds && options.unchecked)
    fail(METILE_ERROR_INVALID_ARGUMENT, "compile", program->name,
         ": check_bounds and unchecked exclude each other");
  const bool device_checks = device->info().checks_accesses;
  const bool whole_tiles = device->info().whole_tiles_in_order;
  const bool lowers_fp8 = device->info().lowers_fp8_dots;
  const uint64_t tg_bytes = device->info().threadgroup_memory_bytes;
  auto ck = std::make_shared<CompiledKernel>();
  ck->program = program;
  ck->options = options;
  ck->device = device;
  ck->cache_key = cache.key(*device, *program, options);
  debug_dump(stage_name(Stage::tile_ir), program->name, print(*program));
  const bool use_cache = !options.no_cache;
  const bool use_disk = use_cache && !device->cache_identity().empty();

  if (use_cache) {
    if (auto hit = cache.find_in_memory(ck->cache_key, device)) {
      ck->kernel = std::move(hit->kernel);
      ck->artifact = std::move(hit->artifact);
      ck->from_cache = true;
      ck->seconds = seconds_since(start);
      dump_sources(*ck);
      log_compile(*ck, "memory cache hit");
      return ck;
    }
  }
  if (use_disk) {
    if (auto hit = cache.find_on_disk(ck->cache_key)) {
      ck->artifact = std::move(hit->entry.artifact);
      dump_sources(*ck);
      try {
        ck->kernel = load_kernel(*device, device,
                                 run_tile_pipeline(*program, options, device_checks, whole_tiles, lowers_fp8, tg_bytes),
                                 options, ck->artifact);
      } catch (const Error& e) {
        // An entry that verifies but no longer loads (say, a library it links was removed) is
        // as good as absent: rebuild it, and the new entry replaces it.
        log(LogLevel::info, cat("compile cache: cached ", program->name,
                                " did not load; rebuilding (", e.what(), ")"));
      }
      if (ck->kernel) {
        cache.count_disk_hit(*hit);
        cache.remember(ck->cache_key, device, {ck->kernel, ck->artifact, hit->entry.build_seconds});
        ck->from_cache = true;
        ck->seconds = seconds_since(start);
        log_compile(*ck, "loaded from disk cache in " + ms(ck->seconds));
        return ck;
      }
    }
  }

  if (use_cache) cache.count_miss();
  auto build_start = Clock::now();
  // Backends see the Tile IR pipeline's output; the kernel keeps the user's program (its
  // signature and text), and the pipeline's text is the artifact's "tile_ir_opt" stage.
  TilePipelineResult lowered = run_tile_pipeline(*program, options, device_checks, whole_tiles, lowers_fp8, tg_bytes);
  ck->artifact = device->build(*lowered.program, options);
  ck->artifact.sources[Stage::tile_ir_opt] = print(*lowered.program);
  double build_seconds = seconds_since(build_start);
  dump_sources(*ck);
  ck->kernel = load_kernel(*device, device, lowered, options, ck->artifact);
  if (use_disk) cache.store_on_disk(ck->cache_key, {ck->artifact, build_seconds});
  if (use_cache) cache.remember(ck->cache_key, device, {ck->kernel, ck->artifact, build_seconds});
  ck->seconds = seconds_since(start);
  log_compile(*ck, "compiled in " + ms(ck->seconds));
  return ck;
}

std::shared_ptr<CompiledKernel> compile_kernel(const std::shared_ptr<Device>& device,
                                               std::shared_ptr<const Program> program,
                                               const CompileOptions& options) {
  return compile_kernel(global_cache(), device, std::move(program), options);
}

}  // namespace metile
