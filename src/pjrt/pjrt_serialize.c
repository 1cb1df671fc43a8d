// Executable serialization (jax's persistent compilation cache), the compile
// options of an executable, and its cost analysis.
//
// A serialized ironjax executable is the StableHLO portable artifact it was
// compiled from plus the serialized CompileOptionsProto, in a self-checking
// envelope; loading it compiles the artifact again (iron's compile is a
// plan of the program, cheap next to XLA's), so a blob stays valid across
// ironjax versions that read its format version. Layout, little-endian:
//
//   offset  size  field
//        0     8  magic "IRONJAXE"
//        8     4  format version (2; version 1 had a checksum whose FNV
//                 offset basis lacked a digit, so it is refused, not read)
//       12     4  reserved, 0
//       16     8  artifact size A
//       24     8  compile options size O
//       32    32  producer ("ironjax 0.1.0"), NUL-padded; informative only
//       64     A  artifact bytes (MLIR bytecode of VHLO)
//     64+A     O  CompileOptionsProto bytes
//   64+A+O     8  FNV-1a 64 of every byte before it
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt/pjrt_internal.h"

#define IRON_PJRT_SERIAL_MAGIC "IRONJAXE"
#define IRON_PJRT_SERIAL_VERSION 2u
#define IRON_PJRT_SERIAL_HEADER 64u
#define IRON_PJRT_SERIAL_PRODUCER_OFFSET 32u
#define IRON_PJRT_SERIAL_PRODUCER_SIZE 32u
#define IRON_PJRT_SERIAL_TRAILER 8u

static void iron_pjrt_put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

static void iron_pjrt_put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t iron_pjrt_get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= (uint32_t)p[i] << (8 * i);
  return v;
}

static uint64_t iron_pjrt_get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

// The serialized bytes handed to jaxlib; freed by the deleter it calls.
struct PJRT_SerializedExecutable {
  size_t size;
  unsigned char data[];
};

static void iron_pjrt_serialized_delete(PJRT_SerializedExecutable *blob) {
  free(blob);
}

static iron_status_t iron_pjrt_serialize(const PJRT_Executable *executable,
                                         PJRT_SerializedExecutable **out) {
  const iron_pjrt_blob_t *artifact = executable->artifact;
  const iron_pjrt_blob_t *options = executable->compile_options;
  if (artifact == NULL || options == NULL)
    return IRON_ERR(FAILED_PRECONDITION,
                    "PJRT_Executable_Serialize: executable has no program");
  size_t total = IRON_PJRT_SERIAL_HEADER;
  if (artifact->size > SIZE_MAX / 2 || options->size > SIZE_MAX / 4)
    return IRON_ERR(RESOURCE_EXHAUSTED, "executable too large to serialize");
  total += artifact->size + options->size + IRON_PJRT_SERIAL_TRAILER;
  PJRT_SerializedExecutable *blob = malloc(sizeof(*blob) + total);
  if (blob == NULL) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  blob->size = total;
  unsigned char *p = blob->data;
  memset(p, 0, IRON_PJRT_SERIAL_HEADER);
  memcpy(p, IRON_PJRT_SERIAL_MAGIC, 8);
  iron_pjrt_put_u32(p + 8, IRON_PJRT_SERIAL_VERSION);
  iron_pjrt_put_u32(p + 12, 0);
  iron_pjrt_put_u64(p + 16, artifact->size);
  iron_pjrt_put_u64(p + 24, options->size);
  memcpy(p + IRON_PJRT_SERIAL_PRODUCER_OFFSET, IRON_PJRT_PLATFORM_VERSION,
         sizeof(IRON_PJRT_PLATFORM_VERSION) < IRON_PJRT_SERIAL_PRODUCER_SIZE
             ? sizeof(IRON_PJRT_PLATFORM_VERSION)
             : IRON_PJRT_SERIAL_PRODUCER_SIZE - 1);
  size_t offset = IRON_PJRT_SERIAL_HEADER;
  if (artifact->size) memcpy(p + offset, artifact->data, artifact->size);
  offset += artifact->size;
  if (options->size) memcpy(p + offset, options->data, options->size);
  offset += options->size;
  iron_pjrt_put_u64(p + offset, iron_pjrt_fnv1a(p, offset));
  *out = blob;
  return IRON_OK;
}

PJRT_Error *iron_pjrt_Executable_Serialize(
    PJRT_Executable_Serialize_Args *args) {
  PJRT_SerializedExecutable *blob = NULL;
  iron_status_t status = iron_pjrt_serialize(args->executable, &blob);
  if (status != IRON_OK) return iron_pjrt_error_from_status(status);
  args->serialized_bytes = (const char *)blob->data;
  args->serialized_bytes_size = blob->size;
  args->serialized_executable = blob;
  args->serialized_executable_deleter = iron_pjrt_serialized_delete;
  return NULL;
}

// Checks the envelope; on success points at the artifact and the options
// inside `data`.
static iron_status_t iron_pjrt_serialized_open(
    const unsigned char *data, size_t size, const unsigned char **out_artifact,
    size_t *out_artifact_size, const unsigned char **out_options,
    size_t *out_options_size) {
  const char *what = "not an ironjax serialized executable";
  if (data == NULL || size < IRON_PJRT_SERIAL_HEADER + IRON_PJRT_SERIAL_TRAILER)
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: %zu bytes is shorter than the %u-byte envelope", what,
                    data ? size : 0,
                    IRON_PJRT_SERIAL_HEADER + IRON_PJRT_SERIAL_TRAILER);
  if (memcmp(data, IRON_PJRT_SERIAL_MAGIC, 8) != 0)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad magic bytes (expected \"%s\")",
                    what, IRON_PJRT_SERIAL_MAGIC);
  char producer[IRON_PJRT_SERIAL_PRODUCER_SIZE + 1];
  memcpy(producer, data + IRON_PJRT_SERIAL_PRODUCER_OFFSET,
         IRON_PJRT_SERIAL_PRODUCER_SIZE);
  producer[IRON_PJRT_SERIAL_PRODUCER_SIZE] = '\0';
  for (char *c = producer; *c; ++c)
    if (*c < 0x20 || *c > 0x7e) *c = '?';
  uint32_t version = iron_pjrt_get_u32(data + 8);
  if (version != IRON_PJRT_SERIAL_VERSION)
    return IRON_ERR(INVALID_ARGUMENT,
                    "serialized ironjax executable has format version %u "
                    "(written by \"%s\"); " IRON_PJRT_PLATFORM_VERSION
                    " reads version %u",
                    version, producer, IRON_PJRT_SERIAL_VERSION);
  uint64_t artifact_size = iron_pjrt_get_u64(data + 16);
  uint64_t options_size = iron_pjrt_get_u64(data + 24);
  uint64_t payload = size - IRON_PJRT_SERIAL_HEADER - IRON_PJRT_SERIAL_TRAILER;
  if (artifact_size > payload || options_size > payload - artifact_size ||
      artifact_size + options_size != payload)
    return IRON_ERR(INVALID_ARGUMENT,
                    "serialized ironjax executable is truncated or corrupt: "
                    "its header describes %llu + %llu payload bytes, the "
                    "blob holds %llu",
                    (unsigned long long)artifact_size,
                    (unsigned long long)options_size,
                    (unsigned long long)payload);
  size_t checked = size - IRON_PJRT_SERIAL_TRAILER;
  uint64_t expected = iron_pjrt_get_u64(data + checked);
  uint64_t actual = iron_pjrt_fnv1a(data, checked);
  if (expected != actual)
    return IRON_ERR(INVALID_ARGUMENT,
                    "serialized ironjax executable is corrupt: checksum "
                    "%016llx does not match its contents (%016llx)",
                    (unsigned long long)expected, (unsigned long long)actual);
  *out_artifact = data + IRON_PJRT_SERIAL_HEADER;
  *out_artifact_size = (size_t)artifact_size;
  *out_options = data + IRON_PJRT_SERIAL_HEADER + artifact_size;
  *out_options_size = (size_t)options_size;
  return IRON_OK;
}

static iron_status_t iron_pjrt_deserialize(
    PJRT_Executable_DeserializeAndLoad_Args *args,
    PJRT_LoadedExecutable **out_loaded) {
  const unsigned char *artifact = NULL, *options = NULL;
  size_t artifact_size = 0, options_size = 0;
  IRON_RETURN_IF_ERROR(
      iron_pjrt_serialized_open(
          (const unsigned char *)args->serialized_executable,
          args->serialized_executable_size, &artifact, &artifact_size,
          &options, &options_size),
      "PJRT_Executable_DeserializeAndLoad");
  // jaxlib passes the options of the current call, which take precedence
  // (they may pick another device), as in XLA's DeserializeAndLoad.
  if (IRON_PJRT_HAS_FIELD(args, PJRT_Executable_DeserializeAndLoad_Args,
                          overridden_serialized_compile_options_size) &&
      args->overridden_serialized_compile_options != NULL) {
    options = (const unsigned char *)args->overridden_serialized_compile_options;
    options_size = args->overridden_serialized_compile_options_size;
  }
  IRON_RETURN_IF_ERROR(
      iron_pjrt_compile_artifact(args->client, artifact, artifact_size,
                                 options, options_size, out_loaded),
      "while loading a serialized ironjax executable");
  return IRON_OK;
}

PJRT_Error *iron_pjrt_Executable_DeserializeAndLoad(
    PJRT_Executable_DeserializeAndLoad_Args *args) {
  PJRT_LoadedExecutable *loaded = NULL;
  iron_status_t status = iron_pjrt_deserialize(args, &loaded);
  if (status != IRON_OK) return iron_pjrt_error_from_status(status);
  args->loaded_executable = loaded;
  return NULL;
}

// ---------------------------------------------------------------------------
// Compile options: the bytes the executable was compiled with.

struct PJRT_SerializedCompileOptions {
  iron_pjrt_blob_t *blob;  // one reference
};

static void iron_pjrt_compile_options_delete(
    PJRT_SerializedCompileOptions *options) {
  if (options == NULL) return;
  iron_pjrt_blob_release(options->blob);
  free(options);
}

PJRT_Error *iron_pjrt_Executable_GetCompileOptions(
    PJRT_Executable_GetCompileOptions_Args *args) {
  PJRT_SerializedCompileOptions *options = malloc(sizeof(*options));
  if (options == NULL)
    return iron_pjrt_error_from_status(
        IRON_ERR(RESOURCE_EXHAUSTED, "out of memory"));
  options->blob = iron_pjrt_blob_retain(args->executable->compile_options);
  args->serialized_bytes = (const char *)options->blob->data;
  args->serialized_bytes_size = options->blob->size;
  args->serialized_compile_options = options;
  args->serialized_compile_options_deleter = iron_pjrt_compile_options_delete;
  return NULL;
}

// ---------------------------------------------------------------------------
// Cost analysis: iron has no cost model yet. An empty property list (jax's
// cost_analysis() gives {}) rather than UNIMPLEMENTED (None), so callers that
// only check for a result work; no made-up numbers.

PJRT_Error *iron_pjrt_Executable_GetCostAnalysis(
    PJRT_Executable_GetCostAnalysis_Args *args) {
  args->num_properties = 0;
  args->properties = NULL;
  return NULL;
}
