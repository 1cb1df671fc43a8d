// Host dot_general / dot against a direct reference (double, complex double
// or wrapping int64) over random dimension layouts, dtypes and sizes that hit
// the small, matrix-vector and blocked paths. IRON_BENCH_DOT=1 also times
// 512^3 f32 with 1 and 2 threads.
#include <time.h>

#include "base/half.h"
#include "base/threadpool.h"
#include "host_test_ops.h"
#include "test.h"

static iron_threadpool_t *g_pool;

typedef struct val {
  double re, im;
  int64_t i;
} val_t;

static val_t load(const iron_tensor_t *t, int64_t k) {
  val_t v = {0, 0, 0};
  const void *p = t->data;
  switch (t->dtype) {
    case IRON_DTYPE_PRED: case IRON_DTYPE_U8: v.i = ((uint8_t *)p)[k]; break;
    case IRON_DTYPE_S8: v.i = ((int8_t *)p)[k]; break;
    case IRON_DTYPE_S4: v.i = (int8_t)(uint8_t)(((uint8_t *)p)[k] << 4) >> 4; break;
    case IRON_DTYPE_S16: v.i = ((int16_t *)p)[k]; break;
    case IRON_DTYPE_S32: v.i = ((int32_t *)p)[k]; break;
    case IRON_DTYPE_U32: v.i = ((uint32_t *)p)[k]; break;
    case IRON_DTYPE_S64: v.i = ((int64_t *)p)[k]; break;
    case IRON_DTYPE_F16: v.re = iron_f16_to_f32(((uint16_t *)p)[k]); break;
    case IRON_DTYPE_BF16: v.re = iron_bf16_to_f32(((uint16_t *)p)[k]); break;
    case IRON_DTYPE_F32: v.re = ((float *)p)[k]; break;
    case IRON_DTYPE_F64: v.re = ((double *)p)[k]; break;
    case IRON_DTYPE_C64:
      v.re = ((float *)p)[2 * k];
      v.im = ((float *)p)[2 * k + 1];
      break;
    case IRON_DTYPE_C128:
      v.re = ((double *)p)[2 * k];
      v.im = ((double *)p)[2 * k + 1];
      break;
    default: break;
  }
  if (iron_dtype_is_int(t->dtype) || t->dtype == IRON_DTYPE_PRED)
    v.re = (double)v.i;
  return v;
}

static void fill_random(iron_tensor_t *t) {
  for (int64_t k = 0; k < t->count; ++k) {
    double r = (double)(int64_t)(ht_rand() % 2001 - 1000) / 250.0;
    double r2 = (double)(int64_t)(ht_rand() % 2001 - 1000) / 250.0;
    int64_t iv = (int64_t)ht_rand();
    void *p = t->data;
    switch (t->dtype) {
      case IRON_DTYPE_PRED: ((uint8_t *)p)[k] = iv & 1; break;
      case IRON_DTYPE_U8: ((uint8_t *)p)[k] = (uint8_t)iv; break;
      case IRON_DTYPE_S8: ((int8_t *)p)[k] = (int8_t)iv; break;
      case IRON_DTYPE_S4: ((uint8_t *)p)[k] = (uint8_t)iv; break;  // nibble + junk
      case IRON_DTYPE_S16: ((int16_t *)p)[k] = (int16_t)iv; break;
      case IRON_DTYPE_S32: ((int32_t *)p)[k] = (int32_t)iv; break;
      case IRON_DTYPE_U32: ((uint32_t *)p)[k] = (uint32_t)iv; break;
      case IRON_DTYPE_S64: ((int64_t *)p)[k] = iv; break;
      case IRON_DTYPE_F16: ((uint16_t *)p)[k] = iron_f32_to_f16((float)r); break;
      case IRON_DTYPE_BF16: ((uint16_t *)p)[k] = iron_f32_to_bf16((float)r); break;
      case IRON_DTYPE_F32: ((float *)p)[k] = (float)r; break;
      case IRON_DTYPE_F64: ((double *)p)[k] = r; break;
      case IRON_DTYPE_C64:
        ((float *)p)[2 * k] = (float)r;
        ((float *)p)[2 * k + 1] = (float)r2;
        break;
      case IRON_DTYPE_C128:
        ((double *)p)[2 * k] = r;
        ((double *)p)[2 * k + 1] = r2;
        break;
      default: break;
    }
  }
}

typedef struct combo {
  iron_dtype_t lhs, rhs, out;
  double tol;  // relative to sum |a||b|; 0 = exact (integers)
} combo_t;

static const combo_t kCombos[] = {
    {IRON_DTYPE_F32, IRON_DTYPE_F32, IRON_DTYPE_F32, 2e-6},
    {IRON_DTYPE_F64, IRON_DTYPE_F64, IRON_DTYPE_F64, 1e-14},
    {IRON_DTYPE_BF16, IRON_DTYPE_BF16, IRON_DTYPE_F32, 2e-6},
    {IRON_DTYPE_BF16, IRON_DTYPE_BF16, IRON_DTYPE_BF16, 8e-3},
    {IRON_DTYPE_F16, IRON_DTYPE_F16, IRON_DTYPE_F16, 1e-3},
    {IRON_DTYPE_F16, IRON_DTYPE_F16, IRON_DTYPE_F32, 2e-6},
    {IRON_DTYPE_S8, IRON_DTYPE_S8, IRON_DTYPE_S32, 0},
    {IRON_DTYPE_S8, IRON_DTYPE_S8, IRON_DTYPE_S8, 0},
    {IRON_DTYPE_S4, IRON_DTYPE_S4, IRON_DTYPE_S32, 0},
    {IRON_DTYPE_U8, IRON_DTYPE_U8, IRON_DTYPE_U32, 0},
    {IRON_DTYPE_S32, IRON_DTYPE_S32, IRON_DTYPE_S32, 0},
    {IRON_DTYPE_S64, IRON_DTYPE_S64, IRON_DTYPE_S64, 0},
    {IRON_DTYPE_S16, IRON_DTYPE_S16, IRON_DTYPE_S16, 0},
    {IRON_DTYPE_PRED, IRON_DTYPE_PRED, IRON_DTYPE_PRED, 0},
    {IRON_DTYPE_C64, IRON_DTYPE_C64, IRON_DTYPE_C64, 2e-6},
    {IRON_DTYPE_C128, IRON_DTYPE_C128, IRON_DTYPE_C128, 1e-14},
};

static void unravel(int64_t flat, int rank, const int64_t *dims,
                    int64_t *idx) {
  for (int i = rank - 1; i >= 0; --i) {
    idx[i] = flat % dims[i];
    flat /= dims[i];
  }
}
static int64_t ravel(int rank, const int64_t *dims, const int64_t *idx) {
  int64_t f = 0;
  for (int i = 0; i < rank; ++i) f = f * dims[i] + idx[i];
  return f;
}

// Roles: 0..nb-1 batch, then contracting, then free. `pos[role]` = position
// of that role in the operand.
static void shuffle(int n, int *v) {
  for (int i = n - 1; i > 0; --i) {
    int j = (int)ht_rand_range(0, i);
    int t = v[i]; v[i] = v[j]; v[j] = t;
  }
}

// Runs one configuration and checks every output element. `sizes` gives
// batch, contracting, lhs free, rhs free sizes in that order.
static void run_case(const combo_t *cb, int nb, int nc, int nlf, int nrf,
                     const int64_t *bsz, const int64_t *csz,
                     const int64_t *lfsz, const int64_t *rfsz, bool shuffled,
                     bool old_dot) {
  int lrank = nb + nc + nlf, rrank = nb + nc + nrf;
  int lorder[8], rorder[8];  // position -> role
  for (int i = 0; i < lrank; ++i) lorder[i] = i;
  for (int i = 0; i < rrank; ++i) rorder[i] = i;
  if (old_dot && nlf == 1) {  // lhs is [M, K]
    lorder[0] = nb + nc;
    lorder[1] = nb;
  }
  if (shuffled) {
    shuffle(lrank, lorder);
    shuffle(rrank, rorder);
  }
  int lpos[8], rpos[8];  // role -> position
  int64_t ld[8], rd[8];
  for (int p = 0; p < lrank; ++p) {
    int role = lorder[p];
    lpos[role] = p;
    ld[p] = role < nb ? bsz[role] : role < nb + nc ? csz[role - nb]
                                                   : lfsz[role - nb - nc];
  }
  for (int p = 0; p < rrank; ++p) {
    int role = rorder[p];
    rpos[role] = p;
    rd[p] = role < nb ? bsz[role] : role < nb + nc ? csz[role - nb]
                                                   : rfsz[role - nb - nc];
  }
  int64_t lb[8], rb[8], lc[8], rc[8];
  for (int i = 0; i < nb; ++i) { lb[i] = lpos[i]; rb[i] = rpos[i]; }
  for (int i = 0; i < nc; ++i) { lc[i] = lpos[nb + i]; rc[i] = rpos[nb + i]; }
  // Result: batch, lhs free (increasing position), rhs free.
  int64_t od[16];
  int orank = 0;
  int lfree_pos[8], rfree_pos[8], nlfp = 0, nrfp = 0;
  for (int i = 0; i < nb; ++i) od[orank++] = bsz[i];
  for (int p = 0; p < lrank; ++p)
    if (lorder[p] >= nb + nc) { lfree_pos[nlfp++] = p; od[orank++] = ld[p]; }
  for (int p = 0; p < rrank; ++p)
    if (rorder[p] >= nb + nc) { rfree_pos[nrfp++] = p; od[orank++] = rd[p]; }

  ht_op_t b;
  ht_init(&b, old_dot ? IRON_OP_DOT : IRON_OP_DOT_GENERAL);
  ht_operand(&b, cb->lhs, lrank, ld);
  ht_operand(&b, cb->rhs, rrank, rd);
  ht_result(&b, cb->out, orank, od);
  if (!old_dot) {
    ht_attr_i64(&b, "lhs_batching_dimensions", nb, lb);
    ht_attr_i64(&b, "rhs_batching_dimensions", nb, rb);
    ht_attr_i64(&b, "lhs_contracting_dimensions", nc, lc);
    ht_attr_i64(&b, "rhs_contracting_dimensions", nc, rc);
  }
  iron_tensor_t *in[2] = {ht_tensor(cb->lhs, lrank, ld),
                          ht_tensor(cb->rhs, rrank, rd)};
  fill_random(in[0]);
  fill_random(in[1]);
  iron_tensor_t *out = ht_tensor(cb->out, orank, od);
  CHECK_OK(ht_run(&b, g_pool, NULL, in, &out));
  int64_t ccount = 1;
  for (int i = 0; i < nc; ++i) ccount *= csz[i];
  int bad = 0;
  int64_t width = (int64_t)iron_dtype_size(cb->out) * 8;
  for (int64_t f = 0; f < out->count; ++f) {
    int64_t oi[16], li[8], ri[8], ci[8];
    unravel(f, orank, od, oi);
    for (int i = 0; i < nb; ++i) li[lpos[i]] = ri[rpos[i]] = oi[i];
    for (int i = 0; i < nlfp; ++i) li[lfree_pos[i]] = oi[nb + i];
    for (int i = 0; i < nrfp; ++i) ri[rfree_pos[i]] = oi[nb + nlfp + i];
    double sre = 0, sim = 0, mag = 0;
    uint64_t si = 0;
    for (int64_t cf = 0; cf < ccount; ++cf) {
      unravel(cf, nc, csz, ci);
      for (int i = 0; i < nc; ++i) li[lpos[nb + i]] = ri[rpos[nb + i]] = ci[i];
      val_t x = load(in[0], ravel(lrank, ld, li));
      val_t y = load(in[1], ravel(rrank, rd, ri));
      sre += x.re * y.re - x.im * y.im;
      sim += x.re * y.im + x.im * y.re;
      mag += (fabs(x.re) + fabs(x.im)) * (fabs(y.re) + fabs(y.im));
      si += (uint64_t)x.i * (uint64_t)y.i;
    }
    val_t got = load(out, f);
    if (cb->out == IRON_DTYPE_PRED) {
      if (got.i != (si != 0)) bad++;
    } else if (cb->tol == 0) {
      uint64_t mask = width >= 64 ? ~0ull : (1ull << width) - 1;
      if (((uint64_t)got.i & mask) != (si & mask)) bad++;
    } else {
      double tol = cb->tol * mag + 1e-30;
      if (fabs(got.re - sre) > tol || fabs(got.im - sim) > tol) {
        if (bad < 3)
          fprintf(stderr, "  %s: elem %lld got %g%+gi want %g%+gi\n",
                  iron_dtype_name(cb->out), (long long)f, got.re, got.im, sre,
                  sim);
        bad++;
      }
    }
  }
  CHECK_EQ_INT(bad, 0);
  ht_tensor_free(in[0]);
  ht_tensor_free(in[1]);
  ht_tensor_free(out);
}

static int64_t rsize(void) {
  return ht_rand() % 8 == 0 ? 0 : ht_rand_range(1, 5);
}

static void test_random_layouts(void) {
  for (int iter = 0; iter < 400; ++iter) {
    const combo_t *cb = &kCombos[iter % (sizeof(kCombos) / sizeof(kCombos[0]))];
    int nb = (int)ht_rand_range(0, 2), nc = (int)ht_rand_range(0, 2);
    int nlf = (int)ht_rand_range(0, 2), nrf = (int)ht_rand_range(0, 2);
    int64_t bsz[2], csz[2], lf[2], rf[2];
    for (int i = 0; i < 2; ++i) {
      bsz[i] = rsize();
      csz[i] = rsize();
      lf[i] = rsize();
      rf[i] = rsize();
    }
    run_case(cb, nb, nc, nlf, nrf, bsz, csz, lf, rf, true, false);
  }
}

static void test_blocked_paths(void) {
  // Sizes around the blocking parameters (MR 6, NR 16/8, KC 256, MC 96,
  // NS 256) with every layout of the two operands; batched too.
  static const int64_t shapes[][4] = {
      // batch, m, k, n
      {1, 64, 64, 64},  {1, 97, 300, 50}, {2, 33, 17, 40},
      {1, 200, 20, 300}, {1, 100, 513, 1}, {3, 1, 70, 90},
      {1, 17, 260, 17},
  };
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); ++s) {
    for (int c = 0; c < 3; ++c) {
      static const combo_t *cbs[3] = {&kCombos[0], &kCombos[1], &kCombos[2]};
      int64_t bsz[1] = {shapes[s][0]}, csz[1] = {shapes[s][2]};
      int64_t lf[1] = {shapes[s][1]}, rf[1] = {shapes[s][3]};
      run_case(cbs[c], shapes[s][0] > 1, 1, 1, 1, bsz, csz, lf, rf, s % 2 == 1,
               false);
      run_case(cbs[c], shapes[s][0] > 1, 1, 1, 1, bsz, csz, lf, rf, true,
               false);
    }
  }
}

static void test_old_dot(void) {
  int64_t k[1] = {7}, m[1] = {5}, n[1] = {3};
  run_case(&kCombos[0], 0, 1, 1, 1, NULL, k, m, n, false, true);  // 2x2
  run_case(&kCombos[0], 0, 1, 0, 1, NULL, k, m, n, false, true);  // 1x2
  run_case(&kCombos[1], 0, 1, 1, 0, NULL, k, m, n, false, true);  // 2x1
  run_case(&kCombos[6], 0, 1, 0, 0, NULL, k, m, n, false, true);  // 1x1
}

static void test_refusals(void) {
  int64_t d[2] = {2, 2};
  ht_op_t b;
  ht_init(&b, IRON_OP_DOT_GENERAL);
  // An f8E8M0FNU result with an operand of another dtype (XLA:CPU converts
  // that operand to f8E8M0FNU first).
  ht_operand(&b, IRON_DTYPE_F8E4M3FN, 2, d);
  ht_operand(&b, IRON_DTYPE_F8E8M0FNU, 2, d);
  ht_result(&b, IRON_DTYPE_F8E8M0FNU, 2, d);
  int64_t one = 1, zero = 0;
  ht_attr_i64(&b, "lhs_contracting_dimensions", 1, &one);
  ht_attr_i64(&b, "rhs_contracting_dimensions", 1, &zero);
  void *params = NULL;
  iron_status_t st = iron_host_kernel_lookup(IRON_OP_DOT_GENERAL)
                         ->prepare(&b.op, NULL, &params);
  CHECK(iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED);
  iron_status_free(st);
  // f8E8M0FNU alone: through f32 by the bits (XLA:CPU, measured):
  // 2^20*2^20 + 2^20*2^21 = 3 * 2^40 -> 2^42 (code 169); 2^-127 (0x00)
  // reads as 0, and 0 is NaN (0xff).
  {
    int64_t l[2] = {2, 2}, r[2] = {2, 1}, o[2] = {2, 1};
    ht_init(&b, IRON_OP_DOT_GENERAL);
    ht_operand(&b, IRON_DTYPE_F8E8M0FNU, 2, l);
    ht_operand(&b, IRON_DTYPE_F8E8M0FNU, 2, r);
    ht_result(&b, IRON_DTYPE_F8E8M0FNU, 2, o);
    ht_attr_i64(&b, "lhs_contracting_dimensions", 1, &one);
    ht_attr_i64(&b, "rhs_contracting_dimensions", 1, &zero);
    iron_tensor_t *in[2] = {ht_tensor(IRON_DTYPE_F8E8M0FNU, 2, l),
                            ht_tensor(IRON_DTYPE_F8E8M0FNU, 2, r)};
    iron_tensor_t *out = ht_tensor(IRON_DTYPE_F8E8M0FNU, 2, o);
    static const uint8_t kL[4] = {147, 147, 0, 0}, kR[2] = {147, 148};
    memcpy(in[0]->data, kL, 4);
    memcpy(in[1]->data, kR, 2);
    CHECK_OK(ht_run(&b, g_pool, NULL, in, &out));
    CHECK_EQ_INT(((uint8_t *)out->data)[0], 169);
    CHECK_EQ_INT(((uint8_t *)out->data)[1], 0xff);
    ht_tensor_free(in[0]);
    ht_tensor_free(in[1]);
    ht_tensor_free(out);
  }
  // Mismatched contracting sizes are invalid.
  int64_t e[2] = {2, 3};
  ht_init(&b, IRON_OP_DOT_GENERAL);
  ht_operand(&b, IRON_DTYPE_F32, 2, d);
  ht_operand(&b, IRON_DTYPE_F32, 2, e);
  ht_result(&b, IRON_DTYPE_F32, 2, e);
  ht_attr_i64(&b, "lhs_contracting_dimensions", 1, &one);
  ht_attr_i64(&b, "rhs_contracting_dimensions", 1, &one);
  st = iron_host_kernel_lookup(IRON_OP_DOT_GENERAL)->prepare(&b.op, NULL,
                                                             &params);
  CHECK(iron_status_code(st) == IRON_STATUS_INVALID_ARGUMENT);
  iron_status_free(st);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bench(void) {
  const char *e = getenv("IRON_BENCH_DOT");
  if (!e || e[0] != '1') return;
  int64_t n = 512;
  int64_t d[2] = {n, n};
  for (int dt = 0; dt < 2; ++dt) {
    iron_dtype_t t = dt == 0 ? IRON_DTYPE_F32 : IRON_DTYPE_F64;
    for (int threads = 1; threads <= 2; ++threads) {
      iron_threadpool_t *pool = NULL;
      CHECK_OK(iron_threadpool_create(threads, &pool));
      ht_op_t b;
      ht_init(&b, IRON_OP_DOT_GENERAL);
      ht_operand(&b, t, 2, d);
      ht_operand(&b, t, 2, d);
      ht_result(&b, t, 2, d);
      int64_t one = 1, zero = 0;
      ht_attr_i64(&b, "lhs_contracting_dimensions", 1, &one);
      ht_attr_i64(&b, "rhs_contracting_dimensions", 1, &zero);
      iron_tensor_t *in[2] = {ht_tensor(t, 2, d), ht_tensor(t, 2, d)};
      fill_random(in[0]);
      fill_random(in[1]);
      iron_tensor_t *out = ht_tensor(t, 2, d);
      const iron_kernel_t *k = iron_host_kernel_lookup(b.op.kind);
      void *params = NULL;
      CHECK_OK(k->prepare(&b.op, NULL, &params));
      iron_kernel_ctx_t ctx = {0};
      ctx.pool = pool;
      CHECK_OK(k->run(&ctx, params, (const iron_tensor_t *const *)in, &out));
      int reps = 10;
      double t0 = now_s();
      for (int r = 0; r < reps; ++r)
        CHECK_OK(k->run(&ctx, params, (const iron_tensor_t *const *)in, &out));
      double dtm = (now_s() - t0) / reps;
      printf("dot %s 512^3, %d thread(s): %.2f ms, %.1f GFLOP/s\n",
             iron_dtype_name(t), threads, dtm * 1e3,
             2.0 * (double)(n * n * n) / dtm * 1e-9);
      free(params);
      ht_tensor_free(in[0]);
      ht_tensor_free(in[1]);
      ht_tensor_free(out);
      iron_threadpool_destroy(pool);
    }
  }
}

static void setup(void) { CHECK_OK(iron_threadpool_create(2, &g_pool)); }
static void teardown(void) { iron_threadpool_destroy(g_pool); }

static const iron_test_case_t kTests[] = {
    {"setup", setup},
    {"random_layouts", test_random_layouts},
    {"blocked_paths", test_blocked_paths},
    {"old_dot", test_old_dot},
    {"refusals", test_refusals},
    {"bench", bench},
    {"teardown", teardown},
};
IRON_TEST_MAIN(kTests)
