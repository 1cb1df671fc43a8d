// Our declarations of the PJRT C API ABI, version 0.114 (jaxlib 0.11.0's
// openxla/xla pin). Written here from the documented layout of
// xla/pjrt/c/pjrt_c_api.h; only what the plugin reads or writes is declared
// in full. Every struct below must keep the exact field order and types of
// the public ABI: the _Static_asserts at the end pin sizes and offsets that
// were checked against the framework (see
// shared/research/pjrt-stablehlo.md §1).
//
// Conventions of the ABI that the code relies on:
//  * every args struct starts with {size_t struct_size; extension_start};
//    the caller sets struct_size to the size it was compiled with, so a field
//    appended after the caller's header version must only be read after
//    checking struct_size (IRON_PJRT_HAS_FIELD);
//  * X_STRUCT_SIZE == offsetof(last field) + sizeof(last field), which for
//    structs ending in a bool is smaller than sizeof.
#ifndef IRON_PJRT_PJRT_ABI_H_
#define IRON_PJRT_PJRT_ABI_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IRON_PJRT_API_MAJOR 0
#define IRON_PJRT_API_MINOR 114

// The size a caller compiled with for a struct ending in `last`.
#define IRON_PJRT_STRUCT_SIZE(type, last) \
  (offsetof(type, last) + sizeof(((type *)0)->last))
// Whether the caller's struct (args->struct_size) covers `field`.
#define IRON_PJRT_HAS_FIELD(args, type, field) \
  ((args)->struct_size >= IRON_PJRT_STRUCT_SIZE(type, field))

// ---------------------------------------------------------------------------
// Extensions (a linked list we walk never: unknown types are ignored)

typedef struct PJRT_Extension_Base {
  size_t struct_size;
  int type;  // PJRT_Extension_Type; 25 values at 0.114
  struct PJRT_Extension_Base *next;
} PJRT_Extension_Base;

typedef struct PJRT_Api_Version {
  size_t struct_size;
  PJRT_Extension_Base *extension_start;
  int major_version;
  int minor_version;
} PJRT_Api_Version;

// ---------------------------------------------------------------------------
// Opaque handles. The plugin defines the objects behind them
// (src/pjrt/pjrt_internal.h); PJRT_Error and PJRT_Memory must start with a
// vtable pointer (ABI since 0.107 / 0.105).

typedef struct PJRT_Error PJRT_Error;
typedef struct PJRT_Event PJRT_Event;
typedef struct PJRT_Client PJRT_Client;
typedef struct PJRT_Device PJRT_Device;
typedef struct PJRT_Memory PJRT_Memory;
typedef struct PJRT_DeviceDescription PJRT_DeviceDescription;
typedef struct PJRT_Executable PJRT_Executable;
typedef struct PJRT_LoadedExecutable PJRT_LoadedExecutable;
typedef struct PJRT_Buffer PJRT_Buffer;
typedef struct PJRT_ExecuteContext PJRT_ExecuteContext;
typedef struct PJRT_Device_Attributes PJRT_Device_Attributes;
typedef struct PJRT_DeviceAssignmentSerialized PJRT_DeviceAssignmentSerialized;
typedef struct PJRT_CopyToDeviceStream PJRT_CopyToDeviceStream;
typedef struct PJRT_MultiSlice_Config PJRT_MultiSlice_Config;

// ---------------------------------------------------------------------------
// Enums (values fixed by the ABI)

typedef enum {
  PJRT_Error_Code_OK = 0,
  PJRT_Error_Code_CANCELLED = 1,
  PJRT_Error_Code_UNKNOWN = 2,
  PJRT_Error_Code_INVALID_ARGUMENT = 3,
  PJRT_Error_Code_DEADLINE_EXCEEDED = 4,
  PJRT_Error_Code_NOT_FOUND = 5,
  PJRT_Error_Code_ALREADY_EXISTS = 6,
  PJRT_Error_Code_PERMISSION_DENIED = 7,
  PJRT_Error_Code_RESOURCE_EXHAUSTED = 8,
  PJRT_Error_Code_FAILED_PRECONDITION = 9,
  PJRT_Error_Code_ABORTED = 10,
  PJRT_Error_Code_OUT_OF_RANGE = 11,
  PJRT_Error_Code_UNIMPLEMENTED = 12,
  PJRT_Error_Code_INTERNAL = 13,
  PJRT_Error_Code_UNAVAILABLE = 14,
  PJRT_Error_Code_DATA_LOSS = 15,
  PJRT_Error_Code_UNAUTHENTICATED = 16,
} PJRT_Error_Code;

typedef enum {
  PJRT_NamedValue_kString = 0,
  PJRT_NamedValue_kInt64 = 1,
  PJRT_NamedValue_kInt64List = 2,
  PJRT_NamedValue_kFloat = 3,
  PJRT_NamedValue_kBool = 4,
} PJRT_NamedValue_Type;

// Element types; the numbering is also in src/base/dtype.h (IRON_DTYPE_LIST).
typedef enum {
  PJRT_Buffer_Type_INVALID = 0,
  PJRT_Buffer_Type_PRED = 1,
  PJRT_Buffer_Type_S8 = 2,
  PJRT_Buffer_Type_S16 = 3,
  PJRT_Buffer_Type_S32 = 4,
  PJRT_Buffer_Type_S64 = 5,
  PJRT_Buffer_Type_U8 = 6,
  PJRT_Buffer_Type_U16 = 7,
  PJRT_Buffer_Type_U32 = 8,
  PJRT_Buffer_Type_U64 = 9,
  PJRT_Buffer_Type_F16 = 10,
  PJRT_Buffer_Type_F32 = 11,
  PJRT_Buffer_Type_F64 = 12,
  PJRT_Buffer_Type_BF16 = 13,
  PJRT_Buffer_Type_C64 = 14,
  PJRT_Buffer_Type_C128 = 15,
  PJRT_Buffer_Type_F8E5M2 = 16,
  PJRT_Buffer_Type_F8E4M3FN = 17,
  PJRT_Buffer_Type_F8E4M3B11FNUZ = 18,
  PJRT_Buffer_Type_F8E5M2FNUZ = 19,
  PJRT_Buffer_Type_F8E4M3FNUZ = 20,
  PJRT_Buffer_Type_S4 = 21,
  PJRT_Buffer_Type_U4 = 22,
  PJRT_Buffer_Type_TOKEN = 23,
  PJRT_Buffer_Type_S2 = 24,
  PJRT_Buffer_Type_U2 = 25,
  PJRT_Buffer_Type_F8E4M3 = 26,
  PJRT_Buffer_Type_F8E3M4 = 27,
  PJRT_Buffer_Type_F8E8M0FNU = 28,
  PJRT_Buffer_Type_F4E2M1FN = 29,
  PJRT_Buffer_Type_S1 = 30,
  PJRT_Buffer_Type_U1 = 31,
  PJRT_Buffer_Type_F6E2M3FN = 32,
  PJRT_Buffer_Type_F6E3M2FN = 33,
} PJRT_Buffer_Type;

typedef enum {
  PJRT_HostBufferSemantics_kImmutableOnlyDuringCall = 0,
  PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes = 1,
  PJRT_HostBufferSemantics_kImmutableZeroCopy = 2,
  PJRT_HostBufferSemantics_kMutableZeroCopy = 3,
} PJRT_HostBufferSemantics;

typedef enum {
  PJRT_Buffer_MemoryLayout_Type_Tiled = 0,
  PJRT_Buffer_MemoryLayout_Type_Strides = 1,
} PJRT_Buffer_MemoryLayout_Type;

// ---------------------------------------------------------------------------
// Plain data structs

typedef struct PJRT_NamedValue {
  size_t struct_size;
  PJRT_Extension_Base *extension_start;
  const char *name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char *string_value;
    int64_t int64_value;
    const int64_t *int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;  // elements for lists/strings, 1 for scalars
} PJRT_NamedValue;

typedef struct PJRT_Program {
  size_t struct_size;
  PJRT_Extension_Base *extension_start;
  char *code;  // in for Compile; out buffer for OptimizedProgram
  size_t code_size;
  const char *format;
  size_t format_size;
} PJRT_Program;

typedef struct PJRT_Buffer_MemoryLayout_Tiled {
  size_t struct_size;
  PJRT_Extension_Base *extension_start;
  const int64_t *minor_to_major;
  size_t minor_to_major_size;
  const int64_t *tile_dims;
  const size_t *tile_dim_sizes;
  size_t num_tiles;
} PJRT_Buffer_MemoryLayout_Tiled;

typedef struct PJRT_Buffer_MemoryLayout_Strides {
  size_t struct_size;
  PJRT_Extension_Base *extension_start;
  const int64_t *byte_strides;
  size_t num_byte_strides;
} PJRT_Buffer_MemoryLayout_Strides;

typedef struct PJRT_Buffer_MemoryLayout {
  size_t struct_size;
  PJRT_Extension_Base *extension_start;
  union {
    PJRT_Buffer_MemoryLayout_Tiled tiled;
    PJRT_Buffer_MemoryLayout_Strides strides;
  };
  PJRT_Buffer_MemoryLayout_Type type;
} PJRT_Buffer_MemoryLayout;

typedef struct PJRT_LogicalDeviceIds {
  int replica;
  int partition;
} PJRT_LogicalDeviceIds;

// The error vtable (0.107+). Frameworks call the PJRT_Error_* slots for
// plugin errors; we fill this too so either route works.
typedef void (*PJRT_Error_PayloadVisitor)(const char *key, size_t key_size,
                                          const char *value,
                                          size_t value_size, void *user_arg);
typedef struct PJRT_Error_FunctionTable {
  size_t struct_size;
  size_t instance_size;
  PJRT_Extension_Base *extension_start;
  void (*destroy)(PJRT_Error *error);
  void (*message)(const PJRT_Error *error, const char **message,
                  size_t *message_size);
  PJRT_Error_Code (*get_code)(const PJRT_Error *error);
  void (*for_each_payload)(const PJRT_Error *error,
                           PJRT_Error_PayloadVisitor visitor, void *user_arg);
} PJRT_Error_FunctionTable;

typedef void (*PJRT_Event_OnReadyCallback)(PJRT_Error *error, void *user_arg);

// Callbacks handed to Client_Create (we never call them: single process).
typedef void *PJRT_KeyValueGetCallback;
typedef void *PJRT_KeyValuePutCallback;
typedef void *PJRT_KeyValueTryGetCallback;

typedef struct PJRT_SendCallbackInfo PJRT_SendCallbackInfo;
typedef struct PJRT_RecvCallbackInfo PJRT_RecvCallbackInfo;
typedef struct PJRT_HloOutputCallbackInfo PJRT_HloOutputCallbackInfo;

typedef struct PJRT_ExecuteOptions {
  size_t struct_size;
  PJRT_Extension_Base *extension_start;
  PJRT_SendCallbackInfo **send_callbacks;
  PJRT_RecvCallbackInfo **recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t *non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
  PJRT_ExecuteContext *context;
  const char *call_location;
  size_t num_tasks;
  int *task_ids;
  int64_t *incarnation_ids;
  PJRT_MultiSlice_Config *multi_slice_config;
  // Fields from here on (offset >= 120) are absent for callers built with
  // headers before 0.108/0.112 (jaxlib 0.10.0 passes struct_size 120).
  bool use_major_to_minor_data_layout_for_callbacks;
  PJRT_HloOutputCallbackInfo *hlo_output_callbacks;
  size_t num_hlo_output_callbacks;
} PJRT_ExecuteOptions;

// ---------------------------------------------------------------------------
// Args structs of the functions the plugin implements. A shorthand for the
// common head:
#define IRON_PJRT_ARGS_HEAD_ \
  size_t struct_size;        \
  PJRT_Extension_Base *extension_start

// Errors
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_Error *error; } PJRT_Error_Destroy_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  const PJRT_Error *error;
  const char *message;  // out, lives as long as error
  size_t message_size;  // out
} PJRT_Error_Message_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  const PJRT_Error *error;
  PJRT_Error_Code code;  // out
} PJRT_Error_GetCode_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  const PJRT_Error *error;
  PJRT_Error_PayloadVisitor visitor;
  void *user_arg;
} PJRT_Error_ForEachPayload_Args;

// Plugin
typedef struct { IRON_PJRT_ARGS_HEAD_; } PJRT_Plugin_Initialize_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  const PJRT_NamedValue *attributes;  // out, process lifetime
  size_t num_attributes;              // out
} PJRT_Plugin_Attributes_Args;

// Events
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_Event *event; } PJRT_Event_Destroy_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Event *event;
  bool is_ready;  // out
} PJRT_Event_IsReady_Args;
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_Event *event; } PJRT_Event_Error_Args;
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_Event *event; } PJRT_Event_Await_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Event *event;
  PJRT_Event_OnReadyCallback callback;
  void *user_arg;
} PJRT_Event_OnReady_Args;
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_Event *event; } PJRT_Event_Create_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Event *event;
  PJRT_Error_Code error_code;
  const char *error_message;
  size_t error_message_size;
} PJRT_Event_Set_Args;

// Client
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  const PJRT_NamedValue *create_options;
  size_t num_options;
  PJRT_KeyValueGetCallback kv_get_callback;
  void *kv_get_user_arg;
  PJRT_KeyValuePutCallback kv_put_callback;
  void *kv_put_user_arg;
  PJRT_Client *client;  // out
  PJRT_KeyValueTryGetCallback kv_try_get_callback;
  void *kv_try_get_user_arg;
} PJRT_Client_Create_Args;
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_Client *client; } PJRT_Client_Destroy_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Client *client;
  const char *platform_name;  // out
  size_t platform_name_size;  // out
} PJRT_Client_PlatformName_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Client *client;
  int process_index;  // out
} PJRT_Client_ProcessIndex_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Client *client;
  const char *platform_version;  // out
  size_t platform_version_size;  // out
} PJRT_Client_PlatformVersion_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Client *client;
  PJRT_Device *const *devices;  // out
  size_t num_devices;           // out
} PJRT_Client_Devices_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Client *client;
  PJRT_Device *const *addressable_devices;  // out
  size_t num_addressable_devices;           // out
} PJRT_Client_AddressableDevices_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Client *client;
  int id;
  PJRT_Device *device;  // out
} PJRT_Client_LookupDevice_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Client *client;
  int local_hardware_id;
  PJRT_Device *addressable_device;  // out
} PJRT_Client_LookupAddressableDevice_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Client *client;
  PJRT_Memory *const *addressable_memories;  // out
  size_t num_addressable_memories;           // out
} PJRT_Client_AddressableMemories_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Client *client;
  const PJRT_Program *program;
  const char *compile_options;  // serialized CompileOptionsProto
  size_t compile_options_size;
  PJRT_LoadedExecutable *executable;  // out
} PJRT_Client_Compile_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Client *client;
  int num_replicas;
  int num_partitions;
  size_t default_assignment_size;
  int *default_assignment;  // caller-allocated, filled
} PJRT_Client_DefaultDeviceAssignment_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Client *client;
  const void *data;
  PJRT_Buffer_Type type;
  const int64_t *dims;
  size_t num_dims;
  const int64_t *byte_strides;  // may be NULL (dense)
  size_t num_byte_strides;
  PJRT_HostBufferSemantics host_buffer_semantics;
  PJRT_Device *device;  // NULL when memory is set
  PJRT_Memory *memory;
  PJRT_Buffer_MemoryLayout *device_layout;
  PJRT_Event *done_with_host_buffer;  // out
  PJRT_Buffer *buffer;                // out
} PJRT_Client_BufferFromHostBuffer_Args;

// Device descriptions
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_DeviceDescription *device_description;
  int id;  // out
} PJRT_DeviceDescription_Id_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_DeviceDescription *device_description;
  int process_index;  // out
} PJRT_DeviceDescription_ProcessIndex_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_DeviceDescription *device_description;
  size_t num_attributes;              // out
  const PJRT_NamedValue *attributes;  // out
} PJRT_DeviceDescription_Attributes_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_DeviceDescription *device_description;
  const char *device_kind;  // out
  size_t device_kind_size;  // out
} PJRT_DeviceDescription_Kind_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_DeviceDescription *device_description;
  const char *debug_string;  // out
  size_t debug_string_size;  // out
} PJRT_DeviceDescription_DebugString_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_DeviceDescription *device_description;
  const char *to_string;  // out
  size_t to_string_size;  // out
} PJRT_DeviceDescription_ToString_Args;

// Devices
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Device *device;
  PJRT_DeviceDescription *device_description;  // out
} PJRT_Device_GetDescription_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Device *device;
  bool is_addressable;  // out
} PJRT_Device_IsAddressable_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Device *device;
  int local_hardware_id;  // out
} PJRT_Device_LocalHardwareId_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Device *device;
  PJRT_Memory *const *memories;  // out
  size_t num_memories;           // out
} PJRT_Device_AddressableMemories_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Device *device;
  PJRT_Memory *memory;  // out
} PJRT_Device_DefaultMemory_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Device *device;
  int64_t bytes_in_use;  // out; every field below is out
  int64_t peak_bytes_in_use;
  bool peak_bytes_in_use_is_set;
  int64_t num_allocs;
  bool num_allocs_is_set;
  int64_t largest_alloc_size;
  bool largest_alloc_size_is_set;
  int64_t bytes_limit;
  bool bytes_limit_is_set;
  int64_t bytes_reserved;
  bool bytes_reserved_is_set;
  int64_t peak_bytes_reserved;
  bool peak_bytes_reserved_is_set;
  int64_t bytes_reservable_limit;
  bool bytes_reservable_limit_is_set;
  int64_t largest_free_block_bytes;
  bool largest_free_block_bytes_is_set;
  int64_t pool_bytes;
  bool pool_bytes_is_set;
  int64_t peak_pool_bytes;
  bool peak_pool_bytes_is_set;
  int64_t peak_allocated_bytes;  // 0.113+
  bool peak_allocated_bytes_is_set;
} PJRT_Device_MemoryStats_Args;
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_Device *device; } PJRT_Device_ClearMemoryStats_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Device *device;
  const PJRT_NamedValue *attributes;         // out
  size_t num_attributes;                     // out
  PJRT_Device_Attributes *device_attributes;  // out, handed to the deleter
  void (*attributes_deleter)(PJRT_Device_Attributes *device_attributes);  // out, never NULL
} PJRT_Device_GetAttributes_Args;

// Memories
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Memory *memory;
  int id;  // out
} PJRT_Memory_Id_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Memory *memory;
  const char *kind;  // out
  size_t kind_size;  // out
} PJRT_Memory_Kind_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Memory *memory;
  int kind_id;  // out
} PJRT_Memory_Kind_Id_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Memory *memory;
  const char *debug_string;  // out
  size_t debug_string_size;  // out
} PJRT_Memory_DebugString_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Memory *memory;
  const char *to_string;  // out
  size_t to_string_size;  // out
} PJRT_Memory_ToString_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Memory *memory;
  PJRT_Device *const *devices;  // out
  size_t num_devices;           // out
} PJRT_Memory_AddressableByDevices_Args;

// Executables
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_Executable *executable; } PJRT_Executable_Destroy_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Executable *executable;
  const char *executable_name;  // out
  size_t executable_name_size;  // out
} PJRT_Executable_Name_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Executable *executable;
  size_t num_replicas;  // out
} PJRT_Executable_NumReplicas_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Executable *executable;
  size_t num_partitions;  // out
} PJRT_Executable_NumPartitions_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Executable *executable;
  size_t num_outputs;  // out
} PJRT_Executable_NumOutputs_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Executable *executable;
  int64_t size_in_bytes;  // out
} PJRT_Executable_SizeOfGeneratedCodeInBytes_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Executable *executable;
  size_t num_outputs;               // out
  const char *const *memory_kinds;  // out
  const size_t *memory_kind_sizes;  // out
} PJRT_Executable_OutputMemoryKinds_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Executable *executable;
  size_t num_parameters;            // out
  const char *const *memory_kinds;  // out
  const size_t *memory_kind_sizes;  // out
} PJRT_Executable_ParameterMemoryKinds_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Executable *executable;
  PJRT_Program *program;  // caller-owned; code filled on the second call
} PJRT_Executable_OptimizedProgram_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Executable *executable;
  const char *executable_fingerprint;  // out
  size_t executable_fingerprint_size;  // out
} PJRT_Executable_Fingerprint_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Executable *executable;
  PJRT_Buffer_Type *output_types;  // out
  size_t num_output_types;         // out
} PJRT_Executable_OutputElementTypes_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Executable *executable;
  size_t num_outputs;       // out
  const int64_t *dims;      // out: all outputs' dims, concatenated
  const size_t *dim_sizes;  // out: rank of each output
} PJRT_Executable_OutputDimensions_Args;

// Loaded executables
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_LoadedExecutable *executable; } PJRT_LoadedExecutable_Destroy_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_LoadedExecutable *loaded_executable;
  PJRT_Executable *executable;  // out, owned by the caller
} PJRT_LoadedExecutable_GetExecutable_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_LoadedExecutable *executable;
  PJRT_Device *const *addressable_devices;  // out
  size_t num_addressable_devices;           // out
} PJRT_LoadedExecutable_AddressableDevices_Args;
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_LoadedExecutable *executable; } PJRT_LoadedExecutable_Delete_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_LoadedExecutable *executable;
  bool is_deleted;  // out
} PJRT_LoadedExecutable_IsDeleted_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_LoadedExecutable *executable;
  PJRT_ExecuteOptions *options;
  PJRT_Buffer *const *const *argument_lists;  // [num_devices][num_args]
  size_t num_devices;
  size_t num_args;
  PJRT_Buffer **const *output_lists;    // [num_devices][num_outputs], filled
  PJRT_Event **device_complete_events;  // [num_devices], filled if non-NULL
  PJRT_Device *execute_device;          // for portable executables
} PJRT_LoadedExecutable_Execute_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_LoadedExecutable *executable;
  const char *executable_fingerprint;  // out
  size_t executable_fingerprint_size;  // out
} PJRT_LoadedExecutable_Fingerprint_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_LoadedExecutable *executable;
  const char *serialized_bytes;  // out: DeviceAssignmentProto
  size_t serialized_bytes_size;  // out
  PJRT_DeviceAssignmentSerialized *serialized_device_assignment;  // out
  void (*serialized_device_assignment_deleter)(
      PJRT_DeviceAssignmentSerialized *da);  // out, never NULL
} PJRT_LoadedExecutable_GetDeviceAssignment_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_LoadedExecutable *executable;
  PJRT_LogicalDeviceIds *addressable_device_logical_ids;  // out
  size_t num_addressable_device_logical_ids;              // out
} PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args;

// Buffers
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_Buffer *buffer; } PJRT_Buffer_Destroy_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  PJRT_Buffer_Type type;  // out
} PJRT_Buffer_ElementType_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  const int64_t *dims;  // out
  size_t num_dims;      // out
} PJRT_Buffer_Dimensions_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  const int64_t *unpadded_dims;  // out
  size_t num_dims;               // out
} PJRT_Buffer_UnpaddedDimensions_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  const size_t *dynamic_dim_indices;  // out
  size_t num_dynamic_dims;            // out
} PJRT_Buffer_DynamicDimensionIndices_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  PJRT_Buffer_MemoryLayout layout;  // out, lives as long as buffer
} PJRT_Buffer_GetMemoryLayout_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *src;
  PJRT_Buffer_MemoryLayout *host_layout;  // NULL: the buffer's layout
  void *dst;        // NULL: query the size
  size_t dst_size;  // in/out
  PJRT_Event *event;  // out
} PJRT_Buffer_ToHostBuffer_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  size_t on_device_size_in_bytes;  // out
} PJRT_Buffer_OnDeviceSizeInBytes_Args;
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_Buffer *buffer; } PJRT_Buffer_Delete_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  bool is_deleted;  // out
} PJRT_Buffer_IsDeleted_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  PJRT_Device *dst_device;
  PJRT_Buffer *dst_buffer;  // out
} PJRT_Buffer_CopyToDevice_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  PJRT_Memory *dst_memory;
  PJRT_Buffer *dst_buffer;  // out
} PJRT_Buffer_CopyToMemory_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  bool is_on_cpu;  // out
} PJRT_Buffer_IsOnCpu_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  PJRT_Device *device;  // out
} PJRT_Buffer_Device_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  PJRT_Memory *memory;  // out
} PJRT_Buffer_Memory_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  PJRT_Event *event;  // out
} PJRT_Buffer_ReadyEvent_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  uintptr_t buffer_pointer;  // out
} PJRT_Buffer_UnsafePointer_Args;
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_Buffer *buffer; } PJRT_Buffer_IncreaseExternalReferenceCount_Args;
typedef struct { IRON_PJRT_ARGS_HEAD_; PJRT_Buffer *buffer; } PJRT_Buffer_DecreaseExternalReferenceCount_Args;
typedef struct {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Buffer *buffer;
  void *device_memory_ptr;  // out
} PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args;

// ---------------------------------------------------------------------------
// The function table. The list is the exact ABI slot order at 0.114: slot i
// is at byte offset 40 + 8 * i. X(name) for functions returning PJRT_Error*,
// V(name) for the two that return void. Appending only: new slots go last.
#define IRON_PJRT_API_SLOTS(X, V)                          \
  /*   0 */ V(Error_Destroy)                               \
  V(Error_Message)                                         \
  X(Error_GetCode)                                         \
  X(Plugin_Initialize)                                     \
  X(Plugin_Attributes)                                     \
  X(Event_Destroy)                                         \
  X(Event_IsReady)                                         \
  X(Event_Error)                                           \
  X(Event_Await)                                           \
  X(Event_OnReady)                                         \
  /*  10 */ X(Client_Create)                               \
  X(Client_Destroy)                                        \
  X(Client_PlatformName)                                   \
  X(Client_ProcessIndex)                                   \
  X(Client_PlatformVersion)                                \
  X(Client_Devices)                                        \
  X(Client_AddressableDevices)                             \
  X(Client_LookupDevice)                                   \
  X(Client_LookupAddressableDevice)                        \
  X(Client_AddressableMemories)                            \
  /*  20 */ X(Client_Compile)                              \
  X(Client_DefaultDeviceAssignment)                        \
  X(Client_BufferFromHostBuffer)                           \
  X(DeviceDescription_Id)                                  \
  X(DeviceDescription_ProcessIndex)                        \
  X(DeviceDescription_Attributes)                          \
  X(DeviceDescription_Kind)                                \
  X(DeviceDescription_DebugString)                         \
  X(DeviceDescription_ToString)                            \
  X(Device_GetDescription)                                 \
  /*  30 */ X(Device_IsAddressable)                        \
  X(Device_LocalHardwareId)                                \
  X(Device_AddressableMemories)                            \
  X(Device_DefaultMemory)                                  \
  X(Device_MemoryStats)                                    \
  X(Memory_Id)                                             \
  X(Memory_Kind)                                           \
  X(Memory_DebugString)                                    \
  X(Memory_ToString)                                       \
  X(Memory_AddressableByDevices)                           \
  /*  40 */ X(Executable_Destroy)                          \
  X(Executable_Name)                                       \
  X(Executable_NumReplicas)                                \
  X(Executable_NumPartitions)                              \
  X(Executable_NumOutputs)                                 \
  X(Executable_SizeOfGeneratedCodeInBytes)                 \
  X(Executable_GetCostAnalysis)                            \
  X(Executable_OutputMemoryKinds)                          \
  X(Executable_OptimizedProgram)                           \
  X(Executable_Serialize)                                  \
  /*  50 */ X(LoadedExecutable_Destroy)                    \
  X(LoadedExecutable_GetExecutable)                        \
  X(LoadedExecutable_AddressableDevices)                   \
  X(LoadedExecutable_Delete)                               \
  X(LoadedExecutable_IsDeleted)                            \
  X(LoadedExecutable_Execute)                              \
  X(Executable_DeserializeAndLoad)                         \
  X(LoadedExecutable_Fingerprint)                          \
  X(Buffer_Destroy)                                        \
  X(Buffer_ElementType)                                    \
  /*  60 */ X(Buffer_Dimensions)                           \
  X(Buffer_UnpaddedDimensions)                             \
  X(Buffer_DynamicDimensionIndices)                        \
  X(Buffer_GetMemoryLayout)                                \
  X(Buffer_OnDeviceSizeInBytes)                            \
  X(Buffer_Device)                                         \
  X(Buffer_Memory)                                         \
  X(Buffer_Delete)                                         \
  X(Buffer_IsDeleted)                                      \
  X(Buffer_CopyToDevice)                                   \
  /*  70 */ X(Buffer_ToHostBuffer)                         \
  X(Buffer_IsOnCpu)                                        \
  X(Buffer_ReadyEvent)                                     \
  X(Buffer_UnsafePointer)                                  \
  X(Buffer_IncreaseExternalReferenceCount)                 \
  X(Buffer_DecreaseExternalReferenceCount)                 \
  X(Buffer_OpaqueDeviceMemoryDataPointer)                  \
  X(CopyToDeviceStream_Destroy)                            \
  X(CopyToDeviceStream_AddChunk)                           \
  X(CopyToDeviceStream_TotalBytes)                         \
  /*  80 */ X(CopyToDeviceStream_GranuleSize)              \
  X(CopyToDeviceStream_CurrentBytes)                       \
  X(TopologyDescription_Create)                            \
  X(TopologyDescription_Destroy)                           \
  X(TopologyDescription_PlatformName)                      \
  X(TopologyDescription_PlatformVersion)                   \
  X(TopologyDescription_GetDeviceDescriptions)             \
  X(TopologyDescription_Serialize)                         \
  X(TopologyDescription_Attributes)                        \
  X(Compile)                                               \
  /*  90 */ X(Executable_OutputElementTypes)               \
  X(Executable_OutputDimensions)                           \
  X(Buffer_CopyToMemory)                                   \
  X(Client_CreateViewOfDeviceBuffer)                       \
  X(Executable_Fingerprint)                                \
  X(Client_TopologyDescription)                            \
  X(Executable_GetCompiledMemoryStats)                     \
  X(Memory_Kind_Id)                                        \
  X(ExecuteContext_Create)                                 \
  X(ExecuteContext_Destroy)                                \
  /* 100 */ X(Buffer_CopyRawToHost)                        \
  X(AsyncHostToDeviceTransferManager_Destroy)              \
  X(AsyncHostToDeviceTransferManager_TransferData)         \
  X(Client_CreateBuffersForAsyncHostToDevice)              \
  X(AsyncHostToDeviceTransferManager_RetrieveBuffer)       \
  X(AsyncHostToDeviceTransferManager_Device)               \
  X(AsyncHostToDeviceTransferManager_BufferCount)          \
  X(AsyncHostToDeviceTransferManager_BufferSize)           \
  X(AsyncHostToDeviceTransferManager_SetBufferError)       \
  X(AsyncHostToDeviceTransferManager_AddMetadata)          \
  /* 110 */ X(Client_DmaMap)                               \
  X(Client_DmaUnmap)                                       \
  X(Client_CreateUninitializedBuffer)                      \
  X(Client_UpdateGlobalProcessInfo)                        \
  X(TopologyDescription_Deserialize)                       \
  X(Client_CreateAliasBuffer)                              \
  X(Client_FulfillAliasBuffer)                             \
  X(LoadedExecutable_GetDeviceAssignment)                  \
  X(Client_CreateErrorBuffer)                              \
  X(AsyncHostToDeviceTransferManager_TransferLiteral)      \
  /* 120 */ X(Buffer_CopyRawToHostFuture)                  \
  X(Device_PoisonExecution)                                \
  X(Device_CreateAsyncTrackingEvent)                       \
  X(AsyncTrackingEvent_Destroy)                            \
  X(Executable_GetCompileOptions)                          \
  X(Buffer_DonateWithControlDependency)                    \
  X(Event_Create)                                          \
  X(Event_Set)                                             \
  X(Device_GetAttributes)                                  \
  X(Client_Load)                                           \
  /* 130 */ X(LoadedExecutable_AddressableDeviceLogicalIds) \
  X(Buffer_Bitcast)                                        \
  X(Error_ForEachPayload)                                  \
  X(TopologyDescription_Fingerprint)                       \
  X(Executable_ParameterMemoryKinds)                       \
  X(Device_ClearMemoryStats)                               \
  X(TopologyDescription_MakeCanonicalShapeForMemorySpace)  \
  X(TopologyDescription_GetMemorySpaceKindIds)

// Serialization, compile options and cost analysis (declared in full: the
// plugin implements them).
typedef struct PJRT_SerializedExecutable PJRT_SerializedExecutable;
typedef struct PJRT_SerializedCompileOptions PJRT_SerializedCompileOptions;
typedef struct PJRT_LoadOptions PJRT_LoadOptions;
typedef struct PJRT_Executable_Serialize_Args {
  IRON_PJRT_ARGS_HEAD_;
  const PJRT_Executable *executable;
  const char *serialized_bytes;  // out, lives as long as serialized_executable
  size_t serialized_bytes_size;  // out
  PJRT_SerializedExecutable *serialized_executable;  // out
  void (*serialized_executable_deleter)(PJRT_SerializedExecutable *exec);  // out
} PJRT_Executable_Serialize_Args;
typedef struct PJRT_Executable_DeserializeAndLoad_Args {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Client *client;
  const char *serialized_executable;
  size_t serialized_executable_size;
  PJRT_LoadedExecutable *loaded_executable;  // out
  // Serialized CompileOptionsProto, or NULL for the serialized ones.
  const char *overridden_serialized_compile_options;
  size_t overridden_serialized_compile_options_size;
  PJRT_LoadOptions *load_options;
} PJRT_Executable_DeserializeAndLoad_Args;
typedef struct PJRT_Executable_GetCompileOptions_Args {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Executable *executable;
  const char *serialized_bytes;  // out
  size_t serialized_bytes_size;  // out
  PJRT_SerializedCompileOptions *serialized_compile_options;  // out
  void (*serialized_compile_options_deleter)(
      PJRT_SerializedCompileOptions *options);  // out
} PJRT_Executable_GetCompileOptions_Args;
typedef struct PJRT_Executable_GetCostAnalysis_Args {
  IRON_PJRT_ARGS_HEAD_;
  PJRT_Executable *executable;
  size_t num_properties;  // out
  // Owned by the executable, live as long as it.
  const PJRT_NamedValue *properties;  // out
} PJRT_Executable_GetCostAnalysis_Args;

// Args structs of the slots we leave unimplemented stay incomplete types: the
// stubs never look inside them.
#define IRON_PJRT_DECLARE_ARGS_(name) \
  typedef struct PJRT_##name##_Args PJRT_##name##_Args;
IRON_PJRT_DECLARE_ARGS_(CopyToDeviceStream_Destroy)
IRON_PJRT_DECLARE_ARGS_(CopyToDeviceStream_AddChunk)
IRON_PJRT_DECLARE_ARGS_(CopyToDeviceStream_TotalBytes)
IRON_PJRT_DECLARE_ARGS_(CopyToDeviceStream_GranuleSize)
IRON_PJRT_DECLARE_ARGS_(CopyToDeviceStream_CurrentBytes)
IRON_PJRT_DECLARE_ARGS_(TopologyDescription_Create)
IRON_PJRT_DECLARE_ARGS_(TopologyDescription_Destroy)
IRON_PJRT_DECLARE_ARGS_(TopologyDescription_PlatformName)
IRON_PJRT_DECLARE_ARGS_(TopologyDescription_PlatformVersion)
IRON_PJRT_DECLARE_ARGS_(TopologyDescription_GetDeviceDescriptions)
IRON_PJRT_DECLARE_ARGS_(TopologyDescription_Serialize)
IRON_PJRT_DECLARE_ARGS_(TopologyDescription_Attributes)
IRON_PJRT_DECLARE_ARGS_(Compile)
IRON_PJRT_DECLARE_ARGS_(Client_CreateViewOfDeviceBuffer)
IRON_PJRT_DECLARE_ARGS_(Client_TopologyDescription)
IRON_PJRT_DECLARE_ARGS_(Executable_GetCompiledMemoryStats)
IRON_PJRT_DECLARE_ARGS_(ExecuteContext_Create)
IRON_PJRT_DECLARE_ARGS_(ExecuteContext_Destroy)
IRON_PJRT_DECLARE_ARGS_(Buffer_CopyRawToHost)
IRON_PJRT_DECLARE_ARGS_(AsyncHostToDeviceTransferManager_Destroy)
IRON_PJRT_DECLARE_ARGS_(AsyncHostToDeviceTransferManager_TransferData)
IRON_PJRT_DECLARE_ARGS_(Client_CreateBuffersForAsyncHostToDevice)
IRON_PJRT_DECLARE_ARGS_(AsyncHostToDeviceTransferManager_RetrieveBuffer)
IRON_PJRT_DECLARE_ARGS_(AsyncHostToDeviceTransferManager_Device)
IRON_PJRT_DECLARE_ARGS_(AsyncHostToDeviceTransferManager_BufferCount)
IRON_PJRT_DECLARE_ARGS_(AsyncHostToDeviceTransferManager_BufferSize)
IRON_PJRT_DECLARE_ARGS_(AsyncHostToDeviceTransferManager_SetBufferError)
IRON_PJRT_DECLARE_ARGS_(AsyncHostToDeviceTransferManager_AddMetadata)
IRON_PJRT_DECLARE_ARGS_(Client_DmaMap)
IRON_PJRT_DECLARE_ARGS_(Client_DmaUnmap)
IRON_PJRT_DECLARE_ARGS_(Client_CreateUninitializedBuffer)
IRON_PJRT_DECLARE_ARGS_(Client_UpdateGlobalProcessInfo)
IRON_PJRT_DECLARE_ARGS_(TopologyDescription_Deserialize)
IRON_PJRT_DECLARE_ARGS_(Client_CreateAliasBuffer)
IRON_PJRT_DECLARE_ARGS_(Client_FulfillAliasBuffer)
IRON_PJRT_DECLARE_ARGS_(Client_CreateErrorBuffer)
IRON_PJRT_DECLARE_ARGS_(AsyncHostToDeviceTransferManager_TransferLiteral)
IRON_PJRT_DECLARE_ARGS_(Buffer_CopyRawToHostFuture)
IRON_PJRT_DECLARE_ARGS_(Device_PoisonExecution)
IRON_PJRT_DECLARE_ARGS_(Device_CreateAsyncTrackingEvent)
IRON_PJRT_DECLARE_ARGS_(AsyncTrackingEvent_Destroy)
IRON_PJRT_DECLARE_ARGS_(Buffer_DonateWithControlDependency)
IRON_PJRT_DECLARE_ARGS_(Client_Load)
IRON_PJRT_DECLARE_ARGS_(Buffer_Bitcast)
IRON_PJRT_DECLARE_ARGS_(TopologyDescription_Fingerprint)
IRON_PJRT_DECLARE_ARGS_(TopologyDescription_MakeCanonicalShapeForMemorySpace)
IRON_PJRT_DECLARE_ARGS_(TopologyDescription_GetMemorySpaceKindIds)
#undef IRON_PJRT_DECLARE_ARGS_

// Slot indices, for the layout checks.
enum {
#define IRON_PJRT_SLOT_INDEX_(name) IRON_PJRT_SLOT_##name,
  IRON_PJRT_API_SLOTS(IRON_PJRT_SLOT_INDEX_, IRON_PJRT_SLOT_INDEX_)
#undef IRON_PJRT_SLOT_INDEX_
  IRON_PJRT_SLOT_COUNT
};

typedef struct PJRT_Api {
  size_t struct_size;
  PJRT_Extension_Base *extension_start;
  PJRT_Api_Version pjrt_api_version;
#define IRON_PJRT_SLOT_FIELD_(name) PJRT_Error *(*PJRT_##name)(PJRT_##name##_Args *args);
#define IRON_PJRT_SLOT_FIELD_VOID_(name) void (*PJRT_##name)(PJRT_##name##_Args *args);
  IRON_PJRT_API_SLOTS(IRON_PJRT_SLOT_FIELD_, IRON_PJRT_SLOT_FIELD_VOID_)
#undef IRON_PJRT_SLOT_FIELD_
#undef IRON_PJRT_SLOT_FIELD_VOID_
} PJRT_Api;

// ---------------------------------------------------------------------------
// Layout checks (LP64). Sizes are the *_STRUCT_SIZE values the framework
// passes, as observed from jaxlib 0.11.2 or computed from the 0.114 layout.

_Static_assert(sizeof(void *) == 8, "the PJRT ABI layouts below assume LP64");
_Static_assert(IRON_PJRT_SLOT_COUNT == 138, "PJRT 0.114 has 138 slots");
_Static_assert(sizeof(PJRT_Api) == 1144, "PJRT_Api size");
_Static_assert(offsetof(PJRT_Api, pjrt_api_version) == 16, "api version");
#define IRON_PJRT_CHECK_SLOT_(name)                                        \
  _Static_assert(offsetof(PJRT_Api, PJRT_##name) ==                        \
                     40 + 8 * (size_t)IRON_PJRT_SLOT_##name,               \
                 "slot offset of PJRT_" #name);
IRON_PJRT_API_SLOTS(IRON_PJRT_CHECK_SLOT_, IRON_PJRT_CHECK_SLOT_)
#undef IRON_PJRT_CHECK_SLOT_
// A few slot indices spelled out, so a reordering of the list is caught.
_Static_assert(IRON_PJRT_SLOT_Client_Create == 10, "slot order");
_Static_assert(IRON_PJRT_SLOT_Client_BufferFromHostBuffer == 22, "slot order");
_Static_assert(IRON_PJRT_SLOT_LoadedExecutable_Execute == 55, "slot order");
_Static_assert(IRON_PJRT_SLOT_Compile == 89, "slot order");
_Static_assert(IRON_PJRT_SLOT_Memory_Kind_Id == 97, "slot order");
_Static_assert(IRON_PJRT_SLOT_Client_DmaMap == 110, "slot order");
_Static_assert(IRON_PJRT_SLOT_LoadedExecutable_GetDeviceAssignment == 117,
               "slot order");
_Static_assert(IRON_PJRT_SLOT_Event_Create == 126, "slot order");
_Static_assert(IRON_PJRT_SLOT_Device_GetAttributes == 128, "slot order");
_Static_assert(IRON_PJRT_SLOT_Error_ForEachPayload == 132, "slot order");
_Static_assert(IRON_PJRT_SLOT_Executable_ParameterMemoryKinds == 134,
               "slot order");

_Static_assert(sizeof(PJRT_Executable_Serialize_Args) == 56, "Serialize args");
_Static_assert(IRON_PJRT_STRUCT_SIZE(PJRT_Executable_DeserializeAndLoad_Args,
                                     load_options) == 72,
               "DeserializeAndLoad args");
_Static_assert(sizeof(PJRT_Executable_GetCompileOptions_Args) == 56,
               "GetCompileOptions args");
_Static_assert(sizeof(PJRT_Executable_GetCostAnalysis_Args) == 40,
               "GetCostAnalysis args");
_Static_assert(sizeof(PJRT_Extension_Base) == 24, "extension base");
_Static_assert(sizeof(PJRT_Api_Version) == 24, "api version");
_Static_assert(sizeof(PJRT_NamedValue) == 56, "named value");
_Static_assert(offsetof(PJRT_NamedValue, int64_value) == 40, "named value");
_Static_assert(sizeof(PJRT_Program) == 48, "program");
_Static_assert(sizeof(PJRT_Buffer_MemoryLayout_Tiled) == 56, "tiled");
_Static_assert(sizeof(PJRT_Buffer_MemoryLayout) == 80, "memory layout");
_Static_assert(offsetof(PJRT_Buffer_MemoryLayout, type) == 72, "layout type");
_Static_assert(sizeof(PJRT_Error_FunctionTable) == 56, "error vtable");
_Static_assert(IRON_PJRT_STRUCT_SIZE(PJRT_ExecuteOptions,
                                     num_hlo_output_callbacks) == 144,
               "ExecuteOptions");
_Static_assert(offsetof(PJRT_ExecuteOptions,
                        use_major_to_minor_data_layout_for_callbacks) == 120,
               "ExecuteOptions fields gated on struct_size start at 120");
_Static_assert(offsetof(PJRT_ExecuteOptions, non_donatable_input_indices) == 56,
               "ExecuteOptions");
_Static_assert(IRON_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_Execute_Args,
                                     execute_device) == 80,
               "Execute args");
_Static_assert(IRON_PJRT_STRUCT_SIZE(PJRT_Client_BufferFromHostBuffer_Args,
                                     buffer) == 120,
               "BufferFromHostBuffer args");
_Static_assert(offsetof(PJRT_Client_BufferFromHostBuffer_Args, memory) == 88,
               "BufferFromHostBuffer args");
_Static_assert(IRON_PJRT_STRUCT_SIZE(PJRT_Client_Compile_Args, executable) ==
                   56,
               "Compile args");
_Static_assert(IRON_PJRT_STRUCT_SIZE(PJRT_Client_Create_Args,
                                     kv_try_get_user_arg) == 88,
               "Client_Create args");
_Static_assert(offsetof(PJRT_Client_Create_Args, client) == 64,
               "Client_Create args");
_Static_assert(IRON_PJRT_STRUCT_SIZE(PJRT_Buffer_ToHostBuffer_Args, event) ==
                   56,
               "ToHostBuffer args");
_Static_assert(IRON_PJRT_STRUCT_SIZE(PJRT_Device_GetAttributes_Args,
                                     attributes_deleter) == 56,
               "Device_GetAttributes args");
_Static_assert(IRON_PJRT_STRUCT_SIZE(PJRT_Device_MemoryStats_Args,
                                     peak_allocated_bytes_is_set) == 201,
               "MemoryStats args");
_Static_assert(IRON_PJRT_STRUCT_SIZE(PJRT_Buffer_GetMemoryLayout_Args,
                                     layout) == 104,
               "GetMemoryLayout args");
_Static_assert(IRON_PJRT_STRUCT_SIZE(PJRT_Event_Set_Args,
                                     error_message_size) == 48,
               "Event_Set args");
_Static_assert(IRON_PJRT_STRUCT_SIZE(
                   PJRT_LoadedExecutable_GetDeviceAssignment_Args,
                   serialized_device_assignment_deleter) == 56,
               "GetDeviceAssignment args");
_Static_assert(IRON_PJRT_STRUCT_SIZE(PJRT_Executable_OutputDimensions_Args,
                                     dim_sizes) == 48,
               "OutputDimensions args");

#endif  // IRON_PJRT_PJRT_ABI_H_
