// stablehlo.reduce_window and stablehlo.select_and_scatter on the host.
//
// Semantics (checked against XLA:CPU through jax): the input is conceptually
// base-dilated (holes between elements) and padded; a window slides over it.
// Padding and holes are *skipped*, not combined with the init value: each
// result is body(...body(body(init, x0), x1)..., xk) over the real elements
// of the window in row-major window order. select_and_scatter picks, per
// window, the first element e such that select(e, later) holds for every
// later candidate (the running choice is replaced when select(cur, cand) is
// false) and adds source into that position with the scatter body.
//
// Geometry: iron_window_plan_t (src/device/plans/window_plan.h), read and
// validated at prepare in O(rank). The valid input offsets of a window are
// derived when the kernel runs, dim by dim, and visited in row-major window
// order as runs along the last dim, so nothing is proportional to the
// number of outputs or to the window's size (issue 13: per-output offset
// lists built at prepare took ~1 GB for a sliding max over 2^20 elements).
// Bodies that are one associative op run typed loops; any other body goes
// through ctx->call_region (vectorized over all outputs when element-wise).
// IRON_HOST_WINDOW_FAST=0 disables the typed loops (read at prepare).
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cplx.h"
#include "base/half.h"
#include "device/host/ew_common.h"
#include "device/host/host_kernel.h"
#include "device/host/shape_copy.h"
#include "device/plans/window_plan.h"

#define WIN_MAX_INPUTS 16

// acc = fold of x[offs[0..n) + shift] into acc (the storage type; init on
// entry).
typedef void (*win_fast_fn_t)(const void *x, const int64_t *offs, int64_t n,
                              int64_t shift, void *acc);

static bool fast_enabled(void) {
  const char *e = getenv("IRON_HOST_WINDOW_FAST");
  return !(e && e[0] == '0');
}

// The valid offsets of one window at a time, in per-thread scratch
// bounded by the input's dims and WIN_FLAT: the per-dim lists (sum of
// max_valid), the product of all dims but the last (when it has at most
// WIN_FLAT entries) and a run buffer. A window is handed out as runs
// `offs[0..m) + shift`: the whole window at once where it fits, else one
// run along the last dim per combination of the other dims. Windows are
// visited in order, so a dim's list (and the product) is recomputed only
// when that dim's coordinate changes.
#define WIN_FLAT 4096
typedef struct win_walk {
  const iron_window_plan_t *p;
  int64_t *list[IRON_MAX_RANK];  // valid offsets per dim of the window
  int64_t count[IRON_MAX_RANK];
  int64_t at[IRON_MAX_RANK];  // window coordinate of each list (-1: none)
  int64_t *outer;   // product of dims 0..rank-2 (WIN_FLAT entries)
  int64_t nouter;   // its size, -1 when larger than WIN_FLAT
  bool outer_stale;
  int64_t *run;     // room for WIN_FLAT offsets
  int64_t *mem;
} win_walk_t;

static bool walk_init(win_walk_t *w, const iron_window_plan_t *p) {
  memset(w, 0, sizeof(*w));
  w->p = p;
  int64_t total = 2 * WIN_FLAT + 1;
  for (int32_t d = 0; d < p->rank; ++d) total += p->max_valid[d];
  w->mem = malloc(sizeof(int64_t) * (size_t)total);
  if (!w->mem) return false;
  int64_t *m = w->mem;
  for (int32_t d = 0; d < p->rank; ++d) {
    w->list[d] = m;
    m += p->max_valid[d];
    w->at[d] = -1;
  }
  w->outer = m;
  w->run = m + WIN_FLAT;
  w->outer_stale = true;
  return true;
}

static void walk_free(win_walk_t *w) { free(w->mem); }

// Sets up window o (flat over out_dims); false when it reads no element.
static bool walk_start(win_walk_t *w, int64_t o) {
  const iron_window_plan_t *p = w->p;
  bool any = true;
  for (int32_t d = p->rank - 1; d >= 0; --d) {
    int64_t od = o % p->out_dims[d];
    o /= p->out_dims[d];
    if (od != w->at[d]) {
      w->count[d] = iron_window_plan_dim_offsets(p, d, od, w->list[d]);
      w->at[d] = od;
      if (d < p->rank - 1) w->outer_stale = true;
    }
    any = any && w->count[d] > 0;
  }
  return any;
}

// The product of the lists of dims 0..r-2 into w->outer (last dim
// fastest), or nouter = -1 when it has more than WIN_FLAT entries.
static void walk_outer(win_walk_t *w) {
  int32_t r = w->p->rank;
  int64_t total = 1;
  for (int32_t d = 0; d < r - 1 && total <= WIN_FLAT; ++d)
    total *= w->count[d];
  w->outer_stale = false;
  if (total > WIN_FLAT) {
    w->nouter = -1;
    return;
  }
  int64_t n = 1;
  w->outer[0] = 0;
  for (int32_t d = 0; d < r - 1; ++d) {
    const int64_t *l = w->list[d];
    int64_t m = w->count[d];
    if (m == 1) {
      for (int64_t i = 0; i < n; ++i) w->outer[i] += l[0];
      continue;
    }
    // In place, from the end: entry i's block lies at or after i.
    for (int64_t i = n - 1; i >= 0; --i) {
      int64_t b = w->outer[i];
      for (int64_t j = m - 1; j >= 0; --j) w->outer[i * m + j] = b + l[j];
    }
    n *= m;
  }
  w->nouter = n;
}

// Calls fn(offs, m, shift, arg) for the started window's valid offsets
// (offs[i] + shift), in row-major window order; stops early when fn
// returns false (and then returns false).
typedef bool (*win_run_fn_t)(const int64_t *offs, int64_t m, int64_t shift,
                             void *arg);
static bool walk_runs(win_walk_t *w, win_run_fn_t fn, void *arg) {
  int32_t r = w->p->rank;
  if (r == 0) {
    w->run[0] = 0;
    return fn(w->run, 1, 0, arg);
  }
  const int64_t *last = w->list[r - 1];
  int64_t m = w->count[r - 1];
  if (r == 1) return fn(last, m, 0, arg);
  if (w->outer_stale) walk_outer(w);
  int64_t no = w->nouter;
  if (no >= 0) {
    if (m == 1) return fn(w->outer, no, last[0], arg);
    if (no == 1) return fn(last, m, w->outer[0], arg);
    if (no * m <= WIN_FLAT) {
      for (int64_t i = 0; i < no; ++i)
        for (int64_t j = 0; j < m; ++j) w->run[i * m + j] = w->outer[i] + last[j];
      return fn(w->run, no * m, 0, arg);
    }
    for (int64_t i = 0; i < no; ++i)
      if (!fn(last, m, w->outer[i], arg)) return false;
    return true;
  }
  int64_t idx[IRON_MAX_RANK] = {0};
  for (;;) {
    int64_t base = 0;
    for (int32_t d = 0; d < r - 1; ++d) base += w->list[d][idx[d]];
    if (!fn(last, m, base, arg)) return false;
    int32_t d = r - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < w->count[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return true;
  }
}

// The op kind when the region is `return op(arg0, arg1)` (either order) on
// scalars of `dtype`, else IRON_OP_UNKNOWN. For compare, *out_swapped tells
// whether the operands are (arg1, arg0).
static iron_op_kind_t single_op_body(const iron_ir_region_t *r,
                                     iron_dtype_t dtype,
                                     const iron_ir_op_t **out_op,
                                     bool *out_swapped) {
  if (!r || r->num_blocks != 1) return IRON_OP_UNKNOWN;
  const iron_ir_block_t *b = &r->blocks[0];
  if (b->num_args != 2 || b->num_ops != 2) return IRON_OP_UNKNOWN;
  const iron_ir_op_t *op = b->ops[0], *ret = b->ops[1];
  if ((ret->kind != IRON_OP_RETURN && ret->kind != IRON_OP_FUNC_RETURN) ||
      ret->num_operands != 1 || op->num_results != 1 ||
      ret->operands[0] != &op->results[0] || op->num_operands != 2)
    return IRON_OP_UNKNOWN;
  const iron_ir_value_t *a0 = &b->args[0], *a1 = &b->args[1];
  bool swapped = false;
  if (op->operands[0] == a0 && op->operands[1] == a1) swapped = false;
  else if (op->operands[0] == a1 && op->operands[1] == a0) swapped = true;
  else return IRON_OP_UNKNOWN;
  for (int i = 0; i < 2; ++i) {
    const iron_ir_type_t *at = b->args[i].type;
    if (!at || at->kind != IRON_TYPE_TENSOR || at->rank != 0 ||
        at->dtype != dtype)
      return IRON_OP_UNKNOWN;
  }
  const iron_ir_type_t *t = op->results[0].type;
  if (!t || t->kind != IRON_TYPE_TENSOR || t->rank != 0) return IRON_OP_UNKNOWN;
  if (op->kind != IRON_OP_COMPARE && t->dtype != dtype) return IRON_OP_UNKNOWN;
  if (out_op) *out_op = op;
  if (out_swapped) *out_swapped = swapped;
  return op->kind;
}

// ---------------------------------------------------------------------------
// Typed reduce_window loops.

#define ADD_(a, b) ((a) + (b))
#define MUL_(a, b) ((a) * (b))
#define AND_(a, b) ((a) & (b))
#define OR_(a, b) ((a) | (b))
#define XOR_(a, b) ((a) ^ (b))
#define IMAX_(a, b) ((a) > (b) ? (a) : (b))
#define IMIN_(a, b) ((a) < (b) ? (a) : (b))
// XLA max/min propagate NaN, and of +0 and -0 max gives +0 and min -0 in
// either order (measured: XLA:CPU's cummax of [0, -0] is [0, 0]).
#define FMAX_(a, b)                                              \
  (((a) > (b) || (a) != (a) || ((a) == (b) && !__builtin_signbit(a))) \
       ? (a)                                                     \
       : (b))
#define FMIN_(a, b)                                              \
  (((a) < (b) || (a) != (a) || ((a) == (b) && __builtin_signbit(a))) \
       ? (a)                                                     \
       : (b))
#define ID_(x) (x)
// Stores of max/min results while the host flushes denormals: XLA:CPU's
// maxss/minss return a denormal operand as zero. The compares already run
// with denormals read as zero (the job's FP environment), so flushing the
// winner equals flushing every operand, ties included.
#define DAZ_F32_(x) (iron_ew_flush_enabled() ? ew_dazf(x) : (x))
#define DAZ_F64_(x) (iron_ew_flush_enabled() ? ew_daz(x) : (x))
#define DAZ_BF16_(x) iron_f32_to_bf16(DAZ_F32_(x))

// The accumulator round-trips through the storage type between runs:
// exact, since every op's result is rounded to that type anyway (halves) or
// computed in it (the rest).
#define DEF_FAST(NAME, T, ACC, LOAD, STORE, OP)                             \
  static void NAME(const void *xv, const int64_t *offs, int64_t n,          \
                   int64_t shift, void *accv) {                             \
    const T *x = (const T *)xv + shift;                                     \
    ACC acc = (ACC)LOAD(((const T *)accv)[0]);                              \
    for (int64_t k = 0; k < n; ++k) {                                       \
      ACC v = (ACC)LOAD(x[offs[k]]);                                        \
      acc = OP(acc, v);                                                     \
    }                                                                       \
    *(T *)accv = (T)STORE(acc);                                             \
  }

// Integers: add/mul wrap in the unsigned type; bit ops on the unsigned type;
// max/min on the native type.
#define DEF_INT(SUF, T, UT)                                         \
  DEF_FAST(f_add_##SUF, T, UT, ID_, ID_, ADD_)                      \
  DEF_FAST(f_mul_##SUF, T, UT, ID_, ID_, MUL_)                      \
  DEF_FAST(f_and_##SUF, T, UT, ID_, ID_, AND_)                      \
  DEF_FAST(f_or_##SUF, T, UT, ID_, ID_, OR_)                        \
  DEF_FAST(f_xor_##SUF, T, UT, ID_, ID_, XOR_)                      \
  DEF_FAST(f_max_##SUF, T, T, ID_, ID_, IMAX_)                      \
  DEF_FAST(f_min_##SUF, T, T, ID_, ID_, IMIN_)

DEF_INT(s8, int8_t, uint8_t)
DEF_INT(s16, int16_t, uint16_t)
DEF_INT(s32, int32_t, uint32_t)
DEF_INT(s64, int64_t, uint64_t)
DEF_INT(u8, uint8_t, uint8_t)
DEF_INT(u16, uint16_t, uint16_t)
DEF_INT(u32, uint32_t, uint32_t)
DEF_INT(u64, uint64_t, uint64_t)

#define DEF_FLT(SUF, T, ACC, LOAD, STORE, STOREZ)            \
  DEF_FAST(f_add_##SUF, T, ACC, LOAD, STORE, ADD_)           \
  DEF_FAST(f_mul_##SUF, T, ACC, LOAD, STORE, MUL_)           \
  DEF_FAST(f_max_##SUF, T, ACC, LOAD, STOREZ, FMAX_)         \
  DEF_FAST(f_min_##SUF, T, ACC, LOAD, STOREZ, FMIN_)

DEF_FLT(f32, float, float, ID_, ID_, DAZ_F32_)
DEF_FLT(f64, double, double, ID_, ID_, DAZ_F64_)
// Half types: XLA:CPU computes each body op in f32 and rounds its result to
// the half type (the reduce_window stays in the half type), so do we.
#define F16R_(x) iron_f16_to_f32(iron_f32_to_f16(x))
#define BF16R_(x) iron_bf16_to_f32(iron_f32_to_bf16(x))
#define ADD_F16_(a, b) F16R_((a) + (b))
#define MUL_F16_(a, b) F16R_((a) * (b))
#define ADD_BF16_(a, b) BF16R_((a) + (b))
#define MUL_BF16_(a, b) BF16R_((a) * (b))

#define DEF_HALF(SUF, LOAD, STORE, STOREZ, ADD, MUL)                   \
  DEF_FAST(f_add_##SUF, uint16_t, float, LOAD, STORE, ADD)            \
  DEF_FAST(f_mul_##SUF, uint16_t, float, LOAD, STORE, MUL)            \
  DEF_FAST(f_max_##SUF, uint16_t, float, LOAD, STOREZ, FMAX_)         \
  DEF_FAST(f_min_##SUF, uint16_t, float, LOAD, STOREZ, FMIN_)

// (f16 values are normal in f32: nothing to flush.)
DEF_HALF(f16, iron_f16_to_f32, iron_f32_to_f16, iron_f32_to_f16, ADD_F16_,
         MUL_F16_)
DEF_HALF(bf16, iron_bf16_to_f32, iron_f32_to_bf16, DAZ_BF16_, ADD_BF16_,
         MUL_BF16_)

#define DEF_CPLX(SUF, F)                                                   \
  static void f_add_##SUF(const void *xv, const int64_t *offs, int64_t n,  \
                          int64_t shift, void *outv) {                     \
    const F *x = (const F *)xv + 2 * shift, *in = outv;                    \
    F re = in[0], im = in[1];                                              \
    for (int64_t k = 0; k < n; ++k) {                                      \
      re += x[2 * offs[k]];                                                \
      im += x[2 * offs[k] + 1];                                            \
    }                                                                      \
    ((F *)outv)[0] = re;                                                   \
    ((F *)outv)[1] = im;                                                   \
  }                                                                        \
  static void f_mul_##SUF(const void *xv, const int64_t *offs, int64_t n,  \
                          int64_t shift, void *outv) {                     \
    const F *x = (const F *)xv + 2 * shift, *in = outv;                    \
    F re = in[0], im = in[1];                                              \
    for (int64_t k = 0; k < n; ++k) {                                      \
      F br = x[2 * offs[k]], bi = x[2 * offs[k] + 1];                      \
      F nr = re * br - im * bi;                                            \
      im = re * bi + im * br;                                              \
      re = nr;                                                             \
    }                                                                      \
    ((F *)outv)[0] = re;                                                   \
    ((F *)outv)[1] = im;                                                   \
  }

DEF_CPLX(c64, float)
DEF_CPLX(c128, double)

// pred: and/or/xor/max(=or)/min(=and) on 0/1 bytes.
DEF_FAST(f_and_pred, uint8_t, uint8_t, ID_, ID_, AND_)
DEF_FAST(f_or_pred, uint8_t, uint8_t, ID_, ID_, OR_)
DEF_FAST(f_xor_pred, uint8_t, uint8_t, ID_, ID_, XOR_)

#define PICK_INT(SUF)                                      \
  switch (kind) {                                          \
    case IRON_OP_ADD: return f_add_##SUF;                  \
    case IRON_OP_MULTIPLY: return f_mul_##SUF;             \
    case IRON_OP_AND: return f_and_##SUF;                  \
    case IRON_OP_OR: return f_or_##SUF;                    \
    case IRON_OP_XOR: return f_xor_##SUF;                  \
    case IRON_OP_MAXIMUM: return f_max_##SUF;              \
    case IRON_OP_MINIMUM: return f_min_##SUF;              \
    default: return NULL;                                  \
  }
#define PICK_FLT(SUF)                                      \
  switch (kind) {                                          \
    case IRON_OP_ADD: return f_add_##SUF;                  \
    case IRON_OP_MULTIPLY: return f_mul_##SUF;             \
    case IRON_OP_MAXIMUM: return f_max_##SUF;              \
    case IRON_OP_MINIMUM: return f_min_##SUF;              \
    default: return NULL;                                  \
  }

static win_fast_fn_t fast_lookup(iron_op_kind_t kind, iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_PRED:
      switch (kind) {
        case IRON_OP_AND: case IRON_OP_MINIMUM: return f_and_pred;
        case IRON_OP_OR: case IRON_OP_MAXIMUM: return f_or_pred;
        case IRON_OP_XOR: return f_xor_pred;
        default: return NULL;
      }
    case IRON_DTYPE_S8: PICK_INT(s8)
    case IRON_DTYPE_S16: PICK_INT(s16)
    case IRON_DTYPE_S32: PICK_INT(s32)
    case IRON_DTYPE_S64: PICK_INT(s64)
    case IRON_DTYPE_U8: PICK_INT(u8)
    case IRON_DTYPE_U16: PICK_INT(u16)
    case IRON_DTYPE_U32: PICK_INT(u32)
    case IRON_DTYPE_U64: PICK_INT(u64)
    case IRON_DTYPE_F16: PICK_FLT(f16)
    case IRON_DTYPE_BF16: PICK_FLT(bf16)
    case IRON_DTYPE_F32: PICK_FLT(f32)
    case IRON_DTYPE_F64: PICK_FLT(f64)
    case IRON_DTYPE_C64:
      return kind == IRON_OP_ADD ? f_add_c64
             : kind == IRON_OP_MULTIPLY ? f_mul_c64 : NULL;
    case IRON_DTYPE_C128:
      return kind == IRON_OP_ADD ? f_add_c128
             : kind == IRON_OP_MULTIPLY ? f_mul_c128 : NULL;
    default: return NULL;
  }
}

// ---------------------------------------------------------------------------
// Cumulative windows (window = whole dim n, padding n-1 low or high, stride
// 1, every other dim trivial): what jnp.cumsum & co. lower to. XLA:CPU
// rewrites these (ReduceWindowRewriter, base length 16) into a two-level
// scan: the line is padded with init to a multiple of 16, each block of 16
// is scanned in window order, the block totals get an exclusive scan (itself
// rewritten the same way when longer than 16), and each element becomes
// op(within-block, across-blocks). We compute exactly that, so float sums
// round like jax's CPU backend, in O(n). Half types compute each op in f32
// and round its result, like XLA's float normalization.

#define SCAN_BASE 16

typedef void (*win_scan_fn_t)(const void *x, void *y, int64_t n,
                              int64_t stride, const void *init, bool rev,
                              void *buf);

#define DEF_SCAN(NAME, T, ACC, LOAD, STORE, OP)                              \
  static void NAME##_rec(ACC *v, int64_t n, ACC init, bool rev, ACC *tmp) {  \
    if (n <= SCAN_BASE) {                                                    \
      if (!rev) {                                                            \
        ACC a = init;                                                        \
        for (int64_t j = 0; j < n; ++j) {                                    \
          a = OP(a, v[j]);                                                   \
          v[j] = a;                                                          \
        }                                                                    \
      } else {                                                               \
        for (int64_t j = 0; j < n; ++j) {                                    \
          ACC a = init;                                                      \
          for (int64_t k = j; k < n; ++k) a = OP(a, v[k]);                   \
          v[j] = a;                                                          \
        }                                                                    \
      }                                                                      \
      return;                                                                \
    }                                                                        \
    int64_t nb = (n + SCAN_BASE - 1) / SCAN_BASE;                            \
    ACC *col = tmp;                                                          \
    for (int64_t b = 0; b < nb; ++b) {                                       \
      ACC w[SCAN_BASE];                                                      \
      for (int64_t j = 0; j < SCAN_BASE; ++j) {                              \
        int64_t i = b * SCAN_BASE + j;                                       \
        w[j] = i < n ? v[i] : init;                                          \
      }                                                                      \
      NAME##_rec(w, SCAN_BASE, init, rev, NULL);                             \
      col[b] = rev ? w[0] : w[SCAN_BASE - 1];                                \
      for (int64_t j = 0; j < SCAN_BASE; ++j) {                              \
        int64_t i = b * SCAN_BASE + j;                                       \
        if (i < n) v[i] = w[j];                                              \
      }                                                                      \
    }                                                                        \
    NAME##_rec(col, nb, init, rev, col + nb);                                \
    for (int64_t b = 0; b < nb; ++b) {                                       \
      ACC across = rev ? (b + 1 == nb ? init : col[b + 1])                   \
                       : (b == 0 ? init : col[b - 1]);                       \
      for (int64_t j = 0; j < SCAN_BASE; ++j) {                              \
        int64_t i = b * SCAN_BASE + j;                                       \
        if (i < n) v[i] = OP(v[i], across);                                  \
      }                                                                      \
    }                                                                        \
  }                                                                          \
  static void NAME(const void *xv, void *yv, int64_t n, int64_t stride,      \
                   const void *initv, bool rev, void *buf) {                 \
    const T *x = xv;                                                         \
    T *y = yv;                                                               \
    ACC *v = buf;                                                            \
    for (int64_t i = 0; i < n; ++i) v[i] = (ACC)LOAD(x[i * stride]);         \
    NAME##_rec(v, n, (ACC)LOAD(*(const T *)initv), rev, v + n);              \
    for (int64_t i = 0; i < n; ++i) y[i * stride] = (T)STORE(v[i]);          \
  }

#define DEF_SCAN_INT(SUF, T, UT)                    \
  DEF_SCAN(s_add_##SUF, T, UT, ID_, ID_, ADD_)      \
  DEF_SCAN(s_mul_##SUF, T, UT, ID_, ID_, MUL_)      \
  DEF_SCAN(s_max_##SUF, T, T, ID_, ID_, IMAX_)      \
  DEF_SCAN(s_min_##SUF, T, T, ID_, ID_, IMIN_)

DEF_SCAN_INT(s8, int8_t, uint8_t)
DEF_SCAN_INT(s16, int16_t, uint16_t)
DEF_SCAN_INT(s32, int32_t, uint32_t)
DEF_SCAN_INT(s64, int64_t, uint64_t)
DEF_SCAN_INT(u8, uint8_t, uint8_t)
DEF_SCAN_INT(u16, uint16_t, uint16_t)
DEF_SCAN_INT(u32, uint32_t, uint32_t)
DEF_SCAN_INT(u64, uint64_t, uint64_t)

#define DEF_SCAN_FLT(SUF, T, ACC, LOAD, STORE, STOREZ)    \
  DEF_SCAN(s_add_##SUF, T, ACC, LOAD, STORE, ADD_)        \
  DEF_SCAN(s_mul_##SUF, T, ACC, LOAD, STORE, MUL_)        \
  DEF_SCAN(s_max_##SUF, T, ACC, LOAD, STOREZ, FMAX_)      \
  DEF_SCAN(s_min_##SUF, T, ACC, LOAD, STOREZ, FMIN_)

DEF_SCAN_FLT(f32, float, float, ID_, ID_, DAZ_F32_)
DEF_SCAN_FLT(f64, double, double, ID_, ID_, DAZ_F64_)
DEF_SCAN(s_add_f16, uint16_t, float, iron_f16_to_f32, iron_f32_to_f16,
         ADD_F16_)
DEF_SCAN(s_mul_f16, uint16_t, float, iron_f16_to_f32, iron_f32_to_f16,
         MUL_F16_)
DEF_SCAN(s_max_f16, uint16_t, float, iron_f16_to_f32, iron_f32_to_f16, FMAX_)
DEF_SCAN(s_min_f16, uint16_t, float, iron_f16_to_f32, iron_f32_to_f16, FMIN_)
DEF_SCAN(s_add_bf16, uint16_t, float, iron_bf16_to_f32, iron_f32_to_bf16,
         ADD_BF16_)
DEF_SCAN(s_mul_bf16, uint16_t, float, iron_bf16_to_f32, iron_f32_to_bf16,
         MUL_BF16_)
DEF_SCAN(s_max_bf16, uint16_t, float, iron_bf16_to_f32, DAZ_BF16_, FMAX_)
DEF_SCAN(s_min_bf16, uint16_t, float, iron_bf16_to_f32, DAZ_BF16_, FMIN_)

// Complex add/multiply (plain formula, like the typed reduce loops above).
#define CMULF_(a, b)                                        \
  CMPLXF(crealf(a) * crealf(b) - cimagf(a) * cimagf(b),     \
         crealf(a) * cimagf(b) + cimagf(a) * crealf(b))
#define CMUL_(a, b)                                         \
  CMPLX(creal(a) * creal(b) - cimag(a) * cimag(b),          \
        creal(a) * cimag(b) + cimag(a) * creal(b))
DEF_SCAN(s_add_c64, float _Complex, float _Complex, ID_, ID_, ADD_)
DEF_SCAN(s_mul_c64, float _Complex, float _Complex, ID_, ID_, CMULF_)
DEF_SCAN(s_add_c128, double _Complex, double _Complex, ID_, ID_, ADD_)
DEF_SCAN(s_mul_c128, double _Complex, double _Complex, ID_, ID_, CMUL_)

#define PICK_SCAN(SUF)                                     \
  switch (kind) {                                          \
    case IRON_OP_ADD: return s_add_##SUF;                  \
    case IRON_OP_MULTIPLY: return s_mul_##SUF;             \
    case IRON_OP_MAXIMUM: return s_max_##SUF;              \
    case IRON_OP_MINIMUM: return s_min_##SUF;              \
    default: return NULL;                                  \
  }

static win_scan_fn_t scan_lookup(iron_op_kind_t kind, iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_S8: PICK_SCAN(s8)
    case IRON_DTYPE_S16: PICK_SCAN(s16)
    case IRON_DTYPE_S32: PICK_SCAN(s32)
    case IRON_DTYPE_S64: PICK_SCAN(s64)
    case IRON_DTYPE_U8: PICK_SCAN(u8)
    case IRON_DTYPE_U16: PICK_SCAN(u16)
    case IRON_DTYPE_U32: PICK_SCAN(u32)
    case IRON_DTYPE_U64: PICK_SCAN(u64)
    case IRON_DTYPE_F16: PICK_SCAN(f16)
    case IRON_DTYPE_BF16: PICK_SCAN(bf16)
    case IRON_DTYPE_F32: PICK_SCAN(f32)
    case IRON_DTYPE_F64: PICK_SCAN(f64)
    case IRON_DTYPE_C64:
      return kind == IRON_OP_ADD ? s_add_c64
             : kind == IRON_OP_MULTIPLY ? s_mul_c64 : NULL;
    case IRON_DTYPE_C128:
      return kind == IRON_OP_ADD ? s_add_c128
             : kind == IRON_OP_MULTIPLY ? s_mul_c128 : NULL;
    default: return NULL;
  }
}

// ---------------------------------------------------------------------------
// reduce_window

typedef struct rw_params {
  uint32_t n;
  iron_dtype_t dtypes[WIN_MAX_INPUTS];
  iron_window_plan_t g;
  win_fast_fn_t fast;  // NULL: generic path
  // Cumulative pattern (see DEF_SCAN): lines of scan_n elements along
  // scan_dim, `scan_outer` x `scan_inner` of them.
  win_scan_fn_t scan;
  // Exclusive form (padding n, n+1 results): init then the inclusive scan
  // (forward) or the inclusive scan then init (reverse), as XLA pads it.
  int64_t scan_n, scan_outer, scan_inner;
  bool scan_rev, scan_excl;
  const iron_region_t *region;
  bool elementwise;
} rw_params_t;

static void rw_destroy(void *params) { free(params); }

// Fills p->scan when the window is a cumulative one along a single dim.
static void detect_scan(const iron_window_plan_t *g, iron_op_kind_t kind,
                        rw_params_t *p) {
  int32_t sd = -1;
  for (int32_t d = 0; d < g->rank; ++d) {
    bool trivial = g->wdims[d] == 1 && g->strides[d] == 1 &&
                   g->base_dil[d] == 1 && g->win_dil[d] == 1 &&
                   g->pad_lo[d] == 0 && g->pad_hi[d] == 0;
    if (trivial) continue;
    if (sd >= 0) return;
    sd = d;
  }
  if (sd < 0) return;
  int64_t n = g->in_dims[sd], lo = g->pad_lo[sd], hi = g->pad_hi[sd];
  if (n < 1 || g->wdims[sd] != n || g->strides[sd] != 1 ||
      g->base_dil[sd] != 1 || g->win_dil[sd] != 1)
    return;
  bool fwd = (lo == n - 1 || lo == n) && hi == 0;
  bool rev = (hi == n - 1 || hi == n) && lo == 0;
  if (!fwd && !rev) return;
  p->scan = scan_lookup(kind, p->dtypes[0]);
  p->scan_n = n;
  p->scan_rev = !fwd;
  p->scan_excl = lo + hi == n;
  p->scan_outer = p->scan_inner = 1;
  for (int32_t d = 0; d < sd; ++d) p->scan_outer *= g->in_dims[d];
  for (int32_t d = sd + 1; d < g->rank; ++d) p->scan_inner *= g->in_dims[d];
}

static iron_status_t rw_prepare(const iron_ir_op_t *op,
                                iron_region_t *const *regions,
                                void **out_params) {
  iron_window_plan_t g;
  memset(&g, 0, sizeof(g));
  IRON_RETURN_IF_ERROR_PLAIN(iron_window_plan_check_types(op, &g));
  uint32_t n = g.num_inputs;
  if (n > WIN_MAX_INPUTS)
    return iron_ir_op_unimplemented(op, "with %u inputs", n);
  IRON_RETURN_IF_ERROR_PLAIN(iron_window_plan_read_attrs(op, &g));
  IRON_RETURN_IF_ERROR_PLAIN(iron_window_plan_check_sizes(op, &g));
  rw_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->n = n;
  p->g = g;
  for (uint32_t i = 0; i < n; ++i) p->dtypes[i] = op->operands[i]->type->dtype;
  const iron_ir_region_t *ir =
      regions && regions[0] ? regions[0]->ir : &op->regions[0];
  if (n == 1 && fast_enabled()) {
    iron_op_kind_t k = single_op_body(ir, p->dtypes[0], NULL, NULL);
    p->fast = fast_lookup(k, p->dtypes[0]);
    if (p->fast) detect_scan(&p->g, k, p);
  }
  if (!p->fast) {
    if (!regions || !regions[0]) {
      rw_destroy(p);
      return iron_ir_op_unimplemented(op, "without a compiled body");
    }
    p->region = regions[0];
    p->elementwise = regions[0]->elementwise;
  }
  *out_params = p;
  return IRON_OK;
}

typedef struct rw_job {
  const rw_params_t *p;
  const void *x;
  const void *init;
  char *out;
  size_t es;
  bool failed;
} rw_job_t;

typedef struct rw_fold {
  win_fast_fn_t fn;
  const void *x;
  void *acc;
} rw_fold_t;

static bool rw_fold_run(const int64_t *offs, int64_t m, int64_t shift,
                        void *arg) {
  rw_fold_t *f = arg;
  f->fn(f->x, offs, m, shift, f->acc);
  return true;
}

static void rw_fast_task(void *arg, int64_t begin, int64_t end) {
  rw_job_t *j = arg;
  win_walk_t w;
  if (!walk_init(&w, &j->p->g)) {
    j->failed = true;  // benign race: only ever set to true
    return;
  }
  for (int64_t o = begin; o < end; ++o) {
    rw_fold_t f = {j->p->fast, j->x, j->out + (size_t)o * j->es};
    memcpy(f.acc, j->init, j->es);
    if (walk_start(&w, o)) walk_runs(&w, rw_fold_run, &f);
  }
  walk_free(&w);
}

static void rw_scan_task(void *arg, int64_t begin, int64_t end) {
  rw_job_t *j = arg;
  const rw_params_t *p = j->p;
  int64_t n = p->scan_n;
  // Values, then the block-total levels (< n/15 + 16 per level chain).
  void *buf = malloc(16 * (size_t)(n + n / 8 + 64));
  if (!buf) {
    j->failed = true;  // benign race: only ever set to true
    return;
  }
  int64_t inner = p->scan_inner, n_out = n + p->scan_excl;
  for (int64_t l = begin; l < end; ++l) {
    int64_t o = l / inner, i = l % inner;
    size_t off = (size_t)(o * n * inner + i) * j->es;
    char *y = j->out + (size_t)(o * n_out * inner + i) * j->es;
    if (p->scan_excl) {
      char *slot = p->scan_rev ? y + (size_t)(n * inner) * j->es : y;
      memcpy(slot, j->init, j->es);
      if (!p->scan_rev) y += (size_t)inner * j->es;
    }
    p->scan((const char *)j->x + off, y, n, inner, j->init, p->scan_rev, buf);
  }
  free(buf);
}

// Element-wise body: one region call per window position over all outputs;
// positions that fall on padding/holes keep the accumulator.
static iron_status_t rw_generic_vec(const iron_kernel_ctx_t *ctx,
                                    const rw_params_t *p,
                                    const iron_tensor_t *const *inputs,
                                    iron_tensor_t *const *outputs) {
  const iron_window_plan_t *g = &p->g;
  uint32_t n = p->n;
  int64_t O = g->out_count;
  int64_t *src = malloc(sizeof(int64_t) * (size_t)O + 1);
  char *xs[WIN_MAX_INPUTS] = {NULL}, *tmp[WIN_MAX_INPUTS] = {NULL};
  iron_status_t st = src ? IRON_OK
                         : IRON_ERR(RESOURCE_EXHAUSTED, "reduce_window: oom");
  for (uint32_t i = 0; i < n && !st; ++i) {
    size_t es = iron_dtype_size(p->dtypes[i]);
    xs[i] = malloc((size_t)O * es + 1);
    tmp[i] = malloc((size_t)O * es + 1);
    if (!xs[i] || !tmp[i])
      st = IRON_ERR(RESOURCE_EXHAUSTED, "reduce_window: out of memory");
    else
      iron_host_fill(ctx->pool, outputs[i]->data, O, inputs[n + i]->data, es);
  }
  iron_tensor_t tin[2 * WIN_MAX_INPUTS], tout[WIN_MAX_INPUTS];
  const iron_tensor_t *pin[2 * WIN_MAX_INPUTS];
  iron_tensor_t *pout[WIN_MAX_INPUTS];
  for (uint32_t i = 0; i < n; ++i) {
    tin[i] = iron_tensor_vector(outputs[i]->data, p->dtypes[i], O);
    tin[n + i] = iron_tensor_vector(xs[i], p->dtypes[i], O);
    tout[i] = iron_tensor_vector(tmp[i], p->dtypes[i], O);
    pin[i] = &tin[i];
    pin[n + i] = &tin[n + i];
    pout[i] = &tout[i];
  }
  // Only window positions that some output can use: per dim, k with
  // k * wdl - pad_lo <= dil_in - 1 (the first window) and
  // (out - 1) * stride + k * wdl - pad_lo >= 0 (the last one), so a window
  // far larger than the input costs its real extent, not its size.
  int64_t k[IRON_MAX_RANK], klo[IRON_MAX_RANK], khi[IRON_MAX_RANK];
  bool none = false;
  for (int32_t d = 0; d < g->rank; ++d) {
    int64_t wdl = g->win_dil[d], last = (g->out_dims[d] - 1) * g->strides[d];
    int64_t need = g->pad_lo[d] - last;  // k * wdl >= need
    klo[d] = need <= 0 ? 0 : (need + wdl - 1) / wdl;
    int64_t top = g->dil_in[d] - 1 + g->pad_lo[d];  // k * wdl <= top
    khi[d] = top < 0 ? -1 : top / wdl;
    if (khi[d] > g->wdims[d] - 1) khi[d] = g->wdims[d] - 1;
    if (klo[d] > khi[d]) none = true;
    k[d] = klo[d];
  }
  for (bool more = !none; more && !st;) {
    // src[o] = input offset of window position k for output o, or -1.
    int64_t any = 0;
    for (int64_t o = 0; o < O; ++o) {
      int64_t rem = o, off = 0;
      bool ok = true;
      for (int32_t d = g->rank - 1; d >= 0 && ok; --d) {
        int64_t od = rem % g->out_dims[d];
        rem /= g->out_dims[d];
        int64_t pos = od * g->strides[d] + k[d] * g->win_dil[d] - g->pad_lo[d];
        ok = pos >= 0 && pos < g->dil_in[d] && pos % g->base_dil[d] == 0;
        off += pos / g->base_dil[d] * g->in_strides[d];
      }
      src[o] = ok ? off : -1;
      any += ok;
    }
    if (any) {
      for (uint32_t i = 0; i < n; ++i) {
        size_t es = iron_dtype_size(p->dtypes[i]);
        const char *x = inputs[i]->data;
        char *acc = outputs[i]->data;
        for (int64_t o = 0; o < O; ++o)
          memcpy(xs[i] + (size_t)o * es,
                 src[o] >= 0 ? x + (size_t)src[o] * es : acc + (size_t)o * es,
                 es);
      }
      st = ctx->call_region(ctx, p->region, pin, pout);
      for (uint32_t i = 0; i < n && !st; ++i) {
        size_t es = iron_dtype_size(p->dtypes[i]);
        char *acc = outputs[i]->data;
        for (int64_t o = 0; o < O; ++o)
          if (src[o] >= 0)
            memcpy(acc + (size_t)o * es, tmp[i] + (size_t)o * es, es);
      }
    }
    more = false;
    for (int32_t d = g->rank - 1; d >= 0 && !more; --d) {
      if (++k[d] <= khi[d]) more = true;
      else k[d] = klo[d];
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    free(xs[i]);
    free(tmp[i]);
  }
  free(src);
  return st;
}

// Any body: one region call per element, in window order.
typedef struct rw_scalar {
  const iron_kernel_ctx_t *ctx;
  const rw_params_t *p;
  const iron_tensor_t *const *inputs;
  unsigned char acc[WIN_MAX_INPUTS][16], nacc[WIN_MAX_INPUTS][16];
  iron_status_t st;
} rw_scalar_t;

// One region call per element of the run: acc = body(acc, x[off]).
static bool rw_scalar_run(const int64_t *offs, int64_t m, int64_t shift,
                          void *arg) {
  rw_scalar_t *r = arg;
  const rw_params_t *p = r->p;
  uint32_t n = p->n;
  iron_tensor_t tin[2 * WIN_MAX_INPUTS], tout[WIN_MAX_INPUTS];
  const iron_tensor_t *pin[2 * WIN_MAX_INPUTS];
  iron_tensor_t *pout[WIN_MAX_INPUTS];
  for (uint32_t i = 0; i < n; ++i) {
    pin[i] = &tin[i];
    pin[n + i] = &tin[n + i];
    pout[i] = &tout[i];
  }
  for (int64_t e = 0; e < m && !r->st; ++e) {
    for (uint32_t i = 0; i < n; ++i) {
      size_t es = iron_dtype_size(p->dtypes[i]);
      tin[i] = iron_tensor_vector(r->acc[i], p->dtypes[i], 1);
      tin[n + i] = iron_tensor_vector(
          (char *)r->inputs[i]->data + (size_t)(offs[e] + shift) * es,
          p->dtypes[i], 1);
      tout[i] = iron_tensor_vector(r->nacc[i], p->dtypes[i], 1);
    }
    r->st = r->ctx->call_region(r->ctx, p->region, pin, pout);
    memcpy(r->acc, r->nacc, sizeof(r->acc));
  }
  return !r->st;
}

// Any body: one region call per element, in window order.
static iron_status_t rw_generic_scalar(const iron_kernel_ctx_t *ctx,
                                       const rw_params_t *p,
                                       const iron_tensor_t *const *inputs,
                                       iron_tensor_t *const *outputs) {
  uint32_t n = p->n;
  win_walk_t w;
  if (!walk_init(&w, &p->g))
    return IRON_ERR(RESOURCE_EXHAUSTED, "reduce_window: out of memory");
  rw_scalar_t r;
  r.ctx = ctx;
  r.p = p;
  r.inputs = inputs;
  r.st = IRON_OK;
  for (int64_t o = 0; o < p->g.out_count && !r.st; ++o) {
    for (uint32_t i = 0; i < n; ++i)
      memcpy(r.acc[i], inputs[n + i]->data, iron_dtype_size(p->dtypes[i]));
    if (walk_start(&w, o)) walk_runs(&w, rw_scalar_run, &r);
    for (uint32_t i = 0; i < n && !r.st; ++i) {
      size_t es = iron_dtype_size(p->dtypes[i]);
      memcpy((char *)outputs[i]->data + (size_t)o * es, r.acc[i], es);
    }
  }
  walk_free(&w);
  return r.st;
}

static iron_status_t rw_run(const iron_kernel_ctx_t *ctx, const void *params,
                            const iron_tensor_t *const *inputs,
                            iron_tensor_t *const *outputs) {
  const rw_params_t *p = params;
  if (p->g.out_count == 0) return IRON_OK;
  if (p->scan) {
    rw_job_t j = {p, inputs[0]->data, inputs[1]->data, outputs[0]->data,
                  iron_dtype_size(p->dtypes[0]), false};
    int64_t grain = 16384 / (p->scan_n + 1) + 1;
    iron_threadpool_parallel_for(ctx->pool, p->scan_outer * p->scan_inner,
                                 grain, rw_scan_task, &j);
    return j.failed ? IRON_ERR(RESOURCE_EXHAUSTED, "reduce_window: oom")
                    : IRON_OK;
  }
  if (p->fast) {
    rw_job_t j = {p, inputs[0]->data, inputs[1]->data, outputs[0]->data,
                  iron_dtype_size(p->dtypes[0]), false};
    int64_t grain = 16384 / (p->g.win_count + 1) + 1;
    iron_threadpool_parallel_for(ctx->pool, p->g.out_count, grain,
                                 rw_fast_task, &j);
    return j.failed ? IRON_ERR(RESOURCE_EXHAUSTED, "reduce_window: oom")
                    : IRON_OK;
  }
  if (!ctx->call_region)
    return IRON_ERR(FAILED_PRECONDITION, "reduce_window: no call_region");
  for (uint32_t i = 0; i < p->n; ++i)
    if (iron_dtype_size(p->dtypes[i]) > 16)
      return IRON_ERR(UNIMPLEMENTED, "reduce_window: element too large");
  if (p->elementwise) return rw_generic_vec(ctx, p, inputs, outputs);
  return rw_generic_scalar(ctx, p, inputs, outputs);
}

static const iron_kernel_t kReduceWindow = {
    .name = "reduce_window",
    .prepare = rw_prepare,
    .run = rw_run,
    .destroy = rw_destroy};

// ---------------------------------------------------------------------------
// select_and_scatter

// Continues the selection over the run offs[0..m): `best` is the offset
// chosen so far (-1: none yet); returns the new choice.
typedef int64_t (*sas_select_fn_t)(const void *x, const int64_t *offs,
                                   int64_t m, int64_t shift, int64_t best);
// out[off] = out[off] + src[s]
typedef void (*sas_scatter_fn_t)(void *out, int64_t off, const void *src,
                                 int64_t s);

#define DEF_SEL(NAME, T, CT, LOAD, CMP)                                    \
  static int64_t NAME(const void *xv, const int64_t *offs, int64_t m,      \
                      int64_t shift, int64_t best) {                       \
    const T *x = xv;                                                       \
    if (m == 0) return best;                                               \
    int64_t e = 0;                                                         \
    if (best < 0) best = offs[e++] + shift;                                \
    CT cur = (CT)LOAD(x[best]);                                            \
    for (; e < m; ++e) {                                                   \
      CT c = (CT)LOAD(x[offs[e] + shift]);                                 \
      if (!(cur CMP c)) {                                                  \
        cur = c;                                                           \
        best = offs[e] + shift;                                            \
      }                                                                    \
    }                                                                      \
    return best;                                                           \
  }
#define DEF_SEL4(SUF, T, CT, LOAD)          \
  DEF_SEL(sel_ge_##SUF, T, CT, LOAD, >=)    \
  DEF_SEL(sel_gt_##SUF, T, CT, LOAD, >)     \
  DEF_SEL(sel_le_##SUF, T, CT, LOAD, <=)    \
  DEF_SEL(sel_lt_##SUF, T, CT, LOAD, <)

#define DEF_SCAT(NAME, T, ACC, LOAD, STORE)                                \
  static void NAME(void *outv, int64_t off, const void *srcv, int64_t s) { \
    T *out = outv;                                                         \
    const T *src = srcv;                                                   \
    ACC a = (ACC)LOAD(out[off]);                                           \
    ACC b = (ACC)LOAD(src[s]);                                             \
    out[off] = (T)STORE(a + b);                                            \
  }
#define DEF_SAS(SUF, T, CT, LOAD, STORE) \
  DEF_SEL4(SUF, T, CT, LOAD)             \
  DEF_SCAT(scat_##SUF, T, CT, LOAD, STORE)

DEF_SAS(f32, float, float, ID_, ID_)
DEF_SAS(f64, double, double, ID_, ID_)
DEF_SAS(f16, uint16_t, float, iron_f16_to_f32, iron_f32_to_f16)
DEF_SAS(bf16, uint16_t, float, iron_bf16_to_f32, iron_f32_to_bf16)
DEF_SEL4(s8, int8_t, int8_t, ID_)
DEF_SEL4(s16, int16_t, int16_t, ID_)
DEF_SEL4(s32, int32_t, int32_t, ID_)
DEF_SEL4(s64, int64_t, int64_t, ID_)
DEF_SEL4(u8, uint8_t, uint8_t, ID_)
DEF_SEL4(u16, uint16_t, uint16_t, ID_)
DEF_SEL4(u32, uint32_t, uint32_t, ID_)
DEF_SEL4(u64, uint64_t, uint64_t, ID_)
DEF_SCAT(scat_s8, int8_t, uint8_t, ID_, ID_)
DEF_SCAT(scat_s16, int16_t, uint16_t, ID_, ID_)
DEF_SCAT(scat_s32, int32_t, uint32_t, ID_, ID_)
DEF_SCAT(scat_s64, int64_t, uint64_t, ID_, ID_)
DEF_SCAT(scat_u8, uint8_t, uint8_t, ID_, ID_)
DEF_SCAT(scat_u16, uint16_t, uint16_t, ID_, ID_)
DEF_SCAT(scat_u32, uint32_t, uint32_t, ID_, ID_)
DEF_SCAT(scat_u64, uint64_t, uint64_t, ID_, ID_)

#define SAS_CASE(DT, SUF)                                           \
  case IRON_DTYPE_##DT:                                             \
    *out_scatter = scat_##SUF;                                      \
    return dir == IRON_CMP_GE   ? sel_ge_##SUF                      \
           : dir == IRON_CMP_GT ? sel_gt_##SUF                      \
           : dir == IRON_CMP_LE ? sel_le_##SUF                      \
           : dir == IRON_CMP_LT ? sel_lt_##SUF                      \
                                : NULL;

static sas_select_fn_t sas_lookup(iron_dtype_t dt, int32_t dir,
                                  sas_scatter_fn_t *out_scatter) {
  switch (dt) {
    SAS_CASE(F32, f32)
    SAS_CASE(F64, f64)
    SAS_CASE(F16, f16)
    SAS_CASE(BF16, bf16)
    SAS_CASE(S8, s8)
    SAS_CASE(S16, s16)
    SAS_CASE(S32, s32)
    SAS_CASE(S64, s64)
    SAS_CASE(U8, u8)
    SAS_CASE(U16, u16)
    SAS_CASE(U32, u32)
    SAS_CASE(U64, u64)
    default: return NULL;
  }
}

typedef struct sas_params {
  iron_dtype_t dtype;
  iron_window_plan_t g;  // over the operand; out_dims = source dims
  sas_select_fn_t select;  // fast path (with scatter) or NULL
  sas_scatter_fn_t scatter;
  const iron_region_t *select_region, *scatter_region;
} sas_params_t;

static void sas_destroy(void *params) { free(params); }

static int32_t flip_dir(int32_t dir) {
  switch (dir) {
    case IRON_CMP_GE: return IRON_CMP_LE;
    case IRON_CMP_LE: return IRON_CMP_GE;
    case IRON_CMP_GT: return IRON_CMP_LT;
    case IRON_CMP_LT: return IRON_CMP_GT;
    default: return dir;
  }
}

static iron_status_t sas_prepare(const iron_ir_op_t *op,
                                 iron_region_t *const *regions,
                                 void **out_params) {
  iron_window_plan_t g;
  IRON_RETURN_IF_ERROR_PLAIN(iron_window_plan_read(op, &g));
  const iron_ir_type_t *ot = g.in, *rt = op->results[0].type;
  if (iron_dtype_size(rt->dtype) > 16)
    return iron_ir_op_unimplemented(op, "for dtype %s",
                                    iron_dtype_name(rt->dtype));
  sas_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->g = g;
  p->dtype = rt->dtype;
  const iron_ir_region_t *sel_ir =
      regions && regions[0] ? regions[0]->ir : &op->regions[0];
  const iron_ir_region_t *sc_ir =
      regions && regions[1] ? regions[1]->ir : &op->regions[1];
  const iron_ir_op_t *cmp = NULL;
  bool swapped = false;
  if (fast_enabled() &&
      single_op_body(sel_ir, ot->dtype, &cmp, &swapped) == IRON_OP_COMPARE &&
      single_op_body(sc_ir, rt->dtype, NULL, NULL) == IRON_OP_ADD &&
      cmp->results[0].type->dtype == IRON_DTYPE_PRED) {
    int32_t dir = iron_ir_op_enum(cmp, "comparison_direction", -1);
    int32_t ctype = iron_ir_op_enum(cmp, "compare_type",
                                    IRON_CMP_TYPE_NOTYPE);
    bool is_f = iron_dtype_is_float(ot->dtype);
    bool ctype_ok = is_f ? (ctype == IRON_CMP_TYPE_FLOAT ||
                            ctype == IRON_CMP_TYPE_NOTYPE)
                         : ctype != IRON_CMP_TYPE_TOTALORDER &&
                               ctype != IRON_CMP_TYPE_FLOAT &&
                               !(ctype == IRON_CMP_TYPE_SIGNED &&
                                 iron_dtype_is_unsigned_int(ot->dtype)) &&
                               !(ctype == IRON_CMP_TYPE_UNSIGNED &&
                                 iron_dtype_is_signed_int(ot->dtype));
    if (swapped) dir = flip_dir(dir);
    if (ctype_ok) p->select = sas_lookup(ot->dtype, dir, &p->scatter);
  }
  if (!p->select) {
    if (!regions || !regions[0] || !regions[1]) {
      sas_destroy(p);
      return iron_ir_op_unimplemented(op, "without compiled bodies");
    }
    p->select_region = regions[0];
    p->scatter_region = regions[1];
  }
  *out_params = p;
  return IRON_OK;
}

typedef struct sas_pick {
  const iron_kernel_ctx_t *ctx;
  const sas_params_t *p;
  const char *x;
  int64_t best;  // offset chosen so far, -1: none
  iron_status_t st;
} sas_pick_t;

static bool sas_pick_run(const int64_t *offs, int64_t m, int64_t shift,
                         void *arg) {
  sas_pick_t *k = arg;
  const sas_params_t *p = k->p;
  if (p->select) {
    k->best = p->select(k->x, offs, m, shift, k->best);
    return true;
  }
  size_t es = iron_dtype_size(p->dtype);
  int64_t e = 0;
  if (k->best < 0 && m > 0) k->best = offs[e++] + shift;
  unsigned char pred = 0;
  for (; e < m && !k->st; ++e) {
    iron_tensor_t a =
        iron_tensor_vector((char *)k->x + (size_t)k->best * es, p->dtype, 1);
    iron_tensor_t c =
        iron_tensor_vector((char *)k->x + (size_t)(offs[e] + shift) * es,
                           p->dtype, 1);
    iron_tensor_t r = iron_tensor_vector(&pred, IRON_DTYPE_PRED, 1);
    const iron_tensor_t *in2[2] = {&a, &c};
    iron_tensor_t *o1[1] = {&r};
    k->st = k->ctx->call_region(k->ctx, p->select_region, in2, o1);
    if (!k->st && !pred) k->best = offs[e] + shift;
  }
  return !k->st;
}

static iron_status_t sas_run(const iron_kernel_ctx_t *ctx, const void *params,
                             const iron_tensor_t *const *inputs,
                             iron_tensor_t *const *outputs) {
  const sas_params_t *p = params;
  const iron_window_plan_t *g = &p->g;
  size_t es = iron_dtype_size(p->dtype);
  char *out = outputs[0]->data;
  const char *x = inputs[0]->data, *src = inputs[1]->data;
  iron_host_fill(ctx->pool, out, outputs[0]->count, inputs[2]->data, es);
  if (g->out_count == 0) return IRON_OK;
  if (!p->select && !ctx->call_region)
    return IRON_ERR(FAILED_PRECONDITION, "select_and_scatter: no call_region");
  win_walk_t w;
  if (!walk_init(&w, g))
    return IRON_ERR(RESOURCE_EXHAUSTED, "select_and_scatter: out of memory");
  // Windows overlap in general, so the scatter runs serially in source order
  // (the order XLA applies the scatter combiner in).
  iron_status_t st = IRON_OK;
  for (int64_t s = 0; s < g->out_count && !st; ++s) {
    if (!walk_start(&w, s)) continue;
    sas_pick_t k = {ctx, p, x, -1, IRON_OK};
    walk_runs(&w, sas_pick_run, &k);
    st = k.st;
    if (st || k.best < 0) continue;
    if (p->select) {
      p->scatter(out, k.best, src, s);
      continue;
    }
    unsigned char res[16];
    iron_tensor_t a = iron_tensor_vector(out + (size_t)k.best * es, p->dtype, 1);
    iron_tensor_t c = iron_tensor_vector((char *)src + (size_t)s * es, p->dtype, 1);
    iron_tensor_t r = iron_tensor_vector(res, p->dtype, 1);
    const iron_tensor_t *in2[2] = {&a, &c};
    iron_tensor_t *o1[1] = {&r};
    st = ctx->call_region(ctx, p->scatter_region, in2, o1);
    if (!st) memcpy(out + (size_t)k.best * es, res, es);
  }
  walk_free(&w);
  return st;
}

static const iron_kernel_t kSelectAndScatter = {
    .name = "select_and_scatter",
    .prepare = sas_prepare,
    .run = sas_run,
    .destroy = sas_destroy};

void iron_host_register_window(iron_kernel_table_t table) {
  table[IRON_OP_REDUCE_WINDOW] = &kReduceWindow;
  table[IRON_OP_SELECT_AND_SCATTER] = &kSelectAndScatter;
}
