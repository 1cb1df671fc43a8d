// GPU-free tests of the CUDA device's error promise (docs/ARCHITECTURE.md,
// "What fails a call, what retires a device"): the real cuda_device.c and
// executor run on a fake driver (fake_cuda.h) that fails like CUDA does
// during stream capture.
//
// - classification: which CUresults retire a device;
// - the root cause of CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED in jax's suite:
//   another thread's copy that is under way while a loop body starts being
//   recorded (the recording waits for it; its sync never meets the
//   capture), and a copy from the host that must not be recorded;
// - the recording thread asking for a copy to or from the host or a wait
//   (refused without touching the stream, recording discarded);
// - the executor's capture-abort path: a driver error while recording a
//   loop body ends the capture, the loop runs the ordinary way, results are
//   right, the device stays usable; a kernel marked graph_capturable that
//   reads back is dropped the same way;
// - only a sticky fault retires the device, naming op, source line and
//   kernel; out of memory, launch and capture errors fail one call only;
// - 8 threads executing a looped program at once, and a compile (constant
//   upload) while another thread's loop is being recorded.
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

// args: lhs, rhs, out, count, op (0 add, 1 multiply), dtype (0 f32, 1 s32),
// lhs count, rhs count (1: broadcast).
static void k_binary(const uint64_t *a) {
  int64_t n = (int64_t)a[3];
  for (int64_t i = 0; i < n; ++i) {
    int64_t li = a[6] == 1 ? 0 : i, ri = a[7] == 1 ? 0 : i;
    if (a[5] == 0) {
      float x = ((const float *)(uintptr_t)a[0])[li];
      float y = ((const float *)(uintptr_t)a[1])[ri];
      ((float *)(uintptr_t)a[2])[i] = a[4] == 0 ? x + y : x * y;
    } else {
      int32_t x = ((const int32_t *)(uintptr_t)a[0])[li];
      int32_t y = ((const int32_t *)(uintptr_t)a[1])[ri];
      ((int32_t *)(uintptr_t)a[2])[i] = a[4] == 0 ? x + y : x * y;
    }
  }
}
static const fake_kernel_t kBinaryK = {"fake_binary", k_binary, 8, false};
static const fake_kernel_t kFaultK = {"fake_fault", NULL, 0, true};
static const iron_cuda_function_t kBinaryFn = {(CUfunction)&kBinaryK,
                                               "fake_binary_kernel"};
static const iron_cuda_function_t kFaultFn = {(CUfunction)&kFaultK,
                                              "fake_fault_kernel"};

// Called by the add kernel's run on the host before it launches, with
// whether the device's stream is being recorded (tests act there).
static void (*g_add_hook)(bool recording);

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

static iron_status_t launch_binary(const iron_kernel_ctx_t *ctx, int op,
                                   const iron_tensor_t *const *in,
                                   iron_tensor_t *const *out) {
  iron_cuda_device_t *d = iron_cuda_device_cast(ctx->dev);
  uint64_t a[8] = {(uint64_t)(uintptr_t)in[0]->data,
                   (uint64_t)(uintptr_t)in[1]->data,
                   (uint64_t)(uintptr_t)out[0]->data,
                   (uint64_t)out[0]->count,
                   (uint64_t)op,
                   out[0]->dtype == IRON_DTYPE_F32 ? 0u : 1u,
                   (uint64_t)in[0]->count,
                   (uint64_t)in[1]->count};
  void *params[8];
  for (int i = 0; i < 8; ++i) params[i] = &a[i];
  return iron_cuda_launch(d, &kBinaryFn, 1, 1, 1, 32, 0, params);
}

static iron_status_t fake_add_run(const iron_kernel_ctx_t *ctx,
                                  const void *params,
                                  const iron_tensor_t *const *in,
                                  iron_tensor_t *const *out) {
  (void)params;
  if (g_add_hook)
    g_add_hook(fake_cuda_capturing(iron_cuda_device_cast(ctx->dev)->stream));
  return launch_binary(ctx, 0, in, out);
}

// Marked graph_capturable, yet it reads device memory back before it
// launches: the class of kernel that poisoned the device when recorded.
static iron_status_t fake_readback_mul_run(const iron_kernel_ctx_t *ctx,
                                           const void *params,
                                           const iron_tensor_t *const *in,
                                           iron_tensor_t *const *out) {
  (void)params;
  uint32_t first = 0;
  IRON_RETURN_IF_ERROR_PLAIN(ctx->dev->vtable->memcpy(
      ctx->dev, &first, in[0]->data, 4, IRON_COPY_DEVICE_TO_HOST));
  return launch_binary(ctx, 1, in, out);
}

// A kernel that faults on the device (an illegal address).
static iron_status_t fake_fault_run(const iron_kernel_ctx_t *ctx,
                                    const void *params,
                                    const iron_tensor_t *const *in,
                                    iron_tensor_t *const *out) {
  (void)params;
  (void)in;
  (void)out;
  return iron_cuda_launch(iron_cuda_device_cast(ctx->dev), &kFaultFn, 1, 1, 1,
                          32, 0, NULL);
}

static const iron_kernel_t kAdd = {.name = "fake_add",
                                   .prepare = fake_prepare,
                                   .run = fake_add_run,
                                   .graph_capturable = true};
static const iron_kernel_t kReadbackMul = {.name = "fake_readback_mul",
                                           .prepare = fake_prepare,
                                           .run = fake_readback_mul_run,
                                           .graph_capturable = true};
static const iron_kernel_t kFault = {.name = "fake_fault",
                                     .prepare = fake_prepare,
                                     .run = fake_fault_run,
                                     .graph_capturable = true};
static const iron_kernel_t kCompare = {.name = "fake_compare",
                                       .prepare = fake_prepare,
                                       .run = fake_fault_run,  // never run
                                       .graph_capturable = true};

static const iron_kernel_t *fake_lookup(iron_op_kind_t kind) {
  switch (kind) {
    case IRON_OP_ADD: return &kAdd;
    case IRON_OP_MULTIPLY: return &kReadbackMul;
    case IRON_OP_SUBTRACT: return &kFault;
    case IRON_OP_COMPARE: return &kCompare;
    default: return NULL;
  }
}

// --- a device on the fake driver -------------------------------------------

static fake_dev_t fake_dev_open(void) {
  fake_dev_t f = fake_dev_open_with(&g_api, fake_lookup);
  f.dev->graph_min_trips = 2;
  // The loops' own graphs: whole programs as graphs (which would record
  // these loops' iterations from the second call on) are
  // test_cuda_program_graph's.
  f.dev->program_graph_min_steps = 0;
  return f;
}

// main(x: 4xf32) -> (i, x) after `for i in range(trips): x = op(x, x)`;
// op at "faults.py:42". With `constant`, x = x + [c, c, c, c] first (an
// uploaded constant).
static iron_ir_module_t *build_loop(iron_op_kind_t op, int32_t trips,
                                    const float *constant) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_loop", 2);
  int64_t d4[1] = {4};
  const iron_ir_type_t *ti = iron_ir_builder_scalar_type(m, IRON_DTYPE_S32);
  const iron_ir_type_t *tx = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32,
                                                         1, d4);
  const iron_ir_type_t *tp = iron_ir_builder_scalar_type(m, IRON_DTYPE_PRED);
  const iron_ir_type_t *ins[2] = {ti, tx};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, &tx, 2, ins);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  int32_t zero = 0, one = 1;
  iron_ir_value_t *x0 = &b->args[0];
  if (constant) {
    iron_ir_value_t *c =
        iron_ir_builder_constant(m, f, b, tx, constant, 16, false);
    iron_ir_value_t *xc[2] = {x0, c};
    x0 = iron_ir_builder_op1(m, f, b, IRON_OP_ADD, 2, xc, tx);
  }
  iron_ir_value_t *i0 = iron_ir_builder_constant(m, f, b, ti, &zero, 4, false);
  iron_ir_value_t *init[2] = {i0, x0};
  iron_ir_op_t *w =
      iron_ir_builder_op(m, f, b, IRON_OP_WHILE, 2, init, 2, ins, 2);
  iron_ir_block_t *cb = iron_ir_builder_region_block(w, 0);
  iron_ir_builder_block_arg(m, f, cb, ti);
  iron_ir_builder_block_arg(m, f, cb, tx);
  iron_ir_value_t *ci = &cb->args[0];
  iron_ir_value_t *lim =
      iron_ir_builder_constant(m, f, cb, ti, &trips, 4, false);
  iron_ir_value_t *cops[2] = {ci, lim};
  iron_ir_value_t *lt =
      iron_ir_builder_op1(m, f, cb, IRON_OP_COMPARE, 2, cops, tp);
  iron_ir_builder_attr(m, lt->def_op, "comparison_direction",
                       iron_ir_builder_attr_enum(
                           m, IRON_ENUM_COMPARISON_DIRECTION, IRON_CMP_LT));
  iron_ir_builder_return(m, f, cb, IRON_OP_RETURN, 1, &lt);
  iron_ir_block_t *bb = iron_ir_builder_region_block(w, 1);
  iron_ir_builder_block_arg(m, f, bb, ti);
  iron_ir_builder_block_arg(m, f, bb, tx);
  iron_ir_value_t *bi = &bb->args[0], *bx = &bb->args[1];
  iron_ir_value_t *xx[2] = {bx, bx};
  iron_ir_value_t *nx = iron_ir_builder_op1(m, f, bb, op, 2, xx, tx);
  iron_ir_builder_set_loc(m, nx->def_op, "faults.py", 42);
  iron_ir_value_t *c1 = iron_ir_builder_constant(m, f, bb, ti, &one, 4, false);
  iron_ir_value_t *a1[2] = {bi, c1};
  iron_ir_value_t *ni = iron_ir_builder_op1(m, f, bb, IRON_OP_ADD, 2, a1, ti);
  iron_ir_value_t *r[2] = {ni, nx};
  iron_ir_builder_return(m, f, bb, IRON_OP_RETURN, 2, r);
  iron_ir_value_t *res[2] = {&w->results[0], &w->results[1]};
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 2, res);
  return m;
}

static iron_executable_t *compile(fake_dev_t *f, iron_ir_module_t *m) {
  iron_compile_options_t opts = {.device = f->dev};
  iron_executable_t *exe = NULL;
  CHECK_OK(iron_executable_compile_module(f->rt, m, NULL, 0, &opts, &exe));
  return exe;
}

// Runs `exe` on x; the loop's (i, x) in *out_i, out_x.
static iron_status_t run_loop(fake_dev_t *f, iron_executable_t *exe,
                              const float *x, int32_t *out_i, float *out_x) {
  int64_t d4[1] = {4};
  iron_buffer_t *arg = NULL;
  iron_status_t st = iron_buffer_create_from_host(f->dev, IRON_DTYPE_F32, 1,
                                                  d4, x, NULL, &arg);
  if (st) return st;
  iron_buffer_t *res[2] = {NULL, NULL};
  iron_event_t *done = NULL;
  st = iron_executable_execute(exe, &arg, 1, NULL, res, &done);
  if (!st) {
    st = iron_event_wait(done);
    iron_event_release(done);
  }
  if (!st) st = test_read_buffer(res[0], out_i, 4);
  if (!st) st = test_read_buffer(res[1], out_x, 16);
  iron_buffer_release(arg);
  for (int i = 0; i < 2; ++i)
    if (res[i]) iron_buffer_release(res[i]);
  return st;
}

static bool sticky(fake_dev_t *f) {
  iron_status_t st = iron_cuda_device_sticky(f->cd);
  bool s = st != NULL;
  iron_status_free(st);
  return s;
}

// --- classification -----------------------------------------------------------

static void test_classification(void) {
  const CUresult stick[] = {4,   214, 220, 226, 700, 702, 709, 710, 714,
                            715, 716, 717, 718, 719, 721, 810, 911, 999};
  for (size_t i = 0; i < sizeof(stick) / sizeof(stick[0]); ++i)
    CHECK(iron_cuda_error_is_sticky(stick[i]));
  // Out of memory, invalid value, launch out of resources, not permitted,
  // not ready, every stream-capture error: the call fails, the device
  // stays.
  const CUresult keep[] = {0,   1,   2,   3,   200, 218, 400, 600, 701,
                           711, 720, 800, 801, 900, 901, 902, 903, 904,
                           905, 906, 907, 908, 909, 910};
  for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); ++i)
    CHECK(!iron_cuda_error_is_sticky(keep[i]));
}

// --- the root cause: another thread's stream work vs a recording -------------

typedef struct {
  fake_dev_t *f;
  void *dev_ptr;
  bool to_host;
  atomic_int done;
  iron_status_t st;
} copier_t;

static atomic_int g_in_copy;
static void hook_wait_in_copy(void) {
  // The real driver blocks here until the stream reaches the copy; the
  // recording thread acts meanwhile.
  atomic_store(&g_in_copy, 1);
  fake_sleep_ms(100);
}

static uint32_t g_src_words[4] = {11, 22, 33, 44};
static uint32_t g_dst_words[4];

static void *copier_main(void *arg) {
  copier_t *c = arg;
  c->st = c->to_host
              ? c->f->dev->vtable->memcpy(c->f->dev, g_dst_words, c->dev_ptr,
                                          16, IRON_COPY_DEVICE_TO_HOST)
              : c->f->dev->vtable->memcpy(c->f->dev, c->dev_ptr, g_src_words,
                                          16, IRON_COPY_HOST_TO_DEVICE);
  atomic_store(&c->done, 1);
  return NULL;
}

// One direction: a copy under way on another thread, then a recording.
static void race_copy_with_recording(bool to_host) {
  fake_dev_t f = fake_dev_open();
  iron_device_t *dev = f.dev;
  void *p = NULL;
  CHECK_OK(dev->vtable->mem_alloc(dev, 64, &p));
  const uint32_t zeros[4] = {0};
  CHECK_OK(dev->vtable->memcpy(dev, p, to_host ? g_src_words : zeros, 16,
                               IRON_COPY_HOST_TO_DEVICE));
  memset(g_dst_words, 0, sizeof(g_dst_words));
  atomic_store(&g_in_copy, 0);
  if (to_host)
    fake_cuda.on_dtoh = hook_wait_in_copy;
  else
    fake_cuda.on_htod = hook_wait_in_copy;
  copier_t c = {.f = &f, .dev_ptr = p, .to_host = to_host};
  int syncs = atomic_load(&fake_cuda.syncs);
  pthread_t t;
  pthread_create(&t, NULL, copier_main, &c);
  while (!atomic_load(&g_in_copy)) fake_sleep_ms(1);
  // The copy is under way: the recording must wait for it (for its wait,
  // when it copies to the host), so that the copy neither joins the graph
  // nor waits for a stream that is being recorded.
  CHECK_OK(dev->vtable->graph_begin(dev));
  if (to_host) {
    CHECK(atomic_load(&fake_cuda.syncs) > syncs);
    CHECK(memcmp(g_dst_words, g_src_words, 16) == 0);
  } else {
    CHECK(memcmp(p, g_src_words, 16) == 0);  // fake device memory
  }
  fake_sleep_ms(150);  // a copy that came late would now meet the recording
  void *graph = NULL;
  CHECK_OK(dev->vtable->graph_end(dev, true, &graph));
  if (graph) dev->vtable->graph_destroy(dev, graph);
  pthread_join(t, NULL);
  fake_cuda.on_dtoh = fake_cuda.on_htod = NULL;
  CHECK_OK(c.st);
  c.st = NULL;
  CHECK(!sticky(&f));
  CHECK_EQ_INT(atomic_load(&fake_cuda.capture_errors), 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.captured_host_copies), 0);
  uint32_t back[4] = {0};
  CHECK_OK(dev->vtable->memcpy(dev, back, p, 16, IRON_COPY_DEVICE_TO_HOST));
  for (int i = 0; i < 4; ++i) {
    CHECK_EQ_INT(back[i], g_src_words[i]);
    if (to_host) CHECK_EQ_INT(g_dst_words[i], g_src_words[i]);
  }
  dev->vtable->mem_free(dev, p, 64);
  fake_dev_close(&f);
}

// Before the fix, the copy's sync met the capture (device retired with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED).
static void test_race_copy_to_host(void) { race_copy_with_recording(true); }
// Before the fix, the staged copy was recorded into the graph (never ran).
static void test_race_copy_from_host(void) { race_copy_with_recording(false); }

// --- the recording thread itself --------------------------------------------

static void test_recording_refuses_host_work(void) {
  fake_dev_t f = fake_dev_open();
  iron_device_t *dev = f.dev;
  void *p = NULL;
  CHECK_OK(dev->vtable->mem_alloc(dev, 64, &p));
  uint32_t w[4] = {1, 2, 3, 4}, back[4] = {0};
  for (int k = 0; k < 3; ++k) {
    CHECK_OK(dev->vtable->graph_begin(dev));
    iron_status_t st =
        k == 0 ? dev->vtable->memcpy(dev, back, p, 16, IRON_COPY_DEVICE_TO_HOST)
        : k == 1 ? dev->vtable->memcpy(dev, p, w, 16, IRON_COPY_HOST_TO_DEVICE)
                 : dev->vtable->job_sync(dev);
    CHECK(st && iron_status_code(st) == IRON_STATUS_FAILED_PRECONDITION);
    iron_status_free(st);
    void *graph = NULL;
    st = dev->vtable->graph_end(dev, true, &graph);
    CHECK(st != NULL && graph == NULL);  // spoiled: discarded
    iron_status_free(st);
    CHECK(!fake_cuda_capturing(f.cd->stream));
  }
  // Nothing reached the driver's capture; the device works.
  CHECK_EQ_INT(atomic_load(&fake_cuda.capture_errors), 0);
  CHECK(!sticky(&f));
  CHECK_OK(dev->vtable->memcpy(dev, p, w, 16, IRON_COPY_HOST_TO_DEVICE));
  CHECK_OK(dev->vtable->memcpy(dev, back, p, 16, IRON_COPY_DEVICE_TO_HOST));
  CHECK(memcmp(back, w, 16) == 0);
  CHECK_OK(dev->vtable->job_sync(dev));
  dev->vtable->mem_free(dev, p, 64);
  fake_dev_close(&f);
}

// --- the executor's graph mode ----------------------------------------------

static const float kX[4] = {1, 2, 0.5f, -1};

static void check_doubled(const float *x, int32_t i, int trips) {
  CHECK_EQ_INT(i, trips);
  for (int k = 0; k < 4; ++k) CHECK(x[k] == kX[k] * (float)(1 << trips));
}

static void test_loop_recorded(void) {
  fake_dev_t f = fake_dev_open();
  iron_executable_t *exe = compile(&f, build_loop(IRON_OP_ADD, 6, NULL));
  for (int run = 0; run < 3 && exe; ++run) {
    int32_t i = -1;
    float x[4] = {0};
    CHECK_OK(run_loop(&f, exe, kX, &i, x));
    check_doubled(x, i, 6);
  }
  // Iteration 0 runs the ordinary way, iterations 1..5 are replays.
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 3);
  CHECK_EQ_INT(atomic_load(&fake_cuda.graph_launches), 15);
  CHECK_EQ_INT(atomic_load(&fake_cuda.capture_errors), 0);
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// A driver error while recording (the first recorded launch fails and
// invalidates the capture): the capture ends, the loop runs the ordinary
// way, and the next execution records again.
static CUresult g_abort_err;
static bool g_abort_alloc;  // fail the recording's next allocation instead
static void abort_hook(bool recording) {
  if (recording && g_abort_err) {
    if (g_abort_alloc)
      fake_cuda.fail_alloc_async = g_abort_err;
    else
      fake_cuda.fail_launch = g_abort_err;
    g_abort_err = 0;
  }
}

static void test_capture_abort_on_driver_error(void) {
  fake_dev_t f = fake_dev_open();
  iron_executable_t *exe = compile(&f, build_loop(IRON_OP_ADD, 6, NULL));
  static const CUresult errs[] = {IRON_CU_ERROR_STREAM_CAPTURE_INVALIDATED,
                                  IRON_CU_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                                  IRON_CU_ERROR_INVALID_VALUE,
                                  IRON_CU_ERROR_OUT_OF_MEMORY};
  for (int k = 0; k < 8 && exe; ++k) {
    fake_cuda_reset();
    g_abort_err = errs[k % 4];
    g_abort_alloc = k >= 4;
    g_add_hook = abort_hook;
    int32_t i = -1;
    float x[4] = {0};
    CHECK_OK(run_loop(&f, exe, kX, &i, x));
    g_add_hook = NULL;
    check_doubled(x, i, 6);
    CHECK(!fake_cuda_capturing(f.cd->stream));
    CHECK(!sticky(&f));
    CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 1);
    CHECK_EQ_INT(atomic_load(&fake_cuda.captures_ended), 1);
    CHECK_EQ_INT(atomic_load(&fake_cuda.graph_launches), 0);
  }
  // An error of cuStreamEndCapture itself: the capture still ended.
  fake_cuda_reset();
  fake_cuda.fail_end_capture = IRON_CU_ERROR_STREAM_CAPTURE_INVALIDATED;
  int32_t i = -1;
  float x[4] = {0};
  if (exe) CHECK_OK(run_loop(&f, exe, kX, &i, x));
  check_doubled(x, i, 6);
  CHECK(!sticky(&f));
  // And the next execution records again.
  fake_cuda_reset();
  if (exe) CHECK_OK(run_loop(&f, exe, kX, &i, x));
  check_doubled(x, i, 6);
  CHECK_EQ_INT(atomic_load(&fake_cuda.graph_launches), 5);
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// A kernel marked graph_capturable that reads back: refused on the
// recording thread, the recording dropped, the loop right.
static void test_loop_readback_kernel(void) {
  fake_dev_t f = fake_dev_open();
  iron_executable_t *exe =
      compile(&f, build_loop(IRON_OP_MULTIPLY, 3, NULL));
  int32_t i = -1;
  float x[4] = {0};
  if (exe) CHECK_OK(run_loop(&f, exe, kX, &i, x));
  CHECK_EQ_INT(i, 3);
  for (int k = 0; k < 4; ++k)
    CHECK(x[k] == powf(kX[k], 8.0f));
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 1);
  CHECK_EQ_INT(atomic_load(&fake_cuda.graph_launches), 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.capture_errors), 0);
  CHECK(!sticky(&f));
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// --- what retires a device, what fails one call -------------------------------

static void test_sticky_fault_retires(void) {
  fake_dev_t f = fake_dev_open();
  iron_executable_t *good = compile(&f, build_loop(IRON_OP_ADD, 2, NULL));
  iron_executable_t *bad = compile(&f, build_loop(IRON_OP_SUBTRACT, 1, NULL));
  int32_t i = -1;
  float x[4] = {0};
  if (good) CHECK_OK(run_loop(&f, good, kX, &i, x));
  iron_status_t st = bad ? run_loop(&f, bad, kX, &i, x) : NULL;
  CHECK(st != NULL);
  if (st) {
    const char *msg = iron_status_message(st);
    CHECK(strstr(msg, "stays unusable") != NULL);
    CHECK(strstr(msg, "CUDA_ERROR_ILLEGAL_ADDRESS") != NULL);
    // The step enqueued last: op, source line, function, kernel.
    const char *want = "stablehlo.subtract (faults.py:42) in main, kernel "
                       "fake_fault_kernel";
    CHECK(strstr(msg, want) != NULL);
    if (!strstr(msg, want)) fprintf(stderr, "message: %s\n", msg);
    iron_status_free(st);
  }
  CHECK(sticky(&f));
  // Every later call fails with it.
  st = good ? run_loop(&f, good, kX, &i, x) : NULL;
  CHECK(st && strstr(iron_status_message(st), "stays unusable"));
  iron_status_free(st);
  void *p = NULL;
  st = f.dev->vtable->mem_alloc(f.dev, 64, &p);
  CHECK(st && strstr(iron_status_message(st), "faults.py:42"));
  iron_status_free(st);
  iron_executable_release(good);
  iron_executable_release(bad);
  // The host device of the same runtime is unaffected.
  iron_device_t *host = iron_runtime_device(f.rt, 0);
  int64_t d4[1] = {4};
  iron_buffer_t *hb = NULL;
  CHECK_OK(iron_buffer_create_from_host(host, IRON_DTYPE_F32, 1, d4, kX, NULL,
                                        &hb));
  float back[4] = {0};
  if (hb) CHECK_OK(test_read_buffer(hb, back, 16));
  CHECK(memcmp(back, kX, 16) == 0);
  iron_buffer_release(hb);
  iron_runtime_release(f.rt);
  fake_dev_wait_gone();
  // (A retired device's memory is not freed back to a broken context.)
  atomic_store(&fake_cuda.live_device_blocks, 0);
}

static void expect_one_failed_call(fake_dev_t *f, iron_executable_t *exe,
                                   iron_status_code_t code, const char *text) {
  int32_t i = -1;
  float x[4] = {0};
  iron_status_t st = run_loop(f, exe, kX, &i, x);
  CHECK(st != NULL);
  if (st) {
    CHECK_EQ_INT(iron_status_code(st), code);
    if (!strstr(iron_status_message(st), text))
      fprintf(stderr, "expected \"%s\" in: %s\n", text,
              iron_status_message(st));
    CHECK(strstr(iron_status_message(st), text) != NULL);
    CHECK(strstr(iron_status_message(st), "stays unusable") == NULL);
    iron_status_free(st);
  }
  CHECK(!sticky(f));
  // The next call works.
  CHECK_OK(run_loop(f, exe, kX, &i, x));
  check_doubled(x, i, 4);
}

static void test_errors_fail_one_call(void) {
  fake_dev_t f = fake_dev_open();
  iron_executable_t *exe = compile(&f, build_loop(IRON_OP_ADD, 4, NULL));
  if (!exe) return;
  fake_cuda.fail_sync = IRON_CU_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  expect_one_failed_call(&f, exe, IRON_STATUS_INTERNAL,
                         "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
  fake_cuda.fail_launch = IRON_CU_ERROR_LAUNCH_OUT_OF_RESOURCES;
  expect_one_failed_call(&f, exe, IRON_STATUS_INTERNAL,
                         "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
  // Out of device memory (the pool refuses, also after the block cache was
  // given back): RESOURCE_EXHAUSTED, the next call works.
  f.cd->cache_on = false;
  fake_cuda.oom_allocs = 2;
  expect_one_failed_call(&f, exe, IRON_STATUS_RESOURCE_EXHAUSTED,
                         "out of memory allocating");
  f.cd->cache_on = true;
  // Other allocation errors fail the call too.
  fake_cuda.fail_alloc_async = IRON_CU_ERROR_INVALID_VALUE;
  expect_one_failed_call(&f, exe, IRON_STATUS_INTERNAL, "cuMemAllocAsync");
  // IRON_CUDA_MEMORY_LIMIT: RESOURCE_EXHAUSTED, the next call works.
  f.dev->memory_limit = 8;
  int32_t i = -1;
  float x[4] = {0};
  iron_status_t st = run_loop(&f, exe, kX, &i, x);
  CHECK(st && iron_status_code(st) == IRON_STATUS_RESOURCE_EXHAUSTED);
  iron_status_free(st);
  f.dev->memory_limit = 0;
  CHECK_OK(run_loop(&f, exe, kX, &i, x));
  check_doubled(x, i, 4);
  CHECK(!sticky(&f));
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// --- threads ----------------------------------------------------------------------

typedef struct {
  fake_dev_t *f;
  iron_executable_t *exe;
  int runs, bad;
} worker_arg_t;

static void *executer_main(void *arg) {
  worker_arg_t *w = arg;
  for (int r = 0; r < w->runs; ++r) {
    int32_t i = -1;
    float x[4] = {0};
    iron_status_t st = run_loop(w->f, w->exe, kX, &i, x);
    if (st) {
      fprintf(stderr, "thread run failed: %s\n", iron_status_message(st));
      iron_status_free(st);
      w->bad++;
      continue;
    }
    bool ok = i == 5;
    for (int k = 0; k < 4; ++k) ok = ok && x[k] == kX[k] * 32.0f;
    if (!ok) w->bad++;
  }
  return NULL;
}

static void test_eight_threads(void) {
  fake_dev_t f = fake_dev_open();
  iron_executable_t *exe = compile(&f, build_loop(IRON_OP_ADD, 5, NULL));
  if (!exe) return;
  pthread_t t[8];
  worker_arg_t w[8];
  for (int k = 0; k < 8; ++k) {
    w[k] = (worker_arg_t){&f, exe, 40, 0};
    pthread_create(&t[k], NULL, executer_main, &w[k]);
  }
  int bad = 0;
  for (int k = 0; k < 8; ++k) {
    pthread_join(t[k], NULL);
    bad += w[k].bad;
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.capture_errors), 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.captured_host_copies), 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 320);
  CHECK(!sticky(&f));
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// A compile (its constant is uploaded with a copy from the host) on another
// thread while the worker records a loop body.
static fake_dev_t *g_cf;
static atomic_int g_compile_go, g_compile_started;
static void compile_hook(bool recording) {
  if (!recording || atomic_load(&g_compile_go)) return;
  atomic_store(&g_compile_go, 1);
  while (!atomic_load(&g_compile_started)) fake_sleep_ms(1);
  fake_sleep_ms(50);  // the compile reaches its upload meanwhile
}
// The compiling thread's outcome, checked by the main thread after join
// (the CHECK counters are not thread-safe).
static iron_status_t g_compile_st;
static int32_t g_compile_i;
static float g_compile_x[4];

static void *compiler_main(void *arg) {
  (void)arg;
  while (!atomic_load(&g_compile_go)) fake_sleep_ms(1);
  atomic_store(&g_compile_started, 1);
  const float c[4] = {1, 1, 1, 1};
  iron_compile_options_t opts = {.device = g_cf->dev};
  iron_executable_t *exe = NULL;
  g_compile_st = iron_executable_compile_module(
      g_cf->rt, build_loop(IRON_OP_ADD, 3, c), NULL, 0, &opts, &exe);
  if (!g_compile_st)
    g_compile_st = run_loop(g_cf, exe, kX, &g_compile_i, g_compile_x);
  iron_executable_release(exe);
  return NULL;
}

static void test_compile_while_recording(void) {
  fake_dev_t f = fake_dev_open();
  g_cf = &f;
  atomic_store(&g_compile_go, 0);
  atomic_store(&g_compile_started, 0);
  iron_executable_t *exe = compile(&f, build_loop(IRON_OP_ADD, 6, NULL));
  pthread_t t;
  pthread_create(&t, NULL, compiler_main, NULL);
  g_add_hook = compile_hook;
  int32_t i = -1;
  float x[4] = {0};
  if (exe) CHECK_OK(run_loop(&f, exe, kX, &i, x));
  pthread_join(t, NULL);
  g_add_hook = NULL;
  check_doubled(x, i, 6);
  CHECK_OK(g_compile_st);
  g_compile_st = NULL;
  CHECK_EQ_INT(g_compile_i, 3);
  for (int k = 0; k < 4; ++k)
    CHECK(g_compile_x[k] == (kX[k] + 1.0f) * 8.0f);
  CHECK_EQ_INT(atomic_load(&fake_cuda.capture_errors), 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.captured_host_copies), 0);
  CHECK(!sticky(&f));
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// IRON_CUDA_TEST_FAULT's kernels compile (NVRTC, no GPU needed).
static void test_fault_kernel_compiles(void) {
  iron_cuda_api_t api;
  memset(&api, 0, sizeof(api));
  if (!cuda_test_load_nvrtc(&api)) {
    fprintf(stderr, "no NVRTC: the fault kernel is not compiled here\n");
    return;
  }
  void *cubin = NULL;
  size_t size = 0;
  CHECK_OK(iron_cuda_nvrtc_compile(&api, iron_cuda_device_test_fault_source(),
                                   "sm_90a", &cubin, &size));
  CHECK(cubin != NULL && size > 0);
  free(cubin);
}

static void setup(void) { fake_cuda_api(&g_api); }

static const iron_test_case_t kTests[] = {
    {"setup", setup},
    {"classification", test_classification},
    {"fault_kernel_compiles", test_fault_kernel_compiles},
    {"race_copy_to_host", test_race_copy_to_host},
    {"race_copy_from_host", test_race_copy_from_host},
    {"recording_refuses_host_work", test_recording_refuses_host_work},
    {"loop_recorded", test_loop_recorded},
    {"capture_abort_on_driver_error", test_capture_abort_on_driver_error},
    {"loop_readback_kernel", test_loop_readback_kernel},
    {"sticky_fault_retires", test_sticky_fault_retires},
    {"errors_fail_one_call", test_errors_fail_one_call},
    {"eight_threads", test_eight_threads},
    {"compile_while_recording", test_compile_while_recording},
};
IRON_TEST_MAIN(kTests)
