// Executables end to end on IR built by hand: planning, control flow,
// liveness, donation, asynchrony, errors, call_region. Uses small test
// kernels (installed through the plan's lookup hook) so that these tests
// check the runtime, not the kernel library.
#include <time.h>

#include "compiler/plan.h"
#include "iron/iron.h"
#include "ir/builder.h"
#include "runtime/executable.h"
#include "runtime/runtime_internal.h"
#include "device_fence.h"
#include "read_buffer.h"
#include "test.h"

// --- test kernels ------------------------------------------------------

static int64_t g_kernel_runs;

// f32/s32 element-wise binary op; inputs of count 1 broadcast.
static iron_status_t bin_prepare(const iron_ir_op_t *op,
                                 iron_region_t *const *regions,
                                 void **out_params) {
  (void)regions;
  iron_op_kind_t *k = malloc(sizeof(*k));
  *k = op->kind;
  *out_params = k;
  return IRON_OK;
}

static iron_status_t bin_run(const iron_kernel_ctx_t *ctx, const void *params,
                             const iron_tensor_t *const *in,
                             iron_tensor_t *const *out) {
  (void)ctx;
  g_kernel_runs++;
  iron_op_kind_t k = *(const iron_op_kind_t *)params;
  const iron_tensor_t *a = in[0], *b = in[1];
  iron_tensor_t *o = out[0];
  for (int64_t i = 0; i < o->count; ++i) {
    int64_t ia = a->count == 1 ? 0 : i, ib = b->count == 1 ? 0 : i;
    if (a->dtype == IRON_DTYPE_F32) {
      float x = ((const float *)a->data)[ia], y = ((const float *)b->data)[ib];
      float r = k == IRON_OP_ADD        ? x + y
                : k == IRON_OP_MULTIPLY ? x * y
                : k == IRON_OP_MAXIMUM  ? (x > y ? x : y)
                                        : x - y;
      ((float *)o->data)[i] = r;
    } else if (a->dtype == IRON_DTYPE_S32) {
      int32_t x = ((const int32_t *)a->data)[ia];
      int32_t y = ((const int32_t *)b->data)[ib];
      int32_t r = k == IRON_OP_ADD        ? x + y
                  : k == IRON_OP_MULTIPLY ? x * y
                  : k == IRON_OP_MAXIMUM  ? (x > y ? x : y)
                                          : x - y;
      ((int32_t *)o->data)[i] = r;
    } else {
      return IRON_ERR(UNIMPLEMENTED, "test kernel: dtype");
    }
  }
  return IRON_OK;
}

static const iron_kernel_t kBin = {"test_binary", bin_prepare, bin_run,
                                        NULL, true, true};

// compare LT (s32/f32) -> pred.
static iron_status_t lt_run(const iron_kernel_ctx_t *ctx, const void *params,
                            const iron_tensor_t *const *in,
                            iron_tensor_t *const *out) {
  (void)ctx;
  (void)params;
  const iron_tensor_t *a = in[0], *b = in[1];
  for (int64_t i = 0; i < out[0]->count; ++i) {
    int64_t ia = a->count == 1 ? 0 : i, ib = b->count == 1 ? 0 : i;
    bool r = a->dtype == IRON_DTYPE_F32
                 ? ((const float *)a->data)[ia] < ((const float *)b->data)[ib]
                 : ((const int32_t *)a->data)[ia] <
                       ((const int32_t *)b->data)[ib];
    ((uint8_t *)out[0]->data)[i] = r;
  }
  return IRON_OK;
}
static const iron_kernel_t kLt = {"test_lt", NULL, lt_run, NULL, false,
                                       true};

// "negate" fails at run time when the first element is negative.
static iron_status_t fail_run(const iron_kernel_ctx_t *ctx, const void *params,
                              const iron_tensor_t *const *in,
                              iron_tensor_t *const *out) {
  (void)ctx;
  (void)params;
  if (((const float *)in[0]->data)[0] < 0)
    return IRON_ERR(INTERNAL, "negative input");
  for (int64_t i = 0; i < out[0]->count; ++i)
    ((float *)out[0]->data)[i] = -((const float *)in[0]->data)[i];
  return IRON_OK;
}
static const iron_kernel_t kNeg = {"test_neg", NULL, fail_run, NULL,
                                        false, true};

// reduce (f32, rank 1 -> scalar, one region): folds with call_region, both
// element by element (scalars) and, when the region is element-wise, once
// over halves in vector mode, to exercise both modes.
static iron_status_t red_prepare(const iron_ir_op_t *op,
                                 iron_region_t *const *regions,
                                 void **out_params) {
  (void)op;
  *out_params = (void *)regions[0];
  return IRON_OK;
}
static void no_destroy(void *p) { (void)p; }
static iron_status_t red_run(const iron_kernel_ctx_t *ctx, const void *params,
                             const iron_tensor_t *const *in,
                             iron_tensor_t *const *out) {
  const iron_region_t *r = params;
  const iron_tensor_t *x = in[0];
  float acc = *(const float *)in[1]->data;
  int64_t n = x->count, start = 0;
  if (r->elementwise && n >= 2) {
    // Vector mode: pair the halves, then fold the partial results.
    int64_t h = n / 2;
    iron_tensor_t lo = *x, hi = *x, res = *x;
    lo.rank = hi.rank = res.rank = 1;
    lo.dims[0] = hi.dims[0] = res.dims[0] = h;
    lo.count = hi.count = res.count = h;
    lo.nbytes = hi.nbytes = res.nbytes = (size_t)h * 4;
    hi.data = (float *)x->data + h;
    float *tmp = malloc((size_t)h * 4);
    res.data = tmp;
    const iron_tensor_t *ins[2] = {&lo, &hi};
    iron_tensor_t *outs[1] = {&res};
    iron_status_t st = ctx->call_region(ctx, r, ins, outs);
    if (st) {
      free(tmp);
      return st;
    }
    for (int64_t i = 0; i < h; ++i) {
      iron_tensor_t a = *in[1], b = *in[1], o = *in[1];
      a.data = &acc;
      b.data = &tmp[i];
      float next;
      o.data = &next;
      const iron_tensor_t *ins2[2] = {&a, &b};
      iron_tensor_t *outs2[1] = {&o};
      IRON_RETURN_IF_ERROR_PLAIN(ctx->call_region(ctx, r, ins2, outs2));
      acc = next;
    }
    free(tmp);
    start = 2 * h;
  }
  for (int64_t i = start; i < n; ++i) {
    iron_tensor_t a = *in[1], b = *in[1], o = *in[1];
    a.data = &acc;
    b.data = (float *)x->data + i;
    float next;
    o.data = &next;
    const iron_tensor_t *ins[2] = {&a, &b};
    iron_tensor_t *outs[1] = {&o};
    IRON_RETURN_IF_ERROR_PLAIN(ctx->call_region(ctx, r, ins, outs));
    acc = next;
  }
  *(float *)out[0]->data = acc;
  return IRON_OK;
}
static const iron_kernel_t kRed = {"test_reduce", red_prepare, red_run,
                                        no_destroy, false, false};

static const iron_kernel_t *test_lookup(iron_op_kind_t kind) {
  switch (kind) {
    case IRON_OP_ADD:
    case IRON_OP_MULTIPLY:
    case IRON_OP_SUBTRACT:
    case IRON_OP_MAXIMUM: return &kBin;
    case IRON_OP_COMPARE: return &kLt;
    case IRON_OP_NEGATE: return &kNeg;
    case IRON_OP_REDUCE: return &kRed;
    default: return NULL;
  }
}

// --- helpers -------------------------------------------------------------

static iron_runtime_t *g_rt;
static iron_device_t *g_dev;

static iron_buffer_t *buf_f32(int32_t rank, const int64_t *dims,
                              const float *data) {
  iron_buffer_t *b = NULL;
  CHECK_OK(iron_buffer_create_from_host(g_dev, IRON_DTYPE_F32, rank, dims,
                                        data, NULL, &b));
  return b;
}
static iron_buffer_t *buf_s32(int32_t v) {
  iron_buffer_t *b = NULL;
  CHECK_OK(iron_buffer_create_from_host(g_dev, IRON_DTYPE_S32, 0, NULL, &v,
                                        NULL, &b));
  return b;
}

static iron_executable_t *compile(iron_ir_module_t *m) {
  iron_executable_t *exe = NULL;
  CHECK_OK(iron_executable_compile_module(g_rt, m, NULL, 0, NULL, &exe));
  return exe;
}

static bool sync_mode(void) {
  const char *s = getenv("IRON_SYNC");
  return s && s[0] && strcmp(s, "0") != 0;
}

// main(x: 4xf32) -> x * 2 + 1
static iron_ir_module_t *build_axpb(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_axpb", 4);
  int64_t d4[1] = {4};
  const iron_ir_type_t *t = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d4);
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, &t, 1, &t);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  float two = 2, one = 1;
  iron_ir_value_t *c2 = iron_ir_builder_constant(m, f, b, t, &two, 4, true);
  iron_ir_value_t *c1 = iron_ir_builder_constant(m, f, b, t, &one, 4, true);
  iron_ir_value_t *ops1[2] = {&b->args[0], c2};
  iron_ir_value_t *y = iron_ir_builder_op1(m, f, b, IRON_OP_MULTIPLY, 2, ops1, t);
  iron_ir_value_t *ops2[2] = {y, c1};
  iron_ir_value_t *z = iron_ir_builder_op1(m, f, b, IRON_OP_ADD, 2, ops2, t);
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 1, &z);
  return m;
}


static int64_t settled_bytes(void) { return test_settled_bytes(g_dev); }

static void test_axpb(void) {
  iron_executable_t *exe = compile(build_axpb());
  if (!exe) return;
  CHECK(strcmp(iron_executable_name(exe), "jit_axpb") == 0);
  CHECK_EQ_INT(strlen(iron_executable_fingerprint(exe)), 32);
  CHECK_EQ_INT(iron_executable_num_inputs(exe), 1);
  CHECK_EQ_INT(iron_executable_num_outputs(exe), 1);
  iron_dtype_t dt;
  int32_t rank;
  const int64_t *dims;
  iron_executable_output_type(exe, 0, &dt, &rank, &dims);
  CHECK(dt == IRON_DTYPE_F32 && rank == 1 && dims[0] == 4);
  CHECK(!iron_executable_input_donatable(exe, 0));
  CHECK_EQ_INT(iron_executable_input_alias(exe, 0), -1);
  char *text = iron_executable_text(exe);
  CHECK(text && strstr(text, "main"));
  free(text);
  int64_t base = settled_bytes();
  int64_t d4[1] = {4};
  float x[4] = {1, 2, 3, -4};
  iron_buffer_t *in = buf_f32(1, d4, x);
  iron_buffer_t *out = NULL;
  iron_event_t *done = NULL;
  CHECK_OK(iron_executable_execute(exe, &in, 1, NULL, &out, &done));
  CHECK_OK(iron_event_wait(done));
  iron_event_release(done);
  float y[4];
  CHECK_OK(test_read_buffer(out, y, sizeof(y)));
  CHECK(y[0] == 3 && y[1] == 5 && y[2] == 7 && y[3] == -7);
  iron_buffer_release(out);

  // Warm execute cost (host time on the calling thread, and round trip).
  enum { N = 2000 };
  struct timespec t0, t1, t2;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  double submit = 0;
  for (int i = 0; i < N; ++i) {
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK_OK(iron_executable_execute(exe, &in, 1, NULL, &out, &done));
    clock_gettime(CLOCK_MONOTONIC, &t2);
    submit += (t2.tv_sec - t1.tv_sec) * 1e6 + (t2.tv_nsec - t1.tv_nsec) / 1e3;
    CHECK_OK(iron_event_wait(done));
    iron_event_release(done);
    iron_buffer_release(out);
  }
  clock_gettime(CLOCK_MONOTONIC, &t2);
  double total =
      (t2.tv_sec - t0.tv_sec) * 1e6 + (t2.tv_nsec - t0.tv_nsec) / 1e3;
  fprintf(stderr, "axpb: execute %.2f us host, %.2f us round trip\n",
          submit / N, total / N);
  iron_buffer_release(in);
  CHECK_EQ_INT(settled_bytes(), base);
  iron_executable_release(exe);
}

static void test_arg_errors(void) {
  iron_executable_t *exe = compile(build_axpb());
  if (!exe) return;
  iron_buffer_t *out[1];
  iron_status_t st = iron_executable_execute(exe, NULL, 0, NULL, out, NULL);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INVALID_ARGUMENT);
  iron_status_free(st);
  int64_t d3[1] = {3};
  float x[3] = {0};
  iron_buffer_t *in = buf_f32(1, d3, x);
  st = iron_executable_execute(exe, &in, 1, NULL, out, NULL);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(iron_status_message(st), "argument 0") &&
        strstr(iron_status_message(st), "tensor<4xf32>") &&
        strstr(iron_status_message(st), "tensor<3xf32>"));
  iron_status_free(st);
  iron_buffer_release(in);
  in = buf_s32(1);
  st = iron_executable_execute(exe, &in, 1, NULL, out, NULL);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(iron_status_message(st), "tensor<i32>") != NULL);
  iron_status_free(st);
  iron_buffer_release(in);
  iron_executable_release(exe);
}

static void test_unsupported_op(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_rng", 2);
  int64_t d4[1] = {4};
  const iron_ir_type_t *t = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d4);
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, &t, 1, &t);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  iron_ir_value_t *x = &b->args[0];
  iron_ir_op_t *op = iron_ir_builder_op(m, f, b, IRON_OP_RNG, 1, &x, 1, &t, 0);
  iron_ir_builder_set_loc(m, op, "/home/u/f.py", 12);
  {
    iron_ir_value_t *rv = &op->results[0];
    iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 1, &rv);
  }
  iron_executable_t *exe = NULL;
  iron_status_t st =
      iron_executable_compile_module(g_rt, m, NULL, 0, NULL, &exe);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(strstr(iron_status_message(st),
               "stablehlo.rng is not supported yet (f.py:12)") != NULL);
  CHECK(strstr(iron_status_message(st), "main") != NULL);
  iron_status_free(st);
  CHECK(exe == NULL);

  // A custom_call target we do not know.
  m = iron_ir_builder_module_create("jit_cc", 2);
  t = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d4);
  f = iron_ir_builder_func(m, "main", true, 1, &t, 1, &t);
  b = iron_ir_builder_func_block(f);
  x = &b->args[0];
  op = iron_ir_builder_op(m, f, b, IRON_OP_CUSTOM_CALL, 1, &x, 1, &t, 0);
  iron_ir_builder_attr(m, op, "call_target_name",
                       iron_ir_builder_attr_string(m, "lapack_sgetrf"));
  {
    iron_ir_value_t *rv = &op->results[0];
    iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 1, &rv);
  }
  st = iron_executable_compile_module(g_rt, m, NULL, 0, NULL, &exe);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(strstr(iron_status_message(st), "lapack_sgetrf") != NULL);
  iron_status_free(st);

  // A sharding custom_call is an identity.
  m = iron_ir_builder_module_create("jit_shard", 2);
  t = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d4);
  f = iron_ir_builder_func(m, "main", true, 1, &t, 1, &t);
  b = iron_ir_builder_func_block(f);
  x = &b->args[0];
  op = iron_ir_builder_op(m, f, b, IRON_OP_CUSTOM_CALL, 1, &x, 1, &t, 0);
  iron_ir_builder_attr(m, op, "call_target_name",
                       iron_ir_builder_attr_string(m, "Sharding"));
  {
    iron_ir_value_t *rv = &op->results[0];
    iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 1, &rv);
  }
  exe = compile(m);
  if (exe) {
    float v[4] = {1, 2, 3, 4}, w[4];
    iron_buffer_t *in = buf_f32(1, d4, v), *out;
    CHECK_OK(iron_executable_execute(exe, &in, 1, NULL, &out, NULL));
    CHECK_OK(test_read_buffer(out, w, sizeof(w)));
    CHECK(memcmp(v, w, 16) == 0);
    iron_buffer_release(in);
    iron_buffer_release(out);
    iron_executable_release(exe);
  }
}

// main(n: i32, x: f32) -> (i, x) after `while (i < n) { i += 1; x += 1.5 }`.
static iron_ir_module_t *build_loop(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_loop", 2);
  const iron_ir_type_t *ti = iron_ir_builder_scalar_type(m, IRON_DTYPE_S32);
  const iron_ir_type_t *tf = iron_ir_builder_scalar_type(m, IRON_DTYPE_F32);
  const iron_ir_type_t *tp = iron_ir_builder_scalar_type(m, IRON_DTYPE_PRED);
  const iron_ir_type_t *ins[2] = {ti, tf};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 2, ins, 2, ins);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  int32_t zero = 0, one = 1;
  float step = 1.5f;
  iron_ir_value_t *i0 = iron_ir_builder_constant(m, f, b, ti, &zero, 4, false);
  iron_ir_value_t *n = &b->args[0];
  iron_ir_value_t *init[2] = {i0, &b->args[1]};
  iron_ir_op_t *w = iron_ir_builder_op(m, f, b, IRON_OP_WHILE, 2, init, 2, ins, 2);
  iron_ir_builder_set_loc(m, w, "loop.py", 7);
  // cond: i < n (n captured from the enclosing function).
  iron_ir_block_t *cb = iron_ir_builder_region_block(w, 0);
  iron_ir_value_t *ci = iron_ir_builder_block_arg(m, f, cb, ti);
  iron_ir_builder_block_arg(m, f, cb, tf);
  iron_ir_value_t *cops[2] = {ci, n};
  iron_ir_value_t *lt = iron_ir_builder_op1(m, f, cb, IRON_OP_COMPARE, 2, cops, tp);
  iron_ir_builder_return(m, f, cb, IRON_OP_RETURN, 1, &lt);
  // body
  iron_ir_block_t *bb = iron_ir_builder_region_block(w, 1);
  iron_ir_value_t *bi = iron_ir_builder_block_arg(m, f, bb, ti);
  iron_ir_value_t *bx = iron_ir_builder_block_arg(m, f, bb, tf);
  iron_ir_value_t *c1 = iron_ir_builder_constant(m, f, bb, ti, &one, 4, false);
  iron_ir_value_t *cs = iron_ir_builder_constant(m, f, bb, tf, &step, 4, false);
  iron_ir_value_t *a1[2] = {bi, c1}, *a2[2] = {bx, cs};
  iron_ir_value_t *ni = iron_ir_builder_op1(m, f, bb, IRON_OP_ADD, 2, a1, ti);
  iron_ir_value_t *nx = iron_ir_builder_op1(m, f, bb, IRON_OP_ADD, 2, a2, tf);
  iron_ir_value_t *r[2] = {ni, nx};
  iron_ir_builder_return(m, f, bb, IRON_OP_RETURN, 2, r);
  iron_ir_value_t *res[2] = {&w->results[0], &w->results[1]};
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 2, res);
  return m;
}

static void test_while_async(void) {
  iron_executable_t *exe = compile(build_loop());
  if (!exe) return;
  int64_t base = settled_bytes();
  float x0 = 0.5f;
  iron_buffer_t *n = buf_s32(10);
  iron_buffer_t *x = buf_f32(0, NULL, &x0);
  iron_buffer_t *args[2] = {n, x}, *out[2];
  CHECK_OK(iron_executable_execute(exe, args, 2, NULL, out, NULL));
  int32_t i;
  float xf;
  CHECK_OK(test_read_buffer(out[0], &i, 4));
  CHECK_OK(test_read_buffer(out[1], &xf, 4));
  CHECK_EQ_INT(i, 10);
  CHECK(xf == 15.5f);
  iron_buffer_release(out[0]);
  iron_buffer_release(out[1]);
  iron_buffer_release(n);
  // Zero iterations: the loop returns its inputs.
  n = buf_s32(-3);
  args[0] = n;
  CHECK_OK(iron_executable_execute(exe, args, 2, NULL, out, NULL));
  CHECK_OK(test_read_buffer(out[0], &i, 4));
  CHECK_OK(test_read_buffer(out[1], &xf, 4));
  CHECK(i == 0 && xf == 0.5f);
  iron_buffer_release(out[0]);
  iron_buffer_release(out[1]);
  iron_buffer_release(n);
  // A long loop: execute returns before the work ends.
  n = buf_s32(300000);
  args[0] = n;
  iron_event_t *done;
  CHECK_OK(iron_executable_execute(exe, args, 2, NULL, out, &done));
  if (!sync_mode()) {
    CHECK(!iron_event_is_ready(done));
    CHECK(iron_buffer_host_pointer(out[0]) == NULL);
  }
  // A second run queued behind the first (FIFO), using its result.
  iron_buffer_t *args2[2] = {n, out[1]}, *out2[2];
  CHECK_OK(iron_executable_execute(exe, args2, 2, NULL, out2, NULL));
  CHECK_OK(test_read_buffer(out2[0], &i, 4));
  CHECK(iron_event_is_ready(done));
  CHECK_EQ_INT(i, 300000);
  CHECK_OK(iron_event_wait(done));
  iron_event_release(done);
  for (int k = 0; k < 2; ++k) {
    iron_buffer_release(out[k]);
    iron_buffer_release(out2[k]);
  }
  iron_buffer_release(n);
  iron_buffer_release(x);
  CHECK_EQ_INT(settled_bytes(), base);
  iron_executable_release(exe);
}

// main(k: i32, x: 4xf32) -> case k { 0: x + x, 1: x * x, 2: x - x }
// and if (x < x)... via a private function call.
static iron_ir_module_t *build_case(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_case", 3);
  int64_t d4[1] = {4};
  const iron_ir_type_t *ti = iron_ir_builder_scalar_type(m, IRON_DTYPE_S32);
  const iron_ir_type_t *tv = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d4);
  const iron_ir_type_t *tp = iron_ir_builder_scalar_type(m, IRON_DTYPE_PRED);
  // private @twice(x) -> x + x
  iron_ir_func_t *g = iron_ir_builder_func(m, "twice", false, 1, &tv, 1, &tv);
  iron_ir_block_t *gb = iron_ir_builder_func_block(g);
  iron_ir_value_t *gx[2] = {&gb->args[0], &gb->args[0]};
  iron_ir_value_t *gs = iron_ir_builder_op1(m, g, gb, IRON_OP_ADD, 2, gx, tv);
  iron_ir_builder_return(m, g, gb, IRON_OP_FUNC_RETURN, 1, &gs);

  const iron_ir_type_t *ins[2] = {ti, tv};
  const iron_ir_type_t *outs[2] = {tv, tv};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 2, ins, 2, outs);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  iron_ir_value_t *k = &b->args[0], *x = &b->args[1];
  iron_ir_op_t *c = iron_ir_builder_op(m, f, b, IRON_OP_CASE, 1, &k, 1, &tv, 3);
  iron_op_kind_t kinds[3] = {IRON_OP_FUNC_CALL, IRON_OP_MULTIPLY,
                             IRON_OP_SUBTRACT};
  for (int r = 0; r < 3; ++r) {
    iron_ir_block_t *rb = iron_ir_builder_region_block(c, (uint32_t)r);
    iron_ir_value_t *v;
    if (kinds[r] == IRON_OP_FUNC_CALL) {
      iron_ir_op_t *call =
          iron_ir_builder_op(m, f, rb, IRON_OP_FUNC_CALL, 1, &x, 1, &tv, 0);
      iron_ir_builder_attr(m, call, "callee",
                           iron_ir_builder_attr_symbol(m, "twice"));
      v = &call->results[0];
    } else {
      iron_ir_value_t *xx[2] = {x, x};
      v = iron_ir_builder_op1(m, f, rb, kinds[r], 2, xx, tv);
    }
    iron_ir_builder_return(m, f, rb, IRON_OP_RETURN, 1, &v);
  }
  // if (k < 1) then x else case result
  int32_t one = 1;
  iron_ir_value_t *c1 = iron_ir_builder_constant(m, f, b, ti, &one, 4, false);
  iron_ir_value_t *kc[2] = {k, c1};
  iron_ir_value_t *p = iron_ir_builder_op1(m, f, b, IRON_OP_COMPARE, 2, kc, tp);
  iron_ir_op_t *iff = iron_ir_builder_op(m, f, b, IRON_OP_IF, 1, &p, 1, &tv, 2);
  iron_ir_builder_return(m, f, iron_ir_builder_region_block(iff, 0),
                         IRON_OP_RETURN, 1, &x);
  iron_ir_value_t *cr = &c->results[0];
  iron_ir_builder_return(m, f, iron_ir_builder_region_block(iff, 1),
                         IRON_OP_RETURN, 1, &cr);
  iron_ir_value_t *res[2] = {cr, &iff->results[0]};
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 2, res);
  return m;
}

static void test_case_if_call(void) {
  iron_executable_t *exe = compile(build_case());
  if (!exe) return;
  int64_t base = settled_bytes();
  int64_t d4[1] = {4};
  float x[4] = {1, 2, 3, 4};
  iron_buffer_t *xb = buf_f32(1, d4, x);
  struct {
    int32_t k;
    float expect0, expect1;  // element 2 (x = 3) of each result
  } cases[] = {{0, 6, 3}, {1, 9, 9}, {2, 0, 0}, {7, 0, 0}, {-1, 0, 3}};
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
    iron_buffer_t *kb = buf_s32(cases[c].k);
    iron_buffer_t *args[2] = {kb, xb}, *out[2];
    CHECK_OK(iron_executable_execute(exe, args, 2, NULL, out, NULL));
    float y0[4], y1[4];
    CHECK_OK(test_read_buffer(out[0], y0, 16));
    CHECK_OK(test_read_buffer(out[1], y1, 16));
    if (y0[2] != cases[c].expect0 || y1[2] != cases[c].expect1)
      fprintf(stderr, "case k=%d: got %g %g\n", cases[c].k, y0[2], y1[2]);
    CHECK(y0[2] == cases[c].expect0);
    CHECK(y1[2] == cases[c].expect1);
    iron_buffer_release(out[0]);
    iron_buffer_release(out[1]);
    iron_buffer_release(kb);
  }
  iron_buffer_release(xb);
  CHECK_EQ_INT(settled_bytes(), base);
  iron_executable_release(exe);
}

// Donation + in-place: main(x {tf.aliasing_output = 0}) -> x + 1.
static void test_donation(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_donate", 1);
  int64_t d[1] = {1024};
  const iron_ir_type_t *t = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d);
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, &t, 1, &t);
  f->arg_attrs[0] = iron_ir_builder_attr_dict1(
      m, "tf.aliasing_output", iron_ir_builder_attr_int(m, 0));
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  float one = 1;
  iron_ir_value_t *c = iron_ir_builder_constant(m, f, b, t, &one, 4, true);
  iron_ir_value_t *a[2] = {&b->args[0], c};
  iron_ir_value_t *y = iron_ir_builder_op1(m, f, b, IRON_OP_ADD, 2, a, t);
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 1, &y);
  iron_executable_t *exe = compile(m);
  if (!exe) return;
  CHECK(iron_executable_input_donatable(exe, 0));
  CHECK_EQ_INT(iron_executable_input_alias(exe, 0), 0);
  float *x = malloc(4096);
  for (int i = 0; i < 1024; ++i) x[i] = (float)i;
  int64_t base = settled_bytes();
  iron_buffer_t *in = buf_f32(1, d, x), *out;
  void *in_ptr = iron_buffer_host_pointer(in);
  bool donate = true;
  CHECK_OK(iron_executable_execute(exe, &in, 1, &donate, &out, NULL));
  float *y2 = malloc(4096);
  CHECK_OK(test_read_buffer(out, y2, 4096));
  CHECK(y2[0] == 1 && y2[1023] == 1024);
  // The output reused the donated storage (unless in-place is off).
  if (!getenv("IRON_NO_INPLACE")) {
    CHECK(iron_buffer_host_pointer(out) == in_ptr);
    CHECK_EQ_INT(settled_bytes(), base + 4096);
  }
  // The donated buffer can no longer be read.
  iron_status_t st = test_read_buffer(in, y2, 4096);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_FAILED_PRECONDITION);
  iron_status_free(st);
  iron_buffer_release(in);
  // Donating a buffer that someone else shares (a copy) does not steal it.
  iron_buffer_t *in2 = buf_f32(1, d, x), *copy, *out2;
  CHECK_OK(iron_buffer_copy_to_device(in2, g_dev, &copy));
  CHECK_OK(iron_executable_execute(exe, &in2, 1, &donate, &out2, NULL));
  CHECK_OK(test_read_buffer(copy, y2, 4096));
  CHECK(y2[5] == 5);
  CHECK_OK(test_read_buffer(out2, y2, 4096));
  CHECK(y2[5] == 6);
  iron_buffer_release(in2);
  iron_buffer_release(copy);
  iron_buffer_release(out2);
  iron_buffer_release(out);
  CHECK_EQ_INT(settled_bytes(), base);
  free(x);
  free(y2);
  iron_executable_release(exe);
}

// Run-time errors reach the done event and every result.
static void test_run_error(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_err", 1);
  int64_t d4[1] = {4};
  const iron_ir_type_t *t = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d4);
  const iron_ir_type_t *outs[2] = {t, t};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, &t, 2, outs);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  iron_ir_value_t *x = &b->args[0];
  iron_ir_value_t *xx[2] = {x, x};
  iron_ir_value_t *s = iron_ir_builder_op1(m, f, b, IRON_OP_ADD, 2, xx, t);
  iron_ir_op_t *neg = iron_ir_builder_op(m, f, b, IRON_OP_NEGATE, 1, &s, 1, &t, 0);
  iron_ir_builder_set_loc(m, neg, "model.py", 42);
  iron_ir_value_t *r[2] = {s, &neg->results[0]};
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 2, r);
  iron_executable_t *exe = compile(m);
  if (!exe) return;
  int64_t base = settled_bytes();
  float v[4] = {-1, 2, 3, 4};
  iron_buffer_t *in = buf_f32(1, d4, v), *out[2];
  iron_event_t *done;
  CHECK_OK(iron_executable_execute(exe, &in, 1, NULL, out, &done));
  iron_status_t st = iron_event_wait(done);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INTERNAL);
  CHECK(strstr(iron_status_message(st), "negative input") &&
        strstr(iron_status_message(st), "stablehlo.negate (model.py:42)"));
  iron_status_free(st);
  iron_event_release(done);
  float y[4];
  for (int k = 0; k < 2; ++k) {
    st = test_read_buffer(out[k], y, 16);
    CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INTERNAL);
    iron_status_free(st);
    iron_buffer_release(out[k]);
  }
  iron_buffer_release(in);
  CHECK_EQ_INT(settled_bytes(), base);
  // Out of memory during a run: an error, and other buffers stay intact.
  in = buf_f32(1, d4, v);
  float w[4] = {5, 6, 7, 8};
  iron_buffer_t *keep = buf_f32(1, d4, w);
  int64_t limit_save = g_dev->memory_limit;
  g_dev->memory_limit = settled_bytes() + 16;
  CHECK_OK(iron_executable_execute(exe, &in, 1, NULL, out, &done));
  st = iron_event_wait(done);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_RESOURCE_EXHAUSTED);
  CHECK(strstr(iron_status_message(st), "16 bytes") != NULL);
  iron_status_free(st);
  iron_event_release(done);
  g_dev->memory_limit = limit_save;
  iron_buffer_release(out[0]);
  iron_buffer_release(out[1]);
  CHECK_OK(test_read_buffer(keep, y, 16));
  CHECK(y[3] == 8);
  iron_buffer_release(keep);
  iron_buffer_release(in);
  iron_executable_release(exe);
}

// A kernel region run through call_region, scalar and vector modes; plus
// constant and pass-through outputs, tokens and replica_id.
static void test_region_and_misc(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_reduce", 1);
  int64_t d[1] = {7};
  const iron_ir_type_t *tv = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d);
  const iron_ir_type_t *ts = iron_ir_builder_scalar_type(m, IRON_DTYPE_F32);
  const iron_ir_type_t *tu = iron_ir_builder_scalar_type(m, IRON_DTYPE_U32);
  const iron_ir_type_t *tk = iron_ir_builder_token_type(m);
  const iron_ir_type_t *outs[7] = {ts, ts, ts, tv, tu, tk, ts};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, &tv, 7, outs);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  float zero = 0, big = -1e30f, three = 3;
  iron_ir_value_t *init = iron_ir_builder_constant(m, f, b, ts, &zero, 4, false);
  iron_ir_value_t *init2 = iron_ir_builder_constant(m, f, b, ts, &big, 4, false);
  iron_ir_value_t *x = &b->args[0];
  iron_ir_value_t *results[3];
  for (int r = 0; r < 2; ++r) {
    iron_ir_value_t *ops[2] = {x, r == 0 ? init : init2};
    iron_ir_op_t *red = iron_ir_builder_op(m, f, b, IRON_OP_REDUCE, 2, ops, 1, &ts, 1);
    iron_ir_block_t *rb = iron_ir_builder_region_block(red, 0);
    iron_ir_value_t *p = iron_ir_builder_block_arg(m, f, rb, ts);
    iron_ir_value_t *q = iron_ir_builder_block_arg(m, f, rb, ts);
    iron_ir_value_t *pq[2] = {p, q};
    iron_ir_value_t *s = iron_ir_builder_op1(
        m, f, rb, r == 0 ? IRON_OP_ADD : IRON_OP_MAXIMUM, 2, pq, ts);
    iron_ir_builder_return(m, f, rb, IRON_OP_RETURN, 1, &s);
    results[r] = &red->results[0];
  }
  results[2] = iron_ir_builder_constant(m, f, b, ts, &three, 4, false);
  iron_ir_value_t *rid =
      &iron_ir_builder_op(m, f, b, IRON_OP_REPLICA_ID, 0, NULL, 1, &tu, 0)
           ->results[0];
  iron_ir_value_t *tok =
      &iron_ir_builder_op(m, f, b, IRON_OP_CREATE_TOKEN, 0, NULL, 1, &tk, 0)
           ->results[0];
  // A region that captures a value of the enclosing function (computed, not
  // a constant): body = max(max(p, q), 2 * 10), associative so that the
  // test kernel's vector mode folds it correctly too.
  float two = 2, ten = 10;
  iron_ir_value_t *c2 = iron_ir_builder_constant(m, f, b, ts, &two, 4, false);
  iron_ir_value_t *c10 = iron_ir_builder_constant(m, f, b, ts, &ten, 4, false);
  iron_ir_value_t *cc[2] = {c2, c10};
  iron_ir_value_t *twenty =
      iron_ir_builder_op1(m, f, b, IRON_OP_MULTIPLY, 2, cc, ts);
  iron_ir_value_t *rops[2] = {x, init};
  iron_ir_op_t *red = iron_ir_builder_op(m, f, b, IRON_OP_REDUCE, 2, rops, 1, &ts, 1);
  iron_ir_block_t *rb = iron_ir_builder_region_block(red, 0);
  iron_ir_value_t *p = iron_ir_builder_block_arg(m, f, rb, ts);
  iron_ir_value_t *q = iron_ir_builder_block_arg(m, f, rb, ts);
  iron_ir_value_t *pq[2] = {p, q};
  iron_ir_value_t *mx1 = iron_ir_builder_op1(m, f, rb, IRON_OP_MAXIMUM, 2, pq, ts);
  iron_ir_value_t *mt[2] = {mx1, twenty};
  iron_ir_value_t *mx2 = iron_ir_builder_op1(m, f, rb, IRON_OP_MAXIMUM, 2, mt, ts);
  iron_ir_builder_return(m, f, rb, IRON_OP_RETURN, 1, &mx2);
  iron_ir_value_t *ret[7] = {results[0], results[1], results[2], x,
                             rid,        tok,        &red->results[0]};
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 7, ret);
  iron_executable_t *exe = compile(m);
  if (!exe) return;
  int64_t base = settled_bytes();
  float v[7] = {1, 2, 3, 4, 5, 6, 10};
  iron_buffer_t *in = buf_f32(1, d, v), *out[7];
  CHECK_OK(iron_executable_execute(exe, &in, 1, NULL, out, NULL));
  float s = 0, mx = 0, c = 0, back[7];
  uint32_t id = 99;
  CHECK_OK(test_read_buffer(out[0], &s, 4));
  CHECK_OK(test_read_buffer(out[1], &mx, 4));
  CHECK_OK(test_read_buffer(out[2], &c, 4));
  CHECK_OK(test_read_buffer(out[3], back, 28));
  CHECK_OK(test_read_buffer(out[4], &id, 4));
  CHECK_OK(test_read_buffer(out[5], NULL, 0));
  CHECK(s == 31);
  CHECK(mx == 10);
  CHECK(c == 3);
  CHECK(memcmp(back, v, 28) == 0);
  CHECK_EQ_INT(id, 0);
  CHECK_EQ_INT(iron_buffer_dtype(out[5]), IRON_DTYPE_TOKEN);
  float s4 = 0;
  CHECK_OK(test_read_buffer(out[6], &s4, 4));
  CHECK(s4 == 20);
  for (int k = 0; k < 7; ++k) iron_buffer_release(out[k]);
  iron_buffer_release(in);
  CHECK_EQ_INT(settled_bytes(), base);
  iron_executable_release(exe);
}

// Liveness: a chain of 16 element-wise ops on 1 MiB tensors keeps only a
// couple of them alive at a time (and with in-place reuse, fewer).
static void test_liveness_peak(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_chain", 1);
  int64_t d[1] = {262144};
  const iron_ir_type_t *t = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d);
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, &t, 1, &t);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  float one = 1;
  iron_ir_value_t *c = iron_ir_builder_constant(m, f, b, t, &one, 4, true);
  iron_ir_value_t *v = &b->args[0];
  for (int i = 0; i < 16; ++i) {
    iron_ir_value_t *a[2] = {v, c};
    v = iron_ir_builder_op1(m, f, b, i % 2 ? IRON_OP_ADD : IRON_OP_SUBTRACT, 2,
                            a, t);
  }
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 1, &v);
  iron_executable_t *exe = compile(m);
  if (!exe) return;
  float *x = calloc(262144, 4);
  x[7] = 5;
  iron_buffer_t *in = buf_f32(1, d, x), *out;
  int64_t base = settled_bytes();
  atomic_store(&g_dev->peak_bytes_in_use, base);
  CHECK_OK(iron_executable_execute(exe, &in, 1, NULL, &out, NULL));
  CHECK_OK(test_read_buffer(out, x, 262144 * 4));
  CHECK(x[7] == 5 && x[0] == 0);
  int64_t peak = atomic_load(&g_dev->peak_bytes_in_use) - base;
  // Without liveness this would be 16 MiB; two live tensors is the most.
  CHECK(peak <= 2 * 1048576 + 4096);
  if (peak > 2 * 1048576 + 4096)
    fprintf(stderr, "liveness: peak %lld bytes\n", (long long)peak);
  iron_buffer_release(out);
  iron_buffer_release(in);
  CHECK_EQ_INT(settled_bytes(), base - 1048576);
  free(x);
  iron_executable_release(exe);
}

static void setup(void) {
  iron_plan_set_kernel_lookup_for_testing(test_lookup);
  CHECK_OK(iron_runtime_create(NULL, &g_rt));
  g_dev = iron_runtime_device(g_rt, 0);
}

static void teardown(void) {
  CHECK_EQ_INT(settled_bytes(), 0);
  iron_runtime_release(g_rt);
  iron_plan_set_kernel_lookup_for_testing(NULL);
}

static const iron_test_case_t kTests[] = {
    {"setup", setup},
    {"axpb", test_axpb},
    {"arg_errors", test_arg_errors},
    {"unsupported_op", test_unsupported_op},
    {"while_async", test_while_async},
    {"case_if_call", test_case_if_call},
    {"donation", test_donation},
    {"run_error", test_run_error},
    {"region_and_misc", test_region_and_misc},
    {"liveness_peak", test_liveness_peak},
    {"teardown", teardown},
};
IRON_TEST_MAIN(kTests)
