// The CUDA reduce generator (gen/reduce.c) over the shapes where its
// launch shapes change, run on the CPU through the multi-thread emulation
// (cuda_emu.h: real blocks, shared memory, warp barriers, split grids):
// - ordered bodies of 1..12 operands (jnp.argmax's value/index body, plus
//   payload operands of several dtypes that follow the chosen index; for
//   one operand "the first NaN, else the first maximum"), on values full of
//   NaNs, ties, signed zeros and infinities, bit for bit against the
//   sequential fold from the init values (XLA's order). These run the
//   staged loops (lanes load a warp's chunks through shared memory, each
//   lane folds its own chunk in order) at K = 16 (1 operand), 8 (2) and
//   4 (3) elements per stage (the operands' bytes pick K) and the
//   unstaged loop past that (4..12 operands);
// - s32 sums (exact) and f32 sums (within 1e-6 of the exact sum) of tall
//   narrow columns (batch norm's [131072, 64]) and short full reductions,
//   the batched-load loops and the finer splits;
// - two launches give the same bits (split counters reset themselves,
//   no order depends on timing);
// - IRON_CUDA_REDUCE_STAGE=0 / IRON_CUDA_REDUCE_BATCH=0 give the same
//   results through the plain loops.
// - fused producers (iron_cuda_gen_reduce_fused): jnp.argmax's index
//   computed from the position, batch norm's column sums;
// - reduce_window of 12 operands against the sequential window fold.
// Every row length sits around a warp (32), block (256, 2048), stage or
// split boundary.
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "cuda_emu.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/gen/prelude.h"
#include "region_builder.h"
#include "test.h"

#define MAXN 12

enum { K_ORDERED, K_SUM_S32, K_SUM_F32 };

typedef struct rcase {
  char name[64];
  int32_t rank;
  int64_t dims[3];
  bool reduced[3];
  int kind;
  uint32_t num;
  iron_dtype_t dts[MAXN];
  const char *env;  // "NAME=value" set while generating, or NULL
  // filled by setup
  int64_t nin, nout;
  void *in[MAXN], *init[MAXN], *out[MAXN], *out2[MAXN], *want[MAXN];
  char *src;
  unsigned grid, block;
  bool gen_ok;
  // Fused (iron_cuda_gen_reduce_fused): ordered num == 2 computes the
  // index operand from the position (jnp.argmax's iota); sums read
  // operand 0 through the producer. Inputs: operand 0, then the inits.
  bool fused;
} rcase_t;

#define MAXC 96
static rcase_t g_cases[MAXC];
static int g_ncases;

// Payload dtypes of operands 2.. (operand 0: f32 values, 1: s32 indices).
static const iron_dtype_t kPayload[] = {
    IRON_DTYPE_F64,  IRON_DTYPE_S32, IRON_DTYPE_U8,  IRON_DTYPE_S64,
    IRON_DTYPE_F32,  IRON_DTYPE_S16, IRON_DTYPE_F16, IRON_DTYPE_U32,
    IRON_DTYPE_BF16, IRON_DTYPE_S8};

static void add_case(const char *what, int32_t rank, const int64_t *dims,
                     const bool *reduced, int kind, uint32_t num,
                     const char *env) {
  if (g_ncases >= MAXC) return;
  rcase_t *c = &g_cases[g_ncases];
  memset(c, 0, sizeof(*c));
  c->rank = rank;
  for (int32_t d = 0; d < rank; ++d) {
    c->dims[d] = dims[d];
    c->reduced[d] = reduced[d];
  }
  c->kind = kind;
  c->num = num;
  c->env = env;
  if (kind == K_SUM_S32) c->dts[0] = IRON_DTYPE_S32;
  if (kind == K_SUM_F32) c->dts[0] = IRON_DTYPE_F32;
  if (kind == K_ORDERED) {
    c->dts[0] = IRON_DTYPE_F32;
    if (num > 1) c->dts[1] = IRON_DTYPE_S32;
    for (uint32_t i = 2; i < num; ++i)
      c->dts[i] = kPayload[(i - 2) % (sizeof(kPayload) / sizeof(kPayload[0]))];
  }
  snprintf(c->name, sizeof(c->name), "k%d_%s", g_ncases, what);
  g_ncases++;
}

// --- values ------------------------------------------------------------------

static uint64_t g_seed;
static uint64_t rnd(void) {
  g_seed ^= g_seed << 13;
  g_seed ^= g_seed >> 7;
  g_seed ^= g_seed << 17;
  return g_seed;
}

// Few distinct values, so that ties are everywhere; NaNs rare enough that
// many rows have none, and some rows are all one value.
// Row kinds: 0 mixed, 1 all -0, 2 all -inf, 3 zeros of both signs below
// (the kept zero's sign depends on the fold order), 4 one NaN in 8 (which
// NaN's index wins depends on it).
static float value_at(int64_t row_kind) {
  static const float kv[] = {1.0f,  2.0f, 0.0f,     -0.0f,
                             -1.0f, 2.0f, INFINITY, -INFINITY};
  if (row_kind == 1) return -0.0f;
  if (row_kind == 2) return -INFINITY;
  uint64_t r = rnd();
  if (row_kind == 3)
    return (r >> 12) % 3 == 0 ? -1.0f : (r >> 9) & 1 ? 0.0f : -0.0f;
  if ((r & (row_kind == 4 ? 7 : 1023)) == 7) return NAN;
  return kv[(r >> 10) % 8];
}

static void store(iron_dtype_t dt, void *base, int64_t i, double v) {
  switch (dt) {
    case IRON_DTYPE_F32:
      ((float *)base)[i] = (float)v;
      break;
    case IRON_DTYPE_F64:
      ((double *)base)[i] = v;
      break;
    case IRON_DTYPE_S32:
      ((int32_t *)base)[i] = (int32_t)v;
      break;
    case IRON_DTYPE_U32:
      ((uint32_t *)base)[i] = (uint32_t)v;
      break;
    case IRON_DTYPE_S64:
      ((int64_t *)base)[i] = (int64_t)v;
      break;
    case IRON_DTYPE_S16:
      ((int16_t *)base)[i] = (int16_t)v;
      break;
    case IRON_DTYPE_S8:
      ((int8_t *)base)[i] = (int8_t)v;
      break;
    case IRON_DTYPE_U8:
      ((uint8_t *)base)[i] = (uint8_t)v;
      break;
    case IRON_DTYPE_F16:
      ((uint16_t *)base)[i] = iron_f32_to_f16((float)v);
      break;
    case IRON_DTYPE_BF16:
      ((uint16_t *)base)[i] = iron_f32_to_bf16((float)v);
      break;
    default:
      break;
  }
}

// Output index of input element `lin` (kept coordinates, row-major) and
// the element's position in its output's reduction order.
static int64_t out_index(const rcase_t *c, int64_t lin, int64_t *pos) {
  int64_t coord[3], o = 0, p = 0;
  for (int32_t d = c->rank - 1; d >= 0; --d) {
    coord[d] = lin % c->dims[d];
    lin /= c->dims[d];
  }
  for (int32_t d = 0; d < c->rank; ++d) {
    if (c->reduced[d])
      p = p * c->dims[d] + coord[d];
    else
      o = o * c->dims[d] + coord[d];
  }
  *pos = p;
  return o;
}

// --- bodies and the reference
// -------------------------------------------------

// num == 1: the first NaN, else the first maximum (ties keep the earlier);
// num >= 2: jnp.argmax's body on (values, indices), operands 2.. follow
// the chosen index.
static rb_t *ordered_body(const rcase_t *c) {
  rb_t *b = rb_new();
  iron_ir_value_t *a[MAXN], *x[MAXN], *r[MAXN];
  for (uint32_t i = 0; i < c->num; ++i) a[i] = rb_arg(b, c->dts[i]);
  for (uint32_t i = 0; i < c->num; ++i) x[i] = rb_arg(b, c->dts[i]);
  if (c->num == 1) {
    iron_ir_value_t *ge =
        rb_cmp(b, IRON_CMP_GE, IRON_CMP_TYPE_FLOAT, a[0], x[0]);
    iron_ir_value_t *nan =
        rb_cmp(b, IRON_CMP_NE, IRON_CMP_TYPE_FLOAT, a[0], a[0]);
    iron_ir_value_t *p = rb_op(b, IRON_OP_OR, IRON_DTYPE_PRED, ge, nan, NULL);
    r[0] = rb_op(b, IRON_OP_SELECT, c->dts[0], p, a[0], x[0]);
    rb_return(b, 1, r);
    return b;
  }
  iron_ir_value_t *gt = rb_cmp(b, IRON_CMP_GT, IRON_CMP_TYPE_FLOAT, a[0], x[0]);
  iron_ir_value_t *nan =
      rb_cmp(b, IRON_CMP_NE, IRON_CMP_TYPE_FLOAT, a[0], a[0]);
  iron_ir_value_t *pick = rb_op(b, IRON_OP_OR, IRON_DTYPE_PRED, gt, nan, NULL);
  iron_ir_value_t *eq = rb_cmp(b, IRON_CMP_EQ, IRON_CMP_TYPE_FLOAT, a[0], x[0]);
  iron_ir_value_t *lt =
      rb_cmp(b, IRON_CMP_LT, IRON_CMP_TYPE_SIGNED, a[1], x[1]);
  iron_ir_value_t *tie = rb_op(b, IRON_OP_AND, IRON_DTYPE_PRED, eq, lt, NULL);
  iron_ir_value_t *pi = rb_op(b, IRON_OP_OR, IRON_DTYPE_PRED, pick, tie, NULL);
  r[0] = rb_op(b, IRON_OP_SELECT, c->dts[0], pick, a[0], x[0]);
  for (uint32_t i = 1; i < c->num; ++i)
    r[i] = rb_op(b, IRON_OP_SELECT, c->dts[i], pi, a[i], x[i]);
  rb_return(b, (int)c->num, r);
  return b;
}

// One step of the reference fold: acc (index ia into the arrays `av`, or
// the init values when ia < 0) against element xi; returns which of the
// two the operands >= 1 take (true: acc).
static bool ref_step(float *accv, int32_t *acci, float xv, int32_t xi,
                     uint32_t num, bool *out_keep_value) {
  float a = *accv;
  if (num == 1) {
    bool keep = a >= xv || a != a;
    *out_keep_value = keep;
    if (!keep) *accv = xv;
    return keep;
  }
  bool pick = a > xv || a != a;
  bool tie = a == xv && *acci < xi;
  bool pi = pick || tie;
  *out_keep_value = pick;
  if (!pick) *accv = xv;
  if (!pi) *acci = xi;
  return pi;
}

static void setup_case(rcase_t *c) {
  c->nin = c->nout = 1;
  for (int32_t d = 0; d < c->rank; ++d) {
    c->nin *= c->dims[d];
    if (!c->reduced[d]) c->nout *= c->dims[d];
  }
  for (uint32_t i = 0; i < c->num; ++i) {
    size_t es = iron_dtype_size(c->dts[i]);
    c->in[i] = calloc((size_t)c->nin + 1, es);
    c->init[i] = calloc(1, 8);
    c->out[i] = calloc((size_t)c->nout + 1, es);
    c->out2[i] = calloc((size_t)c->nout + 1, es);
    c->want[i] = calloc((size_t)c->nout + 1, es);
  }
  g_seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(c->nin * 977 + c->num);
  if (c->kind == K_SUM_S32) {
    int32_t *x = c->in[0], *w = c->want[0];
    for (int64_t i = 0; i < c->nin; ++i)
      x[i] = (int32_t)(rnd() & 0xffffff) - (1 << 23);
    *(int32_t *)c->init[0] = 5;
    for (int64_t o = 0; o < c->nout; ++o) w[o] = 5;
    for (int64_t i = 0; i < c->nin; ++i) {
      int64_t pos;
      int64_t o = out_index(c, i, &pos);
      w[o] = (int32_t)((uint32_t)w[o] + (uint32_t)x[i]);
    }
    return;
  }
  if (c->kind == K_SUM_F32) {
    float *x = c->in[0];
    for (int64_t i = 0; i < c->nin; ++i)
      x[i] = (float)((int64_t)(rnd() % 2001) - 1000) * 0.001f;
    *(float *)c->init[0] = 0.0f;
    return;  // checked against exact double sums in check_case
  }
  // Ordered: rows of kind 1 (all -0) and 2 (all -inf) now and then.
  float *v = c->in[0];
  for (int64_t i = 0; i < c->nin; ++i) {
    int64_t pos;
    int64_t o = out_index(c, i, &pos);
    v[i] = value_at((o * 7 + c->nin + c->num) % 5);
    if (c->num > 1) ((int32_t *)c->in[1])[i] = (int32_t)pos;
    for (uint32_t k = 2; k < c->num; ++k)
      store(c->dts[k], c->in[k], i, (double)((pos * 31 + k * 7 + o) % 100));
  }
  store(c->dts[0], c->init[0], 0, -INFINITY);
  for (uint32_t k = 1; k < c->num; ++k)
    store(c->dts[k], c->init[k], 0, (double)(k == 1 ? 0 : 100 + k));
  // Sequential reference: per output, the acc's value/index and which
  // element (or the init, -1) its other operands come from.
  float *accv = malloc(sizeof(float) * (size_t)c->nout);
  int32_t *acci = malloc(sizeof(int32_t) * (size_t)c->nout);
  int64_t *src = malloc(sizeof(int64_t) * (size_t)c->nout);
  for (int64_t o = 0; o < c->nout; ++o) {
    accv[o] = -INFINITY;
    acci[o] = 0;
    src[o] = -1;
  }
  for (int64_t i = 0; i < c->nin; ++i) {
    int64_t pos;
    int64_t o = out_index(c, i, &pos);
    bool keepv;
    bool keep =
        ref_step(&accv[o], &acci[o], v[i], (int32_t)pos, c->num, &keepv);
    if (!keep) src[o] = i;
  }
  for (int64_t o = 0; o < c->nout; ++o) {
    ((float *)c->want[0])[o] = accv[o];
    if (c->num > 1) ((int32_t *)c->want[1])[o] = acci[o];
    for (uint32_t k = 2; k < c->num; ++k) {
      size_t es = iron_dtype_size(c->dts[k]);
      memcpy((char *)c->want[k] + (size_t)o * es,
             src[o] < 0 ? (const char *)c->init[k]
                        : (const char *)c->in[k] + (size_t)src[o] * es,
             es);
    }
  }
  free(accv);
  free(acci);
  free(src);
}

// The fused producer's text: operand 0 loaded, operand 1 (ordered, two
// operands) the element's position in its reduction, from `i`.
static char *fused_fn(const rcase_t *c) {
  char pos[96];
  if (c->rank == 1)
    snprintf(pos, sizeof(pos), "i");
  else if (c->reduced[1])
    snprintf(pos, sizeof(pos), "i %% %lldLL", (long long)c->dims[1]);
  else
    snprintf(pos, sizeof(pos), "i / %lldLL", (long long)c->dims[1]);
  char *f = malloc(512);
  if (c->kind == K_ORDERED)
    snprintf(f, 512,
             "__device__ __forceinline__ void iron_fz(const float *in0, "
             "const float *in1, const int32_t *in2, long long i, float &v0, "
             "int32_t &v1) { v0 = in0[i]; v1 = (int32_t)(%s); }\n",
             pos);
  else if (c->kind == K_SUM_S32)
    snprintf(f, 512,
             "__device__ __forceinline__ void iron_fz(const int32_t *in0, "
             "const int32_t *in1, long long i, int32_t &v0) { v0 = in0[i]; "
             "}\n");
  else
    snprintf(f, 512,
             "__device__ __forceinline__ void iron_fz(const float *in0, "
             "const float *in1, long long i, float &v0) { v0 = in0[i]; }\n");
  return f;
}

static void gen_case(rcase_t *c) {
  rb_t *body = c->kind == K_ORDERED   ? ordered_body(c)
               : c->kind == K_SUM_S32 ? rb_binary(IRON_OP_ADD, IRON_DTYPE_S32)
                                      : rb_binary(IRON_OP_ADD, IRON_DTYPE_F32);
  if (c->fused) {
    char *fn = fused_fn(c);
    const char *ict[3] = {c->kind == K_SUM_S32 ? "int32_t" : "float",
                          c->kind == K_SUM_S32 ? "int32_t" : "float",
                          "int32_t"};
    const char *vct[2] = {ict[0], "int32_t"};
    const uint32_t init_in[2] = {1, 2};
    iron_cuda_reduce_fused_t fz = {.fn_text = fn,
                                   .fn_name = "iron_fz",
                                   .num_inputs = 1 + c->num,
                                   .input_ctypes = ict,
                                   .value_ctypes = vct,
                                   .init_inputs = init_in};
    iron_status_t st = iron_cuda_gen_reduce_fused(
        c->name, c->rank, c->dims, c->reduced, c->num, c->dts,
        &(iron_region_t){.ir = &body->region}, &fz, &c->src, &c->grid,
        &c->block);
    free(fn);
    free(body);
    CHECK_OK(st);
    c->gen_ok = st == IRON_OK;
    return;
  }
  char envname[64] = "";
  if (c->env) {
    const char *eq = strchr(c->env, '=');
    snprintf(envname, sizeof(envname), "%.*s", (int)(eq - c->env), c->env);
    setenv(envname, eq + 1, 1);
  }
  iron_status_t st = iron_cuda_gen_reduce(
      c->name, c->rank, c->dims, c->reduced, c->num, c->dts,
      &(iron_region_t){.ir = &body->region}, &c->src, &c->grid, &c->block);
  if (c->env) unsetenv(envname);
  free(body);
  CHECK_OK(st);
  c->gen_ok = st == IRON_OK;
}

static bool launch(const cuda_emu_lib_t *lib, rcase_t *c, void **outs) {
  void *ptrs[3 * MAXN], *args[3 * MAXN];
  if (c->fused) {
    uint32_t n = 0;
    ptrs[n++] = c->in[0];
    for (uint32_t i = 0; i < c->num; ++i) ptrs[n++] = c->init[i];
    for (uint32_t i = 0; i < c->num; ++i) ptrs[n++] = outs[i];
    for (uint32_t i = 0; i < n; ++i) args[i] = &ptrs[i];
    return cuda_emu_launch(lib, c->name, c->grid, c->block, args) == 0;
  }
  for (uint32_t i = 0; i < c->num; ++i) {
    ptrs[i] = c->in[i];
    ptrs[c->num + i] = c->init[i];
    ptrs[2 * c->num + i] = outs[i];
  }
  for (uint32_t i = 0; i < 3 * c->num; ++i) args[i] = &ptrs[i];
  return cuda_emu_launch(lib, c->name, c->grid, c->block, args) == 0;
}

static int g_reported;
static void check_case(rcase_t *c) {
  int bad = 0;
  for (uint32_t i = 0; i < c->num; ++i) {
    size_t bytes = iron_dtype_size(c->dts[i]) * (size_t)c->nout;
    if (memcmp(c->out[i], c->out2[i], bytes) != 0) {
      fprintf(stderr, "  %s: operand %u differs between two launches\n",
              c->name, i);
      bad++;
    }
  }
  if (c->kind == K_SUM_F32) {
    double *ex = calloc((size_t)c->nout, sizeof(double));
    double *ab = calloc((size_t)c->nout, sizeof(double));
    const float *x = c->in[0];
    for (int64_t i = 0; i < c->nin; ++i) {
      int64_t pos;
      int64_t o = out_index(c, i, &pos);
      ex[o] += x[i];
      ab[o] += fabs(x[i]);
    }
    for (int64_t o = 0; o < c->nout; ++o) {
      double got = ((const float *)c->out[0])[o];
      if (fabs(got - ex[o]) > 1e-6 * ab[o] + 1e-6) {
        if (g_reported++ < 10)
          fprintf(stderr, "  %s: out %lld got %.9g want %.9g\n", c->name,
                  (long long)o, got, ex[o]);
        bad++;
      }
    }
    free(ex);
    free(ab);
  } else {
    for (uint32_t i = 0; i < c->num; ++i) {
      size_t es = iron_dtype_size(c->dts[i]);
      for (int64_t o = 0; o < c->nout; ++o) {
        const char *g = (const char *)c->out[i] + (size_t)o * es;
        const char *w = (const char *)c->want[i] + (size_t)o * es;
        bool same = memcmp(g, w, es) == 0;
        // NaN values: any NaN is the NaN (the input has one NaN pattern).
        if (!same && i == 0 && c->kind == K_ORDERED) {
          float gf, wf;
          memcpy(&gf, g, 4);
          memcpy(&wf, w, 4);
          same = gf != gf && wf != wf;
        }
        if (!same) {
          if (g_reported++ < 10)
            fprintf(stderr, "  %s: operand %u output %lld differs\n", c->name,
                    i, (long long)o);
          bad++;
        }
      }
    }
  }
  if (bad)
    fprintf(stderr, "  %s: %d mismatches (grid %u)\n", c->name, bad, c->grid);
  CHECK_EQ_INT(bad, 0);
}

static void build_cases(void) {
  // Ordered bodies: rows around the warp/block/stage/split boundaries,
  // operand counts 1..12 spread over them.
  static const int64_t kRows[] = {1,    7,    9,    31,   33,
                                  255,  257,  1000, 2047, 2048,
                                  2049, 4095, 4097, 8193, 16385};
  uint32_t num = 1;
  for (size_t k = 0; k < sizeof(kRows) / sizeof(kRows[0]); ++k) {
    int64_t n = kRows[k];
    bool red[2] = {false, true};
    int64_t d[2] = {3, n};
    add_case("rows", 2, d, red, K_ORDERED, num, NULL);
    num = num % MAXN + 1;
    add_case("rows2", 2, d, red, K_ORDERED, 2, NULL);
    int64_t d1[1] = {n};
    bool r1[1] = {true};
    add_case("full", 1, d1, r1, K_ORDERED, num, NULL);
    num = num % MAXN + 1;
  }
  // Many rows of one block each, a long split row, a full reduce.
  {
    int64_t d[2] = {300, 4099};
    bool red[2] = {false, true};
    add_case("manyrows", 2, d, red, K_ORDERED, 2, NULL);
    int64_t d1[1] = {200003};
    bool r1[1] = {true};
    add_case("fullsplit", 1, d1, r1, K_ORDERED, 2, NULL);
    add_case("fullsplit12", 1, d1, r1, K_ORDERED, 12, NULL);
    add_case("fullsplit_nostage", 1, d1, r1, K_ORDERED, 2,
             "IRON_CUDA_REDUCE_STAGE=0");
    // Whole stages (chunks a multiple of K: the unguarded loop), with
    // and without a partial last segment.
    int64_t w1[2] = {3, 32768}, w2[2] = {3, 32773}, w3[2] = {40, 8192},
            w4[2] = {300, 8192};
    add_case("whole", 2, w1, red, K_ORDERED, 2, NULL);
    add_case("whole_tail", 2, w2, red, K_ORDERED, 2, NULL);
    add_case("whole_split", 2, w3, red, K_ORDERED, 3, NULL);
    add_case("whole_rows", 2, w4, red, K_ORDERED, 2, NULL);
    int64_t f1 = 1 << 20, f2 = (1 << 20) + 3;
    add_case("whole_full", 1, &f1, r1, K_ORDERED, 2, NULL);
    add_case("whole_full_tail", 1, &f2, r1, K_ORDERED, 2, NULL);
    // jnp.argmax fused: the index from the position (rows, full, cols).
    int64_t fr[2] = {300, 8192}, fr2[2] = {5, 20001}, fc[2] = {5000, 40};
    bool redc[2] = {true, false};
    add_case("fz_argmax_rows", 2, fr, red, K_ORDERED, 2, NULL);
    g_cases[g_ncases - 1].fused = true;
    add_case("fz_argmax_rows_split", 2, fr2, red, K_ORDERED, 2, NULL);
    g_cases[g_ncases - 1].fused = true;
    add_case("fz_argmax_full", 1, &f2, r1, K_ORDERED, 2, NULL);
    g_cases[g_ncases - 1].fused = true;
    add_case("fz_argmax_cols", 2, fc, redc, K_ORDERED, 2, NULL);
    g_cases[g_ncases - 1].fused = true;
    add_case("fz_argmax_warp", 2, (int64_t[2]){64, 1000}, red, K_ORDERED, 2,
             NULL);
    g_cases[g_ncases - 1].fused = true;
    int64_t d2[2] = {5, 20001};
    add_case("rows12", 2, d2, red, K_ORDERED, 12, NULL);
    add_case("rows7", 2, d2, red, K_ORDERED, 7, NULL);
  }
  // Columns and middles, ordered.
  static const int64_t kCols[][2] = {
      {100, 33}, {300, 1}, {5000, 3}, {6000, 64}, {1000, 96}};
  for (size_t k = 0; k < sizeof(kCols) / sizeof(kCols[0]); ++k) {
    bool red[2] = {true, false};
    add_case("cols", 2, kCols[k], red, K_ORDERED, num, NULL);
    num = num % MAXN + 1;
    add_case("cols2", 2, kCols[k], red, K_ORDERED, 2, NULL);
  }
  {
    int64_t d[3] = {4, 3001, 3};
    bool red[3] = {false, true, false};
    add_case("middle", 3, d, red, K_ORDERED, 3, NULL);
    add_case("middle12", 3, d, red, K_ORDERED, 12, NULL);
  }
  // Sums: batch norm's tall narrow columns, short full reductions.
  static const int64_t kSumCols[][2] = {{131072, 64}, {32768, 128}, {8192, 256},
                                        {1000, 33},   {257, 64},    {40000, 5}};
  for (size_t k = 0; k < sizeof(kSumCols) / sizeof(kSumCols[0]); ++k) {
    bool red[2] = {true, false};
    add_case("colsum_s32", 2, kSumCols[k], red, K_SUM_S32, 1, NULL);
    if (k < 3) add_case("colsum_f32", 2, kSumCols[k], red, K_SUM_F32, 1, NULL);
  }
  {
    bool red[2] = {true, false};
    int64_t d[2] = {131072, 64};
    // Fused producers: batch norm's columns, a full sum.
    add_case("fz_colsum_f32", 2, d, red, K_SUM_F32, 1, NULL);
    g_cases[g_ncases - 1].fused = true;
    int64_t dd[2] = {8192, 256};
    add_case("fz_colsum_s32", 2, dd, red, K_SUM_S32, 1, NULL);
    g_cases[g_ncases - 1].fused = true;
    add_case("colsum_nobatch", 2, d, red, K_SUM_S32, 1,
             "IRON_CUDA_REDUCE_BATCH=0");
  }
  static const int64_t kFull[] = {4095, 4096, 8193, 1 << 20, 1000003};
  for (size_t k = 0; k < sizeof(kFull) / sizeof(kFull[0]); ++k) {
    bool r1[1] = {true};
    add_case("sum_s32", 1, &kFull[k], r1, K_SUM_S32, 1, NULL);
  }
  {
    bool r1[1] = {true};
    int64_t n = 1 << 20;
    add_case("sum_f32", 1, &n, r1, K_SUM_F32, 1, NULL);
    int64_t d[2] = {3, 100003};
    bool red[2] = {false, true};
    add_case("rowsum_s32", 2, d, red, K_SUM_S32, 1, NULL);
  }
}

static void test_shapes(void) {
  if (!cuda_emu_have_cxx()) {
    fprintf(stderr, "  no C++ compiler: skipped\n");
    return;
  }
  g_ncases = 0;
  build_cases();
  const char **srcs = malloc(sizeof(char *) * (size_t)g_ncases);
  int nsrc = 0;
  for (int i = 0; i < g_ncases; ++i) {
    setup_case(&g_cases[i]);
    gen_case(&g_cases[i]);
    if (g_cases[i].gen_ok) srcs[nsrc++] = g_cases[i].src;
  }
  cuda_emu_lib_t lib;
  bool built = cuda_emu_build_mt(srcs, nsrc, iron_cuda_prelude(), &lib);
  CHECK(built);
  free(srcs);
  for (int i = 0; built && i < g_ncases; ++i) {
    rcase_t *c = &g_cases[i];
    if (!c->gen_ok) continue;
    bool ok = launch(&lib, c, c->out) && launch(&lib, c, c->out2);
    if (!ok) fprintf(stderr, "  %s: launch failed\n", c->name);
    CHECK(ok);
    if (ok) check_case(c);
  }
  if (built) cuda_emu_close(&lib);
  for (int i = 0; i < g_ncases; ++i) {
    rcase_t *c = &g_cases[i];
    for (uint32_t k = 0; k < c->num; ++k) {
      free(c->in[k]);
      free(c->init[k]);
      free(c->out[k]);
      free(c->out2[k]);
      free(c->want[k]);
    }
    free(c->src);
  }
  fprintf(stderr, "  %d reduce kernels emulated\n", g_ncases);
}

// reduce_window of 12 operands (more than the 8 the CUDA device once
// took): the argmax-with-payloads body over sliding windows of 7 along
// dim 1 of [3, 50] (padding 3 each side), against the sequential fold of
// each window's real elements from the init values.
static void test_window_operands(void) {
  if (!cuda_emu_have_cxx()) return;
  rcase_t c;
  memset(&c, 0, sizeof(c));
  c.kind = K_ORDERED;
  c.num = 12;
  c.rank = 2;
  c.dims[0] = 3;
  c.dims[1] = 50;
  c.dts[0] = IRON_DTYPE_F32;
  c.dts[1] = IRON_DTYPE_S32;
  for (uint32_t i = 2; i < c.num; ++i)
    c.dts[i] = kPayload[(i - 2) % (sizeof(kPayload) / sizeof(kPayload[0]))];
  snprintf(c.name, sizeof(c.name), "window12");
  iron_cuda_window_t w;
  memset(&w, 0, sizeof(w));
  w.rank = 2;
  for (int d = 0; d < 2; ++d) {
    w.in_dims[d] = w.out_dims[d] = c.dims[d];
    w.wdims[d] = d == 1 ? 7 : 1;
    w.strides[d] = w.base_dil[d] = w.win_dil[d] = 1;
    w.pad_lo[d] = d == 1 ? 3 : 0;
  }
  rb_t *body = ordered_body(&c);
  char *src = NULL;
  unsigned grid = 0;
  iron_status_t st = iron_cuda_gen_reduce_window(
      c.name, &w, c.num, c.dts, &(iron_region_t){.ir = &body->region}, &src,
      &grid);
  free(body);
  CHECK_OK(st);
  if (st) return;
  const int64_t n = 150;
  void *in[MAXN], *init[MAXN], *out[MAXN];
  g_seed = 12345;
  for (uint32_t i = 0; i < c.num; ++i) {
    size_t es = iron_dtype_size(c.dts[i]);
    in[i] = calloc(n, es);
    init[i] = calloc(1, 8);
    out[i] = calloc(n, es);
  }
  float *v = in[0];
  for (int64_t i = 0; i < n; ++i) {
    v[i] = value_at(i / 50 == 1 ? 3 : 4);
    ((int32_t *)in[1])[i] = (int32_t)(i % 50);
    for (uint32_t k = 2; k < c.num; ++k)
      store(c.dts[k], in[k], i, (double)((i * 13 + k * 5) % 90));
  }
  store(c.dts[0], init[0], 0, -INFINITY);
  for (uint32_t k = 1; k < c.num; ++k)
    store(c.dts[k], init[k], 0, (double)(k == 1 ? 0 : 100 + k));
  cuda_emu_lib_t lib;
  const char *srcs[1] = {src};
  bool built = cuda_emu_build_mt(srcs, 1, iron_cuda_prelude(), &lib);
  CHECK(built);
  void *ptrs[3 * MAXN], *args[3 * MAXN];
  for (uint32_t i = 0; i < c.num; ++i) {
    ptrs[i] = in[i];
    ptrs[c.num + i] = init[i];
    ptrs[2 * c.num + i] = out[i];
  }
  for (uint32_t i = 0; i < 3 * c.num; ++i) args[i] = &ptrs[i];
  bool ok = built && cuda_emu_launch(&lib, c.name, grid, 256, args) == 0;
  CHECK(ok);
  int bad = 0;
  for (int64_t o = 0; ok && o < n; ++o) {
    int64_t row = o / 50, col = o % 50;
    float av = -INFINITY;
    int32_t ai = 0;
    int64_t srcel = -1;
    for (int64_t k = col - 3; k <= col + 3; ++k) {
      if (k < 0 || k >= 50) continue;
      bool keepv;
      if (!ref_step(&av, &ai, v[row * 50 + k], (int32_t)k, c.num, &keepv))
        srcel = row * 50 + k;
    }
    if (memcmp(&((float *)out[0])[o], &av, 4) != 0 && !(av != av)) bad++;
    if (((int32_t *)out[1])[o] != ai) bad++;
    for (uint32_t k = 2; k < c.num; ++k) {
      size_t es = iron_dtype_size(c.dts[k]);
      const char *want = srcel < 0 ? (const char *)init[k]
                                   : (const char *)in[k] + (size_t)srcel * es;
      if (memcmp((const char *)out[k] + (size_t)o * es, want, es) != 0) bad++;
    }
  }
  CHECK_EQ_INT(bad, 0);
  if (built) cuda_emu_close(&lib);
  for (uint32_t i = 0; i < c.num; ++i) {
    free(in[i]);
    free(init[i]);
    free(out[i]);
  }
  free(src);
}

static const iron_test_case_t kTests[] = {
    {"reduce_shapes", test_shapes},
    {"window_operands", test_window_operands},
};
IRON_TEST_MAIN(kTests)
