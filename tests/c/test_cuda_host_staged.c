// Host-staged steps (cuda_host_staged.c), GPU-free: the CUDA kernel table's
// custom_call/cholesky/triangular_solve entries run on a fake device with
// its own memory (pointers with a bit flipped, so a host kernel that read
// device memory directly would crash). Covers target resolution, the
// IRON_CUDA_HOST_STAGED=0 refusal by name, compile-time errors of the host
// prepare, the order sync -> device-to-host -> host kernel -> host-to-device,
// callback errors (and the device working afterwards), a tridiagonal solve
// and a cholesky through the wrapper, and a counted loop whose body holds a
// callback: never recorded as a graph, one callback per iteration in order.
// Where there is a GPU, the same programs then run on the CUDA device.
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compiler/plan.h"
#include "device/cuda/cuda_host_staged.h"
#include "device/host/callback.h"
#include "ir/builder.h"
#include "iron/iron.h"
#include "runtime/executable.h"
#include "runtime/runtime_internal.h"
#include "read_buffer.h"
#include "test.h"

#define FAKE_BIT ((uintptr_t)1 << 62)

static void *to_host(const void *p) {
  return (void *)((uintptr_t)p ^ FAKE_BIT);
}

// What the device saw, in order: S job_sync, D device-to-host, H
// host-to-device, C the callback handler ran.
static char g_log[512];
static atomic_int g_log_n;
static atomic_int g_graph_begins;

static void log_event(char c) {
  int i = atomic_fetch_add(&g_log_n, 1);
  if (i < (int)sizeof(g_log) - 1) g_log[i] = c;
}
static void log_reset(void) {
  memset(g_log, 0, sizeof(g_log));
  atomic_store(&g_log_n, 0);
}

static void fake_destroy(iron_device_t *dev) {
  if (!iron_device_deinit_base(dev)) return;
  free(dev);
}
static iron_status_t fake_alloc(iron_device_t *dev, size_t n, void **out) {
  (void)dev;
  void *p = malloc(n);
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "fake device: out of memory");
  *out = to_host(p);
  return IRON_OK;
}
static void fake_free(iron_device_t *dev, void *p, size_t n) {
  (void)dev;
  (void)n;
  free(to_host(p));
}
static iron_status_t fake_memcpy(iron_device_t *dev, void *dst, const void *src,
                                 size_t n, iron_copy_kind_t kind) {
  (void)dev;
  switch (kind) {
    case IRON_COPY_HOST_TO_DEVICE:
      log_event('H');
      memcpy(to_host(dst), src, n);
      break;
    case IRON_COPY_DEVICE_TO_HOST:
      log_event('D');
      memcpy(dst, to_host(src), n);
      break;
    case IRON_COPY_DEVICE_TO_DEVICE:
      memmove(to_host(dst), to_host(src), n);
      break;
  }
  return IRON_OK;
}
static iron_status_t fake_job_sync(iron_device_t *dev) {
  (void)dev;
  log_event('S');
  return IRON_OK;
}
static iron_status_t fake_graph_begin(iron_device_t *dev) {
  (void)dev;
  atomic_fetch_add(&g_graph_begins, 1);
  return IRON_ERR(UNAVAILABLE, "the fake device records no graphs");
}
static iron_status_t fake_graph_end(iron_device_t *dev, bool keep,
                                    void **out_graph) {
  (void)dev;
  (void)keep;
  *out_graph = NULL;
  return IRON_OK;
}
static iron_status_t fake_graph_launch(iron_device_t *dev, void *graph) {
  (void)dev;
  (void)graph;
  return IRON_ERR(INTERNAL, "no graph to launch");
}
static void fake_graph_destroy(iron_device_t *dev, void *graph) {
  (void)dev;
  (void)graph;
}

// Device kernels of the fake device for the loop: s32/f32 add (capturable,
// like CUDA's element-wise kernels) and s32 compare (planned, never run:
// the loops here are counted).
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
  (void)ctx;
  (void)params;
  for (int64_t i = 0; i < out[0]->count; ++i) {
    int64_t a = in[0]->count == 1 ? 0 : i, b = in[1]->count == 1 ? 0 : i;
    if (out[0]->dtype == IRON_DTYPE_S32)
      ((int32_t *)to_host(out[0]->data))[i] =
          ((const int32_t *)to_host(in[0]->data))[a] +
          ((const int32_t *)to_host(in[1]->data))[b];
    else
      ((float *)to_host(out[0]->data))[i] =
          ((const float *)to_host(in[0]->data))[a] +
          ((const float *)to_host(in[1]->data))[b];
  }
  return IRON_OK;
}
static iron_status_t fake_compare_run(const iron_kernel_ctx_t *ctx,
                                      const void *params,
                                      const iron_tensor_t *const *in,
                                      iron_tensor_t *const *out) {
  (void)ctx;
  (void)params;
  *(uint8_t *)to_host(out[0]->data) = *(const int32_t *)to_host(in[0]->data) <
                                      *(const int32_t *)to_host(in[1]->data);
  return IRON_OK;
}
static const iron_kernel_t kFakeAdd = {.name = "fake_add",
                                       .prepare = fake_prepare,
                                       .run = fake_add_run,
                                       .graph_capturable = true};
static const iron_kernel_t kFakeCompare = {.name = "fake_compare",
                                           .prepare = fake_prepare,
                                           .run = fake_compare_run,
                                           .graph_capturable = true};

static const iron_kernel_t *fake_lookup(iron_op_kind_t kind) {
  switch (kind) {
    case IRON_OP_CUSTOM_CALL:
    case IRON_OP_CHOLESKY:
    case IRON_OP_TRIANGULAR_SOLVE:
      return iron_cuda_kernel_lookup(kind);  // the CUDA table's entries
    case IRON_OP_ADD:
      return &kFakeAdd;
    case IRON_OP_COMPARE:
      return &kFakeCompare;
    default:
      return NULL;
  }
}

static const iron_device_vtable_t kFakeVtable = {
    .kind = "fakecuda",
    .destroy = fake_destroy,
    .mem_alloc = fake_alloc,
    .mem_free = fake_free,
    .memcpy = fake_memcpy,
    .job_sync = fake_job_sync,
    .kernel_lookup = fake_lookup,
    .graph_begin = fake_graph_begin,
    .graph_end = fake_graph_end,
    .graph_launch = fake_graph_launch,
    .graph_destroy = fake_graph_destroy,
};

static iron_runtime_t *g_rt;
static iron_device_t *g_fake;
// The device the tests run on: g_fake, then (where there is one) a GPU of
// g_gpu_rt, where the checks of the fake device's log are left out.
static iron_runtime_t *g_cur_rt;
static iron_device_t *g_dev;
static bool on_fake(void) { return g_dev == g_fake; }

static void setup(void) {
  setenv("IRON_DEVICE", "host", 1);
  unsetenv("IRON_CUDA_HOST_STAGED");
  CHECK_OK(iron_runtime_create(NULL, &g_rt));
  if (!g_rt) exit(1);
  iron_device_t *d = calloc(1, sizeof(*d));
  CHECK_OK(iron_device_init_base(d, &kFakeVtable, g_rt, 1));
  d->memory_limit = 0;
  d->graph_min_trips = 2;
  g_rt->devices[1] = d;
  g_rt->num_devices = 2;
  g_fake = d;
  g_dev = d;
  g_cur_rt = g_rt;
}

static iron_buffer_t *buf(iron_dtype_t dt, int32_t rank, const int64_t *dims,
                          const void *data) {
  iron_buffer_t *b = NULL;
  CHECK_OK(iron_buffer_create_from_host(g_dev, dt, rank, dims, data, NULL, &b));
  return b;
}

static iron_status_t compile_on_fake(iron_ir_module_t *m,
                                     iron_executable_t **out) {
  iron_compile_options_t opts = {.device = g_dev};
  *out = NULL;
  return iron_executable_compile_module(g_cur_rt, m, NULL, 0, &opts, out);
}

// --- callbacks ---------------------------------------------------------------

// main(tok, x: 4xf32, n: i32) -> (tok, 4xf32):
//   custom_call @target(tok, x, n) {backend_config = config}
static iron_ir_module_t *build_callback(const char *target,
                                        const char *config) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_cb", 2);
  int64_t d4[1] = {4};
  const iron_ir_type_t *tok = iron_ir_builder_token_type(m);
  const iron_ir_type_t *t4 =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d4);
  const iron_ir_type_t *ti = iron_ir_builder_scalar_type(m, IRON_DTYPE_S32);
  const iron_ir_type_t *ins[3] = {tok, t4, ti}, *outs[2] = {tok, t4};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 3, ins, 2, outs);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  iron_ir_value_t *args[3] = {&b->args[0], &b->args[1], &b->args[2]};
  iron_ir_op_t *op =
      iron_ir_builder_op(m, f, b, IRON_OP_CUSTOM_CALL, 3, args, 2, outs, 0);
  iron_ir_builder_set_loc(m, op, "cb.py", 3);
  iron_ir_builder_attr(m, op, "call_target_name",
                       iron_ir_builder_attr_string(m, target));
  iron_ir_builder_attr(m, op, "backend_config",
                       iron_ir_builder_attr_string(m, config));
  iron_ir_value_t *rv[2] = {&op->results[0], &op->results[1]};
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 2, rv);
  return m;
}

static int g_mode;  // 0: x * n (id 42) or x + n (id 7); 1: fail
static int32_t g_seq[64];
static atomic_int g_seq_n;

static int32_t handler(uint64_t id, int32_t num_inputs, void *const *inputs,
                       const uint64_t *input_nbytes, int32_t num_outputs,
                       void *const *outputs, const uint64_t *output_nbytes,
                       char *error, uint64_t error_capacity) {
  log_event('C');
  if ((id != 42 && id != 7) || num_inputs != 2 || num_outputs != 1 ||
      input_nbytes[0] != 16 || input_nbytes[1] != 4 || output_nbytes[0] != 16) {
    snprintf(error, error_capacity, "unexpected call: id %llu, %d in, %d out",
             (unsigned long long)id, num_inputs, num_outputs);
    return 1;
  }
  // Host memory: reading a device pointer here would fault.
  const float *x = inputs[0];
  const int32_t n = *(const int32_t *)inputs[1];
  float *y = outputs[0];
  if (g_mode == 1) {
    snprintf(error, error_capacity, "ValueError: boom %d", n);
    return 1;
  }
  int k = atomic_fetch_add(&g_seq_n, 1);
  if (k < 64) g_seq[k] = n;
  for (int i = 0; i < 4; ++i)
    y[i] = id == 42 ? x[i] * (float)n : x[i] + (float)n;
  return 0;
}

static iron_status_t run_callback(iron_executable_t *exe, int32_t n,
                                  float *out_y, char *out_log) {
  int64_t d0[1] = {0}, d4[1] = {4};
  float x[4] = {1, 2, 3, 4};
  iron_buffer_t *args[3] = {buf(IRON_DTYPE_PRED, 1, d0, NULL),
                            buf(IRON_DTYPE_F32, 1, d4, x),
                            buf(IRON_DTYPE_S32, 0, NULL, &n)};
  iron_buffer_t *res[2] = {NULL, NULL};
  iron_event_t *done = NULL;
  log_reset();
  iron_status_t st = iron_executable_execute(exe, args, 3, NULL, res, &done);
  if (!st) {
    st = iron_event_wait(done);
    iron_event_release(done);
  }
  if (out_log) {
    memcpy(out_log, g_log, 63);
    out_log[63] = 0;
  }
  if (!st) st = test_read_buffer(res[1], out_y, 16);
  for (int i = 0; i < 3; ++i) iron_buffer_release(args[i]);
  for (int i = 0; i < 2; ++i)
    if (res[i]) iron_buffer_release(res[i]);
  return st;
}

static void test_lookup(void) {
  const iron_kernel_t *cb =
      iron_host_callback_kernel_for_target(IRON_HOST_CALLBACK_TARGET);
  const iron_kernel_t *cc = iron_host_kernel_lookup(IRON_OP_CUSTOM_CALL);
  CHECK(cb != NULL && cc != NULL);
  CHECK(iron_cuda_custom_call_host_kernel(IRON_HOST_CALLBACK_TARGET) == cb);
  CHECK(iron_cuda_custom_call_host_kernel("lapack_spotrf_ffi") == cc);
  CHECK(iron_cuda_custom_call_host_kernel("lapack_zgesdd_ffi") == cc);
  CHECK(iron_cuda_custom_call_host_kernel("tridiagonal_solve_perturbed_ffi") ==
        cc);
  CHECK(iron_cuda_custom_call_host_kernel("my_target") == NULL);
  CHECK(iron_cuda_custom_call_host_kernel("cusolver_getrf_ffi") == NULL);
  CHECK(iron_cuda_custom_call_host_kernel(NULL) == NULL);
  const iron_op_kind_t kinds[3] = {IRON_OP_CUSTOM_CALL, IRON_OP_CHOLESKY,
                                   IRON_OP_TRIANGULAR_SOLVE};
  for (int i = 0; i < 3; ++i) {
    const iron_kernel_t *k = iron_cuda_kernel_lookup(kinds[i]);
    CHECK(k == &iron_cuda_host_staged_kernel);
    // A staged step waits for the device: never part of a graph.
    CHECK(k && !k->graph_capturable && k->prepare_on != NULL);
  }
  CHECK(strcmp(iron_cuda_host_staged_kernel.name, "host_staged") == 0);
}

static void test_plan_resolves(void) {
  iron_ir_module_t *m = build_callback(IRON_HOST_CALLBACK_TARGET, "42");
  iron_plan_t *plan = NULL;
  CHECK_OK(iron_plan_create_on(m, g_dev, &plan));
  if (plan) {
    CHECK(plan->has_host_callbacks);
    const iron_plan_block_t *b = &plan->main->body;
    CHECK_EQ_INT(b->num_steps, 1);
    const iron_plan_step_t *s = &b->steps[0];
    CHECK(s->kind == IRON_STEP_KERNEL &&
          s->kernel == &iron_cuda_host_staged_kernel);
    CHECK(iron_cuda_host_staged_inner(s->params) ==
          iron_host_callback_kernel_for_target(IRON_HOST_CALLBACK_TARGET));
    iron_plan_destroy(plan);
  }
  iron_ir_module_destroy(m);
}

static void test_callback_runs(void) {
  iron_host_callback_set_handler(handler);
  iron_executable_t *exe = NULL;
  CHECK_OK(
      compile_on_fake(build_callback(IRON_HOST_CALLBACK_TARGET, "42"), &exe));
  if (!exe) return;
  CHECK(iron_executable_has_host_callbacks(exe));
  g_mode = 0;
  float y[4] = {0};
  char log[64];
  CHECK_OK(run_callback(exe, 3, y, log));
  CHECK(y[0] == 3.0f && y[3] == 12.0f);
  // Wait for the device, copy the two operands (not the token) back, run
  // the handler on them, copy the one result (not the token) out.
  if (on_fake()) CHECK(strncmp(log, "SDDCH", 5) == 0);

  // A failing callback fails the execution with its message ...
  g_mode = 1;
  iron_status_t st = run_callback(exe, 5, y, log);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INTERNAL);
  CHECK(st && strstr(iron_status_message(st), "ValueError: boom 5"));
  iron_status_free(st);
  if (on_fake()) CHECK(strchr(log, 'H') == NULL);  // no result copied out
  // ... and the device keeps working.
  g_mode = 0;
  CHECK_OK(run_callback(exe, 2, y, NULL));
  CHECK(y[1] == 4.0f);
  iron_executable_release(exe);
}

static iron_ir_module_t *build_cholesky(void);

static void test_disabled(void) {
  setenv("IRON_CUDA_HOST_STAGED", "0", 1);
  iron_executable_t *exe = NULL;
  iron_status_t st =
      compile_on_fake(build_callback(IRON_HOST_CALLBACK_TARGET, "42"), &exe);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(st && strstr(iron_status_message(st), "iron_python_callback"));
  CHECK(st && strstr(iron_status_message(st), "IRON_CUDA_HOST_STAGED=0"));
  CHECK(st && strstr(iron_status_message(st), "cb.py"));
  iron_status_free(st);
  CHECK(exe == NULL);
  st = compile_on_fake(build_callback("tridiagonal_solve_perturbed_ffi", "42"),
                       &exe);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(st &&
        strstr(iron_status_message(st), "tridiagonal_solve_perturbed_ffi"));
  CHECK(st && strstr(iron_status_message(st), "IRON_CUDA_HOST_STAGED=0"));
  iron_status_free(st);
  CHECK(exe == NULL);
  // An op kind the CUDA table stages (no custom call).
  st = compile_on_fake(build_cholesky(), &exe);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(st && strstr(iron_status_message(st), "stablehlo.cholesky"));
  CHECK(st && strstr(iron_status_message(st), "IRON_CUDA_HOST_STAGED=0"));
  iron_status_free(st);
  CHECK(exe == NULL);
  unsetenv("IRON_CUDA_HOST_STAGED");
}

static void test_prepare_errors(void) {
  // The host prepare's refusals surface at compile time, naming the op.
  iron_executable_t *exe = NULL;
  iron_status_t st = compile_on_fake(build_callback("my_target", "42"), &exe);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(st && strstr(iron_status_message(st), "my_target"));
  CHECK(st && strstr(iron_status_message(st), "stablehlo.custom_call"));
  iron_status_free(st);
  CHECK(exe == NULL);
  // A LAPACK target whose operands are not what the routine takes.
  st = compile_on_fake(build_callback("lapack_dpotrf_ffi", "42"), &exe);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(st && strstr(iron_status_message(st), "lapack_dpotrf_ffi"));
  iron_status_free(st);
  CHECK(exe == NULL);
  // A callback without an id in backend_config (the callback's prepare).
  iron_ir_module_t *m = build_callback(IRON_HOST_CALLBACK_TARGET, "x12");
  st = compile_on_fake(m, &exe);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(st && strstr(iron_status_message(st), "x12"));
  iron_status_free(st);
  CHECK(exe == NULL);
}

// --- LAPACK-family targets and linalg ops
// -------------------------------------

// Layout attributes: arrays of dense i64 lists (static: the module borrows).
static iron_ir_attr_t g_layout_arrays[2];
static const iron_ir_attr_t *g_layout_items[5];

// jaxlib's tridiagonal_solve_perturbed_ffi(dl, d, du, b: [n, 2] column-major)
static iron_ir_module_t *build_tridiag(int64_t n) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_tridiag", 2);
  int64_t vd[1] = {n}, md[2] = {n, 2};
  const iron_ir_type_t *tv =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F64, 1, vd);
  const iron_ir_type_t *tm =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F64, 2, md);
  const iron_ir_type_t *ins[4] = {tv, tv, tv, tm};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 4, ins, 1, &tm);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  iron_ir_value_t *args[4] = {&b->args[0], &b->args[1], &b->args[2],
                              &b->args[3]};
  iron_ir_op_t *op =
      iron_ir_builder_op(m, f, b, IRON_OP_CUSTOM_CALL, 4, args, 1, &tm, 0);
  iron_ir_builder_attr(
      m, op, "call_target_name",
      iron_ir_builder_attr_string(m, "tridiagonal_solve_perturbed_ffi"));
  static const int64_t v[1] = {0}, cm[2] = {0, 1};
  for (int i = 0; i < 3; ++i)
    g_layout_items[i] = iron_ir_builder_attr_i64s(m, 1, v);
  g_layout_items[3] = iron_ir_builder_attr_i64s(m, 2, cm);
  g_layout_items[4] = iron_ir_builder_attr_i64s(m, 2, cm);
  g_layout_arrays[0].kind = IRON_ATTR_ARRAY;
  g_layout_arrays[0].array.count = 4;
  g_layout_arrays[0].array.items = g_layout_items;
  g_layout_arrays[1].kind = IRON_ATTR_ARRAY;
  g_layout_arrays[1].array.count = 1;
  g_layout_arrays[1].array.items = g_layout_items + 4;
  iron_ir_builder_attr(m, op, "operand_layouts", &g_layout_arrays[0]);
  iron_ir_builder_attr(m, op, "result_layouts", &g_layout_arrays[1]);
  iron_ir_value_t *rv = &op->results[0];
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 1, &rv);
  return m;
}

static void test_tridiag_staged(void) {
  // XLA:CPU's answer (jax 0.10.2), as in test_host_linalg.
  const int64_t n = 4;
  const double dl[4] = {0, 3, 1, -2}, d[4] = {1, 0.5, 4, 1},
               du[4] = {2, 1, 1, 0}, rhs[8] = {1, 0, 2, 1, 3, 0, 4, 1};
  const double want[8] = {0.7058823529411764,   0.4117647058823529,
                          0.1470588235294118,   -0.2058823529411765,
                          -0.19117647058823528, -0.1323529411764706,
                          3.6176470588235294,   0.7352941176470589};
  iron_executable_t *exe = NULL;
  CHECK_OK(compile_on_fake(build_tridiag(n), &exe));
  if (!exe) return;
  int64_t vd[1] = {n}, md[2] = {n, 2};
  iron_buffer_t *args[4] = {
      buf(IRON_DTYPE_F64, 1, vd, dl), buf(IRON_DTYPE_F64, 1, vd, d),
      buf(IRON_DTYPE_F64, 1, vd, du), buf(IRON_DTYPE_F64, 2, md, rhs)};
  iron_buffer_t *res = NULL;
  log_reset();
  CHECK_OK(iron_executable_execute(exe, args, 4, NULL, &res, NULL));
  double x[8] = {0};
  if (res) CHECK_OK(test_read_buffer(res, x, sizeof(x)));
  for (int i = 0; i < 8; ++i)
    CHECK(fabs(x[i] - want[i]) <= 1e-13 * fabs(want[i]));
  if (on_fake()) CHECK(strncmp(g_log, "SDDDDH", 6) == 0);
  for (int i = 0; i < 4; ++i) iron_buffer_release(args[i]);
  if (res) iron_buffer_release(res);
  iron_executable_release(exe);
}

// stablehlo.cholesky (lower) of a 3x3 f64 matrix.
static iron_ir_module_t *build_cholesky(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_chol", 2);
  int64_t dims[2] = {3, 3};
  const iron_ir_type_t *t =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F64, 2, dims);
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, &t, 1, &t);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  iron_ir_value_t *a = &b->args[0];
  iron_ir_op_t *op =
      iron_ir_builder_op(m, f, b, IRON_OP_CHOLESKY, 1, &a, 1, &t, 0);
  iron_ir_builder_attr(m, op, "lower", iron_ir_builder_attr_bool(m, true));
  iron_ir_value_t *rv = &op->results[0];
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 1, &rv);
  return m;
}

static void test_cholesky_staged(void) {
  int64_t dims[2] = {3, 3};
  iron_ir_module_t *m = build_cholesky();
  iron_executable_t *exe = NULL;
  CHECK_OK(compile_on_fake(m, &exe));
  if (!exe) return;
  CHECK(!iron_executable_has_host_callbacks(exe));
  const double in[9] = {4, 2, 0, 2, 5, 1, 0, 1, 3};
  const double want[9] = {2, 0, 0, 1, 2, 0, 0, 0.5, sqrt(2.75)};
  iron_buffer_t *arg = buf(IRON_DTYPE_F64, 2, dims, in), *res = NULL;
  CHECK_OK(iron_executable_execute(exe, &arg, 1, NULL, &res, NULL));
  double l[9] = {0};
  if (res) CHECK_OK(test_read_buffer(res, l, sizeof(l)));
  for (int i = 0; i < 9; ++i) CHECK(fabs(l[i] - want[i]) <= 1e-15);
  iron_buffer_release(arg);
  if (res) iron_buffer_release(res);
  iron_executable_release(exe);
}

// --- a counted loop with a callback in its body ------------------------------

// main(x: 4xf32) -> (i, x) after `for i in range(5): x = cb(x, i)` (or
// x = x + x when with_callback is false).
static iron_ir_module_t *build_loop(bool with_callback) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_loop", 2);
  int64_t d4[1] = {4};
  const iron_ir_type_t *ti = iron_ir_builder_scalar_type(m, IRON_DTYPE_S32);
  const iron_ir_type_t *tx =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d4);
  const iron_ir_type_t *tp = iron_ir_builder_scalar_type(m, IRON_DTYPE_PRED);
  const iron_ir_type_t *ins[2] = {ti, tx};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, &tx, 2, ins);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  int32_t zero = 0, one = 1, five = 5;
  iron_ir_value_t *i0 = iron_ir_builder_constant(m, f, b, ti, &zero, 4, false);
  iron_ir_value_t *init[2] = {i0, &b->args[0]};
  iron_ir_op_t *w =
      iron_ir_builder_op(m, f, b, IRON_OP_WHILE, 2, init, 2, ins, 2);
  iron_ir_block_t *cb = iron_ir_builder_region_block(w, 0);
  // (Adding an argument moves the block's earlier ones: take them after.)
  iron_ir_builder_block_arg(m, f, cb, ti);
  iron_ir_builder_block_arg(m, f, cb, tx);
  iron_ir_value_t *ci = &cb->args[0];
  iron_ir_value_t *lim =
      iron_ir_builder_constant(m, f, cb, ti, &five, 4, false);
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
  iron_ir_value_t *nx;
  if (with_callback) {
    iron_ir_value_t *cargs[2] = {bx, bi};
    iron_ir_op_t *op =
        iron_ir_builder_op(m, f, bb, IRON_OP_CUSTOM_CALL, 2, cargs, 1, &tx, 0);
    iron_ir_builder_attr(
        m, op, "call_target_name",
        iron_ir_builder_attr_string(m, IRON_HOST_CALLBACK_TARGET));
    iron_ir_builder_attr(m, op, "backend_config",
                         iron_ir_builder_attr_string(m, "7"));
    nx = &op->results[0];
  } else {
    iron_ir_value_t *xx[2] = {bx, bx};
    nx = iron_ir_builder_op1(m, f, bb, IRON_OP_ADD, 2, xx, tx);
  }
  iron_ir_value_t *c1 = iron_ir_builder_constant(m, f, bb, ti, &one, 4, false);
  iron_ir_value_t *a1[2] = {bi, c1};
  iron_ir_value_t *ni = iron_ir_builder_op1(m, f, bb, IRON_OP_ADD, 2, a1, ti);
  iron_ir_value_t *r[2] = {ni, nx};
  iron_ir_builder_return(m, f, bb, IRON_OP_RETURN, 2, r);
  iron_ir_value_t *res[2] = {&w->results[0], &w->results[1]};
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 2, res);
  return m;
}

static void run_loop(bool with_callback, int32_t *out_i, float *out_x) {
  iron_executable_t *exe = NULL;
  CHECK_OK(compile_on_fake(build_loop(with_callback), &exe));
  if (!exe) return;
  CHECK(iron_executable_has_host_callbacks(exe) == with_callback);
  int64_t d4[1] = {4};
  float x0[4] = {1, 2, 3, 4};
  iron_buffer_t *arg = buf(IRON_DTYPE_F32, 1, d4, x0), *res[2] = {NULL, NULL};
  CHECK_OK(iron_executable_execute(exe, &arg, 1, NULL, res, NULL));
  if (res[0]) CHECK_OK(test_read_buffer(res[0], out_i, 4));
  if (res[1]) CHECK_OK(test_read_buffer(res[1], out_x, 16));
  iron_buffer_release(arg);
  for (int i = 0; i < 2; ++i)
    if (res[i]) iron_buffer_release(res[i]);
  iron_executable_release(exe);
}

static void test_loop(void) {
  iron_host_callback_set_handler(handler);
  g_mode = 0;
  // Without a callback the body is recorded (the fake device refuses, and
  // the loop goes on the ordinary way): the graph path is reachable here.
  int begins = atomic_load(&g_graph_begins);
  int32_t i = 0;
  float x[4] = {0};
  run_loop(false, &i, x);
  CHECK_EQ_INT(i, 5);
  CHECK(x[0] == 32.0f && x[3] == 128.0f);
  if (on_fake()) CHECK_EQ_INT(atomic_load(&g_graph_begins), begins + 1);
  // With a callback it is not, and the callback runs once per iteration,
  // in order, on each iteration's values.
  begins = atomic_load(&g_graph_begins);
  atomic_store(&g_seq_n, 0);
  run_loop(true, &i, x);
  CHECK_EQ_INT(i, 5);
  CHECK(x[0] == 11.0f && x[3] == 14.0f);
  if (on_fake()) CHECK_EQ_INT(atomic_load(&g_graph_begins), begins);
  CHECK_EQ_INT(atomic_load(&g_seq_n), 5);
  for (int k = 0; k < 5; ++k) CHECK_EQ_INT(g_seq[k], k);
}

// Bytes in use once the device's asynchronous frees have landed, within
// 2 s. Measured: after the loop part, 192 bytes were still in use in ~5 %
// of runs and none 200 ms later (a teardown check failed in scripts/test.sh).
static size_t settled_bytes_in_use(iron_device_t *d) {
  size_t b = iron_device_bytes_in_use(d);
  for (int i = 0; b && i < 2000; ++i) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    b = iron_device_bytes_in_use(d);
  }
  return b;
}

// The same programs on a real GPU (scripts/cuda_tests.sh runs this test
// there with IRON_TEST_REQUIRE_CUDA=1, which makes "no GPU" a failure).
static void test_on_gpu(void) {
  const char *why = NULL;
  if (iron_cuda_device_count(&why) <= 0) {
    fprintf(stderr, "no CUDA device (%s): the GPU part is not run\n", why);
    const char *req = getenv("IRON_TEST_REQUIRE_CUDA");
    CHECK(!(req && strcmp(req, "1") == 0));
    return;
  }
  setenv("IRON_DEVICE", "cuda", 1);
  iron_runtime_t *rt = NULL;
  CHECK_OK(iron_runtime_create(NULL, &rt));
  setenv("IRON_DEVICE", "host", 1);
  if (!rt) return;
  g_cur_rt = rt;
  g_dev = iron_runtime_device(rt, 0);
  CHECK(strcmp(iron_device_kind(g_dev), "cuda") == 0);
  // Each part must give back every byte it took on the GPU (a leak names
  // its part).
  void (*const parts[])(void) = {test_plan_resolves,
                                 test_callback_runs,
                                 test_disabled,
                                 test_prepare_errors,
                                 test_tridiag_staged,
                                 test_cholesky_staged,
                                 test_loop};
  const char *const names[] = {
      "plan_resolves",  "callback_runs",   "disabled", "prepare_errors",
      "tridiag_staged", "cholesky_staged", "loop"};
  for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); ++k) {
    parts[k]();
    size_t left = settled_bytes_in_use(g_dev);
    if (left)
      fprintf(stderr, "on_gpu %s: %zu bytes still in use\n", names[k], left);
    CHECK_EQ_INT(left, 0);
  }
  g_dev = g_fake;
  g_cur_rt = g_rt;
  iron_runtime_release(rt);
}

static void teardown(void) {
  iron_host_callback_set_handler(NULL);
  CHECK_EQ_INT(settled_bytes_in_use(g_fake), 0);
  iron_runtime_release(g_rt);
}

static const iron_test_case_t kTests[] = {
    {"setup", setup},
    {"lookup", test_lookup},
    {"plan_resolves", test_plan_resolves},
    {"callback_runs", test_callback_runs},
    {"disabled", test_disabled},
    {"prepare_errors", test_prepare_errors},
    {"tridiag_staged", test_tridiag_staged},
    {"cholesky_staged", test_cholesky_staged},
    {"loop", test_loop},
    {"on_gpu", test_on_gpu},
    {"teardown", teardown},
};
IRON_TEST_MAIN(kTests)
