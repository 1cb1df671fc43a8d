// GPU-free tests of device while loops (issue 14: a data-dependent
// lax.while_loop whose predicate the GPU evaluates, through a CUDA graph
// WHILE conditional node): the real cuda_device.c and executor on the fake
// driver (fake_cuda.h), which runs conditional nodes as the driver does
// (the body while the condition set by the body's set-condition kernel is
// non-zero, the condition reset to its default at each launch) and refuses
// allocation nodes inside a loop body.
//
// - data-dependent trip counts 0, 1, 2 and many: results as the
//   host-driven loop's; the first time iteration 0 on the host and the
//   rest in one launch, later calls every iteration in one launch;
// - every buffer the recorded body used is returned (no leak per call),
//   and repeated calls work;
// - a driver without conditional nodes, or IRON_CUDA_DEVICE_WHILE=0's
//   device flag, keeps the host-driven loop;
// - a driver error while recording the body, and a body kernel that reads
//   back: the recording is dropped, the loop goes on host-driven, right;
// - the set-condition kernel compiles with NVRTC (when NVRTC is present).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test_nvrtc.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_device.h"
#include "fake_cuda.h"
#include "fake_cuda_device.h"
#include "iron/iron.h"
#include "ir/builder.h"
#include "runtime/executable.h"
#include "runtime/runtime_internal.h"
#include "test.h"

static iron_cuda_api_t g_api;

// --- fake kernels ---------------------------------------------------------

// args: lhs, rhs, out, count, dtype (0 f32, 1 s32), lhs count, rhs count.
static void k_add(const uint64_t *a) {
  int64_t n = (int64_t)a[3];
  for (int64_t i = 0; i < n; ++i) {
    int64_t li = a[5] == 1 ? 0 : i, ri = a[6] == 1 ? 0 : i;
    if (a[4] == 0)
      ((float *)(uintptr_t)a[2])[i] = ((const float *)(uintptr_t)a[0])[li] +
                                      ((const float *)(uintptr_t)a[1])[ri];
    else
      ((int32_t *)(uintptr_t)a[2])[i] =
          ((const int32_t *)(uintptr_t)a[0])[li] +
          ((const int32_t *)(uintptr_t)a[1])[ri];
  }
}
// args: lhs, rhs, out (s32 scalars; out = lhs < rhs as one byte).
static void k_less(const uint64_t *a) {
  *(unsigned char *)(uintptr_t)a[2] = *(const int32_t *)(uintptr_t)a[0] <
                                      *(const int32_t *)(uintptr_t)a[1];
}
// x - x's stand-in that faults (an illegal address, seen at the next wait)
// on its third run: inside the device loop when the loop runs 6 times.
static int g_late_fault_runs;
static void k_late_fault(const uint64_t *a) {
  (void)a;
  if (++g_late_fault_runs == 3)
    fake_cuda.pending_fault = IRON_CU_ERROR_ILLEGAL_ADDRESS;  // mu held
}
static const fake_kernel_t kAddK = {"fake_add", k_add, 7, false};
static const fake_kernel_t kLateFaultK = {"fake_late_fault", k_late_fault, 0,
                                          false};
static const iron_cuda_function_t kLateFaultFn = {(CUfunction)&kLateFaultK,
                                                  "fake_late_fault"};
static const fake_kernel_t kLessK = {"fake_less", k_less, 3, false};
static const fake_kernel_t kSetCondK = {"fake_set_condition",
                                        fake_cuda_set_conditional, 2, false};
static const iron_cuda_function_t kAddFn = {(CUfunction)&kAddK, "fake_add"};
static const iron_cuda_function_t kLessFn = {(CUfunction)&kLessK,
                                             "fake_less"};
static iron_cuda_function_t kSetCondFn = {(CUfunction)&kSetCondK,
                                          "iron_while_set_condition"};

static int g_fail_next_recorded_launch;  // driver error for the next one
// Recorded launches (add or compare) to let pass before that error.
static int g_recorded_launches_to_skip;
static bool g_readback;  // the add kernel reads device memory back first

// Arms the injected driver error on the launch about to be recorded, once
// the launches to skip have passed.
static void fail_recorded_launch(iron_cuda_device_t *d) {
  if (!g_fail_next_recorded_launch || !fake_cuda_capturing(d->stream)) return;
  if (g_recorded_launches_to_skip-- > 0) return;
  fake_cuda.fail_launch = g_fail_next_recorded_launch;
  g_fail_next_recorded_launch = 0;
}

static iron_status_t fake_prepare(const iron_ir_op_t *op,
                                  iron_region_t *const *regions,
                                  void **out_params) {
  (void)regions;
  iron_dtype_t dt = op->operands[0]->type->dtype;
  if (dt != IRON_DTYPE_S32 && dt != IRON_DTYPE_F32)
    return iron_ir_op_unimplemented(op, "on the fake device");
  *out_params = NULL;
  return IRON_OK;
}

static iron_status_t fake_add_run(const iron_kernel_ctx_t *ctx,
                                  const void *params,
                                  const iron_tensor_t *const *in,
                                  iron_tensor_t *const *out) {
  (void)params;
  iron_cuda_device_t *d = iron_cuda_device_cast(ctx->dev);
  fail_recorded_launch(d);
  if (g_readback) {
    uint32_t first = 0;
    IRON_RETURN_IF_ERROR_PLAIN(ctx->dev->vtable->memcpy(
        ctx->dev, &first, in[0]->data, 4, IRON_COPY_DEVICE_TO_HOST));
  }
  uint64_t a[7] = {(uint64_t)(uintptr_t)in[0]->data,
                   (uint64_t)(uintptr_t)in[1]->data,
                   (uint64_t)(uintptr_t)out[0]->data,
                   (uint64_t)out[0]->count,
                   out[0]->dtype == IRON_DTYPE_F32 ? 0u : 1u,
                   (uint64_t)in[0]->count,
                   (uint64_t)in[1]->count};
  void *p[7];
  for (int i = 0; i < 7; ++i) p[i] = &a[i];
  return iron_cuda_launch(d, &kAddFn, 1, 1, 1, 32, 0, p);
}

static iron_status_t fake_less_run(const iron_kernel_ctx_t *ctx,
                                   const void *params,
                                   const iron_tensor_t *const *in,
                                   iron_tensor_t *const *out) {
  (void)params;
  fail_recorded_launch(iron_cuda_device_cast(ctx->dev));
  uint64_t a[3] = {(uint64_t)(uintptr_t)in[0]->data,
                   (uint64_t)(uintptr_t)in[1]->data,
                   (uint64_t)(uintptr_t)out[0]->data};
  void *p[3] = {&a[0], &a[1], &a[2]};
  return iron_cuda_launch(iron_cuda_device_cast(ctx->dev), &kLessFn, 1, 1, 1,
                          1, 0, p);
}

static iron_status_t fake_late_fault_run(const iron_kernel_ctx_t *ctx,
                                         const void *params,
                                         const iron_tensor_t *const *in,
                                         iron_tensor_t *const *out) {
  (void)params;
  (void)in;
  (void)out;
  return iron_cuda_launch(iron_cuda_device_cast(ctx->dev), &kLateFaultFn, 1,
                          1, 1, 1, 0, NULL);
}

static const iron_kernel_t kLateFault = {.name = "fake_late_fault",
                                         .prepare = fake_prepare,
                                         .run = fake_late_fault_run,
                                         .graph_capturable = true};
static const iron_kernel_t kAdd = {.name = "fake_add",
                                   .prepare = fake_prepare,
                                   .run = fake_add_run,
                                   .graph_capturable = true};
static const iron_kernel_t kLess = {.name = "fake_less",
                                    .prepare = fake_prepare,
                                    .run = fake_less_run,
                                    .graph_capturable = true};

static const iron_kernel_t *fake_lookup(iron_op_kind_t kind) {
  switch (kind) {
    case IRON_OP_ADD: return &kAdd;
    case IRON_OP_COMPARE: return &kLess;
    case IRON_OP_SUBTRACT: return &kLateFault;
    default: return NULL;
  }
}

// --- a device on the fake driver -------------------------------------------

// `loops`: give the device its set-condition kernel and turn device loops
// on (the fake driver has no NVRTC modules, so creation left them off).
static fake_dev_t fake_dev_open(bool loops) {
  // On by default (cuda_device.c); this test is about them.
  setenv("IRON_CUDA_DEVICE_WHILE", "1", 0);
  fake_dev_t f = fake_dev_open_with(&g_api, fake_lookup);
  fake_dev_vt.while_kernel = NULL;
  f.dev->graph_min_trips = 2;
  CHECK(!f.cd->device_while);  // no module could be loaded
  if (loops && g_api.has_conditional) {
    CHECK(f.cd->alloc_stream != NULL);
    f.cd->while_set_fn = &kSetCondFn;
    f.cd->device_while = true;
    f.dev->graph_while = true;
  }
  return f;
}

static bool sticky(fake_dev_t *f) {
  iron_status_t st = iron_cuda_device_sticky(f->cd);
  bool s = st != NULL;
  iron_status_free(st);
  return s;
}

// main(n: s32, x: 4xf32) -> (i, x) after
//   i = 0; j = n
//   while i < j: t = x + x; x = t + x; i = i + 1; j = j + 0
// The limit j is carried and changes (by 0) every iteration, so the loop is
// not a counted one: its trip count is data-dependent. `t` is a value the
// body allocates and frees (a block the recording reuses).
static iron_ir_module_t *build_while_op(iron_op_kind_t x_op) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_while", 2);
  int64_t d4[1] = {4};
  const iron_ir_type_t *ti = iron_ir_builder_scalar_type(m, IRON_DTYPE_S32);
  const iron_ir_type_t *tx =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d4);
  const iron_ir_type_t *tp = iron_ir_builder_scalar_type(m, IRON_DTYPE_PRED);
  const iron_ir_type_t *ins[2] = {ti, tx};
  const iron_ir_type_t *outs[2] = {ti, tx};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 2, outs, 2, ins);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  int32_t zero = 0, one = 1;
  iron_ir_value_t *i0 = iron_ir_builder_constant(m, f, b, ti, &zero, 4, false);
  iron_ir_value_t *init[3] = {i0, &b->args[0], &b->args[1]};
  const iron_ir_type_t *cts[3] = {ti, ti, tx};
  iron_ir_op_t *w =
      iron_ir_builder_op(m, f, b, IRON_OP_WHILE, 3, init, 3, cts, 2);
  iron_ir_builder_set_loc(m, w, "while.py", 7);
  iron_ir_block_t *cb = iron_ir_builder_region_block(w, 0);
  for (int k = 0; k < 3; ++k) iron_ir_builder_block_arg(m, f, cb, cts[k]);
  iron_ir_value_t *cops[2] = {&cb->args[0], &cb->args[1]};
  iron_ir_value_t *lt =
      iron_ir_builder_op1(m, f, cb, IRON_OP_COMPARE, 2, cops, tp);
  iron_ir_builder_attr(m, lt->def_op, "comparison_direction",
                       iron_ir_builder_attr_enum(
                           m, IRON_ENUM_COMPARISON_DIRECTION, IRON_CMP_LT));
  iron_ir_builder_return(m, f, cb, IRON_OP_RETURN, 1, &lt);
  iron_ir_block_t *bb = iron_ir_builder_region_block(w, 1);
  for (int k = 0; k < 3; ++k) iron_ir_builder_block_arg(m, f, bb, cts[k]);
  iron_ir_value_t *bi = &bb->args[0], *bj = &bb->args[1], *bx = &bb->args[2];
  iron_ir_value_t *xx[2] = {bx, bx};
  iron_ir_value_t *t = iron_ir_builder_op1(m, f, bb, IRON_OP_ADD, 2, xx, tx);
  iron_ir_value_t *tx2[2] = {t, bx};
  iron_ir_value_t *nx = iron_ir_builder_op1(m, f, bb, x_op, 2, tx2, tx);
  iron_ir_builder_set_loc(m, nx->def_op, "while.py", 9);
  iron_ir_value_t *c1 = iron_ir_builder_constant(m, f, bb, ti, &one, 4, false);
  iron_ir_value_t *c0 = iron_ir_builder_constant(m, f, bb, ti, &zero, 4, false);
  iron_ir_value_t *a1[2] = {bi, c1}, *a0[2] = {bj, c0};
  iron_ir_value_t *ni = iron_ir_builder_op1(m, f, bb, IRON_OP_ADD, 2, a1, ti);
  iron_ir_value_t *nj = iron_ir_builder_op1(m, f, bb, IRON_OP_ADD, 2, a0, ti);
  iron_ir_value_t *r[3] = {ni, nj, nx};
  iron_ir_builder_return(m, f, bb, IRON_OP_RETURN, 3, r);
  iron_ir_value_t *res[2] = {&w->results[0], &w->results[2]};
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 2, res);
  return m;
}

static iron_executable_t *compile_op(fake_dev_t *f, iron_op_kind_t x_op) {
  iron_compile_options_t opts = {.device = f->dev};
  iron_executable_t *exe = NULL;
  CHECK_OK(iron_executable_compile_module(f->rt, build_while_op(x_op), NULL,
                                          0, &opts, &exe));
  return exe;
}
static iron_executable_t *compile(fake_dev_t *f) {
  return compile_op(f, IRON_OP_ADD);
}

static const float kX[4] = {1, 2, 0.5f, -1};

// Runs the loop for n iterations; checks (i, x) == (n, x * 3^n).
static iron_status_t run_check(fake_dev_t *f, iron_executable_t *exe,
                               int32_t n) {
  int64_t d4[1] = {4};
  iron_buffer_t *args[2] = {NULL, NULL};
  iron_status_t st = iron_buffer_create_from_host(f->dev, IRON_DTYPE_S32, 0,
                                                  NULL, &n, NULL, &args[0]);
  if (!st)
    st = iron_buffer_create_from_host(f->dev, IRON_DTYPE_F32, 1, d4, kX, NULL,
                                      &args[1]);
  iron_buffer_t *res[2] = {NULL, NULL};
  iron_event_t *done = NULL;
  if (!st) st = iron_executable_execute(exe, args, 2, NULL, res, &done);
  if (!st) {
    st = iron_event_wait(done);
    iron_event_release(done);
  }
  int32_t i = -1;
  float x[4] = {0};
  if (!st) st = test_read_buffer(res[0], &i, 4);
  if (!st) st = test_read_buffer(res[1], x, 16);
  if (!st) {
    float p = 1;
    for (int k = 0; k < n; ++k) p *= 3;
    CHECK_EQ_INT(i, n > 0 ? n : 0);
    for (int k = 0; k < 4; ++k) CHECK(x[k] == kX[k] * p);
  }
  for (int k = 0; k < 2; ++k) {
    if (args[k]) iron_buffer_release(args[k]);
    if (res[k]) iron_buffer_release(res[k]);
  }
  return st;
}

// --- tests ----------------------------------------------------------------

static void test_trip_counts(void) {
  fake_dev_t f = fake_dev_open(true);
  iron_executable_t *exe = compile(&f);
  static const int32_t trips[] = {0, 1, 2, 3, 7, 40, -3, 1, 0, 2};
  bool warm = false;
  for (size_t k = 0; k < sizeof(trips) / sizeof(trips[0]) && exe; ++k) {
    fake_cuda_reset();
    CHECK_OK(run_check(&f, exe, trips[k]));
    int n = trips[k];
    // The first time, iteration 0 on the host; from the second on (the
    // predicate seen true again), one launch of the device loop runs every
    // one that is left. Once the loop has been recorded, later calls
    // record from iteration 0 on.
    int first = warm ? 0 : 1;
    bool dev = n > first;
    CHECK_EQ_INT(atomic_load(&fake_cuda.while_runs), dev ? 1 : 0);
    CHECK_EQ_INT(atomic_load(&fake_cuda.while_iterations),
                 dev ? n - first : 0);
    CHECK_EQ_INT(atomic_load(&fake_cuda.graph_launches), dev ? 1 : 0);
    CHECK_EQ_INT(atomic_load(&fake_cuda.capture_errors), 0);
    if (dev) warm = true;
  }
  CHECK(!sticky(&f));
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// Many calls: the loop's buffers come back each time (fake_dev_close
// checks that no device block is left).
static void test_repeated_calls(void) {
  fake_dev_t f = fake_dev_open(true);
  iron_executable_t *exe = compile(&f);
  for (int k = 0; k < 20 && exe; ++k) CHECK_OK(run_check(&f, exe, 5 + k % 3));
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// Without conditional nodes (or with IRON_CUDA_DEVICE_WHILE=0, which leaves
// the device flag off) the loop is host-driven, with the same results.
static void test_host_driven(void) {
  for (int variant = 0; variant < 2; ++variant) {
    iron_cuda_api_t saved = g_api;
    if (variant == 0) {
      g_api.has_conditional = false;
      g_api.cuGraphAddNode = NULL;
    }
    fake_dev_t f = fake_dev_open(variant == 0);
    iron_executable_t *exe = compile(&f);
    for (int32_t n = 0; n < 6 && exe; ++n) CHECK_OK(run_check(&f, exe, n));
    CHECK_EQ_INT(atomic_load(&fake_cuda.while_runs), 0);
    CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 0);
    iron_executable_release(exe);
    fake_dev_close(&f);
    g_api = saved;
  }
}

// After a call whose recording was dropped: no device loop ran, no
// capture is left open, the device is healthy; the next call (`n`
// iterations) runs the device loop.
static void check_dropped_then_device_loop(fake_dev_t *f,
                                           iron_executable_t *exe,
                                           int32_t n) {
  CHECK_EQ_INT(atomic_load(&fake_cuda.while_runs), 0);
  CHECK(!fake_cuda_capturing(f->cd->stream));
  CHECK(!sticky(f));
  fake_cuda_reset();
  CHECK_OK(run_check(f, exe, n));
  CHECK_EQ_INT(atomic_load(&fake_cuda.while_runs), 1);
}

// A driver error while recording the body (it invalidates the capture) or
// a body kernel that reads back: the recording is dropped, the loop goes
// on host-driven from the same state, and the next call records again.
static void test_recording_dropped(void) {
  static const CUresult errs[] = {IRON_CU_ERROR_STREAM_CAPTURE_INVALIDATED,
                                  IRON_CU_ERROR_INVALID_VALUE,
                                  IRON_CU_ERROR_OUT_OF_MEMORY};
  fake_dev_t f = fake_dev_open(true);
  iron_executable_t *exe = compile(&f);
  for (int k = 0; k < 4 && exe; ++k) {
    fake_cuda_reset();
    if (k < 3)
      g_fail_next_recorded_launch = errs[k];
    else
      g_readback = true;
    CHECK_OK(run_check(&f, exe, 6));
    g_fail_next_recorded_launch = 0;
    g_readback = false;
    CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 1);
    CHECK_EQ_INT(atomic_load(&fake_cuda.captures_ended), 1);
    check_dropped_then_device_loop(&f, exe, 6);
    CHECK_EQ_INT(atomic_load(&fake_cuda.while_iterations), 6);
  }
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// A driver error at each launch the recording makes (the body's four
// adds, the condition's compare), with the error kinds that invalidate the
// capture or not: the recording is dropped there, the loop goes on
// host-driven from the same state with the right result, nothing leaks or
// stays captured, and the next call runs the device loop.
static void test_recording_dropped_anywhere(void) {
  static const CUresult errs[] = {IRON_CU_ERROR_STREAM_CAPTURE_INVALIDATED,
                                  IRON_CU_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                                  IRON_CU_ERROR_INVALID_VALUE};
  fake_dev_t f = fake_dev_open(true);
  iron_executable_t *exe = compile(&f);
  for (int at = 0; at < 5 && exe; ++at) {
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); ++e) {
      fake_cuda_reset();
      g_fail_next_recorded_launch = errs[e];
      g_recorded_launches_to_skip = at;
      CHECK_OK(run_check(&f, exe, 5));
      g_fail_next_recorded_launch = 0;
      g_recorded_launches_to_skip = 0;
      check_dropped_then_device_loop(&f, exe, 4);
    }
  }
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// The body's first allocation misses the cache and the driver refuses to
// grow its pool while the thread captures (as the H200 did in a strict
// capture): the loop still gives the right result, nothing crashes or
// leaks, the device stays usable, and the next call runs the device loop.
static void test_allocation_while_recording(void) {
  fake_dev_t f = fake_dev_open(true);
  iron_executable_t *exe = compile(&f);
  bool cache = f.cd->cache_on;
  f.cd->cache_on = false;  // every allocation asks the driver
  for (int k = 0; k < 8 && exe; ++k) {
    fake_cuda_reset();
    fake_cuda.alloc_grows_pool = true;
    fake_cuda.alloc_grows_pool_skip = k % 4;  // t, x, i or j refused
    CHECK_OK(run_check(&f, exe, 6));
    CHECK(!fake_cuda_capturing(f.cd->stream));
    CHECK(!sticky(&f));
    CHECK_EQ_INT(atomic_load(&fake_cuda.while_runs), 1);
  }
  f.cd->cache_on = cache;
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// A fault inside the device loop retires the device naming the loop (the
// while op and its source line) and the device loop as the kernel.
static void test_fault_names_loop(void) {
  fake_dev_t f = fake_dev_open(true);
  iron_executable_t *exe = compile_op(&f, IRON_OP_SUBTRACT);
  g_late_fault_runs = 0;
  iron_status_t st = exe ? run_check(&f, exe, 6) : NULL;
  CHECK(st != NULL);
  CHECK_EQ_INT(atomic_load(&fake_cuda.while_runs), 1);
  if (st) {
    const char *msg = iron_status_message(st);
    CHECK(strstr(msg, "CUDA_ERROR_ILLEGAL_ADDRESS") != NULL);
    const char *want = "stablehlo.while (while.py:7) in main, kernel (a CUDA "
                       "graph device loop of the while body";
    CHECK(strstr(msg, want) != NULL);
    if (!strstr(msg, want)) fprintf(stderr, "message: %s\n", msg);
    iron_status_free(st);
  }
  CHECK(sticky(&f));
  iron_executable_release(exe);
  iron_runtime_release(f.rt);
  fake_dev_wait_gone();
  // (A retired device's memory is not freed back to a broken context.)
  atomic_store(&fake_cuda.live_device_blocks, 0);
}

// The set-condition kernel is valid CUDA C for NVRTC (cudaGraphSetConditional
// declared as cuda_device_runtime_api.h does): compiled to SASS for sm_90a.
static void test_set_condition_compiles(void) {
  iron_cuda_api_t api;
  memset(&api, 0, sizeof(api));
  if (!cuda_test_load_nvrtc(&api)) {
    fprintf(stderr, "note: NVRTC absent, set-condition kernel not compiled\n");
    return;
  }
  void *cubin = NULL;
  size_t size = 0;
  CHECK_OK(iron_cuda_nvrtc_compile(&api, iron_cuda_device_while_source(),
                                   "sm_90a", &cubin, &size));
  CHECK(cubin != NULL && size > 0);
  free(cubin);
}

static void setup(void) {
  fake_cuda_api(&g_api);
  fake_cuda_api_conditional(&g_api);
}

static const iron_test_case_t kTests[] = {
    {"setup", setup},
    {"set_condition_compiles", test_set_condition_compiles},
    {"trip_counts", test_trip_counts},
    {"repeated_calls", test_repeated_calls},
    {"host_driven", test_host_driven},
    {"recording_dropped", test_recording_dropped},
    {"recording_dropped_anywhere", test_recording_dropped_anywhere},
    {"allocation_while_recording", test_allocation_while_recording},
    {"fault_names_loop", test_fault_names_loop},
};
IRON_TEST_MAIN(kTests)
