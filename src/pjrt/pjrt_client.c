// The plugin, the client, its devices, device descriptions and memories.
// Every device has a memory of kind "device", its default memory; host
// devices also have "pinned_host" and "unpinned_host", as XLA:CPU's devices
// do (all backed by the same host allocator). jaxlib aborts the process if most of these queries fail,
// so they only read fields fixed at client creation.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt/pjrt_internal.h"

// ---------------------------------------------------------------------------
// Plugin

PJRT_Error *iron_pjrt_Plugin_Initialize(PJRT_Plugin_Initialize_Args *args) {
  (void)args;
  return NULL;
}

// VHLO target jaxlib serializes to: min(this, jaxlib's own current version).
// Pinned to a version our reader (src/stablehlo) supports; 1.16 is at or
// below the current version of every jaxlib from 0.10.0 on, so all of them
// emit the same op versions.
static const int64_t iron_pjrt_stablehlo_current_version[3] = {1, 16, 0};

static const PJRT_NamedValue iron_pjrt_plugin_attributes[] = {
    {
        .struct_size = sizeof(PJRT_NamedValue),
        .name = "stablehlo_current_version",
        .name_size = sizeof("stablehlo_current_version") - 1,
        .type = PJRT_NamedValue_kInt64List,
        .int64_array_value = iron_pjrt_stablehlo_current_version,
        .value_size = 3,
    },
};

PJRT_Error *iron_pjrt_Plugin_Attributes(PJRT_Plugin_Attributes_Args *args) {
  args->attributes = iron_pjrt_plugin_attributes;
  args->num_attributes =
      sizeof(iron_pjrt_plugin_attributes) / sizeof(iron_pjrt_plugin_attributes[0]);
  return NULL;
}

// ---------------------------------------------------------------------------
// Client

static bool iron_pjrt_name_is(const PJRT_NamedValue *value, const char *name) {
  return value->name != NULL && value->name_size == strlen(name) &&
         memcmp(value->name, name, value->name_size) == 0;
}

static void iron_pjrt_client_free(PJRT_Client *client) {
  if (client == NULL) return;
  free(client->devices);
  free(client->memories);
  free(client->device_storage);
  free(client->memory_storage);
  if (client->runtime != NULL) iron_runtime_release(client->runtime);
  free(client);
}

static iron_status_t iron_pjrt_client_make(const PJRT_Client_Create_Args *args,
                                           PJRT_Client **out_client) {
  iron_runtime_options_t options = {.num_threads = 0};
  // Create options come from register_plugin(options=...) and
  // jax_pjrt_client_create_options; unknown ones are ignored.
  for (size_t i = 0; i < args->num_options && args->create_options; ++i) {
    const PJRT_NamedValue *value = &args->create_options[i];
    if (iron_pjrt_name_is(value, "num_threads") &&
        value->type == PJRT_NamedValue_kInt64 && value->int64_value > 0 &&
        value->int64_value < 4096) {
      options.num_threads = (int)value->int64_value;
    }
  }

  PJRT_Client *client = calloc(1, sizeof(*client));
  if (client == NULL) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  iron_status_t status = iron_runtime_create(&options, &client->runtime);
  if (status != IRON_OK) {
    iron_pjrt_client_free(client);
    return iron_status_annotate(status, "while creating the ironjax runtime");
  }
  int count = iron_runtime_device_count(client->runtime);
  if (count <= 0) {
    iron_pjrt_client_free(client);
    return IRON_ERR(INTERNAL, "the ironjax runtime has no devices");
  }
  size_t n = (size_t)count;
  client->num_devices = n;
  client->devices = calloc(n, sizeof(PJRT_Device *));
  client->memories =
      calloc(n * IRON_PJRT_MAX_DEVICE_MEMORIES, sizeof(PJRT_Memory *));
  client->device_storage = calloc(n, sizeof(PJRT_Device));
  client->memory_storage =
      calloc(n * IRON_PJRT_MAX_DEVICE_MEMORIES, sizeof(PJRT_Memory));
  if (!client->devices || !client->memories || !client->device_storage ||
      !client->memory_storage) {
    iron_pjrt_client_free(client);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  static const char *const kKinds[IRON_PJRT_MAX_DEVICE_MEMORIES] = {
      IRON_PJRT_MEMORY_KIND, IRON_PJRT_MEMORY_KIND_PINNED_HOST,
      IRON_PJRT_MEMORY_KIND_UNPINNED_HOST};
  size_t num_memories = 0;
  for (size_t i = 0; i < n; ++i) {
    PJRT_Device *device = &client->device_storage[i];
    iron_device_t *dev = iron_runtime_device(client->runtime, (int)i);
    device->client = client;
    device->device = dev;
    device->local_hardware_id = (int)i;
    device->description.id = iron_device_id(dev);
    device->description.process_index = 0;
    device->description.kind = iron_device_description(dev);
    if (device->description.kind == NULL) device->description.kind = "unknown";
    snprintf(device->description.text, sizeof(device->description.text),
             "IronDevice(id=%d, kind=%s)", device->description.id,
             device->description.kind);
    // Every device has XLA:CPU's three memories. On a device with its own
    // memory (CUDA) both host kinds are its page-locked host memory
    // (IRON_MEMORY_HOST); on the host device all three are the same.
    device->num_memories = IRON_PJRT_MAX_DEVICE_MEMORIES;
    for (size_t k = 0; k < device->num_memories; ++k) {
      PJRT_Memory *memory = &client->memory_storage[num_memories];
      memory->vtable = NULL;
      memory->client = client;
      memory->device = device;
      memory->id = (int)num_memories;
      memory->kind_id = (int)k;
      memory->kind = kKinds[k];
      snprintf(memory->text, sizeof(memory->text), "IronMemory(id=%d, kind=%s)",
               memory->id, memory->kind);
      device->memories[k] = memory;
      client->memories[num_memories++] = memory;
    }
    device->memory = device->memories[0];
    client->devices[i] = device;
  }
  client->num_memories = num_memories;
  *out_client = client;
  return IRON_OK;
}

PJRT_Error *iron_pjrt_Client_Create(PJRT_Client_Create_Args *args) {
  PJRT_Client *client = NULL;
  iron_status_t status = iron_pjrt_client_make(args, &client);
  if (status != IRON_OK) return iron_pjrt_error_from_status(status);
  args->client = client;
  return NULL;
}

PJRT_Error *iron_pjrt_Client_Destroy(PJRT_Client_Destroy_Args *args) {
  iron_pjrt_client_free(args->client);
  return NULL;
}

PJRT_Error *iron_pjrt_Client_PlatformName(PJRT_Client_PlatformName_Args *args) {
  args->platform_name = IRON_PJRT_PLATFORM_NAME;
  args->platform_name_size = sizeof(IRON_PJRT_PLATFORM_NAME) - 1;
  return NULL;
}

PJRT_Error *iron_pjrt_Client_ProcessIndex(PJRT_Client_ProcessIndex_Args *args) {
  args->process_index = 0;
  return NULL;
}

PJRT_Error *iron_pjrt_Client_PlatformVersion(
    PJRT_Client_PlatformVersion_Args *args) {
  args->platform_version = IRON_PJRT_PLATFORM_VERSION;
  args->platform_version_size = sizeof(IRON_PJRT_PLATFORM_VERSION) - 1;
  return NULL;
}

PJRT_Error *iron_pjrt_Client_Devices(PJRT_Client_Devices_Args *args) {
  args->devices = args->client->devices;
  args->num_devices = args->client->num_devices;
  return NULL;
}

PJRT_Error *iron_pjrt_Client_AddressableDevices(
    PJRT_Client_AddressableDevices_Args *args) {
  args->addressable_devices = args->client->devices;
  args->num_addressable_devices = args->client->num_devices;
  return NULL;
}

PJRT_Error *iron_pjrt_Client_LookupDevice(PJRT_Client_LookupDevice_Args *args) {
  PJRT_Client *client = args->client;
  for (size_t i = 0; i < client->num_devices; ++i) {
    if (client->devices[i]->description.id == args->id) {
      args->device = client->devices[i];
      return NULL;
    }
  }
  return iron_pjrt_error_from_status(
      IRON_ERR(INVALID_ARGUMENT, "no ironjax device has id %d", args->id));
}

PJRT_Error *iron_pjrt_Client_LookupAddressableDevice(
    PJRT_Client_LookupAddressableDevice_Args *args) {
  PJRT_Client *client = args->client;
  int id = args->local_hardware_id;
  if (id < 0 || (size_t)id >= client->num_devices)
    return iron_pjrt_error_from_status(IRON_ERR(
        INVALID_ARGUMENT, "no ironjax device has local hardware id %d", id));
  args->addressable_device = client->devices[id];
  return NULL;
}

PJRT_Error *iron_pjrt_Client_AddressableMemories(
    PJRT_Client_AddressableMemories_Args *args) {
  args->addressable_memories = args->client->memories;
  args->num_addressable_memories = args->client->num_memories;
  return NULL;
}

PJRT_Error *iron_pjrt_Client_DefaultDeviceAssignment(
    PJRT_Client_DefaultDeviceAssignment_Args *args) {
  PJRT_Client *client = args->client;
  int64_t needed = (int64_t)args->num_replicas * args->num_partitions;
  if (args->num_replicas < 1 || args->num_partitions < 1 ||
      needed > (int64_t)client->num_devices) {
    return iron_pjrt_error_from_status(IRON_ERR(
        INVALID_ARGUMENT,
        "ironjax cannot assign %d replicas x %d partitions to %zu device(s)",
        args->num_replicas, args->num_partitions, client->num_devices));
  }
  // Replica-major, one device per (replica, partition), in device order.
  for (size_t i = 0; i < args->default_assignment_size && (int64_t)i < needed;
       ++i) {
    args->default_assignment[i] = client->devices[i]->description.id;
  }
  return NULL;
}

PJRT_Device *iron_pjrt_client_find_device(PJRT_Client *client,
                                          const iron_device_t *device) {
  for (size_t i = 0; i < client->num_devices; ++i)
    if (client->devices[i]->device == device) return client->devices[i];
  return NULL;
}

// ---------------------------------------------------------------------------
// Device descriptions

PJRT_Error *iron_pjrt_DeviceDescription_Id(PJRT_DeviceDescription_Id_Args *args) {
  args->id = args->device_description->id;
  return NULL;
}

PJRT_Error *iron_pjrt_DeviceDescription_ProcessIndex(
    PJRT_DeviceDescription_ProcessIndex_Args *args) {
  args->process_index = args->device_description->process_index;
  return NULL;
}

PJRT_Error *iron_pjrt_DeviceDescription_Attributes(
    PJRT_DeviceDescription_Attributes_Args *args) {
  args->num_attributes = 0;
  args->attributes = NULL;
  return NULL;
}

PJRT_Error *iron_pjrt_DeviceDescription_Kind(
    PJRT_DeviceDescription_Kind_Args *args) {
  args->device_kind = args->device_description->kind;
  args->device_kind_size = strlen(args->device_description->kind);
  return NULL;
}

PJRT_Error *iron_pjrt_DeviceDescription_DebugString(
    PJRT_DeviceDescription_DebugString_Args *args) {
  args->debug_string = args->device_description->text;
  args->debug_string_size = strlen(args->device_description->text);
  return NULL;
}

PJRT_Error *iron_pjrt_DeviceDescription_ToString(
    PJRT_DeviceDescription_ToString_Args *args) {
  args->to_string = args->device_description->text;
  args->to_string_size = strlen(args->device_description->text);
  return NULL;
}

// ---------------------------------------------------------------------------
// Devices

PJRT_Error *iron_pjrt_Device_GetDescription(
    PJRT_Device_GetDescription_Args *args) {
  args->device_description = &args->device->description;
  return NULL;
}

PJRT_Error *iron_pjrt_Device_IsAddressable(PJRT_Device_IsAddressable_Args *args) {
  args->is_addressable = true;
  return NULL;
}

PJRT_Error *iron_pjrt_Device_LocalHardwareId(
    PJRT_Device_LocalHardwareId_Args *args) {
  args->local_hardware_id = args->device->local_hardware_id;
  return NULL;
}

PJRT_Error *iron_pjrt_Device_AddressableMemories(
    PJRT_Device_AddressableMemories_Args *args) {
  PJRT_Device *device = args->device;
  args->memories = device->memories;
  args->num_memories = device->num_memories;
  return NULL;
}

PJRT_Error *iron_pjrt_Device_DefaultMemory(PJRT_Device_DefaultMemory_Args *args) {
  args->memory = args->device->memory;
  return NULL;
}

PJRT_Error *iron_pjrt_Device_MemoryStats(PJRT_Device_MemoryStats_Args *args) {
  iron_device_memory_stats_t stats;
  iron_device_memory_stats(args->device->device, &stats);
  args->bytes_in_use = stats.bytes_in_use;
  // Set what is known; clear every other "is set" flag the caller's struct
  // has, so no stale stack bytes read as true.
#define IRON_PJRT_SET_(field, value, is_set)                              \
  if (IRON_PJRT_HAS_FIELD(args, PJRT_Device_MemoryStats_Args,             \
                          field##_is_set)) {                              \
    args->field = (value);                                                \
    args->field##_is_set = (is_set);                                      \
  }
  IRON_PJRT_SET_(peak_bytes_in_use, stats.peak_bytes_in_use, true);
  IRON_PJRT_SET_(num_allocs, 0, false);
  IRON_PJRT_SET_(largest_alloc_size, 0, false);
  IRON_PJRT_SET_(bytes_limit, stats.bytes_limit, stats.bytes_limit > 0);
  IRON_PJRT_SET_(bytes_reserved, 0, false);
  IRON_PJRT_SET_(peak_bytes_reserved, 0, false);
  IRON_PJRT_SET_(bytes_reservable_limit, 0, false);
  IRON_PJRT_SET_(largest_free_block_bytes, 0, false);
  IRON_PJRT_SET_(pool_bytes, 0, false);
  IRON_PJRT_SET_(peak_pool_bytes, 0, false);
  IRON_PJRT_SET_(peak_allocated_bytes, 0, false);
#undef IRON_PJRT_SET_
  return NULL;
}

PJRT_Error *iron_pjrt_Device_ClearMemoryStats(
    PJRT_Device_ClearMemoryStats_Args *args) {
  iron_device_reset_peak_memory(args->device->device);
  return NULL;
}

// jaxlib calls the deleter unconditionally (a NULL deleter aborts), so hand
// out a static, empty attribute set and a deleter that does nothing.
static char iron_pjrt_device_attributes_sentinel;

static void iron_pjrt_device_attributes_delete(
    PJRT_Device_Attributes *attributes) {
  (void)attributes;
}

PJRT_Error *iron_pjrt_Device_GetAttributes(PJRT_Device_GetAttributes_Args *args) {
  args->attributes = NULL;
  args->num_attributes = 0;
  args->device_attributes =
      (PJRT_Device_Attributes *)&iron_pjrt_device_attributes_sentinel;
  args->attributes_deleter = iron_pjrt_device_attributes_delete;
  return NULL;
}

// ---------------------------------------------------------------------------
// Memories

PJRT_Error *iron_pjrt_Memory_Id(PJRT_Memory_Id_Args *args) {
  args->id = args->memory->id;
  return NULL;
}

PJRT_Error *iron_pjrt_Memory_Kind(PJRT_Memory_Kind_Args *args) {
  args->kind = args->memory->kind;
  args->kind_size = strlen(args->memory->kind);
  return NULL;
}

PJRT_Error *iron_pjrt_Memory_Kind_Id(PJRT_Memory_Kind_Id_Args *args) {
  args->kind_id = args->memory->kind_id;
  return NULL;
}

PJRT_Error *iron_pjrt_Memory_DebugString(PJRT_Memory_DebugString_Args *args) {
  args->debug_string = args->memory->text;
  args->debug_string_size = strlen(args->memory->text);
  return NULL;
}

PJRT_Error *iron_pjrt_Memory_ToString(PJRT_Memory_ToString_Args *args) {
  args->to_string = args->memory->text;
  args->to_string_size = strlen(args->memory->text);
  return NULL;
}

PJRT_Error *iron_pjrt_Memory_AddressableByDevices(
    PJRT_Memory_AddressableByDevices_Args *args) {
  PJRT_Memory *memory = args->memory;
  args->devices = &memory->client->devices[memory->device->local_hardware_id];
  args->num_devices = 1;
  return NULL;
}

iron_memory_space_t iron_pjrt_memory_space(const PJRT_Memory *memory) {
  return memory == NULL || memory->kind_id == 0 ? IRON_MEMORY_DEVICE
                                                : IRON_MEMORY_HOST;
}

PJRT_Memory *iron_pjrt_device_find_memory(PJRT_Device *device,
                                          const char *kind) {
  for (size_t k = 0; k < device->num_memories; ++k)
    if (strcmp(device->memories[k]->kind, kind) == 0)
      return device->memories[k];
  return NULL;
}
