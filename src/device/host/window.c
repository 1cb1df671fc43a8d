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
// Geometry: per dimension and output index we precompute the list of valid
// input offsets (already times the input stride); the offsets of a whole
// window are the row-major Cartesian product of those lists. Bodies that are
// one associative op run typed loops; any other body goes through
// ctx->call_region (vectorized over all outputs when element-wise).
// IRON_HOST_WINDOW_FAST=0 disables the typed loops (read at prepare).
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cplx.h"
#include "base/half.h"
#include "device/host/host_kernel.h"
#include "device/host/shape_copy.h"

#define WIN_MAX_INPUTS 16

typedef void (*win_fast_fn_t)(const void *x, const int64_t *offs, int64_t n,
                              const void *init, void *out);

typedef struct win_geom {
  int32_t rank;
  int64_t in_dims[IRON_MAX_RANK];
  int64_t out_dims[IRON_MAX_RANK];
  int64_t out_count;
  int64_t win_count;  // product of window dims (upper bound of offsets)
  int64_t wdims[IRON_MAX_RANK];
  // Per dim d: for output index o, valid offsets list_off[d][starts[d][o] ..
  // starts[d][o+1]). list_k[d][...] is the window index of each entry.
  int64_t *starts[IRON_MAX_RANK];
  int64_t *list_off[IRON_MAX_RANK];
  int64_t *list_k[IRON_MAX_RANK];
  // The window formula per dim (for random access by window position).
  int64_t stride[IRON_MAX_RANK], wdil[IRON_MAX_RANK], pad_lo[IRON_MAX_RANK],
      bdil[IRON_MAX_RANK], dil_in[IRON_MAX_RANK], in_stride[IRON_MAX_RANK];
} win_geom_t;

static void geom_free(win_geom_t *g) {
  for (int32_t d = 0; d < g->rank; ++d) {
    free(g->starts[d]);
    free(g->list_off[d]);
    free(g->list_k[d]);
  }
}

static bool fast_enabled(void) {
  const char *e = getenv("IRON_HOST_WINDOW_FAST");
  return !(e && e[0] == '0');
}

static iron_status_t read_list(const iron_ir_op_t *op, const char *name,
                               int32_t rank, int64_t dflt, int64_t *out) {
  uint32_t n = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, name, out, IRON_MAX_RANK, &n));
  if (n == 0) {
    for (int32_t d = 0; d < rank; ++d) out[d] = dflt;
    return IRON_OK;
  }
  if ((int32_t)n != rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: %s has %u entries for rank %d",
                    op->name, name, n, rank);
  return IRON_OK;
}

// Builds the geometry for an input type and the window attributes of op.
// On error the caller still frees *g with geom_free (it is always valid).
// `allow_dilation` is false for select_and_scatter (it has none).
// Without `lists` only the output shape and counts are computed (the
// cumulative scan path needs no per-output offset lists).
static iron_status_t geom_build(const iron_ir_op_t *op,
                                const iron_ir_type_t *in, bool allow_dilation,
                                bool lists, win_geom_t *g) {
  memset(g, 0, sizeof(*g));
  int32_t rank = in->rank;
  g->rank = rank;
  int64_t wd[IRON_MAX_RANK], st[IRON_MAX_RANK], bd[IRON_MAX_RANK],
      wdl[IRON_MAX_RANK], pad[2 * IRON_MAX_RANK];
  IRON_RETURN_IF_ERROR_PLAIN(read_list(op, "window_dimensions", rank, 1, wd));
  IRON_RETURN_IF_ERROR_PLAIN(read_list(op, "window_strides", rank, 1, st));
  for (int32_t d = 0; d < rank; ++d) bd[d] = wdl[d] = 1;
  if (allow_dilation) {
    IRON_RETURN_IF_ERROR_PLAIN(read_list(op, "base_dilations", rank, 1, bd));
    IRON_RETURN_IF_ERROR_PLAIN(
        read_list(op, "window_dilations", rank, 1, wdl));
  }
  uint32_t np = 0;
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(op, "padding", pad,
                                                 2 * IRON_MAX_RANK, &np));
  if (np == 0) {
    memset(pad, 0, sizeof(pad));
  } else if ((int32_t)np != 2 * rank) {
    return IRON_ERR(INVALID_ARGUMENT, "%s: padding has %u entries for rank %d",
                    op->name, np, rank);
  }
  int64_t in_strides[IRON_MAX_RANK];
  iron_host_row_major_strides(rank, in->dims, in_strides);
  g->out_count = 1;
  g->win_count = 1;
  for (int32_t d = 0; d < rank; ++d) {
    int64_t n = in->dims[d];
    if (wd[d] < 1 || st[d] < 1 || bd[d] < 1 || wdl[d] < 1 || n < 0 ||
        wd[d] > (1 << 30) || st[d] > (1ll << 40) || bd[d] > (1 << 30) ||
        wdl[d] > (1 << 30) || llabs(pad[2 * d]) > (1ll << 40) ||
        llabs(pad[2 * d + 1]) > (1ll << 40) || n > (1ll << 40))
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad window in dim %d", op->name,
                      d);
    int64_t dil_in = n == 0 ? 0 : (n - 1) * bd[d] + 1;
    int64_t padded = dil_in + pad[2 * d] + pad[2 * d + 1];
    int64_t ext = (wd[d] - 1) * wdl[d] + 1;
    int64_t out = padded < ext ? 0 : (padded - ext) / st[d] + 1;
    g->in_dims[d] = n;
    g->out_dims[d] = out;
    g->stride[d] = st[d];
    g->wdil[d] = wdl[d];
    g->pad_lo[d] = pad[2 * d];
    g->bdil[d] = bd[d];
    g->dil_in[d] = dil_in;
    g->in_stride[d] = in_strides[d];
    g->wdims[d] = wd[d];
    if (__builtin_mul_overflow(g->out_count, out, &g->out_count) ||
        __builtin_mul_overflow(g->win_count, wd[d], &g->win_count))
      return IRON_ERR(INVALID_ARGUMENT, "%s: window too large", op->name);
    if (!lists) continue;
    int64_t cap;
    if (__builtin_mul_overflow(out, wd[d], &cap) || cap > (1ll << 32))
      return IRON_ERR(RESOURCE_EXHAUSTED, "%s: window too large", op->name);
    g->starts[d] = malloc(sizeof(int64_t) * (size_t)(out + 1));
    g->list_off[d] = malloc(sizeof(int64_t) * (size_t)(cap + 1));
    g->list_k[d] = malloc(sizeof(int64_t) * (size_t)(cap + 1));
    if (!g->starts[d] || !g->list_off[d] || !g->list_k[d])
      return IRON_ERR(RESOURCE_EXHAUSTED, "%s: out of memory", op->name);
    int64_t c = 0;
    for (int64_t o = 0; o < out; ++o) {
      g->starts[d][o] = c;
      for (int64_t k = 0; k < wd[d]; ++k) {
        int64_t pos = o * st[d] + k * wdl[d] - pad[2 * d];
        if (pos < 0 || pos >= dil_in || pos % bd[d] != 0) continue;
        g->list_off[d][c] = (pos / bd[d]) * in_strides[d];
        g->list_k[d][c] = k;
        c++;
      }
    }
    g->starts[d][out] = c;
  }
  if (lists && g->win_count > (1ll << 28))
    return IRON_ERR(RESOURCE_EXHAUSTED, "%s: window too large", op->name);
  return IRON_OK;
}

// Writes the valid input offsets of output `o` (flat) in row-major window
// order into offs (win_count entries + scratch of the same size); returns
// how many.
static int64_t geom_offsets(const win_geom_t *g, int64_t o, int64_t *offs,
                            int64_t *scratch) {
  int64_t oi[IRON_MAX_RANK];
  for (int32_t d = g->rank - 1; d >= 0; --d) {
    oi[d] = o % g->out_dims[d];
    o /= g->out_dims[d];
  }
  // Expand dim by dim, ping-ponging so the last dim lands in offs.
  int64_t *cur = (g->rank % 2) ? scratch : offs;
  int64_t *nxt = (g->rank % 2) ? offs : scratch;
  cur[0] = 0;
  int64_t n = 1;
  for (int32_t d = 0; d < g->rank; ++d) {
    const int64_t *l = g->list_off[d] + g->starts[d][oi[d]];
    int64_t m = g->starts[d][oi[d] + 1] - g->starts[d][oi[d]];
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) nxt[c++] = cur[i] + l[j];
    n = c;
    int64_t *t = cur;
    cur = nxt;
    nxt = t;
  }
  if (g->rank == 0) offs[0] = 0;
  return n;
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

#define DEF_FAST(NAME, T, ACC, LOAD, STORE, OP)                             \
  static void NAME(const void *xv, const int64_t *offs, int64_t n,          \
                   const void *initv, void *outv) {                         \
    const T *x = xv;                                                        \
    ACC acc = (ACC)LOAD(((const T *)initv)[0]);                             \
    for (int64_t k = 0; k < n; ++k) {                                       \
      ACC v = (ACC)LOAD(x[offs[k]]);                                        \
      acc = OP(acc, v);                                                     \
    }                                                                       \
    *(T *)outv = (T)STORE(acc);                                             \
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

#define DEF_FLT(SUF, T, ACC, LOAD, STORE)                    \
  DEF_FAST(f_add_##SUF, T, ACC, LOAD, STORE, ADD_)           \
  DEF_FAST(f_mul_##SUF, T, ACC, LOAD, STORE, MUL_)           \
  DEF_FAST(f_max_##SUF, T, ACC, LOAD, STORE, FMAX_)          \
  DEF_FAST(f_min_##SUF, T, ACC, LOAD, STORE, FMIN_)

DEF_FLT(f32, float, float, ID_, ID_)
DEF_FLT(f64, double, double, ID_, ID_)
// Half types: XLA:CPU computes each body op in f32 and rounds its result to
// the half type (the reduce_window stays in the half type), so do we.
#define F16R_(x) iron_f16_to_f32(iron_f32_to_f16(x))
#define BF16R_(x) iron_bf16_to_f32(iron_f32_to_bf16(x))
#define ADD_F16_(a, b) F16R_((a) + (b))
#define MUL_F16_(a, b) F16R_((a) * (b))
#define ADD_BF16_(a, b) BF16R_((a) + (b))
#define MUL_BF16_(a, b) BF16R_((a) * (b))

#define DEF_HALF(SUF, LOAD, STORE, ADD, MUL)                           \
  DEF_FAST(f_add_##SUF, uint16_t, float, LOAD, STORE, ADD)            \
  DEF_FAST(f_mul_##SUF, uint16_t, float, LOAD, STORE, MUL)            \
  DEF_FAST(f_max_##SUF, uint16_t, float, LOAD, STORE, FMAX_)          \
  DEF_FAST(f_min_##SUF, uint16_t, float, LOAD, STORE, FMIN_)

DEF_HALF(f16, iron_f16_to_f32, iron_f32_to_f16, ADD_F16_, MUL_F16_)
DEF_HALF(bf16, iron_bf16_to_f32, iron_f32_to_bf16, ADD_BF16_, MUL_BF16_)

#define DEF_CPLX(SUF, F)                                                   \
  static void f_add_##SUF(const void *xv, const int64_t *offs, int64_t n,  \
                          const void *initv, void *outv) {                 \
    const F *x = xv, *in = initv;                                          \
    F re = in[0], im = in[1];                                              \
    for (int64_t k = 0; k < n; ++k) {                                      \
      re += x[2 * offs[k]];                                                \
      im += x[2 * offs[k] + 1];                                            \
    }                                                                      \
    ((F *)outv)[0] = re;                                                   \
    ((F *)outv)[1] = im;                                                   \
  }                                                                        \
  static void f_mul_##SUF(const void *xv, const int64_t *offs, int64_t n,  \
                          const void *initv, void *outv) {                 \
    const F *x = xv, *in = initv;                                          \
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

#define DEF_SCAN_FLT(SUF, T, ACC, LOAD, STORE)            \
  DEF_SCAN(s_add_##SUF, T, ACC, LOAD, STORE, ADD_)        \
  DEF_SCAN(s_mul_##SUF, T, ACC, LOAD, STORE, MUL_)        \
  DEF_SCAN(s_max_##SUF, T, ACC, LOAD, STORE, FMAX_)       \
  DEF_SCAN(s_min_##SUF, T, ACC, LOAD, STORE, FMIN_)

DEF_SCAN_FLT(f32, float, float, ID_, ID_)
DEF_SCAN_FLT(f64, double, double, ID_, ID_)
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
DEF_SCAN(s_max_bf16, uint16_t, float, iron_bf16_to_f32, iron_f32_to_bf16,
         FMAX_)
DEF_SCAN(s_min_bf16, uint16_t, float, iron_bf16_to_f32, iron_f32_to_bf16,
         FMIN_)

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
  win_geom_t g;
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

static void rw_destroy(void *params) {
  rw_params_t *p = params;
  if (!p) return;
  geom_free(&p->g);
  free(p);
}

static bool tensor_type_ok(const iron_ir_type_t *t) {
  return t && t->kind == IRON_TYPE_TENSOR && iron_ir_type_is_static(t) &&
         iron_ir_type_num_elements(t) >= 0 && iron_dtype_size(t->dtype) > 0;
}

// Fills p->scan when the window is a cumulative one along a single dim.
static iron_status_t detect_scan(const iron_ir_op_t *op,
                                 const iron_ir_type_t *in, iron_op_kind_t kind,
                                 rw_params_t *p) {
  int32_t rank = in->rank;
  int64_t wd[IRON_MAX_RANK], st[IRON_MAX_RANK], bd[IRON_MAX_RANK],
      wdl[IRON_MAX_RANK], pad[2 * IRON_MAX_RANK] = {0};
  uint32_t np = 0;
  IRON_RETURN_IF_ERROR_PLAIN(read_list(op, "window_dimensions", rank, 1, wd));
  IRON_RETURN_IF_ERROR_PLAIN(read_list(op, "window_strides", rank, 1, st));
  IRON_RETURN_IF_ERROR_PLAIN(read_list(op, "base_dilations", rank, 1, bd));
  IRON_RETURN_IF_ERROR_PLAIN(read_list(op, "window_dilations", rank, 1, wdl));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(op, "padding", pad,
                                                 2 * IRON_MAX_RANK, &np));
  int32_t sd = -1;
  for (int32_t d = 0; d < rank; ++d) {
    bool trivial = wd[d] == 1 && st[d] == 1 && bd[d] == 1 && wdl[d] == 1 &&
                   pad[2 * d] == 0 && pad[2 * d + 1] == 0;
    if (trivial) continue;
    if (sd >= 0) return IRON_OK;
    sd = d;
  }
  if (sd < 0) return IRON_OK;
  int64_t n = in->dims[sd];
  if (n < 1 || wd[sd] != n || st[sd] != 1 || bd[sd] != 1 || wdl[sd] != 1)
    return IRON_OK;
  bool fwd = (pad[2 * sd] == n - 1 || pad[2 * sd] == n) &&
             pad[2 * sd + 1] == 0;
  bool rev = (pad[2 * sd + 1] == n - 1 || pad[2 * sd + 1] == n) &&
             pad[2 * sd] == 0;
  if (!fwd && !rev) return IRON_OK;
  p->scan = scan_lookup(kind, p->dtypes[0]);
  p->scan_n = n;
  p->scan_rev = !fwd;
  p->scan_excl = pad[2 * sd] + pad[2 * sd + 1] == n;
  p->scan_outer = p->scan_inner = 1;
  for (int32_t d = 0; d < sd; ++d) p->scan_outer *= in->dims[d];
  for (int32_t d = sd + 1; d < rank; ++d) p->scan_inner *= in->dims[d];
  return IRON_OK;
}

static iron_status_t rw_prepare(const iron_ir_op_t *op,
                                iron_region_t *const *regions,
                                void **out_params) {
  uint32_t n = op->num_operands / 2;
  if (op->num_operands % 2 || n == 0 || op->num_results != n ||
      op->num_regions != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad operand/result counts",
                    op->name);
  if (n > WIN_MAX_INPUTS)
    return iron_ir_op_unimplemented(op, "with %u inputs", n);
  const iron_ir_type_t *t0 = op->operands[0]->type;
  for (uint32_t i = 0; i < 2 * n; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (!tensor_type_ok(t))
      return iron_ir_op_unimplemented(op, "for operand %u's type", i);
    if (i < n && (t->rank != t0->rank ||
                  memcmp(t->dims, t0->dims,
                         sizeof(int64_t) * (size_t)t0->rank) != 0))
      return IRON_ERR(INVALID_ARGUMENT, "%s: input shapes differ", op->name);
    if (i >= n &&
        (t->rank != 0 || t->dtype != op->operands[i - n]->type->dtype))
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad init value %u", op->name,
                      i - n);
  }
  rw_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->n = n;
  for (uint32_t i = 0; i < n; ++i) p->dtypes[i] = op->operands[i]->type->dtype;
  const iron_ir_region_t *ir =
      regions && regions[0] ? regions[0]->ir : &op->regions[0];
  iron_status_t st = IRON_OK;
  if (n == 1 && fast_enabled()) {
    iron_op_kind_t k = single_op_body(ir, p->dtypes[0], NULL, NULL);
    p->fast = fast_lookup(k, p->dtypes[0]);
    if (p->fast) st = detect_scan(op, t0, k, p);
  }
  if (!st && !p->fast) {
    if (!regions || !regions[0]) {
      st = iron_ir_op_unimplemented(op, "without a compiled body");
    } else {
      p->region = regions[0];
      p->elementwise = regions[0]->elementwise;
    }
  }
  // The scan and the vectorized generic path compute offsets from the
  // window formula; only the others need the per-output lists.
  if (!st)
    st = geom_build(op, t0, true, !p->scan && !(p->region && p->elementwise),
                    &p->g);
  if (st) {
    rw_destroy(p);
    return st;
  }
  for (uint32_t i = 0; i < n; ++i) {
    const iron_ir_type_t *rt = op->results[i].type;
    if (!rt || rt->kind != IRON_TYPE_TENSOR || rt->dtype != p->dtypes[i] ||
        rt->rank != t0->rank ||
        memcmp(rt->dims, p->g.out_dims, sizeof(int64_t) * (size_t)t0->rank)) {
      rw_destroy(p);
      return IRON_ERR(INVALID_ARGUMENT, "%s: result %u type mismatch",
                      op->name, i);
    }
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

static void rw_fast_task(void *arg, int64_t begin, int64_t end) {
  rw_job_t *j = arg;
  const win_geom_t *g = &j->p->g;
  int64_t *offs = malloc(sizeof(int64_t) * (size_t)(2 * g->win_count + 2));
  if (!offs) {
    j->failed = true;  // benign race: only ever set to true
    return;
  }
  for (int64_t o = begin; o < end; ++o) {
    int64_t m = geom_offsets(g, o, offs, offs + g->win_count + 1);
    j->p->fast(j->x, offs, m, j->init, j->out + (size_t)o * j->es);
  }
  free(offs);
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
  const win_geom_t *g = &p->g;
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
  int64_t k[IRON_MAX_RANK] = {0};
  for (int64_t w = 0; w < g->win_count && !st; ++w) {
    // src[o] = input offset of window position k for output o, or -1.
    int64_t any = 0;
    for (int64_t o = 0; o < O; ++o) {
      int64_t rem = o, off = 0;
      bool ok = true;
      for (int32_t d = g->rank - 1; d >= 0 && ok; --d) {
        int64_t od = rem % g->out_dims[d];
        rem /= g->out_dims[d];
        int64_t pos = od * g->stride[d] + k[d] * g->wdil[d] - g->pad_lo[d];
        ok = pos >= 0 && pos < g->dil_in[d] && pos % g->bdil[d] == 0;
        off += pos / g->bdil[d] * g->in_stride[d];
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
    for (int32_t d = g->rank - 1; d >= 0; --d) {
      if (++k[d] < g->wdims[d]) break;
      k[d] = 0;
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
static iron_status_t rw_generic_scalar(const iron_kernel_ctx_t *ctx,
                                       const rw_params_t *p,
                                       const iron_tensor_t *const *inputs,
                                       iron_tensor_t *const *outputs) {
  const win_geom_t *g = &p->g;
  uint32_t n = p->n;
  int64_t *offs = malloc(sizeof(int64_t) * (size_t)(2 * g->win_count + 2));
  if (!offs) return IRON_ERR(RESOURCE_EXHAUSTED, "reduce_window: oom");
  unsigned char acc[WIN_MAX_INPUTS][16], nacc[WIN_MAX_INPUTS][16];
  iron_tensor_t tin[2 * WIN_MAX_INPUTS], tout[WIN_MAX_INPUTS];
  const iron_tensor_t *pin[2 * WIN_MAX_INPUTS];
  iron_tensor_t *pout[WIN_MAX_INPUTS];
  for (uint32_t i = 0; i < n; ++i) {
    pin[i] = &tin[i];
    pin[n + i] = &tin[n + i];
    pout[i] = &tout[i];
  }
  iron_status_t st = IRON_OK;
  for (int64_t o = 0; o < g->out_count && !st; ++o) {
    int64_t m = geom_offsets(g, o, offs, offs + g->win_count + 1);
    for (uint32_t i = 0; i < n; ++i)
      memcpy(acc[i], inputs[n + i]->data, iron_dtype_size(p->dtypes[i]));
    for (int64_t e = 0; e < m && !st; ++e) {
      for (uint32_t i = 0; i < n; ++i) {
        size_t es = iron_dtype_size(p->dtypes[i]);
        tin[i] = iron_tensor_vector(acc[i], p->dtypes[i], 1);
        tin[n + i] = iron_tensor_vector((char *)inputs[i]->data + (size_t)offs[e] * es,
                         p->dtypes[i], 1);
        tout[i] = iron_tensor_vector(nacc[i], p->dtypes[i], 1);
      }
      st = ctx->call_region(ctx, p->region, pin, pout);
      memcpy(acc, nacc, sizeof(acc));
    }
    for (uint32_t i = 0; i < n && !st; ++i) {
      size_t es = iron_dtype_size(p->dtypes[i]);
      memcpy((char *)outputs[i]->data + (size_t)o * es, acc[i], es);
    }
  }
  free(offs);
  return st;
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

// Picks the index (into offs) of the selected element; -1 if m == 0.
typedef int64_t (*sas_select_fn_t)(const void *x, const int64_t *offs,
                                   int64_t m);
// out[off] = out[off] + src[s]
typedef void (*sas_scatter_fn_t)(void *out, int64_t off, const void *src,
                                 int64_t s);

#define DEF_SEL(NAME, T, CT, LOAD, CMP)                                    \
  static int64_t NAME(const void *xv, const int64_t *offs, int64_t m) {    \
    const T *x = xv;                                                       \
    if (m == 0) return -1;                                                 \
    int64_t best = 0;                                                      \
    CT cur = (CT)LOAD(x[offs[0]]);                                         \
    for (int64_t e = 1; e < m; ++e) {                                      \
      CT c = (CT)LOAD(x[offs[e]]);                                         \
      if (!(cur CMP c)) {                                                  \
        cur = c;                                                           \
        best = e;                                                          \
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
  win_geom_t g;  // over the operand; out_dims = source dims
  sas_select_fn_t select;  // fast path (with scatter) or NULL
  sas_scatter_fn_t scatter;
  const iron_region_t *select_region, *scatter_region;
} sas_params_t;

static void sas_destroy(void *params) {
  sas_params_t *p = params;
  if (!p) return;
  geom_free(&p->g);
  free(p);
}

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
  if (op->num_operands != 3 || op->num_results != 1 || op->num_regions != 2)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad operand/result counts",
                    op->name);
  const iron_ir_type_t *ot = op->operands[0]->type,
                       *st = op->operands[1]->type,
                       *it = op->operands[2]->type, *rt = op->results[0].type;
  for (int i = 0; i < 3; ++i)
    if (!tensor_type_ok(op->operands[i]->type))
      return iron_ir_op_unimplemented(op, "for operand %d's type", i);
  if (!tensor_type_ok(rt) || it->rank != 0 || st->dtype != rt->dtype ||
      it->dtype != rt->dtype || !iron_ir_type_equal(ot, rt) ||
      iron_dtype_size(rt->dtype) > 16)
    return IRON_ERR(INVALID_ARGUMENT, "%s: operand/result types disagree",
                    op->name);
  sas_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  iron_status_t s = geom_build(op, ot, false, true, &p->g);
  if (s) {
    sas_destroy(p);
    return s;
  }
  p->dtype = rt->dtype;
  if (st->rank != ot->rank ||
      memcmp(st->dims, p->g.out_dims, sizeof(int64_t) * (size_t)ot->rank)) {
    sas_destroy(p);
    return IRON_ERR(INVALID_ARGUMENT, "%s: source shape does not match the "
                    "windows", op->name);
  }
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

static iron_status_t sas_run(const iron_kernel_ctx_t *ctx, const void *params,
                             const iron_tensor_t *const *inputs,
                             iron_tensor_t *const *outputs) {
  const sas_params_t *p = params;
  const win_geom_t *g = &p->g;
  size_t es = iron_dtype_size(p->dtype);
  char *out = outputs[0]->data;
  const char *x = inputs[0]->data, *src = inputs[1]->data;
  iron_host_fill(ctx->pool, out, outputs[0]->count, inputs[2]->data, es);
  if (g->out_count == 0) return IRON_OK;
  if (!p->select && !ctx->call_region)
    return IRON_ERR(FAILED_PRECONDITION, "select_and_scatter: no call_region");
  int64_t *offs = malloc(sizeof(int64_t) * (size_t)(2 * g->win_count + 2));
  if (!offs) return IRON_ERR(RESOURCE_EXHAUSTED, "select_and_scatter: oom");
  // Windows overlap in general, so the scatter runs serially in source order
  // (the order XLA applies the scatter combiner in).
  iron_status_t st = IRON_OK;
  for (int64_t s = 0; s < g->out_count && !st; ++s) {
    int64_t m = geom_offsets(g, s, offs, offs + g->win_count + 1);
    if (m == 0) continue;
    if (p->select) {
      int64_t b = p->select(x, offs, m);
      p->scatter(out, offs[b], src, s);
      continue;
    }
    int64_t best = 0;
    unsigned char pred = 0;
    for (int64_t e = 1; e < m && !st; ++e) {
      iron_tensor_t a = iron_tensor_vector((char *)x + (size_t)offs[best] * es, p->dtype, 1);
      iron_tensor_t c = iron_tensor_vector((char *)x + (size_t)offs[e] * es, p->dtype, 1);
      iron_tensor_t r = iron_tensor_vector(&pred, IRON_DTYPE_PRED, 1);
      const iron_tensor_t *in2[2] = {&a, &c};
      iron_tensor_t *o1[1] = {&r};
      st = ctx->call_region(ctx, p->select_region, in2, o1);
      if (!st && !pred) best = e;
    }
    if (st) break;
    unsigned char res[16];
    iron_tensor_t a = iron_tensor_vector(out + (size_t)offs[best] * es, p->dtype, 1);
    iron_tensor_t c = iron_tensor_vector((char *)src + (size_t)s * es, p->dtype, 1);
    iron_tensor_t r = iron_tensor_vector(res, p->dtype, 1);
    const iron_tensor_t *in2[2] = {&a, &c};
    iron_tensor_t *o1[1] = {&r};
    st = ctx->call_region(ctx, p->scatter_region, in2, o1);
    if (!st) memcpy(out + (size_t)offs[best] * es, res, es);
  }
  free(offs);
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
