// reduce_precision against values computed by jax's CPU backend
// (lax.reduce_precision on the same inputs, jax 0.10.2).
#include <stdint.h>

#include "device/host/host_kernel.h"
#include "test.h"

static uint64_t run_rp(iron_dtype_t dt, int64_t e, int64_t m, uint64_t bits) {
  iron_ir_type_t t = {.kind = IRON_TYPE_TENSOR, .dtype = dt, .rank = 0};
  iron_ir_value_t in = {.type = &t};
  iron_ir_value_t *ops[1] = {&in};
  iron_ir_attr_t ea = {.kind = IRON_ATTR_INT}, ma = {.kind = IRON_ATTR_INT};
  ea.i = e;
  ea.int_dtype = IRON_DTYPE_S32;
  ma.i = m;
  ma.int_dtype = IRON_DTYPE_S32;
  iron_ir_named_attr_t attrs[2] = {{"exponent_bits", &ea},
                                   {"mantissa_bits", &ma}};
  iron_ir_op_t op = {.kind = IRON_OP_REDUCE_PRECISION,
                     .name = "stablehlo.reduce_precision",
                     .num_operands = 1,
                     .operands = ops,
                     .num_results = 1,
                     .num_attrs = 2,
                     .attrs = attrs};
  iron_ir_value_t res = {.type = &t, .def_op = &op};
  op.results = &res;
  const iron_kernel_t *k = iron_host_kernel_lookup(op.kind);
  CHECK(k != NULL);
  if (!k) return 0;
  void *params = NULL;
  iron_status_t s = k->prepare(&op, NULL, &params);
  CHECK(s == IRON_OK);
  if (s) {
    iron_status_free(s);
    return 0;
  }
  uint64_t src = bits, dst = 0;
  size_t sz = iron_dtype_size(dt);
  iron_tensor_t ti = {.data = &src, .dtype = dt, .count = 1, .nbytes = sz};
  iron_tensor_t to = {.data = &dst, .dtype = dt, .count = 1, .nbytes = sz};
  const iron_tensor_t *ins[1] = {&ti};
  iron_tensor_t *outs[1] = {&to};
  CHECK_OK(k->run(NULL, params, ins, outs));
  free(params);
  return dst;
}

static void test_f32(void) {
  static const uint32_t xs[15] = {
      0x3f800000, 0x3f808000, 0x3f818000, 0x40490fdb, 0x477fe000,
      0x477ff000, 0x3727c5ac, 0x387fda40, 0xb2d6bf95, 0x7f800000,
      0xff800000, 0x7fc00000, 0x7e967699, 0x80000000, 0x3dcccccd};
  static const struct {
    int e, m;
    uint32_t want[15];
  } cases[] = {
      {5, 10, {0x3f800000, 0x3f808000, 0x3f818000, 0x40490000, 0x477fe000,
               0x7f800000, 0x0, 0x0, 0x80000000, 0x7f800000, 0xff800000,
               0x7fc00000, 0x7f800000, 0x80000000, 0x3dccc000}},
      {8, 7, {0x3f800000, 0x3f800000, 0x3f820000, 0x40490000, 0x47800000,
              0x47800000, 0x37280000, 0x38800000, 0xb2d70000, 0x7f800000,
              0xff800000, 0x7fc00000, 0x7e960000, 0x80000000, 0x3dcd0000}},
      {4, 3, {0x3f800000, 0x3f800000, 0x3f800000, 0x40500000, 0x7f800000,
              0x7f800000, 0x0, 0x0, 0x80000000, 0x7f800000, 0xff800000,
              0x7fc00000, 0x7f800000, 0x80000000, 0x3dd00000}},
      {5, 2, {0x3f800000, 0x3f800000, 0x3f800000, 0x40400000, 0x7f800000,
              0x7f800000, 0x0, 0x38800000, 0x80000000, 0x7f800000,
              0xff800000, 0x7fc00000, 0x7f800000, 0x80000000, 0x3dc00000}},
      {8, 0, {0x3f800000, 0x3f800000, 0x3f800000, 0x40800000, 0x47800000,
              0x47800000, 0x37000000, 0x38800000, 0xb3000000, 0x7f800000,
              0xff800000, 0x7fc00000, 0x7e800000, 0x80000000, 0x3e000000}},
      {3, 1, {0x3f800000, 0x3f800000, 0x3f800000, 0x40400000, 0x7f800000,
              0x7f800000, 0x0, 0x0, 0x80000000, 0x7f800000, 0xff800000,
              0x7fc00000, 0x7f800000, 0x80000000, 0x0}},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
    for (int i = 0; i < 15; ++i) {
      uint64_t got = run_rp(IRON_DTYPE_F32, cases[c].e, cases[c].m, xs[i]);
      if (got != cases[c].want[i])
        fprintf(stderr, "e=%d m=%d x=%08x: got %08llx want %08x\n",
                cases[c].e, cases[c].m, xs[i], (unsigned long long)got,
                cases[c].want[i]);
      CHECK(got == cases[c].want[i]);
    }
  }
}

static void test_f64_bf16(void) {
  CHECK(run_rp(IRON_DTYPE_F64, 8, 23, 0x3ff0000000400000ull) ==
        0x3ff0000000000000ull);
  CHECK(run_rp(IRON_DTYPE_F64, 8, 23, 0x400921fb54442d18ull) ==
        0x400921fb60000000ull);
  CHECK(run_rp(IRON_DTYPE_F64, 8, 23, 0x7e37e43c8800759cull) ==
        0x7ff0000000000000ull);
  CHECK(run_rp(IRON_DTYPE_F64, 8, 23, 0x01a56e1fc2f8f359ull) == 0);
  CHECK(run_rp(IRON_DTYPE_F64, 8, 23, 0x7ff8000000000000ull) ==
        0x7ff8000000000000ull);
  // bf16 inputs 1.0, 3.140625, 0.0010004, 300 reduced to (5, 2).
  CHECK(run_rp(IRON_DTYPE_BF16, 5, 2, 0x3f80) == 0x3f80);
  CHECK(run_rp(IRON_DTYPE_BF16, 5, 2, 0x4049) == 0x4040);
  CHECK(run_rp(IRON_DTYPE_BF16, 5, 2, 0x3a83) == 0x3a80);
  CHECK(run_rp(IRON_DTYPE_BF16, 5, 2, 0x4396) == 0x43a0);
}

static const iron_test_case_t kTests[] = {
    {"f32", test_f32},
    {"f64_bf16", test_f64_bf16},
};
IRON_TEST_MAIN(kTests)
