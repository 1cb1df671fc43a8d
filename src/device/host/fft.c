// stablehlo.fft on the host: FFT, IFFT, RFFT and IRFFT over the 1 to 3
// innermost dimensions, any lengths, c64/c128 (f32/f64 real sides).
//
// Semantics follow XLA:CPU (DUCC): IFFT and IRFFT scale by 1 / prod(lengths);
// multi-dimensional transforms run one axis at a time, RFFT with the real
// transform on the last axis first, IRFFT with the complex backward
// transforms on the leading axes first and the real one last. IRFFT reads
// only the first n/2 + 1 entries of the last axis and ignores the imaginary
// parts of the DC and (even n) Nyquist entries, i.e. it returns the real
// signal whose half spectrum has those real parts, whatever the input.
//
// The engine (fft_engine.inc) is instantiated for float and double. c128 and
// f64 always compute in double. c64/f32 compute in float by default, like
// DUCC on XLA:CPU; IRON_FFT_C64_WIDE=1 computes them in double (closer to the
// exact transform, further from XLA:CPU's rounding). Plans (factorisations,
// twiddles, Bluestein chirps) are built at prepare time.
// The butterflies and pass loops gain 1.5-3x from -O3's vectorizer (the
// library builds at -O2); measured with IRON_BENCH_FFT=1 test_host_fft.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/compile_memory.h"
#include "device/plans/fft_plan.h"
#include "device/host/host_kernel.h"

#define FFT_GENERIC_MAX 64
#define FFT_MAX_PASSES 64
#define FFT_PAR_MIN 16384   // parallelize passes of transforms this long
#define FFT_PAR_GRAIN 8192  // elements per chunk of pass / line work

enum { FFT_TYPE_FFT = 0, FFT_TYPE_IFFT, FFT_TYPE_RFFT, FFT_TYPE_IRFFT };
_Static_assert((int)FFT_TYPE_IRFFT == (int)IRON_FFT_PLAN_IRFFT, "fft_type values");

// exp(-2 pi i t / n) for t < n as (re, im) pairs, rounded from long double
// so that twiddles are (nearly) correctly rounded doubles. malloc'ed; NULL
// on out-of-memory.
static double *fft_roots(int64_t n) {
  double *r = malloc((size_t)(n > 0 ? n : 1) * 2 * sizeof(double));
  if (!r) return NULL;
  const long double two_pi = 6.283185307179586476925286766559005768L;
  // c(t) = cos(2 pi t / n), s(t) = sin(2 pi t / n); root t = (c, -s).
  // With n % 4 == 0 only the first octant needs sincos (the rest follows
  // exactly by symmetry); else the first half.
  const bool quarter = n % 4 == 0;
  const int64_t direct_end = quarter ? n / 8 : n / 2;
  for (int64_t t = 0; t <= direct_end; ++t) {
    long double a = two_pi * (long double)t / (long double)n;
    r[2 * t] = (double)cosl(a);
    r[2 * t + 1] = (double)-sinl(a);
  }
  if (quarter) {
    const int64_t q = n / 4;
    for (int64_t t = direct_end + 1; t <= q; ++t) {  // c(t) = s(q - t)
      r[2 * t] = -r[2 * (q - t) + 1];
      r[2 * t + 1] = -r[2 * (q - t)];
    }
    for (int64_t t = q + 1; t <= n / 2; ++t) {  // c(t) = -s(t - q)
      r[2 * t] = r[2 * (t - q) + 1];
      r[2 * t + 1] = -r[2 * (t - q)];
    }
  }
  for (int64_t t = n / 2 + 1; t < n; ++t) {  // w(n - t) = conj w(t)
    r[2 * t] = r[2 * (n - t)];
    r[2 * t + 1] = -r[2 * (n - t) + 1];
  }
  return r;
}

#define FT float
#define FX(x) x##_f
#include "device/host/fft_engine.inc"
#undef FT
#undef FX
#define FT double
#define FX(x) x##_d
#include "device/host/fft_engine.inc"
#undef FT
#undef FX

typedef struct fft_params {
  int32_t type, d, rank;
  int64_t in_dims[IRON_MAX_RANK], out_dims[IRON_MAX_RANK];
  int64_t len[3];
  bool in_wide, out_wide;  // storage of double (c128/f64)
  bool wide;               // compute in double
  double scale;            // 1 / prod(len) for IFFT/IRFFT
  // Complex plans per transform axis i (axis rank - d + i); for RFFT/IRFFT
  // the last one is the real plan instead.
  plan_t_f *pf[3];
  plan_t_d *pd[3];
  rplan_t_f *rf;
  rplan_t_d *rd;
} fft_params_t;

static void fft_destroy(void *params) {
  fft_params_t *p = params;
  if (!p) return;
  for (int i = 0; i < 3; ++i) {
    plan_destroy_f(p->pf[i]);
    plan_destroy_d(p->pd[i]);
  }
  rplan_destroy_f(p->rf);
  rplan_destroy_d(p->rd);
  free(p);
}

static bool env_on(const char *name) {
  const char *e = getenv(name);
  return e && e[0] == '1';
}

// Bytes a plan of length n builds (an upper bound; plan_create's tables):
// a Stockham plan holds n twiddles and, while it is built, 2n double
// roots; lengths with a prime factor past FFT_GENERIC_MAX go through
// Bluestein, with a power of two m >= 2n - 1: n + m chirp values, a
// Stockham plan of m and 2m of scratch while building.
static uint64_t fft_plan_bytes(int64_t n, bool wide) {
  const uint64_t cpx = wide ? 16 : 8;
  int64_t rest = n;
  while (rest % 2 == 0 && rest > 1) rest /= 2;
  for (int64_t f = 3; f <= FFT_GENERIC_MAX && rest > 1; f += 2)
    while (rest % f == 0) rest /= f;
  uint64_t un = (uint64_t)n;
  if (rest <= 1) return (cpx + 16) * un + 4096;
  uint64_t m = 1;
  while (m < 2 * un - 1) m *= 2;
  return cpx * (un + 4 * m) + 16 * m + 4096;
}

static iron_status_t fft_prepare(const iron_ir_op_t *op,
                                 iron_region_t *const *regions,
                                 void **out_params) {
  (void)regions;
  iron_fft_plan_t fp;
  IRON_RETURN_IF_ERROR_PLAIN(iron_fft_plan_read(op, &fp));
  const iron_ir_type_t *it = fp.in, *ot = fp.out;
  const iron_dtype_t idt = it->dtype, odt = ot->dtype;
  const int32_t type = fp.type, rank = fp.rank;
  const uint32_t d = (uint32_t)fp.d;
  const int64_t *len = fp.len;
  const double total = fp.total;
  // The plans' tables grow with the transform lengths: charge them to the
  // compile memory budget before they are built.
  const bool wide_plans = idt == IRON_DTYPE_C128 || idt == IRON_DTYPE_F64 ||
                          env_on("IRON_FFT_C64_WIDE");
  uint64_t plan_bytes = 0;
  for (uint32_t i = 0; i < d; ++i)
    if (len[i] > 0) plan_bytes += fft_plan_bytes(len[i], wide_plans);
  char what[64];
  snprintf(what, sizeof(what), "%s plans", op->name);
  IRON_RETURN_IF_ERROR_PLAIN(iron_compile_memory_reserve(plan_bytes, what));

  fft_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->type = type;
  p->d = (int32_t)d;
  p->rank = rank;
  memcpy(p->in_dims, it->dims, sizeof(p->in_dims));
  memcpy(p->out_dims, ot->dims, sizeof(p->out_dims));
  memcpy(p->len, len, sizeof(p->len));
  p->in_wide = idt == IRON_DTYPE_C128 || idt == IRON_DTYPE_F64;
  p->out_wide = odt == IRON_DTYPE_C128 || odt == IRON_DTYPE_F64;
  p->wide = p->in_wide || env_on("IRON_FFT_C64_WIDE");
  p->scale = total > 0 ? 1.0 / total : 1.0;
  const bool real = type == FFT_TYPE_RFFT || type == FFT_TYPE_IRFFT;
  bool oom = false;
  for (uint32_t i = 0; i < d && !oom; ++i) {
    if (len[i] == 0) continue;  // empty: nothing to plan
    if (real && i + 1 == d) {
      if (p->wide)
        oom = !(p->rd = rplan_create_d(len[i]));
      else
        oom = !(p->rf = rplan_create_f(len[i]));
    } else if (p->wide) {
      oom = !(p->pd[i] = plan_create_d(len[i]));
    } else {
      oom = !(p->pf[i] = plan_create_f(len[i]));
    }
  }
  if (oom) {
    fft_destroy(p);
    return IRON_ERR(RESOURCE_EXHAUSTED, "%s: out of memory building plans",
                    op->name);
  }
  *out_params = p;
  return IRON_OK;
}

static int64_t dims_count(const int64_t *dims, int32_t rank) {
  int64_t c = 1;
  for (int32_t i = 0; i < rank; ++i) c *= dims[i];
  return c;
}

// Complex transforms along transform axis i of a tensor with `dims`.
static iron_status_t fft_axis(const fft_params_t *p, iron_threadpool_t *pool,
                              int32_t i, const int64_t *dims, int sgn,
                              const void *src, void *dst, bool wide_storage,
                              bool scaled) {
  const int32_t ax = p->rank - p->d + i;
  const int64_t n = dims[ax];
  int64_t inner = 1;
  for (int32_t a = ax + 1; a < p->rank; ++a) inner *= dims[a];
  const int64_t lines = dims_count(dims, p->rank) / n;
  if (p->wide) {
    line_job_t_d job = {.kind = 0, .plan = p->pd[i], .sgn = sgn, .src = src,
                        .dst = dst, .src_wide = wide_storage,
                        .dst_wide = wide_storage, .n = n, .inner = inner,
                        .scaled = scaled, .scale = p->scale};
    return lines_d(pool, job, lines);
  }
  line_job_t_f job = {.kind = 0, .plan = p->pf[i], .sgn = sgn, .src = src,
                      .dst = dst, .src_wide = wide_storage,
                      .dst_wide = wide_storage, .n = n, .inner = inner,
                      .scaled = scaled, .scale = (float)p->scale};
  return lines_f(pool, job, lines);
}

// Real transforms along the last axis (kind 1 r2c, 2 c2r).
static iron_status_t fft_real_axis(const fft_params_t *p,
                                   iron_threadpool_t *pool, int kind,
                                   const void *src, void *dst, int64_t lines) {
  const int64_t n = p->len[p->d - 1];
  const bool scaled = kind == 2;
  if (p->wide) {
    line_job_t_d job = {.kind = kind, .rplan = p->rd, .sgn = 0, .src = src,
                        .dst = dst, .src_wide = p->in_wide,
                        .dst_wide = p->out_wide, .n = n, .scaled = scaled,
                        .scale = p->scale};
    return lines_d(pool, job, lines);
  }
  line_job_t_f job = {.kind = kind, .rplan = p->rf, .sgn = 0, .src = src,
                      .dst = dst, .src_wide = p->in_wide,
                      .dst_wide = p->out_wide, .n = n, .scaled = scaled,
                      .scale = (float)p->scale};
  return lines_f(pool, job, lines);
}

static iron_status_t fft_run(const iron_kernel_ctx_t *ctx, const void *params,
                             const iron_tensor_t *const *inputs,
                             iron_tensor_t *const *outputs) {
  const fft_params_t *p = params;
  const iron_tensor_t *in = inputs[0];
  iron_tensor_t *out = outputs[0];
  iron_threadpool_t *pool = ctx ? ctx->pool : NULL;
  if (out->count == 0) return IRON_OK;
  if (in->count == 0) {  // e.g. IRFFT of length 0 from n/2+1 = 1? keep zeros
    memset(out->data, 0, out->nbytes);
    return IRON_OK;
  }
  const int32_t d = p->d;
  switch (p->type) {
    case FFT_TYPE_FFT:
    case FFT_TYPE_IFFT: {
      const int sgn = p->type == FFT_TYPE_FFT ? -1 : 1;
      const void *src = in->data;
      for (int32_t i = d - 1; i >= 0; --i) {
        IRON_RETURN_IF_ERROR_PLAIN(fft_axis(
            p, pool, i, p->in_dims, sgn, src, out->data, p->in_wide,
            p->type == FFT_TYPE_IFFT && i == 0));
        src = out->data;
      }
      return IRON_OK;
    }
    case FFT_TYPE_RFFT: {
      const int64_t n = p->len[d - 1];
      IRON_RETURN_IF_ERROR_PLAIN(fft_real_axis(p, pool, 1, in->data,
                                               out->data, in->count / n));
      for (int32_t i = d - 2; i >= 0; --i)
        IRON_RETURN_IF_ERROR_PLAIN(fft_axis(p, pool, i, p->out_dims, -1,
                                            out->data, out->data, p->out_wide,
                                            false));
      return IRON_OK;
    }
    default: {
      const void *src = in->data;
      void *tmp = NULL;
      if (d > 1) {
        tmp = malloc(in->nbytes);
        if (!tmp)
          return IRON_ERR(RESOURCE_EXHAUSTED,
                          "stablehlo.fft: out of memory for %zu bytes",
                          in->nbytes);
        for (int32_t i = d - 2; i >= 0; --i) {
          iron_status_t st = fft_axis(p, pool, i, p->in_dims, 1, src, tmp,
                                      p->in_wide, false);
          if (st) {
            free(tmp);
            return st;
          }
          src = tmp;
        }
      }
      const int64_t h1 = p->len[d - 1] / 2 + 1;
      iron_status_t st = fft_real_axis(p, pool, 2, src, out->data,
                                       in->count / h1);
      free(tmp);
      return st;
    }
  }
}

static const iron_kernel_t kFftKernel = {
    .name = "fft",
    .prepare = fft_prepare,
    .run = fft_run,
    .destroy = fft_destroy,
    .inplace_ok = false,
    .elementwise = false,
};

void iron_host_register_fft(iron_kernel_table_t table) {
  table[IRON_OP_FFT] = &kFftKernel;
}
