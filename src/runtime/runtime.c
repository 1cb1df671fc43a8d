#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_device.h"
#include "device/host/lapack.h"
#include "runtime/runtime_internal.h"

// The devices of a new runtime. IRON_DEVICE picks the kind: unset or empty
// means one CUDA device per GPU when CUDA is usable, else the host; "host"
// forces the host; "cuda" requires CUDA and fails with the loader's reason.
static iron_status_t create_devices(iron_runtime_t *rt, int threads) {
  const char *want = getenv("IRON_DEVICE");
  bool force_host = want && strcmp(want, "host") == 0;
  bool force_cuda = want && strcmp(want, "cuda") == 0;
  if (want && want[0] && !force_host && !force_cuda)
    return IRON_ERR(INVALID_ARGUMENT,
                    "IRON_DEVICE=%s: expected \"host\" or \"cuda\"", want);
  const char *reason = NULL;
  int gpus = force_host ? 0 : iron_cuda_device_count(&reason);
  if (force_cuda && gpus <= 0)
    return IRON_ERR(FAILED_PRECONDITION,
                    "IRON_DEVICE=cuda, but no CUDA device is usable: %s",
                    reason ? reason : "unknown reason");
  if (gpus <= 0 && !force_host && iron_cuda_api_get_driver()->has_driver) {
    // An NVIDIA driver but no usable CUDA (say, NVRTC missing): falling back
    // to the host is the documented default, but should not go unnoticed.
    static atomic_bool warned;
    if (!atomic_exchange(&warned, true))
      fprintf(stderr,
              "ironjax: using the host device, CUDA is not usable: %s "
              "(IRON_DEVICE=host silences this)\n",
              reason ? reason : "unknown reason");
  }
  if (gpus <= 0) {
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_host_device_create(rt, 0, threads, &rt->devices[0]));
    rt->num_devices = 1;
    return IRON_OK;
  }
  if (gpus > IRON_RUNTIME_MAX_DEVICES) gpus = IRON_RUNTIME_MAX_DEVICES;
  for (int i = 0; i < gpus; ++i) {
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_cuda_device_create(rt, i, i, &rt->devices[i]));
    rt->num_devices = i + 1;
  }
  return IRON_OK;
}

iron_status_t iron_runtime_create(const iron_runtime_options_t *options,
                                  iron_runtime_t **out_runtime) {
  iron_runtime_t *rt = calloc(1, sizeof(*rt));
  if (!rt) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for runtime");
  atomic_init(&rt->ref, 1);
  int threads = options ? options->num_threads : 0;
  iron_status_t st = create_devices(rt, threads);
  if (st) {
    for (int i = 0; i < rt->num_devices; ++i)
      rt->devices[i]->vtable->destroy(rt->devices[i]);
    free(rt);
    return iron_status_annotate(st, "creating the runtime");
  }
  *out_runtime = rt;
  return IRON_OK;
}

void iron_runtime_retain(iron_runtime_t *rt) {
  if (rt) atomic_fetch_add_explicit(&rt->ref, 1, memory_order_relaxed);
}
void iron_runtime_retain_internal(iron_runtime_t *rt) {
  iron_runtime_retain(rt);
}

void iron_runtime_release(iron_runtime_t *rt) {
  if (!rt) return;
  if (atomic_fetch_sub_explicit(&rt->ref, 1, memory_order_acq_rel) != 1)
    return;
  // Buffers and executables hold references, so nothing points at the
  // devices any more; the worker drains its queue before exiting.
  for (int i = 0; i < rt->num_devices; ++i)
    rt->devices[i]->vtable->destroy(rt->devices[i]);
  free(rt);
}

int iron_runtime_device_count(const iron_runtime_t *rt) {
  return rt->num_devices;
}

iron_device_t *iron_runtime_device(const iron_runtime_t *rt, int index) {
  if (index < 0 || index >= rt->num_devices) return NULL;
  return rt->devices[index];
}

int iron_device_id(const iron_device_t *dev) { return dev->id; }
const char *iron_device_kind(const iron_device_t *dev) {
  return dev->vtable->kind;
}
bool iron_device_has_host_memory(const iron_device_t *dev) {
  return dev->vtable->host_mem_alloc != NULL;
}
const char *iron_device_description(const iron_device_t *dev) {
  return dev->vtable->description ? dev->vtable->description(dev)
                                  : dev->vtable->kind;
}
int64_t iron_device_bytes_in_use(const iron_device_t *dev) {
  return atomic_load(&((iron_device_t *)dev)->bytes_in_use);
}

void iron_device_memory_stats(const iron_device_t *dev,
                              iron_device_memory_stats_t *out_stats) {
  iron_device_t *d = (iron_device_t *)dev;
  int64_t in_use = atomic_load(&d->bytes_in_use);
  int64_t peak = atomic_load(&d->peak_bytes_in_use);
  out_stats->bytes_in_use = in_use;
  // The peak is raised after the in-use count, so a concurrent allocation
  // may show in one before the other.
  out_stats->peak_bytes_in_use = peak > in_use ? peak : in_use;
  out_stats->bytes_limit = d->memory_limit > 0 ? d->memory_limit : 0;
  // Without a configured limit, a GPU's limit is its memory.
  if (!out_stats->bytes_limit && strcmp(d->vtable->kind, "cuda") == 0)
    out_stats->bytes_limit = (int64_t)iron_cuda_device_cast(d)->total_mem;
}

void iron_device_reset_peak_memory(iron_device_t *dev) {
  atomic_store(&dev->peak_bytes_in_use, atomic_load(&dev->bytes_in_use));
}

iron_status_t iron_lapack_register(const char *name, void *fn) {
  return iron_host_lapack_register(name, fn);
}
