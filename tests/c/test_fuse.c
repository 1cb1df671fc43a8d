// The element-wise fusion pass (src/compiler/fuse.c) on IR built by hand:
// which ops are grouped, what each fusion takes and returns, that uses
// outside a group stop it from growing, that fusion happens inside loop
// bodies, and that the rewritten module still plans and runs on the host.
#include "compiler/fuse.h"
#include "compiler/plan.h"
#include "device/host/host_kernel.h"
#include "ir/builder.h"
#include "test.h"

// Everything element-wise except subtract (the "device" cannot fuse it).
static bool fusable_no_sub(const iron_ir_op_t *op) {
  return op->kind != IRON_OP_SUBTRACT && iron_host_fusable_for_testing(op);
}

static int count_kind(const iron_ir_block_t *b, iron_op_kind_t k) {
  int n = 0;
  for (uint32_t i = 0; i < b->num_ops; ++i) n += b->ops[i]->kind == k;
  return n;
}

// main(x, y): a = x*y; b = a+x; d = a-y (not fusable: closes {a,b});
// c = -b; e = c*c; return e, d, b.
static void test_groups_and_outputs(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("m", 1);
  int64_t dims[1] = {4};
  const iron_ir_type_t *t = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, dims);
  const iron_ir_type_t *ins[2] = {t, t};
  const iron_ir_type_t *outs[3] = {t, t, t};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 2, ins, 3, outs);
  iron_ir_block_t *blk = iron_ir_builder_func_block(f);
  iron_ir_value_t *x = &blk->args[0], *y = &blk->args[1];
  iron_ir_value_t *xy[2] = {x, y};
  iron_ir_value_t *a = iron_ir_builder_op1(m, f, blk, IRON_OP_MULTIPLY, 2, xy, t);
  iron_ir_value_t *ax[2] = {a, x};
  iron_ir_value_t *b = iron_ir_builder_op1(m, f, blk, IRON_OP_ADD, 2, ax, t);
  iron_ir_value_t *ay[2] = {a, y};
  iron_ir_value_t *d = iron_ir_builder_op1(m, f, blk, IRON_OP_SUBTRACT, 2, ay, t);
  iron_ir_value_t *c = iron_ir_builder_op1(m, f, blk, IRON_OP_NEGATE, 1, &b, t);
  iron_ir_value_t *cc[2] = {c, c};
  iron_ir_value_t *e = iron_ir_builder_op1(m, f, blk, IRON_OP_MULTIPLY, 2, cc, t);
  iron_ir_value_t *res[3] = {e, d, b};
  iron_ir_builder_return(m, f, blk, IRON_OP_FUNC_RETURN, 3, res);

  int n = -1;
  CHECK_OK(iron_compiler_fuse(m, fusable_no_sub, &n));
  CHECK(n == 2);
  // fusion{a,b} ; d ; fusion{c,e} ; return
  CHECK(blk->num_ops == 4);
  CHECK(count_kind(blk, IRON_OP_FUSION) == 2);
  const iron_ir_op_t *f1 = blk->ops[0], *sub = blk->ops[1], *f2 = blk->ops[2];
  const iron_ir_op_t *ret = blk->ops[3];
  CHECK(f1->kind == IRON_OP_FUSION && sub->kind == IRON_OP_SUBTRACT &&
        f2->kind == IRON_OP_FUSION && ret->kind == IRON_OP_FUNC_RETURN);
  // {a, b}: inputs x, y; outputs a (used by d) and b (returned, negated).
  CHECK(f1->num_operands == 2 && f1->num_results == 2);
  CHECK(f1->regions[0].blocks[0].num_ops == 3);  // mul, add, return
  CHECK(sub->operands[0] == &f1->results[0]);
  // {c, e}: input b (fusion 1's second result), output e.
  CHECK(f2->num_operands == 1 && f2->operands[0] == &f1->results[1]);
  CHECK(f2->num_results == 1);
  CHECK(ret->operands[0] == &f2->results[0]);
  CHECK(ret->operands[1] == &sub->results[0]);
  CHECK(ret->operands[2] == &f1->results[1]);
  // Value ids stay unique and below num_values.
  CHECK(f2->results[0].id < f->num_values);
  CHECK(f1->regions[0].blocks[0].args[0].id < f->num_values);
  // The rewritten module plans (the host has a fusion kernel).
  iron_plan_t *plan = NULL;
  CHECK_OK(iron_plan_create(m, &plan));
  iron_plan_destroy(plan);
  iron_ir_module_destroy(m);
}

// A single element-wise op is not worth a kernel; nothing changes.
static void test_single_op_untouched(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("m", 1);
  int64_t dims[1] = {4};
  const iron_ir_type_t *t = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, dims);
  const iron_ir_type_t *ins[1] = {t};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, ins, 1, ins);
  iron_ir_block_t *blk = iron_ir_builder_func_block(f);
  iron_ir_value_t *x = &blk->args[0];
  iron_ir_value_t *y = iron_ir_builder_op1(m, f, blk, IRON_OP_NEGATE, 1, &x, t);
  iron_ir_builder_return(m, f, blk, IRON_OP_FUNC_RETURN, 1, &y);
  int n = -1;
  CHECK_OK(iron_compiler_fuse(m, fusable_no_sub, &n));
  CHECK(n == 0 && blk->num_ops == 2);
  iron_ir_module_destroy(m);
}

// Element-wise ops plus reduces (the CUDA device's predicate shape).
static bool fusable_with_reduce(const iron_ir_op_t *op) {
  return op->kind == IRON_OP_REDUCE || iron_host_fusable_for_testing(op);
}

// sum over dim 1 of `v` (f32[2,4] -> f32[2]) with init `zero`.
static iron_ir_op_t *add_reduce(iron_ir_module_t *m, iron_ir_func_t *f,
                                iron_ir_block_t *blk, iron_ir_value_t *v,
                                iron_ir_value_t *zero,
                                const iron_ir_type_t *out) {
  iron_ir_value_t *ops[2] = {v, zero};
  iron_ir_op_t *r =
      iron_ir_builder_op(m, f, blk, IRON_OP_REDUCE, 2, ops, 1, &out, 1);
  int64_t dim = 1;
  iron_ir_builder_attr(m, r, "dimensions", iron_ir_builder_attr_i64s(m, 1, &dim));
  iron_ir_block_t *body = iron_ir_builder_region_block(r, 0);
  const iron_ir_type_t *s = iron_ir_builder_scalar_type(m, IRON_DTYPE_F32);
  iron_ir_value_t *ab[2] = {iron_ir_builder_block_arg(m, f, body, s),
                            iron_ir_builder_block_arg(m, f, body, s)};
  iron_ir_value_t *sum = iron_ir_builder_op1(m, f, body, IRON_OP_ADD, 2, ab, s);
  iron_ir_builder_return(m, f, body, IRON_OP_RETURN, 1, &sum);
  return r;
}

// main(x, z): e = exp(x); y = e * x; s = reduce(y, z) -> one fusion ending
// in the reduce, with inputs x, z and the reduce's result as its output.
// When e is also returned, the reduce stays out: fusion{e, y} ; reduce.
static void test_reduce_joins(void) {
  for (int escape = 0; escape < 2; ++escape) {
    iron_ir_module_t *m = iron_ir_builder_module_create("m", 1);
    int64_t dims[2] = {2, 4};
    const iron_ir_type_t *t =
        iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 2, dims);
    const iron_ir_type_t *o =
        iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, dims);
    const iron_ir_type_t *sc = iron_ir_builder_scalar_type(m, IRON_DTYPE_F32);
    const iron_ir_type_t *ins[2] = {t, sc};
    const iron_ir_type_t *outs[2] = {o, t};
    iron_ir_func_t *f =
        iron_ir_builder_func(m, "main", true, 2, ins, escape ? 2 : 1, outs);
    iron_ir_block_t *blk = iron_ir_builder_func_block(f);
    iron_ir_value_t *x = &blk->args[0], *z = &blk->args[1];
    iron_ir_value_t *e = iron_ir_builder_op1(m, f, blk, IRON_OP_EXPONENTIAL, 1,
                                             &x, t);
    iron_ir_value_t *ex[2] = {e, x};
    iron_ir_value_t *y =
        iron_ir_builder_op1(m, f, blk, IRON_OP_MULTIPLY, 2, ex, t);
    iron_ir_op_t *r = add_reduce(m, f, blk, y, z, o);
    iron_ir_value_t *res[2] = {&r->results[0], e};
    iron_ir_builder_return(m, f, blk, IRON_OP_FUNC_RETURN, escape ? 2 : 1,
                           res);
    int n = -1;
    CHECK_OK(iron_compiler_fuse(m, fusable_with_reduce, &n));
    CHECK(n == 1);
    const iron_ir_op_t *fop = blk->ops[0];
    CHECK(fop->kind == IRON_OP_FUSION);
    const iron_ir_block_t *fb = &fop->regions[0].blocks[0];
    if (!escape) {
      // fusion{exp, mul, reduce} ; return
      CHECK(blk->num_ops == 2);
      CHECK(fb->num_ops == 4 && fb->ops[2] == r);
      CHECK(fop->num_operands == 2 && fop->operands[0] == x &&
            fop->operands[1] == z);
      CHECK(fop->num_results == 1 && fop->results[0].type == o);
      CHECK(blk->ops[1]->operands[0] == &fop->results[0]);
      CHECK(r->operands[1] == &fb->args[1]);  // init: a block argument
    } else {
      // fusion{exp, mul} (outputs e, y) ; reduce ; return
      CHECK(blk->num_ops == 3);
      CHECK(fb->num_ops == 3 && blk->ops[1] == r);
      CHECK(fop->num_results == 2);
      CHECK(r->operands[0] == &fop->results[1]);
    }
    iron_plan_t *plan = NULL;
    if (escape) {
      CHECK_OK(iron_plan_create(m, &plan));
      iron_plan_destroy(plan);
    }
    iron_ir_module_destroy(m);
  }
}

// A two-operand reduce (argmax-like: values and indices) fed by two
// groups of the same shape merges them; the fusion returns both of the
// reduce's results, in order, even the unused one; the inits stay outside.
static void test_variadic_reduce_merges_groups(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("m", 1);
  int64_t dims[2] = {2, 4};
  const iron_ir_type_t *t = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 2, dims);
  const iron_ir_type_t *o = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, dims);
  const iron_ir_type_t *sc = iron_ir_builder_scalar_type(m, IRON_DTYPE_F32);
  const iron_ir_type_t *ins[4] = {t, t, sc, sc};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 4, ins, 1, &o);
  iron_ir_block_t *blk = iron_ir_builder_func_block(f);
  iron_ir_value_t *x = &blk->args[0], *y = &blk->args[1];
  iron_ir_value_t *z0 = &blk->args[2], *z1 = &blk->args[3];
  // group 1: a = -x, b = a*a; group 2: c = exp(y), d = c+c
  iron_ir_value_t *a = iron_ir_builder_op1(m, f, blk, IRON_OP_NEGATE, 1, &x, t);
  iron_ir_value_t *aa[2] = {a, a};
  iron_ir_value_t *b = iron_ir_builder_op1(m, f, blk, IRON_OP_MULTIPLY, 2, aa, t);
  iron_ir_value_t *c = iron_ir_builder_op1(m, f, blk, IRON_OP_EXPONENTIAL, 1, &y, t);
  iron_ir_value_t *cc[2] = {c, c};
  iron_ir_value_t *d = iron_ir_builder_op1(m, f, blk, IRON_OP_ADD, 2, cc, t);
  iron_ir_value_t *ops[4] = {b, d, z0, z1};
  const iron_ir_type_t *outs[2] = {o, o};
  iron_ir_op_t *r =
      iron_ir_builder_op(m, f, blk, IRON_OP_REDUCE, 4, ops, 2, outs, 1);
  int64_t dim = 1;
  iron_ir_builder_attr(m, r, "dimensions", iron_ir_builder_attr_i64s(m, 1, &dim));
  iron_ir_block_t *body = iron_ir_builder_region_block(r, 0);
  iron_ir_value_t *args[4];
  for (int i = 0; i < 4; ++i) args[i] = iron_ir_builder_block_arg(m, f, body, sc);
  iron_ir_value_t *s0p[2] = {args[0], args[2]}, *s1p[2] = {args[1], args[3]};
  iron_ir_value_t *rs[2] = {
      iron_ir_builder_op1(m, f, body, IRON_OP_ADD, 2, s0p, sc),
      iron_ir_builder_op1(m, f, body, IRON_OP_MAXIMUM, 2, s1p, sc)};
  iron_ir_builder_return(m, f, body, IRON_OP_RETURN, 2, rs);
  iron_ir_value_t *res = &r->results[1];  // result 0 unused
  iron_ir_builder_return(m, f, blk, IRON_OP_FUNC_RETURN, 1, &res);
  int n = -1;
  CHECK_OK(iron_compiler_fuse(m, fusable_with_reduce, &n));
  CHECK(n == 1);
  CHECK(blk->num_ops == 2);
  const iron_ir_op_t *fop = blk->ops[0];
  CHECK(fop->kind == IRON_OP_FUSION);
  const iron_ir_block_t *fb = &fop->regions[0].blocks[0];
  CHECK(fb->num_ops == 6 && fb->ops[4] == r);  // 4 ew + reduce + return
  CHECK(fop->num_operands == 4);                // x, y, z0, z1
  CHECK(fop->num_results == 2);
  CHECK(fb->ops[5]->operands[0] == &r->results[0] &&
        fb->ops[5]->operands[1] == &r->results[1]);
  CHECK(blk->ops[1]->operands[0] == &fop->results[1]);
  iron_ir_module_destroy(m);
}

// A reduce whose init comes from the group feeding it stays apart.
static void test_reduce_with_init_from_group_stays_apart(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("m", 1);
  const iron_ir_type_t *sc = iron_ir_builder_scalar_type(m, IRON_DTYPE_F32);
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 1, &sc, 1, &sc);
  iron_ir_block_t *blk = iron_ir_builder_func_block(f);
  iron_ir_value_t *x = &blk->args[0];
  // rank-0 group {e = exp(x), g = e*e}; reduce(g, init e) over no dims
  iron_ir_value_t *e = iron_ir_builder_op1(m, f, blk, IRON_OP_EXPONENTIAL, 1, &x, sc);
  iron_ir_value_t *ee[2] = {e, e};
  iron_ir_value_t *g = iron_ir_builder_op1(m, f, blk, IRON_OP_MULTIPLY, 2, ee, sc);
  iron_ir_value_t *ops[2] = {g, e};
  iron_ir_op_t *r = iron_ir_builder_op(m, f, blk, IRON_OP_REDUCE, 2, ops, 1, &sc, 1);
  iron_ir_builder_attr(m, r, "dimensions", iron_ir_builder_attr_i64s(m, 0, NULL));
  iron_ir_block_t *body = iron_ir_builder_region_block(r, 0);
  iron_ir_value_t *ab[2] = {iron_ir_builder_block_arg(m, f, body, sc),
                            iron_ir_builder_block_arg(m, f, body, sc)};
  iron_ir_value_t *sum = iron_ir_builder_op1(m, f, body, IRON_OP_ADD, 2, ab, sc);
  iron_ir_builder_return(m, f, body, IRON_OP_RETURN, 1, &sum);
  iron_ir_value_t *res = &r->results[0];
  iron_ir_builder_return(m, f, blk, IRON_OP_FUNC_RETURN, 1, &res);
  int n = -1;
  CHECK_OK(iron_compiler_fuse(m, fusable_with_reduce, &n));
  CHECK(n == 1);
  // fusion{exp, mul} ; reduce ; return
  CHECK(blk->num_ops == 3 && blk->ops[0]->kind == IRON_OP_FUSION &&
        blk->ops[1] == r);
  iron_ir_module_destroy(m);
}

// main(x0..x399): t = x0 + x1 + ... + x399; return x0 * t, ..., x399 * t.
// One group would take 400 inputs and return 400 values: more than one
// kernel's parameters (IRON_FUSE_MAX_OPERANDS), so it is split, and every
// fusion stays within the bound.
static void test_operand_budget(void) {
  enum { N = 400 };
  iron_ir_module_t *m = iron_ir_builder_module_create("m", 1);
  int64_t dims[1] = {4};
  const iron_ir_type_t *t = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, dims);
  static const iron_ir_type_t *ins[N], *outs[N];
  for (int i = 0; i < N; ++i) ins[i] = outs[i] = t;
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, N, ins, N, outs);
  iron_ir_block_t *blk = iron_ir_builder_func_block(f);
  iron_ir_value_t *sum = &blk->args[0];
  for (int i = 1; i < N; ++i) {
    iron_ir_value_t *in[2] = {sum, &blk->args[i]};
    sum = iron_ir_builder_op1(m, f, blk, IRON_OP_ADD, 2, in, t);
  }
  static iron_ir_value_t *res[N];
  for (int i = 0; i < N; ++i) {
    iron_ir_value_t *in[2] = {&blk->args[i], sum};
    res[i] = iron_ir_builder_op1(m, f, blk, IRON_OP_MULTIPLY, 2, in, t);
  }
  iron_ir_builder_return(m, f, blk, IRON_OP_FUNC_RETURN, N, res);
  int n = -1;
  CHECK_OK(iron_compiler_fuse(m, iron_host_fusable_for_testing, &n));
  CHECK(n >= 2);
  uint32_t fused_ops = 0, largest = 0;
  for (uint32_t i = 0; i < blk->num_ops; ++i) {
    const iron_ir_op_t *op = blk->ops[i];
    if (op->kind != IRON_OP_FUSION) continue;
    uint32_t io = op->num_operands + op->num_results;
    CHECK(io <= IRON_FUSE_MAX_OPERANDS);
    if (io > largest) largest = io;
    fused_ops += op->regions[0].blocks[0].num_ops - 1;
  }
  CHECK(largest > 64);  // larger than the old limit of CUDA kernels
  CHECK(fused_ops > N);  // most of the 799 ops are still fused
  iron_plan_t *plan = NULL;
  CHECK_OK(iron_plan_create(m, &plan));
  iron_plan_destroy(plan);
  iron_ir_module_destroy(m);
}

static const iron_test_case_t kTests[] = {
    {"operand_budget", test_operand_budget},
    {"variadic_reduce_merges_groups", test_variadic_reduce_merges_groups},
    {"reduce_init_from_group", test_reduce_with_init_from_group_stays_apart},
    {"reduce_joins", test_reduce_joins},
    {"groups_and_outputs", test_groups_and_outputs},
    {"single_op_untouched", test_single_op_untouched},
};
IRON_TEST_MAIN(kTests)
