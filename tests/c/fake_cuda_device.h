// A CUDA device on the fake driver (fake_cuda.h) for GPU-free tests of the
// real cuda_device.c and executor: a runtime whose device 1 is the CUDA
// device made on a fake API table, its vtable copied with the test's own
// kernels (kernel_lookup) and no fusion, so that the plans hold one step
// per op; no memory limit. The test adjusts the device afterwards (graph
// thresholds, device loops) and closes it with fake_dev_close, which checks
// that no capture is left open and that every stream and device block
// came back. Include after fake_cuda.h, once per test file.
#ifndef IRON_TESTS_FAKE_CUDA_DEVICE_H_
#define IRON_TESTS_FAKE_CUDA_DEVICE_H_

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "device/cuda/cuda_device.h"
#include "fake_cuda.h"
#include "iron/iron.h"
#include "read_buffer.h"
#include "runtime/runtime_internal.h"
#include "test.h"

typedef struct {
  iron_runtime_t *rt;
  iron_device_t *dev;
  iron_cuda_device_t *cd;
} fake_dev_t;

// The device's vtable: the CUDA one with the test's kernels.
static iron_device_vtable_t fake_dev_vt;

static fake_dev_t fake_dev_open_with(const iron_cuda_api_t *api,
                                     const iron_kernel_t *(*lookup)(
                                         iron_op_kind_t)) {
  fake_dev_t f = {0};
  fake_cuda_reset();
  setenv("IRON_DEVICE", "host", 1);
  CHECK_OK(iron_runtime_create(NULL, &f.rt));
  if (!f.rt) exit(1);
  iron_device_t *d = NULL;
  CHECK_OK(iron_cuda_device_create_with_api(f.rt, 1, 0, api, &d));
  if (!d) exit(1);
  fake_dev_vt = *d->vtable;
  fake_dev_vt.kernel_lookup = lookup;
  fake_dev_vt.plan_finish = NULL;
  fake_dev_vt.fusable = NULL;
  d->vtable = &fake_dev_vt;
  d->memory_limit = 0;
  f.rt->devices[1] = d;
  f.rt->num_devices = 2;
  f.dev = d;
  f.cd = iron_cuda_device_cast(d);
  return f;
}

static void fake_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

// Every stream gone. (A job drops its executable, and with it maybe the
// runtime, just after completing: the device may go away on its worker a
// moment later.)
static void fake_dev_wait_gone(void) {
  for (int k = 0; k < 5000 && atomic_load(&fake_cuda.live_streams); ++k)
    fake_sleep_ms(1);
  CHECK_EQ_INT(atomic_load(&fake_cuda.live_streams), 0);
}

static void fake_dev_close(fake_dev_t *f) {
  CHECK(!fake_cuda_capturing(f->cd->stream));
  iron_runtime_release(f->rt);
  fake_dev_wait_gone();
  CHECK_EQ_INT(atomic_load(&fake_cuda.live_device_blocks), 0);
}

#endif  // IRON_TESTS_FAKE_CUDA_DEVICE_H_
