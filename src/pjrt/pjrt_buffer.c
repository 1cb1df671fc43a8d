// PJRT_Buffer: a handle on an iron_buffer_t plus the metadata jaxlib queries
// (kept here so queries keep working after Delete or donation).
#include <stdlib.h>
#include <string.h>

#include "pjrt/pjrt_internal.h"

iron_status_t iron_pjrt_buffer_wrap(PJRT_Client *client, PJRT_Device *device,
                                    iron_buffer_t *buffer,
                                    PJRT_Buffer **out_buffer) {
  int32_t rank = iron_buffer_rank(buffer);
  if (rank < 0 || rank > 4096) {
    iron_buffer_release(buffer);
    return IRON_ERR(INTERNAL, "buffer of rank %d", (int)rank);
  }
  size_t n = (size_t)rank;
  PJRT_Buffer *wrapper =
      malloc(sizeof(PJRT_Buffer) + 2 * n * sizeof(int64_t));
  if (wrapper == NULL) {
    iron_buffer_release(buffer);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for a buffer handle");
  }
  wrapper->client = client;
  wrapper->device = device;
  wrapper->memory = device->memory;
  pthread_mutex_init(&wrapper->mu, NULL);
  wrapper->buffer = buffer;
  wrapper->external_refs = 0;
  wrapper->pinned = NULL;
  wrapper->dtype = iron_buffer_dtype(buffer);
  wrapper->pjrt_type = (PJRT_Buffer_Type)iron_dtype_to_pjrt(wrapper->dtype);
  wrapper->size_in_bytes = iron_buffer_size_in_bytes(buffer);
  wrapper->rank = n;
  wrapper->dims = wrapper->storage;
  wrapper->minor_to_major = wrapper->storage + n;
  const int64_t *dims = iron_buffer_dims(buffer);
  for (size_t i = 0; i < n; ++i) {
    wrapper->dims[i] = dims[i];
    wrapper->minor_to_major[i] = (int64_t)(n - 1 - i);
  }
  *out_buffer = wrapper;
  return IRON_OK;
}

iron_status_t iron_pjrt_buffer_acquire(PJRT_Buffer *buffer,
                                       iron_buffer_t **out_buffer) {
  pthread_mutex_lock(&buffer->mu);
  iron_buffer_t *live = buffer->buffer;
  if (live != NULL) iron_buffer_retain(live);
  pthread_mutex_unlock(&buffer->mu);
  if (live == NULL)
    return IRON_ERR(INVALID_ARGUMENT,
                    "the buffer has been deleted or donated");
  *out_buffer = live;
  return IRON_OK;
}

void iron_pjrt_buffer_invalidate(PJRT_Buffer *buffer) {
  pthread_mutex_lock(&buffer->mu);
  iron_buffer_t *live = buffer->buffer;
  buffer->buffer = NULL;
  if (live != NULL && buffer->external_refs > 0 && buffer->pinned == NULL) {
    buffer->pinned = live;
    live = NULL;
  }
  pthread_mutex_unlock(&buffer->mu);
  if (live != NULL) iron_buffer_release(live);
}

// Whether a PJRT layout is the dense row-major layout of `rank` dims of
// elements of `element_size` bytes with `dims`.
static bool iron_pjrt_layout_is_row_major(const PJRT_Buffer_MemoryLayout *layout,
                                          size_t rank, const int64_t *dims,
                                          size_t element_size) {
  if (layout == NULL) return true;
  if (layout->type == PJRT_Buffer_MemoryLayout_Type_Tiled) {
    const PJRT_Buffer_MemoryLayout_Tiled *tiled = &layout->tiled;
    if (tiled->num_tiles != 0) return false;
    if (tiled->minor_to_major_size != rank) return rank == 0;
    for (size_t i = 0; i < rank; ++i)
      if (tiled->minor_to_major[i] != (int64_t)(rank - 1 - i)) return false;
    return true;
  }
  if (layout->type == PJRT_Buffer_MemoryLayout_Type_Strides) {
    const PJRT_Buffer_MemoryLayout_Strides *strides = &layout->strides;
    if (strides->num_byte_strides != rank) return false;
    int64_t expected = (int64_t)element_size;
    for (size_t i = rank; i-- > 0;) {
      // Strides of size-1 dimensions do not matter.
      if (dims[i] != 1 && strides->byte_strides[i] != expected) return false;
      expected *= dims[i];
    }
    return true;
  }
  return false;
}

// ---------------------------------------------------------------------------
// Creation

static iron_status_t iron_pjrt_buffer_from_host(
    PJRT_Client_BufferFromHostBuffer_Args *args, PJRT_Buffer **out_buffer,
    PJRT_Event **out_done) {
  PJRT_Client *client = args->client;
  PJRT_Device *device = args->device;
  PJRT_Memory *memory = args->memory;
  if (device == NULL && memory != NULL) device = memory->device;
  if (device == NULL) device = client->devices[0];
  if (memory != NULL && memory->device != device)
    return IRON_ERR(INVALID_ARGUMENT, "%s is not a memory of %s", memory->text,
                    device->description.text);

  iron_dtype_t dtype = iron_dtype_from_pjrt((int)args->type);
  if (dtype == IRON_DTYPE_INVALID)
    return IRON_ERR(INVALID_ARGUMENT,
                    "ironjax does not support PJRT element type %d",
                    (int)args->type);
  if (args->num_dims > 4096)
    return IRON_ERR(INVALID_ARGUMENT, "rank %zu is too large", args->num_dims);
  if (args->byte_strides != NULL && args->num_byte_strides != args->num_dims)
    return IRON_ERR(INVALID_ARGUMENT,
                    "%zu byte strides given for a rank-%zu array",
                    args->num_byte_strides, args->num_dims);
  for (size_t i = 0; i < args->num_dims; ++i)
    if (args->dims[i] < 0)
      return IRON_ERR(INVALID_ARGUMENT, "dimension %zu is negative (%lld)", i,
                      (long long)args->dims[i]);
  if (!iron_pjrt_layout_is_row_major(args->device_layout, args->num_dims,
                                     args->dims, iron_dtype_size(dtype)))
    return IRON_ERR(UNIMPLEMENTED,
                    "ironjax buffers only have the row-major device layout");

  // The copy is complete when create_from_host returns, so every host buffer
  // semantics is satisfied and the host buffer is free right away.
  iron_buffer_t *buffer = NULL;
  IRON_RETURN_IF_ERROR(
      iron_buffer_create_from_host_in(
          device->device, iron_pjrt_memory_space(memory), dtype,
          (int32_t)args->num_dims, args->dims, args->data, args->byte_strides,
          &buffer),
      "while copying a host array to %s",
      memory ? memory->text : device->description.text);

  iron_event_t *done = NULL;
  iron_status_t status = iron_event_create(&done);
  if (status != IRON_OK) {
    iron_buffer_release(buffer);
    return status;
  }
  iron_event_complete(done, IRON_OK);
  PJRT_Event *done_event = iron_pjrt_event_wrap(done);
  if (done_event == NULL) {
    iron_buffer_release(buffer);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  status = iron_pjrt_buffer_wrap(client, device, buffer, out_buffer);
  if (status == IRON_OK && memory != NULL) (*out_buffer)->memory = memory;
  if (status != IRON_OK) {
    PJRT_Event_Destroy_Args destroy = {.struct_size = sizeof(destroy),
                                       .event = done_event};
    iron_pjrt_Event_Destroy(&destroy);
    return status;
  }
  *out_done = done_event;
  return IRON_OK;
}

PJRT_Error *iron_pjrt_Client_BufferFromHostBuffer(
    PJRT_Client_BufferFromHostBuffer_Args *args) {
  PJRT_Buffer *buffer = NULL;
  PJRT_Event *done = NULL;
  iron_status_t status = iron_pjrt_buffer_from_host(args, &buffer, &done);
  if (status != IRON_OK) return iron_pjrt_error_from_status(status);
  args->buffer = buffer;
  args->done_with_host_buffer = done;
  return NULL;
}

// ---------------------------------------------------------------------------
// Queries

PJRT_Error *iron_pjrt_Buffer_Destroy(PJRT_Buffer_Destroy_Args *args) {
  PJRT_Buffer *buffer = args->buffer;
  if (buffer == NULL) return NULL;
  iron_pjrt_buffer_invalidate(buffer);
  if (buffer->pinned != NULL) iron_buffer_release(buffer->pinned);
  pthread_mutex_destroy(&buffer->mu);
  free(buffer);
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_ElementType(PJRT_Buffer_ElementType_Args *args) {
  args->type = args->buffer->pjrt_type;
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_Dimensions(PJRT_Buffer_Dimensions_Args *args) {
  args->dims = args->buffer->dims;
  args->num_dims = args->buffer->rank;
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_UnpaddedDimensions(
    PJRT_Buffer_UnpaddedDimensions_Args *args) {
  args->unpadded_dims = args->buffer->dims;
  args->num_dims = args->buffer->rank;
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_DynamicDimensionIndices(
    PJRT_Buffer_DynamicDimensionIndices_Args *args) {
  args->dynamic_dim_indices = NULL;
  args->num_dynamic_dims = 0;
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_GetMemoryLayout(
    PJRT_Buffer_GetMemoryLayout_Args *args) {
  PJRT_Buffer *buffer = args->buffer;
  PJRT_Buffer_MemoryLayout *layout = &args->layout;
  memset(layout, 0, sizeof(*layout));
  layout->struct_size = sizeof(*layout);
  layout->type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  layout->tiled.struct_size = sizeof(layout->tiled);
  layout->tiled.minor_to_major = buffer->minor_to_major;
  layout->tiled.minor_to_major_size = buffer->rank;
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_OnDeviceSizeInBytes(
    PJRT_Buffer_OnDeviceSizeInBytes_Args *args) {
  args->on_device_size_in_bytes = args->buffer->size_in_bytes;
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_Device(PJRT_Buffer_Device_Args *args) {
  args->device = args->buffer->device;
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_Memory(PJRT_Buffer_Memory_Args *args) {
  args->memory = args->buffer->memory;
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_Delete(PJRT_Buffer_Delete_Args *args) {
  iron_pjrt_buffer_invalidate(args->buffer);
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_IsDeleted(PJRT_Buffer_IsDeleted_Args *args) {
  PJRT_Buffer *buffer = args->buffer;
  pthread_mutex_lock(&buffer->mu);
  args->is_deleted = buffer->buffer == NULL;
  pthread_mutex_unlock(&buffer->mu);
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_IsOnCpu(PJRT_Buffer_IsOnCpu_Args *args) {
  const char *kind = iron_device_kind(args->buffer->device->device);
  args->is_on_cpu = strcmp(kind, "host") == 0;
  return NULL;
}

// ---------------------------------------------------------------------------
// Transfers

// Copies `src` into `dst` (a device's default memory, or one of its memories
// when `dst_memory` is not NULL).
static iron_status_t iron_pjrt_buffer_copy(PJRT_Buffer *src, PJRT_Device *dst,
                                           PJRT_Memory *dst_memory,
                                           PJRT_Buffer **out_buffer) {
  iron_buffer_t *live = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_pjrt_buffer_acquire(src, &live));
  iron_buffer_t *copy = NULL;
  iron_status_t status = iron_buffer_copy_to_memory(
      live, dst->device, iron_pjrt_memory_space(dst_memory), &copy);
  iron_buffer_release(live);
  if (status != IRON_OK)
    return iron_status_annotate(
        status, "while copying a buffer to %s",
        dst_memory ? dst_memory->text : dst->description.text);
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_pjrt_buffer_wrap(src->client, dst, copy, out_buffer));
  if (dst_memory != NULL) (*out_buffer)->memory = dst_memory;
  return IRON_OK;
}

PJRT_Error *iron_pjrt_Buffer_CopyToDevice(PJRT_Buffer_CopyToDevice_Args *args) {
  PJRT_Buffer *out = NULL;
  iron_status_t status =
      iron_pjrt_buffer_copy(args->buffer, args->dst_device, NULL, &out);
  if (status != IRON_OK) return iron_pjrt_error_from_status(status);
  args->dst_buffer = out;
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_CopyToMemory(PJRT_Buffer_CopyToMemory_Args *args) {
  PJRT_Buffer *out = NULL;
  iron_status_t status =
      iron_pjrt_buffer_copy(args->buffer, args->dst_memory->device,
                            args->dst_memory, &out);
  if (status != IRON_OK) return iron_pjrt_error_from_status(status);
  args->dst_buffer = out;
  return NULL;
}

static iron_status_t iron_pjrt_buffer_to_host(PJRT_Buffer_ToHostBuffer_Args *args,
                                              PJRT_Event **out_event) {
  PJRT_Buffer *buffer = args->src;
  if (!iron_pjrt_layout_is_row_major(args->host_layout, buffer->rank,
                                     buffer->dims,
                                     iron_dtype_size(buffer->dtype)))
    return IRON_ERR(UNIMPLEMENTED,
                    "ironjax copies to host only in row-major layout");
  if (args->dst_size < buffer->size_in_bytes)
    return IRON_ERR(INVALID_ARGUMENT,
                    "host buffer of %zu bytes is too small for %zu bytes",
                    args->dst_size, buffer->size_in_bytes);
  iron_buffer_t *live = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_pjrt_buffer_acquire(buffer, &live));
  iron_event_t *done = NULL;
  iron_status_t status =
      iron_buffer_to_host(live, args->dst, buffer->size_in_bytes, &done);
  iron_buffer_release(live);
  IRON_RETURN_IF_ERROR(status, "while copying a buffer to the host");
  PJRT_Event *event = iron_pjrt_event_wrap(done);
  if (event == NULL) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  *out_event = event;
  return IRON_OK;
}

PJRT_Error *iron_pjrt_Buffer_ToHostBuffer(PJRT_Buffer_ToHostBuffer_Args *args) {
  if (args->dst == NULL) {  // size query
    args->dst_size = args->src->size_in_bytes;
    args->event = NULL;
    return NULL;
  }
  PJRT_Event *event = NULL;
  iron_status_t status = iron_pjrt_buffer_to_host(args, &event);
  if (status != IRON_OK) return iron_pjrt_error_from_status(status);
  args->event = event;
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_ReadyEvent(PJRT_Buffer_ReadyEvent_Args *args) {
  iron_buffer_t *live = NULL;
  iron_status_t status = iron_pjrt_buffer_acquire(args->buffer, &live);
  if (status != IRON_OK) return iron_pjrt_error_from_status(status);
  PJRT_Event *event = iron_pjrt_event_wrap(iron_buffer_ready_event(live));
  iron_buffer_release(live);
  if (event == NULL)
    return iron_pjrt_error_from_status(
        IRON_ERR(RESOURCE_EXHAUSTED, "out of memory"));
  args->event = event;
  return NULL;
}

// Address of a buffer's contents in its device's memory, after waiting for
// them (callers may read the memory directly): the host address on the host
// device, the device pointer on a CUDA device. XLA's PJRT clients answer
// UnsafeBufferPointer and OpaqueDeviceMemoryDataPointer the same way
// (PjRtClient::UnsafeBufferPointer returns the external reference's
// OpaqueDeviceMemoryDataPointer: device memory on XLA:GPU); jax compares
// these addresses to tell copies from aliases
// (Array.unsafe_buffer_pointer).
static iron_status_t iron_pjrt_buffer_address(PJRT_Buffer *buffer,
                                              void **out_address) {
  iron_buffer_t *live = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_pjrt_buffer_acquire(buffer, &live));
  iron_event_t *ready = iron_buffer_ready_event(live);
  iron_status_t status = iron_event_wait(ready);
  iron_event_release(ready);
  void *address = status == IRON_OK ? iron_buffer_device_pointer(live) : NULL;
  iron_buffer_release(live);
  IRON_RETURN_IF_ERROR(status, "while waiting for a buffer");
  if (address == NULL && buffer->size_in_bytes != 0)
    return IRON_ERR(FAILED_PRECONDITION,
                    "the buffer on %s has no memory (donated or deleted)",
                    buffer->device->description.text);
  *out_address = address;
  return IRON_OK;
}

PJRT_Error *iron_pjrt_Buffer_UnsafePointer(PJRT_Buffer_UnsafePointer_Args *args) {
  void *address = NULL;
  iron_status_t status = iron_pjrt_buffer_address(args->buffer, &address);
  if (status != IRON_OK) return iron_pjrt_error_from_status(status);
  args->buffer_pointer = (uintptr_t)address;
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_OpaqueDeviceMemoryDataPointer(
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args *args) {
  void *address = NULL;
  iron_status_t status = iron_pjrt_buffer_address(args->buffer, &address);
  if (status != IRON_OK) return iron_pjrt_error_from_status(status);
  args->device_memory_ptr = address;
  return NULL;
}

// External references (a numpy view or dlpack capsule of the memory) keep
// the memory alive across Delete and keep the buffer from being donated
// (see Execute).
PJRT_Error *iron_pjrt_Buffer_IncreaseExternalReferenceCount(
    PJRT_Buffer_IncreaseExternalReferenceCount_Args *args) {
  PJRT_Buffer *buffer = args->buffer;
  pthread_mutex_lock(&buffer->mu);
  buffer->external_refs++;
  pthread_mutex_unlock(&buffer->mu);
  return NULL;
}

PJRT_Error *iron_pjrt_Buffer_DecreaseExternalReferenceCount(
    PJRT_Buffer_DecreaseExternalReferenceCount_Args *args) {
  PJRT_Buffer *buffer = args->buffer;
  iron_buffer_t *unpinned = NULL;
  bool underflow = false;
  pthread_mutex_lock(&buffer->mu);
  if (buffer->external_refs <= 0) {
    underflow = true;
  } else if (--buffer->external_refs == 0) {
    unpinned = buffer->pinned;
    buffer->pinned = NULL;
  }
  pthread_mutex_unlock(&buffer->mu);
  if (unpinned != NULL) iron_buffer_release(unpinned);
  if (underflow)
    return iron_pjrt_error_from_status(IRON_ERR(
        FAILED_PRECONDITION, "the buffer has no external reference to drop"));
  return NULL;
}
