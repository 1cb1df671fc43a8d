// Programs past the sizes one CUDA kernel's parameters hold, GPU-free:
// concatenates of 1 to 600 operands (64 per kernel; empty operands among
// them), element-wise groups over up to 600 inputs returning as many
// values (a scan of many carries: fuse.c splits them to fit 512 kernel
// parameters), more dynamic_update_slice roots than one fusion takes, and
// StableHLO's scalar operands of select and clamp inside fusions. Each is
// built with the IR builder and run on the host and as the CUDA device
// plans it (cuda_emu_exec.h), bit for bit.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu_exec.h"
#include "ir/builder.h"
#include "test.h"

typedef struct mb {
  iron_ir_module_t *m;
  iron_ir_func_t *f;
  iron_ir_block_t *b;
} mb_t;

static iron_ir_value_t *op2(mb_t *p, iron_op_kind_t k, iron_ir_value_t *a,
                            iron_ir_value_t *b) {
  iron_ir_value_t *in[2] = {a, b};
  return iron_ir_builder_op1(p->m, p->f, p->b, k, 2, in, a->type);
}

// concat(x0, ..., x{n-1}) along `dim` of rank-2 operands whose size along
// dim cycles 2, 0, 1, 3 (the other dim is 3).
static iron_ir_module_t *build_concat(int n, int dim, iron_dtype_t dt) {
  mb_t p = {iron_ir_builder_module_create("concat", 1), NULL, NULL};
  const iron_ir_type_t **ins = calloc((size_t)n, sizeof(*ins));
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    static const int64_t kSizes[4] = {2, 0, 1, 3};
    int64_t d[2] = {3, 3};
    d[dim] = kSizes[i % 4];
    total += d[dim];
    ins[i] = iron_ir_builder_tensor_type(p.m, dt, 2, d);
  }
  int64_t od[2] = {3, 3};
  od[dim] = total;
  const iron_ir_type_t *tout = iron_ir_builder_tensor_type(p.m, dt, 2, od);
  p.f = iron_ir_builder_func(p.m, "main", true, (uint32_t)n, ins, 1, &tout);
  p.b = iron_ir_builder_func_block(p.f);
  iron_ir_value_t **args = calloc((size_t)n, sizeof(*args));
  for (int i = 0; i < n; ++i) args[i] = &p.b->args[i];
  iron_ir_op_t *c = iron_ir_builder_op(p.m, p.f, p.b, IRON_OP_CONCATENATE,
                                       (uint32_t)n, args, 1, &tout, 0);
  iron_ir_builder_attr(p.m, c, "dimension", iron_ir_builder_attr_int(p.m, dim));
  iron_ir_value_t *r = &c->results[0];
  iron_ir_builder_return(p.m, p.f, p.b, IRON_OP_FUNC_RETURN, 1, &r);
  free(ins);
  free(args);
  return p.m;
}

// t = x0 + ... + x{n-1}; return x_i * t + x_i for every i (a scan body
// updating n carries from their sum).
static iron_ir_module_t *build_carries(int n) {
  mb_t p = {iron_ir_builder_module_create("carries", 1), NULL, NULL};
  int64_t d[1] = {5};
  const iron_ir_type_t *t = iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 1, d);
  const iron_ir_type_t **ts = calloc((size_t)n, sizeof(*ts));
  for (int i = 0; i < n; ++i) ts[i] = t;
  p.f = iron_ir_builder_func(p.m, "main", true, (uint32_t)n, ts, (uint32_t)n, ts);
  p.b = iron_ir_builder_func_block(p.f);
  iron_ir_value_t *sum = &p.b->args[0];
  for (int i = 1; i < n; ++i) sum = op2(&p, IRON_OP_ADD, sum, &p.b->args[i]);
  iron_ir_value_t **res = calloc((size_t)n, sizeof(*res));
  for (int i = 0; i < n; ++i)
    res[i] = op2(&p, IRON_OP_ADD, op2(&p, IRON_OP_MULTIPLY, &p.b->args[i], sum),
                 &p.b->args[i]);
  iron_ir_builder_return(p.m, p.f, p.b, IRON_OP_FUNC_RETURN, (uint32_t)n, res);
  free(ts);
  free(res);
  return p.m;
}

// u = a * b; return dus(x_i, u + c_i, (s_i)) for i < n: more roots than one
// fusion takes (16) when n > 16.
static iron_ir_module_t *build_roots(int n) {
  mb_t p = {iron_ir_builder_module_create("roots", 1), NULL, NULL};
  int64_t dx[1] = {9}, du[1] = {4};
  const iron_ir_type_t *tx = iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 1, dx);
  const iron_ir_type_t *tu = iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 1, du);
  const iron_ir_type_t *ti = iron_ir_builder_scalar_type(p.m, IRON_DTYPE_S32);
  uint32_t ni = 2 + 2 * (uint32_t)n;
  const iron_ir_type_t **ins = calloc(ni + (uint32_t)n, sizeof(*ins));
  const iron_ir_type_t **outs = calloc((size_t)n, sizeof(*outs));
  ins[0] = ins[1] = tu;
  for (int i = 0; i < n; ++i) {
    ins[2 + i] = tx;
    ins[2 + n + i] = ti;
    outs[i] = tx;
  }
  p.f = iron_ir_builder_func(p.m, "main", true, ni, ins, (uint32_t)n, outs);
  p.b = iron_ir_builder_func_block(p.f);
  iron_ir_value_t *u = op2(&p, IRON_OP_MULTIPLY, &p.b->args[0], &p.b->args[1]);
  iron_ir_value_t **res = calloc((size_t)n, sizeof(*res));
  for (int i = 0; i < n; ++i) {
    iron_ir_value_t *v = op2(&p, IRON_OP_ADD, u, i % 2 ? &p.b->args[0] : u);
    iron_ir_value_t *in[3] = {&p.b->args[2 + i], v, &p.b->args[2 + n + i]};
    res[i] = iron_ir_builder_op1(p.m, p.f, p.b, IRON_OP_DYNAMIC_UPDATE_SLICE,
                                 3, in, tx);
  }
  iron_ir_builder_return(p.m, p.f, p.b, IRON_OP_FUNC_RETURN, (uint32_t)n, res);
  free(ins);
  free(outs);
  free(res);
  return p.m;
}

// select and clamp with scalar operands (StableHLO allows a scalar
// predicate, and scalar bounds): select(p, x + y, x * y),
// clamp(lo, x - y, hi), for dtype dt.
static iron_ir_module_t *build_scalar_operands(iron_dtype_t dt) {
  mb_t p = {iron_ir_builder_module_create("scalars", 1), NULL, NULL};
  int64_t d[2] = {5, 3};
  const iron_ir_type_t *t = iron_ir_builder_tensor_type(p.m, dt, 2, d);
  const iron_ir_type_t *ts = iron_ir_builder_scalar_type(p.m, dt);
  const iron_ir_type_t *tp = iron_ir_builder_scalar_type(p.m, IRON_DTYPE_PRED);
  const iron_ir_type_t *ins[5] = {t, t, tp, ts, ts};
  const iron_ir_type_t *outs[2] = {t, t};
  p.f = iron_ir_builder_func(p.m, "main", true, 5, ins, 2, outs);
  p.b = iron_ir_builder_func_block(p.f);
  iron_ir_value_t *x = &p.b->args[0], *y = &p.b->args[1];
  iron_ir_value_t *sin[3] = {&p.b->args[2], op2(&p, IRON_OP_ADD, x, y),
                             op2(&p, IRON_OP_MULTIPLY, x, y)};
  iron_ir_value_t *sel =
      iron_ir_builder_op1(p.m, p.f, p.b, IRON_OP_SELECT, 3, sin, t);
  iron_ir_value_t *cin[3] = {&p.b->args[3], op2(&p, IRON_OP_SUBTRACT, x, y),
                             &p.b->args[4]};
  iron_ir_value_t *cl =
      iron_ir_builder_op1(p.m, p.f, p.b, IRON_OP_CLAMP, 3, cin, t);
  iron_ir_value_t *res[2] = {sel, cl};
  iron_ir_builder_return(p.m, p.f, p.b, IRON_OP_FUNC_RETURN, 2, res);
  return p.m;
}

static void add(cuda_emu_batch_t *b, iron_ir_module_t *m1,
                iron_ir_module_t *m2, const char *what) {
  iron_status_t st = cuda_emu_batch_add(b, m1, m2, what);
  if (st) fprintf(stderr, "%s: CUDA: %s\n", what, iron_status_message(st));
  CHECK(st == IRON_OK);
  iron_status_free(st);
}

static void test_many_operands(void) {
  cuda_emu_batch_t b;
  bool ok = cuda_emu_batch_init(&b);
  CHECK(ok);
  if (!ok) return;
  char what[96];
  static const int kConcat[] = {1, 2, 63, 64, 65, 129, 600};
  for (size_t i = 0; i < sizeof(kConcat) / sizeof(kConcat[0]); ++i)
    for (int dim = 0; dim < 2; ++dim)
      for (int d = 0; d < 2; ++d) {
        iron_dtype_t dt = d ? IRON_DTYPE_U8 : IRON_DTYPE_F32;
        snprintf(what, sizeof(what), "concatenate of %d %s along %d",
                 kConcat[i], iron_dtype_name(dt), dim);
        add(&b, build_concat(kConcat[i], dim, dt),
            build_concat(kConcat[i], dim, dt), what);
      }
  static const int kCarries[] = {40, 100, 300, 600};
  for (size_t i = 0; i < sizeof(kCarries) / sizeof(kCarries[0]); ++i) {
    snprintf(what, sizeof(what), "%d carries", kCarries[i]);
    add(&b, build_carries(kCarries[i]), build_carries(kCarries[i]), what);
  }
  static const int kRoots[] = {3, 16, 17, 40};
  for (size_t i = 0; i < sizeof(kRoots) / sizeof(kRoots[0]); ++i) {
    snprintf(what, sizeof(what), "%d dynamic_update_slice roots", kRoots[i]);
    add(&b, build_roots(kRoots[i]), build_roots(kRoots[i]), what);
  }
  static const iron_dtype_t kScalarDt[] = {IRON_DTYPE_F32, IRON_DTYPE_S32,
                                           IRON_DTYPE_U8, IRON_DTYPE_BF16,
                                           IRON_DTYPE_F64};
  for (size_t i = 0; i < sizeof(kScalarDt) / sizeof(kScalarDt[0]); ++i) {
    snprintf(what, sizeof(what), "select/clamp with scalar operands, %s",
             iron_dtype_name(kScalarDt[i]));
    add(&b, build_scalar_operands(kScalarDt[i]),
        build_scalar_operands(kScalarDt[i]), what);
  }
  CHECK(cuda_emu_batch_run(&b, 3));
  fprintf(stderr,
          "many operands: %zu programs (%d refused by the host), %d runs, %d "
          "differ, %d failed; %zu kernels, %lld launches (%lld fused, up to %u "
          "parameters)\n",
          b.num, b.host_refused, b.runs, b.differ, b.failed, g_cuda_emu.num_k,
          (long long)g_cuda_emu.launches, (long long)g_cuda_emu.fused_launches,
          g_cuda_emu.max_fused_params);
  CHECK_EQ_INT(b.host_refused, 0);
  CHECK_EQ_INT(b.differ, 0);
  CHECK_EQ_INT(b.failed, 0);
  CHECK(b.runs > 0);
  // Fusions past the old limit of 64 pointers ran, none past 512.
  CHECK(g_cuda_emu.max_fused_params > 64);
  CHECK(g_cuda_emu.max_fused_params <= IRON_CUDA_MAX_KERNEL_PARAMS);
  cuda_emu_batch_destroy(&b);
}

static const iron_test_case_t kTests[] = {
    {"many_operands", test_many_operands},
};
IRON_TEST_MAIN(kTests)
