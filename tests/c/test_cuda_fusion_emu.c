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
#include "cuda_emu.h"
#include "device/cuda/cuda_codegen.h"
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

static const iron_test_case_t kTests[] = {
    {"fusion_emu", test_fusion_emu},
};
IRON_TEST_MAIN(kTests)
