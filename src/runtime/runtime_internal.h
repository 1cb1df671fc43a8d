// Internal structures of the public runtime objects (include/iron/iron.h),
// shared by the files of src/runtime. Not for use outside src/runtime and
// its tests.
#ifndef IRON_RUNTIME_RUNTIME_INTERNAL_H_
#define IRON_RUNTIME_RUNTIME_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>

#include "device/device.h"
#include "iron/iron.h"
#include "ir/ir.h"

#define IRON_RUNTIME_MAX_DEVICES 8

struct iron_runtime {
  atomic_int ref;
  int num_devices;
  iron_device_t *devices[IRON_RUNTIME_MAX_DEVICES];
};

typedef struct iron_event_callback_node iron_event_callback_node_t;

struct iron_event {
  atomic_int ref;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  atomic_bool ready;
  iron_status_t status;  // owned; valid once ready
  iron_event_callback_node_t *callbacks;
};

// A new not-ready event with one reference (NULL when out of memory).
iron_event_t *iron_event_new(void);

struct iron_buffer {
  atomic_int ref;
  iron_device_t *dev;  // its runtime is retained by the buffer
  iron_dtype_t dtype;
  int32_t rank;
  int64_t dims[IRON_MAX_RANK];
  int64_t count;
  size_t nbytes;
  iron_event_t *ready;  // owned reference; completes once
  pthread_mutex_t mu;   // guards storage/donated
  iron_storage_t *storage;  // set before `ready` completes OK
  bool donated;
  // Where its storage is (or will be) allocated; on devices without host
  // memory of their own only a label.
  iron_memory_space_t space;
};

// A buffer of the given type whose contents come later (iron_buffer_fulfill).
// `ready` is retained. Checks the shape (INVALID_ARGUMENT on bad dims).
iron_status_t iron_buffer_create_pending(iron_device_t *dev,
                                         iron_dtype_t dtype, int32_t rank,
                                         const int64_t *dims,
                                         iron_event_t *ready,
                                         iron_buffer_t **out_buffer);
// Gives a pending buffer its storage (consumed; NULL on error). Does not
// complete the ready event (shared by all results of one execution).
void iron_buffer_set_storage(iron_buffer_t *buf, iron_storage_t *storage);
// For a ready buffer: a new reference to its storage; with `take` (donation)
// the storage is moved out when nobody else holds it (then *out_taken is
// true and the buffer reads as donated from now on). Errors: the buffer's
// own error, or FAILED_PRECONDITION if its storage was donated.
iron_status_t iron_buffer_acquire_storage(iron_buffer_t *buf, bool take,
                                          iron_storage_t **out_storage,
                                          bool *out_taken);

void iron_runtime_retain_internal(iron_runtime_t *rt);

// Copies `n` bytes from `src` (memory of `src_dev`) to `dst` (memory of
// `dst_dev`), through the devices' memcpy where they have their own memory;
// a NULL device means host memory. Returns once `dst` holds the bytes, or,
// for device destinations, once the copy is ordered on that device.
iron_status_t iron_storage_copy(void *dst, iron_device_t *dst_dev,
                                const void *src, iron_device_t *src_dev,
                                size_t n);

#endif  // IRON_RUNTIME_RUNTIME_INTERNAL_H_
