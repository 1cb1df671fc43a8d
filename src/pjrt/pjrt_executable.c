// Compile, executables and Execute.
//
// Compile accepts the "mlir" format only: jaxlib always sends a StableHLO
// portable artifact (VHLO bytecode). The CompileOptionsProto is read for the
// device assignment and checked (pjrt_compile_options.c): one replica and
// one partition, on the assigned device.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt/pjrt_internal.h"

// ---------------------------------------------------------------------------
// IRON_DUMP_DIR: every artifact Compile receives is written to
// $IRON_DUMP_DIR/<module name>.<fingerprint>.mlirbc, or
// $IRON_DUMP_DIR/uncompiled.<fnv-1a hash>.mlirbc when it failed to compile,
// so real artifacts can be captured for tests and bug reports.

uint64_t iron_pjrt_fnv1a(const void *data, size_t size) {
  const unsigned char *bytes = data;
  uint64_t hash = 14695981039346656037ull;  // the FNV-1a 64 offset basis
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

static void iron_pjrt_dump_artifact(const char *name, const char *fingerprint,
                                    const void *code, size_t size) {
  const char *dir = getenv("IRON_DUMP_DIR");
  if (dir == NULL || dir[0] == '\0') return;
  char safe_name[128];
  size_t n = 0;
  for (const char *p = name; *p && n + 1 < sizeof(safe_name); ++p)
    safe_name[n++] = (*p == '/' || *p == '\\') ? '_' : *p;
  safe_name[n] = '\0';
  char path[4096];
  int len = snprintf(path, sizeof(path), "%s/%s.%s.mlirbc", dir, safe_name,
                     fingerprint);
  if (len < 0 || (size_t)len >= sizeof(path)) return;
  // A debugging aid: failures to write are not the compile's failure.
  FILE *file = fopen(path, "wb");
  if (file == NULL) return;
  fwrite(code, 1, size, file);
  fclose(file);
}

// ---------------------------------------------------------------------------
// Compile

iron_pjrt_blob_t *iron_pjrt_blob_create(const void *data,
                                               size_t size) {
  iron_pjrt_blob_t *blob = malloc(sizeof(*blob) + size);
  if (blob == NULL) return NULL;
  atomic_init(&blob->refs, 1);
  blob->size = size;
  if (size) memcpy(blob->data, data, size);
  return blob;
}

iron_pjrt_blob_t *iron_pjrt_blob_retain(iron_pjrt_blob_t *blob) {
  if (blob) atomic_fetch_add(&blob->refs, 1);
  return blob;
}

void iron_pjrt_blob_release(iron_pjrt_blob_t *blob) {
  if (blob && atomic_fetch_sub(&blob->refs, 1) == 1) free(blob);
}

iron_status_t iron_pjrt_compile_artifact(PJRT_Client *client, const void *code,
                                         size_t code_size,
                                         const void *compile_options,
                                         size_t compile_options_size,
                                         PJRT_LoadedExecutable **out_loaded) {
  iron_pjrt_compile_options_t parsed;
  IRON_RETURN_IF_ERROR_PLAIN(iron_pjrt_compile_options_parse(
      compile_options, compile_options_size, &parsed));
  PJRT_Device *device = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_pjrt_compile_options_select_device(client, &parsed, &device));
  iron_compile_options_t options = {.device = device->device};
  iron_executable_t *executable = NULL;
  iron_status_t status = iron_executable_compile(client->runtime, code,
                                                 code_size, &options,
                                                 &executable);
  if (status != IRON_OK) {
    char hash[32];
    snprintf(hash, sizeof(hash), "%016llx",
             (unsigned long long)iron_pjrt_fnv1a(code, code_size));
    iron_pjrt_dump_artifact("uncompiled", hash, code, code_size);
    return status;
  }
  iron_pjrt_dump_artifact(iron_executable_name(executable),
                          iron_executable_fingerprint(executable), code,
                          code_size);
  // Arguments and results placed in a memory kind (memory_kind=...,
  // compute_on) must name one of the device's memories.
  uint32_t num_in = iron_executable_num_inputs(executable);
  uint32_t num_out = iron_executable_num_outputs(executable);
  for (uint32_t i = 0; i < num_in + num_out; ++i) {
    bool is_in = i < num_in;
    const char *kind =
        is_in ? iron_executable_input_memory_kind(executable, i)
              : iron_executable_output_memory_kind(executable, i - num_in);
    if (kind == NULL || iron_pjrt_device_find_memory(device, kind) != NULL)
      continue;
    // The message first: `kind` belongs to the executable.
    iron_status_t st = IRON_ERR(
        UNIMPLEMENTED,
        "%s %u of the program is placed in memory kind \"%s\", which %s "
        "does not have",
        is_in ? "argument" : "result", is_in ? i : i - num_in, kind,
        device->description.text);
    iron_executable_release(executable);
    return st;
  }

  PJRT_LoadedExecutable *loaded = calloc(1, sizeof(*loaded));
  iron_pjrt_blob_t *artifact = iron_pjrt_blob_create(code, code_size);
  iron_pjrt_blob_t *options_blob = iron_pjrt_blob_create(
      compile_options, compile_options ? compile_options_size : 0);
  if (loaded == NULL || artifact == NULL || options_blob == NULL) {
    free(loaded);
    iron_pjrt_blob_release(artifact);
    iron_pjrt_blob_release(options_blob);
    iron_executable_release(executable);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  loaded->artifact = artifact;
  loaded->compile_options = options_blob;
  loaded->client = client;
  loaded->device = device;
  loaded->executable = executable;
  atomic_init(&loaded->deleted, false);
  loaded->logical_ids[0].replica = 0;
  loaded->logical_ids[0].partition = 0;
  *out_loaded = loaded;
  return IRON_OK;
}

static iron_status_t iron_pjrt_compile(PJRT_Client_Compile_Args *args,
                                       PJRT_LoadedExecutable **out_executable) {
  const PJRT_Program *program = args->program;
  if (program == NULL || program->code == NULL)
    return IRON_ERR(INVALID_ARGUMENT, "PJRT_Client_Compile: no program");
  const char *format = program->format ? program->format : "";
  size_t format_size = program->format ? program->format_size : 0;
  if (format_size != 4 || memcmp(format, "mlir", 4) != 0)
    return IRON_ERR(INVALID_ARGUMENT,
                    "ironjax compiles programs in the \"mlir\" format (a "
                    "StableHLO portable artifact), not \"%.*s\"",
                    (int)(format_size > 64 ? 64 : format_size), format);
  return iron_pjrt_compile_artifact(args->client, program->code,
                                    program->code_size, args->compile_options,
                                    args->compile_options_size, out_executable);
}

PJRT_Error *iron_pjrt_Client_Compile(PJRT_Client_Compile_Args *args) {
  PJRT_LoadedExecutable *loaded = NULL;
  iron_status_t status = iron_pjrt_compile(args, &loaded);
  if (status != IRON_OK) return iron_pjrt_error_from_status(status);
  args->executable = loaded;
  return NULL;
}

// ---------------------------------------------------------------------------
// PJRT_Executable: the compiled program's metadata, one per GetExecutable.

static void iron_pjrt_executable_free(PJRT_Executable *executable) {
  if (executable == NULL) return;
  free(executable->output_memory_kinds);
  free(executable->output_memory_kind_sizes);
  free(executable->input_memory_kinds);
  free(executable->input_memory_kind_sizes);
  free(executable->output_types);
  free(executable->output_ranks);
  free(executable->output_dims);
  iron_pjrt_blob_release(executable->artifact);
  iron_pjrt_blob_release(executable->compile_options);
  if (executable->executable != NULL)
    iron_executable_release(executable->executable);
  free(executable);
}

static iron_status_t iron_pjrt_executable_make(
    iron_executable_t *exe, iron_pjrt_blob_t *artifact,
    iron_pjrt_blob_t *compile_options, PJRT_Executable **out) {
  PJRT_Executable *executable = calloc(1, sizeof(*executable));
  if (executable == NULL) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  executable->artifact = iron_pjrt_blob_retain(artifact);
  executable->compile_options = iron_pjrt_blob_retain(compile_options);
  iron_executable_retain(exe);
  executable->executable = exe;
  size_t num_outputs = iron_executable_num_outputs(exe);
  size_t num_inputs = iron_executable_num_inputs(exe);
  executable->num_outputs = num_outputs;
  executable->num_inputs = num_inputs;
  // calloc(0) may return NULL; allocate at least one element so NULL means
  // out of memory.
  executable->output_memory_kinds = calloc(num_outputs + 1, sizeof(char *));
  executable->output_memory_kind_sizes = calloc(num_outputs + 1, sizeof(size_t));
  executable->input_memory_kinds = calloc(num_inputs + 1, sizeof(char *));
  executable->input_memory_kind_sizes = calloc(num_inputs + 1, sizeof(size_t));
  executable->output_types = calloc(num_outputs + 1, sizeof(PJRT_Buffer_Type));
  executable->output_ranks = calloc(num_outputs + 1, sizeof(size_t));
  size_t total_rank = 0;
  for (size_t i = 0; i < num_outputs; ++i) {
    iron_dtype_t dtype = IRON_DTYPE_INVALID;
    int32_t rank = 0;
    const int64_t *dims = NULL;
    iron_executable_output_type(exe, (uint32_t)i, &dtype, &rank, &dims);
    if (rank < 0) rank = 0;
    total_rank += (size_t)rank;
  }
  executable->output_dims = calloc(total_rank + 1, sizeof(int64_t));
  if (!executable->output_memory_kinds || !executable->output_memory_kind_sizes ||
      !executable->input_memory_kinds || !executable->input_memory_kind_sizes ||
      !executable->output_types || !executable->output_ranks ||
      !executable->output_dims) {
    iron_pjrt_executable_free(executable);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  size_t offset = 0;
  for (size_t i = 0; i < num_outputs; ++i) {
    iron_dtype_t dtype = IRON_DTYPE_INVALID;
    int32_t rank = 0;
    const int64_t *dims = NULL;
    iron_executable_output_type(exe, (uint32_t)i, &dtype, &rank, &dims);
    if (rank < 0) rank = 0;
    executable->output_types[i] = (PJRT_Buffer_Type)iron_dtype_to_pjrt(dtype);
    executable->output_ranks[i] = (size_t)rank;
    for (int32_t d = 0; d < rank; ++d)
      executable->output_dims[offset++] = dims[d];
    const char *kind = iron_executable_output_memory_kind(exe, (uint32_t)i);
    if (kind == NULL) kind = IRON_PJRT_MEMORY_KIND;
    executable->output_memory_kinds[i] = kind;
    executable->output_memory_kind_sizes[i] = strlen(kind);
  }
  for (size_t i = 0; i < num_inputs; ++i) {
    const char *kind = iron_executable_input_memory_kind(exe, (uint32_t)i);
    if (kind == NULL) kind = IRON_PJRT_MEMORY_KIND;
    executable->input_memory_kinds[i] = kind;
    executable->input_memory_kind_sizes[i] = strlen(kind);
  }
  *out = executable;
  return IRON_OK;
}

PJRT_Error *iron_pjrt_Executable_Destroy(PJRT_Executable_Destroy_Args *args) {
  iron_pjrt_executable_free(args->executable);
  return NULL;
}

PJRT_Error *iron_pjrt_Executable_Name(PJRT_Executable_Name_Args *args) {
  const char *name = iron_executable_name(args->executable->executable);
  if (name == NULL) name = "";
  args->executable_name = name;
  args->executable_name_size = strlen(name);
  return NULL;
}

PJRT_Error *iron_pjrt_Executable_NumReplicas(
    PJRT_Executable_NumReplicas_Args *args) {
  args->num_replicas = 1;
  return NULL;
}

PJRT_Error *iron_pjrt_Executable_NumPartitions(
    PJRT_Executable_NumPartitions_Args *args) {
  args->num_partitions = 1;
  return NULL;
}

PJRT_Error *iron_pjrt_Executable_NumOutputs(
    PJRT_Executable_NumOutputs_Args *args) {
  args->num_outputs = args->executable->num_outputs;
  return NULL;
}

PJRT_Error *iron_pjrt_Executable_SizeOfGeneratedCodeInBytes(
    PJRT_Executable_SizeOfGeneratedCodeInBytes_Args *args) {
  args->size_in_bytes = 0;  // no generated code on the host device
  return NULL;
}

PJRT_Error *iron_pjrt_Executable_OutputMemoryKinds(
    PJRT_Executable_OutputMemoryKinds_Args *args) {
  // IFRT requires one kind per result of @main.
  PJRT_Executable *executable = args->executable;
  args->num_outputs = executable->num_outputs;
  args->memory_kinds = executable->output_memory_kinds;
  args->memory_kind_sizes = executable->output_memory_kind_sizes;
  return NULL;
}

PJRT_Error *iron_pjrt_Executable_ParameterMemoryKinds(
    PJRT_Executable_ParameterMemoryKinds_Args *args) {
  PJRT_Executable *executable = args->executable;
  args->num_parameters = executable->num_inputs;
  args->memory_kinds = executable->input_memory_kinds;
  args->memory_kind_sizes = executable->input_memory_kind_sizes;
  return NULL;
}

PJRT_Error *iron_pjrt_Executable_OutputElementTypes(
    PJRT_Executable_OutputElementTypes_Args *args) {
  args->output_types = args->executable->output_types;
  args->num_output_types = args->executable->num_outputs;
  return NULL;
}

PJRT_Error *iron_pjrt_Executable_OutputDimensions(
    PJRT_Executable_OutputDimensions_Args *args) {
  args->num_outputs = args->executable->num_outputs;
  args->dims = args->executable->output_dims;
  args->dim_sizes = args->executable->output_ranks;
  return NULL;
}

PJRT_Error *iron_pjrt_Executable_Fingerprint(
    PJRT_Executable_Fingerprint_Args *args) {
  const char *fingerprint =
      iron_executable_fingerprint(args->executable->executable);
  if (fingerprint == NULL) fingerprint = "";
  args->executable_fingerprint = fingerprint;
  args->executable_fingerprint_size = strlen(fingerprint);
  return NULL;
}

// The program as iron IR text. jaxlib calls this twice with the same args:
// first with code == NULL to learn the size, then with a buffer of that size.
PJRT_Error *iron_pjrt_Executable_OptimizedProgram(
    PJRT_Executable_OptimizedProgram_Args *args) {
  PJRT_Executable *executable = args->executable;
  PJRT_Program *program = args->program;
  if (program == NULL)
    return iron_pjrt_error_from_status(
        IRON_ERR(INVALID_ARGUMENT, "PJRT_Executable_OptimizedProgram: no program"));
  // The portable artifact itself, in the "mlir" format: jaxlib parses what
  // it gets here as MLIR (bytecode included) to answer as_text(), layouts
  // and shardings. Our own IR is printed by iron-dump and
  // iron_executable_text.
  const iron_pjrt_blob_t *artifact = executable->artifact;
  if (artifact == NULL)
    return iron_pjrt_error_from_status(IRON_ERR(
        FAILED_PRECONDITION, "PJRT_Executable_OptimizedProgram: no program"));
  program->format = IRON_PJRT_PROGRAM_FORMAT;
  program->format_size = sizeof(IRON_PJRT_PROGRAM_FORMAT) - 1;
  if (program->code == NULL) {
    program->code_size = artifact->size;
    return NULL;
  }
  if (program->code_size < artifact->size)
    return iron_pjrt_error_from_status(IRON_ERR(
        INVALID_ARGUMENT, "program buffer of %zu bytes is too small for %zu",
        program->code_size, artifact->size));
  memcpy(program->code, artifact->data, artifact->size);
  program->code_size = artifact->size;
  return NULL;
}

// ---------------------------------------------------------------------------
// PJRT_LoadedExecutable

PJRT_Error *iron_pjrt_LoadedExecutable_Destroy(
    PJRT_LoadedExecutable_Destroy_Args *args) {
  PJRT_LoadedExecutable *loaded = args->executable;
  if (loaded == NULL) return NULL;
  iron_executable_release(loaded->executable);
  iron_pjrt_blob_release(loaded->artifact);
  iron_pjrt_blob_release(loaded->compile_options);
  free(loaded);
  return NULL;
}

PJRT_Error *iron_pjrt_LoadedExecutable_GetExecutable(
    PJRT_LoadedExecutable_GetExecutable_Args *args) {
  PJRT_Executable *executable = NULL;
  iron_status_t status = iron_pjrt_executable_make(
      args->loaded_executable->executable,
      args->loaded_executable->artifact,
      args->loaded_executable->compile_options, &executable);
  if (status != IRON_OK) return iron_pjrt_error_from_status(status);
  args->executable = executable;
  return NULL;
}

PJRT_Error *iron_pjrt_LoadedExecutable_AddressableDevices(
    PJRT_LoadedExecutable_AddressableDevices_Args *args) {
  PJRT_LoadedExecutable *loaded = args->executable;
  args->addressable_devices =
      &loaded->client->devices[loaded->device->local_hardware_id];
  args->num_addressable_devices = 1;
  return NULL;
}

PJRT_Error *iron_pjrt_LoadedExecutable_AddressableDeviceLogicalIds(
    PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args *args) {
  args->addressable_device_logical_ids = args->executable->logical_ids;
  args->num_addressable_device_logical_ids = 1;
  return NULL;
}

PJRT_Error *iron_pjrt_LoadedExecutable_Delete(
    PJRT_LoadedExecutable_Delete_Args *args) {
  // The runtime object stays until Destroy: runs in flight hold their own
  // references anyway.
  atomic_store(&args->executable->deleted, true);
  return NULL;
}

PJRT_Error *iron_pjrt_LoadedExecutable_IsDeleted(
    PJRT_LoadedExecutable_IsDeleted_Args *args) {
  args->is_deleted = atomic_load(&args->executable->deleted);
  return NULL;
}

PJRT_Error *iron_pjrt_LoadedExecutable_Fingerprint(
    PJRT_LoadedExecutable_Fingerprint_Args *args) {
  const char *fingerprint =
      iron_executable_fingerprint(args->executable->executable);
  if (fingerprint == NULL) fingerprint = "";
  args->executable_fingerprint = fingerprint;
  args->executable_fingerprint_size = strlen(fingerprint);
  return NULL;
}

// A DeviceAssignmentProto for one replica and one computation on device 0:
// replica_count = 1 (field 1), computation_count = 1 (field 2),
// computation_devices (field 3) { replica_device_ids (field 1): [0] }.
// jaxlib parses it (CHECK) and always calls the deleter, which must exist.
static const char iron_pjrt_device_assignment[] = {0x08, 0x01, 0x10, 0x01,
                                                   0x1A, 0x03, 0x0A, 0x01,
                                                   0x00};

static void iron_pjrt_device_assignment_delete(
    PJRT_DeviceAssignmentSerialized *assignment) {
  (void)assignment;  // static bytes
}

PJRT_Error *iron_pjrt_LoadedExecutable_GetDeviceAssignment(
    PJRT_LoadedExecutable_GetDeviceAssignment_Args *args) {
  if (args->executable->device->description.id != 0) {
    // Portable: no fixed assignment (size 0 is accepted by jaxlib).
    args->serialized_bytes = NULL;
    args->serialized_bytes_size = 0;
  } else {
    args->serialized_bytes = iron_pjrt_device_assignment;
    args->serialized_bytes_size = sizeof(iron_pjrt_device_assignment);
  }
  args->serialized_device_assignment = NULL;
  args->serialized_device_assignment_deleter =
      iron_pjrt_device_assignment_delete;
  return NULL;
}

// ---------------------------------------------------------------------------
// Execute

static bool iron_pjrt_index_listed(const int64_t *list, size_t count,
                                   size_t index) {
  for (size_t i = 0; i < count; ++i)
    if (list[i] == (int64_t)index) return true;
  return false;
}

static bool iron_pjrt_buffer_is_shared(PJRT_Buffer *buffer) {
  pthread_mutex_lock(&buffer->mu);
  bool shared = buffer->external_refs > 0;
  pthread_mutex_unlock(&buffer->mu);
  return shared;
}

typedef struct iron_pjrt_run {
  size_t num_args;
  size_t num_outputs;
  iron_buffer_t **args;     // [num_args], acquired references
  bool *donate;             // [num_args]
  iron_buffer_t **results;  // [num_outputs]
} iron_pjrt_run_t;

static void iron_pjrt_run_free(iron_pjrt_run_t *run) {
  if (run->args != NULL)
    for (size_t i = 0; i < run->num_args; ++i)
      if (run->args[i] != NULL) iron_buffer_release(run->args[i]);
  free(run->args);
  free(run->donate);
  free(run->results);
}

// IRON_HOST_CALLBACK_SYNC=0 runs programs with host callbacks asynchronously
// like any other (errors then surface when a result is read).
static bool iron_pjrt_host_callback_sync(void) {
  const char *v = getenv("IRON_HOST_CALLBACK_SYNC");
  return !(v && strcmp(v, "0") == 0);
}

static iron_status_t iron_pjrt_execute(PJRT_LoadedExecutable_Execute_Args *args) {
  PJRT_LoadedExecutable *loaded = args->executable;
  iron_executable_t *exe = loaded->executable;
  const char *name = iron_executable_name(exe);
  if (name == NULL) name = "?";
  if (atomic_load(&loaded->deleted))
    return IRON_ERR(FAILED_PRECONDITION, "executable %s has been deleted",
                    name);
  if (args->num_devices != 1)
    return IRON_ERR(INVALID_ARGUMENT,
                    "ironjax executes on exactly one device per call, not %zu",
                    args->num_devices);
  if (args->execute_device != NULL &&
      args->execute_device->client != loaded->client)
    return IRON_ERR(INVALID_ARGUMENT, "execute_device is not an ironjax device");

  const PJRT_ExecuteOptions *options = args->options;
  const int64_t *non_donatable = NULL;
  size_t num_non_donatable = 0;
  if (options != NULL) {
    if (options->num_send_ops != 0 || options->num_recv_ops != 0)
      return IRON_ERR(UNIMPLEMENTED,
                      "ironjax does not support send/recv callbacks (%s)",
                      name);
    // Fields at offset >= 120 exist only for callers built with 0.108+.
    if (IRON_PJRT_HAS_FIELD(options, PJRT_ExecuteOptions,
                            num_hlo_output_callbacks) &&
        options->num_hlo_output_callbacks != 0)
      return IRON_ERR(UNIMPLEMENTED,
                      "ironjax does not support HLO output callbacks (%s)",
                      name);
    if (IRON_PJRT_HAS_FIELD(options, PJRT_ExecuteOptions,
                            num_non_donatable_input_indices) &&
        options->non_donatable_input_indices != NULL) {
      non_donatable = options->non_donatable_input_indices;
      num_non_donatable = options->num_non_donatable_input_indices;
    }
  }

  iron_pjrt_run_t run = {.num_args = args->num_args,
                         .num_outputs = iron_executable_num_outputs(exe)};
  run.args = calloc(run.num_args + 1, sizeof(iron_buffer_t *));
  run.donate = calloc(run.num_args + 1, sizeof(bool));
  run.results = calloc(run.num_outputs + 1, sizeof(iron_buffer_t *));
  if (!run.args || !run.donate || !run.results) {
    iron_pjrt_run_free(&run);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  PJRT_Buffer *const *inputs = args->argument_lists[0];
  uint32_t num_inputs = iron_executable_num_inputs(exe);
  for (size_t i = 0; i < run.num_args; ++i) {
    iron_status_t status = iron_pjrt_buffer_acquire(inputs[i], &run.args[i]);
    if (status != IRON_OK) {
      iron_pjrt_run_free(&run);
      return iron_status_annotate(status, "argument %zu of %s", i, name);
    }
    run.donate[i] = i < num_inputs &&
                    iron_executable_input_donatable(exe, (uint32_t)i) &&
                    !iron_pjrt_index_listed(non_donatable, num_non_donatable,
                                            i) &&
                    !iron_pjrt_buffer_is_shared(inputs[i]);
  }
  // A donated buffer passed in another position too (f(donate(a), a)) would
  // be read while the run overwrites it. XLA:CPU refuses the call; so do we.
  for (size_t i = 0; i < run.num_args; ++i) {
    if (!run.donate[i]) continue;
    for (size_t j = 0; j < run.num_args; ++j) {
      if (j != i && run.args[j] == run.args[i]) {
        iron_pjrt_run_free(&run);
        return IRON_ERR(INVALID_ARGUMENT,
                        "argument %zu of %s is donated and also passed as "
                        "argument %zu",
                        i, name, j);
      }
    }
  }
  // Arguments in the host memory of a device with its own (pinned_host,
  // unpinned_host on CUDA) run from a copy in its device memory, as XLA
  // moves them; the arrays themselves stay where they are.
  for (size_t i = 0; i < run.num_args; ++i) {
    iron_buffer_t *arg = run.args[i];
    if (iron_buffer_memory_space(arg) != IRON_MEMORY_HOST ||
        !iron_device_has_host_memory(iron_buffer_device(arg)))
      continue;
    iron_buffer_t *moved = NULL;
    iron_status_t status = iron_buffer_copy_to_memory(
        arg, iron_buffer_device(arg), IRON_MEMORY_DEVICE, &moved);
    if (status != IRON_OK) {
      iron_pjrt_run_free(&run);
      return iron_status_annotate(status, "argument %zu of %s", i, name);
    }
    iron_buffer_release(arg);
    run.args[i] = moved;
  }

  // Programs with host callbacks run synchronously, as on XLA:CPU: their
  // output (debug.print) appears before the call returns, and an exception
  // raised in a callback fails this call. jaxlib releases the GIL around
  // Execute, so the callback (on the device's worker thread) can take it.
  const bool wait = iron_executable_has_host_callbacks(exe) &&
                    iron_pjrt_host_callback_sync();
  iron_event_t *done = NULL;
  iron_status_t status = iron_executable_execute(
      exe, run.args, (uint32_t)run.num_args, run.donate, run.results,
      (args->device_complete_events != NULL || wait) ? &done : NULL);
  if (status != IRON_OK) {
    iron_pjrt_run_free(&run);
    return status;
  }

  // jax does not delete donated arrays itself: the plugin does.
  for (size_t i = 0; i < run.num_args; ++i)
    if (run.donate[i]) iron_pjrt_buffer_invalidate(inputs[i]);

  if (wait) {
    status = iron_event_wait(done);
    if (status != IRON_OK) {
      for (size_t j = 0; j < run.num_outputs; ++j) {
        iron_buffer_release(run.results[j]);
        run.results[j] = NULL;
      }
      iron_event_release(done);
      iron_pjrt_run_free(&run);
      return status;
    }
    if (args->device_complete_events == NULL) {
      iron_event_release(done);
      done = NULL;
    }
  }

  PJRT_Buffer **outputs = args->output_lists[0];
  for (size_t j = 0; j < run.num_outputs; ++j) {
    PJRT_Device *device = iron_pjrt_client_find_device(
        loaded->client, iron_buffer_device(run.results[j]));
    if (device == NULL) device = loaded->device;
    iron_buffer_t *result = run.results[j];
    run.results[j] = NULL;
    // Results annotated with a memory kind (checked at compile time) are
    // in that memory of their device: moved there when it is the host
    // memory of a device with its own.
    const char *kind = iron_executable_output_memory_kind(exe, (uint32_t)j);
    PJRT_Memory *memory =
        kind ? iron_pjrt_device_find_memory(device, kind) : NULL;
    status = IRON_OK;
    if (iron_pjrt_memory_space(memory) == IRON_MEMORY_HOST &&
        iron_device_has_host_memory(device->device)) {
      iron_buffer_t *moved = NULL;
      status = iron_buffer_copy_to_memory(result, device->device,
                                          IRON_MEMORY_HOST, &moved);
      iron_buffer_release(result);
      result = moved;
    }
    if (status == IRON_OK)
      status =
          iron_pjrt_buffer_wrap(loaded->client, device, result, &outputs[j]);
    if (status == IRON_OK && memory != NULL) outputs[j]->memory = memory;
    if (status != IRON_OK) {
      for (size_t k = 0; k < j; ++k) {
        PJRT_Buffer_Destroy_Args destroy = {.struct_size = sizeof(destroy),
                                            .buffer = outputs[k]};
        iron_pjrt_Buffer_Destroy(&destroy);
        outputs[k] = NULL;
      }
      for (size_t k = j + 1; k < run.num_outputs; ++k)
        iron_buffer_release(run.results[k]);
      if (done != NULL) iron_event_release(done);
      iron_pjrt_run_free(&run);
      return status;
    }
  }
  if (args->device_complete_events != NULL) {
    PJRT_Event *event = iron_pjrt_event_wrap(done);
    args->device_complete_events[0] = event;
    if (event == NULL) {
      iron_pjrt_run_free(&run);
      return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
    }
  }
  iron_pjrt_run_free(&run);
  return IRON_OK;
}

PJRT_Error *iron_pjrt_LoadedExecutable_Execute(
    PJRT_LoadedExecutable_Execute_Args *args) {
  return iron_pjrt_error_from_status(iron_pjrt_execute(args));
}
