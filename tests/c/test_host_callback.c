// Host callbacks (custom_call @iron_python_callback) from C: the handler
// contract (ids, token operands skipped, byte sizes), errors (no handler,
// handler failure, bad backend_config) and nested execution from inside a
// callback, which must not deadlock the device queue.
#include <stdatomic.h>

#include "device/host/callback.h"
#include "iron/iron.h"
#include "ir/builder.h"
#include "runtime/executable.h"
#include "read_buffer.h"
#include "test.h"

static iron_runtime_t *g_rt;
static iron_device_t *g_dev;

static iron_buffer_t *buf(iron_dtype_t dt, int32_t rank, const int64_t *dims,
                          const void *data) {
  iron_buffer_t *b = NULL;
  CHECK_OK(iron_buffer_create_from_host(g_dev, dt, rank, dims, data, NULL,
                                        &b));
  return b;
}

// main(tok, x: 4xf32, n: i32) -> (tok, 4xf32):
//   custom_call @target(tok, x, n) {backend_config = config}
static iron_ir_module_t *build(const char *target, const char *config) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_cb", 2);
  int64_t d4[1] = {4};
  const iron_ir_type_t *tok = iron_ir_builder_token_type(m);
  const iron_ir_type_t *t4 = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32,
                                                         1, d4);
  const iron_ir_type_t *ti = iron_ir_builder_scalar_type(m, IRON_DTYPE_S32);
  const iron_ir_type_t *ins[3] = {tok, t4, ti}, *outs[2] = {tok, t4};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 3, ins, 2, outs);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  iron_ir_value_t *args[3] = {&b->args[0], &b->args[1], &b->args[2]};
  iron_ir_op_t *op =
      iron_ir_builder_op(m, f, b, IRON_OP_CUSTOM_CALL, 3, args, 2, outs, 0);
  iron_ir_builder_attr(m, op, "call_target_name",
                       iron_ir_builder_attr_string(m, target));
  iron_ir_builder_attr(m, op, "backend_config",
                       iron_ir_builder_attr_string(m, config));
  iron_ir_value_t *rv[2] = {&op->results[0], &op->results[1]};
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 2, rv);
  return m;
}

// main(x: 4xf32) -> x (a program without callbacks, run from a callback).
static iron_executable_t *g_inner;

static atomic_int g_calls;
static int g_mode;  // 0: x * n, 1: fail, 2: run g_inner from the callback

static int32_t handler(uint64_t id, int32_t num_inputs, void *const *inputs,
                       const uint64_t *input_nbytes, int32_t num_outputs,
                       void *const *outputs, const uint64_t *output_nbytes,
                       char *error, uint64_t error_capacity) {
  atomic_fetch_add(&g_calls, 1);
  if (id != 42 || num_inputs != 2 || num_outputs != 1 ||
      input_nbytes[0] != 16 || input_nbytes[1] != 4 ||
      output_nbytes[0] != 16) {
    snprintf(error, error_capacity, "unexpected call: id %llu, %d in, %d out",
             (unsigned long long)id, num_inputs, num_outputs);
    return 1;
  }
  const float *x = inputs[0];
  const int32_t n = *(const int32_t *)inputs[1];
  float *y = outputs[0];
  if (g_mode == 1) {
    snprintf(error, error_capacity, "ValueError: boom %d", n);
    return 1;
  }
  if (g_mode == 2) {
    // Work submitted to the device this callback runs on, waited for here.
    int64_t d4[1] = {4};
    iron_buffer_t *in = buf(IRON_DTYPE_F32, 1, d4, x), *out = NULL;
    iron_status_t st = iron_executable_execute(g_inner, &in, 1, NULL, &out,
                                               NULL);
    if (!st) st = test_read_buffer(out, y, 16);
    iron_buffer_release(in);
    if (out) iron_buffer_release(out);
    if (st) {
      snprintf(error, error_capacity, "%s", iron_status_message(st));
      iron_status_free(st);
      return 1;
    }
    for (int i = 0; i < 4; ++i) y[i] *= (float)n;
    return 0;
  }
  for (int i = 0; i < 4; ++i) y[i] = x[i] * (float)n;
  return 0;
}

static iron_status_t run(iron_executable_t *exe, int32_t n, float *out_y) {
  int64_t d0[1] = {0}, d4[1] = {4};
  float x[4] = {1, 2, 3, 4};
  iron_buffer_t *args[3] = {buf(IRON_DTYPE_PRED, 1, d0, NULL),
                            buf(IRON_DTYPE_F32, 1, d4, x),
                            buf(IRON_DTYPE_S32, 0, NULL, &n)};
  iron_buffer_t *res[2] = {NULL, NULL};
  iron_status_t st = iron_executable_execute(exe, args, 3, NULL, res, NULL);
  if (!st) st = test_read_buffer(res[1], out_y, 16);
  for (int i = 0; i < 3; ++i) iron_buffer_release(args[i]);
  for (int i = 0; i < 2; ++i)
    if (res[i]) iron_buffer_release(res[i]);
  return st;
}

static iron_executable_t *compile(iron_ir_module_t *m) {
  iron_executable_t *exe = NULL;
  CHECK_OK(iron_executable_compile_module(g_rt, m, NULL, 0, NULL, &exe));
  return exe;
}

static void setup(void) {
  CHECK_OK(iron_runtime_create(NULL, &g_rt));
  g_dev = iron_runtime_device(g_rt, 0);
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_inner", 2);
  int64_t d4[1] = {4};
  const iron_ir_type_t *t4 = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32,
                                                         1, d4);
  const iron_ir_type_t *ins[2] = {t4, t4};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, ins, 1, ins);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  iron_ir_value_t *x = &b->args[0], *xx[2] = {x, x};
  iron_ir_op_t *op = iron_ir_builder_op(m, f, b, IRON_OP_ADD, 2, xx, 1,
                                        ins, 0);
  iron_ir_value_t *rv = &op->results[0];
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 1, &rv);
  g_inner = compile(m);
}

static void test_no_handler(void) {
  iron_host_callback_set_handler(NULL);
  iron_executable_t *exe = compile(build(IRON_HOST_CALLBACK_TARGET, "42"));
  if (!exe) return;
  CHECK(iron_executable_has_host_callbacks(exe));
  CHECK(!iron_executable_has_host_callbacks(g_inner));
  float y[4];
  iron_status_t st = run(exe, 2, y);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_FAILED_PRECONDITION);
  CHECK(st && strstr(iron_status_message(st), "no callback handler"));
  iron_status_free(st);
  iron_executable_release(exe);
}

static void test_calls(void) {
  iron_host_callback_set_handler(handler);
  iron_executable_t *exe = compile(build(IRON_HOST_CALLBACK_TARGET, "42"));
  if (!exe) return;
  g_mode = 0;
  atomic_store(&g_calls, 0);
  for (int32_t n = 1; n <= 3; ++n) {
    float y[4] = {0};
    CHECK_OK(run(exe, n, y));
    CHECK(y[0] == 1.0f * n && y[3] == 4.0f * n);
  }
  CHECK_EQ_INT(atomic_load(&g_calls), 3);

  g_mode = 1;
  float y[4];
  iron_status_t st = run(exe, 5, y);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INTERNAL);
  CHECK(st && strstr(iron_status_message(st), "ValueError: boom 5"));
  iron_status_free(st);

  // The device is not left failed by a callback error.
  g_mode = 0;
  CHECK_OK(run(exe, 2, y));
  CHECK(y[1] == 4.0f);

  // A callback that runs another program on its own device and waits for
  // it: nested, at once, instead of queued behind itself (a deadlock).
  g_mode = 2;
  CHECK_OK(run(exe, 3, y));
  CHECK(y[0] == 6.0f && y[3] == 24.0f);
  g_mode = 0;
  iron_executable_release(exe);
}

static void test_bad_config(void) {
  iron_executable_t *exe = NULL;
  iron_status_t st = iron_executable_compile_module(
      g_rt, build(IRON_HOST_CALLBACK_TARGET, "x12"), NULL, 0, NULL, &exe);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(st && strstr(iron_status_message(st), "x12"));
  iron_status_free(st);
  CHECK(exe == NULL);
  CHECK(iron_host_callback_kernel_for_target("iron_python_callbac") == NULL);
  CHECK(iron_host_callback_kernel_for_target(NULL) == NULL);
}

static void teardown(void) {
  iron_host_callback_set_handler(NULL);
  iron_executable_release(g_inner);
  CHECK_EQ_INT(iron_device_bytes_in_use(g_dev), 0);
  iron_runtime_release(g_rt);
}

static const iron_test_case_t kTests[] = {
    {"setup", setup},
    {"no_handler", test_no_handler},
    {"calls", test_calls},
    {"bad_config", test_bad_config},
    {"teardown", teardown},
};
IRON_TEST_MAIN(kTests)
