// The host (CPU) device: plain aligned host memory, one FIFO worker thread
// for executions and a thread pool that kernels split their work over.
#include <stdlib.h>

#include "device/device.h"
#include "device/host/ew_common.h"
#include "device/host/host_kernel.h"

typedef struct iron_host_device {
  iron_device_t base;
} iron_host_device_t;

static void host_destroy(iron_device_t *dev) {
  if (!iron_device_deinit_base(dev)) return;
  iron_threadpool_destroy(dev->pool);
  free(dev);
}

static const iron_device_vtable_t kHostVtable = {
    /* .kind = */ "host",
    /* .destroy = */ host_destroy,
};

// IRON_HOST_TEST_FUSION=1: the host fuses element-wise chains (a test
// switch: it exercises the fusion pass, it does not make the host faster).
static const iron_device_vtable_t kHostFusingVtable = {
    .kind = "host",
    .destroy = host_destroy,
    .fusable = iron_host_fusable_for_testing,
};

iron_status_t iron_host_device_create(iron_runtime_t *rt, int id,
                                      int num_threads,
                                      iron_device_t **out_device) {
  iron_host_device_t *d = calloc(1, sizeof(*d));
  if (!d) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for host device");
  iron_status_t st = iron_threadpool_create(num_threads, &d->base.pool);
  if (st) {
    free(d);
    return iron_status_annotate(st, "creating host device %d", id);
  }
  const char *tf = getenv("IRON_HOST_TEST_FUSION");
  bool fuse = tf && tf[0] && tf[0] != '0';
  st = iron_device_init_base(&d->base, fuse ? &kHostFusingVtable : &kHostVtable,
                             rt, id);
  if (st) {
    iron_threadpool_destroy(d->base.pool);
    free(d);
    return st;
  }
  d->base.flush_denormals = iron_ew_flush_enabled();
  *out_device = &d->base;
  return IRON_OK;
}
