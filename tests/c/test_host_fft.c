// stablehlo.fft on the host against a naive DFT computed in long double:
// every kind, lengths with every radix path (2/4/8, 3, 5, generic odd
// primes, Bluestein), 1-3 dimensions, batches, c64/c128; IRFFT of non-
// Hermitian input (imaginary parts of DC/Nyquist ignored); refusals.
// IRON_BENCH_FFT=1 also times a 1M-point c64 FFT and a 4096x256 RFFT.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host_test_ops.h"
#include "test.h"

enum { FFT = 0, IFFT = 1, RFFT = 2, IRFFT = 3 };

static void fft_op(ht_op_t *b, int type, iron_dtype_t in_dt,
                   iron_dtype_t out_dt, int rank, const int64_t *in_dims,
                   const int64_t *out_dims, int d, const int64_t *len) {
  ht_init(b, IRON_OP_FFT);
  ht_operand(b, in_dt, rank, in_dims);
  ht_result(b, out_dt, rank, out_dims);
  ht_attr_i64(b, "fft_length", d, len);
  uint32_t i = b->op.num_attrs++;
  b->attrs[i].kind = IRON_ATTR_ENUM;
  b->attrs[i].enumv.kind = IRON_ENUM_FFT_TYPE;
  b->attrs[i].enumv.value = type;
  b->named[i].name = "fft_type";
  b->named[i].value = &b->attrs[i];
}

static double rnd(void) { return (double)(ht_rand() >> 11) * 0x1p-52 - 1.0; }

// Element i of a float/complex tensor as (re, im) in long double.
static void get(const iron_tensor_t *t, int64_t i, long double *re,
                long double *im) {
  switch (t->dtype) {
    case IRON_DTYPE_F32: *re = ((float *)t->data)[i], *im = 0; break;
    case IRON_DTYPE_F64: *re = ((double *)t->data)[i], *im = 0; break;
    case IRON_DTYPE_C64:
      *re = ((float *)t->data)[2 * i], *im = ((float *)t->data)[2 * i + 1];
      break;
    default:
      *re = ((double *)t->data)[2 * i], *im = ((double *)t->data)[2 * i + 1];
      break;
  }
}

static void fill(iron_tensor_t *t) {
  bool cplx = t->dtype == IRON_DTYPE_C64 || t->dtype == IRON_DTYPE_C128;
  for (int64_t i = 0; i < t->count * (cplx ? 2 : 1); ++i) {
    if (t->dtype == IRON_DTYPE_F32 || t->dtype == IRON_DTYPE_C64)
      ((float *)t->data)[i] = (float)rnd();
    else
      ((double *)t->data)[i] = rnd();
  }
}

// Naive reference: the transform of one batch element's d-dim block as a
// full complex DFT over the transform dims (for IRFFT the input is first
// extended to the Hermitian spectrum the way XLA reads it: leading axes
// transformed as given, then the last axis as the half spectrum of a real
// signal with Im of bin 0 (and n/2) dropped).
typedef struct {
  int type, d;
  int64_t len[3];
  int64_t in_last;  // input extent of the last transform axis
} ref_t;

static void ref_block(const ref_t *r, const iron_tensor_t *in, int64_t base,
                      long double *out_re, long double *out_im) {
  const int d = r->d;
  int64_t total = 1;
  for (int i = 0; i < d; ++i) total *= r->len[i];
  const long double two_pi = 6.283185307179586476925286766559005768L;
  const int sgn = (r->type == FFT || r->type == RFFT) ? -1 : 1;
  // Input as a full n0 x n1 x n2 complex array.
  long double *xr = calloc((size_t)total, sizeof(long double));
  long double *xi = calloc((size_t)total, sizeof(long double));
  int64_t n_last = r->len[d - 1], lead = total / n_last;
  for (int64_t a = 0; a < lead; ++a) {
    for (int64_t k = 0; k < n_last; ++k) {
      long double re, im;
      if (r->type != IRFFT) {
        get(in, base + a * n_last + k, &re, &im);
      } else {
        // Hermitian extension along the last axis only happens after the
        // leading axes are transformed; handled below.
        if (k >= r->in_last) continue;
        get(in, base + a * r->in_last + k, &re, &im);
      }
      xr[a * n_last + k] = re;
      xi[a * n_last + k] = im;
    }
  }
  // Transform axes: for IRFFT leading axes first, then the Hermitian
  // extension, then the last axis; otherwise every axis (order-free).
  int64_t dims[3];
  for (int i = 0; i < d; ++i) dims[i] = r->len[i];
  long double *tr = malloc((size_t)total * sizeof(long double));
  long double *ti = malloc((size_t)total * sizeof(long double));
  for (int ax = 0; ax < d; ++ax) {
    if (r->type == IRFFT && ax == d - 1) {
      // Hermitian extension of each last-axis row.
      const int64_t n = n_last;
      for (int64_t a = 0; a < lead; ++a) {
        long double *rr = xr + a * n, *ri = xi + a * n;
        ri[0] = 0;
        if (n % 2 == 0) ri[n / 2] = 0;
        for (int64_t k = n / 2 + 1; k < n; ++k) {
          rr[k] = rr[n - k];
          ri[k] = -ri[n - k];
        }
      }
    }
    int64_t n = dims[ax], inner = 1;
    for (int i = ax + 1; i < d; ++i) inner *= dims[i];
    int64_t outer = total / (n * inner);
    long double *cs = malloc((size_t)n * 2 * sizeof(long double));
    for (int64_t j = 0; j < n; ++j) {
      long double a = two_pi * (long double)j / (long double)n * sgn;
      cs[2 * j] = cosl(a);
      cs[2 * j + 1] = sinl(a);
    }
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        for (int64_t k = 0; k < n; ++k) {
          long double sr = 0, si = 0;
          for (int64_t j = 0; j < n; ++j) {
            const int64_t t = (j * k) % n;
            long double c = cs[2 * t], s = cs[2 * t + 1];
            int64_t idx = (o * n + j) * inner + i;
            sr += xr[idx] * c - xi[idx] * s;
            si += xr[idx] * s + xi[idx] * c;
          }
          tr[(o * n + k) * inner + i] = sr;
          ti[(o * n + k) * inner + i] = si;
        }
    free(cs);
    memcpy(xr, tr, (size_t)total * sizeof(long double));
    memcpy(xi, ti, (size_t)total * sizeof(long double));
  }
  long double scale = sgn > 0 ? 1.0L / total : 1.0L;
  for (int64_t i = 0; i < total; ++i) {
    out_re[i] = xr[i] * scale;
    out_im[i] = xi[i] * scale;
  }
  free(xr);
  free(xi);
  free(tr);
  free(ti);
}

static int g_failures_printed = 0;

// Runs the kernel; returns the output tensor (caller frees).
static iron_tensor_t *run_kernel(const iron_kernel_t *k,
                                 const void *params, iron_tensor_t *in,
                                 const int64_t *out_dims, iron_dtype_t out_dt,
                                 iron_threadpool_t *pool) {
  iron_tensor_t *out = ht_tensor(out_dt, in->rank, out_dims);
  iron_kernel_ctx_t ctx = {0};
  ctx.pool = pool;
  CHECK_OK(k->run(&ctx, params, (const iron_tensor_t *const *)&in, &out));
  return out;
}

// With a pool: the result must equal the single-threaded one bit for bit
// (the split changes no arithmetic); without: the naive DFT within
// 2 log2(N) + 2 ulps of the largest output.
static void run_case(int type, bool wide, int batch, int d,
                     const int64_t *len, iron_threadpool_t *pool) {
  iron_dtype_t cdt = wide ? IRON_DTYPE_C128 : IRON_DTYPE_C64;
  iron_dtype_t rdt = wide ? IRON_DTYPE_F64 : IRON_DTYPE_F32;
  iron_dtype_t in_dt = type == RFFT ? rdt : cdt;
  iron_dtype_t out_dt = type == IRFFT ? rdt : cdt;
  int rank = d + 1;
  int64_t in_dims[4] = {batch}, out_dims[4] = {batch};
  for (int i = 0; i < d; ++i) in_dims[i + 1] = out_dims[i + 1] = len[i];
  const int64_t h1 = len[d - 1] / 2 + 1;
  if (type == RFFT) out_dims[d] = h1;
  if (type == IRFFT) in_dims[d] = h1;
  ht_op_t b;
  fft_op(&b, type, in_dt, out_dt, rank, in_dims, out_dims, d, len);
  const iron_kernel_t *k = iron_host_kernel_lookup(IRON_OP_FFT);
  CHECK(k != NULL);
  if (!k) return;
  void *params = NULL;
  CHECK_OK(k->prepare(&b.op, NULL, &params));
  iron_tensor_t *in = ht_tensor(in_dt, rank, in_dims);
  fill(in);
  iron_tensor_t *out = run_kernel(k, params, in, out_dims, out_dt, NULL);
  if (pool) {
    iron_tensor_t *par = run_kernel(k, params, in, out_dims, out_dt, pool);
    CHECK(memcmp(par->data, out->data, out->nbytes) == 0);
    ht_tensor_free(par);
    k->destroy(params);
    ht_tensor_free(in);
    ht_tensor_free(out);
    return;
  }
  int64_t total = 1;
  for (int i = 0; i < d; ++i) total *= len[i];
  long double *wr = malloc((size_t)total * sizeof(long double));
  long double *wi = malloc((size_t)total * sizeof(long double));
  ref_t r = {type, d, {len[0], d > 1 ? len[1] : 0, d > 2 ? len[2] : 0}, h1};
  const int64_t in_block = in->count / batch, out_block = out->count / batch;
  double worst = 0;
  for (int bi = 0; bi < batch; ++bi) {
    ref_block(&r, in, bi * in_block, wr, wi);
    // Compare the output block (for RFFT only the first h1 of the last
    // axis exist).
    long double mx = 0;
    for (int64_t i = 0; i < total; ++i)
      mx = fmaxl(mx, sqrtl(wr[i] * wr[i] + wi[i] * wi[i]));
    const int64_t n_last = len[d - 1], lead = total / n_last;
    const int64_t out_last = type == RFFT ? h1 : n_last;
    for (int64_t a = 0; a < lead; ++a)
      for (int64_t kk = 0; kk < out_last; ++kk) {
        long double gr, gi;
        get(out, bi * out_block + a * out_last + kk, &gr, &gi);
        long double er = gr - wr[a * n_last + kk];
        long double ei = type == IRFFT ? 0 : gi - wi[a * n_last + kk];
        double e = (double)(sqrtl(er * er + ei * ei) / (mx > 0 ? mx : 1));
        if (e > worst) worst = e;
      }
  }
  const double eps = wide ? 2.220446049250313e-16 : 1.1920928955078125e-07;
  const double lg = total > 2 ? log2((double)total) : 1.0;
  const double ulps = worst / eps;
  if (!(ulps <= 2.0 * lg + 2.0)) {
    if (g_failures_printed++ < 20)
      fprintf(stderr, "fft type %d %s d=%d len=%lld,%lld,%lld batch %d: "
              "%.2f ulps of max\n", type, wide ? "f64" : "f32", d,
              (long long)len[0], (long long)(d > 1 ? len[1] : 0),
              (long long)(d > 2 ? len[2] : 0), batch, ulps);
    CHECK(ulps <= 2.0 * lg + 2.0);
  }
  free(wr);
  free(wi);
  k->destroy(params);
  ht_tensor_free(in);
  ht_tensor_free(out);
}

static void test_lengths(iron_threadpool_t *pool) {
  static const int64_t ns[] = {1,  2,  3,  4,  5,  6,  7,  8,   9,   10,
                               11, 12, 13, 16, 17, 25, 27, 30,  32,  49,
                               61, 64, 67, 97, 128, 131, 210, 243, 256,
                               360, 512, 1000, 1024};
  for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); ++i)
    for (int type = 0; type < 4; ++type)
      for (int wide = 0; wide < 2; ++wide)
        run_case(type, wide, 2, 1, &ns[i], pool);
}

static void test_multi_dim(iron_threadpool_t *pool) {
  static const int64_t l2[][2] = {{1, 1}, {3, 4}, {8, 5}, {6, 7}, {16, 10}};
  static const int64_t l3[][3] = {{2, 3, 4}, {5, 1, 6}, {4, 7, 9}, {8, 8, 8}};
  for (int type = 0; type < 4; ++type)
    for (int wide = 0; wide < 2; ++wide) {
      for (size_t i = 0; i < sizeof(l2) / sizeof(l2[0]); ++i)
        run_case(type, wide, 3, 2, l2[i], pool);
      for (size_t i = 0; i < sizeof(l3) / sizeof(l3[0]); ++i)
        run_case(type, wide, 2, 3, l3[i], pool);
    }
}

// Many lines (parallel over lines) and one long line (parallel passes).
static void test_parallel(iron_threadpool_t *pool) {
  int64_t n = 48;
  run_case(FFT, false, 300, 1, &n, pool);
  run_case(IRFFT, true, 300, 1, &n, pool);
  int64_t big = 1 << 16;
  run_case(FFT, false, 1, 1, &big, pool);
  run_case(RFFT, true, 1, 1, &big, pool);
  int64_t prime = 40009;  // Bluestein with parallel pointwise steps
  run_case(IFFT, true, 1, 1, &prime, pool);
}

static void test_refusals(void) {
  const iron_kernel_t *k = iron_host_kernel_lookup(IRON_OP_FFT);
  int64_t dims[1] = {8}, len[1] = {8}, bad[1] = {7};
  void *params = NULL;
  ht_op_t b;
  // Wrong dtype pair: UNIMPLEMENTED naming the op.
  fft_op(&b, FFT, IRON_DTYPE_F32, IRON_DTYPE_F32, 1, dims, dims, 1, len);
  iron_status_t st = k->prepare(&b.op, NULL, &params);
  CHECK(iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED);
  CHECK(st && strstr(iron_status_message(st), "stablehlo.fft") != NULL);
  iron_status_free(st);
  // fft_length that does not match the shape: INVALID_ARGUMENT.
  fft_op(&b, FFT, IRON_DTYPE_C64, IRON_DTYPE_C64, 1, dims, dims, 1, bad);
  st = k->prepare(&b.op, NULL, &params);
  CHECK(iron_status_code(st) == IRON_STATUS_INVALID_ARGUMENT);
  iron_status_free(st);
  // Four transform dims.
  int64_t d4[4] = {2, 2, 2, 2};
  fft_op(&b, FFT, IRON_DTYPE_C64, IRON_DTYPE_C64, 4, d4, d4, 4, d4);
  st = k->prepare(&b.op, NULL, &params);
  CHECK(iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED);
  iron_status_free(st);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Process CPU time: with one thread it is robust against a loaded machine.
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bench_one(const char *what, int type, iron_dtype_t in_dt,
                      iron_dtype_t out_dt, int rank, const int64_t *in_dims,
                      const int64_t *out_dims, const int64_t *len,
                      iron_threadpool_t *pool) {
  ht_op_t b;
  fft_op(&b, type, in_dt, out_dt, rank, in_dims, out_dims, 1, len);
  const iron_kernel_t *k = iron_host_kernel_lookup(IRON_OP_FFT);
  void *params = NULL;
  double t0 = now_s();
  CHECK_OK(k->prepare(&b.op, NULL, &params));
  double tp = now_s() - t0;
  iron_tensor_t *in = ht_tensor(in_dt, rank, in_dims);
  iron_tensor_t *out = ht_tensor(out_dt, rank, out_dims);
  fill(in);
  iron_kernel_ctx_t ctx = {0};
  ctx.pool = pool;
  double best = 1e30, best_cpu = 1e30;
  for (int r = 0; r < 12; ++r) {
    t0 = now_s();
    double c0 = cpu_s();
    CHECK_OK(k->run(&ctx, params, (const iron_tensor_t *const *)&in, &out));
    double t = now_s() - t0, c = cpu_s() - c0;
    if (t < best) best = t;
    if (c < best_cpu) best_cpu = c;
  }
  printf("%s, %d thread(s): %.3f ms wall, %.3f ms cpu (prepare %.1f ms)\n",
         what, pool ? iron_threadpool_size(pool) : 1, best * 1e3,
         best_cpu * 1e3, tp * 1e3);
  k->destroy(params);
  ht_tensor_free(in);
  ht_tensor_free(out);
}

static void bench(void) {
  const char *e = getenv("IRON_BENCH_FFT");
  if (!e || e[0] != '1') return;
  for (int threads = 1; threads <= 2; ++threads) {
    iron_threadpool_t *pool = NULL;
    CHECK_OK(iron_threadpool_create(threads == 1 ? 1 : 0, &pool));
    int64_t n1[1] = {1 << 20};
    bench_one("fft c64 1M", FFT, IRON_DTYPE_C64, IRON_DTYPE_C64, 1, n1, n1,
              n1, pool);
    int64_t ri[2] = {4096, 256}, ro[2] = {4096, 129}, rl[1] = {256};
    bench_one("rfft f32 4096x256", RFFT, IRON_DTYPE_F32, IRON_DTYPE_C64, 2,
              ri, ro, rl, pool);
    bench_one("irfft c64 4096x129", IRFFT, IRON_DTYPE_C64, IRON_DTYPE_F32, 2,
              ro, ri, rl, pool);
    int64_t c1[2] = {1024, 1024}, cl[1] = {1024};
    bench_one("fft c64 1024x1024 (rows)", FFT, IRON_DTYPE_C64,
              IRON_DTYPE_C64, 2, c1, c1, cl, pool);
    iron_threadpool_destroy(pool);
  }
}

static iron_threadpool_t *g_pool;

static void test_serial(void) {
  test_lengths(NULL);
  test_multi_dim(NULL);
}

static void test_pool(void) {
  CHECK_OK(iron_threadpool_create(2, &g_pool));
  test_parallel(g_pool);
  iron_threadpool_destroy(g_pool);
}

static const iron_test_case_t kTests[] = {
    {"lengths_and_dims", test_serial},
    {"parallel", test_pool},
    {"refusals", test_refusals},
    {"bench", bench},
};
IRON_TEST_MAIN(kTests)
