// The validation the devices share (src/device/plans/conv_plan.h, fft_plan.h,
// collective_plan.h, window_plan.h): each malformed stablehlo.convolution /
// stablehlo.fft / collective / stablehlo.reduce_window /
// stablehlo.select_and_scatter gets the expected status code and message,
// and the host kernel's prepare and the CUDA kernel or plan (GPU-free)
// return exactly the same status. The window plan's run-time geometry is
// checked against a brute-force walk of the window. The collectives also
// run: on the host, and on the CUDA kernel with a fake driver whose copies
// and memsets act on host memory.
#include <stdio.h>
#include <string.h>

#include "bb_region.h"
#include "conv_test_op.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/gen/conv.h"
#include "device/cuda/cuda_window.h"
#include "device/plans/collective_plan.h"
#include "device/plans/conv_plan.h"
#include "device/plans/fft_plan.h"
#include "device/plans/window_plan.h"
#include "host_test_ops.h"
#include "test.h"

// Rewrites attribute `name` (a list of n values, or one integer when n < 0).
static void set(conv_op_t *c, const char *name, int n, const int64_t *v) {
  uint32_t i = 0;
  while (i < c->b.op.num_attrs && strcmp(c->named[i].name, name) != 0) ++i;
  CHECK(i < c->b.op.num_attrs);
  if (i == c->b.op.num_attrs) return;
  if (n < 0) {
    c->attrs[i].i = v[0];
    return;
  }
  for (int k = 0; k < n; ++k) c->data[i][k] = v[k];
  c->types[i].dims[0] = n;
  c->attrs[i].dense.size = (size_t)n * 8;
}

static void drop(conv_op_t *c, const char *name) {
  for (uint32_t i = 0; i < c->b.op.num_attrs; ++i)
    if (strcmp(c->named[i].name, name) == 0) c->named[i].name = "unused";
}

// A valid 1-D convolution: lhs [N=2, C=4, W=5] (b, f, 0), rhs [I=4, O=4,
// K=3] (i, o, 0), result [2, 4, 3] (b, f, 0).
static void conv_build(conv_op_t *c, iron_dtype_t dt, iron_dtype_t out_dt) {
  memset(c, 0, sizeof(*c));
  ht_init(&c->b, IRON_OP_CONVOLUTION);
  c->b.op.attrs = c->named;
  int64_t ld[3] = {2, 4, 5}, kd[3] = {4, 4, 3}, od[3] = {2, 4, 3};
  ht_operand(&c->b, dt, 3, ld);
  ht_operand(&c->b, dt, 3, kd);
  ht_result(&c->b, out_dt, 3, od);
  const int64_t zero = 0, one = 1, two = 2;
  attr1(c, "input_batch_dimension", 0);
  attr1(c, "input_feature_dimension", 1);
  attr(c, "input_spatial_dimensions", 1, &two);
  attr1(c, "kernel_input_feature_dimension", 0);
  attr1(c, "kernel_output_feature_dimension", 1);
  attr(c, "kernel_spatial_dimensions", 1, &two);
  attr1(c, "output_batch_dimension", 0);
  attr1(c, "output_feature_dimension", 1);
  attr(c, "output_spatial_dimensions", 1, &two);
  attr(c, "window_strides", 1, &one);
  int64_t pad[2] = {0, 0};
  attr(c, "padding", 2, pad);
  attr(c, "lhs_dilation", 1, &one);
  attr(c, "rhs_dilation", 1, &one);
  attr(c, "window_reversal", 1, &zero);
  attr1(c, "feature_group_count", 1);
  attr1(c, "batch_group_count", 1);
}

// The shared reader, the host kernel and the CUDA plan agree on op's
// status: `code` (IRON_STATUS_OK for none) with a message containing
// `want`.
static void conv_expect(conv_op_t *c, int code, const char *want) {
  iron_conv_plan_t plan;
  iron_status_t s0 = iron_conv_plan_read(&c->b.op, &plan);
  const iron_kernel_t *k = iron_host_kernel_lookup(IRON_OP_CONVOLUTION);
  CHECK(k != NULL);
  if (!k) return;
  void *params = NULL;
  iron_status_t s1 = k->prepare(&c->b.op, NULL, &params);
  if (!s1 && k->destroy) k->destroy(params);
  iron_cuda_conv_t cplan;
  iron_status_t s2 = iron_cuda_conv_plan(&c->b.op, &cplan);
  iron_status_t all[3] = {s0, s1, s2};
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ_INT(iron_status_code(all[i]), code);
    if (code != IRON_STATUS_OK) {
      const char *m = all[i] ? iron_status_message(all[i]) : "";
      if (!strstr(m, want) || !strstr(m, "stablehlo.convolution")) {
        fprintf(stderr, "  message '%s' lacks '%s'\n", m, want);
        CHECK(false);
      }
      if (i > 0 && all[i] && s0)
        CHECK(strcmp(iron_status_message(all[i]), iron_status_message(s0)) ==
              0);
    }
  }
  for (int i = 0; i < 3; ++i) iron_status_free(all[i]);
}

static void test_conv_valid(void) {
  conv_op_t c;
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  conv_expect(&c, IRON_STATUS_OK, "");
  iron_conv_plan_t p;
  CHECK_OK(iron_conv_plan_read(&c.b.op, &p));
  CHECK_EQ_INT(p.rank, 3);
  CHECK_EQ_INT(p.nsp, 1);
  CHECK_EQ_INT(p.comp_dtype, IRON_DTYPE_F32);
  CHECK_EQ_INT(p.in_sp_dim[0], 2);
  CHECK_EQ_INT(p.k_out_feature_dim, 1);
  CHECK_EQ_INT(p.groups, 1);
  CHECK_EQ_INT(p.n_out, 2);
  CHECK_EQ_INT(p.c_in_g, 4);
  CHECK_EQ_INT(p.c_out_g, 4);
  // Absent window attributes take their defaults.
  drop(&c, "window_strides");
  drop(&c, "padding");
  drop(&c, "rhs_dilation");
  CHECK_OK(iron_conv_plan_read(&c.b.op, &p));
  CHECK_EQ_INT(p.stride[0], 1);
  CHECK_EQ_INT(p.pad[1], 0);
  CHECK_EQ_INT(p.rhs_dil[0], 1);
  // Feature groups: 2 groups of 2 input features.
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  const int64_t two = 2;
  set(&c, "feature_group_count", -1, &two);
  c.b.operand_types[1].dims[0] = 2;
  conv_expect(&c, IRON_STATUS_OK, "");
  CHECK_OK(iron_conv_plan_read(&c.b.op, &p));
  CHECK_EQ_INT(p.groups, 2);
  CHECK_EQ_INT(p.c_out_g, 2);
}

static void test_conv_dimension_numbers(void) {
  conv_op_t c;
  const int64_t v0 = 0, v3 = 3;
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  drop(&c, "input_batch_dimension");
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT,
              "missing or bad input_batch_dimension");
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  set(&c, "output_feature_dimension", -1, &v3);
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT,
              "missing or bad output_feature_dimension");
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  int64_t two_sp[2] = {2, 2};
  set(&c, "input_spatial_dimensions", 2, two_sp);
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT, "1 spatial dims expected");
  // The kernel's spatial dim is also its input feature dim.
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  set(&c, "kernel_spatial_dimensions", 1, &v0);
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT, "bad dimension numbers");
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  set(&c, "output_spatial_dimensions", 1, &v3);
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT, "bad dimension numbers");
  // Ranks differ.
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  c.b.result_types[0].rank = 2;
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT, "operand/result ranks 3, 3, 2");
  // Operand count.
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  c.b.op.num_operands = 1;
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT, "expected 2 operands");
}

static void test_conv_window(void) {
  conv_op_t c;
  const int64_t v0 = 0, vm1 = -1, v2 = 2, v4 = 4;
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  int64_t s2[2] = {1, 1};
  set(&c, "window_strides", 2, s2);
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT,
              "window_strides has 2 entries, expected 1");
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  set(&c, "padding", 1, &v0);
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT,
              "padding has 1 entries, expected 2");
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  set(&c, "window_strides", 1, &v0);
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT,
              "strides and dilations must be positive");
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  set(&c, "lhs_dilation", 1, &vm1);
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT,
              "strides and dilations must be positive");
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  set(&c, "feature_group_count", -1, &v0);
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT, "bad feature_group_count");
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  set(&c, "feature_group_count", -1, &v2);
  set(&c, "batch_group_count", -1, &v2);
  conv_expect(&c, IRON_STATUS_UNIMPLEMENTED,
              "both feature_group_count and batch_group_count > 1");
  // 2 feature groups need 2 kernel input features, not 4.
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  set(&c, "feature_group_count", -1, &v2);
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT,
              "feature/batch sizes do not match the group counts");
  // A result width of 4 where the window gives 3.
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  c.b.result_types[0].dims[2] = 4;
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT,
              "spatial dim 0 of the result is 4, expected 3");
  // Padding and stride enter the expected size: (5 + 4 - 3) / 2 + 1 = 4.
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_F32);
  int64_t pad[2] = {2, 2};
  set(&c, "padding", 2, pad);
  set(&c, "window_strides", 1, &v2);
  c.b.result_types[0].dims[2] = 4;
  conv_expect(&c, IRON_STATUS_OK, "");
  c.b.result_types[0].dims[2] = 5;
  conv_expect(&c, IRON_STATUS_INVALID_ARGUMENT,
              "spatial dim 0 of the result is 5, expected 4");
  (void)v4;
}

static void test_conv_dtypes(void) {
  conv_op_t c;
  conv_build(&c, IRON_DTYPE_F32, IRON_DTYPE_S32);
  conv_expect(&c, IRON_STATUS_UNIMPLEMENTED, "f32 x f32 -> ");
  conv_build(&c, IRON_DTYPE_S8, IRON_DTYPE_S32);
  conv_expect(&c, IRON_STATUS_OK, "");
  conv_build(&c, IRON_DTYPE_BF16, IRON_DTYPE_F32);
  conv_expect(&c, IRON_STATUS_OK, "");
  // Sub-byte integers: the host takes them, the CUDA plan refuses them
  // (after the shared type checks, before the attributes).
  conv_build(&c, IRON_DTYPE_S4, IRON_DTYPE_S32);
  iron_conv_plan_t p;
  CHECK_OK(iron_conv_plan_read(&c.b.op, &p));
  iron_cuda_conv_t cp;
  iron_status_t st = iron_cuda_conv_plan(&c.b.op, &cp);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(st && strstr(iron_status_message(st), "on cuda for dtype"));
  iron_status_free(st);
  // f8 operands of a complex result: the host takes them, CUDA refuses them
  // with the host's dtype message.
  conv_build(&c, IRON_DTYPE_F8E5M2, IRON_DTYPE_C64);
  CHECK_OK(iron_conv_plan_read(&c.b.op, &p));
  st = iron_cuda_conv_plan(&c.b.op, &cp);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(st && strstr(iron_status_message(st), " -> "));
  iron_status_free(st);
}

// --- FFT --------------------------------------------------------------------

enum { FFT = 0, IFFT, RFFT, IRFFT };

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

// The shared reader and the host kernel agree: `code`, message with `want`.
static void fft_expect(ht_op_t *b, int code, const char *want) {
  iron_fft_plan_t plan;
  iron_status_t s0 = iron_fft_plan_read(&b->op, &plan);
  const iron_kernel_t *k = iron_host_kernel_lookup(IRON_OP_FFT);
  CHECK(k != NULL);
  if (!k) return;
  void *params = NULL;
  iron_status_t s1 = k->prepare(&b->op, NULL, &params);
  if (!s1 && k->destroy) k->destroy(params);
  CHECK_EQ_INT(iron_status_code(s0), code);
  CHECK_EQ_INT(iron_status_code(s1), code);
  if (code != IRON_STATUS_OK && s0 && s1) {
    const char *m = iron_status_message(s0);
    if (!strstr(m, want) || !strstr(m, "stablehlo.fft")) {
      fprintf(stderr, "  message '%s' lacks '%s'\n", m, want);
      CHECK(false);
    }
    CHECK(strcmp(m, iron_status_message(s1)) == 0);
  }
  iron_status_free(s0);
  iron_status_free(s1);
}

static void test_fft(void) {
  ht_op_t b;
  int64_t d38[2] = {3, 8}, d35[2] = {3, 5}, d48[2] = {4, 8};
  int64_t l8[1] = {8}, l7[1] = {7}, lneg[1] = {-1};
  fft_op(&b, FFT, IRON_DTYPE_C64, IRON_DTYPE_C64, 2, d38, d38, 1, l8);
  fft_expect(&b, IRON_STATUS_OK, "");
  iron_fft_plan_t p;
  CHECK_OK(iron_fft_plan_read(&b.op, &p));
  CHECK_EQ_INT(p.type, IRON_FFT_PLAN_FFT);
  CHECK_EQ_INT(p.d, 1);
  CHECK_EQ_INT(p.rank, 2);
  CHECK_EQ_INT(p.len[0], 8);
  CHECK(p.total == 8.0);
  fft_op(&b, RFFT, IRON_DTYPE_F32, IRON_DTYPE_C64, 2, d38, d35, 1, l8);
  fft_expect(&b, IRON_STATUS_OK, "");
  fft_op(&b, IRFFT, IRON_DTYPE_C128, IRON_DTYPE_F64, 2, d35, d38, 1, l8);
  fft_expect(&b, IRON_STATUS_OK, "");
  int64_t l2[2] = {3, 8};
  fft_op(&b, IFFT, IRON_DTYPE_C128, IRON_DTYPE_C128, 2, d38, d38, 2, l2);
  fft_expect(&b, IRON_STATUS_OK, "");
  CHECK_OK(iron_fft_plan_read(&b.op, &p));
  CHECK(p.total == 24.0);
  // fft_type out of range.
  fft_op(&b, 7, IRON_DTYPE_C64, IRON_DTYPE_C64, 2, d38, d38, 1, l8);
  fft_expect(&b, IRON_STATUS_INVALID_ARGUMENT, "missing or bad fft_type");
  // fft_length that does not fit the shape, or negative.
  fft_op(&b, FFT, IRON_DTYPE_C64, IRON_DTYPE_C64, 2, d38, d38, 1, l7);
  fft_expect(&b, IRON_STATUS_INVALID_ARGUMENT,
             "fft_length[0] = 7 does not fit dimension 1 (8 -> 8)");
  fft_op(&b, FFT, IRON_DTYPE_C64, IRON_DTYPE_C64, 2, d38, d38, 1, lneg);
  fft_expect(&b, IRON_STATUS_INVALID_ARGUMENT, "fft_length[0] = -1");
  // RFFT's result keeps n/2 + 1 entries, not n.
  fft_op(&b, RFFT, IRON_DTYPE_F32, IRON_DTYPE_C64, 2, d38, d38, 1, l8);
  fft_expect(&b, IRON_STATUS_INVALID_ARGUMENT, "(8 -> 8)");
  // More transform dims than the rank.
  int64_t d8[1] = {8}, l88[2] = {8, 8};
  fft_op(&b, FFT, IRON_DTYPE_C64, IRON_DTYPE_C64, 1, d8, d8, 2, l88);
  fft_expect(&b, IRON_STATUS_INVALID_ARGUMENT, "rank 1 for 2 fft dimensions");
  // Batch dims differ.
  fft_op(&b, FFT, IRON_DTYPE_C64, IRON_DTYPE_C64, 2, d38, d48, 1, l8);
  fft_expect(&b, IRON_STATUS_INVALID_ARGUMENT, "batch dimension 0 differs");
  // Refusals by name: dtype pair, four transform dims, huge lengths.
  fft_op(&b, FFT, IRON_DTYPE_F32, IRON_DTYPE_F32, 2, d38, d38, 1, l8);
  fft_expect(&b, IRON_STATUS_UNIMPLEMENTED, "from f32 to f32");
  int64_t d4[4] = {2, 2, 2, 2};
  fft_op(&b, FFT, IRON_DTYPE_C64, IRON_DTYPE_C64, 4, d4, d4, 4, d4);
  fft_expect(&b, IRON_STATUS_UNIMPLEMENTED, "with 4 fft_length entries");
  int64_t huge[1] = {(int64_t)1 << 41}, dh[1] = {(int64_t)1 << 41};
  fft_op(&b, FFT, IRON_DTYPE_C64, IRON_DTYPE_C64, 1, dh, dh, 1, huge);
  fft_expect(&b, IRON_STATUS_UNIMPLEMENTED, "fft_length[0] = 2199023255552");
  // Operand count.
  fft_op(&b, FFT, IRON_DTYPE_C64, IRON_DTYPE_C64, 2, d38, d38, 1, l8);
  b.op.num_results = 0;
  fft_expect(&b, IRON_STATUS_INVALID_ARGUMENT, "expected 1 operand");
}

// --- Collectives ----------------------------------------------------------

static const iron_op_kind_t kCollectives[] = {
    IRON_OP_ALL_REDUCE,        IRON_OP_CROSS_REPLICA_SUM,
    IRON_OP_ALL_GATHER,        IRON_OP_REDUCE_SCATTER,
    IRON_OP_ALL_TO_ALL,        IRON_OP_COLLECTIVE_BROADCAST,
    IRON_OP_COLLECTIVE_PERMUTE};
#define NUM_COLLECTIVES (sizeof(kCollectives) / sizeof(kCollectives[0]))

// kind(x: f32[2,3], y: s8[5]) -> (f32[2,3], s8[5]).
static void coll_op(ht_op_t *b, iron_op_kind_t kind) {
  ht_init(b, kind);
  int64_t d23[2] = {2, 3}, d5[1] = {5};
  ht_operand(b, IRON_DTYPE_F32, 2, d23);
  ht_operand(b, IRON_DTYPE_S8, 1, d5);
  ht_result(b, IRON_DTYPE_F32, 2, d23);
  ht_result(b, IRON_DTYPE_S8, 1, d5);
}

static void coll_attr_int(ht_op_t *b, const char *name, int64_t v) {
  uint32_t i = b->op.num_attrs++;
  b->attrs[i].kind = IRON_ATTR_INT;
  b->attrs[i].i = v;
  b->attrs[i].int_dtype = IRON_DTYPE_S64;
  b->named[i].name = name;
  b->named[i].value = &b->attrs[i];
}

// The shared reader, the host kernel and the CUDA kernel agree on op's
// status: `code` with a message containing `want` and the op's name.
static void coll_expect(ht_op_t *b, int code, const char *want) {
  iron_collective_plan_t plan;
  iron_status_t s0 = iron_collective_plan_read(&b->op, &plan);
  const iron_kernel_t *hk = iron_host_kernel_lookup(b->op.kind);
  const iron_kernel_t *ck = iron_cuda_kernel_lookup(b->op.kind);
  CHECK(hk != NULL && ck != NULL && ck->prepare_on != NULL);
  if (!hk || !ck || !ck->prepare_on) {
    iron_status_free(s0);
    return;
  }
  void *hp = NULL, *cp = NULL;
  iron_status_t s1 = hk->prepare(&b->op, NULL, &hp);
  iron_status_t s2 = ck->prepare_on(NULL, &b->op, NULL, &cp);
  free(hp);
  free(cp);
  iron_status_t all[3] = {s0, s1, s2};
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ_INT(iron_status_code(all[i]), code);
    if (code != IRON_STATUS_OK && all[i]) {
      const char *m = iron_status_message(all[i]);
      if (!strstr(m, want) || !strstr(m, b->op.name)) {
        fprintf(stderr, "  message '%s' lacks '%s'\n", m, want);
        CHECK(false);
      }
      if (i > 0 && s0) CHECK(strcmp(m, iron_status_message(s0)) == 0);
    }
  }
  for (int i = 0; i < 3; ++i) iron_status_free(all[i]);
}

static void test_collective_plans(void) {
  for (size_t k = 0; k < NUM_COLLECTIVES; ++k) {
    ht_op_t b;
    iron_collective_plan_t p;
    coll_op(&b, kCollectives[k]);
    // No groups: one participant.
    coll_expect(&b, IRON_STATUS_OK, "");
    CHECK_OK(iron_collective_plan_read(&b.op, &p));
    CHECK_EQ_INT(p.count, 2);
    CHECK_EQ_INT(p.zeros, kCollectives[k] == IRON_OP_COLLECTIVE_PERMUTE);
    // Groups of device 0, with XLA's -1 padding.
    int64_t g0[2] = {0, -1};
    coll_op(&b, kCollectives[k]);
    ht_attr_i64(&b, "replica_groups", 2, g0);
    coll_expect(&b, IRON_STATUS_OK, "");
    // A group naming device 1.
    int64_t g01[2] = {0, 1};
    coll_op(&b, kCollectives[k]);
    ht_attr_i64(&b, "replica_groups", 2, g01);
    coll_expect(&b, IRON_STATUS_UNIMPLEMENTED,
                "across devices (replica_groups names device 1; iron runs "
                "programs of one replica and one partition)");
    // A result of another shape (an all_gather over 2 participants).
    coll_op(&b, kCollectives[k]);
    b.result_types[0].dims[0] = 4;
    coll_expect(&b, IRON_STATUS_UNIMPLEMENTED,
                "from tensor<2x3xf32> to tensor<4x3xf32> (more than one "
                "participant)");
    // Or another dtype.
    coll_op(&b, kCollectives[k]);
    b.result_types[1].dtype = IRON_DTYPE_U8;
    coll_expect(&b, IRON_STATUS_UNIMPLEMENTED, "(more than one participant)");
    // Operand and result counts.
    coll_op(&b, kCollectives[k]);
    b.op.num_results = 1;
    coll_expect(&b, IRON_STATUS_UNIMPLEMENTED, "with 2 operands and 1 results");
    coll_op(&b, kCollectives[k]);
    b.op.num_operands = 0;
    b.op.num_results = 0;
    coll_expect(&b, IRON_STATUS_UNIMPLEMENTED, "with 0 operands and 0 results");
  }
  // collective_permute: 0 -> 0 keeps the operand; pairs without it give
  // zeros; a pair naming device 3 is refused.
  ht_op_t b;
  iron_collective_plan_t p;
  int64_t self[2] = {0, 0}, pad[2] = {-1, -1}, other[2] = {0, 3};
  coll_op(&b, IRON_OP_COLLECTIVE_PERMUTE);
  ht_attr_i64(&b, "source_target_pairs", 2, self);
  coll_expect(&b, IRON_STATUS_OK, "");
  CHECK_OK(iron_collective_plan_read(&b.op, &p));
  CHECK(!p.zeros);
  coll_op(&b, IRON_OP_COLLECTIVE_PERMUTE);
  ht_attr_i64(&b, "source_target_pairs", 2, pad);
  coll_expect(&b, IRON_STATUS_OK, "");
  CHECK_OK(iron_collective_plan_read(&b.op, &p));
  CHECK(p.zeros);
  coll_op(&b, IRON_OP_COLLECTIVE_PERMUTE);
  ht_attr_i64(&b, "source_target_pairs", 2, other);
  coll_expect(&b, IRON_STATUS_UNIMPLEMENTED,
              "source_target_pairs names device 3");
  // all_to_all splits over split_count participants.
  coll_op(&b, IRON_OP_ALL_TO_ALL);
  coll_attr_int(&b, "split_count", 1);
  coll_expect(&b, IRON_STATUS_OK, "");
  coll_op(&b, IRON_OP_ALL_TO_ALL);
  coll_attr_int(&b, "split_count", 2);
  coll_expect(&b, IRON_STATUS_UNIMPLEMENTED, "with split_count 2");
  // Not a collective.
  coll_op(&b, IRON_OP_ADD);
  iron_status_t st = iron_collective_plan_read(&b.op, &p);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INVALID_ARGUMENT);
  iron_status_free(st);
}

// A fake driver for the CUDA collective kernel: device pointers are host
// pointers, copies and memsets act at once and are logged.
static char g_coll_log[64];
static int g_coll_log_n;
static struct CUctx_st *const kFakeCtx = (struct CUctx_st *)0x1000;
static CUresult fake_get_current(CUcontext *c) {
  *c = kFakeCtx;
  return 0;
}
static CUresult fake_set_current(CUcontext c) {
  (void)c;
  return 0;
}
static CUresult fake_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n,
                          CUstream s) {
  (void)s;
  memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  if (g_coll_log_n < 63) g_coll_log[g_coll_log_n++] = 'C';
  return 0;
}
static CUresult fake_memset(CUdeviceptr dst, unsigned char v, size_t n,
                            CUstream s) {
  (void)s;
  memset((void *)(uintptr_t)dst, v, n);
  if (g_coll_log_n < 63) g_coll_log[g_coll_log_n++] = 'Z';
  return 0;
}

// Runs kind on x = 0..5 (f32[2,3]) and y (s8[5]) on the host kernel and on
// the CUDA kernel (fake driver), outputs separate from (or, in place, the
// same as) the inputs; `log` is what the CUDA kernel must have enqueued.
static void coll_run(iron_op_kind_t kind, const int64_t *pairs, bool inplace,
                     const char *log) {
  ht_op_t b;
  coll_op(&b, kind);
  if (pairs) ht_attr_i64(&b, "source_target_pairs", 2, pairs);
  bool zeros = kind == IRON_OP_COLLECTIVE_PERMUTE &&
               !(pairs && pairs[0] == 0 && pairs[1] == 0);
  static iron_cuda_api_t api;
  api.cuCtxGetCurrent = fake_get_current;
  api.cuCtxSetCurrent = fake_set_current;
  api.cuMemcpyDtoDAsync = fake_dtod;
  api.cuMemsetD8Async = fake_memset;
  iron_cuda_device_t dev;
  memset(&dev, 0, sizeof(dev));
  dev.api = &api;
  dev.ctx = kFakeCtx;
  for (int device = 0; device < 2; ++device) {
    const iron_kernel_t *k =
        device ? iron_cuda_kernel_lookup(kind) : iron_host_kernel_lookup(kind);
    CHECK(k != NULL && k->inplace_ok);
    if (!k) return;
    if (device) CHECK(k->graph_capturable);
    iron_tensor_t *in[2], *out[2];
    for (int i = 0; i < 2; ++i) {
      in[i] = ht_tensor_like(&b.operand_types[i]);
      ht_fill_bytes(in[i]);
      out[i] = inplace ? in[i] : ht_tensor_like(&b.result_types[i]);
      if (!inplace) memset(out[i]->data, 0xa5, out[i]->nbytes);
    }
    unsigned char want[2][64];
    for (int i = 0; i < 2; ++i) {
      if (zeros)
        memset(want[i], 0, in[i]->nbytes);
      else
        memcpy(want[i], in[i]->data, in[i]->nbytes);
    }
    void *params = NULL;
    iron_status_t st =
        device ? k->prepare_on((iron_device_t *)&dev, &b.op, NULL, &params)
               : k->prepare(&b.op, NULL, &params);
    CHECK_OK(st);
    iron_kernel_ctx_t ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.dev = device ? (iron_device_t *)&dev : NULL;
    g_coll_log_n = 0;
    memset(g_coll_log, 0, sizeof(g_coll_log));
    CHECK_OK(k->run(&ctx, params, (const iron_tensor_t *const *)in, out));
    free(params);
    for (int i = 0; i < 2; ++i)
      CHECK(memcmp(out[i]->data, want[i], out[i]->nbytes) == 0);
    if (device && strcmp(g_coll_log, log) != 0) {
      fprintf(stderr, "  %s%s: enqueued '%s', want '%s'\n",
              iron_op_kind_name(kind), inplace ? " in place" : "", g_coll_log,
              log);
      CHECK(false);
    }
    for (int i = 0; i < 2; ++i) {
      if (!inplace) ht_tensor_free(out[i]);
      ht_tensor_free(in[i]);
    }
  }
}

// Results in operands' storage across operands: result 0 in operand 1's
// (what plan.c gives when operand 0 lives on and operand 1 dies) must still
// let result 1 read operand 1; result 1 in operand 0's storage (which plan.c
// never gives) fails instead of computing a wrong answer.
static void coll_cross(bool bad) {
  ht_op_t b;
  ht_init(&b, IRON_OP_ALL_REDUCE);
  int64_t d4[1] = {4};
  for (int i = 0; i < 2; ++i) {
    ht_operand(&b, IRON_DTYPE_F32, 1, d4);
    ht_result(&b, IRON_DTYPE_F32, 1, d4);
  }
  static iron_cuda_api_t api;
  api.cuCtxGetCurrent = fake_get_current;
  api.cuCtxSetCurrent = fake_set_current;
  api.cuMemcpyDtoDAsync = fake_dtod;
  api.cuMemsetD8Async = fake_memset;
  iron_cuda_device_t dev;
  memset(&dev, 0, sizeof(dev));
  dev.api = &api;
  dev.ctx = kFakeCtx;
  for (int device = 0; device < 2; ++device) {
    const iron_kernel_t *k = device ? iron_cuda_kernel_lookup(b.op.kind)
                                    : iron_host_kernel_lookup(b.op.kind);
    iron_tensor_t *in[2], *out[2], *spare = ht_tensor(IRON_DTYPE_F32, 1, d4);
    float want[2][4];
    for (int i = 0; i < 2; ++i) {
      in[i] = ht_tensor(IRON_DTYPE_F32, 1, d4);
      for (int e = 0; e < 4; ++e)
        ((float *)in[i]->data)[e] = want[i][e] = (float)(10 * i + e);
    }
    out[0] = bad ? spare : in[1];
    out[1] = bad ? in[0] : spare;
    void *params = NULL;
    CHECK_OK(device ? k->prepare_on((iron_device_t *)&dev, &b.op, NULL, &params)
                    : k->prepare(&b.op, NULL, &params));
    iron_kernel_ctx_t ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.dev = device ? (iron_device_t *)&dev : NULL;
    iron_status_t st =
        k->run(&ctx, params, (const iron_tensor_t *const *)in, out);
    free(params);
    if (bad) {
      CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INTERNAL);
      CHECK(st && strstr(iron_status_message(st), "operand 0's storage"));
      iron_status_free(st);
    } else {
      CHECK_OK(st);
      for (int i = 0; i < 2; ++i)
        CHECK(memcmp(out[i]->data, want[i], sizeof(want[i])) == 0);
    }
    ht_tensor_free(in[0]);
    ht_tensor_free(in[1]);
    ht_tensor_free(spare);
  }
}

static void test_collective_run(void) {
  coll_cross(false);
  coll_cross(true);
  for (size_t k = 0; k < NUM_COLLECTIVES; ++k) {
    bool permute = kCollectives[k] == IRON_OP_COLLECTIVE_PERMUTE;
    coll_run(kCollectives[k], NULL, false, permute ? "ZZ" : "CC");
    coll_run(kCollectives[k], NULL, true, permute ? "ZZ" : "");
  }
  int64_t self[2] = {0, 0}, pad[2] = {-1, -1};
  coll_run(IRON_OP_COLLECTIVE_PERMUTE, self, false, "CC");
  coll_run(IRON_OP_COLLECTIVE_PERMUTE, self, true, "");
  coll_run(IRON_OP_COLLECTIVE_PERMUTE, pad, false, "ZZ");
}

// --- reduce_window / select_and_scatter ------------------------------------

// Window attributes of a test op (n < 0: attribute absent).
typedef struct win_attrs {
  int nwd, nst, nbd, nwdl, npad;
  int64_t wd[4], st[4], bd[4], wdl[4], pad[8];
} win_attrs_t;

static void win_set_attrs(ht_op_t *b, const win_attrs_t *a) {
  if (a->nwd >= 0) ht_attr_i64(b, "window_dimensions", a->nwd, a->wd);
  if (a->nst >= 0) ht_attr_i64(b, "window_strides", a->nst, a->st);
  if (a->nbd >= 0) ht_attr_i64(b, "base_dilations", a->nbd, a->bd);
  if (a->nwdl >= 0) ht_attr_i64(b, "window_dilations", a->nwdl, a->wdl);
  if (a->npad >= 0) ht_attr_i64(b, "padding", a->npad, a->pad);
}

// 1-D max pool over 10 f32: window 3, padding (1, 1) -> 10 results.
static win_attrs_t win_default(void) {
  win_attrs_t a;
  memset(&a, 0, sizeof(a));
  a.nwd = 1;
  a.wd[0] = 3;
  a.nst = a.nbd = a.nwdl = -1;
  a.npad = 2;
  a.pad[0] = a.pad[1] = 1;
  return a;
}

static bb_t *g_max_body, *g_ge_body, *g_add_body;

static void rw_build(ht_op_t *b, const win_attrs_t *a, int64_t in, int64_t out,
                     iron_dtype_t init_dt, int init_rank, iron_dtype_t out_dt) {
  ht_init(b, IRON_OP_REDUCE_WINDOW);
  int64_t one = 1;
  ht_operand(b, IRON_DTYPE_F32, 1, &in);
  ht_operand(b, init_dt, init_rank, &one);
  ht_result(b, out_dt, 1, &out);
  win_set_attrs(b, a);
  b->op.num_regions = 1;
  b->op.regions = &g_max_body->region;
}

static void sas_build(ht_op_t *b, const win_attrs_t *a, int64_t in, int64_t src,
                      int init_rank) {
  ht_init(b, IRON_OP_SELECT_AND_SCATTER);
  int64_t one = 1;
  ht_operand(b, IRON_DTYPE_F32, 1, &in);
  ht_operand(b, IRON_DTYPE_F32, 1, &src);
  ht_operand(b, IRON_DTYPE_F32, init_rank, &one);
  ht_result(b, IRON_DTYPE_F32, 1, &in);
  win_set_attrs(b, a);
  static iron_ir_region_t regions[2];
  regions[0] = g_ge_body->region;
  regions[1] = g_add_body->region;
  b->op.num_regions = 2;
  b->op.regions = regions;
}

// The shared plan, the host kernel and the CUDA plan agree on op's status.
static void win_expect(ht_op_t *b, int code, const char *want) {
  iron_window_plan_t plan;
  iron_status_t s0 = iron_window_plan_read(&b->op, &plan);
  const iron_kernel_t *k = iron_host_kernel_lookup(b->op.kind);
  CHECK(k != NULL);
  if (!k) return;
  void *params = NULL;
  iron_status_t s1 = k->prepare(&b->op, NULL, &params);
  if (!s1 && k->destroy) k->destroy(params);
  iron_window_plan_t cplan;
  iron_cuda_window_t cw;
  iron_status_t s2 = iron_cuda_window_plan(&b->op, &cplan, &cw);
  iron_status_t all[3] = {s0, s1, s2};
  const char *who[3] = {"plan", "host", "cuda"};
  for (int i = 0; i < 3; ++i) {
    if ((int)iron_status_code(all[i]) != code)
      fprintf(stderr, "  %s: status %d (%s), want %d\n", who[i],
              iron_status_code(all[i]),
              all[i] ? iron_status_message(all[i]) : "OK", code);
    CHECK_EQ_INT(iron_status_code(all[i]), code);
    if (code != IRON_STATUS_OK && all[i]) {
      const char *m = iron_status_message(all[i]);
      if (!strstr(m, want) || !strstr(m, b->op.name)) {
        fprintf(stderr, "  %s: message '%s' lacks '%s'\n", who[i], m, want);
        CHECK(false);
      }
      if (i > 0 && s0) CHECK(strcmp(m, iron_status_message(s0)) == 0);
    }
  }
  for (int i = 0; i < 3; ++i) iron_status_free(all[i]);
}

static void win_bodies(void) {
  iron_dtype_t f2[2] = {IRON_DTYPE_F32, IRON_DTYPE_F32};
  g_max_body = bb_new(2, f2);
  bb_ret(g_max_body, 1,
         bb_op(g_max_body, IRON_OP_MAXIMUM, IRON_DTYPE_F32, 2,
               bb_arg(g_max_body, 0), bb_arg(g_max_body, 1), NULL),
         NULL);
  g_ge_body = bb_new(2, f2);
  bb_ret(g_ge_body, 1,
         bb_cmp(g_ge_body, IRON_CMP_GE, IRON_CMP_TYPE_FLOAT,
                bb_arg(g_ge_body, 0), bb_arg(g_ge_body, 1)),
         NULL);
  g_add_body = bb_new(2, f2);
  bb_ret(g_add_body, 1,
         bb_op(g_add_body, IRON_OP_ADD, IRON_DTYPE_F32, 2,
               bb_arg(g_add_body, 0), bb_arg(g_add_body, 1), NULL),
         NULL);
}

static void test_window_reduce_window(void) {
  win_bodies();
  ht_op_t b;
  win_attrs_t a = win_default();
  rw_build(&b, &a, 10, 10, IRON_DTYPE_F32, 0, IRON_DTYPE_F32);
  win_expect(&b, IRON_STATUS_OK, "");
  iron_window_plan_t p;
  CHECK_OK(iron_window_plan_read(&b.op, &p));
  CHECK_EQ_INT(p.rank, 1);
  CHECK_EQ_INT(p.out_dims[0], 10);
  CHECK_EQ_INT(p.win_count, 3);
  CHECK_EQ_INT(p.max_valid[0], 3);
  CHECK_EQ_INT(p.strides[0], 1);
  CHECK_EQ_INT(p.base_dil[0], 1);
  // Attribute lengths.
  a = win_default();
  a.nwd = 2;
  a.wd[1] = 1;
  rw_build(&b, &a, 10, 10, IRON_DTYPE_F32, 0, IRON_DTYPE_F32);
  win_expect(&b, IRON_STATUS_INVALID_ARGUMENT,
             "window_dimensions has 2 entries for rank 1");
  a = win_default();
  a.npad = 3;
  rw_build(&b, &a, 10, 10, IRON_DTYPE_F32, 0, IRON_DTYPE_F32);
  win_expect(&b, IRON_STATUS_INVALID_ARGUMENT,
             "padding has 3 entries for rank 1");
  // Values: non-positive strides/dilations, sizes that overflow.
  const struct {
    int which;  // 0 stride, 1 base dilation, 2 window dilation, 3 pad, 4 wd
    int64_t v;
  } bad[] = {{0, 0},
             {1, -1},
             {2, 0},
             {3, (int64_t)1 << 62},
             {4, 0},
             {4, -3},
             {1, (int64_t)1 << 61},
             {2, (int64_t)1 << 61},
             {3, -((int64_t)1 << 62)}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    a = win_default();
    switch (bad[i].which) {
      case 0:
        a.nst = 1;
        a.st[0] = bad[i].v;
        break;
      case 1:
        a.nbd = 1;
        a.bd[0] = bad[i].v;
        break;
      case 2:
        a.nwdl = 1;
        a.wdl[0] = bad[i].v;
        a.wd[0] = 5;
        break;
      case 3:
        a.pad[1] = bad[i].v;
        break;
      default:
        a.wd[0] = bad[i].v;
        break;
    }
    rw_build(&b, &a, 10, 10, IRON_DTYPE_F32, 0, IRON_DTYPE_F32);
    win_expect(&b, IRON_STATUS_INVALID_ARGUMENT, "bad window in dim 0");
  }
  // The declared result against the windows.
  a = win_default();
  rw_build(&b, &a, 10, 11, IRON_DTYPE_F32, 0, IRON_DTYPE_F32);
  win_expect(&b, IRON_STATUS_INVALID_ARGUMENT,
             "result 0 dim 0 is 11, the windows give 10");
  // A window much larger than the input: no windows, not a huge table.
  a = win_default();
  a.wd[0] = (int64_t)1 << 40;
  a.pad[0] = a.pad[1] = 0;
  rw_build(&b, &a, 10, 0, IRON_DTYPE_F32, 0, IRON_DTYPE_F32);
  win_expect(&b, IRON_STATUS_OK, "");
  a.pad[0] = (int64_t)1 << 40;  // padded to 2^40 + 10: 11 windows
  rw_build(&b, &a, 10, 11, IRON_DTYPE_F32, 0, IRON_DTYPE_F32);
  win_expect(&b, IRON_STATUS_OK, "");
  CHECK_OK(iron_window_plan_read(&b.op, &p));
  CHECK_EQ_INT(p.max_valid[0], 10);
  // Types.
  a = win_default();
  rw_build(&b, &a, 10, 10, IRON_DTYPE_F32, 1, IRON_DTYPE_F32);
  win_expect(&b, IRON_STATUS_INVALID_ARGUMENT, "bad init value 0");
  rw_build(&b, &a, 10, 10, IRON_DTYPE_F16, 0, IRON_DTYPE_F32);
  win_expect(&b, IRON_STATUS_INVALID_ARGUMENT, "bad init value 0");
  rw_build(&b, &a, 10, 10, IRON_DTYPE_F32, 0, IRON_DTYPE_F64);
  win_expect(&b, IRON_STATUS_INVALID_ARGUMENT, "result 0 type mismatch");
  rw_build(&b, &a, 10, 10, IRON_DTYPE_F32, 0, IRON_DTYPE_F32);
  b.op.num_results = 0;
  win_expect(&b, IRON_STATUS_INVALID_ARGUMENT, "bad operand/result counts");
  // The window product overflows int64 over rank 4.
  ht_init(&b, IRON_OP_REDUCE_WINDOW);
  int64_t d4[4] = {2, 2, 2, 2}, one = 1;
  ht_operand(&b, IRON_DTYPE_F32, 4, d4);
  ht_operand(&b, IRON_DTYPE_F32, 0, &one);
  int64_t o4[4] = {0, 0, 0, 0};
  ht_result(&b, IRON_DTYPE_F32, 4, o4);
  int64_t wd4[4] = {(int64_t)1 << 40, (int64_t)1 << 40, (int64_t)1 << 40, 2};
  ht_attr_i64(&b, "window_dimensions", 4, wd4);
  b.op.num_regions = 1;
  b.op.regions = &g_max_body->region;
  win_expect(&b, IRON_STATUS_INVALID_ARGUMENT, "window too large");
}

static void test_window_select_and_scatter(void) {
  ht_op_t b;
  win_attrs_t a = win_default();
  a.nst = 1;
  a.st[0] = 2;
  a.pad[0] = a.pad[1] = 0;  // (10 - 3) / 2 + 1 = 4 windows
  sas_build(&b, &a, 10, 4, 0);
  win_expect(&b, IRON_STATUS_OK, "");
  sas_build(&b, &a, 10, 5, 0);
  win_expect(&b, IRON_STATUS_INVALID_ARGUMENT,
             "source dim 0 is 5, the windows give 4");
  sas_build(&b, &a, 10, 4, 1);
  win_expect(&b, IRON_STATUS_INVALID_ARGUMENT, "operand/result types disagree");
  a.nst = 2;
  a.st[1] = 1;
  sas_build(&b, &a, 10, 4, 0);
  win_expect(&b, IRON_STATUS_INVALID_ARGUMENT,
             "window_strides has 2 entries for rank 1");
  free(g_max_body);
  free(g_ge_body);
  free(g_add_body);
}

// iron_window_plan_dim_offsets against the definition (every window index
// k, position o * stride + k * wdl - pad_lo, valid on a multiple of bd
// inside the dilated input), over random windows.
static void test_window_dim_offsets(void) {
  uint64_t seed = 12345;
  int bad = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t r = seed >> 11;
    iron_window_plan_t p;
    memset(&p, 0, sizeof(p));
    p.rank = 1;
    int64_t n = (int64_t)(r % 13);
    r /= 13;
    p.wdims[0] = 1 + (int64_t)(r % 9);
    r /= 9;
    p.strides[0] = 1 + (int64_t)(r % 4);
    r /= 4;
    p.base_dil[0] = 1 + (int64_t)(r % 5);
    r /= 5;
    p.win_dil[0] = 1 + (int64_t)(r % 6);
    r /= 6;
    p.pad_lo[0] = (int64_t)(r % 15) - 7;
    r /= 15;
    p.pad_hi[0] = (int64_t)(r % 15) - 7;
    p.in_dims[0] = n;
    p.in_strides[0] = 3;
    p.dil_in[0] = n == 0 ? 0 : (n - 1) * p.base_dil[0] + 1;
    p.max_valid[0] = p.wdims[0] < n ? p.wdims[0] : n;
    int64_t padded = p.dil_in[0] + p.pad_lo[0] + p.pad_hi[0];
    int64_t ext = (p.wdims[0] - 1) * p.win_dil[0] + 1;
    int64_t outs = padded < ext ? 0 : (padded - ext) / p.strides[0] + 1;
    for (int64_t o = 0; o < outs; ++o) {
      int64_t want[16], got[16];
      int64_t nw = 0;
      for (int64_t k = 0; k < p.wdims[0]; ++k) {
        int64_t pos = o * p.strides[0] + k * p.win_dil[0] - p.pad_lo[0];
        if (pos < 0 || pos >= p.dil_in[0] || pos % p.base_dil[0]) continue;
        want[nw++] = pos / p.base_dil[0] * 3;
      }
      int64_t ng = iron_window_plan_dim_offsets(&p, 0, o, got);
      if (ng != nw || memcmp(got, want, sizeof(int64_t) * (size_t)nw)) {
        if (bad++ < 5)
          fprintf(stderr,
                  "  n=%lld wd=%lld st=%lld bd=%lld wdl=%lld pad=%lld o=%lld: "
                  "%lld offsets, want %lld\n",
                  (long long)n, (long long)p.wdims[0], (long long)p.strides[0],
                  (long long)p.base_dil[0], (long long)p.win_dil[0],
                  (long long)p.pad_lo[0], (long long)o, (long long)ng,
                  (long long)nw);
      }
      CHECK(ng <= p.max_valid[0]);
    }
  }
  CHECK_EQ_INT(bad, 0);
}

static const iron_test_case_t kTests[] = {
    {"conv_valid", test_conv_valid},
    {"conv_dimension_numbers", test_conv_dimension_numbers},
    {"conv_window", test_conv_window},
    {"conv_dtypes", test_conv_dtypes},
    {"fft", test_fft},
    {"window_reduce_window", test_window_reduce_window},
    {"window_select_and_scatter", test_window_select_and_scatter},
    {"window_dim_offsets", test_window_dim_offsets},
    {"collective_plans", test_collective_plans},
    {"collective_run", test_collective_run},
};

IRON_TEST_MAIN(kTests)
