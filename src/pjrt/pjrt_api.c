// GetPjrtApi: the plugin's only exported symbol. jaxlib dlopens every
// discovered plugin and calls it at discovery time, even when JAX_PLATFORMS
// excludes the plugin, so it only hands out a constant table: the runtime is
// created in PJRT_Client_Create.
//
// Every one of the 138 slots is filled: jaxlib calls most slots without a
// NULL check. Slots ironjax does not implement return UNIMPLEMENTED naming
// the function.
#include <stdio.h>
#include <stdlib.h>

#include "pjrt/pjrt_internal.h"

// One stub per slot, returning "PJRT_<slot> is not implemented by ironjax".
// Those whose slot is implemented below are unused.
#define IRON_PJRT_STUB_(name)                                              \
  __attribute__((unused)) static PJRT_Error *iron_pjrt_stub_##name(        \
      PJRT_##name##_Args *args) {                                          \
    (void)args;                                                            \
    return iron_pjrt_error_unimplemented("PJRT_" #name);                   \
  }
#define IRON_PJRT_NO_STUB_(name)
IRON_PJRT_API_SLOTS(IRON_PJRT_STUB_, IRON_PJRT_NO_STUB_)
#undef IRON_PJRT_STUB_
#undef IRON_PJRT_NO_STUB_

// The table: first every slot set to its stub, then the implemented slots
// set again. The second initializer of a field wins (C17 6.7.9p19), which is
// exactly the intent here, so GCC's override warning is off for this block.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const PJRT_Api iron_pjrt_api = {
    .struct_size = sizeof(PJRT_Api),
    .extension_start = NULL,
    .pjrt_api_version =
        {
            .struct_size = sizeof(PJRT_Api_Version),
            .extension_start = NULL,
            .major_version = IRON_PJRT_API_MAJOR,
            .minor_version = IRON_PJRT_API_MINOR,
        },
#define IRON_PJRT_STUB_SLOT_(name) .PJRT_##name = iron_pjrt_stub_##name,
#define IRON_PJRT_NO_STUB_SLOT_(name)
    IRON_PJRT_API_SLOTS(IRON_PJRT_STUB_SLOT_, IRON_PJRT_NO_STUB_SLOT_)
#undef IRON_PJRT_STUB_SLOT_
#undef IRON_PJRT_NO_STUB_SLOT_

#define IMPL(name) .PJRT_##name = iron_pjrt_##name
    // Errors
    IMPL(Error_Destroy),
    IMPL(Error_Message),
    IMPL(Error_GetCode),
    IMPL(Error_ForEachPayload),
    // Plugin
    IMPL(Plugin_Initialize),
    IMPL(Plugin_Attributes),
    // Events
    IMPL(Event_Destroy),
    IMPL(Event_IsReady),
    IMPL(Event_Error),
    IMPL(Event_Await),
    IMPL(Event_OnReady),
    IMPL(Event_Create),
    IMPL(Event_Set),
    // Client
    IMPL(Client_Create),
    IMPL(Client_Destroy),
    IMPL(Client_PlatformName),
    IMPL(Client_ProcessIndex),
    IMPL(Client_PlatformVersion),
    IMPL(Client_Devices),
    IMPL(Client_AddressableDevices),
    IMPL(Client_LookupDevice),
    IMPL(Client_LookupAddressableDevice),
    IMPL(Client_AddressableMemories),
    IMPL(Client_Compile),
    IMPL(Client_DefaultDeviceAssignment),
    IMPL(Client_BufferFromHostBuffer),
    // Device descriptions
    IMPL(DeviceDescription_Id),
    IMPL(DeviceDescription_ProcessIndex),
    IMPL(DeviceDescription_Attributes),
    IMPL(DeviceDescription_Kind),
    IMPL(DeviceDescription_DebugString),
    IMPL(DeviceDescription_ToString),
    // Devices
    IMPL(Device_GetDescription),
    IMPL(Device_IsAddressable),
    IMPL(Device_LocalHardwareId),
    IMPL(Device_AddressableMemories),
    IMPL(Device_DefaultMemory),
    IMPL(Device_MemoryStats),
    IMPL(Device_ClearMemoryStats),
    IMPL(Device_GetAttributes),
    // Memories
    IMPL(Memory_Id),
    IMPL(Memory_Kind),
    IMPL(Memory_Kind_Id),
    IMPL(Memory_DebugString),
    IMPL(Memory_ToString),
    IMPL(Memory_AddressableByDevices),
    // Executables
    IMPL(Executable_Destroy),
    IMPL(Executable_Name),
    IMPL(Executable_NumReplicas),
    IMPL(Executable_NumPartitions),
    IMPL(Executable_NumOutputs),
    IMPL(Executable_SizeOfGeneratedCodeInBytes),
    IMPL(Executable_OutputMemoryKinds),
    IMPL(Executable_ParameterMemoryKinds),
    IMPL(Executable_OptimizedProgram),
    IMPL(Executable_Fingerprint),
    IMPL(Executable_OutputElementTypes),
    IMPL(Executable_OutputDimensions),
    IMPL(Executable_Serialize),
    IMPL(Executable_DeserializeAndLoad),
    IMPL(Executable_GetCompileOptions),
    IMPL(Executable_GetCostAnalysis),
    // Loaded executables
    IMPL(LoadedExecutable_Destroy),
    IMPL(LoadedExecutable_GetExecutable),
    IMPL(LoadedExecutable_AddressableDevices),
    IMPL(LoadedExecutable_Delete),
    IMPL(LoadedExecutable_IsDeleted),
    IMPL(LoadedExecutable_Execute),
    IMPL(LoadedExecutable_Fingerprint),
    IMPL(LoadedExecutable_GetDeviceAssignment),
    IMPL(LoadedExecutable_AddressableDeviceLogicalIds),
    // Buffers
    IMPL(Buffer_Destroy),
    IMPL(Buffer_ElementType),
    IMPL(Buffer_Dimensions),
    IMPL(Buffer_UnpaddedDimensions),
    IMPL(Buffer_DynamicDimensionIndices),
    IMPL(Buffer_GetMemoryLayout),
    IMPL(Buffer_OnDeviceSizeInBytes),
    IMPL(Buffer_Device),
    IMPL(Buffer_Memory),
    IMPL(Buffer_Delete),
    IMPL(Buffer_IsDeleted),
    IMPL(Buffer_CopyToDevice),
    IMPL(Buffer_CopyToMemory),
    IMPL(Buffer_ToHostBuffer),
    IMPL(Buffer_IsOnCpu),
    IMPL(Buffer_ReadyEvent),
    IMPL(Buffer_UnsafePointer),
    IMPL(Buffer_IncreaseExternalReferenceCount),
    IMPL(Buffer_DecreaseExternalReferenceCount),
    IMPL(Buffer_OpaqueDeviceMemoryDataPointer),
#undef IMPL
};
#pragma GCC diagnostic pop

// IRON_PJRT_TRACE=1: a second table whose every slot logs its name (and any
// error it returns) to stderr, then calls the real slot. For finding out
// what a jaxlib version calls and in which order; off by default.
static void iron_pjrt_trace_result(const char *name, PJRT_Error *error) {
  if (error == NULL) {
    fprintf(stderr, "[iron-pjrt] %s\n", name);
  } else {
    const char *message = error->status ? iron_status_message(error->status)
                                        : "out of memory";
    fprintf(stderr, "[iron-pjrt] %s -> %s\n", name, message);
  }
}

#define IRON_PJRT_TRACE_(name)                                           \
  static PJRT_Error *iron_pjrt_trace_##name(PJRT_##name##_Args *args) {  \
    PJRT_Error *error = iron_pjrt_api.PJRT_##name(args);                 \
    iron_pjrt_trace_result("PJRT_" #name, error);                        \
    return error;                                                        \
  }
#define IRON_PJRT_TRACE_VOID_(name)                                      \
  static void iron_pjrt_trace_##name(PJRT_##name##_Args *args) {         \
    fprintf(stderr, "[iron-pjrt] PJRT_" #name "\n");                     \
    iron_pjrt_api.PJRT_##name(args);                                     \
  }
IRON_PJRT_API_SLOTS(IRON_PJRT_TRACE_, IRON_PJRT_TRACE_VOID_)
#undef IRON_PJRT_TRACE_
#undef IRON_PJRT_TRACE_VOID_

static const PJRT_Api iron_pjrt_traced_api = {
    .struct_size = sizeof(PJRT_Api),
    .extension_start = NULL,
    .pjrt_api_version =
        {
            .struct_size = sizeof(PJRT_Api_Version),
            .extension_start = NULL,
            .major_version = IRON_PJRT_API_MAJOR,
            .minor_version = IRON_PJRT_API_MINOR,
        },
#define IRON_PJRT_TRACE_SLOT_(name) .PJRT_##name = iron_pjrt_trace_##name,
    IRON_PJRT_API_SLOTS(IRON_PJRT_TRACE_SLOT_, IRON_PJRT_TRACE_SLOT_)
#undef IRON_PJRT_TRACE_SLOT_
};

__attribute__((visibility("default"))) const PJRT_Api *GetPjrtApi(void);

const PJRT_Api *GetPjrtApi(void) {
  const char *trace = getenv("IRON_PJRT_TRACE");
  if (trace != NULL && trace[0] != '\0' && trace[0] != '0')
    return &iron_pjrt_traced_api;
  return &iron_pjrt_api;
}
