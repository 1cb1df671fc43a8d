// The NaN, signed-zero and first-index rules of every reduce, scan and
// window path (issue 13), swept over row lengths around every vector, tile
// and block boundary, against a scalar reference of the semantics:
//  - argmax/argmin with jax's body (the first operand wins when both are
//    NaN; equal values take the smaller index): the sequential fold from
//    the init value, which is XLA's order;
//  - max/min single-op bodies: IEEE maximum/minimum (NaN wins; of +0 and
//    -0, max gives +0 and min -0);
//  - cummax/cummin (reduce_window's cumulative pattern) and a sliding max:
//    the same combiner, in window order;
//  - sort with jax's comparator (-0.0 == 0.0, NaNs last, LT TOTALORDER on
//    the canonicalized keys): the stable order.
// Host kernels run every length 1..300, every power of two +-1 up to 2^16
// and 100000 (f32; the half types and f64 the boundary lengths), each
// pattern a row of a [16, n] and an [n, 16] operand (and [80, n] for the
// host's sequential generic path). The CUDA generated kernels (reduce
// modes thread/warp/block/columns/split columns, the cumulative scan, the
// window) run on the CPU through cuda_emu_build_mt at
// the lengths where CUDA's paths change; a C++ compiler is needed for that
// part. The CUDA sort is checked against the host's sort, NaNs and signed
// zeros included, by test_cuda_sort_emu.c; the host's against the
// reference here.
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "base/threadpool.h"
#include "bb_region.h"
#include "cuda_emu.h"
#include "device/cuda/gen/ops.h"
#include "host_test_ops.h"
#include "test.h"

#define NPAT 16

static iron_threadpool_t *g_pool;

// --- data ------------------------------------------------------------------

static uint64_t g_seed;
static uint64_t rnd(void) {
  g_seed ^= g_seed << 13;
  g_seed ^= g_seed >> 7;
  g_seed ^= g_seed << 17;
  return g_seed;
}

static void nan_at(double *r, int64_t n, int64_t i) {
  if (i >= 0 && i < n) r[i] = NAN;
}

// Pattern p (0..NPAT-1) of a row of n: NaNs, signed zeros and ties where a
// blocked or tree-shaped reduction splits a row.
static void pattern_row(int p, int64_t n, double *r) {
  g_seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(n * 131 + p);
  for (int64_t i = 0; i < n; ++i) r[i] = 0.0;
  switch (p) {
    case 0:
      break;
    case 1:
      nan_at(r, n, 1);
      nan_at(r, n, 2);
      break;  // the case
    case 2:
      nan_at(r, n, n - 2);
      nan_at(r, n, n - 1);
      break;
    case 3:
      nan_at(r, n, 0);
      nan_at(r, n, n - 1);
      break;
    case 4:
      nan_at(r, n, n / 3);
      nan_at(r, n, n / 2);
      nan_at(r, n, n - 1);
      break;
    case 5:
      for (int64_t i = n / 2; i < n; i += 7) nan_at(r, n, i);
      break;
    case 6: {
      const int64_t at[] = {15, 16, 31, 32, 63, 64, 65, 255, 256, 2048};
      for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); ++k)
        nan_at(r, n, at[k]);
      break;
    }
    case 7:
      for (int64_t i = 0; i < n; ++i) r[i] = NAN;
      break;
    case 8:
      for (int64_t i = 0; i < n; i += 2) r[i] = -0.0;
      break;
    case 9:
      for (int64_t i = 1; i < n; i += 2) r[i] = -0.0;
      break;
    case 10:
      for (int64_t i = 0; i < n; ++i) r[i] = -0.0;
      break;
    case 11:
      for (int64_t i = 0; i < n; ++i) r[i] = -INFINITY;
      break;
    case 12: {
      for (int64_t i = 0; i < n; ++i) r[i] = (double)((int)(rnd() % 5) - 2);
      const int64_t at[] = {7,   8,   15,  16,  31,   32,   63,   64,
                            127, 128, 255, 256, 2047, 2048, n - 1};
      for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); ++k)
        if (at[k] >= 0 && at[k] < n) r[at[k]] = at[k] % 2 ? 5.0 : -5.0;
      break;
    }
    case 13:
      for (int64_t i = 0; i < n; ++i) r[i] = (double)((int)(rnd() % 5) - 2);
      r[0] = INFINITY;
      if (n > 2) {
        r[n / 2] = -NAN;
        r[n - 1] = NAN;
      }
      break;
    case 14:
      for (int64_t i = 0; i < n; ++i) r[i] = rnd() % 2 ? INFINITY : -INFINITY;
      r[0] = NAN;
      break;
    default:
      for (int64_t i = 0; i < n; ++i) {
        r[i] = (double)((int)(rnd() % 5) - 2);
        if (rnd() % 10 == 0) r[i] = NAN;
        if (r[i] == 0 && rnd() % 2) r[i] = -0.0;
      }
      break;
  }
}

static void store(iron_dtype_t dt, void *base, int64_t i, double v) {
  switch (dt) {
    case IRON_DTYPE_F32:
      ((float *)base)[i] = (float)v;
      break;
    case IRON_DTYPE_F64:
      ((double *)base)[i] = v;
      break;
    case IRON_DTYPE_F16:
      ((uint16_t *)base)[i] = iron_f32_to_f16((float)v);
      break;
    default:
      ((uint16_t *)base)[i] = iron_f32_to_bf16((float)v);
      break;
  }
}

static double load(iron_dtype_t dt, const void *base, int64_t i) {
  switch (dt) {
    case IRON_DTYPE_F32:
      return ((const float *)base)[i];
    case IRON_DTYPE_F64:
      return ((const double *)base)[i];
    case IRON_DTYPE_F16:
      return iron_f16_to_f32(((const uint16_t *)base)[i]);
    default:
      return iron_bf16_to_f32(((const uint16_t *)base)[i]);
  }
}

// Same value: NaN-ness, then value and sign of zero.
static bool same(double a, double b) {
  if (a != a || b != b) return a != a && b != b;
  return a == b && signbit(a) == signbit(b);
}

// --- the reference ----------------------------------------------------------

static double ref_max(double a, double b) {  // IEEE maximum, in fold order
  if (a != a) return a;
  if (b != b) return b;
  if (a != b) return a > b ? a : b;
  return signbit(a) ? b : a;
}
static double ref_min(double a, double b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a != b) return a < b ? a : b;
  return signbit(a) ? a : b;
}

// jax's argmax/argmin body folded in order from (init, 0).
static int32_t ref_arg(const double *x, int64_t n, int64_t stride,
                       bool is_max) {
  double av = is_max ? -INFINITY : INFINITY;
  int32_t ai = 0;
  for (int64_t r = 0; r < n; ++r) {
    double xv = x[r * stride];
    int32_t xi = (int32_t)r;
    bool pick_a = (is_max ? av > xv : av < xv) || av != av;
    bool pick_ai = pick_a || (av == xv && ai < xi);
    av = pick_a ? av : xv;
    ai = pick_ai ? ai : xi;
  }
  return ai;
}

// --- ops ---------------------------------------------------------------------

// Operand [rows, n] (dim 1 reduced) or [n, NPAT] (dim 0 reduced): element
// (row p, position r) of pattern p % NPAT.
typedef struct layout {
  int64_t dims[2];
  int rdim;  // reduced / scanned dim
  int64_t rows;
  int pat0;  // row p holds pattern (pat0 + p) % NPAT
} layout_t;

static layout_t lay(int64_t n, int rdim, int64_t rows) {
  layout_t l;
  l.rdim = rdim;
  l.rows = rows;
  l.pat0 = 0;
  l.dims[0] = rdim == 1 ? rows : n;
  l.dims[1] = rdim == 1 ? n : rows;
  return l;
}

static int64_t at(const layout_t *l, int64_t p, int64_t r) {
  return l->rdim == 1 ? p * l->dims[1] + r : r * l->dims[1] + p;
}

// Fills x (and, when idx, the iota along the reduced dim) from the patterns;
// vals gets the stored values as doubles, [rows][n].
static void fill(const layout_t *l, int64_t n, iron_dtype_t dt, void *x,
                 int32_t *idx, double *vals) {
  double *row = malloc(sizeof(double) * (size_t)(n + 1));
  for (int64_t p = 0; p < l->rows; ++p) {
    pattern_row((int)((l->pat0 + p) % NPAT), n, row);
    for (int64_t r = 0; r < n; ++r) {
      store(dt, x, at(l, p, r), row[r]);
      vals[p * n + r] = load(dt, x, at(l, p, r));
      if (idx) idx[at(l, p, r)] = (int32_t)r;
    }
  }
  free(row);
}

static bb_t *argminmax_body(iron_dtype_t vdt, bool is_max) {
  iron_dtype_t dts[4] = {vdt, IRON_DTYPE_S32, vdt, IRON_DTYPE_S32};
  bb_t *b = bb_new(4, dts);
  iron_ir_value_t *av = bb_arg(b, 0), *ai = bb_arg(b, 1), *xv = bb_arg(b, 2),
                  *xi = bb_arg(b, 3);
  iron_ir_value_t *c = bb_cmp(b, is_max ? IRON_CMP_GT : IRON_CMP_LT,
                              IRON_CMP_TYPE_FLOAT, av, xv);
  iron_ir_value_t *ne = bb_cmp(b, IRON_CMP_NE, IRON_CMP_TYPE_FLOAT, av, av);
  iron_ir_value_t *pv = bb_op(b, IRON_OP_OR, IRON_DTYPE_PRED, 2, c, ne, NULL);
  iron_ir_value_t *eq = bb_cmp(b, IRON_CMP_EQ, IRON_CMP_TYPE_FLOAT, av, xv);
  iron_ir_value_t *lt = bb_cmp(b, IRON_CMP_LT, IRON_CMP_TYPE_SIGNED, ai, xi);
  iron_ir_value_t *tie =
      bb_op(b, IRON_OP_AND, IRON_DTYPE_PRED, 2, eq, lt, NULL);
  iron_ir_value_t *pi = bb_op(b, IRON_OP_OR, IRON_DTYPE_PRED, 2, pv, tie, NULL);
  iron_ir_value_t *v = bb_op(b, IRON_OP_SELECT, vdt, 3, pv, av, xv);
  iron_ir_value_t *i = bb_op(b, IRON_OP_SELECT, IRON_DTYPE_S32, 3, pi, ai, xi);
  bb_ret(b, 2, v, i);
  return b;
}

static bb_t *single_body(iron_dtype_t dt, iron_op_kind_t kind) {
  iron_dtype_t dts[2] = {dt, dt};
  bb_t *b = bb_new(2, dts);
  iron_ir_value_t *r = bb_op(b, kind, dt, 2, bb_arg(b, 0), bb_arg(b, 1), NULL);
  bb_ret(b, 1, r, NULL);
  return b;
}

// Prepares and runs op on the host with `body` compiled as an element-wise
// region whose calls bb_interp_call evaluates.
static iron_status_t host_run(ht_op_t *b, bb_t *body, iron_tensor_t **in,
                              iron_tensor_t **out) {
  b->op.num_regions = 1;
  b->op.regions = &body->region;
  iron_region_t hr;
  memset(&hr, 0, sizeof(hr));
  hr.ir = &body->region;
  hr.elementwise = true;
  iron_region_t *regions[1] = {&hr};
  const iron_kernel_t *k = iron_host_kernel_lookup(b->op.kind);
  void *params = NULL;
  iron_status_t st = k->prepare(&b->op, regions, &params);
  if (st) return st;
  iron_kernel_ctx_t ctx = {0};
  ctx.pool = g_pool;
  ctx.call_region = bb_interp_call;
  st = k->run(&ctx, params, (const iron_tensor_t *const *)in,
              (iron_tensor_t *const *)out);
  if (k->destroy)
    k->destroy(params);
  else
    free(params);
  return st;
}

static int g_reported;
static void report(const char *what, int64_t n, int64_t p, int64_t i,
                   double got, double want) {
  if (g_reported++ < 30)
    fprintf(stderr, "  %s n=%lld pattern %lld at %lld: got %g, want %g\n", what,
            (long long)n, (long long)p, (long long)i, got, want);
  CHECK(false);
}

// --- host --------------------------------------------------------------------

static void host_argminmax(int64_t n, iron_dtype_t dt, const layout_t *l,
                           bool is_max) {
  int64_t od = l->rows, rd = l->rdim;
  ht_op_t b;
  ht_init(&b, IRON_OP_REDUCE);
  ht_operand(&b, dt, 2, l->dims);
  ht_operand(&b, IRON_DTYPE_S32, 2, l->dims);
  ht_operand(&b, dt, 0, NULL);
  ht_operand(&b, IRON_DTYPE_S32, 0, NULL);
  ht_result(&b, dt, 1, &od);
  ht_result(&b, IRON_DTYPE_S32, 1, &od);
  ht_attr_i64(&b, "dimensions", 1, &rd);
  iron_tensor_t *in[4] = {
      ht_tensor(dt, 2, l->dims), ht_tensor(IRON_DTYPE_S32, 2, l->dims),
      ht_tensor(dt, 0, NULL), ht_tensor(IRON_DTYPE_S32, 0, NULL)};
  iron_tensor_t *out[2] = {ht_tensor(dt, 1, &od),
                           ht_tensor(IRON_DTYPE_S32, 1, &od)};
  double *vals = malloc(sizeof(double) * (size_t)(l->rows * n));
  fill(l, n, dt, in[0]->data, in[1]->data, vals);
  store(dt, in[2]->data, 0, is_max ? -INFINITY : INFINITY);
  *(int32_t *)in[3]->data = 0;
  bb_t *body = argminmax_body(dt, is_max);
  CHECK_OK(host_run(&b, body, in, out));
  char what[64];
  snprintf(what, sizeof(what), "host arg%s %s [%lld,%lld]/%d",
           is_max ? "max" : "min", iron_dtype_name(dt), (long long)l->dims[0],
           (long long)l->dims[1], l->rdim);
  for (int64_t p = 0; p < l->rows; ++p) {
    int32_t want = ref_arg(vals + p * n, n, 1, is_max);
    int32_t got = ((int32_t *)out[1]->data)[p];
    if (got != want) report(what, n, p, 0, got, want);
  }
  free(vals);
  free(body);
  for (int i = 0; i < 4; ++i) ht_tensor_free(in[i]);
  for (int i = 0; i < 2; ++i) ht_tensor_free(out[i]);
}

static void host_maxmin(int64_t n, iron_dtype_t dt, const layout_t *l,
                        bool is_max) {
  int64_t od = l->rows, rd = l->rdim;
  ht_op_t b;
  ht_init(&b, IRON_OP_REDUCE);
  ht_operand(&b, dt, 2, l->dims);
  ht_operand(&b, dt, 0, NULL);
  ht_result(&b, dt, 1, &od);
  ht_attr_i64(&b, "dimensions", 1, &rd);
  iron_tensor_t *in[2] = {ht_tensor(dt, 2, l->dims), ht_tensor(dt, 0, NULL)};
  iron_tensor_t *out[1] = {ht_tensor(dt, 1, &od)};
  double *vals = malloc(sizeof(double) * (size_t)(l->rows * n));
  fill(l, n, dt, in[0]->data, NULL, vals);
  store(dt, in[1]->data, 0, is_max ? -INFINITY : INFINITY);
  bb_t *body = single_body(dt, is_max ? IRON_OP_MAXIMUM : IRON_OP_MINIMUM);
  CHECK_OK(host_run(&b, body, in, out));
  char what[64];
  snprintf(what, sizeof(what), "host %s %s [%lld,%lld]/%d",
           is_max ? "max" : "min", iron_dtype_name(dt), (long long)l->dims[0],
           (long long)l->dims[1], l->rdim);
  for (int64_t p = 0; p < l->rows; ++p) {
    double want = is_max ? -INFINITY : INFINITY;
    for (int64_t r = 0; r < n; ++r)
      want = is_max ? ref_max(want, vals[p * n + r])
                    : ref_min(want, vals[p * n + r]);
    double got = load(dt, out[0]->data, p);
    if (!same(got, want)) report(what, n, p, 0, got, want);
  }
  free(vals);
  free(body);
  for (int i = 0; i < 2; ++i) ht_tensor_free(in[i]);
  ht_tensor_free(out[0]);
}

// reduce_window along l->rdim: the cumulative pattern (window n, padding
// n-1 on one side) when win == 0, else a sliding window of `win` with
// padding (win/2, win/2) and stride 1.
static void window_op(ht_op_t *b, int64_t n, iron_dtype_t dt, const layout_t *l,
                      int64_t win, bool rev, int64_t *out_dims) {
  int64_t wd[2] = {1, 1}, pad[4] = {0, 0, 0, 0};
  int d = l->rdim;
  if (win == 0) {
    wd[d] = n;
    pad[2 * d + (rev ? 1 : 0)] = n - 1;
  } else {
    wd[d] = win;
    pad[2 * d] = pad[2 * d + 1] = win / 2;
  }
  out_dims[0] = l->dims[0];
  out_dims[1] = l->dims[1];
  if (win) out_dims[d] = n + 2 * (win / 2) - win + 1;
  ht_init(b, IRON_OP_REDUCE_WINDOW);
  ht_operand(b, dt, 2, l->dims);
  ht_operand(b, dt, 0, NULL);
  ht_result(b, dt, 2, out_dims);
  ht_attr_i64(b, "window_dimensions", 2, wd);
  ht_attr_i64(b, "padding", 4, pad);
}

// The reference of window_op's result (p, o): the fold over the window.
static double ref_window(const double *row, int64_t n, int64_t win, bool rev,
                         int64_t o, bool is_max) {
  int64_t lo, hi;  // [lo, hi) of row
  if (win == 0) {
    lo = rev ? o : 0;
    hi = rev ? n : o + 1;
  } else {
    lo = o - win / 2;
    hi = lo + win;
    if (lo < 0) lo = 0;
    if (hi > n) hi = n;
  }
  double acc = is_max ? -INFINITY : INFINITY;
  for (int64_t r = lo; r < hi; ++r)
    acc = is_max ? ref_max(acc, row[r]) : ref_min(acc, row[r]);
  return acc;
}

static void check_window(const char *what, int64_t n, iron_dtype_t dt,
                         const layout_t *l, int64_t win, bool rev, bool is_max,
                         const double *vals, const void *out,
                         const int64_t *od) {
  int64_t m = od[l->rdim];
  double *scan = malloc(sizeof(double) * (size_t)(n + 1));
  for (int64_t p = 0; p < l->rows; ++p) {
    const double *row = vals + p * n;
    if (win == 0) {  // the cumulative fold, in O(n)
      double acc = is_max ? -INFINITY : INFINITY;
      for (int64_t k = 0; k < n; ++k) {
        int64_t r = rev ? n - 1 - k : k;
        acc = is_max ? ref_max(acc, row[r]) : ref_min(acc, row[r]);
        scan[r] = acc;
      }
    }
    for (int64_t o = 0; o < m; ++o) {
      double want =
          win == 0 ? scan[o] : ref_window(row, n, win, rev, o, is_max);
      int64_t oi = l->rdim == 1 ? p * m + o : o * l->rows + p;
      double got = load(dt, out, oi);
      if (!same(got, want)) {
        report(what, n, p, o, got, want);
        break;
      }
    }
  }
  free(scan);
}

static void host_window(int64_t n, iron_dtype_t dt, const layout_t *l,
                        int64_t win, bool rev, bool is_max) {
  ht_op_t b;
  int64_t od[2];
  window_op(&b, n, dt, l, win, rev, od);
  iron_tensor_t *in[2] = {ht_tensor(dt, 2, l->dims), ht_tensor(dt, 0, NULL)};
  iron_tensor_t *out[1] = {ht_tensor(dt, 2, od)};
  double *vals = malloc(sizeof(double) * (size_t)(l->rows * n));
  fill(l, n, dt, in[0]->data, NULL, vals);
  store(dt, in[1]->data, 0, is_max ? -INFINITY : INFINITY);
  bb_t *body = single_body(dt, is_max ? IRON_OP_MAXIMUM : IRON_OP_MINIMUM);
  CHECK_OK(host_run(&b, body, in, out));
  char what[80];
  snprintf(what, sizeof(what), "host %s%s window %lld %s [%lld,%lld]/%d",
           rev ? "reverse " : "", is_max ? "max" : "min", (long long)win,
           iron_dtype_name(dt), (long long)l->dims[0], (long long)l->dims[1],
           l->rdim);
  check_window(what, n, dt, l, win, rev, is_max, vals, out[0]->data, od);
  free(vals);
  free(body);
  for (int i = 0; i < 2; ++i) ht_tensor_free(in[i]);
  ht_tensor_free(out[0]);
}

// jax's jnp.sort comparator over dt: both keys canonicalized
// (select(x == 0, 0, x), then select(x != x, NaN, .)), then LT TOTALORDER.
static bb_t *jax_sort_comparator(iron_dtype_t dt) {
  iron_dtype_t dts[2] = {dt, dt};
  bb_t *b = bb_new(2, dts);
  uint8_t zero[8] = {0}, nan[8] = {0};
  size_t es = iron_dtype_size(dt);
  switch (dt) {
    case IRON_DTYPE_F32:
      nan[2] = 0xc0;
      nan[3] = 0x7f;
      break;
    case IRON_DTYPE_F64:
      nan[6] = 0xf8;
      nan[7] = 0x7f;
      break;
    case IRON_DTYPE_F16:
      nan[1] = 0x7e;
      break;
    default:
      nan[0] = 0xc0;
      nan[1] = 0x7f;
      break;  // bf16
  }
  iron_ir_value_t *canon[2];
  for (int i = 0; i < 2; ++i) {
    iron_ir_value_t *x = bb_arg(b, i);
    iron_ir_value_t *z = bb_const_bytes(b, dt, zero, es);
    iron_ir_value_t *isz = bb_cmp(b, IRON_CMP_EQ, IRON_CMP_TYPE_FLOAT, x, z);
    iron_ir_value_t *z2 = bb_const_bytes(b, dt, zero, es);
    iron_ir_value_t *s1 = bb_op(b, IRON_OP_SELECT, dt, 3, isz, z2, x);
    iron_ir_value_t *isn = bb_cmp(b, IRON_CMP_NE, IRON_CMP_TYPE_FLOAT, x, x);
    iron_ir_value_t *q = bb_const_bytes(b, dt, nan, es);
    canon[i] = bb_op(b, IRON_OP_SELECT, dt, 3, isn, q, s1);
  }
  bb_ret(b, 1,
         bb_cmp(b, IRON_CMP_LT, IRON_CMP_TYPE_TOTALORDER, canon[0], canon[1]),
         NULL);
  return b;
}

// jax's sort order of stored values: NaNs last (all equal), -0 == 0.
static int sort_class(double a) { return a != a ? 1 : 0; }
static bool sort_less(double a, double b) {
  if (sort_class(a) != sort_class(b)) return sort_class(a) < sort_class(b);
  return sort_class(a) == 0 && a < b;
}

// The stable sort of row[0..n) into out (insertion into a merge sort's
// result: a plain stable merge sort on indices).
static void ref_sort(const double *row, int64_t n, double *out, int64_t *ix,
                     int64_t *tmp) {
  for (int64_t i = 0; i < n; ++i) ix[i] = i;
  for (int64_t w = 1; w < n; w *= 2)
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n,
              hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi)
        tmp[k++] = sort_less(row[ix[j]], row[ix[i]]) ? ix[j++] : ix[i++];
      while (i < mid) tmp[k++] = ix[i++];
      while (j < hi) tmp[k++] = ix[j++];
      for (k = lo; k < hi; ++k) ix[k] = tmp[k];
    }
  for (int64_t i = 0; i < n; ++i) out[i] = row[ix[i]];
}

static void check_sort(const char *what, int64_t n, iron_dtype_t dt,
                       const layout_t *l, const double *vals, const void *out) {
  double *want = malloc(sizeof(double) * (size_t)(n + 1));
  int64_t *ix = malloc(sizeof(int64_t) * (size_t)(2 * n + 2));
  for (int64_t p = 0; p < l->rows; ++p) {
    ref_sort(vals + p * n, n, want, ix, ix + n + 1);
    for (int64_t r = 0; r < n; ++r) {
      double got = load(dt, out, at(l, p, r));
      if (!same(got, want[r])) {
        report(what, n, p, r, got, want[r]);
        break;
      }
    }
  }
  free(want);
  free(ix);
}

static void host_sort(int64_t n, iron_dtype_t dt, const layout_t *l) {
  int64_t dim = l->rdim;
  ht_op_t b;
  ht_init(&b, IRON_OP_SORT);
  ht_operand(&b, dt, 2, l->dims);
  ht_result(&b, dt, 2, l->dims);
  uint32_t ai = b.op.num_attrs++;
  b.attrs[ai].kind = IRON_ATTR_INT;
  b.attrs[ai].i = dim;
  b.named[ai].name = "dimension";
  b.named[ai].value = &b.attrs[ai];
  iron_tensor_t *in[1] = {ht_tensor(dt, 2, l->dims)};
  iron_tensor_t *out[1] = {ht_tensor(dt, 2, l->dims)};
  double *vals = malloc(sizeof(double) * (size_t)(l->rows * n));
  fill(l, n, dt, in[0]->data, NULL, vals);
  bb_t *cmp = jax_sort_comparator(dt);
  CHECK_OK(host_run(&b, cmp, in, out));
  char what[64];
  snprintf(what, sizeof(what), "host sort %s [%lld,%lld]/%d",
           iron_dtype_name(dt), (long long)l->dims[0], (long long)l->dims[1],
           l->rdim);
  check_sort(what, n, dt, l, vals, out[0]->data);
  free(vals);
  free(cmp);
  ht_tensor_free(in[0]);
  ht_tensor_free(out[0]);
}

static bool is_edge(int64_t n) {
  static const int64_t e[] = {
      1,   2,   3,    7,    8,    9,    15,   16,   17,    31,    32,
      33,  63,  64,   65,   66,   100,  127,  128,  129,   255,   256,
      257, 300, 2047, 2048, 2049, 4095, 4096, 4097, 16385, 65537, 100000};
  for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); ++i)
    if (e[i] == n) return true;
  return false;
}

static int64_t g_lengths[512];
static int g_nlengths;

static void host_sweep_length(int64_t n) {
  static const iron_dtype_t dts[] = {IRON_DTYPE_F32, IRON_DTYPE_F16,
                                     IRON_DTYPE_BF16, IRON_DTYPE_F64};
  for (size_t k = 0; k < sizeof(dts) / sizeof(dts[0]); ++k) {
    iron_dtype_t dt = dts[k];
    if (dt != IRON_DTYPE_F32 && !is_edge(n)) continue;
    layout_t rows = lay(n, 1, NPAT), cols = lay(n, 0, NPAT);
    for (int m = 0; m < 2; ++m) {
      host_argminmax(n, dt, &rows, m);
      host_argminmax(n, dt, &cols, m);
      host_maxmin(n, dt, &rows, m);
      host_maxmin(n, dt, &cols, m);
      host_window(n, dt, &rows, 0, false, m);
      host_window(n, dt, &rows, 0, true, m);
      host_window(n, dt, &cols, 0, false, m);
      host_window(n, dt, &rows, 7, false, m);
    }
    host_sort(n, dt, &rows);
    if (is_edge(n)) host_sort(n, dt, &cols);
    // Wide: the generic path's sequential order (kept >= 64), and a 1-D
    // reduce whose rows split over the threads.
    if (n <= 4097) {
      layout_t wide = lay(n, 1, 5 * NPAT);
      host_argminmax(n, dt, &wide, true);
    }
    layout_t one = lay(n, 1, 1);
    one.pat0 = 13;  // inf, -NaN, NaN
    host_maxmin(n, dt, &one, true);
    one.pat0 = 1;  // the two NaNs
    host_argminmax(n, dt, &one, false);
  }
}

static void test_host_sweep(void) {
  for (int i = 0; i < g_nlengths; ++i) host_sweep_length(g_lengths[i]);
}

// The planted bug the sweep must catch: a tree that merges row i with row
// i + r/2 (the host's reduce before issue 13's fix) returns the later NaN.
static void test_reference_rejects_unordered_tree(void) {
  double row[65];
  pattern_row(1, 65, row);
  CHECK_EQ_INT(ref_arg(row, 65, 1, true), 1);
  // Halving: pairs (i, i + h); at the end positions 0 and 1 hold the NaNs
  // of 2 and 1, and the body keeps its first operand.
  double v[65];
  int32_t ix[65];
  for (int i = 0; i < 65; ++i) {
    v[i] = row[i];
    ix[i] = i;
  }
  int64_t r = 65;
  while (r > 1) {
    int64_t h = r / 2;
    for (int64_t i = 0; i < h; ++i) {
      double a = v[i], x = v[i + h];
      bool pa = a > x || a != a;
      bool pi = pa || (a == x && ix[i] < ix[i + h]);
      int32_t ni = pi ? ix[i] : ix[i + h];
      v[i] = pa ? a : x;
      ix[i] = ni;
    }
    if (r % 2) {
      v[h] = v[2 * h];
      ix[h] = ix[2 * h];
    }
    r = h + r % 2;
  }
  CHECK_EQ_INT(ix[0], 2);
}

// --- CUDA generated kernels, emulated ---------------------------------------

#define MAX_EMU 1024
typedef struct emu_case {
  char what[96];
  char kname[64];
  char *src;
  unsigned grid, block;
  int nargs;
  iron_tensor_t *t[6];
  int out_at;        // the checked output (values, or indices when idx)
  bool idx, is_max;  // argmax/argmin: check indices
  int64_t n, win;
  bool rev;
  layout_t l;
  iron_dtype_t dt;
  double *vals;
} emu_case_t;
static emu_case_t g_emu[MAX_EMU];
static int g_nemu;

static bool is_cuda_edge(int64_t n) {
  static const int64_t e[] = {1,    2,    7,    8,     9,     10,   31,   32,
                              33,   63,   64,   65,    100,   255,  256,  257,
                              300,  511,  512,  513,   1000,  2047, 2048, 2049,
                              4095, 4096, 4097, 65537, 100000};
  for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); ++i)
    if (e[i] == n) return true;
  return false;
}

static emu_case_t *emu_new(const char *what, iron_status_t st, char *src,
                           const char *kname) {
  CHECK_OK(st);
  if (st || g_nemu >= MAX_EMU) {
    free(src);
    return NULL;
  }
  emu_case_t *c = &g_emu[g_nemu++];
  memset(c, 0, sizeof(*c));
  snprintf(c->what, sizeof(c->what), "%s", what);
  snprintf(c->kname, sizeof(c->kname), "%s", kname);
  c->src = src;
  return c;
}

static void cuda_reduce_case(int64_t n, iron_dtype_t dt, const layout_t *l,
                             bool arg, bool is_max) {
  bool reduced[2] = {l->rdim == 0, l->rdim == 1};
  iron_dtype_t dts[2] = {dt, IRON_DTYPE_S32};
  bb_t *body =
      arg ? argminmax_body(dt, is_max)
          : single_body(dt, is_max ? IRON_OP_MAXIMUM : IRON_OP_MINIMUM);
  char what[96], kname[64];
  snprintf(kname, sizeof(kname), "k%d", g_nemu);
  snprintf(what, sizeof(what), "cuda %s%s %s [%lld,%lld]/%d", arg ? "arg" : "",
           is_max ? "max" : "min", iron_dtype_name(dt), (long long)l->dims[0],
           (long long)l->dims[1], l->rdim);
  char *src = NULL;
  unsigned grid = 0, block = 0;
  iron_status_t st =
      iron_cuda_gen_reduce(kname, 2, l->dims, reduced, arg ? 2 : 1, dts,
                           &(iron_region_t){.ir = &body->region}, &src,
                           &grid, &block);
  free(body);
  emu_case_t *c = emu_new(what, st, src, kname);
  if (!c) return;
  c->grid = grid;
  c->block = block;
  c->idx = arg;
  c->is_max = is_max;
  c->n = n;
  c->l = *l;
  c->dt = dt;
  int64_t od = l->rows;
  c->vals = malloc(sizeof(double) * (size_t)(l->rows * n));
  c->t[0] = ht_tensor(dt, 2, l->dims);
  if (arg) {
    c->t[1] = ht_tensor(IRON_DTYPE_S32, 2, l->dims);
    c->t[2] = ht_tensor(dt, 0, NULL);
    c->t[3] = ht_tensor(IRON_DTYPE_S32, 0, NULL);
    c->t[4] = ht_tensor(dt, 1, &od);
    c->t[5] = ht_tensor(IRON_DTYPE_S32, 1, &od);
    c->nargs = 6;
    c->out_at = 5;
    fill(l, n, dt, c->t[0]->data, c->t[1]->data, c->vals);
    store(dt, c->t[2]->data, 0, is_max ? -INFINITY : INFINITY);
    *(int32_t *)c->t[3]->data = 0;
  } else {
    c->t[1] = ht_tensor(dt, 0, NULL);
    c->t[2] = ht_tensor(dt, 1, &od);
    c->nargs = 3;
    c->out_at = 2;
    fill(l, n, dt, c->t[0]->data, NULL, c->vals);
    store(dt, c->t[1]->data, 0, is_max ? -INFINITY : INFINITY);
  }
}

// win == 0: the cumulative scan generator (window.c's scan path); else the
// reduce_window generator with a sliding window.
static void cuda_window_case(int64_t n, iron_dtype_t dt, const layout_t *l,
                             int64_t win, bool rev, bool is_max) {
  char what[96], kname[64];
  snprintf(kname, sizeof(kname), "k%d", g_nemu);
  snprintf(what, sizeof(what), "cuda %s%s window %lld %s [%lld,%lld]/%d",
           rev ? "reverse " : "", is_max ? "max" : "min", (long long)win,
           iron_dtype_name(dt), (long long)l->dims[0], (long long)l->dims[1],
           l->rdim);
  char *src = NULL;
  unsigned grid = 0;
  iron_status_t st;
  ht_op_t b;
  int64_t od[2];
  window_op(&b, n, dt, l, win, rev, od);
  if (win == 0) {
    iron_cuda_scan_t sc;
    memset(&sc, 0, sizeof(sc));
    sc.kind = is_max ? IRON_OP_MAXIMUM : IRON_OP_MINIMUM;
    sc.n = n;
    sc.rev = rev;
    sc.outer = l->rdim == 1 ? l->rows : 1;
    sc.inner = l->rdim == 1 ? 1 : l->rows;
    st = iron_cuda_gen_scan(kname, &sc, dt, &src, &grid);
  } else {
    iron_cuda_window_t w;
    memset(&w, 0, sizeof(w));
    w.rank = 2;
    for (int d = 0; d < 2; ++d) {
      w.in_dims[d] = l->dims[d];
      w.out_dims[d] = od[d];
      w.wdims[d] = d == l->rdim ? win : 1;
      w.strides[d] = w.base_dil[d] = w.win_dil[d] = 1;
      w.pad_lo[d] = d == l->rdim ? win / 2 : 0;
    }
    bb_t *body = single_body(dt, is_max ? IRON_OP_MAXIMUM : IRON_OP_MINIMUM);
    st = iron_cuda_gen_reduce_window(kname, &w, 1, &dt,
                                     &(iron_region_t){.ir = &body->region}, &src,
                                     &grid);
    free(body);
  }
  emu_case_t *c = emu_new(what, st, src, kname);
  if (!c) return;
  c->grid = grid;
  c->block = 256;
  c->is_max = is_max;
  c->n = n;
  c->win = win;
  c->rev = rev;
  c->l = *l;
  c->dt = dt;
  c->vals = malloc(sizeof(double) * (size_t)(l->rows * n));
  c->t[0] = ht_tensor(dt, 2, l->dims);
  c->t[1] = ht_tensor(dt, 0, NULL);
  c->t[2] = ht_tensor(dt, 2, od);
  c->nargs = 3;
  c->out_at = 2;
  fill(l, n, dt, c->t[0]->data, NULL, c->vals);
  store(dt, c->t[1]->data, 0, is_max ? -INFINITY : INFINITY);
}

static void emu_check(const emu_case_t *c) {
  const iron_tensor_t *o = c->t[c->out_at];
  int64_t n = c->n;
  if (c->win || (!c->idx && o->rank == 2)) {
    int64_t od[2] = {o->dims[0], o->dims[1]};
    check_window(c->what, n, c->dt, &c->l, c->win, c->rev, c->is_max, c->vals,
                 o->data, od);
    return;
  }
  for (int64_t p = 0; p < c->l.rows; ++p) {
    if (c->idx) {
      int32_t want = ref_arg(c->vals + p * n, n, 1, c->is_max);
      int32_t got = ((const int32_t *)o->data)[p];
      if (got != want) report(c->what, n, p, 0, got, want);
    } else {
      double want = c->is_max ? -INFINITY : INFINITY;
      for (int64_t r = 0; r < n; ++r)
        want = c->is_max ? ref_max(want, c->vals[p * n + r])
                         : ref_min(want, c->vals[p * n + r]);
      double got = load(c->dt, o->data, p);
      if (!same(got, want)) report(c->what, n, p, 0, got, want);
    }
  }
}

static void test_cuda_sweep(void) {
  if (!cuda_emu_have_cxx()) {
    fprintf(stderr, "  no C++ compiler: the CUDA emulation part is skipped\n");
    return;
  }
  for (int i = 0; i < g_nlengths; ++i) {
    int64_t n = g_lengths[i];
    if (!is_cuda_edge(n)) continue;
    layout_t rows = lay(n, 1, NPAT), cols = lay(n, 0, NPAT), one = lay(n, 1, 1);
    one.pat0 = 4;  // NaNs at n/3, n/2, n - 1
    for (int m = 0; m < 2; ++m) {
      cuda_reduce_case(n, IRON_DTYPE_F32, &rows, true, m);
      cuda_reduce_case(n, IRON_DTYPE_F32, &cols, true, m);
      cuda_reduce_case(n, IRON_DTYPE_F32, &one, true, m);
      cuda_reduce_case(n, IRON_DTYPE_F32, &rows, false, m);
      cuda_reduce_case(n, IRON_DTYPE_F32, &cols, false, m);
      cuda_window_case(n, IRON_DTYPE_F32, &rows, 0, m, m);
      cuda_window_case(n, IRON_DTYPE_F32, &cols, 0, !m, m);
      if (n <= 4097) cuda_window_case(n, IRON_DTYPE_F32, &rows, 7, false, m);
    }
    if (n == 1 || n == 65 || n == 257 || n == 4097) {
      cuda_reduce_case(n, IRON_DTYPE_F16, &rows, true, true);
      cuda_reduce_case(n, IRON_DTYPE_BF16, &cols, false, false);
      cuda_window_case(n, IRON_DTYPE_BF16, &rows, 0, false, true);
    }
  }
  const char **srcs = malloc(sizeof(char *) * (size_t)(g_nemu + 1));
  for (int i = 0; i < g_nemu; ++i) srcs[i] = g_emu[i].src;
  cuda_emu_lib_t lib;
  bool built = cuda_emu_build_mt(srcs, g_nemu, iron_cuda_prelude(), &lib);
  CHECK(built);
  free(srcs);
  for (int i = 0; built && i < g_nemu; ++i) {
    emu_case_t *c = &g_emu[i];
    void *ptrs[6], *args[6];
    for (int k = 0; k < c->nargs; ++k) {
      ptrs[k] = c->t[k]->data;
      args[k] = &ptrs[k];  // as cuLaunchKernel takes them
    }
    bool ok = cuda_emu_launch(&lib, c->kname, c->grid, c->block, args) == 0;
    if (!ok) fprintf(stderr, "  %s: launch failed\n", c->what);
    CHECK(ok);
    if (ok) emu_check(c);
  }
  if (built) cuda_emu_close(&lib);
  for (int i = 0; i < g_nemu; ++i) {
    free(g_emu[i].src);
    free(g_emu[i].vals);
    for (int k = 0; k < 6; ++k) ht_tensor_free(g_emu[i].t[k]);
  }
  fprintf(stderr, "  %d CUDA kernels emulated\n", g_nemu);
}

static void setup(void) {
  CHECK_OK(iron_threadpool_create(4, &g_pool));
  g_nlengths = 0;
  for (int64_t n = 1; n <= 300; ++n) g_lengths[g_nlengths++] = n;
  for (int k = 9; k <= 16; ++k)
    for (int64_t d = -1; d <= 1; ++d) g_lengths[g_nlengths++] = (1 << k) + d;
  g_lengths[g_nlengths++] = 16385;
  g_lengths[g_nlengths++] = 100000;
}

static void test_all(void) {
  setup();
  test_reference_rejects_unordered_tree();
  test_host_sweep();
  test_cuda_sweep();
  iron_threadpool_destroy(g_pool);
}

static const iron_test_case_t kTests[] = {
    {"reduce_nan_sweep", test_all},
};

IRON_TEST_MAIN(kTests)
