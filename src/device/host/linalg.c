// stablehlo.cholesky and stablehlo.triangular_solve on the host: plain C
// (no LAPACK needed), batched, f32/f64/c64/c128, computed in double
// precision and rounded once.
//
// XLA:CPU semantics: cholesky reads only the `lower` (or upper) triangle,
// zeroes the other one, and returns an all-NaN matrix when the input is not
// positive definite; triangular_solve reads only the named triangle of `a`
// (and not its diagonal when unit_diagonal).
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cplx.h"
#include "device/host/host_kernel.h"

typedef double complex zd;

static zd load(const void *p, iron_dtype_t dt, int64_t i) {
  switch (dt) {
    case IRON_DTYPE_F32: return ((const float *)p)[i];
    case IRON_DTYPE_F64: return ((const double *)p)[i];
    case IRON_DTYPE_C64: {
      const float *f = p;
      return CMPLX(f[2 * i], f[2 * i + 1]);
    }
    default: {
      const double *d = p;
      return CMPLX(d[2 * i], d[2 * i + 1]);
    }
  }
}

static void store(void *p, iron_dtype_t dt, int64_t i, zd v) {
  switch (dt) {
    case IRON_DTYPE_F32: ((float *)p)[i] = (float)creal(v); break;
    case IRON_DTYPE_F64: ((double *)p)[i] = creal(v); break;
    case IRON_DTYPE_C64:
      ((float *)p)[2 * i] = (float)creal(v);
      ((float *)p)[2 * i + 1] = (float)cimag(v);
      break;
    default:
      ((double *)p)[2 * i] = creal(v);
      ((double *)p)[2 * i + 1] = cimag(v);
      break;
  }
}

static bool linalg_dtype_ok(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F32 || dt == IRON_DTYPE_F64 ||
         dt == IRON_DTYPE_C64 || dt == IRON_DTYPE_C128;
}

static bool attr_bool(const iron_ir_op_t *op, const char *name, bool dflt) {
  const iron_ir_attr_t *a = iron_ir_op_attr(op, name);
  if (!a) return dflt;
  if (a->kind == IRON_ATTR_BOOL) return a->b;
  int64_t v;
  return iron_ir_attr_as_i64(a, &v) ? v != 0 : dflt;
}

// --- cholesky ---------------------------------------------------------------

typedef struct {
  bool lower;
} chol_params_t;

static iron_status_t chol_prepare(const iron_ir_op_t *op,
                                  iron_region_t *const *regions,
                                  void **out_params) {
  if (op->num_operands != 1 || op->num_results != 1)
    return iron_ir_op_unimplemented(op, "with %u operands", op->num_operands);
  const iron_ir_type_t *t = op->operands[0]->type;
  if (t->kind != IRON_TYPE_TENSOR || t->rank < 2 ||
      t->dims[t->rank - 1] != t->dims[t->rank - 2])
    return iron_ir_op_unimplemented(op, "on a non-square or unranked operand");
  if (!linalg_dtype_ok(t->dtype))
    return iron_ir_op_unimplemented(op, "for dtype %s",
                                    iron_dtype_name(t->dtype));
  chol_params_t *p = malloc(sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->lower = attr_bool(op, "lower", false);
  *out_params = p;
  return IRON_OK;
}

static iron_status_t chol_run(const iron_kernel_ctx_t *ctx, const void *params,
                              const iron_tensor_t *const *inputs,
                              iron_tensor_t *const *outputs) {
  const chol_params_t *p = params;
  const iron_tensor_t *a = inputs[0];
  iron_tensor_t *o = outputs[0];
  const int64_t n = a->dims[a->rank - 1];
  if (n == 0) return IRON_OK;
  const int64_t nb = a->count / (n * n);
  zd *l = malloc((size_t)(n * n) * sizeof(zd));
  if (!l) return IRON_ERR(RESOURCE_EXHAUSTED, "cholesky: out of memory");
  const bool cplx = a->dtype == IRON_DTYPE_C64 || a->dtype == IRON_DTYPE_C128;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t base = b * n * n;
    // Work on the lower factor L; for upper, A's upper triangle read as
    // the lower triangle of A^H, and U = L^H.
    bool ok = true;
    for (int64_t j = 0; j < n && ok; ++j) {
      for (int64_t i = j; i < n; ++i) {
        zd aij = p->lower ? load(a->data, a->dtype, base + i * n + j)
                          : conj(load(a->data, a->dtype, base + j * n + i));
        zd s = aij;
        for (int64_t k = 0; k < j; ++k) s -= l[i * n + k] * conj(l[j * n + k]);
        if (i == j) {
          double d = creal(s);
          if (!(d > 0)) {
            ok = false;
            break;
          }
          l[j * n + j] = sqrt(d);
        } else {
          l[i * n + j] = s / creal(l[j * n + j]);
        }
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        zd v;
        if (!ok)
          v = cplx ? CMPLX(NAN, NAN) : NAN;
        else if (p->lower)
          v = j <= i ? l[i * n + j] : 0;
        else
          v = j >= i ? conj(l[j * n + i]) : 0;
        store(o->data, o->dtype, base + i * n + j, v);
      }
    }
  }
  free(l);
  return IRON_OK;
}

// --- triangular_solve -------------------------------------------------------

typedef struct {
  bool left, lower, unit;
  int32_t transpose;  // 1 none, 2 transpose, 3 adjoint
} tri_params_t;

static iron_status_t tri_prepare(const iron_ir_op_t *op,
                                 iron_region_t *const *regions,
                                 void **out_params) {
  if (op->num_operands != 2 || op->num_results != 1)
    return iron_ir_op_unimplemented(op, "with %u operands", op->num_operands);
  const iron_ir_type_t *ta = op->operands[0]->type, *tb = op->operands[1]->type;
  if (ta->kind != IRON_TYPE_TENSOR || tb->kind != IRON_TYPE_TENSOR ||
      ta->rank < 2 || ta->rank != tb->rank ||
      ta->dims[ta->rank - 1] != ta->dims[ta->rank - 2])
    return iron_ir_op_unimplemented(op, "with these operand shapes");
  for (int32_t d = 0; d + 2 < ta->rank; ++d)
    if (ta->dims[d] != tb->dims[d])
      return iron_ir_op_unimplemented(op, "with mismatched batch dims");
  if (!linalg_dtype_ok(ta->dtype) || tb->dtype != ta->dtype)
    return iron_ir_op_unimplemented(op, "for dtype %s",
                                    iron_dtype_name(ta->dtype));
  tri_params_t *p = malloc(sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->left = attr_bool(op, "left_side", false);
  p->lower = attr_bool(op, "lower", false);
  p->unit = attr_bool(op, "unit_diagonal", false);
  p->transpose = iron_ir_op_enum(op, "transpose_a", 1);
  int64_t m = tb->dims[tb->rank - 2], n = tb->dims[tb->rank - 1];
  int64_t k = ta->dims[ta->rank - 1];
  if (p->transpose < 1 || p->transpose > 3 || (p->left ? m : n) != k) {
    int32_t tr = p->transpose;
    free(p);
    return iron_ir_op_unimplemented(op, "with transpose_a %d or a of size %lld",
                                    tr, (long long)k);
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t tri_run(const iron_kernel_ctx_t *ctx, const void *params,
                             const iron_tensor_t *const *inputs,
                             iron_tensor_t *const *outputs) {
  const tri_params_t *p = params;
  const iron_tensor_t *a = inputs[0], *bt = inputs[1];
  iron_tensor_t *o = outputs[0];
  const int64_t k = a->dims[a->rank - 1];
  const int64_t m = bt->dims[bt->rank - 2], n = bt->dims[bt->rank - 1];
  if (k == 0 || m == 0 || n == 0) return IRON_OK;
  const int64_t nb = a->count / (k * k);
  zd *mat = malloc((size_t)(k * k) * sizeof(zd));
  zd *x = malloc((size_t)(m * n) * sizeof(zd));
  if (!mat || !x) {
    free(mat);
    free(x);
    return IRON_ERR(RESOURCE_EXHAUSTED, "triangular_solve: out of memory");
  }
  // M = op(a) restricted to its triangle; M is lower iff lower xor transposed.
  const bool mlower = p->lower != (p->transpose != 1);
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t abase = b * k * k, bbase = b * m * n;
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        bool in_tri = mlower ? j <= i : j >= i;
        zd v = 0;
        if (i == j && p->unit)
          v = 1;
        else if (in_tri) {
          v = p->transpose == 1 ? load(a->data, a->dtype, abase + i * k + j)
                                : load(a->data, a->dtype, abase + j * k + i);
          if (p->transpose == 3) v = conj(v);
        }
        mat[i * k + j] = v;
      }
    }
    for (int64_t i = 0; i < m * n; ++i) x[i] = load(bt->data, bt->dtype, bbase + i);
    if (p->left) {
      // M X = B, M is k x k (k == m).
      for (int64_t s = 0; s < m; ++s) {
        int64_t i = mlower ? s : m - 1 - s;
        for (int64_t c = 0; c < n; ++c) {
          zd acc = x[i * n + c];
          if (mlower)
            for (int64_t q = 0; q < i; ++q) acc -= mat[i * k + q] * x[q * n + c];
          else
            for (int64_t q = i + 1; q < m; ++q) acc -= mat[i * k + q] * x[q * n + c];
          x[i * n + c] = acc / mat[i * k + i];
        }
      }
    } else {
      // X M = B, M is k x k (k == n): column j of X from the others.
      for (int64_t s = 0; s < n; ++s) {
        int64_t j = mlower ? n - 1 - s : s;
        for (int64_t r = 0; r < m; ++r) {
          zd acc = x[r * n + j];
          if (mlower)
            for (int64_t q = j + 1; q < n; ++q) acc -= x[r * n + q] * mat[q * k + j];
          else
            for (int64_t q = 0; q < j; ++q) acc -= x[r * n + q] * mat[q * k + j];
          x[r * n + j] = acc / mat[j * k + j];
        }
      }
    }
    for (int64_t i = 0; i < m * n; ++i) store(o->data, o->dtype, bbase + i, x[i]);
  }
  free(mat);
  free(x);
  return IRON_OK;
}

static const iron_kernel_t kCholesky = {
    /* .name = */ "cholesky",
    /* .prepare = */ chol_prepare,
    /* .run = */ chol_run,
    /* .destroy = */ NULL,
    /* .inplace_ok = */ false,
    /* .elementwise = */ false,
};

static const iron_kernel_t kTriangularSolve = {
    /* .name = */ "triangular_solve",
    /* .prepare = */ tri_prepare,
    /* .run = */ tri_run,
    /* .destroy = */ NULL,
    /* .inplace_ok = */ false,
    /* .elementwise = */ false,
};

void iron_host_register_linalg(iron_kernel_table_t table) {
  table[IRON_OP_CHOLESKY] = &kCholesky;
  table[IRON_OP_TRIANGULAR_SOLVE] = &kTriangularSolve;
}
