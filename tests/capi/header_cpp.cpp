// metile.h compiles as C++ (-Wall -Wextra -pedantic -Werror, the oldest standard we support:
// C++11) on its own, its declarations have C linkage, and the shared library links and runs.
#include <metile/metile.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>

static_assert(std::is_standard_layout<metile_type>::value, "metile_type is a C struct");
static_assert(std::is_standard_layout<metile_arg>::value, "metile_arg is a C struct");
static_assert(std::is_same<metile_value, uint32_t>::value, "metile_value is a uint32_t");
static_assert(sizeof(metile_status) == 4 && sizeof(metile_dtype) == 4 && sizeof(metile_op) == 4 &&
                  sizeof(metile_arg_kind) == 4 && sizeof(metile_address_space) == 4,
              "the _FORCE32 sentinels keep every enum 32 bits wide");

namespace {

int failures = 0;

void expect(bool ok, const char* what, int line) {
  if (ok) return;
  std::fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, line, what);
  ++failures;
}
#define EXPECT(cond) expect((cond), #cond, __LINE__)

// Every public type, named once, as a C++ program would use it.
struct EveryType {
  metile_status status;
  metile_dtype dtype;
  metile_address_space address_space;
  metile_type type;
  metile_device* device;
  metile_device_info device_info;
  metile_buffer* buffer;
  metile_op op;
  metile_value value;
  metile_builder* builder;
  metile_program* program;
  metile_kernel* kernel;
  metile_compile_options compile_options;
  metile_kernel_info kernel_info;
  metile_arg_kind arg_kind;
  metile_arg arg;
  metile_launch* launch;
  metile_cache_stats cache_stats;
};

}  // namespace

int main() {
  EveryType all = EveryType();
  EXPECT(metile_version() == METILE_VERSION_NUMBER);
  std::string version = std::to_string(METILE_VERSION_MAJOR) + "." +
                        std::to_string(METILE_VERSION_MINOR) + "." +
                        std::to_string(METILE_VERSION_PATCH);
  EXPECT(version == metile_version_string());
  EXPECT(std::strcmp(metile_last_error(), "") == 0);
  EXPECT(std::strcmp(metile_dtype_name(METILE_DTYPE_BF16), "bf16") == 0);
  EXPECT(std::strcmp(metile_op_name(METILE_OP_TILE_LOAD), "tile_load") == 0);

  all.status = metile_builder_create(&all.builder, nullptr);
  EXPECT(all.status == METILE_ERROR_INVALID_ARGUMENT);
  EXPECT(std::strstr(metile_last_error(), "metile_builder_create") != nullptr);
  EXPECT(metile_builder_create(&all.builder, "k") == METILE_OK);
  EXPECT(metile_builder_finish(all.builder, &all.program) == METILE_OK);
  EXPECT(metile_builder_release(all.builder) == METILE_OK);
  EXPECT(metile_program_release(all.program) == METILE_OK);

  {
    // The initializer macros work as C++11 aggregate initializers too.
    metile_compile_options defaults, by_macro = METILE_COMPILE_OPTIONS_INIT;
    metile_type f32p = METILE_POINTER_TYPE_INIT(METILE_DTYPE_F32);
    metile_arg a = METILE_ARG_BUFFER_INIT(nullptr), n = METILE_ARG_I64_INIT(7);
    metile_cache_stats stats = METILE_CACHE_STATS_INIT;
    metile_compile_options_init(&defaults);
    EXPECT(std::memcmp(&by_macro, &defaults, sizeof defaults) == 0);
    EXPECT(f32p.is_pointer == 1 && a.kind == METILE_ARG_BUFFER && n.i == 7);
    EXPECT(stats.struct_size == sizeof stats);
  }

  if (failures) std::fprintf(stderr, "%d check(s) failed\n", failures);
  else std::printf("header_cpp: ok (metile %s)\n", metile_version_string());
  return failures ? 1 : 0;
}
