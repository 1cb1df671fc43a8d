// jaxlib's LAPACK FFI custom-call targets on the host ("lapack_dgetrf_ffi",
// ...): what jax's CPU lowerings of the linalg primitives emit, and what
// python/ironjax/linalg.py makes jax emit for the iron platform too.
//
// Operands, results and attributes follow jaxlib's handlers
// (jaxlib/cpu/lapack_kernels.cc): matrices column-major (the generic custom
// call kernel has converted them to the declared layouts), outputs that
// alias an input in XLA start as a copy of it, `info` is LAPACK's per-matrix
// status (jax's lowering turns info != 0 into NaNs). The routines themselves
// come from whoever registered them (lapack.h); a missing one fails at
// compile time, naming it. Batches run one matrix after another: scipy's
// LAPACK threads internally, and its thread-safety under concurrent callers
// is not something we want to depend on.
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "device/host/custom_call.h"
#include "device/host/lapack.h"

typedef int lp_int;  // LP64 LAPACK

// Fortran entry points (every argument by reference; data as void*).
typedef void (*potrf_fn)(const char *, const lp_int *, void *, const lp_int *,
                         lp_int *);
typedef void (*getrf_fn)(const lp_int *, const lp_int *, void *,
                         const lp_int *, lp_int *, lp_int *);
typedef void (*geqrf_fn)(const lp_int *, const lp_int *, void *,
                         const lp_int *, void *, void *, const lp_int *,
                         lp_int *);
typedef void (*geqp3_real_fn)(const lp_int *, const lp_int *, void *,
                              const lp_int *, lp_int *, void *, void *,
                              const lp_int *, lp_int *);
typedef void (*geqp3_cplx_fn)(const lp_int *, const lp_int *, void *,
                              const lp_int *, lp_int *, void *, void *,
                              const lp_int *, void *, lp_int *);
typedef void (*orgqr_fn)(const lp_int *, const lp_int *, const lp_int *,
                         void *, const lp_int *, const void *, void *,
                         const lp_int *, lp_int *);
typedef void (*ormqr_fn)(const char *, const char *, const lp_int *,
                         const lp_int *, const lp_int *, const void *,
                         const lp_int *, const void *, void *, const lp_int *,
                         void *, const lp_int *, lp_int *);
typedef void (*syevd_fn)(const char *, const char *, const lp_int *, void *,
                         const lp_int *, void *, void *, const lp_int *,
                         lp_int *, const lp_int *, lp_int *);
typedef void (*heevd_fn)(const char *, const char *, const lp_int *, void *,
                         const lp_int *, void *, void *, const lp_int *,
                         void *, const lp_int *, lp_int *, const lp_int *,
                         lp_int *);
typedef void (*gesdd_real_fn)(const char *, const lp_int *, const lp_int *,
                              void *, const lp_int *, void *, void *,
                              const lp_int *, void *, const lp_int *, void *,
                              const lp_int *, lp_int *, lp_int *);
typedef void (*gesdd_cplx_fn)(const char *, const lp_int *, const lp_int *,
                              void *, const lp_int *, void *, void *,
                              const lp_int *, void *, const lp_int *, void *,
                              const lp_int *, void *, lp_int *, lp_int *);
typedef void (*gesvd_real_fn)(const char *, const char *, const lp_int *,
                              const lp_int *, void *, const lp_int *, void *,
                              void *, const lp_int *, void *, const lp_int *,
                              void *, const lp_int *, lp_int *);
typedef void (*gesvd_cplx_fn)(const char *, const char *, const lp_int *,
                              const lp_int *, void *, const lp_int *, void *,
                              void *, const lp_int *, void *, const lp_int *,
                              void *, const lp_int *, void *, lp_int *);
typedef void (*geev_real_fn)(const char *, const char *, const lp_int *,
                             void *, const lp_int *, void *, void *, void *,
                             const lp_int *, void *, const lp_int *, void *,
                             const lp_int *, lp_int *);
typedef void (*geev_cplx_fn)(const char *, const char *, const lp_int *,
                             void *, const lp_int *, void *, void *,
                             const lp_int *, void *, const lp_int *, void *,
                             const lp_int *, void *, lp_int *);
typedef void (*gees_real_fn)(const char *, const char *, void *,
                             const lp_int *, void *, const lp_int *, lp_int *,
                             void *, void *, void *, const lp_int *, void *,
                             const lp_int *, lp_int *, lp_int *);
typedef void (*gees_cplx_fn)(const char *, const char *, void *,
                             const lp_int *, void *, const lp_int *, lp_int *,
                             void *, void *, const lp_int *, void *,
                             const lp_int *, void *, lp_int *, lp_int *);
typedef void (*gehrd_fn)(const lp_int *, const lp_int *, const lp_int *,
                         void *, const lp_int *, void *, void *,
                         const lp_int *, lp_int *);
typedef void (*sytrd_fn)(const char *, const lp_int *, void *, const lp_int *,
                         void *, void *, void *, void *, const lp_int *,
                         lp_int *);
typedef void (*gtsv_fn)(const lp_int *, const lp_int *, void *, void *,
                        void *, void *, const lp_int *, lp_int *);
typedef void (*trsm_fn)(const char *, const char *, const char *,
                        const char *, const lp_int *, const lp_int *,
                        const void *, const void *, const lp_int *, void *,
                        const lp_int *);

typedef enum {
  LP_POTRF, LP_GETRF, LP_GEQRF, LP_GEQP3, LP_ORGQR, LP_ORMQR, LP_SYEVD,
  LP_GESDD, LP_GESVD, LP_GEEV, LP_GEES, LP_GEHRD, LP_SYTRD, LP_GTSV, LP_TRSM,
} lp_kind_t;

typedef struct {
  lp_kind_t kind;
  bool cplx;
  iron_dtype_t dtype, real_dtype;
  size_t es, res;  // element size, real element size
  void *fn;
  char routine[24];
  // Attributes (LAPACK characters) and integers.
  char c[4];
  bool left, transpose;
  int32_t low, high;
} lp_params_t;

// --- Helpers ----------------------------------------------------------------

// Matrix geometry of a tensor: batch count and the last two dims (a rank-1
// tensor is one row of `dims[0]`).
static void split_batch(const iron_tensor_t *t, int64_t *out_batch,
                        int64_t *out_rows, int64_t *out_cols) {
  int64_t b = 1;
  for (int32_t d = 0; d + 2 < t->rank; ++d) b *= t->dims[d];
  *out_batch = b;
  *out_rows = t->rank >= 2 ? t->dims[t->rank - 2] : 1;
  *out_cols = t->rank >= 1 ? t->dims[t->rank - 1] : 1;
}

static iron_status_t to_int(int64_t v, const char *what, lp_int *out) {
  if (v < 0 || v > 0x7fffffff)
    return IRON_ERR(OUT_OF_RANGE, "LAPACK %s %lld does not fit a 32-bit int",
                    what, (long long)v);
  *out = (lp_int)v;
  return IRON_OK;
}

// The optimal workspace LAPACK wrote into work[0] (the real part).
static lp_int work_query_result(const lp_params_t *p, const void *w) {
  // memcpy: the query buffers are double arrays, read as float for s/c.
  double v;
  if (p->res == 4) {
    float f;
    memcpy(&f, w, sizeof(f));
    v = f;
  } else {
    memcpy(&v, w, sizeof(v));
  }
  if (!(v >= 1)) return 1;
  if (v > 0x7fffffff) return 0x7fffffff;
  return (lp_int)v;
}

static void *alloc_elems(int64_t count, size_t es) {
  size_t bytes;
  if (count < 1) count = 1;
  if (iron_mul_overflow_size((size_t)count, es, &bytes)) return NULL;
  return calloc(1, bytes);
}

static void copy_if_diff(const iron_tensor_t *in, iron_tensor_t *out) {
  if (in->data != out->data && out->nbytes)
    memcpy(out->data, in->data, out->nbytes < in->nbytes ? out->nbytes
                                                         : in->nbytes);
}

static iron_status_t oom(const lp_params_t *p) {
  return IRON_ERR(RESOURCE_EXHAUSTED, "%s: out of memory for workspace",
                  p->routine);
}

static char *at(const iron_tensor_t *t, int64_t elem_offset, size_t es) {
  return (char *)t->data + (size_t)elem_offset * es;
}

// --- Kernels ----------------------------------------------------------------

static iron_status_t run_potrf(const lp_params_t *p, const iron_tensor_t *const *in,
                               iron_tensor_t *const *out) {
  int64_t b, m, n;
  split_batch(in[0], &b, &m, &n);
  copy_if_diff(in[0], out[0]);
  lp_int nn, lda;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "n", &nn));
  lda = nn > 1 ? nn : 1;
  int32_t *info = out[1]->data;
  for (int64_t i = 0; i < b; ++i) {
    lp_int inf = 0;
    ((potrf_fn)p->fn)(&p->c[0], &nn, at(out[0], i * m * n, p->es), &lda, &inf);
    info[i] = inf;
  }
  return IRON_OK;
}

static iron_status_t run_getrf(const lp_params_t *p, const iron_tensor_t *const *in,
                               iron_tensor_t *const *out) {
  int64_t b, m, n;
  split_batch(in[0], &b, &m, &n);
  copy_if_diff(in[0], out[0]);
  lp_int mm, nn;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(m, "m", &mm));
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "n", &nn));
  lp_int lda = mm > 1 ? mm : 1;
  int64_t k = m < n ? m : n;
  int32_t *ipiv = out[1]->data, *info = out[2]->data;
  for (int64_t i = 0; i < b; ++i) {
    lp_int inf = 0;
    ((getrf_fn)p->fn)(&mm, &nn, at(out[0], i * m * n, p->es), &lda,
                      ipiv + i * k, &inf);
    info[i] = inf;
  }
  return IRON_OK;
}

static iron_status_t run_geqrf(const lp_params_t *p, const iron_tensor_t *const *in,
                               iron_tensor_t *const *out) {
  int64_t b, m, n;
  split_batch(in[0], &b, &m, &n);
  copy_if_diff(in[0], out[0]);
  lp_int mm, nn, inf = 0, q = -1;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(m, "m", &mm));
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "n", &nn));
  lp_int lda = mm > 1 ? mm : 1;
  int64_t k = m < n ? m : n;
  double wq[4];
  ((geqrf_fn)p->fn)(&mm, &nn, NULL, &lda, NULL, wq, &q, &inf);
  lp_int lwork = work_query_result(p, wq);
  void *work = alloc_elems(lwork, p->es);
  if (!work) return oom(p);
  for (int64_t i = 0; i < b; ++i)
    ((geqrf_fn)p->fn)(&mm, &nn, at(out[0], i * m * n, p->es), &lda,
                      at(out[1], i * k, p->es), work, &lwork, &inf);
  free(work);
  return IRON_OK;
}

static iron_status_t run_geqp3(const lp_params_t *p, const iron_tensor_t *const *in,
                               iron_tensor_t *const *out) {
  int64_t b, m, n;
  split_batch(in[0], &b, &m, &n);
  copy_if_diff(in[0], out[0]);
  copy_if_diff(in[1], out[1]);
  lp_int mm, nn, inf = 0, q = -1;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(m, "m", &mm));
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "n", &nn));
  lp_int lda = mm > 1 ? mm : 1;
  int64_t k = m < n ? m : n;
  double wq[4], rq[4];
  if (p->cplx)
    ((geqp3_cplx_fn)p->fn)(&mm, &nn, NULL, &lda, NULL, NULL, wq, &q, rq, &inf);
  else
    ((geqp3_real_fn)p->fn)(&mm, &nn, NULL, &lda, NULL, NULL, wq, &q, &inf);
  lp_int lwork = work_query_result(p, wq);
  void *work = alloc_elems(lwork, p->es);
  void *rwork = p->cplx ? alloc_elems(2 * n, p->res) : NULL;
  if (!work || (p->cplx && !rwork)) {
    free(work);
    free(rwork);
    return oom(p);
  }
  int32_t *jpvt = out[1]->data;
  for (int64_t i = 0; i < b; ++i) {
    if (p->cplx)
      ((geqp3_cplx_fn)p->fn)(&mm, &nn, at(out[0], i * m * n, p->es), &lda,
                             jpvt + i * n, at(out[2], i * k, p->es), work,
                             &lwork, rwork, &inf);
    else
      ((geqp3_real_fn)p->fn)(&mm, &nn, at(out[0], i * m * n, p->es), &lda,
                             jpvt + i * n, at(out[2], i * k, p->es), work,
                             &lwork, &inf);
  }
  free(work);
  free(rwork);
  return IRON_OK;
}

static iron_status_t run_orgqr(const lp_params_t *p, const iron_tensor_t *const *in,
                               iron_tensor_t *const *out) {
  int64_t b, m, n;
  split_batch(in[0], &b, &m, &n);
  copy_if_diff(in[0], out[0]);
  int64_t k = in[1]->rank ? in[1]->dims[in[1]->rank - 1] : 1;
  lp_int mm, nn, kk, inf = 0, q = -1;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(m, "m", &mm));
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "n", &nn));
  IRON_RETURN_IF_ERROR_PLAIN(to_int(k, "k", &kk));
  lp_int lda = mm > 1 ? mm : 1;
  double wq[4];
  ((orgqr_fn)p->fn)(&mm, &nn, &kk, NULL, &lda, NULL, wq, &q, &inf);
  lp_int lwork = work_query_result(p, wq);
  void *work = alloc_elems(lwork, p->es);
  if (!work) return oom(p);
  for (int64_t i = 0; i < b; ++i)
    ((orgqr_fn)p->fn)(&mm, &nn, &kk, at(out[0], i * m * n, p->es), &lda,
                      at(in[1], i * k, p->es), work, &lwork, &inf);
  free(work);
  return IRON_OK;
}

static iron_status_t run_ormqr(const lp_params_t *p, const iron_tensor_t *const *in,
                               iron_tensor_t *const *out) {
  int64_t b, m, n, ab, am, an;
  split_batch(in[2], &b, &m, &n);
  split_batch(in[0], &ab, &am, &an);
  copy_if_diff(in[2], out[0]);
  int64_t k = in[1]->rank ? in[1]->dims[in[1]->rank - 1] : 1;
  lp_int mm, nn, kk, lda, inf = 0, q = -1;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(m, "m", &mm));
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "n", &nn));
  IRON_RETURN_IF_ERROR_PLAIN(to_int(k, "k", &kk));
  IRON_RETURN_IF_ERROR_PLAIN(to_int(p->left ? am : n, "lda", &lda));
  if (lda < 1) lda = 1;
  lp_int ldc = mm > 1 ? mm : 1;
  char side = p->left ? 'L' : 'R';
  char trans = p->transpose ? (p->cplx ? 'C' : 'T') : 'N';
  double wq[4];
  ((ormqr_fn)p->fn)(&side, &trans, &mm, &nn, &kk, NULL, &lda, NULL, NULL,
                    &ldc, wq, &q, &inf);
  lp_int lwork = work_query_result(p, wq);
  void *work = alloc_elems(lwork, p->es);
  if (!work) return oom(p);
  for (int64_t i = 0; i < b; ++i)
    ((ormqr_fn)p->fn)(&side, &trans, &mm, &nn, &kk,
                      at(in[0], i * am * an, p->es), &lda,
                      at(in[1], i * k, p->es), at(out[0], i * m * n, p->es),
                      &ldc, work, &lwork, &inf);
  free(work);
  return IRON_OK;
}

static iron_status_t run_syevd(const lp_params_t *p, const iron_tensor_t *const *in,
                               iron_tensor_t *const *out) {
  int64_t b, m, n;
  split_batch(in[0], &b, &m, &n);
  copy_if_diff(in[0], out[0]);
  lp_int nn, inf = 0, q = -1;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "n", &nn));
  lp_int lda = nn > 1 ? nn : 1;
  double wq[4], rq[4];
  lp_int iq = 0;
  if (p->cplx)
    ((heevd_fn)p->fn)(&p->c[1], &p->c[0], &nn, NULL, &lda, NULL, wq, &q, rq,
                      &q, &iq, &q, &inf);
  else
    ((syevd_fn)p->fn)(&p->c[1], &p->c[0], &nn, NULL, &lda, NULL, wq, &q, &iq,
                      &q, &inf);
  lp_int lwork = work_query_result(p, wq);
  lp_int liwork = iq > 1 ? iq : 1;
  lp_int lrwork = 1;
  if (p->cplx) {
    lrwork = work_query_result(p, rq);
  }
  void *work = alloc_elems(lwork, p->es);
  void *rwork = alloc_elems(lrwork, p->res);
  lp_int *iwork = alloc_elems(liwork, sizeof(lp_int));
  iron_status_t st = IRON_OK;
  if (!work || !rwork || !iwork) {
    st = oom(p);
    goto done;
  }
  int32_t *info = out[2]->data;
  for (int64_t i = 0; i < b; ++i) {
    void *a = at(out[0], i * n * n, p->es);
    void *w = at(out[1], i * n, p->res);
    if (p->cplx)
      ((heevd_fn)p->fn)(&p->c[1], &p->c[0], &nn, a, &lda, w, work, &lwork,
                        rwork, &lrwork, iwork, &liwork, &inf);
    else
      ((syevd_fn)p->fn)(&p->c[1], &p->c[0], &nn, a, &lda, w, work, &lwork,
                        iwork, &liwork, &inf);
    info[i] = inf;
  }
done:
  free(work);
  free(rwork);
  free(iwork);
  return st;
}

// gesdd and gesvd: x -> x_out, s, u, vt, info; attribute mode (A, S, N, O).
static iron_status_t run_svd(const lp_params_t *p, const iron_tensor_t *const *in,
                             iron_tensor_t *const *out) {
  int64_t b, m, n;
  split_batch(in[0], &b, &m, &n);
  copy_if_diff(in[0], out[0]);
  lp_int mm, nn, inf = 0, q = -1, ldvt;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(m, "m", &mm));
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "n", &nn));
  int64_t ub, ur, uc, vb, vr, vc;
  split_batch(out[2], &ub, &ur, &uc);
  split_batch(out[3], &vb, &vr, &vc);
  IRON_RETURN_IF_ERROR_PLAIN(to_int(vr, "ldvt", &ldvt));
  lp_int lda = mm > 1 ? mm : 1, ldu = lda;
  if (ldvt < 1) ldvt = 1;
  int64_t k = m < n ? m : n, mx = m > n ? m : n;
  const char mode = p->c[0];
  double wq[4];
  lp_int iwq[2];
  double rwq[2];
  const bool gesdd = p->kind == LP_GESDD;
  if (gesdd) {
    if (p->cplx)
      ((gesdd_cplx_fn)p->fn)(&mode, &mm, &nn, NULL, &lda, NULL, NULL, &ldu,
                             NULL, &ldvt, wq, &q, rwq, iwq, &inf);
    else
      ((gesdd_real_fn)p->fn)(&mode, &mm, &nn, NULL, &lda, NULL, NULL, &ldu,
                             NULL, &ldvt, wq, &q, iwq, &inf);
  } else {
    if (p->cplx)
      ((gesvd_cplx_fn)p->fn)(&mode, &mode, &mm, &nn, NULL, &lda, NULL, NULL,
                             &ldu, NULL, &ldvt, wq, &q, rwq, &inf);
    else
      ((gesvd_real_fn)p->fn)(&mode, &mode, &mm, &nn, NULL, &lda, NULL, NULL,
                             &ldu, NULL, &ldvt, wq, &q, &inf);
  }
  lp_int lwork = work_query_result(p, wq);
  int64_t rsize = 0;
  if (p->cplx) {
    if (!gesdd)
      rsize = 5 * k;
    else if (mode == 'N')
      rsize = 7 * k;
    else {
      int64_t a = 5 * k * k + 5 * k, c = 2 * mx * k + 2 * k * k + k;
      rsize = a > c ? a : c;
    }
  }
  void *work = alloc_elems(lwork, p->es);
  void *rwork = alloc_elems(rsize, p->res);
  lp_int *iwork = alloc_elems(8 * k, sizeof(lp_int));
  iron_status_t st = IRON_OK;
  if (!work || !rwork || !iwork) {
    st = oom(p);
    goto done;
  }
  int32_t *info = out[4]->data;
  for (int64_t i = 0; i < b; ++i) {
    void *a = at(out[0], i * m * n, p->es);
    void *s = at(out[1], i * k, p->res);
    void *u = at(out[2], i * ur * uc, p->es);
    void *vt = at(out[3], i * vr * vc, p->es);
    if (gesdd) {
      if (p->cplx)
        ((gesdd_cplx_fn)p->fn)(&mode, &mm, &nn, a, &lda, s, u, &ldu, vt,
                               &ldvt, work, &lwork, rwork, iwork, &inf);
      else
        ((gesdd_real_fn)p->fn)(&mode, &mm, &nn, a, &lda, s, u, &ldu, vt,
                               &ldvt, work, &lwork, iwork, &inf);
    } else {
      if (p->cplx)
        ((gesvd_cplx_fn)p->fn)(&mode, &mode, &mm, &nn, a, &lda, s, u, &ldu,
                               vt, &ldvt, work, &lwork, rwork, &inf);
      else
        ((gesvd_real_fn)p->fn)(&mode, &mode, &mm, &nn, a, &lda, s, u, &ldu,
                               vt, &ldvt, work, &lwork, &inf);
    }
    info[i] = inf;
  }
done:
  free(work);
  free(rwork);
  free(iwork);
  return st;
}

static bool all_finite(const void *data, int64_t count, size_t res) {
  if (res == 4) {
    const float *f = data;
    for (int64_t i = 0; i < count; ++i)
      if (!isfinite(f[i])) return false;
  } else {
    const double *d = data;
    for (int64_t i = 0; i < count; ++i)
      if (!isfinite(d[i])) return false;
  }
  return true;
}

// Real geev packs complex-conjugate eigenvector pairs in two real columns
// (v_j = col_j + i col_{j+1}, v_{j+1} = conj); expand to complex columns.
static void unpack_eigvecs(const lp_params_t *p, int64_t n, const void *wi,
                           const void *packed, void *dst) {
  for (int64_t j = 0; j < n; ++j) {
    double im = p->res == 4 ? ((const float *)wi)[j] : ((const double *)wi)[j];
    for (int64_t r = 0; r < n; ++r) {
      double re0, re1 = 0;
      if (p->res == 4) {
        re0 = ((const float *)packed)[j * n + r];
        if (im != 0 && j + 1 < n) re1 = ((const float *)packed)[(j + 1) * n + r];
      } else {
        re0 = ((const double *)packed)[j * n + r];
        if (im != 0 && j + 1 < n) re1 = ((const double *)packed)[(j + 1) * n + r];
      }
      double out_re = re0, out_im = im != 0 ? re1 : 0;
      if (p->res == 4) {
        ((float *)dst)[2 * (j * n + r)] = (float)out_re;
        ((float *)dst)[2 * (j * n + r) + 1] = (float)out_im;
      } else {
        ((double *)dst)[2 * (j * n + r)] = out_re;
        ((double *)dst)[2 * (j * n + r) + 1] = out_im;
      }
      if (im != 0 && j + 1 < n) {
        int64_t o = (j + 1) * n + r;
        if (p->res == 4) {
          ((float *)dst)[2 * o] = (float)out_re;
          ((float *)dst)[2 * o + 1] = (float)-out_im;
        } else {
          ((double *)dst)[2 * o] = out_re;
          ((double *)dst)[2 * o + 1] = -out_im;
        }
      }
    }
    if (im != 0 && j + 1 < n) ++j;
  }
}

// Real: x -> wr, wi, vl, vr (complex), info. Complex: x -> w, vl, vr, info.
static iron_status_t run_geev(const lp_params_t *p, const iron_tensor_t *const *in,
                              iron_tensor_t *const *out) {
  int64_t b, m, n;
  split_batch(in[0], &b, &m, &n);
  lp_int nn, inf = 0, q = -1;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "n", &nn));
  lp_int ld = nn > 1 ? nn : 1;
  double wq[4], rq[4];
  if (p->cplx)
    ((geev_cplx_fn)p->fn)(&p->c[0], &p->c[1], &nn, NULL, &ld, NULL, NULL, &ld,
                          NULL, &ld, wq, &q, rq, &inf);
  else
    ((geev_real_fn)p->fn)(&p->c[0], &p->c[1], &nn, NULL, &ld, NULL, NULL,
                          NULL, &ld, NULL, &ld, wq, &q, &inf);
  lp_int lwork = work_query_result(p, wq);
  void *work = alloc_elems(lwork, p->es);
  void *a = alloc_elems(n * n, p->es);
  void *rwork = alloc_elems(2 * n, p->res);
  void *vl = p->cplx ? NULL : alloc_elems(n * n, p->es);
  void *vr = p->cplx ? NULL : alloc_elems(n * n, p->es);
  iron_status_t st = IRON_OK;
  if (!work || !a || !rwork || (!p->cplx && (!vl || !vr))) {
    st = oom(p);
    goto done;
  }
  const int first_vec = p->cplx ? 1 : 2;
  iron_tensor_t *ovl = out[first_vec], *ovr = out[first_vec + 1];
  int32_t *info = out[first_vec + 2]->data;
  const size_t ces = iron_dtype_size(ovl->dtype);
  for (int64_t i = 0; i < b; ++i) {
    memcpy(a, at(in[0], i * n * n, p->es), (size_t)(n * n) * p->es);
    void *dvl = at(ovl, i * n * n, ces), *dvr = at(ovr, i * n * n, ces);
    memset(dvl, 0, (size_t)(n * n) * ces);
    memset(dvr, 0, (size_t)(n * n) * ces);
    int64_t nreal = p->cplx ? 2 * n * n : n * n;
    if (!all_finite(a, nreal, p->res)) {
      info[i] = -4;
      continue;
    }
    if (p->cplx) {
      ((geev_cplx_fn)p->fn)(&p->c[0], &p->c[1], &nn, a, &ld,
                            at(out[0], i * n, p->es), dvl, &ld, dvr, &ld,
                            work, &lwork, rwork, &inf);
      info[i] = inf;
    } else {
      void *wr = at(out[0], i * n, p->es), *wi = at(out[1], i * n, p->es);
      ((geev_real_fn)p->fn)(&p->c[0], &p->c[1], &nn, a, &ld, wr, wi, vl, &ld,
                            vr, &ld, work, &lwork, &inf);
      info[i] = inf;
      if (inf == 0) {
        if (p->c[0] == 'V') unpack_eigvecs(p, n, wi, vl, dvl);
        if (p->c[1] == 'V') unpack_eigvecs(p, n, wi, vr, dvr);
      }
    }
  }
done:
  free(work);
  free(a);
  free(rwork);
  free(vl);
  free(vr);
  return st;
}

// Real: x -> x_out, vs, wr, wi, sdim, info. Complex: x -> x_out, vs, w,
// sdim, info. Attributes mode (V/N) and sort (N only).
static iron_status_t run_gees(const lp_params_t *p, const iron_tensor_t *const *in,
                              iron_tensor_t *const *out) {
  int64_t b, m, n;
  split_batch(in[0], &b, &m, &n);
  copy_if_diff(in[0], out[0]);
  lp_int nn, inf = 0, q = -1, sdim = 0;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "n", &nn));
  lp_int ld = nn > 1 ? nn : 1;
  double wq[4], rq[4];
  if (p->cplx)
    ((gees_cplx_fn)p->fn)(&p->c[0], &p->c[1], NULL, &nn, NULL, &ld, &sdim,
                          NULL, NULL, &ld, wq, &q, rq, NULL, &inf);
  else
    ((gees_real_fn)p->fn)(&p->c[0], &p->c[1], NULL, &nn, NULL, &ld, &sdim,
                          NULL, NULL, NULL, &ld, wq, &q, NULL, &inf);
  lp_int lwork = work_query_result(p, wq);
  void *work = alloc_elems(lwork, p->es);
  void *rwork = alloc_elems(n, p->res);
  if (!work || !rwork) {
    free(work);
    free(rwork);
    return oom(p);
  }
  int nw = p->cplx ? 1 : 2;
  int32_t *sd = out[2 + nw]->data, *info = out[3 + nw]->data;
  for (int64_t i = 0; i < b; ++i) {
    void *a = at(out[0], i * n * n, p->es), *vs = at(out[1], i * n * n, p->es);
    if (p->cplx)
      ((gees_cplx_fn)p->fn)(&p->c[0], &p->c[1], NULL, &nn, a, &ld, &sdim,
                            at(out[2], i * n, p->es), vs, &ld, work, &lwork,
                            rwork, NULL, &inf);
    else
      ((gees_real_fn)p->fn)(&p->c[0], &p->c[1], NULL, &nn, a, &ld, &sdim,
                            at(out[2], i * n, p->es), at(out[3], i * n, p->es),
                            vs, &ld, work, &lwork, NULL, &inf);
    sd[i] = sdim;
    info[i] = inf;
  }
  free(work);
  free(rwork);
  return IRON_OK;
}

static iron_status_t run_gehrd(const lp_params_t *p, const iron_tensor_t *const *in,
                               iron_tensor_t *const *out) {
  int64_t b, m, n;
  split_batch(in[0], &b, &m, &n);
  copy_if_diff(in[0], out[0]);
  lp_int nn, inf = 0, q = -1, lo = p->low, hi = p->high;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "n", &nn));
  lp_int ld = nn > 1 ? nn : 1;
  double wq[4];
  ((gehrd_fn)p->fn)(&nn, &lo, &hi, NULL, &ld, NULL, wq, &q, &inf);
  lp_int lwork = work_query_result(p, wq);
  void *work = alloc_elems(lwork, p->es);
  if (!work) return oom(p);
  int64_t tn = n > 1 ? n - 1 : 0;
  int32_t *info = out[2]->data;
  for (int64_t i = 0; i < b; ++i) {
    ((gehrd_fn)p->fn)(&nn, &lo, &hi, at(out[0], i * n * n, p->es), &ld,
                      at(out[1], i * tn, p->es), work, &lwork, &inf);
    info[i] = inf;
  }
  free(work);
  return IRON_OK;
}

// x -> x_out, d (real), e (real), tau, info; attribute uplo.
static iron_status_t run_sytrd(const lp_params_t *p, const iron_tensor_t *const *in,
                               iron_tensor_t *const *out) {
  int64_t b, m, n;
  split_batch(in[0], &b, &m, &n);
  copy_if_diff(in[0], out[0]);
  lp_int nn, inf = 0, q = -1;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "n", &nn));
  lp_int ld = nn > 1 ? nn : 1;
  double wq[4];
  ((sytrd_fn)p->fn)(&p->c[0], &nn, NULL, &ld, NULL, NULL, NULL, wq, &q, &inf);
  lp_int lwork = work_query_result(p, wq);
  void *work = alloc_elems(lwork, p->es);
  if (!work) return oom(p);
  int64_t tn = n > 1 ? n - 1 : 0;
  int64_t tau_step = out[3]->rank ? out[3]->dims[out[3]->rank - 1] : 1;
  int32_t *info = out[4]->data;
  for (int64_t i = 0; i < b; ++i) {
    ((sytrd_fn)p->fn)(&p->c[0], &nn, at(out[0], i * n * n, p->es), &ld,
                      at(out[1], i * n, p->res), at(out[2], i * tn, p->res),
                      at(out[3], i * tau_step, p->es), work, &lwork, &inf);
    info[i] = inf;
  }
  free(work);
  return IRON_OK;
}

// dl, d, du, b -> dl_out, d_out, du_out, b_out, info. dl[0] and du[n-1]
// are unused (jax's convention), hence dl + 1.
static iron_status_t run_gtsv(const lp_params_t *p, const iron_tensor_t *const *in,
                              iron_tensor_t *const *out) {
  int64_t b, m, n;
  split_batch(in[3], &b, &m, &n);
  for (int k = 0; k < 4; ++k) copy_if_diff(in[k], out[k]);
  lp_int mm, nn, inf = 0;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(m, "n", &mm));
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "nrhs", &nn));
  lp_int ldb = mm > 1 ? mm : 1;
  int32_t *info = out[4]->data;
  for (int64_t i = 0; i < b; ++i) {
    ((gtsv_fn)p->fn)(&mm, &nn, at(out[0], i * m + 1, p->es),
                     at(out[1], i * m, p->es), at(out[2], i * m, p->es),
                     at(out[3], i * m * n, p->es), &ldb, &inf);
    info[i] = inf;
  }
  return IRON_OK;
}

// x (triangular), y -> y_out; attributes side, uplo, trans_x, diag.
static iron_status_t run_trsm(const lp_params_t *p, const iron_tensor_t *const *in,
                              iron_tensor_t *const *out) {
  int64_t b, m, n;
  split_batch(in[1], &b, &m, &n);
  copy_if_diff(in[1], out[0]);
  lp_int mm, nn;
  IRON_RETURN_IF_ERROR_PLAIN(to_int(m, "m", &mm));
  IRON_RETURN_IF_ERROR_PLAIN(to_int(n, "n", &nn));
  int64_t ka = p->c[0] == 'L' ? m : n;
  lp_int lda = (lp_int)(ka > 1 ? ka : 1), ldb = mm > 1 ? mm : 1;
  double one[2] = {1, 0};
  float onef[2] = {1, 0};
  const void *alpha = p->res == 4 ? (const void *)onef : (const void *)one;
  int64_t xb, xr, xc;
  split_batch(in[0], &xb, &xr, &xc);
  for (int64_t i = 0; i < b; ++i)
    ((trsm_fn)p->fn)(&p->c[0], &p->c[1], &p->c[2], &p->c[3], &mm, &nn, alpha,
                     at(in[0], (xb == 1 ? 0 : i) * ka * ka, p->es), &lda,
                     at(out[0], i * m * n, p->es), &ldb);
  return IRON_OK;
}

static iron_status_t lp_run(const iron_kernel_ctx_t *ctx, const void *params,
                            const iron_tensor_t *const *in,
                            iron_tensor_t *const *out) {
  const lp_params_t *p = params;
  switch (p->kind) {
    case LP_POTRF: return run_potrf(p, in, out);
    case LP_GETRF: return run_getrf(p, in, out);
    case LP_GEQRF: return run_geqrf(p, in, out);
    case LP_GEQP3: return run_geqp3(p, in, out);
    case LP_ORGQR: return run_orgqr(p, in, out);
    case LP_ORMQR: return run_ormqr(p, in, out);
    case LP_SYEVD: return run_syevd(p, in, out);
    case LP_GESDD:
    case LP_GESVD: return run_svd(p, in, out);
    case LP_GEEV: return run_geev(p, in, out);
    case LP_GEES: return run_gees(p, in, out);
    case LP_GEHRD: return run_gehrd(p, in, out);
    case LP_SYTRD: return run_sytrd(p, in, out);
    case LP_GTSV: return run_gtsv(p, in, out);
    case LP_TRSM: return run_trsm(p, in, out);
  }
  return IRON_ERR(INTERNAL, "bad LAPACK kernel kind");
}

// --- Compile time -----------------------------------------------------------

typedef struct {
  const char *real, *cplx;  // routine names without the s/d/c/z prefix
  lp_kind_t kind;
  uint32_t num_operands, num_results_real, num_results_cplx;
} lp_routine_t;

static const lp_routine_t kRoutines[] = {
    {"potrf", "potrf", LP_POTRF, 1, 2, 2},
    {"getrf", "getrf", LP_GETRF, 1, 3, 3},
    {"geqrf", "geqrf", LP_GEQRF, 1, 2, 2},
    {"geqp3", "geqp3", LP_GEQP3, 2, 3, 3},
    {"orgqr", "ungqr", LP_ORGQR, 2, 1, 1},
    {"ormqr", "unmqr", LP_ORMQR, 3, 1, 1},
    {"syevd", "heevd", LP_SYEVD, 1, 3, 3},
    {"gesdd", "gesdd", LP_GESDD, 1, 5, 5},
    {"gesvd", "gesvd", LP_GESVD, 1, 5, 5},
    {"geev", "geev", LP_GEEV, 1, 5, 4},
    {"gees", "gees", LP_GEES, 1, 6, 5},
    {"gehrd", "gehrd", LP_GEHRD, 1, 3, 3},
    {"sytrd", "hetrd", LP_SYTRD, 1, 5, 5},
    {"gtsv", "gtsv", LP_GTSV, 4, 5, 5},
    {"trsm", "trsm", LP_TRSM, 2, 1, 1},
};

// A character attribute (jaxlib's enums are ui8 characters).
static iron_status_t char_attr(const iron_ir_op_t *op, const char *name,
                               const char *allowed, char *out) {
  const iron_ir_attr_t *a = iron_host_custom_call_ffi_attr(op, name);
  int64_t v;
  if (!a || !iron_ir_attr_as_i64(a, &v))
    return iron_ir_op_unimplemented(op, "without the integer attribute %s",
                                    name);
  if (v <= 0 || v > 127 || !strchr(allowed, (int)v))
    return iron_ir_op_unimplemented(op, "with %s = %lld", name, (long long)v);
  *out = (char)v;
  return IRON_OK;
}

static iron_status_t int_attr(const iron_ir_op_t *op, const char *name,
                              int64_t *out) {
  const iron_ir_attr_t *a = iron_host_custom_call_ffi_attr(op, name);
  if (!a || !iron_ir_attr_as_i64(a, out))
    return iron_ir_op_unimplemented(op, "without the integer attribute %s",
                                    name);
  return IRON_OK;
}

// Matrices of rank >= 2 must be declared column-major with the batch
// outside (jaxlib's convention), everything else row-major.
static iron_status_t check_layouts(const iron_ir_op_t *op) {
  uint32_t n = op->num_operands + op->num_results;
  int32_t max_rank = 0;
  for (uint32_t i = 0; i < op->num_operands; ++i)
    if (op->operands[i]->type->kind == IRON_TYPE_TENSOR &&
        op->operands[i]->type->rank > max_rank)
      max_rank = op->operands[i]->type->rank;
  for (uint32_t i = 0; i < n; ++i) {
    bool result = i >= op->num_operands;
    uint32_t idx = result ? i - op->num_operands : i;
    const iron_ir_value_t *v = result ? &op->results[idx] : op->operands[idx];
    if (v->type->kind != IRON_TYPE_TENSOR)
      return iron_ir_op_unimplemented(op, "with a non-tensor operand");
    int32_t r = v->type->rank;
    int64_t m2m[IRON_MAX_RANK];
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_host_custom_call_layout(op, result, idx, m2m));
    bool ok = true;
    if (r >= 2 && r == max_rank) {
      ok = m2m[0] == r - 2 && m2m[1] == r - 1;
      for (int32_t d = 2; d < r; ++d) ok = ok && m2m[d] == r - 1 - d;
    } else {
      for (int32_t d = 0; d < r; ++d) ok = ok && m2m[d] == r - 1 - d;
    }
    if (!ok)
      return iron_ir_op_unimplemented(
          op, "with a layout of %s %u other than jaxlib's",
          result ? "result" : "operand", idx);
  }
  return IRON_OK;
}

static iron_status_t lp_prepare(const iron_ir_op_t *op, void **out_params) {
  const char *name = iron_ir_op_string(op, "call_target_name");
  const iron_host_custom_call_target_t *t = iron_host_custom_call_lapack_find(name);
  if (!t) return iron_ir_op_unimplemented(op, "for target \"%s\"", name);
  size_t len = strlen(name);
  char prefix = name[7];
  char routine[20];
  size_t rlen = len - 7 - 1 - 4;
  memcpy(routine, name + 8, rlen);
  routine[rlen] = 0;
  const lp_routine_t *r = NULL;
  bool cplx = prefix == 'c' || prefix == 'z';
  for (size_t i = 0; i < sizeof(kRoutines) / sizeof(kRoutines[0]); ++i)
    if (strcmp(cplx ? kRoutines[i].cplx : kRoutines[i].real, routine) == 0)
      r = &kRoutines[i];
  if (!r) return iron_ir_op_unimplemented(op, "for target \"%s\"", name);
  uint32_t nres = cplx ? r->num_results_cplx : r->num_results_real;
  if (op->num_operands != r->num_operands || op->num_results != nres)
    return iron_ir_op_unimplemented(
        op, "%s with %u operands and %u results (expected %u and %u)", name,
        op->num_operands, op->num_results, r->num_operands, nres);
  IRON_RETURN_IF_ERROR_PLAIN(check_layouts(op));
  iron_dtype_t dt = prefix == 's'   ? IRON_DTYPE_F32
                    : prefix == 'd' ? IRON_DTYPE_F64
                    : prefix == 'c' ? IRON_DTYPE_C64
                                    : IRON_DTYPE_C128;
  const iron_ir_value_t *x = op->operands[r->kind == LP_GTSV ? 3 : 0];
  if (x->type->dtype != dt || x->type->rank < (r->kind == LP_GTSV ? 2 : 2))
    return iron_ir_op_unimplemented(op, "%s on %s of rank %d", name,
                                    iron_dtype_name(x->type->dtype),
                                    x->type->rank);
  for (uint32_t i = 0; i < op->num_results; ++i)
    if (!iron_ir_type_is_static(op->results[i].type))
      return iron_ir_op_unimplemented(op, "with dynamic shapes");
  lp_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->kind = r->kind;
  p->cplx = cplx;
  p->dtype = dt;
  p->real_dtype = (dt == IRON_DTYPE_F32 || dt == IRON_DTYPE_C64)
                      ? IRON_DTYPE_F32 : IRON_DTYPE_F64;
  p->es = iron_dtype_size(dt);
  p->res = iron_dtype_size(p->real_dtype);
  snprintf(p->routine, sizeof(p->routine), "%c%s", prefix, routine);
  iron_status_t st = iron_host_lapack_require(p->routine, &p->fn);
  int64_t v;
  switch (r->kind) {
    case LP_POTRF:
    case LP_SYTRD:
      if (!st) st = char_attr(op, "uplo", "LU", &p->c[0]);
      break;
    case LP_SYEVD:
      if (!st) st = char_attr(op, "uplo", "LU", &p->c[0]);
      if (!st) st = char_attr(op, "mode", "NV", &p->c[1]);
      break;
    case LP_GESDD:
    case LP_GESVD:
      if (!st) st = char_attr(op, "mode", "ASN", &p->c[0]);
      break;
    case LP_GEEV:
      if (!st) st = char_attr(op, "compute_left", "NV", &p->c[0]);
      if (!st) st = char_attr(op, "compute_right", "NV", &p->c[1]);
      break;
    case LP_GEES:
      if (!st) st = char_attr(op, "mode", "NV", &p->c[0]);
      if (!st) st = char_attr(op, "sort", "N", &p->c[1]);
      break;
    case LP_GEHRD:
      if (!st) st = int_attr(op, "low", &v);
      if (!st) p->low = (int32_t)v;
      if (!st) st = int_attr(op, "high", &v);
      if (!st) p->high = (int32_t)v;
      break;
    case LP_ORMQR:
      if (!st) st = int_attr(op, "left", &v);
      if (!st) p->left = v != 0;
      if (!st) st = int_attr(op, "transpose", &v);
      if (!st) p->transpose = v != 0;
      break;
    case LP_TRSM:
      if (!st) st = char_attr(op, "side", "LR", &p->c[0]);
      if (!st) st = char_attr(op, "uplo", "LU", &p->c[1]);
      if (!st) st = char_attr(op, "trans_x", "NTC", &p->c[2]);
      if (!st) st = char_attr(op, "diag", "NU", &p->c[3]);
      break;
    default:
      break;
  }
  if (st) {
    free(p);
    char loc[256];
    return iron_status_annotate(st, "in %s (%s)", name,
                                iron_ir_loc_format(&op->loc, loc, sizeof(loc)));
  }
  *out_params = p;
  return IRON_OK;
}

static const iron_host_custom_call_target_t kLapack = {
    /* .name = */ "lapack",
    /* .prepare = */ lp_prepare,
    /* .run = */ lp_run,
    /* .destroy = */ NULL,
};

const iron_host_custom_call_target_t *iron_host_custom_call_lapack_find(
    const char *name) {
  if (!name) return NULL;
  size_t len = strlen(name);
  if (len < 7 + 1 + 2 + 4 || len > 7 + 1 + 15 + 4 ||
      strncmp(name, "lapack_", 7) != 0 || strcmp(name + len - 4, "_ffi") != 0 ||
      !strchr("sdcz", name[7]))
    return NULL;
  return &kLapack;
}
