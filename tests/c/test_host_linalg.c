// Host linear algebra without Python: the native cholesky and
// triangular_solve kernels, and the custom-call machinery (declared layouts,
// typed-FFI attributes, LAPACK lookup) driven by a fake LAPACK routine.
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/cplx.h"
#include "device/host/host_kernel.h"
#include "device/host/lapack.h"
#include "host_test_ops.h"
#include "test.h"

static void ht_attr_bool(ht_op_t *b, const char *name, bool v) {
  uint32_t i = b->op.num_attrs++;
  b->attrs[i].kind = IRON_ATTR_BOOL;
  b->attrs[i].b = v;
  b->named[i].name = name;
  b->named[i].value = &b->attrs[i];
}

static void ht_attr_enum(ht_op_t *b, const char *name, iron_enum_kind_t kind,
                         int32_t v) {
  uint32_t i = b->op.num_attrs++;
  b->attrs[i].kind = IRON_ATTR_ENUM;
  b->attrs[i].enumv.kind = kind;
  b->attrs[i].enumv.value = v;
  b->named[i].name = name;
  b->named[i].value = &b->attrs[i];
}

static void ht_attr_string(ht_op_t *b, const char *name, const char *s) {
  uint32_t i = b->op.num_attrs++;
  b->attrs[i].kind = IRON_ATTR_STRING;
  b->attrs[i].str = s;
  b->attrs[i].str_len = strlen(s);
  b->named[i].name = name;
  b->named[i].value = &b->attrs[i];
}

// Prepares and runs op `b` on `in`, writing `out`; returns prepare's status
// (run must succeed when prepare did).
static iron_status_t prepare_run(ht_op_t *b, iron_tensor_t **in,
                                 iron_tensor_t **out) {
  const iron_kernel_t *k = iron_host_kernel_lookup(b->op.kind);
  CHECK(k != NULL);
  if (!k) return IRON_ERR(INTERNAL, "no kernel");
  void *params = NULL;
  iron_status_t st = k->prepare(&b->op, NULL, &params);
  if (st) return st;
  CHECK_OK(k->run(NULL, params, (const iron_tensor_t *const *)in, out));
  if (k->destroy)
    k->destroy(params);
  else
    free(params);
  return IRON_OK;
}

static void test_cholesky(void) {
  const double a[9] = {4, 2, 1, 2, 5, 3, 1, 3, 6};
  const double r = sqrt(6 - 0.25 - 1.5625);
  const double want_l[9] = {2, 0, 0, 1, 2, 0, 0.5, 1.25, r};
  int64_t dims[3] = {2, 3, 3};
  for (int lower = 0; lower < 2; ++lower) {
    ht_op_t b;
    ht_init(&b, IRON_OP_CHOLESKY);
    ht_operand(&b, IRON_DTYPE_F64, 3, dims);
    ht_result(&b, IRON_DTYPE_F64, 3, dims);
    ht_attr_bool(&b, "lower", lower);
    iron_tensor_t *in = ht_tensor(IRON_DTYPE_F64, 3, dims);
    iron_tensor_t *out = ht_tensor(IRON_DTYPE_F64, 3, dims);
    double *x = in->data;
    memcpy(x, a, sizeof(a));
    // Second matrix: not positive definite (and garbage in the triangle
    // the kernel must not read).
    const double bad[9] = {1, 2, 0, 2, 1, 0, 0, 0, 1};
    memcpy(x + 9, bad, sizeof(bad));
    // Garbage in the unread triangle of the first matrix.
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        if (lower ? j > i : j < i) x[i * 3 + j] = 99;
    CHECK_OK(prepare_run(&b, &in, &out));
    const double *o = out->data;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        double w = lower ? want_l[i * 3 + j] : want_l[j * 3 + i];
        CHECK(fabs(o[i * 3 + j] - w) < 1e-12);
      }
    for (int i = 9; i < 18; ++i) CHECK(isnan(o[i]));
    ht_tensor_free(in);
    ht_tensor_free(out);
  }
}

// Every variant of triangular_solve in c128: checks op(A) X = B (or
// X op(A) = B) with A's unread triangle filled with garbage.
static void test_triangular_solve(void) {
  const int n = 4, k = 3;
  for (int v = 0; v < 24; ++v) {
    bool left = v & 1, lower = v & 2, unit = v & 4;
    int tr = 1 + v / 8;  // 1 none, 2 transpose, 3 adjoint
    int64_t adims[2] = {n, n};
    int64_t bdims[2] = {left ? n : k, left ? k : n};
    ht_op_t b;
    ht_init(&b, IRON_OP_TRIANGULAR_SOLVE);
    ht_operand(&b, IRON_DTYPE_C128, 2, adims);
    ht_operand(&b, IRON_DTYPE_C128, 2, bdims);
    ht_result(&b, IRON_DTYPE_C128, 2, bdims);
    ht_attr_bool(&b, "left_side", left);
    ht_attr_bool(&b, "lower", lower);
    ht_attr_bool(&b, "unit_diagonal", unit);
    ht_attr_enum(&b, "transpose_a", IRON_ENUM_TRANSPOSE, tr);
    iron_tensor_t *in[2] = {ht_tensor(IRON_DTYPE_C128, 2, adims),
                            ht_tensor(IRON_DTYPE_C128, 2, bdims)};
    iron_tensor_t *out = ht_tensor(IRON_DTYPE_C128, 2, bdims);
    double complex *a = in[0]->data, *rhs = in[1]->data;
    double complex m[16];  // the effective op(A)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        bool read = lower ? j <= i : j >= i;
        a[i * n + j] = read ? CMPLX(0.3 * (i - j) + (i == j ? 3 : 0),
                                    0.1 * (i + 2 * j))
                            : CMPLX(1e3, -1e3);
      }
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        int si = tr == 1 ? i : j, sj = tr == 1 ? j : i;
        bool read = lower ? sj <= si : sj >= si;
        double complex e = read ? a[si * n + sj] : 0;
        if (tr == 3) e = conj(e);
        if (i == j && unit) e = 1;
        m[i * n + j] = e;
      }
    for (int64_t i = 0; i < in[1]->count; ++i)
      rhs[i] = CMPLX((double)(i % 5) - 2, 0.5 * (double)(i % 3));
    CHECK_OK(prepare_run(&b, in, &out));
    const double complex *x = out->data;
    double worst = 0;
    int rows = (int)bdims[0], cols = (int)bdims[1];
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        double complex s = 0;
        for (int q = 0; q < n; ++q)
          s += left ? m[i * n + q] * x[q * cols + j]
                    : x[i * cols + q] * m[q * n + j];
        double e = cabs(s - rhs[i * cols + j]);
        if (e > worst) worst = e;
      }
    if (worst > 1e-10)
      fprintf(stderr, "variant left=%d lower=%d unit=%d tr=%d: residual %g\n",
              left, lower, unit, tr, worst);
    CHECK(worst <= 1e-10);
    ht_tensor_free(in[0]);
    ht_tensor_free(in[1]);
    ht_tensor_free(out);
  }
}

// A fake dpotrf: writes, at each physical position p of the column-major
// matrix, the value 100 + p, and returns info = n + 40 (so the test sees
// where LAPACK's view of the matrix lands in the row-major result).
static char g_fake_uplo;
static void fake_dpotrf(const char *uplo, const int *n, double *a,
                        const int *lda, int *info) {
  g_fake_uplo = *uplo;
  for (int j = 0; j < *n; ++j)
    for (int i = 0; i < *n; ++i) a[i + j * *lda] += 100 + i + j * *lda;
  *info = *n + 40;
}

static void build_potrf(ht_op_t *b, iron_ir_attr_t *extra, const char *name,
                        const int64_t *dims) {
  ht_init(b, IRON_OP_CUSTOM_CALL);
  ht_operand(b, IRON_DTYPE_F64, 3, dims);
  ht_result(b, IRON_DTYPE_F64, 3, dims);
  ht_result(b, IRON_DTYPE_S32, 1, dims);
  ht_attr_string(b, "call_target_name", name);
  // operand_layouts = [[1, 2, 0]], result_layouts = [[1, 2, 0], [0]]
  static const int64_t cm[3] = {1, 2, 0}, one[1] = {0};
  ht_attr_i64(b, "l0", 3, cm);
  ht_attr_i64(b, "l1", 3, cm);
  ht_attr_i64(b, "l2", 1, one);
  b->op.num_attrs -= 3;  // keep them as items of the arrays below
  const iron_ir_attr_t **ops = malloc(sizeof(*ops)),
                       **res = malloc(2 * sizeof(*res));
  ops[0] = &b->attrs[b->op.num_attrs];
  res[0] = &b->attrs[b->op.num_attrs + 1];
  res[1] = &b->attrs[b->op.num_attrs + 2];
  extra[0].kind = IRON_ATTR_ARRAY;
  extra[0].array.count = 1;
  extra[0].array.items = ops;
  extra[1].kind = IRON_ATTR_ARRAY;
  extra[1].array.count = 2;
  extra[1].array.items = res;
  // mhlo.backend_config = {uplo = 76 : ui8}
  extra[2].kind = IRON_ATTR_INT;
  extra[2].i = 'L';
  extra[2].int_dtype = IRON_DTYPE_U8;
  static iron_ir_named_attr_t entry;
  entry.name = "uplo";
  entry.value = &extra[2];
  extra[3].kind = IRON_ATTR_DICT;
  extra[3].dict.count = 1;
  extra[3].dict.entries = &entry;
  // The op's attribute list: call_target_name, then these three (the
  // layout items above stay in attrs[1..3], referenced by the arrays).
  b->named[1].name = "operand_layouts";
  b->named[1].value = &extra[0];
  b->named[2].name = "result_layouts";
  b->named[2].value = &extra[1];
  b->named[3].name = "mhlo.backend_config";
  b->named[3].value = &extra[3];
  b->op.num_attrs = 4;
}

static void test_lapack_custom_call_layouts(void) {
  int64_t sq[3] = {2, 3, 3};
  ht_op_t b;
  iron_ir_attr_t extra[4];
  build_potrf(&b, extra, "lapack_dpotrf_ffi", sq);
  // Not registered yet: a compile-time error naming the routine.
  CHECK(iron_host_lapack_lookup("dpotrf") == NULL);
  iron_tensor_t *in = ht_tensor(IRON_DTYPE_F64, 3, sq);
  iron_tensor_t *out[2] = {ht_tensor(IRON_DTYPE_F64, 3, sq),
                           ht_tensor(IRON_DTYPE_S32, 1, sq)};
  iron_status_t st = prepare_run(&b, &in, out);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(st && strstr(iron_status_message(st), "dpotrf") != NULL);
  iron_status_free(st);

  st = iron_host_lapack_register("not_a_routine", (void *)fake_dpotrf);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INVALID_ARGUMENT);
  iron_status_free(st);
  CHECK_OK(iron_host_lapack_register("dpotrf", (void *)fake_dpotrf));
  double *x = in->data;
  for (int64_t i = 0; i < in->count; ++i) x[i] = 0.5 * (double)i;
  CHECK_OK(prepare_run(&b, &in, out));
  CHECK_EQ_INT(g_fake_uplo, 'L');
  const double *o = out[0]->data;
  for (int m = 0; m < 2; ++m)
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) {
        int64_t li = m * 9 + r * 3 + c;  // row-major logical index
        double want = 0.5 * (double)li + 100 + r + c * 3;  // column-major
        CHECK(o[li] == want);
      }
  CHECK_EQ_INT(((int32_t *)out[1]->data)[0], 43);
  CHECK_EQ_INT(((int32_t *)out[1]->data)[1], 43);
  free((void *)extra[0].array.items);
  free((void *)extra[1].array.items);
  ht_tensor_free(in);
  ht_tensor_free(out[0]);
  ht_tensor_free(out[1]);
}

// jaxlib's tridiagonal_solve_perturbed_ffi: f64 systems [n = 3, k = 2]
// (T = tridiag(1, 0, 1) is singular: the perturbed pivot gives large finite
// values) and [n = 4, k = 2] with row exchanges. Expected values are
// XLA:CPU's (jax 0.10.2). b and x are declared column-major, the diagonals
// row-major; a row-major b is refused at compile time.
static void build_tridiag(ht_op_t *b, iron_ir_attr_t *arrays, int64_t n,
                          bool col_major) {
  int64_t vd[1] = {n}, md[2] = {n, 2};
  ht_init(b, IRON_OP_CUSTOM_CALL);
  for (int i = 0; i < 3; ++i) ht_operand(b, IRON_DTYPE_F64, 1, vd);
  ht_operand(b, IRON_DTYPE_F64, 2, md);
  ht_result(b, IRON_DTYPE_F64, 2, md);
  ht_attr_string(b, "call_target_name", "tridiagonal_solve_perturbed_ffi");
  static const int64_t v[1] = {0}, cm[2] = {0, 1}, rm[2] = {1, 0};
  for (int i = 0; i < 3; ++i) ht_attr_i64(b, "l", 1, v);
  ht_attr_i64(b, "l", 2, col_major ? cm : rm);
  ht_attr_i64(b, "l", 2, col_major ? cm : rm);
  static const iron_ir_attr_t *ops[4], *res[1];
  for (int i = 0; i < 4; ++i) ops[i] = &b->attrs[1 + i];
  res[0] = &b->attrs[5];
  arrays[0].kind = IRON_ATTR_ARRAY;
  arrays[0].array.count = 4;
  arrays[0].array.items = ops;
  arrays[1].kind = IRON_ATTR_ARRAY;
  arrays[1].array.count = 1;
  arrays[1].array.items = res;
  b->named[1].name = "operand_layouts";
  b->named[1].value = &arrays[0];
  b->named[2].name = "result_layouts";
  b->named[2].value = &arrays[1];
  b->op.num_attrs = 3;
}

static void test_tridiagonal_solve_perturbed(void) {
  static const struct {
    int64_t n;
    double dl[4], d[4], du[4], b[8], x[8];  // b, x row-major [n, 2]
  } kCases[] = {
      {3, {0, 1, 1}, {0, 0, 0}, {1, 1, 0}, {1, 2, 0, 1, 0, -1},
       {4.5035996273704960e+15, 1.3510798882111488e+16, 1, 2,
        -4.5035996273704960e+15, -1.3510798882111488e+16}},
      {4, {0, 3, 1, -2}, {1, 0.5, 4, 1}, {2, 1, 1, 0},
       {1, 0, 2, 1, 3, 0, 4, 1},
       {0.7058823529411764, 0.4117647058823529, 0.1470588235294118,
        -0.2058823529411765, -0.19117647058823528, -0.1323529411764706,
        3.6176470588235294, 0.7352941176470589}},
  };
  for (size_t c = 0; c < sizeof(kCases) / sizeof(kCases[0]); ++c) {
    const int64_t n = kCases[c].n, vd[1] = {n}, md[2] = {n, 2};
    ht_op_t b;
    iron_ir_attr_t arrays[2];
    iron_tensor_t *in[4] = {ht_tensor(IRON_DTYPE_F64, 1, vd),
                            ht_tensor(IRON_DTYPE_F64, 1, vd),
                            ht_tensor(IRON_DTYPE_F64, 1, vd),
                            ht_tensor(IRON_DTYPE_F64, 2, md)};
    iron_tensor_t *out = ht_tensor(IRON_DTYPE_F64, 2, md);
    memcpy(in[0]->data, kCases[c].dl, (size_t)n * 8);
    memcpy(in[1]->data, kCases[c].d, (size_t)n * 8);
    memcpy(in[2]->data, kCases[c].du, (size_t)n * 8);
    memcpy(in[3]->data, kCases[c].b, (size_t)n * 16);
    build_tridiag(&b, arrays, n, false);
    iron_status_t st = prepare_run(&b, in, &out);
    CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
    CHECK(st && strstr(iron_status_message(st), "layout") != NULL);
    iron_status_free(st);
    build_tridiag(&b, arrays, n, true);
    CHECK_OK(prepare_run(&b, in, &out));
    const double *x = out->data;
    for (int64_t i = 0; i < 2 * n; ++i) {
      double want = kCases[c].x[i];
      CHECK(fabs(x[i] - want) <= 1e-13 * fabs(want));
    }
    for (int i = 0; i < 4; ++i) ht_tensor_free(in[i]);
    ht_tensor_free(out);
  }
}

static void test_unknown_target_and_dce_sink(void) {
  int64_t d[1] = {4};
  ht_op_t b;
  ht_init(&b, IRON_OP_CUSTOM_CALL);
  ht_operand(&b, IRON_DTYPE_F32, 1, d);
  ht_result(&b, IRON_DTYPE_F32, 1, d);
  ht_attr_string(&b, "call_target_name", "my_unknown_target");
  void *params = NULL;
  const iron_kernel_t *k = iron_host_kernel_lookup(IRON_OP_CUSTOM_CALL);
  iron_status_t st = k->prepare(&b.op, NULL, &params);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(st && strstr(iron_status_message(st), "my_unknown_target") != NULL);
  iron_status_free(st);
  ht_init(&b, IRON_OP_CUSTOM_CALL);
  ht_operand(&b, IRON_DTYPE_F32, 1, d);
  ht_attr_string(&b, "call_target_name", "dce_sink");
  iron_tensor_t *in = ht_tensor(IRON_DTYPE_F32, 1, d);
  CHECK_OK(prepare_run(&b, &in, NULL));
  ht_tensor_free(in);
}

static const iron_test_case_t kTests[] = {
    {"cholesky", test_cholesky},
    {"triangular_solve", test_triangular_solve},
    {"lapack_custom_call_layouts", test_lapack_custom_call_layouts},
    {"tridiagonal_solve_perturbed", test_tridiagonal_solve_perturbed},
    {"unknown_target_and_dce_sink", test_unknown_target_and_dce_sink},
};
IRON_TEST_MAIN(kTests)
