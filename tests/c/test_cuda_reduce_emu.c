// CUDA reduce kernels (cuda_gen_reduce.c) run on the CPU through the
// multi-thread emulation (cuda_emu.h: real blocks of 256 threads, shared
// memory, barriers, warp shuffles, grids of many blocks), GPU-free. Covers
// every shape the generator picks, in particular the split ones whose
// blocks merge through module scratch and an atomic counter: full reduces
// to a scalar, a few long rows, a middle axis, columns. Checks:
// - integer max/min/add and argmax (first index of the max; NaN wins at
//   its first index) bit for bit against a sequential reference;
// - f32 sums within a relative 1e-6 of the exact sum (the order differs
//   from the sequential one, as documented), f16 sums within its rounding;
// - two launches give the same bits (the counter resets itself);
// - IRON_CUDA_REDUCE_SPLIT=0 gives one block per output.
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "cuda_emu.h"
#include "device/cuda/gen/ops.h"
#include "region_builder.h"
#include "test.h"

typedef struct {
  const char *name;
  int32_t rank;
  int64_t dims[3];
  bool reduced[3];
} shape_t;

// Reduces over the flagged dims of a row-major array: out index = kept
// coordinates in order; calls fold(out, element index) in sequential
// (row-major) order.
static int64_t out_index(const shape_t *s, int64_t lin) {
  int64_t coord[3], o = 0;
  for (int32_t d = s->rank - 1; d >= 0; --d) {
    coord[d] = lin % s->dims[d];
    lin /= s->dims[d];
  }
  for (int32_t d = 0; d < s->rank; ++d)
    if (!s->reduced[d]) o = o * s->dims[d] + coord[d];
  return o;
}

static void counts(const shape_t *s, int64_t *nin, int64_t *nout) {
  *nin = 1;
  *nout = 1;
  for (int32_t d = 0; d < s->rank; ++d) {
    *nin *= s->dims[d];
    if (!s->reduced[d]) *nout *= s->dims[d];
  }
}

static bool build_run(const char *name, const shape_t *s, uint32_t num,
                      const iron_dtype_t *dts, rb_t *body, void **args,
                      unsigned *out_grid) {
  char *src = NULL;
  unsigned grid = 0, block = 0;
  iron_status_t st = iron_cuda_gen_reduce(name, s->rank, s->dims, s->reduced,
                                          num, dts, &(iron_region_t){.ir = &body->region}, &src,
                                          &grid, &block);
  CHECK_OK(st);
  free(body);
  if (st) return false;
  cuda_emu_lib_t lib;
  const char *srcs[1] = {src};
  bool built = cuda_emu_build_mt(srcs, 1, NULL, &lib);
  CHECK(built);
  bool ok = built;
  // Twice: the second launch must find the counters reset.
  for (int rep = 0; rep < 2 && ok; ++rep)
    ok = cuda_emu_launch(&lib, name, grid, block, args) == 0;
  CHECK(ok);
  if (built) cuda_emu_close(&lib);
  free(src);
  *out_grid = grid;
  return ok;
}

static const shape_t kShapes[] = {
    {"full", 1, {1 << 20}, {true}},
    {"rows", 2, {3, 300001}, {false, true}},
    {"middle", 3, {2, 70000, 3}, {false, true, false}},
    {"cols", 2, {40000, 5}, {true, false}},
    {"warp", 2, {64, 1000}, {false, true}},
    {"short_full", 1, {777}, {true}},
};

static void test_int_and_float(void) {
  CHECK(cuda_emu_have_cxx());
  if (!cuda_emu_have_cxx()) return;
  for (size_t k = 0; k < sizeof(kShapes) / sizeof(kShapes[0]); ++k) {
    const shape_t *s = &kShapes[k];
    int64_t nin, nout;
    counts(s, &nin, &nout);
    // s32 max, bit for bit.
    int32_t *xi = malloc(sizeof(int32_t) * (size_t)nin);
    int32_t *oi = malloc(sizeof(int32_t) * (size_t)nout);
    int32_t *ri = malloc(sizeof(int32_t) * (size_t)nout);
    int32_t init_i = INT32_MIN;
    for (int64_t i = 0; i < nin; ++i)
      xi[i] = (int32_t)((uint32_t)(i * 2654435761u) >> 3) - (1 << 27);
    for (int64_t o = 0; o < nout; ++o) ri[o] = init_i;
    for (int64_t i = 0; i < nin; ++i) {
      int64_t o = out_index(s, i);
      if (xi[i] > ri[o]) ri[o] = xi[i];
    }
    void *pi[3] = {xi, &init_i, oi};
    void *ai[3] = {&pi[0], &pi[1], &pi[2]};
    iron_dtype_t s32 = IRON_DTYPE_S32;
    unsigned grid = 0;
    char name[64];
    snprintf(name, sizeof(name), "max_%s", s->name);
    if (build_run(name, s, 1, &s32, rb_binary(IRON_OP_MAXIMUM, s32), ai,
                  &grid))
      CHECK(memcmp(oi, ri, sizeof(int32_t) * (size_t)nout) == 0);
    fprintf(stderr, "%s: %lld -> %lld in %u blocks\n", name, (long long)nin,
            (long long)nout, grid);
    // f32 add within 1e-6 of the exact sum.
    float *xf = malloc(sizeof(float) * (size_t)nin);
    float *of = malloc(sizeof(float) * (size_t)nout);
    double *rf = calloc((size_t)nout, sizeof(double));
    double *ra = calloc((size_t)nout, sizeof(double));
    float init_f = 0.0f;
    for (int64_t i = 0; i < nin; ++i)
      xf[i] = (float)((i * 7919) % 1000) * 0.001f - 0.25f;
    for (int64_t i = 0; i < nin; ++i) {
      rf[out_index(s, i)] += xf[i];
      ra[out_index(s, i)] += fabs(xf[i]);
    }
    void *pf[3] = {xf, &init_f, of};
    void *af[3] = {&pf[0], &pf[1], &pf[2]};
    iron_dtype_t f32 = IRON_DTYPE_F32;
    snprintf(name, sizeof(name), "sum_%s", s->name);
    if (build_run(name, s, 1, &f32, rb_binary(IRON_OP_ADD, f32), af, &grid)) {
      int bad = 0;
      for (int64_t o = 0; o < nout; ++o)
        if (fabs((double)of[o] - rf[o]) > 1e-6 * ra[o] + 1e-6) bad++;
      if (bad) fprintf(stderr, "%s: %d sums off\n", name, bad);
      CHECK_EQ_INT(bad, 0);
    }
    free(xi);
    free(oi);
    free(ri);
    free(xf);
    free(of);
    free(rf);
    free(ra);
  }
}

// jnp.argmax's body over split rows: the first index of the max, and the
// first NaN where there are NaNs.
static void test_argmax(void) {
  if (!cuda_emu_have_cxx()) return;
  const shape_t s = {"rows", 2, {2, 200000}, {false, true}};
  int64_t nin = 400000, nout = 2;
  float *v = malloc(sizeof(float) * (size_t)nin);
  int32_t *ix = malloc(sizeof(int32_t) * (size_t)nin);
  for (int64_t i = 0; i < nin; ++i) {
    v[i] = (float)((i * 31) % 977);
    ix[i] = (int32_t)(i % 200000);
  }
  // Row 0: the max 976 repeats, first at 31 * k = 976 mod 977 ...; row 1:
  // NaNs at 150001 and 170003 (the first wins).
  v[200000 + 150001] = NAN;
  v[200000 + 170003] = NAN;
  int32_t want0 = -1;
  float best = -INFINITY;
  for (int64_t i = 0; i < 200000; ++i)
    if (v[i] > best) {
      best = v[i];
      want0 = (int32_t)i;
    }
  float init_v = -INFINITY;
  int32_t init_i = 0;
  float ov[2];
  int32_t oi[2];
  void *p[6] = {v, ix, &init_v, &init_i, ov, oi};
  void *a[6] = {&p[0], &p[1], &p[2], &p[3], &p[4], &p[5]};
  iron_dtype_t dts[2] = {IRON_DTYPE_F32, IRON_DTYPE_S32};
  unsigned grid = 0;
  if (build_run("argmax_rows", &s, 2, dts,
                rb_argmax(IRON_DTYPE_F32, IRON_DTYPE_S32), a, &grid)) {
    CHECK(grid > 2);  // split
    CHECK_EQ_INT(oi[0], want0);
    CHECK(ov[0] == best);
    CHECK_EQ_INT(oi[1], 150001);
    CHECK(isnan(ov[1]));
  }
  (void)nout;
  free(v);
  free(ix);
}

// f16 sums of a full reduce: within the f16 rounding of the running sums.
static void test_f16_and_switch(void) {
  if (!cuda_emu_have_cxx()) return;
  const shape_t s = {"full", 1, {100000}, {true}};
  uint16_t *x = malloc(sizeof(uint16_t) * 100000);
  double exact = 0;
  for (int i = 0; i < 100000; ++i) {
    float f = (float)(i % 13) * 0.0625f - 0.375f;
    x[i] = iron_f32_to_f16(f);
    exact += iron_f16_to_f32(x[i]);
  }
  uint16_t init = iron_f32_to_f16(0.0f), out = 0;
  void *p[3] = {x, &init, &out};
  void *a[3] = {&p[0], &p[1], &p[2]};
  iron_dtype_t f16 = IRON_DTYPE_F16;
  unsigned grid = 0;
  if (build_run("sum_f16", &s, 1, &f16, rb_binary(IRON_OP_ADD, f16), a,
                &grid)) {
    CHECK(grid > 1);
    CHECK(fabs(iron_f16_to_f32(out) - exact) <= 0.01 * fabs(exact) + 8);
  }
  setenv("IRON_CUDA_REDUCE_SPLIT", "0", 1);
  if (build_run("sum_f16_nosplit", &s, 1, &f16, rb_binary(IRON_OP_ADD, f16),
                a, &grid))
    CHECK(grid == 1);
  unsetenv("IRON_CUDA_REDUCE_SPLIT");
  free(x);
}

static const iron_test_case_t kTests[] = {
    {"int_and_float", test_int_and_float},
    {"argmax", test_argmax},
    {"f16_and_switch", test_f16_and_switch},
};
IRON_TEST_MAIN(kTests)
