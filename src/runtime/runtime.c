#include <stdlib.h>

#include "runtime/runtime_internal.h"

iron_status_t iron_runtime_create(const iron_runtime_options_t *options,
                                  iron_runtime_t **out_runtime) {
  iron_runtime_t *rt = calloc(1, sizeof(*rt));
  if (!rt) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for runtime");
  atomic_init(&rt->ref, 1);
  int threads = options ? options->num_threads : 0;
  iron_status_t st = iron_host_device_create(rt, 0, threads, &rt->devices[0]);
  if (st) {
    free(rt);
    return iron_status_annotate(st, "creating the runtime");
  }
  rt->num_devices = 1;
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
}

void iron_device_reset_peak_memory(iron_device_t *dev) {
  atomic_store(&dev->peak_bytes_in_use, atomic_load(&dev->bytes_in_use));
}
