/*
 * metile.h compiles as strict C99 (-std=c99 -Wall -Wextra -pedantic -Werror) on its own, every
 * public type is usable from C, and a program linked against the shared library runs. Negative
 * enum values, which C callers may pass and C++ cannot express portably, are checked here.
 */
#include <metile/metile.h>

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define EXPECT(cond)                                            \
  do {                                                          \
    if (!(cond)) {                                              \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                               \
    }                                                           \
  } while (0)

/* Every public type, named once, so a header change that breaks C shows up here. */
struct every_type {
  metile_status status;
  metile_dtype dtype;
  metile_address_space address_space;
  metile_type type;
  metile_device *device;
  metile_device_info device_info;
  metile_buffer *buffer;
  metile_op op;
  metile_value value;
  metile_builder *builder;
  metile_program *program;
  metile_kernel *kernel;
  metile_compile_options compile_options;
  metile_kernel_info kernel_info;
  metile_arg_kind arg_kind;
  metile_arg arg;
  metile_launch *launch;
  metile_cache_stats cache_stats;
};

int main(void) {
  struct every_type all;
  char version[32];
  metile_program *program = NULL;
  char *text = NULL;
  memset(&all, 0, sizeof all);

  EXPECT(metile_version() == METILE_VERSION_NUMBER);
  sprintf(version, "%d.%d.%d", METILE_VERSION_MAJOR, METILE_VERSION_MINOR, METILE_VERSION_PATCH);
  EXPECT(strcmp(metile_version_string(), version) == 0);

  EXPECT(strcmp(metile_last_error(), "") == 0);
  EXPECT(strcmp(metile_status_name(METILE_OK), "METILE_OK") == 0);
  EXPECT(strcmp(metile_status_name((metile_status)-1), "METILE_STATUS_UNKNOWN") == 0);
  EXPECT(strcmp(metile_dtype_name((metile_dtype)-1), "invalid") == 0);
  EXPECT(metile_dtype_size((metile_dtype)-1) == 0);
  EXPECT(strcmp(metile_op_name((metile_op)-1), "invalid") == 0);
  EXPECT(metile_dtype_size(METILE_DTYPE_F16) == 2);
  metile_free(NULL);

  metile_compile_options_init(&all.compile_options);
  EXPECT(all.compile_options.struct_size == sizeof all.compile_options);

  all.status = metile_program_print(NULL, &text);
  EXPECT(all.status == METILE_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(metile_last_error(), "metile_program_print") != NULL);

  all.status = metile_builder_create(&all.builder, "k");
  EXPECT(all.status == METILE_OK);
  all.type.dtype = METILE_DTYPE_F32;
  all.type.is_pointer = 1;
  EXPECT(metile_builder_param(all.builder, "X", &all.type, &all.value) == METILE_OK);
  EXPECT(metile_builder_finish(all.builder, &program) == METILE_OK);
  EXPECT(metile_builder_release(all.builder) == METILE_OK);
  EXPECT(strcmp(metile_program_name(program), "k") == 0);
  EXPECT(metile_program_print(program, &text) == METILE_OK);
  EXPECT(text != NULL && strstr(text, "ptr<f32>") != NULL);
  metile_free(text);
  EXPECT(metile_program_release(program) == METILE_OK);

  {
    /* The initializer macros agree with the init function and the documented defaults. */
    metile_compile_options defaults, by_macro = METILE_COMPILE_OPTIONS_INIT;
    metile_type f32 = METILE_TYPE_INIT(METILE_DTYPE_F32);
    metile_type f32p = METILE_POINTER_TYPE_INIT(METILE_DTYPE_F32);
    metile_device_info info = METILE_DEVICE_INFO_INIT;
    metile_kernel_info kinfo = METILE_KERNEL_INFO_INIT;
    metile_cache_stats stats = METILE_CACHE_STATS_INIT;
    metile_arg a_buf = METILE_ARG_BUFFER_INIT(NULL), a_i = METILE_ARG_I64_INIT(-5),
               a_f = METILE_ARG_F64_INIT(2.5);
    metile_compile_options_init(&defaults);
    EXPECT(by_macro.struct_size == defaults.struct_size);
    EXPECT(by_macro.num_threads == defaults.num_threads);
    EXPECT(by_macro.allow_tf32 == defaults.allow_tf32);
    EXPECT(by_macro.opt_level == defaults.opt_level);
    EXPECT(by_macro.no_cache == defaults.no_cache);
    EXPECT(f32.dtype == METILE_DTYPE_F32 && f32.rank == 0 && f32.is_pointer == 0);
    EXPECT(f32p.is_pointer == 1 && f32p.address_space == METILE_ADDRESS_SPACE_DEVICE);
    EXPECT(info.struct_size == sizeof info && kinfo.struct_size == sizeof kinfo);
    EXPECT(stats.struct_size == sizeof stats);
    EXPECT(a_buf.kind == METILE_ARG_BUFFER && a_buf.buffer == NULL && a_buf.offset == 0);
    EXPECT(a_i.kind == METILE_ARG_I64 && a_i.i == -5);
    EXPECT(a_f.kind == METILE_ARG_F64 && a_f.f == 2.5);
    EXPECT(metile_device_get_info(NULL, &info) == METILE_ERROR_INVALID_ARGUMENT);
  }

  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  else printf("header_c: ok (metile %s)\n", metile_version_string());
  return failures ? 1 : 0;
}
