// Host convolution against a direct reference written here from the
// StableHLO spec, over random geometries: 0-3 spatial dims, every dimension
// in a random place of each operand, strides, padding (negative too), lhs
// and rhs dilation, window reversal (jax never emits it; checked against
// XLA:CPU by hand too), feature and batch groups. Inputs are small integers
// so every f32 sum is exact and results compare bit for bit. Each case runs
// through the GEMM path and the direct loops (IRON_HOST_CONV_FAST=0); the
// integer case checks wrap-around. Bad attributes are refused.
#include "base/threadpool.h"
#include "conv_test_op.h"
#include "host_test_ops.h"
#include "test.h"

static iron_threadpool_t *g_pool;

typedef struct geom {
  int nsp;
  int64_t n, ci, co, fgc, bgc;
  int64_t in[3], k[3], out[3];
  int64_t str[3], pad[6], ld[3], rd[3], rev[3];
  // positions: [batch/in-feature, feature/out-feature, spatial...]
  int64_t lpos[5], kpos[5], opos[5];
} geom_t;

static void shuffle(int64_t *p, int n) {
  for (int i = 0; i < n; ++i)
    p[i] = i;
  for (int i = n - 1; i > 0; --i) {
    int j = (int)ht_rand_range(0, i);
    int64_t t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
}

// Row-major offset in an operand whose logical dims (batch-like, feature-
// like, spatial) sit at `pos` with sizes `sz` (logical order).
static int64_t offset(const int64_t *pos, const int64_t *sz, int rank,
                      const int64_t *idx) {
  int64_t dims[5], at[5];
  for (int l = 0; l < rank; ++l) {
    dims[pos[l]] = sz[l];
    at[pos[l]] = idx[l];
  }
  int64_t off = 0;
  for (int d = 0; d < rank; ++d)
    off = off * dims[d] + at[d];
  return off;
}

// Reference: one output element (ob, of, o[]) in int64 (wrapping).
static int64_t ref_elem(const geom_t *g, const int64_t *x, const int64_t *w,
                        int64_t ob, int64_t of, const int64_t *o) {
  int rank = g->nsp + 2;
  int64_t groups = g->fgc * g->bgc, cog = g->co / groups, grp = of / cog;
  int64_t cig = g->ci / g->fgc, nout = g->n / g->bgc;
  int64_t lsz[5] = {g->n, g->ci}, ksz[5] = {cig, g->co};
  for (int d = 0; d < g->nsp; ++d) {
    lsz[2 + d] = g->in[d];
    ksz[2 + d] = g->k[d];
  }
  int64_t kcount = 1;
  for (int d = 0; d < g->nsp; ++d)
    kcount *= g->k[d];
  uint64_t acc = 0;
  for (int64_t kl = 0; kl < kcount; ++kl) {
    int64_t kk[3], ii[3], rem = kl;
    bool valid = true;
    for (int d = g->nsp - 1; d >= 0; --d) {
      kk[d] = rem % g->k[d];
      rem /= g->k[d];
    }
    for (int d = 0; d < g->nsp && valid; ++d) {
      int64_t kw = g->rev[d] ? g->k[d] - 1 - kk[d] : kk[d];
      int64_t p = o[d] * g->str[d] + kw * g->rd[d] - g->pad[2 * d];
      if (p < 0 || p % g->ld[d] != 0 || p / g->ld[d] >= g->in[d])
        valid = false;
      else
        ii[d] = p / g->ld[d];
    }
    if (!valid)
      continue;
    for (int64_t c = 0; c < cig; ++c) {
      int64_t li[5], ki[5];
      li[0] = g->bgc > 1 ? grp * nout + ob : ob;
      li[1] = g->fgc > 1 ? grp * cig + c : c;
      ki[0] = c;
      ki[1] = of;
      for (int d = 0; d < g->nsp; ++d) {
        li[2 + d] = ii[d];
        ki[2 + d] = kk[d];
      }
      acc += (uint64_t)x[offset(g->lpos, lsz, rank, li)] *
             (uint64_t)w[offset(g->kpos, ksz, rank, ki)];
    }
  }
  return (int64_t)acc;
}

static void build(conv_op_t *c, const geom_t *g, iron_dtype_t in_dt,
                  iron_dtype_t out_dt) {
  memset(c, 0, sizeof(*c));
  ht_init(&c->b, IRON_OP_CONVOLUTION);
  c->b.op.attrs = c->named;
  int rank = g->nsp + 2;
  int64_t ld[5], kd[5], od[5];
  int64_t lsz[5] = {g->n, g->ci}, ksz[5] = {g->ci / g->fgc, g->co},
          osz[5] = {g->n / g->bgc, g->co};
  for (int d = 0; d < g->nsp; ++d) {
    lsz[2 + d] = g->in[d];
    ksz[2 + d] = g->k[d];
    osz[2 + d] = g->out[d];
  }
  for (int l = 0; l < rank; ++l) {
    ld[g->lpos[l]] = lsz[l];
    kd[g->kpos[l]] = ksz[l];
    od[g->opos[l]] = osz[l];
  }
  ht_operand(&c->b, in_dt, rank, ld);
  ht_operand(&c->b, in_dt, rank, kd);
  ht_result(&c->b, out_dt, rank, od);
  attr1(c, "input_batch_dimension", g->lpos[0]);
  attr1(c, "input_feature_dimension", g->lpos[1]);
  attr(c, "input_spatial_dimensions", g->nsp, g->lpos + 2);
  attr1(c, "kernel_input_feature_dimension", g->kpos[0]);
  attr1(c, "kernel_output_feature_dimension", g->kpos[1]);
  attr(c, "kernel_spatial_dimensions", g->nsp, g->kpos + 2);
  attr1(c, "output_batch_dimension", g->opos[0]);
  attr1(c, "output_feature_dimension", g->opos[1]);
  attr(c, "output_spatial_dimensions", g->nsp, g->opos + 2);
  if (g->nsp > 0) {
    attr(c, "window_strides", g->nsp, g->str);
    attr(c, "padding", 2 * g->nsp, g->pad);
    attr(c, "lhs_dilation", g->nsp, g->ld);
    attr(c, "rhs_dilation", g->nsp, g->rd);
    attr(c, "window_reversal", g->nsp, g->rev);
  }
  attr1(c, "feature_group_count", g->fgc);
  attr1(c, "batch_group_count", g->bgc);
}

static void random_geom(geom_t *g) {
  memset(g, 0, sizeof(*g));
  g->nsp = (int)ht_rand_range(0, 3);
  int64_t groups = ht_rand_range(1, 3);
  bool batch = ht_rand_range(0, 2) == 0;
  g->fgc = batch ? 1 : groups;
  g->bgc = batch ? groups : 1;
  g->n = ht_rand_range(1, 3) * g->bgc;
  g->ci = ht_rand_range(1, 4) * g->fgc;
  // Wide groups take the GEMM path, narrow ones the direct loops.
  g->co = ht_rand_range(1, 6) * groups;
  for (int d = 0; d < g->nsp; ++d) {
    for (;;) {
      g->in[d] = ht_rand_range(1, 7);
      g->k[d] = ht_rand_range(1, 4);
      g->str[d] = ht_rand_range(1, 3);
      g->ld[d] = ht_rand_range(1, 3);
      g->rd[d] = ht_rand_range(1, 3);
      g->pad[2 * d] = ht_rand_range(-2, 3);
      g->pad[2 * d + 1] = ht_rand_range(-2, 3);
      g->rev[d] = ht_rand_range(0, 1);
      int64_t din = (g->in[d] - 1) * g->ld[d] + 1;
      int64_t dk = (g->k[d] - 1) * g->rd[d] + 1;
      int64_t span = din + g->pad[2 * d] + g->pad[2 * d + 1] - dk;
      if (span >= 0) {
        g->out[d] = span / g->str[d] + 1;
        break;
      }
    }
  }
  shuffle(g->lpos, g->nsp + 2);
  shuffle(g->kpos, g->nsp + 2);
  shuffle(g->opos, g->nsp + 2);
}

static int64_t count_of(const iron_ir_type_t *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; ++i)
    n *= t->dims[i];
  return n;
}

// Runs one geometry for in/out dtypes with values in [lo, hi]; checks every
// element against the reference. Returns the number of mismatches.
static int run_case(const geom_t *g, iron_dtype_t in_dt, iron_dtype_t out_dt,
                    int64_t lo, int64_t hi) {
  conv_op_t c;
  build(&c, g, in_dt, out_dt);
  iron_tensor_t *x = ht_tensor_like(&c.b.operand_types[0]);
  iron_tensor_t *w = ht_tensor_like(&c.b.operand_types[1]);
  iron_tensor_t *out = ht_tensor_like(&c.b.result_types[0]);
  int64_t *xi = malloc(sizeof(int64_t) * (size_t)(x->count + 1));
  int64_t *wi = malloc(sizeof(int64_t) * (size_t)(w->count + 1));
  iron_tensor_t *ts[2] = {x, w};
  int64_t *vs[2] = {xi, wi};
  for (int t = 0; t < 2; ++t)
    for (int64_t i = 0; i < ts[t]->count; ++i) {
      int64_t v = ht_rand_range(lo, hi);
      vs[t][i] = v;
      if (in_dt == IRON_DTYPE_F32) {
        ((float *)ts[t]->data)[i] = (float)v;
      } else {
        ((int8_t *)ts[t]->data)[i] = (int8_t)v;
      }
    }
  iron_tensor_t *ins[2] = {x, w};
  CHECK_OK(ht_run(&c.b, g_pool, NULL, ins, &out));
  int bad = 0;
  int rank = g->nsp + 2;
  int64_t n = count_of(&c.b.result_types[0]);
  for (int64_t e = 0; e < n; ++e) {
    // Logical index of flat output e.
    int64_t at[5], rem = e, li[5];
    for (int d = rank - 1; d >= 0; --d) {
      at[d] = rem % c.b.result_types[0].dims[d];
      rem /= c.b.result_types[0].dims[d];
    }
    for (int l = 0; l < rank; ++l)
      li[l] = at[g->opos[l]];
    int64_t want = ref_elem(g, xi, wi, li[0], li[1], li + 2);
    int64_t got;
    if (out_dt == IRON_DTYPE_F32) {
      got = (int64_t)((float *)out->data)[e];
    } else if (out_dt == IRON_DTYPE_S32) {
      got = ((int32_t *)out->data)[e];
      want = (int32_t)(uint32_t)(uint64_t)want;
    } else {
      got = ((int8_t *)out->data)[e];
      want = (int8_t)(uint8_t)(uint64_t)want;
    }
    if (got != want)
      ++bad;
  }
  free(xi);
  free(wi);
  ht_tensor_free(x);
  ht_tensor_free(w);
  ht_tensor_free(out);
  return bad;
}

static void test_random_geometries(void) {
  for (int fast = 1; fast >= 0; --fast) {
    setenv("IRON_HOST_CONV_FAST", fast ? "1" : "0", 1);
    int bad_cases = 0;
    for (int it = 0; it < 300; ++it) {
      geom_t g;
      random_geom(&g);
      int bad = run_case(&g, IRON_DTYPE_F32, IRON_DTYPE_F32, -4, 4);
      if (bad && bad_cases++ < 5)
        fprintf(stderr, "case %d (fast=%d nsp=%d fgc=%lld bgc=%lld): %d bad\n",
                it, fast, g.nsp, (long long)g.fgc, (long long)g.bgc, bad);
      CHECK(bad == 0);
    }
  }
  unsetenv("IRON_HOST_CONV_FAST");
}

// Tiny im2col chunks: many row chunks and kernel-position chunks whose
// partial products are summed.
static void test_small_chunks(void) {
  setenv("IRON_HOST_CONV_PATCH_BYTES", "200", 1);
  for (int it = 0; it < 150; ++it) {
    geom_t g;
    random_geom(&g);
    CHECK_EQ_INT(run_case(&g, IRON_DTYPE_F32, IRON_DTYPE_F32, -4, 4), 0);
    CHECK_EQ_INT(run_case(&g, IRON_DTYPE_S8, IRON_DTYPE_S32, -128, 127), 0);
  }
  unsetenv("IRON_HOST_CONV_PATCH_BYTES");
}

static void test_integer_wraparound(void) {
  for (int fast = 1; fast >= 0; --fast) {
    setenv("IRON_HOST_CONV_FAST", fast ? "1" : "0", 1);
    for (int it = 0; it < 60; ++it) {
      geom_t g;
      random_geom(&g);
      CHECK_EQ_INT(run_case(&g, IRON_DTYPE_S8, IRON_DTYPE_S8, -128, 127), 0);
      CHECK_EQ_INT(run_case(&g, IRON_DTYPE_S8, IRON_DTYPE_S32, -128, 127), 0);
    }
  }
  unsetenv("IRON_HOST_CONV_FAST");
}

static void test_refusals(void) {
  geom_t g;
  memset(&g, 0, sizeof(g));
  g.nsp = 1;
  g.n = 2;
  g.ci = 4;
  g.co = 4;
  g.fgc = 2;
  g.bgc = 1;
  g.in[0] = 5;
  g.k[0] = 3;
  g.out[0] = 3;
  g.str[0] = g.ld[0] = g.rd[0] = 1;
  for (int l = 0; l < 3; ++l)
    g.lpos[l] = g.kpos[l] = g.opos[l] = l;
  conv_op_t c;
  iron_tensor_t *ins[2] = {NULL, NULL};
  iron_tensor_t *out = NULL;
  // Wrong result size.
  g.out[0] = 4;
  build(&c, &g, IRON_DTYPE_F32, IRON_DTYPE_F32);
  iron_status_t s = ht_run(&c.b, g_pool, NULL, ins, &out);
  CHECK(s && iron_status_code(s) == IRON_STATUS_INVALID_ARGUMENT);
  iron_status_free(s);
  // Both group counts > 1.
  g.out[0] = 3;
  g.bgc = 2;
  build(&c, &g, IRON_DTYPE_F32, IRON_DTYPE_F32);
  s = ht_run(&c.b, g_pool, NULL, ins, &out);
  CHECK(s && iron_status_code(s) == IRON_STATUS_UNIMPLEMENTED);
  iron_status_free(s);
  // A dimension used twice.
  g.bgc = 1;
  g.lpos[1] = 0;
  build(&c, &g, IRON_DTYPE_F32, IRON_DTYPE_F32);
  s = ht_run(&c.b, g_pool, NULL, ins, &out);
  CHECK(s && iron_status_code(s) == IRON_STATUS_INVALID_ARGUMENT);
  iron_status_free(s);
  // An f8E8M0FNU result (f8E5M2 & co. are computed in f32 and rounded
  // through f16, as XLA:CPU; E8M0 is not).
  g.lpos[1] = 1;
  build(&c, &g, IRON_DTYPE_F32, IRON_DTYPE_F8E8M0FNU);
  s = ht_run(&c.b, g_pool, NULL, ins, &out);
  CHECK(s && iron_status_code(s) == IRON_STATUS_UNIMPLEMENTED);
  iron_status_free(s);
}

static void setup(void) { CHECK_OK(iron_threadpool_create(2, &g_pool)); }
static void teardown(void) { iron_threadpool_destroy(g_pool); }

static const iron_test_case_t kTests[] = {
    {"setup", setup},
    {"random_geometries", test_random_geometries},
    {"integer_wraparound", test_integer_wraparound},
    {"small_chunks", test_small_chunks},
    {"refusals", test_refusals},
    {"teardown", teardown},
};

IRON_TEST_MAIN(kTests)
