// The objects behind the PJRT handles, and the slot implementations that
// src/pjrt/pjrt_api.c puts into the function table. Nothing here is
// exported: the shared library exports GetPjrtApi only.
//
// Ownership follows PJRT: objects returned through an out-parameter that have
// a *_Destroy slot are owned by the caller (buffers, events, executables,
// loaded executables, errors, the client); devices, memories and descriptions
// are borrowed and live as long as the client.
// Thread-safety: jaxlib calls these from many threads; every object is either
// immutable after creation or guards its mutable part (buffer deletion).
#ifndef IRON_PJRT_PJRT_INTERNAL_H_
#define IRON_PJRT_PJRT_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>

#include "base/dtype.h"
#include "base/status.h"
#include "iron/iron.h"
#include "pjrt/pjrt_abi.h"

#define IRON_PJRT_PLATFORM_NAME "iron"
#define IRON_PJRT_PLATFORM_VERSION "ironjax 0.1.0"
#define IRON_PJRT_MEMORY_KIND "device"
// Host devices also have the host memory kinds XLA:CPU exposes (jax places
// arrays there with memory_kind=..., compute_on and host offloading). All
// three share the host allocator; a buffer remembers the one it was put in.
#define IRON_PJRT_MEMORY_KIND_PINNED_HOST "pinned_host"
#define IRON_PJRT_MEMORY_KIND_UNPINNED_HOST "unpinned_host"
#define IRON_PJRT_MAX_DEVICE_MEMORIES 3
// Format reported by Executable_OptimizedProgram.
#define IRON_PJRT_PROGRAM_FORMAT "mlir"

// ---------------------------------------------------------------------------
// Objects

struct PJRT_Error {
  // ABI: first word is the function table (0.107+).
  const PJRT_Error_FunctionTable *vtable;
  iron_status_t status;  // never OK
  // The status message with bytes that are not printable UTF-8 escaped as
  // \xNN (program text can put raw bytes in a message; jaxlib decodes
  // messages as UTF-8 and would raise UnicodeDecodeError instead); NULL
  // when the message needs no escaping.
  char *escaped;
};

struct PJRT_Event {
  iron_event_t *event;  // one reference
};

struct PJRT_DeviceDescription {
  int id;
  int process_index;
  const char *kind;
  char text[64];  // "IronDevice(id=0, kind=host)": ToString and DebugString
};

struct PJRT_Memory {
  // ABI: jaxlib reads the first word as a PJRT_Memory_FunctionTable* when the
  // plugin reports minor >= 105 and calls it if non-NULL. Ours is NULL.
  const void *vtable;
  PJRT_Client *client;
  PJRT_Device *device;
  int id;
  int kind_id;       // 0 device, 1 pinned_host, 2 unpinned_host (as XLA:CPU)
  const char *kind;  // static string
  char text[64];  // ToString and DebugString
};

struct PJRT_Device {
  PJRT_DeviceDescription description;  // first, so both handles coexist
  PJRT_Client *client;
  iron_device_t *device;  // borrowed from the runtime
  PJRT_Memory *memory;    // its default memory (kind "device")
  int local_hardware_id;
  // Every memory it addresses, the default first.
  size_t num_memories;
  PJRT_Memory *memories[IRON_PJRT_MAX_DEVICE_MEMORIES];
};

struct PJRT_Client {
  iron_runtime_t *runtime;
  size_t num_devices;
  PJRT_Device **devices;    // [num_devices]
  PJRT_Memory **memories;   // [num_memories]: every device's memories
  size_t num_memories;
  PJRT_Device *device_storage;
  PJRT_Memory *memory_storage;
};

struct PJRT_Buffer {
  PJRT_Client *client;
  PJRT_Device *device;
  PJRT_Memory *memory;  // one of device's memories (wrap: the default)
  pthread_mutex_t mu;     // guards the next three fields
  iron_buffer_t *buffer;  // one reference; NULL once deleted or donated
  // External references (numpy views, dlpack) pin the memory: a buffer
  // deleted while some exist keeps its iron buffer here until the last one
  // is dropped.
  int external_refs;
  iron_buffer_t *pinned;
  iron_dtype_t dtype;
  PJRT_Buffer_Type pjrt_type;
  size_t size_in_bytes;
  size_t rank;
  int64_t *dims;            // [rank], points into `storage`
  int64_t *minor_to_major;  // [rank], descending: row-major
  int64_t storage[];
};

// The artifact bytes a program was compiled from, shared by the loaded
// executable and every PJRT_Executable made from it (either may outlive the
// other). Returned by Executable_OptimizedProgram: jaxlib parses that program
// as MLIR (for as_text(), layouts and shardings), and the portable artifact
// is the one form it can read back exactly.
typedef struct iron_pjrt_blob {
  atomic_int refs;
  size_t size;
  unsigned char data[];
} iron_pjrt_blob_t;

struct PJRT_LoadedExecutable {
  iron_pjrt_blob_t *artifact;  // one reference
  // The serialized CompileOptionsProto it was compiled with (one reference,
  // never NULL; may be empty): kept for Executable_Serialize.
  iron_pjrt_blob_t *compile_options;
  PJRT_Client *client;
  PJRT_Device *device;
  iron_executable_t *executable;  // one reference
  atomic_bool deleted;
  PJRT_LogicalDeviceIds logical_ids[1];
};

struct PJRT_Executable {
  iron_executable_t *executable;  // one reference
  iron_pjrt_blob_t *artifact;     // one reference
  iron_pjrt_blob_t *compile_options;  // one reference, never NULL
  size_t num_inputs;
  size_t num_outputs;
  const char **output_memory_kinds;  // [num_outputs]: mhlo.memory_kind
  size_t *output_memory_kind_sizes;
  const char **input_memory_kinds;   // [num_inputs]
  size_t *input_memory_kind_sizes;
  PJRT_Buffer_Type *output_types;    // [num_outputs]
  size_t *output_ranks;              // [num_outputs]
  int64_t *output_dims;              // all outputs' dims, concatenated
};

// ---------------------------------------------------------------------------
// Helpers shared by the slot files

// Reference-counted byte blobs (pjrt_executable.c). create returns NULL when
// out of memory.
iron_pjrt_blob_t *iron_pjrt_blob_create(const void *data, size_t size);
iron_pjrt_blob_t *iron_pjrt_blob_retain(iron_pjrt_blob_t *blob);
void iron_pjrt_blob_release(iron_pjrt_blob_t *blob);

// FNV-1a, 64 bit (fingerprints, dump names, serialized-executable checksum).
uint64_t iron_pjrt_fnv1a(const void *data, size_t size);

// What iron reads from a serialized xla.CompileOptionsProto
// (pjrt_compile_options.c).
#define IRON_PJRT_MAX_ASSIGNED 64
typedef struct iron_pjrt_compile_options {
  int64_t device_ordinal;  // -1: unset
  int64_t num_replicas;    // >= 1 unless the proto says otherwise
  int64_t num_partitions;
  bool compile_portable_executable;
  bool has_device_assignment;
  size_t num_assigned;  // device ids in the assignment (may exceed the array)
  int64_t assigned[IRON_PJRT_MAX_ASSIGNED];  // replica-major per computation
} iron_pjrt_compile_options_t;

// Decodes `bytes` (empty or NULL: the defaults: one replica, one partition)
// and checks the option overrides (jax's compiler_options) with XLA's error
// messages: "No such compile option: 'k'", "While setting option k, 'v' is
// not a valid bool value.". INVALID_ARGUMENT on malformed input.
iron_status_t iron_pjrt_compile_options_parse(
    const void *bytes, size_t size, iron_pjrt_compile_options_t *out_options);
// The device the program runs on. Fails as XLA:CPU does when the assignment
// names a device the client lacks ("No matching device found for device_id
// N"), and UNIMPLEMENTED for more than one replica x partition.
iron_status_t iron_pjrt_compile_options_select_device(
    PJRT_Client *client, const iron_pjrt_compile_options_t *options,
    PJRT_Device **out_device);

// Compiles a StableHLO portable artifact with serialized compile options into
// a loaded executable (Client_Compile and Executable_DeserializeAndLoad).
iron_status_t iron_pjrt_compile_artifact(PJRT_Client *client, const void *code,
                                         size_t code_size,
                                         const void *compile_options,
                                         size_t compile_options_size,
                                         PJRT_LoadedExecutable **out_loaded);

// The one conversion from iron_status_t to PJRT_Error (pjrt_error.c).
// Consumes `status`; OK gives NULL. Never fails: on allocation failure a
// static RESOURCE_EXHAUSTED error is returned (destroying it is a no-op).
PJRT_Error *iron_pjrt_error_from_status(iron_status_t status);

// The error every unimplemented slot returns, naming the slot.
PJRT_Error *iron_pjrt_error_unimplemented(const char *slot_name);

// Wraps an iron event (takes over the caller's reference). On allocation
// failure releases it and returns NULL.
PJRT_Event *iron_pjrt_event_wrap(iron_event_t *event);

// Makes a PJRT_Buffer around `buffer` (takes over the reference) on `device`.
iron_status_t iron_pjrt_buffer_wrap(PJRT_Client *client, PJRT_Device *device,
                                    iron_buffer_t *buffer,
                                    PJRT_Buffer **out_buffer);
// A new reference to the live iron buffer, or an error if it was deleted.
iron_status_t iron_pjrt_buffer_acquire(PJRT_Buffer *buffer,
                                       iron_buffer_t **out_buffer);
// Drops the iron buffer (Delete, donation). Idempotent.
void iron_pjrt_buffer_invalidate(PJRT_Buffer *buffer);

// `device`'s memory of kind `kind` (NUL-terminated), or NULL if it has none.
// The iron memory space behind a PJRT memory (NULL: the default, device).
iron_memory_space_t iron_pjrt_memory_space(const PJRT_Memory *memory);
PJRT_Memory *iron_pjrt_device_find_memory(PJRT_Device *device,
                                          const char *kind);

// The PJRT_Device wrapping `device`, or NULL.
PJRT_Device *iron_pjrt_client_find_device(PJRT_Client *client,
                                          const iron_device_t *device);

// ---------------------------------------------------------------------------
// Slot implementations: iron_pjrt_<Slot name>, one per implemented slot.
#define IRON_PJRT_DECLARE_SLOT_(name) \
  PJRT_Error *iron_pjrt_##name(PJRT_##name##_Args *args);

IRON_PJRT_DECLARE_SLOT_(Error_GetCode)
IRON_PJRT_DECLARE_SLOT_(Error_ForEachPayload)
void iron_pjrt_Error_Destroy(PJRT_Error_Destroy_Args *args);
void iron_pjrt_Error_Message(PJRT_Error_Message_Args *args);

IRON_PJRT_DECLARE_SLOT_(Plugin_Initialize)
IRON_PJRT_DECLARE_SLOT_(Plugin_Attributes)

IRON_PJRT_DECLARE_SLOT_(Event_Destroy)
IRON_PJRT_DECLARE_SLOT_(Event_IsReady)
IRON_PJRT_DECLARE_SLOT_(Event_Error)
IRON_PJRT_DECLARE_SLOT_(Event_Await)
IRON_PJRT_DECLARE_SLOT_(Event_OnReady)
IRON_PJRT_DECLARE_SLOT_(Event_Create)
IRON_PJRT_DECLARE_SLOT_(Event_Set)

IRON_PJRT_DECLARE_SLOT_(Client_Create)
IRON_PJRT_DECLARE_SLOT_(Client_Destroy)
IRON_PJRT_DECLARE_SLOT_(Client_PlatformName)
IRON_PJRT_DECLARE_SLOT_(Client_ProcessIndex)
IRON_PJRT_DECLARE_SLOT_(Client_PlatformVersion)
IRON_PJRT_DECLARE_SLOT_(Client_Devices)
IRON_PJRT_DECLARE_SLOT_(Client_AddressableDevices)
IRON_PJRT_DECLARE_SLOT_(Client_LookupDevice)
IRON_PJRT_DECLARE_SLOT_(Client_LookupAddressableDevice)
IRON_PJRT_DECLARE_SLOT_(Client_AddressableMemories)
IRON_PJRT_DECLARE_SLOT_(Client_Compile)
IRON_PJRT_DECLARE_SLOT_(Client_DefaultDeviceAssignment)
IRON_PJRT_DECLARE_SLOT_(Client_BufferFromHostBuffer)

IRON_PJRT_DECLARE_SLOT_(DeviceDescription_Id)
IRON_PJRT_DECLARE_SLOT_(DeviceDescription_ProcessIndex)
IRON_PJRT_DECLARE_SLOT_(DeviceDescription_Attributes)
IRON_PJRT_DECLARE_SLOT_(DeviceDescription_Kind)
IRON_PJRT_DECLARE_SLOT_(DeviceDescription_DebugString)
IRON_PJRT_DECLARE_SLOT_(DeviceDescription_ToString)

IRON_PJRT_DECLARE_SLOT_(Device_GetDescription)
IRON_PJRT_DECLARE_SLOT_(Device_IsAddressable)
IRON_PJRT_DECLARE_SLOT_(Device_LocalHardwareId)
IRON_PJRT_DECLARE_SLOT_(Device_AddressableMemories)
IRON_PJRT_DECLARE_SLOT_(Device_DefaultMemory)
IRON_PJRT_DECLARE_SLOT_(Device_MemoryStats)
IRON_PJRT_DECLARE_SLOT_(Device_ClearMemoryStats)
IRON_PJRT_DECLARE_SLOT_(Device_GetAttributes)

IRON_PJRT_DECLARE_SLOT_(Memory_Id)
IRON_PJRT_DECLARE_SLOT_(Memory_Kind)
IRON_PJRT_DECLARE_SLOT_(Memory_Kind_Id)
IRON_PJRT_DECLARE_SLOT_(Memory_DebugString)
IRON_PJRT_DECLARE_SLOT_(Memory_ToString)
IRON_PJRT_DECLARE_SLOT_(Memory_AddressableByDevices)

IRON_PJRT_DECLARE_SLOT_(Executable_Destroy)
IRON_PJRT_DECLARE_SLOT_(Executable_Name)
IRON_PJRT_DECLARE_SLOT_(Executable_NumReplicas)
IRON_PJRT_DECLARE_SLOT_(Executable_NumPartitions)
IRON_PJRT_DECLARE_SLOT_(Executable_NumOutputs)
IRON_PJRT_DECLARE_SLOT_(Executable_SizeOfGeneratedCodeInBytes)
IRON_PJRT_DECLARE_SLOT_(Executable_OutputMemoryKinds)
IRON_PJRT_DECLARE_SLOT_(Executable_ParameterMemoryKinds)
IRON_PJRT_DECLARE_SLOT_(Executable_OptimizedProgram)
IRON_PJRT_DECLARE_SLOT_(Executable_Fingerprint)
IRON_PJRT_DECLARE_SLOT_(Executable_OutputElementTypes)
IRON_PJRT_DECLARE_SLOT_(Executable_OutputDimensions)
IRON_PJRT_DECLARE_SLOT_(Executable_Serialize)
IRON_PJRT_DECLARE_SLOT_(Executable_DeserializeAndLoad)
IRON_PJRT_DECLARE_SLOT_(Executable_GetCompileOptions)
IRON_PJRT_DECLARE_SLOT_(Executable_GetCostAnalysis)

IRON_PJRT_DECLARE_SLOT_(LoadedExecutable_Destroy)
IRON_PJRT_DECLARE_SLOT_(LoadedExecutable_GetExecutable)
IRON_PJRT_DECLARE_SLOT_(LoadedExecutable_AddressableDevices)
IRON_PJRT_DECLARE_SLOT_(LoadedExecutable_Delete)
IRON_PJRT_DECLARE_SLOT_(LoadedExecutable_IsDeleted)
IRON_PJRT_DECLARE_SLOT_(LoadedExecutable_Execute)
IRON_PJRT_DECLARE_SLOT_(LoadedExecutable_Fingerprint)
IRON_PJRT_DECLARE_SLOT_(LoadedExecutable_GetDeviceAssignment)
IRON_PJRT_DECLARE_SLOT_(LoadedExecutable_AddressableDeviceLogicalIds)

IRON_PJRT_DECLARE_SLOT_(Buffer_Destroy)
IRON_PJRT_DECLARE_SLOT_(Buffer_ElementType)
IRON_PJRT_DECLARE_SLOT_(Buffer_Dimensions)
IRON_PJRT_DECLARE_SLOT_(Buffer_UnpaddedDimensions)
IRON_PJRT_DECLARE_SLOT_(Buffer_DynamicDimensionIndices)
IRON_PJRT_DECLARE_SLOT_(Buffer_GetMemoryLayout)
IRON_PJRT_DECLARE_SLOT_(Buffer_OnDeviceSizeInBytes)
IRON_PJRT_DECLARE_SLOT_(Buffer_Device)
IRON_PJRT_DECLARE_SLOT_(Buffer_Memory)
IRON_PJRT_DECLARE_SLOT_(Buffer_Delete)
IRON_PJRT_DECLARE_SLOT_(Buffer_IsDeleted)
IRON_PJRT_DECLARE_SLOT_(Buffer_CopyToDevice)
IRON_PJRT_DECLARE_SLOT_(Buffer_CopyToMemory)
IRON_PJRT_DECLARE_SLOT_(Buffer_ToHostBuffer)
IRON_PJRT_DECLARE_SLOT_(Buffer_IsOnCpu)
IRON_PJRT_DECLARE_SLOT_(Buffer_ReadyEvent)
IRON_PJRT_DECLARE_SLOT_(Buffer_UnsafePointer)
IRON_PJRT_DECLARE_SLOT_(Buffer_IncreaseExternalReferenceCount)
IRON_PJRT_DECLARE_SLOT_(Buffer_DecreaseExternalReferenceCount)
IRON_PJRT_DECLARE_SLOT_(Buffer_OpaqueDeviceMemoryDataPointer)

#undef IRON_PJRT_DECLARE_SLOT_

#endif  // IRON_PJRT_PJRT_INTERNAL_H_
