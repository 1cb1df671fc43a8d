// The CUDA device on a real GPU: allocation, copies, limits, out of memory,
// contexts on foreign threads, executing programs that need no kernel, and
// the sticky error after a faulting kernel (last: it breaks the context).
// Without a GPU it says so on stderr and passes, unless
// IRON_TEST_REQUIRE_CUDA=1, which makes "no GPU" a failure.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/cuda/cuda_device.h"
#include "iron/iron.h"
#include "ir/builder.h"
#include "runtime/executable.h"
#include "runtime/runtime_internal.h"
#include "read_buffer.h"
#include "test.h"

static iron_runtime_t *g_rt;
static iron_device_t *g_dev;
static iron_cuda_device_t *g_cu;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_setup(void) {
  setenv("IRON_DEVICE", "cuda", 1);
  CHECK_OK(iron_runtime_create(NULL, &g_rt));
  if (!g_rt) exit(1);
  g_dev = iron_runtime_device(g_rt, 0);
  g_cu = iron_cuda_device_cast(g_dev);
  CHECK(strcmp(iron_device_kind(g_dev), "cuda") == 0);
  CHECK(strstr(iron_device_description(g_dev), "NVIDIA") != NULL);
  CHECK(strncmp(g_cu->arch, "sm_", 3) == 0);
  if (g_cu->cc_major == 9 && g_cu->cc_minor == 0)
    CHECK(strcmp(g_cu->arch, "sm_90a") == 0);
  CHECK(g_cu->num_sms > 0 && g_cu->total_mem > 0);
  fprintf(stderr,
          "cuda: %d device(s); device 0: %s, %s, %d SMs, %.1f GiB, "
          "driver %s, nvrtc %s, cublasLt %s\n",
          iron_runtime_device_count(g_rt), g_cu->name, g_cu->arch,
          g_cu->num_sms, (double)g_cu->total_mem / (1 << 30),
          g_cu->api->driver_path, g_cu->api->nvrtc_path,
          g_cu->api->cublaslt_path);
}

static void test_round_trips(void) {
  size_t sizes[] = {1, 3, 64, 4097, (size_t)1 << 20, (size_t)64 << 20};
  for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
    size_t n = sizes[k];
    uint8_t *x = malloc(n), *y = malloc(n);
    for (size_t i = 0; i < n; ++i) x[i] = (uint8_t)(i * 131 + k);
    memset(y, 0, n);
    int64_t dims[1] = {(int64_t)n};
    iron_buffer_t *b = NULL;
    double t0 = now_s();
    CHECK_OK(iron_buffer_create_from_host(g_dev, IRON_DTYPE_U8, 1, dims, x,
                                          NULL, &b));
    // The caller may reuse its memory as soon as the call returns.
    memset(x, 0xEE, n);
    double t1 = now_s();
    if (b) {
      CHECK(iron_buffer_host_pointer(b) == NULL);
      CHECK_OK(test_read_buffer(b, y, n));
      double t2 = now_s();
      bool ok = true;
      for (size_t i = 0; i < n && ok; ++i) ok = y[i] == (uint8_t)(i * 131 + k);
      CHECK(ok);
      if (n >= ((size_t)1 << 20))
        fprintf(stderr, "cuda: %zu bytes: to device %.2f GB/s, to host %.2f GB/s\n",
                n, (double)n / (t1 - t0) * 1e-9, (double)n / (t2 - t1) * 1e-9);
      iron_buffer_release(b);
    }
    free(x);
    free(y);
  }
  CHECK_EQ_INT(iron_device_bytes_in_use(g_dev), 0);
}

static void test_many_small_copies(void) {
  // More copies in flight than staging buffers: chunks are reused once their
  // copy ran, the rest wait; every buffer gets its own bytes.
  enum { N = 300 };
  static iron_buffer_t *bufs[N];
  static int32_t x[1024];
  for (int i = 0; i < N; ++i) {
    for (int j = 0; j < 1024; ++j) x[j] = i * 1024 + j;
    int64_t dims[1] = {1024};
    bufs[i] = NULL;
    CHECK_OK(iron_buffer_create_from_host(g_dev, IRON_DTYPE_S32, 1, dims, x,
                                          NULL, &bufs[i]));
  }
  memset(x, 0, sizeof(x));  // nothing may still read the source
  bool ok = true;
  for (int i = 0; i < N; ++i) {
    if (!bufs[i]) continue;
    int32_t y[1024];
    CHECK_OK(test_read_buffer(bufs[i], y, sizeof(y)));
    for (int j = 0; j < 1024 && ok; ++j) ok = y[j] == i * 1024 + j;
    iron_buffer_release(bufs[i]);
  }
  CHECK(ok);
  fprintf(stderr, "cuda: %d staging buffers after %d small copies\n",
          g_cu->num_staging, N);
  CHECK(g_cu->num_staging <= 32);
}

static void test_strided_and_zero(void) {
  float src[6] = {1, 2, 3, 4, 5, 6}, y[6] = {0};
  float want[6] = {1, 3, 5, 2, 4, 6};
  int64_t dims[2] = {2, 3}, strides[2] = {4, 8};
  iron_buffer_t *b = NULL;
  CHECK_OK(iron_buffer_create_from_host(g_dev, IRON_DTYPE_F32, 2, dims, src,
                                        strides, &b));
  if (b) {
    CHECK_OK(test_read_buffer(b, y, sizeof(y)));
    CHECK(memcmp(want, y, sizeof(y)) == 0);
    iron_buffer_release(b);
  }
  int64_t zero[1] = {0};
  CHECK_OK(iron_buffer_create_from_host(g_dev, IRON_DTYPE_F32, 1, zero, NULL,
                                        NULL, &b));
  if (b) {
    CHECK_OK(test_read_buffer(b, NULL, 0));
    iron_buffer_release(b);
  }
}

static void test_copy_between_gpus(void) {
  int n = iron_runtime_device_count(g_rt);
  if (n < 2) {
    fprintf(stderr, "cuda: one GPU: copies between GPUs not exercised\n");
    return;
  }
  int32_t x[5] = {1, -2, 3, -4, 5}, y[5] = {0};
  int64_t dims[1] = {5};
  iron_buffer_t *a = NULL, *b = NULL;
  CHECK_OK(iron_buffer_create_from_host(g_dev, IRON_DTYPE_S32, 1, dims, x,
                                        NULL, &a));
  if (!a) return;
  CHECK_OK(iron_buffer_copy_to_device(a, iron_runtime_device(g_rt, 1), &b));
  if (b) {
    CHECK_OK(test_read_buffer(b, y, sizeof(y)));
    CHECK(memcmp(x, y, sizeof(x)) == 0);
    iron_buffer_release(b);
  }
  iron_buffer_release(a);
}

static void test_out_of_memory(void) {
  // More than the GPU has: RESOURCE_EXHAUSTED naming the size, and the
  // device stays usable.
  int64_t dims[1] = {(int64_t)(g_cu->total_mem + ((size_t)1 << 30))};
  iron_storage_t *s = NULL;
  iron_status_t st = iron_storage_allocate(g_dev, (size_t)dims[0], &s);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_RESOURCE_EXHAUSTED);
  char bytes[32];
  snprintf(bytes, sizeof(bytes), "%lld", (long long)dims[0]);
  CHECK(st && strstr(iron_status_message(st), bytes) != NULL);
  if (st) fprintf(stderr, "cuda: OOM reads: %s\n", iron_status_message(st));
  iron_status_free(st);
  CHECK_EQ_INT(iron_device_bytes_in_use(g_dev), 0);
  // The memory limit, as on the host.
  g_dev->memory_limit = 1000;
  st = iron_storage_allocate(g_dev, 4096, &s);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_RESOURCE_EXHAUSTED);
  iron_status_free(st);
  g_dev->memory_limit = 0;
  CHECK_OK(iron_storage_allocate(g_dev, 4096, &s));
  iron_storage_release(s);
}

static void test_pool_reuse(void) {
  // Freed memory goes back to the pool: a GiB allocated and freed 200 times
  // costs microseconds each, not a fresh mapping each.
  double t0 = now_s();
  for (int i = 0; i < 200; ++i) {
    iron_storage_t *s = NULL;
    CHECK_OK(iron_storage_allocate(g_dev, (size_t)1 << 30, &s));
    iron_storage_release(s);
  }
  CHECK_OK(g_dev->vtable->job_sync(g_dev));
  double us = (now_s() - t0) / 200 * 1e6;
  fprintf(stderr, "cuda: 1 GiB alloc+free: %.1f us each\n", us);
  CHECK(us < 1000);
}

static void *alloc_on_fresh_thread(void *arg) {
  (void)arg;
  // No context is current on a new thread: the device makes its own.
  iron_storage_t *s = NULL;
  uint32_t v = 0xC0FFEE, w = 0;
  CHECK_OK(iron_storage_allocate(g_dev, 4, &s));
  if (s) {
    CHECK_OK(g_dev->vtable->memcpy(g_dev, s->data, &v, 4,
                                   IRON_COPY_HOST_TO_DEVICE));
    CHECK_OK(g_dev->vtable->memcpy(g_dev, &w, s->data, 4,
                                   IRON_COPY_DEVICE_TO_HOST));
    CHECK(w == v);
    iron_storage_release(s);
  }
  return NULL;
}

static void test_foreign_thread(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, alloc_on_fresh_thread, NULL) == 0);
  pthread_join(t, NULL);
}

// main(x: 2x3xf32) -> (x, reshape(x), constant)
static iron_ir_module_t *build_aliases(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_aliases", 2);
  int64_t d23[2] = {2, 3}, d6[1] = {6}, d3[1] = {3};
  const iron_ir_type_t *t23 =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 2, d23);
  const iron_ir_type_t *t6 =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d6);
  const iron_ir_type_t *t3 =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_S32, 1, d3);
  const iron_ir_type_t *outs[3] = {t23, t6, t3};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, &t23, 3, outs);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  iron_ir_value_t *x = &b->args[0];
  iron_ir_value_t *r = iron_ir_builder_op1(m, f, b, IRON_OP_RESHAPE, 1, &x, t6);
  int32_t c[3] = {7, 8, 9};
  iron_ir_value_t *k =
      iron_ir_builder_constant(m, f, b, t3, c, sizeof(c), false);
  iron_ir_value_t *res[3] = {x, r, k};
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 3, res);
  return m;
}

static void test_execute_aliases(void) {
  iron_executable_t *exe = NULL;
  CHECK_OK(iron_executable_compile_module(g_rt, build_aliases(), NULL, 0, NULL,
                                          &exe));
  if (!exe) return;
  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t dims[2] = {2, 3};
  iron_buffer_t *arg = NULL;
  CHECK_OK(iron_buffer_create_from_host(g_dev, IRON_DTYPE_F32, 2, dims, x,
                                        NULL, &arg));
  double t0 = now_s();
  int reps = 100;
  for (int rep = 0; rep < reps && arg; ++rep) {
    iron_buffer_t *out[3] = {NULL, NULL, NULL};
    iron_event_t *done = NULL;
    CHECK_OK(iron_executable_execute(exe, &arg, 1, NULL, out, &done));
    if (!done) break;
    CHECK_OK(iron_event_wait(done));
    iron_event_release(done);
    if (rep == 0 || rep == reps - 1) {
      float y[6] = {0}, z[6] = {0};
      int32_t k[3] = {0};
      CHECK_OK(test_read_buffer(out[0], y, sizeof(y)));
      CHECK_OK(test_read_buffer(out[1], z, sizeof(z)));
      CHECK_OK(test_read_buffer(out[2], k, sizeof(k)));
      CHECK(memcmp(x, y, sizeof(x)) == 0);
      CHECK(memcmp(x, z, sizeof(x)) == 0);
      CHECK(k[0] == 7 && k[1] == 8 && k[2] == 9);
    }
    for (int i = 0; i < 3; ++i) iron_buffer_release(out[i]);
  }
  fprintf(stderr, "cuda: identity/reshape/constant execute: %.1f us each\n",
          (now_s() - t0) / reps * 1e6);
  iron_buffer_release(arg);
  iron_executable_release(exe);
}

// A kernel that writes through a bad pointer: its fault is asynchronous,
// shows up at job_sync and then stays (sticky).
static void test_sticky_error(void) {
  const iron_cuda_api_t *api = g_cu->api;
  const char *src =
      "extern \"C\" __global__ void iron_boom(int *p) { p[threadIdx.x] = 1; }";
  nvrtcProgram prog = NULL;
  CHECK_EQ_INT(api->nvrtcCreateProgram(&prog, src, "boom.cu", 0, NULL, NULL),
               0);
  char arch_opt[64];
  snprintf(arch_opt, sizeof(arch_opt), "--gpu-architecture=%s", g_cu->arch);
  const char *opts[] = {arch_opt};
  CHECK_EQ_INT(api->nvrtcCompileProgram(prog, 1, opts), 0);
  size_t n = 0;
  CHECK_EQ_INT(api->nvrtcGetCUBINSize(prog, &n), 0);
  char *cubin = malloc(n ? n : 1);
  CHECK_EQ_INT(api->nvrtcGetCUBIN(prog, cubin), 0);
  api->nvrtcDestroyProgram(&prog);
  CHECK_OK(iron_cuda_device_enter(g_cu));
  CUmodule mod = NULL;
  CUfunction fn = NULL;
  CHECK_EQ_INT(api->cuModuleLoadData(&mod, cubin), 0);
  free(cubin);
  CHECK_EQ_INT(api->cuModuleGetFunction(&fn, mod, "iron_boom"), 0);
  if (!fn) return;
  int *bad = (int *)(uintptr_t)0x10;
  void *params[] = {&bad};
  CHECK_EQ_INT(api->cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, g_cu->stream,
                                   params, NULL),
               0);
  iron_status_t st = g_dev->vtable->job_sync(g_dev);
  CHECK(st != IRON_OK);
  if (st) fprintf(stderr, "cuda: fault reads: %s\n", iron_status_message(st));
  iron_status_free(st);
  // Every later call returns the same error instead of running.
  uint32_t v = 1;
  iron_buffer_t *b = NULL;
  int64_t dims[1] = {1};
  st = iron_buffer_create_from_host(g_dev, IRON_DTYPE_U32, 1, dims, &v, NULL,
                                    &b);
  CHECK(st != IRON_OK && b == NULL);
  CHECK(st && strstr(iron_status_message(st), "stays unusable") != NULL);
  iron_status_free(st);
  st = g_dev->vtable->job_sync(g_dev);
  CHECK(st != IRON_OK);
  iron_status_free(st);
}

static void test_teardown(void) {
  iron_runtime_release(g_rt);  // must not hang or crash on a broken context
}

static const iron_test_case_t kTests[] = {
    {"setup", test_setup},
    {"round_trips", test_round_trips},
    {"many_small_copies", test_many_small_copies},
    {"strided_and_zero", test_strided_and_zero},
    {"copy_between_gpus", test_copy_between_gpus},
    {"out_of_memory", test_out_of_memory},
    {"pool_reuse", test_pool_reuse},
    {"foreign_thread", test_foreign_thread},
    {"execute_aliases", test_execute_aliases},
    {"sticky_error", test_sticky_error},
    {"teardown", test_teardown},
};

// IRON_TEST_MAIN's loop, under the "is there a GPU" check below.
static int run_all(void) {
  int passed = 0, failed = 0;
  for (size_t i = 0; i < sizeof(kTests) / sizeof(kTests[0]); ++i) {
    int before = iron_test_failures_;
    iron_test_current_ = kTests[i].name;
    kTests[i].fn();
    if (iron_test_failures_ == before) {
      passed++;
    } else {
      failed++;
      fprintf(stderr, "FAILED: %s\n", kTests[i].name);
    }
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

int main(void) {
  const char *reason = NULL;
  if (iron_cuda_device_count(&reason) <= 0) {
    const char *req = getenv("IRON_TEST_REQUIRE_CUDA");
    bool required = req && strcmp(req, "1") == 0;
    fprintf(stderr, "test_cuda_device: no CUDA device, nothing run%s: %s\n",
            required ? " (IRON_TEST_REQUIRE_CUDA=1: failing)" : "", reason);
    printf("0 passed, %d failed (no GPU)\n", required ? 1 : 0);
    return required ? 1 : 0;
  }
  return run_all();
}
