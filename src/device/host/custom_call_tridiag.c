// jaxlib's "tridiagonal_solve_perturbed_ffi" on the host: what jax's CPU
// lowering of lax.linalg.tridiagonal_solve(..., perturb_singular=True)
// emits (jax.scipy.linalg.eigh_tridiagonal uses it for the inverse
// iteration of its eigenvectors, inside a while loop).
//
// Operands dl, d, du ([..., n], row-major; dl[0] and du[n-1] unused) and
// b ([..., n, k], column-major per matrix); one result x like b. There is no
// LAPACK routine with these semantics: it is LU with partial (row) pivoting
// of the tridiagonal matrix, the forward solve fused into the
// factorization (as LAPACK's xLAGTF), then back substitution in which a
// pivot of U that is tiny relative to eps * max|U(i,j)| (or would make the
// row overflow) is pushed away from zero, as LAPACK's xLAGTS does with
// job = -1. A singular matrix therefore gives a large finite solution
// instead of inf/NaN, which is what inverse iteration needs. The steps and
// their order follow XLA:CPU's handler so that results agree to rounding.
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cplx.h"
#include "device/host/custom_call.h"

typedef struct {
  iron_dtype_t dtype;
} tsp_params_t;

// One instantiation per element type: T the scalar, R its real type, ABS
// the modulus, RABS that of R, RE the real part, EPS/RMIN/RMAX the
// <float.h> constants of R.
#define TSP_DEFINE(SUF, T, R, ABS, RABS, RE, EPS, RMIN, RMAX, COPYSIGN)        \
  /* Makes `*pivot` safe to divide the row `row` (k entries) by: neither       \
     1/pivot nor row/pivot may overflow. Tiny pivots grow by `perturb`         \
     (doubling each time, with the pivot's sign), or pivot and row are scaled  \
     up together when that alone suffices. */                                  \
  static void tsp_fix_pivot_##SUF(R perturb, T *pivot, T *row, int64_t k) {    \
    const R one = (R)1;                                                        \
    const R tiny = RMIN, small = one / RMAX;                                   \
    const R safemin = small < tiny ? tiny : small * (one + EPS);               \
    const R bignum = one / safemin;                                            \
    R apiv = ABS(*pivot);                                                      \
    if (apiv >= one) return;                                                   \
    R ap = RABS(perturb);                                                      \
    perturb = ap < safemin ? safemin : ap;                                     \
    perturb = COPYSIGN(perturb, RE(*pivot));                                   \
    R maxf = 0;                                                                \
    for (int64_t j = 0; j < k; ++j) {                                          \
      R a = ABS(row[j]);                                                       \
      if (a > maxf) maxf = a;                                                  \
    }                                                                          \
    bool stop = false;                                                         \
    while (apiv < one && !stop) {                                              \
      if (apiv < safemin) {                                                    \
        if (apiv == (R)0 || maxf * safemin > apiv) {                           \
          *pivot += perturb;                                                   \
          perturb *= (R)2;                                                     \
        } else {                                                               \
          *pivot *= bignum;                                                    \
          for (int64_t j = 0; j < k; ++j) row[j] *= bignum;                    \
          stop = true;                                                         \
        }                                                                      \
      } else if (maxf > apiv * bignum) {                                       \
        *pivot += perturb;                                                     \
        perturb *= (R)2;                                                       \
      } else {                                                                 \
        stop = true;                                                           \
      }                                                                        \
      apiv = ABS(*pivot);                                                      \
    }                                                                          \
  }                                                                            \
                                                                               \
  /* One system: x(i, j) = x[i + j * n] (column-major), u: 3 * n scratch (the  \
     diagonal and two superdiagonals of U), row: k scratch. */                 \
  static void tsp_solve_##SUF(int64_t n, int64_t k, const T *dl, const T *d,   \
                              const T *du, const T *b, T *x, T *u, T *row) {   \
    if (n == 0) return;                                                        \
    if (n == 1) {                                                              \
      T p = d[0];                                                              \
      for (int64_t j = 0; j < k; ++j) row[j] = b[j];                           \
      tsp_fix_pivot_##SUF(EPS * ABS(p), &p, row, k);                           \
      for (int64_t j = 0; j < k; ++j) x[j] = row[j] / p;                       \
      return;                                                                  \
    }                                                                          \
    T *u0 = u, *u1 = u + n, *u2 = u + 2 * n;                                   \
    for (int64_t i = 0; i < 3 * n; ++i) u[i] = 0;                              \
    u0[0] = d[0];                                                              \
    u1[0] = du[0];                                                             \
    R max_u = ABS(u0[0]) < ABS(u1[0]) ? ABS(u1[0]) : ABS(u0[0]);               \
    R scale1 = ABS(u0[0]) + ABS(u1[0]);                                        \
    for (int64_t j = 0; j < k; ++j) x[j * n] = b[j * n];                       \
    /* Factorization with the forward solve L z = P b in x. */                 \
    for (int64_t i = 0; i + 1 < n; ++i) {                                      \
      const bool not_last = i + 2 < n;                                         \
      u0[i + 1] = d[i + 1];                                                    \
      R scale2 = ABS(dl[i + 1]) + ABS(u0[i + 1]);                              \
      if (not_last) scale2 += ABS(du[i + 1]);                                  \
      if (dl[i + 1] == (T)0) {                                                 \
        scale1 = scale2;                                                       \
        u1[i + 1] = du[i + 1];                                                 \
        u2[i] = 0;                                                             \
        for (int64_t j = 0; j < k; ++j) x[i + 1 + j * n] = b[i + 1 + j * n];   \
      } else {                                                                 \
        const R piv1 = u0[i] == (T)0 ? (R)0 : ABS(u0[i]) / scale1;             \
        const R piv2 = ABS(dl[i + 1]) / scale2;                                \
        if (piv2 <= piv1) { /* no row exchange */                              \
          scale1 = scale2;                                                     \
          const T f = dl[i + 1] / u0[i];                                       \
          u0[i + 1] -= f * u1[i];                                              \
          u1[i + 1] = du[i + 1];                                               \
          u2[i] = 0;                                                           \
          for (int64_t j = 0; j < k; ++j)                                      \
            x[i + 1 + j * n] = b[i + 1 + j * n] - f * x[i + j * n];            \
        } else { /* rows i and i + 1 exchanged */                              \
          const T f = u0[i] / dl[i + 1];                                       \
          const T ut = u1[i];                                                  \
          u0[i] = dl[i + 1];                                                   \
          u0[i + 1] = ut - f * d[i + 1];                                       \
          u1[i] = d[i + 1];                                                    \
          if (not_last) {                                                      \
            u2[i] = du[i + 1];                                                 \
            u1[i + 1] = -f * du[i + 1];                                        \
          }                                                                    \
          for (int64_t j = 0; j < k; ++j) {                                    \
            x[i + 1 + j * n] = x[i + j * n] - f * b[i + 1 + j * n];            \
            x[i + j * n] = b[i + 1 + j * n];                                   \
          }                                                                    \
          scale1 = ABS(u0[i + 1]) + ABS(u1[i + 1]);                            \
        }                                                                      \
      }                                                                        \
      if (not_last) {                                                          \
        const R a[3] = {ABS(u0[i]), ABS(u1[i]), ABS(u2[i])};                   \
        for (int c = 0; c < 3; ++c)                                            \
          if (max_u < a[c]) max_u = a[c];                                      \
      }                                                                        \
    }                                                                          \
    if (max_u < ABS(u0[n - 1])) max_u = ABS(u0[n - 1]);                        \
    /* Back substitution U x = z with perturbed tiny pivots. */                \
    const R perturb = EPS * max_u;                                             \
    for (int64_t i = n - 1; i >= 0; --i) {                                     \
      T p = u0[i];                                                             \
      for (int64_t j = 0; j < k; ++j) {                                        \
        T r = x[i + j * n];                                                    \
        if (i + 1 < n) r = r - u1[i] * x[i + 1 + j * n];                       \
        if (i + 2 < n) r = r - u2[i] * x[i + 2 + j * n];                       \
        row[j] = r;                                                            \
      }                                                                        \
      tsp_fix_pivot_##SUF(i == n - 1 ? perturb : COPYSIGN(perturb, RE(p)), &p, \
                          row, k);                                             \
      const T inv = (T)1 / p;                                                  \
      for (int64_t j = 0; j < k; ++j) x[i + j * n] = row[j] * inv;             \
    }                                                                          \
  }

static float re_f(float x) { return x; }
static double re_d(double x) { return x; }

TSP_DEFINE(f32, float, float, fabsf, fabsf, re_f, FLT_EPSILON, FLT_MIN, FLT_MAX,
           copysignf)
TSP_DEFINE(f64, double, double, fabs, fabs, re_d, DBL_EPSILON, DBL_MIN, DBL_MAX,
           copysign)
TSP_DEFINE(c64, float complex, float, cabsf, fabsf, crealf, FLT_EPSILON, FLT_MIN,
           FLT_MAX, copysignf)
TSP_DEFINE(c128, double complex, double, cabs, fabs, creal, DBL_EPSILON, DBL_MIN,
           DBL_MAX, copysign)

#undef TSP_DEFINE

static iron_status_t tsp_run(const iron_kernel_ctx_t *ctx, const void *params,
                             const iron_tensor_t *const *in,
                             iron_tensor_t *const *out) {
  (void)ctx;
  const tsp_params_t *p = params;
  const iron_tensor_t *b = in[3];
  int64_t n = b->dims[b->rank - 2], k = b->dims[b->rank - 1];
  int64_t batch = 1;
  for (int32_t i = 0; i + 2 < b->rank; ++i) batch *= b->dims[i];
  if (batch == 0 || n == 0 || k == 0) return IRON_OK;
  size_t es = iron_dtype_size(p->dtype), bytes;
  // 3 * n for U, k for one row of the right-hand side.
  if (iron_mul_overflow_size((size_t)(3 * n + k), es, &bytes))
    return IRON_ERR(RESOURCE_EXHAUSTED, "tridiagonal_solve_perturbed: "
                    "workspace size overflows");
  char *ws = malloc(bytes);
  if (!ws)
    return IRON_ERR(RESOURCE_EXHAUSTED,
                    "tridiagonal_solve_perturbed: out of memory");
  const char *dl = in[0]->data, *d = in[1]->data, *du = in[2]->data;
  const char *bb = b->data;
  char *x = out[0]->data;
  const size_t dstep = (size_t)n * es, bstep = (size_t)(n * k) * es;
  char *row = ws + (size_t)(3 * n) * es;
  for (int64_t i = 0; i < batch; ++i) {
    size_t od = (size_t)i * dstep, ob = (size_t)i * bstep;
#define TSP_CALL(SUF, T)                                                     \
  tsp_solve_##SUF(n, k, (const T *)(dl + od), (const T *)(d + od),           \
                  (const T *)(du + od), (const T *)(bb + ob), (T *)(x + ob), \
                  (T *)ws, (T *)row)
    switch (p->dtype) {
      case IRON_DTYPE_F32: TSP_CALL(f32, float); break;
      case IRON_DTYPE_F64: TSP_CALL(f64, double); break;
      case IRON_DTYPE_C64: TSP_CALL(c64, float complex); break;
      default: TSP_CALL(c128, double complex); break;
    }
#undef TSP_CALL
  }
  free(ws);
  return IRON_OK;
}

// Layouts: b and x column-major per matrix with the batch outside, the
// diagonals row-major (what _linalg_ffi_lowering declares).
static iron_status_t tsp_prepare(const iron_ir_op_t *op, void **out_params) {
  if (op->num_operands != 4 || op->num_results != 1)
    return iron_ir_op_unimplemented(
        op, "tridiagonal_solve_perturbed_ffi with %u operands and %u results "
        "(expected 4 and 1)", op->num_operands, op->num_results);
  const iron_ir_type_t *bt = op->operands[3]->type;
  if (bt->kind != IRON_TYPE_TENSOR || bt->rank < 2 ||
      !iron_ir_type_is_static(bt))
    return iron_ir_op_unimplemented(
        op, "tridiagonal_solve_perturbed_ffi with a right-hand side that is "
        "not a static matrix");
  iron_dtype_t dt = bt->dtype;
  if (dt != IRON_DTYPE_F32 && dt != IRON_DTYPE_F64 && dt != IRON_DTYPE_C64 &&
      dt != IRON_DTYPE_C128)
    return iron_ir_op_unimplemented(op, "tridiagonal_solve_perturbed_ffi on %s",
                                    iron_dtype_name(dt));
  const int32_t r = bt->rank;
  for (uint32_t i = 0; i < 5; ++i) {
    bool result = i == 4;
    const iron_ir_type_t *t =
        result ? op->results[0].type : op->operands[i]->type;
    bool diag = i < 3;
    bool ok = t->kind == IRON_TYPE_TENSOR && t->dtype == dt &&
              t->rank == (diag ? r - 1 : r);
    for (int32_t dd = 0; ok && dd < t->rank; ++dd)
      ok = t->dims[dd] == bt->dims[dd];
    if (!ok)
      return iron_ir_op_unimplemented(
          op, "tridiagonal_solve_perturbed_ffi with mismatched %s %u",
          result ? "result" : "operand", result ? 0 : i);
    int64_t m2m[IRON_MAX_RANK];
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_host_custom_call_layout(op, result, result ? 0 : i, m2m));
    if (diag) {
      for (int32_t dd = 0; ok && dd < t->rank; ++dd)
        ok = m2m[dd] == t->rank - 1 - dd;
    } else {
      ok = m2m[0] == r - 2 && m2m[1] == r - 1;
      for (int32_t dd = 2; ok && dd < r; ++dd) ok = m2m[dd] == r - 1 - dd;
    }
    if (!ok)
      return iron_ir_op_unimplemented(
          op, "tridiagonal_solve_perturbed_ffi with a layout of %s %u other "
          "than jaxlib's", result ? "result" : "operand", result ? 0 : i);
  }
  tsp_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->dtype = dt;
  *out_params = p;
  return IRON_OK;
}

static const iron_host_custom_call_target_t kTridiagonalSolvePerturbed = {
    /* .name = */ "tridiagonal_solve_perturbed_ffi",
    /* .prepare = */ tsp_prepare,
    /* .run = */ tsp_run,
    /* .destroy = */ NULL,
};

const iron_host_custom_call_target_t *iron_host_custom_call_tridiag_find(
    const char *name) {
  if (name && strcmp(name, "tridiagonal_solve_perturbed_ffi") == 0)
    return &kTridiagonalSolvePerturbed;
  return NULL;
}
