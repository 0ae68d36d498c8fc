/** \file stage.h
 * The texts a compile can show, by stage: the names METILE_DEBUG, metile_kernel_source and the
 * cache's entries spell them with (the only places a stage is a string), and the pipeline order.
 */
#pragma once

#include <cstdint>
#include <array>
#include <optional>
#include <string_view>

#include "support/name_table.h"

namespace metile {

/** Every text an artifact can carry. The first eight are the pipeline's stages, in order. */
enum class Stage : uint8_t {
  tile_ir, tile_ir_opt, layouts, gpu_ir, gpu_ir_opt, msl, cuda, cpp, msl_signature,
  msl_language,  // the MSL version the kernel needs (MslKernel::language), when not the default
  cuda_tensor_maps,  // the TMA tensor maps a CUDA kernel takes (src/target/tma.h), when any
};

/** The pipeline's stages (METILE_DEBUG generates any of these for any kernel), in order. */
inline constexpr std::array<Stage, 8> kStages = {Stage::tile_ir, Stage::tile_ir_opt, Stage::layouts, Stage::gpu_ir,
                                                 Stage::gpu_ir_opt, Stage::msl, Stage::cuda,
                                                 Stage::cpp};

inline constexpr Named<Stage> kStageNames[] = {
    {Stage::tile_ir, "tile_ir"}, {Stage::tile_ir_opt, "tile_ir_opt"}, {Stage::layouts, "layouts"},
    {Stage::gpu_ir, "gpu_ir"},
    {Stage::gpu_ir_opt, "gpu_ir_opt"}, {Stage::msl, "msl"}, {Stage::cuda, "cuda"},
    {Stage::cpp, "cpp"}, {Stage::msl_signature, "msl_signature"}, {Stage::msl_language, "msl_language"},
    {Stage::cuda_tensor_maps, "cuda_tensor_maps"},
};

inline const char* stage_name(Stage stage) { return name_in(kStageNames, stage); }
/** The stage a name spells (any of kStageNames); nullopt for anything else. */
inline std::optional<Stage> parse_stage(std::string_view name) { return parse_in(kStageNames, name); }

}  // namespace metile
