// Reading and checking the serialized xla.CompileOptionsProto that jaxlib
// passes to PJRT_Client_Compile and PJRT_Executable_DeserializeAndLoad.
//
// Only the wire format is decoded (no protobuf library): the fields iron acts
// on are read, every other field is skipped by its wire type. Field numbers
// (checked against jaxlib 0.10.2's serialization):
//   CompileOptionsProto: 3 executable_build_options, 4
//     compile_portable_executable, 7 env_option_overrides (map entries
//     {1 key, 2 OptionOverrideProto {1 string, 2 bool, 3 int, 4 double}}).
//   ExecutableBuildOptionsProto: 1 device_ordinal, 4 num_replicas,
//     5 num_partitions, 9 device_assignment.
//   DeviceAssignmentProto: 1 replica_count, 2 computation_count,
//     3 computation_devices {1 replica_device_ids (packed or not)}.
// Errors use XLA's wording where XLA:CPU reports the same condition, so
// tests written against jax's CPU backend see the same text.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt/pjrt_internal.h"

// ---------------------------------------------------------------------------
// Wire format

typedef struct iron_pb_reader {
  const unsigned char *data;
  size_t size;
  size_t pos;
} iron_pb_reader_t;

enum {
  IRON_PB_VARINT = 0,
  IRON_PB_I64 = 1,
  IRON_PB_LEN = 2,
  IRON_PB_I32 = 5,
};

static iron_status_t iron_pb_varint(iron_pb_reader_t *r, uint64_t *out) {
  uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (r->pos >= r->size)
      return IRON_ERR(INVALID_ARGUMENT,
                      "CompileOptionsProto: truncated varint at byte %zu",
                      r->pos);
    unsigned char byte = r->data[r->pos++];
    value |= (uint64_t)(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *out = value;
      return IRON_OK;
    }
  }
  return IRON_ERR(INVALID_ARGUMENT,
                  "CompileOptionsProto: varint longer than 10 bytes at %zu",
                  r->pos);
}

// One field: its number and wire type; for LEN fields the payload as a
// sub-reader, for fixed-width ones the raw bits, for varints the value.
typedef struct iron_pb_field {
  uint32_t number;
  int wire;
  uint64_t value;
  iron_pb_reader_t payload;
} iron_pb_field_t;

static iron_status_t iron_pb_next(iron_pb_reader_t *r, iron_pb_field_t *out) {
  uint64_t key = 0;
  IRON_RETURN_IF_ERROR_PLAIN(iron_pb_varint(r, &key));
  out->number = (uint32_t)(key >> 3);
  out->wire = (int)(key & 7);
  out->value = 0;
  out->payload = (iron_pb_reader_t){0};
  switch (out->wire) {
    case IRON_PB_VARINT:
      return iron_pb_varint(r, &out->value);
    case IRON_PB_I64:
    case IRON_PB_I32: {
      size_t width = out->wire == IRON_PB_I64 ? 8 : 4;
      if (r->size - r->pos < width) break;
      for (size_t i = 0; i < width; ++i)
        out->value |= (uint64_t)r->data[r->pos + i] << (8 * i);
      r->pos += width;
      return IRON_OK;
    }
    case IRON_PB_LEN: {
      uint64_t length = 0;
      IRON_RETURN_IF_ERROR_PLAIN(iron_pb_varint(r, &length));
      if (length > r->size - r->pos) break;
      out->payload.data = r->data + r->pos;
      out->payload.size = (size_t)length;
      r->pos += (size_t)length;
      return IRON_OK;
    }
    default:
      return IRON_ERR(INVALID_ARGUMENT,
                      "CompileOptionsProto: unsupported wire type %d at byte "
                      "%zu",
                      out->wire, r->pos);
  }
  return IRON_ERR(INVALID_ARGUMENT,
                  "CompileOptionsProto: field %u runs past the end (byte %zu "
                  "of %zu)",
                  out->number, r->pos, r->size);
}

// ---------------------------------------------------------------------------
// Option overrides (jax's compiler_options=...)

typedef enum iron_pjrt_option_type {
  IRON_PJRT_OPTION_BOOL,
  IRON_PJRT_OPTION_INT32,
  IRON_PJRT_OPTION_INT64,
  IRON_PJRT_OPTION_FLOAT,
  IRON_PJRT_OPTION_STRING,
} iron_pjrt_option_type_t;

// XLA debug options whose value type iron checks, as XLA does. Options of
// the xla_ namespace not listed here are accepted and ignored (they tune
// XLA's own compiler passes; iron has no list of all of them).
static const struct {
  const char *name;
  iron_pjrt_option_type_t type;
} iron_pjrt_known_options[] = {
    {"xla_embed_ir_in_executable", IRON_PJRT_OPTION_BOOL},
    {"xla_dump_max_hlo_modules", IRON_PJRT_OPTION_INT32},
    {"xla_dump_to", IRON_PJRT_OPTION_STRING},
    {"xla_dump_hlo_as_text", IRON_PJRT_OPTION_BOOL},
    {"xla_dump_hlo_as_proto", IRON_PJRT_OPTION_BOOL},
    {"xla_dump_hlo_pass_re", IRON_PJRT_OPTION_STRING},
    {"xla_dump_hlo_module_re", IRON_PJRT_OPTION_STRING},
    {"xla_disable_hlo_passes", IRON_PJRT_OPTION_STRING},
    {"xla_enable_hlo_passes_only", IRON_PJRT_OPTION_STRING},
    {"xla_backend_optimization_level", IRON_PJRT_OPTION_INT32},
    {"xla_llvm_disable_expensive_passes", IRON_PJRT_OPTION_BOOL},
    {"xla_cpu_enable_fast_math", IRON_PJRT_OPTION_BOOL},
    {"xla_cpu_fast_math_honor_nans", IRON_PJRT_OPTION_BOOL},
    {"xla_cpu_fast_math_honor_infs", IRON_PJRT_OPTION_BOOL},
    {"xla_cpu_use_thunk_runtime", IRON_PJRT_OPTION_BOOL},
    {"xla_cpu_multi_thread_eigen", IRON_PJRT_OPTION_BOOL},
    {"xla_force_host_platform_device_count", IRON_PJRT_OPTION_INT32},
    {"xla_gpu_auto_spmd_partitioning_memory_budget_ratio",
     IRON_PJRT_OPTION_FLOAT},
    {"xla_gpu_enable_command_buffer", IRON_PJRT_OPTION_STRING},
    {"xla_gpu_cuda_data_dir", IRON_PJRT_OPTION_STRING},
    {"xla_gpu_autotune_level", IRON_PJRT_OPTION_INT32},
    {"xla_gpu_enable_latency_hiding_scheduler", IRON_PJRT_OPTION_BOOL},
    {"xla_gpu_enable_triton_gemm", IRON_PJRT_OPTION_BOOL},
    {"xla_gpu_deterministic_ops", IRON_PJRT_OPTION_BOOL},
    {"xla_gpu_exhaustive_tiling_search", IRON_PJRT_OPTION_BOOL},
    {"xla_test_all_input_layouts", IRON_PJRT_OPTION_BOOL},
    {"xla_detailed_logging", IRON_PJRT_OPTION_BOOL},
    {"xla_enable_dumping", IRON_PJRT_OPTION_BOOL},
    {"xla_allow_excess_precision", IRON_PJRT_OPTION_BOOL},
};

// The value of an OptionOverrideProto as XLA prints it in its error.
typedef struct iron_pjrt_option_value {
  int kind;  // field number: 1 string, 2 bool, 3 int, 4 double; 0 unset
  const char *string;
  size_t string_size;
  uint64_t bits;
} iron_pjrt_option_value_t;

static void iron_pjrt_option_value_text(const iron_pjrt_option_value_t *value,
                                        char *text, size_t size) {
  switch (value->kind) {
    case 1:
      snprintf(text, size, "%.*s",
               (int)(value->string_size > 200 ? 200 : value->string_size),
               value->string);
      break;
    case 2:
      snprintf(text, size, "%d", value->bits != 0);
      break;
    case 3:
      snprintf(text, size, "%" PRId64, (int64_t)value->bits);
      break;
    case 4: {
      double d;
      memcpy(&d, &value->bits, sizeof(d));
      snprintf(text, size, "%g", d);
      break;
    }
    default:
      snprintf(text, size, "%s", "");
  }
}

static iron_status_t iron_pjrt_option_check(const char *key, size_t key_size,
                                            const iron_pjrt_option_value_t *v) {
  // jax moves the build-level options (exec_time_optimization_effort,
  // optimization_level, ...) out of the overrides itself; what is left must
  // be an XLA debug option, all of which are named xla_*.
  if (key_size < 4 || memcmp(key, "xla_", 4) != 0)
    return IRON_ERR(INVALID_ARGUMENT, "No such compile option: '%.*s'",
                    (int)(key_size > 200 ? 200 : key_size), key);
  for (size_t i = 0; i < sizeof(iron_pjrt_known_options) /
                             sizeof(iron_pjrt_known_options[0]);
       ++i) {
    const char *name = iron_pjrt_known_options[i].name;
    if (strlen(name) != key_size || memcmp(name, key, key_size) != 0) continue;
    iron_pjrt_option_type_t type = iron_pjrt_known_options[i].type;
    bool ok = false;
    const char *type_name = "";
    switch (type) {
      case IRON_PJRT_OPTION_BOOL:
        ok = v->kind == 2;
        type_name = "bool";
        break;
      case IRON_PJRT_OPTION_INT32:
        ok = v->kind == 3 && (int64_t)v->bits >= INT32_MIN &&
             (int64_t)v->bits <= INT32_MAX;
        type_name = "int32";
        break;
      case IRON_PJRT_OPTION_INT64:
        ok = v->kind == 3;
        type_name = "int64";
        break;
      case IRON_PJRT_OPTION_FLOAT:
        ok = v->kind == 4 || v->kind == 3;
        type_name = "float";
        break;
      case IRON_PJRT_OPTION_STRING:
        ok = v->kind == 1;
        type_name = "string";
        break;
    }
    if (ok) return IRON_OK;
    char text[256];
    iron_pjrt_option_value_text(v, text, sizeof(text));
    return IRON_ERR(INVALID_ARGUMENT,
                    "While setting option %s, '%s' is not a valid %s value.",
                    name, text, type_name);
  }
  return IRON_OK;
}

static iron_status_t iron_pjrt_parse_override(iron_pb_reader_t entry) {
  const char *key = NULL;
  size_t key_size = 0;
  iron_pjrt_option_value_t value = {0};
  while (entry.pos < entry.size) {
    iron_pb_field_t field;
    IRON_RETURN_IF_ERROR_PLAIN(iron_pb_next(&entry, &field));
    if (field.number == 1 && field.wire == IRON_PB_LEN) {
      key = (const char *)field.payload.data;
      key_size = field.payload.size;
    } else if (field.number == 2 && field.wire == IRON_PB_LEN) {
      iron_pb_reader_t v = field.payload;
      while (v.pos < v.size) {
        iron_pb_field_t vf;
        IRON_RETURN_IF_ERROR_PLAIN(iron_pb_next(&v, &vf));
        if (vf.number < 1 || vf.number > 4) continue;
        value.kind = (int)vf.number;
        value.bits = vf.value;
        value.string = (const char *)vf.payload.data;
        value.string_size = vf.payload.size;
      }
    }
  }
  if (key == NULL) key = "";
  return iron_pjrt_option_check(key, key_size, &value);
}

// ---------------------------------------------------------------------------
// Device assignment and build options

static iron_status_t iron_pjrt_parse_assignment(
    iron_pb_reader_t r, iron_pjrt_compile_options_t *options) {
  options->has_device_assignment = true;
  options->num_assigned = 0;
  while (r.pos < r.size) {
    iron_pb_field_t field;
    IRON_RETURN_IF_ERROR_PLAIN(iron_pb_next(&r, &field));
    if (field.number != 3 || field.wire != IRON_PB_LEN) continue;
    // One ComputationDevice per computation (partition), listing the device
    // of each replica.
    iron_pb_reader_t computation = field.payload;
    while (computation.pos < computation.size) {
      iron_pb_field_t ids;
      IRON_RETURN_IF_ERROR_PLAIN(iron_pb_next(&computation, &ids));
      if (ids.number != 1) continue;
      if (ids.wire == IRON_PB_VARINT) {
        if (options->num_assigned < IRON_PJRT_MAX_ASSIGNED)
          options->assigned[options->num_assigned] = (int64_t)ids.value;
        options->num_assigned++;
      } else if (ids.wire == IRON_PB_LEN) {
        iron_pb_reader_t packed = ids.payload;
        while (packed.pos < packed.size) {
          uint64_t id = 0;
          IRON_RETURN_IF_ERROR_PLAIN(iron_pb_varint(&packed, &id));
          if (options->num_assigned < IRON_PJRT_MAX_ASSIGNED)
            options->assigned[options->num_assigned] = (int64_t)id;
          options->num_assigned++;
        }
      }
    }
  }
  return IRON_OK;
}

static iron_status_t iron_pjrt_parse_build_options(
    iron_pb_reader_t r, iron_pjrt_compile_options_t *options) {
  while (r.pos < r.size) {
    iron_pb_field_t field;
    IRON_RETURN_IF_ERROR_PLAIN(iron_pb_next(&r, &field));
    switch (field.number) {
      case 1:
        if (field.wire == IRON_PB_VARINT)
          options->device_ordinal = (int64_t)field.value;
        break;
      case 4:
        if (field.wire == IRON_PB_VARINT)
          options->num_replicas = (int64_t)field.value;
        break;
      case 5:
        if (field.wire == IRON_PB_VARINT)
          options->num_partitions = (int64_t)field.value;
        break;
      case 9:
        if (field.wire == IRON_PB_LEN)
          IRON_RETURN_IF_ERROR_PLAIN(
              iron_pjrt_parse_assignment(field.payload, options));
        break;
      default:
        break;
    }
  }
  return IRON_OK;
}

iron_status_t iron_pjrt_compile_options_parse(
    const void *bytes, size_t size, iron_pjrt_compile_options_t *out_options) {
  iron_pjrt_compile_options_t options = {.device_ordinal = -1,
                                         .num_replicas = 1,
                                         .num_partitions = 1};
  iron_pb_reader_t r = {.data = bytes, .size = bytes ? size : 0};
  bool saw_replicas = false, saw_partitions = false;
  while (r.pos < r.size) {
    iron_pb_field_t field;
    IRON_RETURN_IF_ERROR_PLAIN(iron_pb_next(&r, &field));
    if (field.number == 3 && field.wire == IRON_PB_LEN) {
      // proto3 leaves 0 unsent, so "absent" and 0 read the same: both mean
      // the default of 1 (XLA:CPU CHECK-fails on 0).
      options.num_replicas = 0;
      options.num_partitions = 0;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_pjrt_parse_build_options(field.payload, &options));
      saw_replicas = options.num_replicas != 0;
      saw_partitions = options.num_partitions != 0;
      if (!saw_replicas) options.num_replicas = 1;
      if (!saw_partitions) options.num_partitions = 1;
    } else if (field.number == 4 && field.wire == IRON_PB_VARINT) {
      options.compile_portable_executable = field.value != 0;
    } else if (field.number == 7 && field.wire == IRON_PB_LEN) {
      IRON_RETURN_IF_ERROR_PLAIN(iron_pjrt_parse_override(field.payload));
    }
  }
  *out_options = options;
  return IRON_OK;
}

iron_status_t iron_pjrt_compile_options_select_device(
    PJRT_Client *client, const iron_pjrt_compile_options_t *options,
    PJRT_Device **out_device) {
  if (options->num_replicas < 0 || options->num_partitions < 0)
    return IRON_ERR(INVALID_ARGUMENT,
                    "num_replicas (%" PRId64 ") and num_partitions (%" PRId64
                    ") must be positive",
                    options->num_replicas, options->num_partitions);
  // Every device of the assignment must exist: the default assignment of
  // R x P devices is ids 0 .. R*P-1, as XLA:CPU's.
  int64_t needed = options->num_replicas;
  if (options->num_partitions > 0 && needed > INT64_MAX / options->num_partitions)
    return IRON_ERR(INVALID_ARGUMENT, "num_replicas x num_partitions overflows");
  needed *= options->num_partitions;
  if (options->has_device_assignment) {
    size_t shown = options->num_assigned < IRON_PJRT_MAX_ASSIGNED
                       ? options->num_assigned
                       : IRON_PJRT_MAX_ASSIGNED;
    for (size_t i = 0; i < shown; ++i) {
      int64_t id = options->assigned[i];
      bool found = false;
      for (size_t d = 0; d < client->num_devices; ++d)
        if (client->devices[d]->description.id == id) found = true;
      if (!found)
        return IRON_ERR(INVALID_ARGUMENT,
                        "No matching device found for device_id %" PRId64, id);
    }
  } else {
    for (int64_t id = 0; id < needed; ++id) {
      bool found = false;
      for (size_t d = 0; d < client->num_devices; ++d)
        if (client->devices[d]->description.id == id) found = true;
      if (!found)
        return IRON_ERR(INVALID_ARGUMENT,
                        "No matching device found for device_id %" PRId64, id);
    }
  }
  if (needed != 1)
    return IRON_ERR(UNIMPLEMENTED,
                    "ironjax runs a program on one device: num_replicas=%" PRId64
                    " x num_partitions=%" PRId64 " is not supported",
                    options->num_replicas, options->num_partitions);
  PJRT_Device *device = client->devices[0];
  if (options->has_device_assignment && options->num_assigned >= 1) {
    for (size_t d = 0; d < client->num_devices; ++d)
      if (client->devices[d]->description.id == options->assigned[0])
        device = client->devices[d];
  } else if (options->device_ordinal >= 0 &&
             (size_t)options->device_ordinal < client->num_devices) {
    device = client->devices[options->device_ordinal];
  }
  *out_device = device;
  return IRON_OK;
}
