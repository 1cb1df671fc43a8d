// CUDA fusions with indexed loads (slice, transpose, dynamic_slice) and a
// dynamic_update_slice root, GPU-free: a function is built with the IR
// builder, fused with the CUDA device's predicate (src/compiler/fuse.c), the
// fusion's kernel generated (cuda_fusion.c) and run on the CPU through
// cuda_emu.h, then compared with the values computed here. The output that
// the update writes into starts as the operand, as iron_cuda_ew_run leaves
// it.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/fuse.h"
#include "cuda_emu_exec.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_fusion.h"
#include "ir/builder.h"
#include "test.h"

typedef void (*k_t)(void *, void *, void *, void *, void *, void *, void *,
                    void *, void *, void *);

enum { ARG_X, ARG_Y, ARG_D, ARG_Z, ARG_I, ARG_J, NUM_ARGS };

typedef struct {
  iron_ir_module_t *m;
  iron_ir_op_t *fusion;
  char *src, *name;
} built_t;

// main(X[4,3,4], Y[4,3,2], D[5,3,4], Z[6,3,4], i, j):
//   e = slice(X)[1:3] + transpose(Y, 2,1,0) * dynamic_slice(D, i)[2]
//   return e, dynamic_update_slice(Z, e + e, (j, 0, 0))
static bool build(built_t *out) {
  memset(out, 0, sizeof(*out));
  iron_ir_module_t *m = iron_ir_builder_module_create("fusion_emu", 1);
  out->m = m;
  int64_t dx[3] = {4, 3, 4}, dy[3] = {4, 3, 2}, dd[3] = {5, 3, 4},
          dz[3] = {6, 3, 4}, dg[3] = {2, 3, 4};
  const iron_ir_type_t *tx =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 3, dx);
  const iron_ir_type_t *ty =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 3, dy);
  const iron_ir_type_t *td =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 3, dd);
  const iron_ir_type_t *tz =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 3, dz);
  const iron_ir_type_t *tg =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 3, dg);
  const iron_ir_type_t *ti = iron_ir_builder_scalar_type(m, IRON_DTYPE_S32);
  const iron_ir_type_t *ins[NUM_ARGS] = {tx, ty, td, tz, ti, ti};
  const iron_ir_type_t *outs[2] = {tg, tz};
  iron_ir_func_t *f =
      iron_ir_builder_func(m, "main", true, NUM_ARGS, ins, 2, outs);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  iron_ir_value_t *X = &b->args[ARG_X], *Y = &b->args[ARG_Y],
                  *D = &b->args[ARG_D], *Z = &b->args[ARG_Z],
                  *I = &b->args[ARG_I], *J = &b->args[ARG_J];
  iron_ir_op_t *sl =
      iron_ir_builder_op(m, f, b, IRON_OP_SLICE, 1, &X, 1, &tg, 0);
  int64_t s0[3] = {1, 0, 0}, s1[3] = {3, 3, 4}, s2[3] = {1, 1, 1};
  iron_ir_builder_attr(m, sl, "start_indices",
                       iron_ir_builder_attr_i64s(m, 3, s0));
  iron_ir_builder_attr(m, sl, "limit_indices",
                       iron_ir_builder_attr_i64s(m, 3, s1));
  iron_ir_builder_attr(m, sl, "strides", iron_ir_builder_attr_i64s(m, 3, s2));
  iron_ir_op_t *tr =
      iron_ir_builder_op(m, f, b, IRON_OP_TRANSPOSE, 1, &Y, 1, &tg, 0);
  int64_t perm[3] = {2, 1, 0};
  iron_ir_builder_attr(m, tr, "permutation",
                       iron_ir_builder_attr_i64s(m, 3, perm));
  iron_ir_value_t *z0 = NULL;
  {
    int32_t zero = 0;
    z0 = iron_ir_builder_constant(m, f, b, ti, &zero, 4, false);
  }
  iron_ir_value_t *dsin[4] = {D, I, z0, z0};
  iron_ir_op_t *ds =
      iron_ir_builder_op(m, f, b, IRON_OP_DYNAMIC_SLICE, 4, dsin, 1, &tg, 0);
  iron_ir_builder_attr(m, ds, "slice_sizes",
                       iron_ir_builder_attr_i64s(m, 3, dg));
  iron_ir_value_t *mul_in[2] = {&tr->results[0], &ds->results[0]};
  iron_ir_value_t *mul =
      iron_ir_builder_op1(m, f, b, IRON_OP_MULTIPLY, 2, mul_in, tg);
  iron_ir_value_t *add_in[2] = {&sl->results[0], mul};
  iron_ir_value_t *e = iron_ir_builder_op1(m, f, b, IRON_OP_ADD, 2, add_in, tg);
  iron_ir_value_t *ee_in[2] = {e, e};
  iron_ir_value_t *ee = iron_ir_builder_op1(m, f, b, IRON_OP_ADD, 2, ee_in, tg);
  iron_ir_value_t *dus_in[5] = {Z, ee, J, z0, z0};
  iron_ir_op_t *dus = iron_ir_builder_op(m, f, b, IRON_OP_DYNAMIC_UPDATE_SLICE,
                                         5, dus_in, 1, &tz, 0);
  iron_ir_value_t *rets[2] = {e, &dus->results[0]};
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 2, rets);

  int n = 0;
  CHECK_OK(iron_compiler_fuse(m, iron_cuda_fusable, &n));
  CHECK_EQ_INT(n, 1);
  for (uint32_t k = 0; k < b->num_ops; ++k)
    if (b->ops[k]->kind == IRON_OP_FUSION) out->fusion = b->ops[k];
  CHECK(out->fusion != NULL);
  if (!out->fusion) return false;
  // Every op but the constant is inside: slice, transpose, dynamic_slice,
  // the arithmetic and the update root.
  const iron_ir_block_t *fb = &out->fusion->regions[0].blocks[0];
  int kinds = 0;
  for (uint32_t k = 0; k < fb->num_ops; ++k) {
    iron_op_kind_t kk = fb->ops[k]->kind;
    kinds += kk == IRON_OP_SLICE || kk == IRON_OP_TRANSPOSE ||
             kk == IRON_OP_DYNAMIC_SLICE || kk == IRON_OP_DYNAMIC_UPDATE_SLICE;
  }
  CHECK_EQ_INT(kinds, 4);
  CHECK_EQ_INT(out->fusion->num_results, 2);
  const iron_ir_op_t *term = fb->ops[fb->num_ops - 1];
  const iron_ir_value_t *inputs[16];
  for (uint32_t k = 0; k < fb->num_args && k < 16; ++k)
    inputs[k] = &fb->args[k];
  iron_cuda_fusion_t fu = {
      .num_ops = fb->num_ops - 1,
      .ops = (const iron_ir_op_t *const *)fb->ops,
      .num_inputs = fb->num_args,
      .inputs = inputs,
      .num_outputs = term->num_operands,
      .outputs = (const iron_ir_value_t *const *)term->operands,
      .owner = out->fusion,
  };
  CHECK_OK(iron_cuda_codegen_fusion(&fu, &out->src, &out->name));
  if (getenv("IRON_TEST_VERBOSE") && out->src) {  // the kernel, no prelude
    const char *k = strstr(out->src, "extern \"C\"");
    fputs(k ? k : out->src, stderr);
  }
  return out->src && out->name;
}

static float xv(int64_t k) { return (float)(k % 7) * 0.5f - 1.0f; }
static float yv(int64_t k) { return (float)(k % 5) - 2.0f; }
static float dv(int64_t k) { return (float)(k % 9) * 0.25f; }
static float zv(int64_t k) { return 100.0f + (float)k; }

static int64_t clamp(int64_t v, int64_t hi) {
  return v < 0 ? 0 : v > hi ? hi : v;
}

static void test_fusion_emu(void) {
  built_t bt;
  bool ok = build(&bt);
  if (!ok) {
    iron_ir_module_destroy(bt.m);
    return;
  }
  CHECK(cuda_emu_have_cxx());
  if (!cuda_emu_have_cxx()) return;
  cuda_emu_lib_t lib;
  const char *srcs[1] = {bt.src};
  bool built = cuda_emu_build(srcs, 1, NULL, &lib);
  CHECK(built);
  void *sym = built ? cuda_emu_sym(&lib, bt.name) : NULL;
  CHECK(sym != NULL);
  float X[48], Y[24], D[60], Z[72];
  for (int k = 0; k < 48; ++k) X[k] = xv(k);
  for (int k = 0; k < 24; ++k) Y[k] = yv(k);
  for (int k = 0; k < 60; ++k) D[k] = dv(k);
  // (i, j): in range, and clamped from above and below.
  const int32_t cases[3][2] = {{1, 3}, {7, -2}, {-5, 9}};
  const iron_ir_op_t *fop = bt.fusion;
  for (int c = 0; c < 3 && sym; ++c) {
    int32_t i = cases[c][0], j = cases[c][1];
    float out_e[24], out_z[72];
    for (int k = 0; k < 24; ++k) out_e[k] = -999.0f;
    for (int k = 0; k < 72; ++k) out_z[k] = Z[k] = zv(k);  // the operand
    void *argp[NUM_ARGS] = {X, Y, D, Z, &i, &j};
    void *params[10] = {0};
    uint32_t np = 0;
    for (uint32_t k = 0; k < fop->num_operands; ++k) {
      const iron_ir_value_t *v = fop->operands[k];
      // Function arguments by index; the zero constant by value.
      static const int32_t zero = 0;
      params[np++] = v->def_op ? (void *)&zero : argp[v->index];
    }
    const iron_ir_block_t *fb = &fop->regions[0].blocks[0];
    const iron_ir_op_t *term = fb->ops[fb->num_ops - 1];
    for (uint32_t r = 0; r < fop->num_results; ++r) {
      const iron_ir_op_t *d = term->operands[r]->def_op;
      params[np++] = d && d->kind == IRON_OP_DYNAMIC_UPDATE_SLICE
                         ? (void *)out_z
                         : (void *)out_e;
    }
    k_t fn;
    memcpy(&fn, &sym, sizeof(fn));
    fn(params[0], params[1], params[2], params[3], params[4], params[5],
       params[6], params[7], params[8], params[9]);
    int64_t ic = clamp(i, 3), jc = clamp(j, 4);
    int bad = 0;
    for (int p = 0; p < 2; ++p)
      for (int q = 0; q < 3; ++q)
        for (int r = 0; r < 4; ++r) {
          float a = X[(1 + p) * 12 + q * 4 + r];
          float b = Y[r * 6 + q * 2 + p];
          float d = D[(ic + p) * 12 + q * 4 + r];
          float e = a + b * d;
          if (out_e[p * 12 + q * 4 + r] != e) bad++;
          Z[(jc + p) * 12 + q * 4 + r] = e + e;
        }
    for (int k = 0; k < 72; ++k)
      if (out_z[k] != Z[k]) bad++;
    if (bad)
      fprintf(stderr, "fusion emulation (i=%d, j=%d): %d wrong elements\n", i,
              j, bad);
    CHECK_EQ_INT(bad, 0);
  }
  if (built) cuda_emu_close(&lib);
  free(bt.src);
  free(bt.name);
  iron_ir_module_destroy(bt.m);
}

// ---------------------------------------------------------------------------
// Groups whose members have other shapes than the group, run whole on the
// host and as the CUDA device plans them (cuda_emu_exec.h), bit for bit:
// fuse.c may only form groups the generator generates correctly.

typedef struct gb {
  iron_ir_module_t *m;
  iron_ir_func_t *f;
  iron_ir_block_t *b;
} gb_t;

static iron_ir_value_t *g_op2(gb_t *p, iron_op_kind_t k, iron_ir_value_t *a,
                              iron_ir_value_t *b) {
  iron_ir_value_t *in[2] = {a, b};
  return iron_ir_builder_op1(p->m, p->f, p->b, k, 2, in, a->type);
}

static iron_ir_value_t *g_bcast(gb_t *p, iron_ir_value_t *v, int32_t rank,
                                const int64_t *dims, const int64_t *bd) {
  const iron_ir_type_t *rt =
      iron_ir_builder_tensor_type(p->m, v->type->dtype, rank, dims);
  iron_ir_op_t *op = iron_ir_builder_op(p->m, p->f, p->b,
                                        IRON_OP_BROADCAST_IN_DIM, 1, &v, 1,
                                        &rt, 0);
  iron_ir_builder_attr(
      p->m, op, "broadcast_dimensions",
      iron_ir_builder_attr_i64s(p->m, (uint32_t)v->type->rank, bd));
  return &op->results[0];
}

enum {
  GS_PERMUTING_BCAST,  // broadcast_in_dim that transposes a computed value
  GS_PERMUTING_BCAST_INPUT,  // ... an input (an indexed load)
  GS_BCAST_COMPUTED_ROW,  // a computed row broadcast along a new dim
  GS_UNIT_BCAST_CHAIN,  // unit broadcasts of computed values, read again
  GS_IOTA_RESHAPED,     // iota and a reshape of another shape
  GS_SLICE_RESHAPE_DUS,  // slice, reshape to the update's shape, root
  GS_IOTA_BCAST_MASK,    // iota broadcast to [1, n] and compared
  GS_TRANSPOSE_RESHAPE,  // transpose of an input reshaped and computed on
  GS_DS_RESHAPE,         // dynamic_slice reshaped to a vector
  GS_IOTA_2D_RESHAPE,    // a 2-d iota along dim 1 reshaped to a vector
  GS_COUNT
};
static const char *const kGsNames[GS_COUNT] = {
    "permuting broadcast of a computed value",
    "permuting broadcast of an input", "broadcast of a computed row",
    "unit broadcasts of computed values", "iota with a reshape",
    "slice reshaped into a root", "iota broadcast to a mask",
    "transpose reshaped", "dynamic_slice reshaped", "2-d iota reshaped"};

static iron_ir_module_t *build_group_shape(int which) {
  gb_t p = {iron_ir_builder_module_create("shapes", 1), NULL, NULL};
  int64_t d33[2] = {3, 5}, d53[2] = {5, 3}, d5[1] = {5}, d15[2] = {1, 5};
  int64_t d35[2] = {3, 5}, d15x[1] = {15};
  const iron_ir_type_t *t35 =
      iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 2, d33);
  const iron_ir_type_t *t53 =
      iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 2, d53);
  const iron_ir_type_t *t5 =
      iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 1, d5);
  const iron_ir_type_t *t15 =
      iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 2, d15);
  int64_t d44[2] = {4, 4};
  const iron_ir_type_t *t44 =
      iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 2, d44);
  const iron_ir_type_t *tflat =
      iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 1, d15x);
  const iron_ir_type_t *ins[4], *outs[2];
  uint32_t ni = 0, no = 0;
  switch (which) {
    case GS_PERMUTING_BCAST:  // square: the transposed value has the shape
      ins[ni++] = t44; ins[ni++] = t44; outs[no++] = t44;
      break;
    case GS_PERMUTING_BCAST_INPUT:
      ins[ni++] = t53; ins[ni++] = t35; outs[no++] = t35;
      break;
    case GS_BCAST_COMPUTED_ROW:
      ins[ni++] = t5; ins[ni++] = t35; outs[no++] = t35;
      break;
    case GS_UNIT_BCAST_CHAIN:
      ins[ni++] = t5; ins[ni++] = t5; outs[no++] = t15; outs[no++] = t5;
      break;
    case GS_IOTA_RESHAPED:
      ins[ni++] = tflat; outs[no++] = t35;
      break;
    case GS_SLICE_RESHAPE_DUS:  // x [24] (a qkv row), cache [6, 2, 4], pos
      ins[ni++] = iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 1,
                                              (int64_t[]){24});
      ins[ni++] = iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 3,
                                              (int64_t[]){6, 2, 4});
      ins[ni++] = iron_ir_builder_scalar_type(p.m, IRON_DTYPE_S32);
      outs[no++] = ins[1];
      break;
    case GS_IOTA_BCAST_MASK:
      ins[ni++] = iron_ir_builder_scalar_type(p.m, IRON_DTYPE_S32);
      outs[no++] = iron_ir_builder_tensor_type(p.m, IRON_DTYPE_PRED, 2,
                                               (int64_t[]){1, 6});
      break;
    case GS_TRANSPOSE_RESHAPE:
    case GS_DS_RESHAPE:
      ins[ni++] = t35;
      ins[ni++] = tflat;
      if (which == GS_DS_RESHAPE)
        ins[ni++] = iron_ir_builder_scalar_type(p.m, IRON_DTYPE_S32);
      outs[no++] = tflat;
      break;
    case GS_IOTA_2D_RESHAPE:
      ins[ni++] = iron_ir_builder_tensor_type(p.m, IRON_DTYPE_S32, 1,
                                              (int64_t[]){6});
      outs[no++] = ins[0];
      break;
  }
  p.f = iron_ir_builder_func(p.m, "main", true, ni, ins, no, outs);
  p.b = iron_ir_builder_func_block(p.f);
  iron_ir_value_t *a = &p.b->args[0], *b = ni > 1 ? &p.b->args[1] : NULL;
  iron_ir_value_t *c3 = ni > 2 ? &p.b->args[2] : NULL;
  iron_ir_value_t *res[2];
  int64_t perm[2] = {1, 0}, row[1] = {1}, unit[1] = {1};
  switch (which) {
    case GS_PERMUTING_BCAST: {
      // a [4,4] computed, then read transposed through broadcast dims
      // [1, 0]: its elements at other coordinates than the group's
      iron_ir_value_t *c = g_op2(&p, IRON_OP_MULTIPLY, a, a);
      iron_ir_value_t *e = g_op2(&p, IRON_OP_ADD, c, a);
      res[0] = g_op2(&p, IRON_OP_SUBTRACT, g_bcast(&p, e, 2, d44, perm), b);
      break;
    }
    case GS_PERMUTING_BCAST_INPUT:
      res[0] = g_op2(&p, IRON_OP_SUBTRACT, g_bcast(&p, a, 2, d35, perm), b);
      break;
    case GS_BCAST_COMPUTED_ROW: {
      iron_ir_value_t *c = g_op2(&p, IRON_OP_MULTIPLY, a, a);
      res[0] = g_op2(&p, IRON_OP_ADD, g_bcast(&p, c, 2, d35, row), b);
      break;
    }
    case GS_UNIT_BCAST_CHAIN: {
      iron_ir_value_t *c = g_op2(&p, IRON_OP_MULTIPLY, a, b);
      iron_ir_value_t *u = g_bcast(&p, c, 2, d15, unit);
      res[0] = g_op2(&p, IRON_OP_ADD, u, u);
      res[1] = g_op2(&p, IRON_OP_ADD, c, a);
      break;
    }
    case GS_IOTA_RESHAPED: {
      const iron_ir_type_t *rt = t35;
      iron_ir_op_t *io =
          iron_ir_builder_op(p.m, p.f, p.b, IRON_OP_IOTA, 0, NULL, 1, &rt, 0);
      iron_ir_builder_attr(p.m, io, "iota_dimension",
                           iron_ir_builder_attr_int(p.m, 1));
      iron_ir_value_t *sq = g_op2(&p, IRON_OP_MULTIPLY, a, a);
      iron_ir_value_t *r =
          iron_ir_builder_op1(p.m, p.f, p.b, IRON_OP_RESHAPE, 1, &sq, t35);
      res[0] = g_op2(&p, IRON_OP_ADD, &io->results[0], r);
      break;
    }
    case GS_SLICE_RESHAPE_DUS: {
      // k = x[8:16] reshaped to [1, 2, 4], written at (pos, 0, 0).
      const iron_ir_type_t *t8 =
          iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 1, (int64_t[]){8});
      iron_ir_op_t *sl =
          iron_ir_builder_op(p.m, p.f, p.b, IRON_OP_SLICE, 1, &a, 1, &t8, 0);
      iron_ir_builder_attr(p.m, sl, "start_indices",
                           iron_ir_builder_attr_i64s(p.m, 1, (int64_t[]){8}));
      iron_ir_builder_attr(p.m, sl, "limit_indices",
                           iron_ir_builder_attr_i64s(p.m, 1, (int64_t[]){16}));
      iron_ir_builder_attr(p.m, sl, "strides",
                           iron_ir_builder_attr_i64s(p.m, 1, (int64_t[]){1}));
      iron_ir_value_t *slv = &sl->results[0];
      const iron_ir_type_t *tk = iron_ir_builder_tensor_type(
          p.m, IRON_DTYPE_F32, 3, (int64_t[]){1, 2, 4});
      iron_ir_value_t *k =
          iron_ir_builder_op1(p.m, p.f, p.b, IRON_OP_RESHAPE, 1, &slv, tk);
      int32_t zero = 0;
      iron_ir_value_t *z = iron_ir_builder_constant(
          p.m, p.f, p.b, c3->type, &zero, 4, false);
      iron_ir_value_t *din[5] = {b, k, c3, z, z};
      res[0] = iron_ir_builder_op1(p.m, p.f, p.b, IRON_OP_DYNAMIC_UPDATE_SLICE,
                                   5, din, b->type);
      break;
    }
    case GS_IOTA_BCAST_MASK: {
      const iron_ir_type_t *t6 =
          iron_ir_builder_tensor_type(p.m, IRON_DTYPE_S32, 1, (int64_t[]){6});
      iron_ir_op_t *io =
          iron_ir_builder_op(p.m, p.f, p.b, IRON_OP_IOTA, 0, NULL, 1, &t6, 0);
      iron_ir_builder_attr(p.m, io, "iota_dimension",
                           iron_ir_builder_attr_int(p.m, 0));
      iron_ir_value_t *row = g_bcast(&p, &io->results[0], 2,
                                     (int64_t[]){1, 6}, (int64_t[]){1});
      iron_ir_value_t *pos = g_bcast(&p, a, 2, (int64_t[]){1, 6}, NULL);
      const iron_ir_type_t *tm = iron_ir_builder_tensor_type(
          p.m, IRON_DTYPE_PRED, 2, (int64_t[]){1, 6});
      iron_ir_value_t *cin[2] = {row, pos};
      iron_ir_op_t *le = iron_ir_builder_op(p.m, p.f, p.b, IRON_OP_COMPARE, 2,
                                            cin, 1, &tm, 0);
      iron_ir_builder_attr(p.m, le, "comparison_direction",
                           iron_ir_builder_attr_enum(
                               p.m, IRON_ENUM_COMPARISON_DIRECTION,
                               IRON_CMP_LE));
      res[0] = &le->results[0];
      break;
    }
    case GS_TRANSPOSE_RESHAPE:
    case GS_DS_RESHAPE: {
      iron_ir_value_t *l;
      if (which == GS_TRANSPOSE_RESHAPE) {
        iron_ir_op_t *tr = iron_ir_builder_op(p.m, p.f, p.b, IRON_OP_TRANSPOSE,
                                              1, &a, 1, &t53, 0);
        iron_ir_builder_attr(p.m, tr, "permutation",
                             iron_ir_builder_attr_i64s(p.m, 2, perm));
        l = &tr->results[0];
      } else {  // a [3, 5] window of a [3, 5] input: the whole, clamped
        const iron_ir_type_t *t25 = iron_ir_builder_tensor_type(
            p.m, IRON_DTYPE_F32, 2, (int64_t[]){3, 5});
        iron_ir_value_t *dsin[3] = {a, c3, c3};
        iron_ir_op_t *ds = iron_ir_builder_op(p.m, p.f, p.b,
                                              IRON_OP_DYNAMIC_SLICE, 3, dsin,
                                              1, &t25, 0);
        iron_ir_builder_attr(p.m, ds, "slice_sizes",
                             iron_ir_builder_attr_i64s(p.m, 2,
                                                       (int64_t[]){3, 5}));
        l = &ds->results[0];
      }
      iron_ir_value_t *r =
          iron_ir_builder_op1(p.m, p.f, p.b, IRON_OP_RESHAPE, 1, &l, tflat);
      res[0] = g_op2(&p, IRON_OP_MULTIPLY, r, b);
      break;
    }
    case GS_IOTA_2D_RESHAPE: {
      const iron_ir_type_t *t23 =
          iron_ir_builder_tensor_type(p.m, IRON_DTYPE_S32, 2, (int64_t[]){2, 3});
      iron_ir_op_t *io =
          iron_ir_builder_op(p.m, p.f, p.b, IRON_OP_IOTA, 0, NULL, 1, &t23, 0);
      iron_ir_builder_attr(p.m, io, "iota_dimension",
                           iron_ir_builder_attr_int(p.m, 1));
      iron_ir_value_t *iv = &io->results[0];
      iron_ir_value_t *r = iron_ir_builder_op1(p.m, p.f, p.b, IRON_OP_RESHAPE,
                                               1, &iv, a->type);
      res[0] = g_op2(&p, IRON_OP_ADD, r, a);
      break;
    }
  }
  iron_ir_builder_return(p.m, p.f, p.b, IRON_OP_FUNC_RETURN, no, res);
  return p.m;
}

static void test_group_shapes(void) {
  cuda_emu_batch_t b;
  bool ok = cuda_emu_batch_init(&b);
  CHECK(ok);
  if (!ok) return;
  for (int w = 0; w < GS_COUNT; ++w) {
    iron_status_t st = cuda_emu_batch_add(&b, build_group_shape(w),
                                          build_group_shape(w), kGsNames[w]);
    if (st)
      fprintf(stderr, "%s: CUDA: %s\n", kGsNames[w], iron_status_message(st));
    CHECK(st == IRON_OK);
    iron_status_free(st);
  }
  CHECK(cuda_emu_batch_run(&b, 3));
  CHECK_EQ_INT(b.host_refused, 0);
  CHECK_EQ_INT(b.differ, 0);
  CHECK_EQ_INT(b.failed, 0);
  CHECK_EQ_INT(b.runs, 3 * GS_COUNT);
  cuda_emu_batch_destroy(&b);
}

// A start index computed from an argument (jax's i < 0 ? i + n : i) joins
// the kernel of the dynamic_update_slice that reads it, unless something
// else reads it too (then it stays a kernel of its own, and the root reads
// it from memory).
static iron_ir_module_t *build_scalar_start(bool also_returned) {
  gb_t p = {iron_ir_builder_module_create("start", 1), NULL, NULL};
  int64_t dx[1] = {10}, du[1] = {3};
  const iron_ir_type_t *tx = iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 1, dx);
  const iron_ir_type_t *tu = iron_ir_builder_tensor_type(p.m, IRON_DTYPE_F32, 1, du);
  const iron_ir_type_t *ti = iron_ir_builder_scalar_type(p.m, IRON_DTYPE_S32);
  const iron_ir_type_t *tp = iron_ir_builder_scalar_type(p.m, IRON_DTYPE_PRED);
  const iron_ir_type_t *ins[3] = {tx, tu, ti}, *outs[2] = {tx, ti};
  p.f = iron_ir_builder_func(p.m, "main", true, 3, ins, also_returned ? 2 : 1,
                             outs);
  p.b = iron_ir_builder_func_block(p.f);
  iron_ir_value_t *x = &p.b->args[0], *u = &p.b->args[1], *i = &p.b->args[2];
  int32_t zero = 0, ten = 10;
  iron_ir_value_t *z = iron_ir_builder_constant(p.m, p.f, p.b, ti, &zero, 4, false);
  iron_ir_value_t *n = iron_ir_builder_constant(p.m, p.f, p.b, ti, &ten, 4, false);
  iron_ir_value_t *cin[2] = {i, z};
  iron_ir_op_t *lt = iron_ir_builder_op(p.m, p.f, p.b, IRON_OP_COMPARE, 2, cin,
                                        1, &tp, 0);
  iron_ir_builder_attr(p.m, lt, "comparison_direction",
                       iron_ir_builder_attr_enum(
                           p.m, IRON_ENUM_COMPARISON_DIRECTION, IRON_CMP_LT));
  iron_ir_value_t *sin[3] = {&lt->results[0], g_op2(&p, IRON_OP_ADD, i, n), i};
  iron_ir_value_t *j = iron_ir_builder_op1(p.m, p.f, p.b, IRON_OP_SELECT, 3, sin, ti);
  iron_ir_value_t *din[3] = {x, g_op2(&p, IRON_OP_MULTIPLY, u, u), j};
  iron_ir_value_t *res[2] = {
      iron_ir_builder_op1(p.m, p.f, p.b, IRON_OP_DYNAMIC_UPDATE_SLICE, 3, din, tx),
      j};
  iron_ir_builder_return(p.m, p.f, p.b, IRON_OP_FUNC_RETURN,
                         also_returned ? 2 : 1, res);
  return p.m;
}

static void test_scalar_start_joins(void) {
  for (int shared = 0; shared < 2; ++shared) {
    iron_ir_module_t *m = build_scalar_start(shared);
    int n = 0;
    CHECK_OK(iron_compiler_fuse(m, iron_cuda_fusable, &n));
    const iron_ir_block_t *b = &m->funcs[0].body.blocks[0];
    // The root's fusion holds the select (and the compare and the add)
    // only when nothing else reads the start.
    const iron_ir_op_t *root = NULL;
    for (uint32_t k = 0; k < b->num_ops; ++k) {
      const iron_ir_op_t *op = b->ops[k];
      if (op->kind != IRON_OP_FUSION) continue;
      const iron_ir_block_t *fb = &op->regions[0].blocks[0];
      for (uint32_t q = 0; q < fb->num_ops; ++q)
        if (fb->ops[q]->kind == IRON_OP_DYNAMIC_UPDATE_SLICE) root = op;
    }
    CHECK(root != NULL);
    if (!root) {
      iron_ir_module_destroy(m);
      continue;
    }
    const iron_ir_block_t *fb = &root->regions[0].blocks[0];
    int selects = 0;
    for (uint32_t q = 0; q < fb->num_ops; ++q)
      selects += fb->ops[q]->kind == IRON_OP_SELECT;
    CHECK_EQ_INT(selects, shared ? 0 : 1);
    CHECK_EQ_INT(n, shared ? 2 : 1);
    iron_ir_module_destroy(m);
  }
  // Both run as on the host.
  cuda_emu_batch_t b;
  bool ok = cuda_emu_batch_init(&b);
  CHECK(ok);
  if (!ok) return;
  for (int shared = 0; shared < 2; ++shared) {
    iron_status_t st = cuda_emu_batch_add(&b, build_scalar_start(shared),
                                          build_scalar_start(shared),
                                          shared ? "start read twice"
                                                 : "start read once");
    CHECK_OK(st);
  }
  CHECK(cuda_emu_batch_run(&b, 3));
  CHECK_EQ_INT(b.differ, 0);
  CHECK_EQ_INT(b.failed, 0);
  CHECK_EQ_INT(b.runs, 6);
  cuda_emu_batch_destroy(&b);
}

static const iron_test_case_t kTests[] = {
    {"fusion_emu", test_fusion_emu},
    {"group_shapes", test_group_shapes},
    {"scalar_start_joins", test_scalar_start_joins},
};
IRON_TEST_MAIN(kTests)
