// Transposes fused with their element-wise producers and consumers on the
// CUDA device (pivots: src/compiler/fuse.h iron_compiler_fuse_pivots,
// src/device/cuda/cuda_fusion_plan.h, gen/fusion.c), GPU-free, as classes
// of programs: permutations (2-D swaps, (0,2,1), (2,0,1), (1,2,0), the
// inner-dim-keeping (1,0,2), batched (0,1,3,2)) x shapes (size 1, odd,
// 31/32/33 around the 32x32 tile, empty, square) x dtypes (f32, bf16, f16,
// f64, s32, s16, u8, pred, c64) x chains:
//   load     transpose(x) + 1                       (m.T + 1: an input tiled)
//   prod     transpose(x * x)                       (producers only)
//   both     transpose(x * x + bcast(v)) * y + 1    (a broadcast vector on
//            the producer side, an input of the result's shape and a
//            constant on the consumer side)
//   two      transpose(x + x) - transpose(z)        (a computed pivot and an
//            input pivot, one tile each)
//   escape   a = x * x; return a, transpose(a) + 1  (a producer value stored
//            in phase 1 too)
//   convert  convert(transpose(convert(x, f32) * 2), dtype) (the tile's
//            dtype differs from the inputs' and the result's)
//   square   transpose(x * x) + x * x               (square only: x * x is
//            computed at both coordinates)
//   out      t = transpose(x); return t, t + 1      (the transposed value
//            itself an output)
//   alone    transpose(x)                           (no fusion: 1- and
//            2-byte elements take the fusion's pair tiles, cuda_shape.c)
// Each program runs on the host device and as the CUDA device plans it
// (cuda_emu_exec.h: fusion with the CUDA predicates, the generated kernels
// compiled as C++, tiled ones on the multi-thread shim with real blocks,
// shared memory and barriers) on two seeds; results must match bit for
// bit, and each must run as ONE kernel; every kernel text is compiled by
// NVRTC for sm_90a where NVRTC is present (IRON_TEST_NO_NVRTC=1: not). Planted bugs (the tile read untransposed, the
// barrier dropped, the untiled source index off) must make it fail, and
// IRON_CUDA_TRANSPOSE_FUSION=0 must give the old kernels and the same
// results.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "compiler/fuse.h"
#include "cuda_emu_exec.h"
#include "cuda_test_nvrtc.h"
#include "ir/builder.h"
#include "runtime/executable.h"
#include "test.h"

enum {
  F_LOAD, F_PROD, F_BOTH, F_TWO, F_ESCAPE, F_CONVERT, F_SQUARE, F_OUT,
  F_ALONE, NUM_F
};
static const char *const kFamNames[NUM_F] = {
    "load", "prod",   "both", "two", "escape",
    "convert", "square", "out", "alone"};

typedef struct tcase {
  int32_t rank;
  int64_t dims[4];  // the operand's
  int64_t perm[4];
} tcase_t;

static const tcase_t kCases[] = {
    {2, {1, 1}, {1, 0}},          {2, {1, 33}, {1, 0}},
    {2, {7, 5}, {1, 0}},          {2, {31, 33}, {1, 0}},
    {2, {32, 32}, {1, 0}},        {2, {33, 31}, {1, 0}},
    {2, {33, 65}, {1, 0}},        {2, {16, 48}, {1, 0}},
    {2, {0, 40}, {1, 0}},         {2, {40, 1}, {1, 0}},
    {3, {2, 33, 17}, {0, 2, 1}},  {3, {3, 32, 32}, {0, 2, 1}},
    {3, {1, 31, 48}, {0, 2, 1}},  {3, {2, 0, 3}, {0, 2, 1}},
    {3, {33, 5, 40}, {2, 0, 1}},  {3, {4, 17, 32}, {2, 0, 1}},
    {3, {20, 3, 33}, {1, 2, 0}},  {3, {5, 6, 7}, {1, 0, 2}},
    {3, {17, 33, 2}, {1, 0, 2}},  {4, {2, 3, 17, 33}, {0, 1, 3, 2}},
    {4, {2, 1, 33, 1}, {0, 2, 1, 3}},
};
enum { NUM_CASES = sizeof(kCases) / sizeof(kCases[0]) };

static const iron_dtype_t kDtypes[] = {
    IRON_DTYPE_F32, IRON_DTYPE_BF16, IRON_DTYPE_F16, IRON_DTYPE_F64,
    IRON_DTYPE_S32, IRON_DTYPE_S16,  IRON_DTYPE_U8,  IRON_DTYPE_PRED,
    IRON_DTYPE_C64};
enum { NUM_DTYPES = sizeof(kDtypes) / sizeof(kDtypes[0]) };

typedef struct gb {
  iron_ir_module_t *m;
  iron_ir_func_t *f;
  iron_ir_block_t *b;
} gb_t;

static bool is_pred(iron_dtype_t dt) { return dt == IRON_DTYPE_PRED; }

// Arithmetic that every dtype has: pred takes and/or/xor.
static iron_ir_value_t *op2(gb_t *p, iron_op_kind_t k, iron_ir_value_t *a,
                            iron_ir_value_t *b) {
  if (is_pred(a->type->dtype))
    k = k == IRON_OP_MULTIPLY ? IRON_OP_AND
        : k == IRON_OP_ADD    ? IRON_OP_OR
                              : IRON_OP_XOR;
  iron_ir_value_t *in[2] = {a, b};
  return iron_ir_builder_op1(p->m, p->f, p->b, k, 2, in, a->type);
}

static iron_ir_value_t *transpose(gb_t *p, iron_ir_value_t *v,
                                  const int64_t *perm) {
  const iron_ir_type_t *t = v->type;
  int64_t rd[4];
  for (int32_t d = 0; d < t->rank; ++d) rd[d] = t->dims[perm[d]];
  const iron_ir_type_t *rt =
      iron_ir_builder_tensor_type(p->m, t->dtype, t->rank, rd);
  iron_ir_op_t *op = iron_ir_builder_op(p->m, p->f, p->b, IRON_OP_TRANSPOSE,
                                        1, &v, 1, &rt, 0);
  iron_ir_builder_attr(p->m, op, "permutation",
                       iron_ir_builder_attr_i64s(p->m, (uint32_t)t->rank, perm));
  return &op->results[0];
}

// A splat 1 (2 for `two`) of type t.
static iron_ir_value_t *splat(gb_t *p, const iron_ir_type_t *t, int v) {
  uint8_t buf[16];
  memset(buf, 0, sizeof(buf));
  size_t n = iron_dtype_size(t->dtype);
  switch (t->dtype) {
    case IRON_DTYPE_F32: { float f = (float)v; memcpy(buf, &f, 4); break; }
    case IRON_DTYPE_F64: { double f = v; memcpy(buf, &f, 8); break; }
    case IRON_DTYPE_C64: { float f = (float)v; memcpy(buf, &f, 4); break; }
    case IRON_DTYPE_F16: { uint16_t h = iron_f32_to_f16((float)v); memcpy(buf, &h, 2); break; }
    case IRON_DTYPE_BF16: { uint16_t h = iron_f32_to_bf16((float)v); memcpy(buf, &h, 2); break; }
    case IRON_DTYPE_S32: { int32_t x = v; memcpy(buf, &x, 4); break; }
    case IRON_DTYPE_S16: { int16_t x = (int16_t)v; memcpy(buf, &x, 2); break; }
    default: buf[0] = (uint8_t)v; break;  // u8, pred
  }
  return iron_ir_builder_constant(p->m, p->f, p->b, t, buf, n, true);
}

static iron_ir_value_t *convert(gb_t *p, iron_ir_value_t *v, iron_dtype_t dt) {
  const iron_ir_type_t *t = iron_ir_builder_tensor_type(
      p->m, dt, v->type->rank, v->type->dims);
  return iron_ir_builder_op1(p->m, p->f, p->b, IRON_OP_CONVERT, 1, &v, t);
}

static bool fam_applies(int fam, const tcase_t *c, iron_dtype_t dt) {
  if (fam == F_CONVERT) return dt != IRON_DTYPE_C64 && dt != IRON_DTYPE_PRED;
  if (fam == F_SQUARE) {
    for (int32_t d = 0; d < c->rank; ++d)
      if (c->dims[c->perm[d]] != c->dims[d]) return false;
  }
  return true;
}

static iron_ir_module_t *build(int fam, const tcase_t *c, iron_dtype_t dt) {
  gb_t p = {iron_ir_builder_module_create("tfuse", 1), NULL, NULL};
  const iron_ir_type_t *tx =
      iron_ir_builder_tensor_type(p.m, dt, c->rank, c->dims);
  int64_t rd[4];
  for (int32_t d = 0; d < c->rank; ++d) rd[d] = c->dims[c->perm[d]];
  const iron_ir_type_t *ty = iron_ir_builder_tensor_type(p.m, dt, c->rank, rd);
  const iron_ir_type_t *tv = iron_ir_builder_tensor_type(
      p.m, dt, 1, &c->dims[c->rank - 1]);
  // Arguments: x (operand shape), y (result shape), v (x's last dim),
  // z (operand shape).
  const iron_ir_type_t *ins[4] = {tx, ty, tv, tx};
  const iron_ir_type_t *outs[2] = {ty, tx};
  uint32_t nout = fam == F_ESCAPE || fam == F_OUT ? 2 : 1;
  if (fam == F_ESCAPE) {
    outs[0] = tx;
    outs[1] = ty;
  } else if (fam == F_OUT) {
    outs[1] = ty;
  }
  p.f = iron_ir_builder_func(p.m, "main", true, 4, ins, nout, outs);
  p.b = iron_ir_builder_func_block(p.f);
  iron_ir_value_t *x = &p.b->args[0], *y = &p.b->args[1], *v = &p.b->args[2],
                  *z = &p.b->args[3];
  iron_ir_value_t *res[2] = {NULL, NULL};
  switch (fam) {
    case F_LOAD:
      res[0] = op2(&p, IRON_OP_ADD, transpose(&p, x, c->perm), splat(&p, ty, 1));
      break;
    case F_PROD:
      res[0] = transpose(&p, op2(&p, IRON_OP_MULTIPLY, x, x), c->perm);
      break;
    case F_BOTH: {
      int64_t bd = c->rank - 1;
      const iron_ir_type_t *bt = tx;
      iron_ir_op_t *bc = iron_ir_builder_op(p.m, p.f, p.b,
                                            IRON_OP_BROADCAST_IN_DIM, 1, &v, 1,
                                            &bt, 0);
      iron_ir_builder_attr(p.m, bc, "broadcast_dimensions",
                           iron_ir_builder_attr_i64s(p.m, 1, &bd));
      iron_ir_value_t *a = op2(&p, IRON_OP_ADD, op2(&p, IRON_OP_MULTIPLY, x, x),
                               &bc->results[0]);
      iron_ir_value_t *t = op2(&p, IRON_OP_MULTIPLY, transpose(&p, a, c->perm), y);
      res[0] = op2(&p, IRON_OP_ADD, t, splat(&p, ty, 1));
      break;
    }
    case F_TWO:
      res[0] = op2(&p, IRON_OP_SUBTRACT,
                   transpose(&p, op2(&p, IRON_OP_ADD, x, x), c->perm),
                   transpose(&p, z, c->perm));
      break;
    case F_ESCAPE: {
      iron_ir_value_t *a = op2(&p, IRON_OP_MULTIPLY, x, x);
      res[0] = a;
      res[1] = op2(&p, IRON_OP_ADD, transpose(&p, a, c->perm), splat(&p, ty, 1));
      break;
    }
    case F_CONVERT: {
      iron_ir_value_t *xf = convert(&p, x, IRON_DTYPE_F32);
      iron_ir_value_t *m = op2(&p, IRON_OP_MULTIPLY, xf, splat(&p, xf->type, 2));
      res[0] = convert(&p, transpose(&p, m, c->perm), dt);
      break;
    }
    case F_SQUARE: {
      iron_ir_value_t *a = op2(&p, IRON_OP_MULTIPLY, x, x);
      res[0] = op2(&p, IRON_OP_ADD, transpose(&p, a, c->perm), a);
      break;
    }
    case F_ALONE:
      res[0] = transpose(&p, x, c->perm);
      break;
    case F_OUT:
      res[0] = transpose(&p, x, c->perm);
      res[1] = op2(&p, IRON_OP_ADD, res[0], splat(&p, ty, 1));
      break;
  }
  iron_ir_builder_return(p.m, p.f, p.b, IRON_OP_FUNC_RETURN, nout, res);
  return p.m;
}

static void describe(char *buf, size_t n, int fam, const tcase_t *c,
                     iron_dtype_t dt) {
  int k = snprintf(buf, n, "%s %s [", kFamNames[fam], iron_dtype_name(dt));
  for (int32_t d = 0; d < c->rank; ++d)
    k += snprintf(buf + k, n - (size_t)k, "%s%lld", d ? "," : "",
                  (long long)c->dims[d]);
  k += snprintf(buf + k, n - (size_t)k, "] perm (");
  for (int32_t d = 0; d < c->rank; ++d)
    k += snprintf(buf + k, n - (size_t)k, "%s%lld", d ? "," : "",
                  (long long)c->perm[d]);
  snprintf(buf + k, n - (size_t)k, ")");
}

// Every family on every case for f32; every dtype on every case for
// `both` and `load`, the rest of the families per dtype on the cases of
// one (rotating) dtype: all families, dtypes and cases appear.
static bool in_sweep(int fam, int ci, int di) {
  if (di == 0 || fam == F_BOTH || fam == F_LOAD) return true;
  return (ci + fam) % NUM_DTYPES == di;
}

// Fusions the fuse pass made in the program and their kernels' count.
static int count_fusions(int fam, const tcase_t *c, iron_dtype_t dt) {
  iron_ir_module_t *m = build(fam, c, dt);
  int n = -1;
  iron_status_t st = iron_compiler_fuse_pivots(m, iron_cuda_fusable,
                                               iron_cuda_pivot_fusable, &n);
  iron_status_free(st);
  iron_ir_module_destroy(m);
  return n;
}

// Every generated kernel text once (numbers aside) through NVRTC.
static void nvrtc_compile_all(void) {
  size_t n = g_cuda_emu.num_k;
  const char **srcs = calloc(n + 1, sizeof(char *));
  for (size_t i = 0; i < n; ++i) srcs[i] = g_cuda_emu.k[i].source;
  cuda_test_nvrtc_compile_all(n, srcs);
  free(srcs);
}

static void test_sweep(void) {
  cuda_emu_batch_t b;
  bool ok = cuda_emu_batch_init(&b);
  CHECK(ok);
  if (!ok) return;
  // Kernels of their own launch shape run on their grid (an unfused
  // transpose's tiles too), not through the host's kernel.
  g_cuda_emu.multi_thread = true;
  int added = 0, one_fusion = 0, programs = 0, alone = 0;
  for (int ci = 0; ci < NUM_CASES; ++ci)
    for (int di = 0; di < NUM_DTYPES; ++di)
      for (int fam = 0; fam < NUM_F; ++fam) {
        const tcase_t *c = &kCases[ci];
        iron_dtype_t dt = kDtypes[di];
        if (!in_sweep(fam, ci, di) || !fam_applies(fam, c, dt)) continue;
        char what[160];
        describe(what, sizeof(what), fam, c, dt);
        // The fuse pass makes one fusion of the whole program.
        programs++;
        alone += fam == F_ALONE;
        if (count_fusions(fam, c, dt) == (fam == F_ALONE ? 0 : 1))
          one_fusion++;
        else
          fprintf(stderr, "%s: not the expected fusions\n", what);
        iron_status_t st =
            cuda_emu_batch_add(&b, build(fam, c, dt), build(fam, c, dt), what);
        if (st) fprintf(stderr, "%s: CUDA: %s\n", what, iron_status_message(st));
        CHECK(st == IRON_OK);
        iron_status_free(st);
        added++;
      }
  CHECK_EQ_INT(one_fusion, programs);
  CHECK(cuda_emu_batch_run(&b, 2));
  fprintf(stderr, "transpose fusion sweep: %d programs, %d runs, %lld "
          "launches (%lld fused, %lld on the multi-thread shim)\n",
          added, b.runs, (long long)g_cuda_emu.launches,
          (long long)g_cuda_emu.fused_launches,
          (long long)g_cuda_emu.mt_launches);
  CHECK_EQ_INT(b.host_refused, 0);
  CHECK_EQ_INT(b.differ, 0);
  CHECK_EQ_INT(b.failed, 0);
  CHECK_EQ_INT(b.runs, 2 * added);
  // One fused op per run and no other kernel (zero-element programs
  // launch nothing), tiled ones among them.
  CHECK_EQ_INT(g_cuda_emu.fused_launches, b.runs - 2 * alone);
  CHECK(g_cuda_emu.launches <= b.runs);
  CHECK_EQ_INT(g_cuda_emu.host_fallbacks, 0);
  CHECK(g_cuda_emu.mt_launches > 0);
  if (getenv("IRON_TEST_NO_NVRTC") == NULL) nvrtc_compile_all();
  cuda_emu_batch_destroy(&b);
}

// ---------------------------------------------------------------------------
// Planted bugs

static int g_plant_kind;

static char *replace_all(const char *src, const char *from, const char *to) {
  size_t nf = strlen(from), nt = strlen(to), n = 0;
  for (const char *q = strstr(src, from); q; q = strstr(q + nf, from)) n++;
  if (!n) return NULL;
  char *out = malloc(strlen(src) + n * (nt + 1) + 1), *w = out;
  const char *r = src;
  for (const char *q = strstr(r, from); q; q = strstr(r, from)) {
    memcpy(w, r, (size_t)(q - r));
    w += q - r;
    memcpy(w, to, nt);
    w += nt;
    r = q + nf;
  }
  strcpy(w, r);
  return out;
}

static char *plant(const char *name, const char *source, bool fused) {
  (void)name;
  if (!fused) return NULL;
  switch (g_plant_kind) {
    case 0:  // the tile read as written (no transpose)
      return replace_all(source, "t0_[tx_][ty_ + j_]", "t0_[ty_ + j_][tx_]");
    case 1:  // no barrier between the phases
      return replace_all(source, "__syncthreads();", ";");
    case 3:  // pairs (bf16): phase 2 reads the pair's first element twice
      return replace_all(source, "_[2 * tx_ + 1][ty_ + j_]",
                         "_[2 * tx_][ty_ + j_]");
    case 2:  // the untiled source index misses the first coordinate
      return replace_all(source, "    s_ += (q_", "    s_ += 0 * (q_");
    default:
      return NULL;
  }
}

static void test_planted(void) {
  // A tiled 2-D program, a tiled 3-D program, an untiled (inner dim
  // kept) one, and a tiled one of bf16 pairs.
  static const int kCase[4] = {4, 10, 17, 4};
  for (int kind = 0; kind < 4; ++kind) {
    cuda_emu_batch_t b;
    bool ok = cuda_emu_batch_init(&b);
    CHECK(ok);
    if (!ok) return;
    g_plant_kind = kind;
    g_cuda_emu.plant = plant;
    const tcase_t *c = &kCases[kCase[kind]];
    for (int di = 0; di < 2; ++di) {
      iron_dtype_t dt = kDtypes[di];
      CHECK_OK(cuda_emu_batch_add(&b, build(F_BOTH, c, dt),
                                  build(F_BOTH, c, dt), "planted"));
    }
    CHECK(cuda_emu_batch_run(&b, 1));
    CHECK(g_cuda_emu.planted > 0);
    CHECK(b.differ + b.failed > 0);
    cuda_emu_batch_destroy(&b);
  }
  g_cuda_emu.plant = NULL;
}

// IRON_CUDA_TRANSPOSE_FUSION=0: the old kernels (a separate transpose),
// the same results.
static void test_switch_off(void) {
  setenv("IRON_CUDA_TRANSPOSE_FUSION", "0", 1);
  const tcase_t *c = &kCases[6];  // [33, 65]
  CHECK(count_fusions(F_PROD, c, IRON_DTYPE_F32) == 0);
  cuda_emu_batch_t b;
  bool ok = cuda_emu_batch_init(&b);
  CHECK(ok);
  if (ok) {
    for (int fam = 0; fam < NUM_F; ++fam) {
      if (!fam_applies(fam, c, IRON_DTYPE_F32)) continue;
      CHECK_OK(cuda_emu_batch_add(&b, build(fam, c, IRON_DTYPE_F32),
                                  build(fam, c, IRON_DTYPE_F32), kFamNames[fam]));
    }
    CHECK(cuda_emu_batch_run(&b, 1));
    CHECK_EQ_INT(b.differ, 0);
    CHECK_EQ_INT(b.failed, 0);
    CHECK(g_cuda_emu.launches > b.runs);  // the transposes run apart
    cuda_emu_batch_destroy(&b);
  }
  unsetenv("IRON_CUDA_TRANSPOSE_FUSION");
}

static const iron_test_case_t kTests[] = {
    {"sweep", test_sweep},
    {"planted", test_planted},
    {"switch_off", test_switch_off},
};
IRON_TEST_MAIN(kTests)
