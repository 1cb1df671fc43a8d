#include "device/host/dot_gemm.h"

#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Straightforward loops (every type; also the small-problem path of f32/f64)

typedef float v8f_t __attribute__((vector_size(32)));
typedef double v4d_t __attribute__((vector_size(32)));

typedef struct { float re, im; } c64_t;
typedef struct { double re, im; } c128_t;

typedef struct gemm_job {
  iron_host_gemm_type_t type;
  int64_t m, n, k;
  iron_host_gemm_view_t a, b;
  void *c;
} gemm_job_t;

// Element offsets, for flattened output row r (batch bi = r / m, row
// i = r % m), of A's row i in batch bi (*out_a) and of B's batch bi
// (*out_b): the row setup every row kernel below shares.
static inline void gemm_row_offsets(const gemm_job_t *j, int64_t r,
                                    int64_t *out_a, int64_t *out_b) {
  int64_t bi = r / j->m, i = r % j->m;
  *out_a = bi * j->a.bs + i * j->a.rs;
  *out_b = bi * j->b.bs;
}

// Rows [begin, end) of the flattened [batch * m] output rows, i-k-j order so
// the inner loop streams a row of B and of C. The restrict-qualified helper
// lets the compiler vectorize the j loop without run-time alias checks.
#define IRON_NAIVE_ROWS_(NAME, T, ZERO, MULADD)                              \
  static inline void NAME##_axpy(int64_t n, T av, const T *restrict b,       \
                                 int64_t cs, T *restrict c) {                \
    if (cs == 1) {                                                           \
      for (int64_t q = 0; q < n; ++q) MULADD(c[q], av, b[q]);                \
    } else {                                                                 \
      for (int64_t q = 0; q < n; ++q) MULADD(c[q], av, b[q * cs]);           \
    }                                                                        \
  }                                                                          \
  static void NAME(void *arg, int64_t begin, int64_t end) {                  \
    const gemm_job_t *j = arg;                                               \
    const T *A = j->a.data, *B = j->b.data;                                  \
    for (int64_t r = begin; r < end; ++r) {                                  \
      int64_t ao, bo;                                                        \
      gemm_row_offsets(j, r, &ao, &bo);                                      \
      T *c = (T *)j->c + r * j->n;                                           \
      for (int64_t q = 0; q < j->n; ++q) c[q] = ZERO;                        \
      const T *arow = A + ao;                                                \
      const T *bb = B + bo;                                                  \
      for (int64_t p = 0; p < j->k; ++p)                                     \
        NAME##_axpy(j->n, arow[p * j->a.cs], bb + p * j->b.rs, j->b.cs, c);  \
    }                                                                        \
  }

#define IRON_MULADD_REAL_(acc, x, y) ((acc) += (x) * (y))
#define IRON_MULADD_UINT_(acc, x, y) \
  ((acc) = (int64_t)((uint64_t)(acc) + (uint64_t)(x) * (uint64_t)(y)))
#define IRON_MULADD_CPLX_(acc, x, y)              \
  do {                                            \
    (acc).re += (x).re * (y).re - (x).im * (y).im; \
    (acc).im += (x).re * (y).im + (x).im * (y).re; \
  } while (0)

// f32/f64: the contiguous axpy with explicit vectors (the auto-vectorizer's
// cheap cost model picks narrow vectors here).
#define IRON_MULADD_VEC_(T, VT, VL, c, av, b, n)                             \
  do {                                                                       \
    int64_t q = 0;                                                           \
    VT va;                                                                   \
    for (int l = 0; l < VL; ++l) va[l] = (av);                               \
    for (; q + VL <= (n); q += VL) {                                         \
      VT vb, vc;                                                             \
      memcpy(&vb, (b) + q, sizeof(VT));                                      \
      memcpy(&vc, (c) + q, sizeof(VT));                                      \
      vc += va * vb;                                                         \
      memcpy((c) + q, &vc, sizeof(VT));                                      \
    }                                                                        \
    for (; q < (n); ++q) (c)[q] += (av) * (b)[q];                            \
  } while (0)
// f32/f64 rows in column blocks: task t is row t / blocks, columns
// [(t % blocks) * width, ...). A whole row is one block (width n); a few
// long rows (a vector times a matrix: a decode step's layers) split theirs
// over the threads. Every element sums its k products in order either way,
// so the split changes no bit.
#define IRON_COL_BLOCK 512
typedef struct col_job {
  const gemm_job_t *j;
  int64_t width;   // columns per task
  int64_t blocks;  // tasks per row
} col_job_t;
#define IRON_NAIVE_VEC_ROWS_(NAME, T, VT, VL)                                \
  static void NAME(void *arg, int64_t begin, int64_t end) {                  \
    const col_job_t *cj = arg;                                               \
    const gemm_job_t *j = cj->j;                                             \
    const T *A = j->a.data, *B = j->b.data;                                  \
    const int64_t cs = j->b.cs;                                              \
    for (int64_t t = begin; t < end; ++t) {                                  \
      int64_t r = t / cj->blocks, q0 = (t % cj->blocks) * cj->width;         \
      int64_t nq = j->n - q0 < cj->width ? j->n - q0 : cj->width;            \
      int64_t ao, bo;                                                        \
      gemm_row_offsets(j, r, &ao, &bo);                                      \
      T *c = (T *)j->c + r * j->n + q0;                                      \
      memset(c, 0, sizeof(T) * (size_t)nq);                                  \
      const T *arow = A + ao;                                                \
      const T *bb = B + bo + q0 * cs;                                        \
      for (int64_t p = 0; p < j->k; ++p) {                                   \
        T av = arow[p * j->a.cs];                                            \
        const T *brow = bb + p * j->b.rs;                                    \
        if (cs == 1) {                                                       \
          IRON_MULADD_VEC_(T, VT, VL, c, av, brow, nq);                      \
        } else {                                                             \
          for (int64_t q = 0; q < nq; ++q) c[q] += av * brow[q * cs];        \
        }                                                                    \
      }                                                                      \
    }                                                                        \
  }
IRON_NAIVE_VEC_ROWS_(naive_f32, float, v8f_t, 8)
IRON_NAIVE_VEC_ROWS_(naive_f64, double, v4d_t, 4)
IRON_NAIVE_ROWS_(naive_s64, int64_t, 0, IRON_MULADD_UINT_)
IRON_NAIVE_ROWS_(naive_c64, c64_t, ((c64_t){0, 0}), IRON_MULADD_CPLX_)
IRON_NAIVE_ROWS_(naive_c128, c128_t, ((c128_t){0, 0}), IRON_MULADD_CPLX_)

// Matrix-vector (n == 1) with contiguous A rows: several independent partial
// sums so the loop vectorizes and the dependency chain is short.
#define IRON_GEMV_ROWS_(NAME, T)                                             \
  static void NAME(void *arg, int64_t begin, int64_t end) {                  \
    const gemm_job_t *j = arg;                                               \
    const T *A = j->a.data, *B = j->b.data;                                  \
    for (int64_t r = begin; r < end; ++r) {                                  \
      int64_t ao, bo;                                                        \
      gemm_row_offsets(j, r, &ao, &bo);                                      \
      const T *arow = A + ao;                                                \
      const T *x = B + bo;                                                   \
      int64_t xs = j->b.rs;                                                  \
      T part[16] = {0};                                                      \
      int64_t p = 0;                                                         \
      if (xs == 1) {                                                         \
        for (; p + 16 <= j->k; p += 16)                                      \
          for (int l = 0; l < 16; ++l) part[l] += arow[p + l] * x[p + l];    \
      }                                                                      \
      T s = 0;                                                               \
      for (; p < j->k; ++p) s += arow[p] * x[p * xs];                        \
      for (int l = 0; l < 16; l += 2) s += part[l] + part[l + 1];            \
      ((T *)j->c)[r] = s;                                                    \
    }                                                                        \
  }
IRON_GEMV_ROWS_(gemv_f32, float)
IRON_GEMV_ROWS_(gemv_f64, double)

// Matrix-vector products shorter than one AVX2 vector (k < 8 floats, k < 4
// doubles): XLA:CPU's row-major GEMV emitter vectorizes along k, so such
// rows fall entirely into its scalar epilogue, which accumulates in order
// with fused multiply-adds (it compiles for the host, which has FMA when we
// take this path). Doing the same gives its results bit for bit; plain
// multiply-then-add differs in the last bits, which finite-difference
// gradient checks of small solves amplify past their tolerances.
#define IRON_GEMV_SHORT_FMA_ROWS_(NAME, T, FMA)                             \
  __attribute__((target("fma"))) static void NAME(void *arg, int64_t begin,  \
                                                  int64_t end) {             \
    const gemm_job_t *j = arg;                                               \
    const T *A = j->a.data, *B = j->b.data;                                  \
    for (int64_t r = begin; r < end; ++r) {                                  \
      int64_t ao, bo;                                                        \
      gemm_row_offsets(j, r, &ao, &bo);                                      \
      const T *arow = A + ao;                                                \
      const T *x = B + bo;                                                   \
      T s = 0;                                                               \
      for (int64_t p = 0; p < j->k; ++p) s = FMA(arow[p], x[p * j->b.rs], s); \
      ((T *)j->c)[r] = s;                                                    \
    }                                                                        \
  }
IRON_GEMV_SHORT_FMA_ROWS_(gemv_short_fma_f32, float, __builtin_fmaf)
IRON_GEMV_SHORT_FMA_ROWS_(gemv_short_fma_f64, double, __builtin_fma)

// ---------------------------------------------------------------------------
// Blocked f32/f64 kernel. C is computed in KC-deep slices: B is packed into
// NR-wide column panels (KC x NC block, shared by all threads), A into MR-row
// panels, and an MR x NR register tile accumulates each slice.

#define IRON_KC 256
#define IRON_MC 96   // multiple of MR
#define IRON_NC 4096
#define IRON_NS 256  // columns per parallel task (multiple of NR)
#define IRON_MR 6

#if defined(__GNUC__)
#define IRON_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define IRON_ALWAYS_INLINE inline
#endif


// One MR x (2 vectors) tile: c[0:mr, 0:nr] (+)= a_panel * b_panel over kc.
#define IRON_UKERNEL_(NAME, T, VT, VL, SPLAT)                                      \
  static IRON_ALWAYS_INLINE void NAME(int64_t kc, const T *restrict a,       \
                                      const T *restrict b, T *restrict c,     \
                                      int64_t ldc, int64_t mr, int64_t nr,    \
                                      bool accumulate) {                      \
    VT c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};      \
    VT c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};      \
    for (int64_t p = 0; p < kc; ++p) {                                        \
      VT b0, b1;                                                              \
      memcpy(&b0, b + p * 2 * VL, sizeof(VT));                                \
      memcpy(&b1, b + p * 2 * VL + VL, sizeof(VT));                           \
      const T *ap = a + p * IRON_MR;                                          \
      VT a0 = SPLAT(ap[0]);                                                    \
      c00 += a0 * b0; c01 += a0 * b1;                                         \
      VT a1 = SPLAT(ap[1]);                                                    \
      c10 += a1 * b0; c11 += a1 * b1;                                         \
      VT a2 = SPLAT(ap[2]);                                                    \
      c20 += a2 * b0; c21 += a2 * b1;                                         \
      VT a3 = SPLAT(ap[3]);                                                    \
      c30 += a3 * b0; c31 += a3 * b1;                                         \
      VT a4 = SPLAT(ap[4]);                                                    \
      c40 += a4 * b0; c41 += a4 * b1;                                         \
      VT a5 = SPLAT(ap[5]);                                                    \
      c50 += a5 * b0; c51 += a5 * b1;                                         \
    }                                                                         \
    VT acc[IRON_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21},                 \
                          {c30, c31}, {c40, c41}, {c50, c51}};                \
    if (mr == IRON_MR && nr == 2 * VL) {                                      \
      for (int i = 0; i < IRON_MR; ++i) {                                     \
        T *ci = c + i * ldc;                                                  \
        if (accumulate) {                                                     \
          VT o0, o1;                                                          \
          memcpy(&o0, ci, sizeof(VT));                                        \
          memcpy(&o1, ci + VL, sizeof(VT));                                   \
          acc[i][0] += o0;                                                    \
          acc[i][1] += o1;                                                    \
        }                                                                     \
        memcpy(ci, &acc[i][0], sizeof(VT));                                   \
        memcpy(ci + VL, &acc[i][1], sizeof(VT));                              \
      }                                                                       \
    } else {                                                                  \
      T tmp[IRON_MR][2 * VL];                                                 \
      memcpy(tmp, acc, sizeof(tmp));                                          \
      for (int64_t i = 0; i < mr; ++i)                                        \
        for (int64_t q = 0; q < nr; ++q)                                      \
          c[i * ldc + q] = accumulate ? c[i * ldc + q] + tmp[i][q]            \
                                      : tmp[i][q];                            \
    }                                                                         \
  }

#define IRON_SPLAT8_(x) ((v8f_t){x, x, x, x, x, x, x, x})
#define IRON_SPLAT4_(x) ((v4d_t){x, x, x, x})
IRON_UKERNEL_(ukernel_f32, float, v8f_t, 8, IRON_SPLAT8_)
IRON_UKERNEL_(ukernel_f64, double, v4d_t, 4, IRON_SPLAT4_)

// A tile of C: rows [0, mc) of the packed A block times columns [0, nc) of
// the packed B block (column offset already applied by the caller).
#define IRON_MACRO_(NAME, T, UK, NR)                                          \
  static IRON_ALWAYS_INLINE void NAME##_body(                                 \
      int64_t mc, int64_t nc, int64_t kc, const T *ap, const T *bp, T *c,     \
      int64_t ldc, bool accumulate) {                                         \
    for (int64_t jr = 0; jr < nc; jr += NR) {                                 \
      int64_t nr = nc - jr < NR ? nc - jr : NR;                               \
      for (int64_t ir = 0; ir < mc; ir += IRON_MR) {                          \
        int64_t mr = mc - ir < IRON_MR ? mc - ir : IRON_MR;                   \
        UK(kc, ap + ir * kc, bp + jr * kc, c + ir * ldc + jr, ldc, mr, nr,    \
           accumulate);                                                       \
      }                                                                       \
    }                                                                         \
  }                                                                           \
  static void NAME##_generic(int64_t mc, int64_t nc, int64_t kc,              \
                             const T *ap, const T *bp, T *c, int64_t ldc,     \
                             bool accumulate) {                               \
    NAME##_body(mc, nc, kc, ap, bp, c, ldc, accumulate);                      \
  }                                                                           \
  IRON_MACRO_AVX2_(NAME, T)

#if defined(__x86_64__) && defined(__GNUC__)
#define IRON_HAVE_AVX2_VARIANT 1
#define IRON_MACRO_AVX2_(NAME, T)                                             \
  __attribute__((target("avx2,fma"))) static void NAME##_avx2(                \
      int64_t mc, int64_t nc, int64_t kc, const T *ap, const T *bp, T *c,     \
      int64_t ldc, bool accumulate) {                                         \
    NAME##_body(mc, nc, kc, ap, bp, c, ldc, accumulate);                      \
  }
#else
#define IRON_HAVE_AVX2_VARIANT 0
#define IRON_MACRO_AVX2_(NAME, T)
#endif

IRON_MACRO_(macro_f32, float, ukernel_f32, 16)
IRON_MACRO_(macro_f64, double, ukernel_f64, 8)

static bool cpu_has_avx2_fma(void) {
#if IRON_HAVE_AVX2_VARIANT
  static int cached = -1;  // benign race: every thread computes the same
  if (cached < 0) {
    __builtin_cpu_init();
    cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }
  return cached == 1;
#else
  return false;
#endif
}

typedef struct blocked_job {
  size_t es;  // 4 or 8
  int64_t nr;
  const char *a, *b;  // base of this batch
  iron_host_gemm_view_t av, bv;
  char *ap, *bp;  // packed blocks
  char *c;        // C of this batch (ldc = n)
  int64_t n;
  int64_t i0, mcb;  // rows of this A chunk
  int64_t p0, kc;
  int64_t j0, nc;
  int64_t mtiles, ntiles;
  bool accumulate;
  bool avx2;
} blocked_job_t;

// Packs MR-row panels [begin, end) of A rows [i0, i0 + mcb), cols [p0, p0+kc).
static void pack_a(void *arg, int64_t begin, int64_t end) {
  const blocked_job_t *j = arg;
  for (int64_t pan = begin; pan < end; ++pan) {
    int64_t r0 = pan * IRON_MR;
    int64_t rows = j->mcb - r0 < IRON_MR ? j->mcb - r0 : IRON_MR;
    if (j->es == 4) {
      const float *a = (const float *)j->a;
      float *dst = (float *)j->ap + r0 * j->kc;
      for (int64_t p = 0; p < j->kc; ++p)
        for (int64_t i = 0; i < IRON_MR; ++i)
          dst[p * IRON_MR + i] =
              i < rows ? a[(j->i0 + r0 + i) * j->av.rs + (j->p0 + p) * j->av.cs]
                       : 0.0f;
    } else {
      const double *a = (const double *)j->a;
      double *dst = (double *)j->ap + r0 * j->kc;
      for (int64_t p = 0; p < j->kc; ++p)
        for (int64_t i = 0; i < IRON_MR; ++i)
          dst[p * IRON_MR + i] =
              i < rows ? a[(j->i0 + r0 + i) * j->av.rs + (j->p0 + p) * j->av.cs]
                       : 0.0;
    }
  }
}

// Packs NR-column panels [begin, end) of B rows [p0, p0+kc), cols [j0, j0+nc).
static void pack_b(void *arg, int64_t begin, int64_t end) {
  const blocked_job_t *j = arg;
  int64_t nr = j->nr;
  for (int64_t pan = begin; pan < end; ++pan) {
    int64_t q0 = pan * nr;
    int64_t cols = j->nc - q0 < nr ? j->nc - q0 : nr;
    if (j->es == 4) {
      const float *b = (const float *)j->b;
      float *dst = (float *)j->bp + q0 * j->kc;
      for (int64_t p = 0; p < j->kc; ++p) {
        const float *brow = b + (j->p0 + p) * j->bv.rs + (j->j0 + q0) * j->bv.cs;
        for (int64_t q = 0; q < nr; ++q)
          dst[p * nr + q] = q < cols ? brow[q * j->bv.cs] : 0.0f;
      }
    } else {
      const double *b = (const double *)j->b;
      double *dst = (double *)j->bp + q0 * j->kc;
      for (int64_t p = 0; p < j->kc; ++p) {
        const double *brow =
            b + (j->p0 + p) * j->bv.rs + (j->j0 + q0) * j->bv.cs;
        for (int64_t q = 0; q < nr; ++q)
          dst[p * nr + q] = q < cols ? brow[q * j->bv.cs] : 0.0;
      }
    }
  }
}

static void compute_tiles(void *arg, int64_t begin, int64_t end) {
  const blocked_job_t *j = arg;
  for (int64_t t = begin; t < end; ++t) {
    int64_t mt = t / j->ntiles, nt = t % j->ntiles;
    int64_t r0 = mt * IRON_MC, q0 = nt * IRON_NS;
    int64_t mc = j->mcb - r0 < IRON_MC ? j->mcb - r0 : IRON_MC;
    int64_t nc = j->nc - q0 < IRON_NS ? j->nc - q0 : IRON_NS;
    size_t es = j->es;
    const char *ap = j->ap + (size_t)(r0 * j->kc) * es;
    const char *bp = j->bp + (size_t)(q0 * j->kc) * es;
    char *c = j->c + (size_t)((j->i0 + r0) * j->n + j->j0 + q0) * es;
    if (es == 4) {
#if IRON_HAVE_AVX2_VARIANT
      if (j->avx2) {
        macro_f32_avx2(mc, nc, j->kc, (const float *)ap, (const float *)bp,
                       (float *)c, j->n, j->accumulate);
        continue;
      }
#endif
      macro_f32_generic(mc, nc, j->kc, (const float *)ap, (const float *)bp,
                        (float *)c, j->n, j->accumulate);
    } else {
#if IRON_HAVE_AVX2_VARIANT
      if (j->avx2) {
        macro_f64_avx2(mc, nc, j->kc, (const double *)ap, (const double *)bp,
                       (double *)c, j->n, j->accumulate);
        continue;
      }
#endif
      macro_f64_generic(mc, nc, j->kc, (const double *)ap, (const double *)bp,
                        (double *)c, j->n, j->accumulate);
    }
  }
}

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

static iron_status_t blocked_gemm(iron_threadpool_t *pool, size_t es,
                                  int64_t batch, int64_t m, int64_t n,
                                  int64_t k, const iron_host_gemm_view_t *a,
                                  const iron_host_gemm_view_t *b, void *c) {
  int64_t nr = es == 4 ? 16 : 8;
  // A chunk: every row when small enough, else slabs of rows.
  int64_t mchunk = m;
  int64_t max_rows = (8 << 20) / (IRON_KC * (int64_t)es);
  if (mchunk > max_rows) mchunk = max_rows / IRON_MC * IRON_MC;
  int64_t ncmax = n < IRON_NC ? n : IRON_NC;
  size_t ap_bytes = (size_t)(round_up(mchunk, IRON_MR) * IRON_KC) * es;
  size_t bp_bytes = (size_t)(round_up(ncmax, nr) * IRON_KC) * es;
  char *ap = aligned_alloc(64, round_up((int64_t)ap_bytes, 64));
  char *bp = aligned_alloc(64, round_up((int64_t)bp_bytes, 64));
  if (!ap || !bp) {
    free(ap);
    free(bp);
    return IRON_ERR(RESOURCE_EXHAUSTED, "dot: out of memory for %zu bytes",
                    ap_bytes + bp_bytes);
  }
  blocked_job_t j;
  memset(&j, 0, sizeof(j));
  j.es = es;
  j.nr = nr;
  j.av = *a;
  j.bv = *b;
  j.ap = ap;
  j.bp = bp;
  j.n = n;
  j.avx2 = cpu_has_avx2_fma();
  for (int64_t bi = 0; bi < batch; ++bi) {
    j.a = (const char *)a->data + (size_t)(bi * a->bs) * es;
    j.b = (const char *)b->data + (size_t)(bi * b->bs) * es;
    j.c = (char *)c + (size_t)(bi * m * n) * es;
    for (j.p0 = 0; j.p0 < k; j.p0 += IRON_KC) {
      j.kc = k - j.p0 < IRON_KC ? k - j.p0 : IRON_KC;
      j.accumulate = j.p0 > 0;
      for (j.j0 = 0; j.j0 < n; j.j0 += IRON_NC) {
        j.nc = n - j.j0 < IRON_NC ? n - j.j0 : IRON_NC;
        iron_threadpool_parallel_for(pool, (j.nc + nr - 1) / nr, 4, pack_b,
                                     &j);
        for (j.i0 = 0; j.i0 < m; j.i0 += mchunk) {
          j.mcb = m - j.i0 < mchunk ? m - j.i0 : mchunk;
          iron_threadpool_parallel_for(pool, (j.mcb + IRON_MR - 1) / IRON_MR,
                                       4, pack_a, &j);
          j.mtiles = (j.mcb + IRON_MC - 1) / IRON_MC;
          j.ntiles = (j.nc + IRON_NS - 1) / IRON_NS;
          iron_threadpool_parallel_for(pool, j.mtiles * j.ntiles, 1,
                                       compute_tiles, &j);
        }
      }
    }
  }
  free(ap);
  free(bp);
  return IRON_OK;
}

typedef struct batch_job {
  size_t es;
  int64_t m, n, k;
  const iron_host_gemm_view_t *a, *b;
  void *c;
  bool failed;
} batch_job_t;

static void blocked_batches(void *arg, int64_t begin, int64_t end) {
  batch_job_t *j = arg;
  for (int64_t bi = begin; bi < end; ++bi) {
    iron_host_gemm_view_t a = *j->a, b = *j->b;
    a.data = (const char *)a.data + (size_t)(bi * a.bs) * j->es;
    b.data = (const char *)b.data + (size_t)(bi * b.bs) * j->es;
    void *c = (char *)j->c + (size_t)(bi * j->m * j->n) * j->es;
    iron_status_t st = blocked_gemm(NULL, j->es, 1, j->m, j->n, j->k, &a, &b, c);
    if (st) {
      iron_status_free(st);
      j->failed = true;  // benign race: only ever set to true
    }
  }
}

// ---------------------------------------------------------------------------

iron_status_t iron_host_gemm(iron_threadpool_t *pool,
                             iron_host_gemm_type_t type, bool fast,
                             int64_t batch, int64_t m, int64_t n, int64_t k,
                             const iron_host_gemm_view_t *a,
                             const iron_host_gemm_view_t *b, void *c) {
  int64_t rows = batch * m;
  if (rows == 0 || n == 0) return IRON_OK;
  gemm_job_t j = {type, m, n, k, *a, *b, c};
  // Rows per task: about 64K multiply-adds each.
  int64_t per_row = (n > 0 ? n : 1) * (k > 0 ? k : 1);
  int64_t grain = per_row >= 65536 ? 1 : 65536 / per_row;
  bool real = type == IRON_HOST_GEMM_F32 || type == IRON_HOST_GEMM_F64;
  if (fast && real && k > 0) {
    size_t es = type == IRON_HOST_GEMM_F32 ? 4 : 8;
    if (n == 1 && a->cs == 1) {
      bool f32 = type == IRON_HOST_GEMM_F32;
      iron_parallel_fn_t gemv = f32 ? gemv_f32 : gemv_f64;
      if (k < (f32 ? 8 : 4) && cpu_has_avx2_fma())
        gemv = f32 ? gemv_short_fma_f32 : gemv_short_fma_f64;
      iron_threadpool_parallel_for(pool, rows, grain, gemv, &j);
      return IRON_OK;
    }
    // Packing costs O(MK + KN); worth it once every packed element is reused
    // a few times.
    if (m >= IRON_MR && n >= 16 && k >= 8 && m * n * k >= 16384) {
      // Many small products (attention heads, vmapped layers): one task per
      // product instead of three synchronised parallel steps per product.
      if (batch > 1 && pool && m * n * k <= (1 << 21)) {
        batch_job_t bj = {es, m, n, k, a, b, c, false};
        iron_threadpool_parallel_for(pool, batch, 1, blocked_batches, &bj);
        return bj.failed ? IRON_ERR(RESOURCE_EXHAUSTED, "dot: out of memory")
                         : IRON_OK;
      }
      return blocked_gemm(pool, es, batch, m, n, k, a, b, c);
    }
  }
  if (real) {
    // Fewer rows than threads, long contiguous rows of B: split the
    // columns; otherwise a task is a whole row.
    col_job_t cj = {&j, n, 1};
    if (pool && b->cs == 1 && n >= 2 * IRON_COL_BLOCK &&
        rows < iron_threadpool_size(pool)) {
      cj.width = IRON_COL_BLOCK;
      cj.blocks = (n + IRON_COL_BLOCK - 1) / IRON_COL_BLOCK;
      grain = 1;
    }
    iron_threadpool_parallel_for(
        pool, rows * cj.blocks, grain,
        type == IRON_HOST_GEMM_F32 ? naive_f32 : naive_f64, &cj);
    return IRON_OK;
  }
  iron_parallel_fn_t fn = NULL;
  switch (type) {
    case IRON_HOST_GEMM_F32:
    case IRON_HOST_GEMM_F64: break;  // above
    case IRON_HOST_GEMM_C64: fn = naive_c64; break;
    case IRON_HOST_GEMM_C128: fn = naive_c128; break;
    case IRON_HOST_GEMM_S64: fn = naive_s64; break;
  }
  iron_threadpool_parallel_for(pool, rows, grain, fn, &j);
  return IRON_OK;
}
