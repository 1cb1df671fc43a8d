// GPU-free tests of IRON_MEMORY_HOST (PJRT's pinned_host/unpinned_host
// memory kinds) on the real cuda_device.c over the fake driver
// (fake_cuda.h): a buffer put there lives in page-locked host memory
// (cuMemAllocHost), not in the device's; copies between the spaces make
// their own bytes, a copy within one space shares them; execute refuses an
// argument in host memory; the recording thread cannot allocate host memory
// and its frees wait for the recording's end. On the host device both
// spaces are one memory and the space is only a label.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "fake_cuda_device.h"
#include "iron/iron.h"
#include "ir/builder.h"
#include "runtime/executable.h"
#include "runtime/runtime_internal.h"
#include "test.h"

static iron_cuda_api_t g_api;

static const iron_kernel_t *no_kernels(iron_op_kind_t kind) {
  (void)kind;
  return NULL;
}

static bool pinned_has(const void *p) {
  pthread_mutex_lock(&fake_cuda.mu);
  bool found = false;
  for (int i = 0; i < fake_cuda.num_pinned; ++i)
    found = found || fake_cuda.pinned[i] == p;
  pthread_mutex_unlock(&fake_cuda.mu);
  return found;
}

static iron_storage_t *storage_of(iron_buffer_t *b) {
  CHECK_OK(iron_event_wait(b->ready));
  return b->storage;
}

// main(x: 2x3xf32) -> x: runs without a kernel.
static iron_ir_module_t *build_identity(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_identity", 1);
  int64_t d23[2] = {2, 3};
  const iron_ir_type_t *t23 =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 2, d23);
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, &t23, 1, &t23);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  iron_ir_value_t *x = &b->args[0];
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 1, &x);
  return m;
}

static const float kX[6] = {1, -2, 3.5f, 4, 5, 6e7f};
static const int64_t kDims[2] = {2, 3};

static void check_contents(iron_buffer_t *b) {
  float y[6] = {0};
  CHECK_OK(test_read_buffer(b, y, sizeof(y)));
  CHECK(memcmp(y, kX, sizeof(y)) == 0);
}

// Runs the identity program on `arg` and checks that its result is kX.
static void run_identity(iron_executable_t *exe, iron_buffer_t *arg) {
  iron_buffer_t *out = NULL;
  iron_event_t *done = NULL;
  CHECK_OK(iron_executable_execute(exe, &arg, 1, NULL, &out, &done));
  if (done) {
    CHECK_OK(iron_event_wait(done));
    iron_event_release(done);
  }
  if (out) check_contents(out);
  iron_buffer_release(out);
}

static void test_spaces_on_cuda(void) {
  fake_dev_t f = fake_dev_open_with(&g_api, no_kernels);
  CHECK(iron_device_has_host_memory(f.dev));
  iron_buffer_t *host = NULL;
  CHECK_OK(iron_buffer_create_from_host_in(f.dev, IRON_MEMORY_HOST,
                                           IRON_DTYPE_F32, 2, kDims, kX, NULL,
                                           &host));
  if (!host) exit(1);
  CHECK(iron_buffer_memory_space(host) == IRON_MEMORY_HOST);
  iron_storage_t *hs = storage_of(host);
  CHECK(hs->host_memory);
  CHECK(pinned_has(hs->data));
  void *host_bytes = hs->data;
  // Host memory is not the device's: not counted there.
  CHECK_EQ_INT(iron_device_bytes_in_use(f.dev), 0);
  check_contents(host);

  // To device memory: its own bytes, counted.
  iron_buffer_t *dev = NULL;
  CHECK_OK(iron_buffer_copy_to_memory(host, f.dev, IRON_MEMORY_DEVICE, &dev));
  CHECK(iron_buffer_memory_space(dev) == IRON_MEMORY_DEVICE);
  iron_storage_t *ds = storage_of(dev);
  CHECK(!ds->host_memory && ds->data != host_bytes);
  CHECK(iron_device_bytes_in_use(f.dev) > 0);
  check_contents(dev);
  // Back to host memory: new host bytes.
  iron_buffer_t *back = NULL;
  CHECK_OK(iron_buffer_copy_to_memory(dev, f.dev, IRON_MEMORY_HOST, &back));
  iron_storage_t *bs = storage_of(back);
  CHECK(bs->host_memory && bs->data != ds->data && pinned_has(bs->data));
  check_contents(back);
  // Within one space the bytes are shared (buffers are immutable).
  iron_buffer_t *same = NULL;
  CHECK_OK(iron_buffer_copy_to_memory(back, f.dev, IRON_MEMORY_HOST, &same));
  CHECK(storage_of(same) == bs);
  iron_buffer_t *same_dev = NULL;
  CHECK_OK(iron_buffer_copy_to_device(dev, f.dev, &same_dev));
  CHECK(storage_of(same_dev) == ds);

  // Programs take device memory only; the refusal names the argument.
  iron_executable_t *exe = NULL;
  iron_compile_options_t opts = {.device = f.dev};
  CHECK_OK(iron_executable_compile_module(f.rt, build_identity(), NULL, 0,
                                          &opts, &exe));
  if (exe) {
    iron_buffer_t *out = NULL;
    iron_status_t st = iron_executable_execute(exe, &host, 1, NULL, &out, NULL);
    CHECK(st != IRON_OK && iron_status_code(st) == IRON_STATUS_INVALID_ARGUMENT);
    CHECK(st && strstr(iron_status_message(st), "host memory") != NULL);
    iron_status_free(st);
    CHECK(out == NULL);
    run_identity(exe, dev);
    iron_executable_release(exe);
  }

  iron_buffer_release(same);
  iron_buffer_release(back);
  CHECK(pinned_has(host_bytes));
  iron_buffer_release(host);
  CHECK(!pinned_has(host_bytes));  // freed with its last reference
  iron_buffer_release(same_dev);
  iron_buffer_release(dev);
  CHECK_EQ_INT(iron_device_bytes_in_use(f.dev), 0);
  fake_dev_close(&f);
}

// The recording thread may not allocate host memory (refused, the
// recording spoiled); its frees wait for the recording's end.
static void test_host_memory_while_recording(void) {
  fake_dev_t f = fake_dev_open_with(&g_api, no_kernels);
  iron_storage_t *s = NULL;
  CHECK_OK(iron_storage_allocate_in(f.dev, IRON_MEMORY_HOST, 256, &s));
  if (!s) exit(1);
  void *bytes = s->data;
  CHECK(s->host_memory && pinned_has(bytes));
  CHECK_OK(f.dev->vtable->graph_begin(f.dev));
  iron_storage_t *refused = NULL;
  iron_status_t st =
      iron_storage_allocate_in(f.dev, IRON_MEMORY_HOST, 64, &refused);
  CHECK(st != IRON_OK && refused == NULL);
  CHECK(st && iron_status_code(st) == IRON_STATUS_FAILED_PRECONDITION);
  iron_status_free(st);
  iron_storage_release(s);
  CHECK(pinned_has(bytes));  // not freed inside the recording
  void *graph = NULL;
  st = f.dev->vtable->graph_end(f.dev, true, &graph);
  CHECK(st != IRON_OK && graph == NULL);  // spoiled by the refusal
  iron_status_free(st);
  CHECK(!pinned_has(bytes));  // freed once it ended
  CHECK(!fake_cuda_capturing(f.cd->stream));
  fake_dev_close(&f);
}

// The host device: one memory, the space is a label; execute takes both.
static void test_spaces_on_host(void) {
  setenv("IRON_DEVICE", "host", 1);
  iron_runtime_t *rt = NULL;
  CHECK_OK(iron_runtime_create(NULL, &rt));
  if (!rt) exit(1);
  iron_device_t *dev = iron_runtime_device(rt, 0);
  CHECK(!iron_device_has_host_memory(dev));
  iron_buffer_t *b = NULL;
  CHECK_OK(iron_buffer_create_from_host_in(dev, IRON_MEMORY_HOST,
                                           IRON_DTYPE_F32, 2, kDims, kX, NULL,
                                           &b));
  if (!b) exit(1);
  CHECK(iron_buffer_memory_space(b) == IRON_MEMORY_HOST);
  CHECK(!storage_of(b)->host_memory);
  check_contents(b);
  iron_buffer_t *d = NULL;
  CHECK_OK(iron_buffer_copy_to_memory(b, dev, IRON_MEMORY_DEVICE, &d));
  CHECK(storage_of(d) == storage_of(b));  // the same memory: shared
  iron_executable_t *exe = NULL;
  CHECK_OK(iron_executable_compile_module(rt, build_identity(), NULL, 0, NULL,
                                          &exe));
  if (exe) {
    run_identity(exe, b);
    iron_executable_release(exe);
  }
  iron_buffer_release(d);
  iron_buffer_release(b);
  iron_runtime_release(rt);
}

static void test_setup(void) { fake_cuda_api(&g_api); }

static const iron_test_case_t kTests[] = {
    {"setup", test_setup},
    {"spaces_on_cuda", test_spaces_on_cuda},
    {"host_memory_while_recording", test_host_memory_while_recording},
    {"spaces_on_host", test_spaces_on_host},
};
IRON_TEST_MAIN(kTests)
