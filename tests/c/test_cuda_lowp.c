// GPU-free test of the CUDA element-wise kernels on the narrow dtypes
// (s4/u4, the f8 family, f4E2M1FN, f8E8M0FNU: computed widened as XLA:CPU
// does; f6E2M3FN/f6E3M2FN: select and converts from/to every dtype, every
// other op refused by both devices, by name) and of complex tan/tanh at
// infinite/NaN inputs: each op is
// prepared with the CUDA kernels on a fake device and with the host
// kernels; the generated sources are compiled by NVRTC (sm_90a) and, as
// host C++ (cuda_emu.h), run on the CPU on every value (every pair for
// binary ops) of the dtype, and their results must equal the host's bit
// for bit (NaN payloads aside; within a narrow ulp for transcendentals,
// whose f32 libm differs; within rounding for finite complex values).
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "cuda_emu.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_fusion.h"
#include "device/cuda/gen/ops.h"
#include "base/narrow_float.h"
#include "device/host/ew_narrow.h"
#include "host_test_ops.h"
#include "cuda_test_nvrtc.h"
#include "test.h"

static iron_cuda_api_t g_api;
static bool g_have_nvrtc;

static void load_nvrtc(void) {
  g_have_nvrtc = cuda_test_load_nvrtc(&g_api);
}

static iron_cuda_kernel_table_t g_table;

static const iron_kernel_t *cuda_kernel(iron_op_kind_t k) {
  static bool init;
  if (!init) {
    init = true;
    iron_cuda_register_elementwise(g_table);
    iron_cuda_register_shape(g_table);
  }
  return g_table[k];
}

// --- cases -----------------------------------------------------------------

enum { CMP_EXACT = 0, CMP_ULP, CMP_CPLX };

#define MAX_CASES 1200
typedef struct emu_case {
  char what[96];
  char *src, *name;
  int nin;
  iron_tensor_t *in[3], *want;
  int cmp;
  bool ops;  // an op-generator source (cuda_ops_gen prelude)
} emu_case_t;
static emu_case_t g_cases[MAX_CASES];
static int g_ncases;
static iron_cuda_device_t *g_dev;

static int g_host_refused, g_both_refused;
static int g_f6_refused, g_f6_run;  // cases with an f6 operand or result
static int64_t g_ulp_elems;  // transcendental elements one narrow ulp off

// Prepares b with the CUDA and the host kernels; runs the host's on `in`
// and queues the generated kernel. A refusal by both is allowed (counted);
// by one side only it fails.
static void add_case(ht_op_t *b, iron_tensor_t **in, int cmp,
                     const char *what) {
  const iron_kernel_t *k = cuda_kernel(b->op.kind);
  CHECK(k != NULL);
  if (!k) return;
  iron_region_t *regions[1] = {NULL};
  void *params = NULL;
  iron_status_t cst = k->prepare_on((iron_device_t *)g_dev, &b->op, regions,
                                    &params);
  iron_tensor_t *want = ht_tensor_like(&b->result_types[0]);
  iron_status_t hst = ht_run(b, NULL, NULL, in, &want);
  bool f6 = iron_narrow_is_f6(b->result_types[0].dtype);
  for (uint32_t i = 0; i < b->op.num_operands; ++i)
    f6 = f6 || iron_narrow_is_f6(b->operand_types[i].dtype);
  if (f6 && cst) {
    // What the host refuses on f6, CUDA refuses at prepare time naming
    // the op (and the dtype).
    g_f6_refused++;
    const char *m = iron_status_message(cst);
    CHECK(iron_status_code(cst) == IRON_STATUS_UNIMPLEMENTED);
    CHECK(m && strstr(m, b->op.name) && strstr(m, "f6E"));
  } else if (f6) {
    g_f6_run++;
  }
  if (cst || hst) {
    bool both = cst && hst;
    if (both) {
      g_both_refused++;
    } else {
      fprintf(stderr, "%s: %s refused: %s\n", what, cst ? "CUDA" : "host",
              iron_status_message(cst ? cst : hst));
    }
    CHECK(both);
    if (!cst) free(params);
    iron_status_free(cst);
    iron_status_free(hst);
    ht_tensor_free(want);
    for (uint32_t i = 0; i < b->op.num_operands; ++i) ht_tensor_free(in[i]);
    if (hst) g_host_refused++;
    return;
  }
  // (bitcast_convert's params start with the element-wise params.)
  const iron_cuda_ew_params_t *p = params;
  size_t np = iron_cuda_compiler_pending_count(g_dev);
  const char *src = NULL;
  // The source that holds the kernel (requests are deduplicated).
  for (size_t i = 0; i < np && !src; ++i) {
    const char *s = iron_cuda_compiler_pending_source(g_dev, i);
    if (strstr(s, p->fn->name)) src = s;
  }
  CHECK(src != NULL && g_ncases < MAX_CASES);
  if (!src || g_ncases >= MAX_CASES) {
    free(params);
    return;
  }
  emu_case_t *c = &g_cases[g_ncases++];
  snprintf(c->what, sizeof(c->what), "%s", what);
  c->src = strdup(src);
  c->name = strdup(p->fn->name);
  c->nin = (int)b->op.num_operands;
  for (int i = 0; i < c->nin; ++i) c->in[i] = in[i];
  c->want = want;
  c->cmp = cmp;
  free(params);
}

// Every value of a narrow dtype (f8E8M0FNU: all but 0x00, 2^-127, an f32
// denormal that XLA:CPU's f32 kernels treat differently from op to op).
static int narrow_count(iron_dtype_t dt) {
  int bits = iron_dtype_bits(dt);
  return dt == IRON_DTYPE_F8E8M0FNU ? 255 : 1 << bits;
}
static uint8_t narrow_value(iron_dtype_t dt, int i) {
  return (uint8_t)(dt == IRON_DTYPE_F8E8M0FNU ? i + 1 : i);
}

static iron_tensor_t *all_values(iron_dtype_t dt, int reps, bool tile) {
  int n = narrow_count(dt);
  int64_t dims[1] = {(int64_t)n * reps};
  iron_tensor_t *t = ht_tensor(dt, 1, dims);
  uint8_t *d = t->data;
  for (int r = 0; r < reps; ++r)
    for (int i = 0; i < n; ++i)
      d[r * n + i] = narrow_value(dt, tile ? i : r);
  return t;
}

static bool is_transcendental(iron_op_kind_t k) {
  switch (k) {
    case IRON_OP_EXPONENTIAL: case IRON_OP_EXPONENTIAL_MINUS_ONE:
    case IRON_OP_LOG: case IRON_OP_LOG_PLUS_ONE: case IRON_OP_LOGISTIC:
    case IRON_OP_RSQRT: case IRON_OP_CBRT: case IRON_OP_SINE:
    case IRON_OP_COSINE: case IRON_OP_TAN: case IRON_OP_TANH:
    case IRON_OP_ATAN2: case IRON_OP_POWER:
      return true;
    default:
      return false;
  }
}

static void attr_enum(ht_op_t *b, const char *name, iron_enum_kind_t kind,
                      int32_t v) {
  uint32_t i = b->op.num_attrs++;
  b->attrs[i].kind = IRON_ATTR_ENUM;
  b->attrs[i].enumv.kind = kind;
  b->attrs[i].enumv.value = v;
  b->named[i].name = name;
  b->named[i].value = &b->attrs[i];
}

static void add_narrow_cases(iron_dtype_t dt) {
  bool flt = iron_dtype_is_float(dt);
  int n = narrow_count(dt);
  char what[96];
  ht_op_t b;
  // Binary ops on every pair.
  static const iron_op_kind_t kBin[] = {
      IRON_OP_ADD, IRON_OP_SUBTRACT, IRON_OP_MULTIPLY, IRON_OP_DIVIDE,
      IRON_OP_REMAINDER, IRON_OP_MAXIMUM, IRON_OP_MINIMUM, IRON_OP_POWER,
      IRON_OP_ATAN2, IRON_OP_SHIFT_LEFT, IRON_OP_SHIFT_RIGHT_ARITHMETIC,
      IRON_OP_SHIFT_RIGHT_LOGICAL, IRON_OP_AND, IRON_OP_OR, IRON_OP_XOR};
  for (size_t k = 0; k < sizeof(kBin) / sizeof(kBin[0]); ++k) {
    // (By name: subtract sits between shift_left and xor in ops.def.)
    bool int_only = false;
    if (kBin[k] == IRON_OP_SHIFT_LEFT || kBin[k] == IRON_OP_AND ||
        kBin[k] == IRON_OP_OR || kBin[k] == IRON_OP_XOR ||
        kBin[k] == IRON_OP_SHIFT_RIGHT_ARITHMETIC ||
        kBin[k] == IRON_OP_SHIFT_RIGHT_LOGICAL)
      int_only = true;
    if (int_only && flt) continue;
    if (kBin[k] == IRON_OP_ATAN2 && !flt) continue;
    int64_t dims[1] = {(int64_t)n * n};
    ht_init(&b, kBin[k]);
    ht_operand(&b, dt, 1, dims);
    ht_operand(&b, dt, 1, dims);
    ht_result(&b, dt, 1, dims);
    iron_tensor_t *in[2] = {all_values(dt, n, false), all_values(dt, n, true)};
    snprintf(what, sizeof(what), "%s %s", iron_op_kind_name(kBin[k]),
             iron_dtype_name(dt));
    add_case(&b, in, is_transcendental(kBin[k]) ? CMP_ULP : CMP_EXACT, what);
  }
  // compare: every direction; TOTALORDER for floats.
  for (int dir = 0; dir < 6 + flt; ++dir) {
    int64_t dims[1] = {(int64_t)n * n};
    ht_init(&b, IRON_OP_COMPARE);
    ht_operand(&b, dt, 1, dims);
    ht_operand(&b, dt, 1, dims);
    ht_result(&b, IRON_DTYPE_PRED, 1, dims);
    attr_enum(&b, "comparison_direction", IRON_ENUM_COMPARISON_DIRECTION,
              dir % 6);
    attr_enum(&b, "compare_type", IRON_ENUM_COMPARISON_TYPE,
              dir == 6 ? IRON_CMP_TYPE_TOTALORDER
              : flt    ? IRON_CMP_TYPE_FLOAT
              : iron_dtype_is_signed_int(dt) ? IRON_CMP_TYPE_SIGNED
                                             : IRON_CMP_TYPE_UNSIGNED);
    iron_tensor_t *in[2] = {all_values(dt, n, false), all_values(dt, n, true)};
    snprintf(what, sizeof(what), "compare %d %s", dir, iron_dtype_name(dt));
    add_case(&b, in, CMP_EXACT, what);
  }
  // Unary ops on every value.
  static const iron_op_kind_t kUn[] = {
      IRON_OP_NEGATE, IRON_OP_ABS, IRON_OP_SIGN, IRON_OP_FLOOR, IRON_OP_CEIL,
      IRON_OP_ROUND_NEAREST_AFZ, IRON_OP_ROUND_NEAREST_EVEN, IRON_OP_SQRT,
      IRON_OP_IS_FINITE, IRON_OP_EXPONENTIAL, IRON_OP_EXPONENTIAL_MINUS_ONE,
      IRON_OP_LOG, IRON_OP_LOG_PLUS_ONE, IRON_OP_LOGISTIC, IRON_OP_RSQRT,
      IRON_OP_CBRT, IRON_OP_SINE, IRON_OP_COSINE, IRON_OP_TAN, IRON_OP_TANH,
      IRON_OP_NOT, IRON_OP_POPCNT, IRON_OP_CLZ};
  for (size_t k = 0; k < sizeof(kUn) / sizeof(kUn[0]); ++k) {
    bool int_only = kUn[k] == IRON_OP_NOT || kUn[k] == IRON_OP_POPCNT ||
                    kUn[k] == IRON_OP_CLZ;
    bool any = kUn[k] == IRON_OP_NEGATE || kUn[k] == IRON_OP_ABS ||
               kUn[k] == IRON_OP_SIGN;
    if (!any && int_only == flt) continue;
    int64_t dims[1] = {n};
    ht_init(&b, kUn[k]);
    ht_operand(&b, dt, 1, dims);
    ht_result(&b, kUn[k] == IRON_OP_IS_FINITE ? IRON_DTYPE_PRED : dt, 1, dims);
    iron_tensor_t *in[1] = {all_values(dt, 1, true)};
    snprintf(what, sizeof(what), "%s %s", iron_op_kind_name(kUn[k]),
             iron_dtype_name(dt));
    add_case(&b, in, is_transcendental(kUn[k]) ? CMP_ULP : CMP_EXACT, what);
  }
  // clamp with scalar bounds; select.
  {
    int64_t dims[1] = {n};
    ht_init(&b, IRON_OP_CLAMP);
    ht_operand(&b, dt, 0, dims);
    ht_operand(&b, dt, 1, dims);
    ht_operand(&b, dt, 0, dims);
    ht_result(&b, dt, 1, dims);
    iron_tensor_t *lo = ht_tensor(dt, 0, dims), *hi = ht_tensor(dt, 0, dims);
    *(uint8_t *)lo->data = narrow_value(dt, 3);
    *(uint8_t *)hi->data = narrow_value(dt, (40 % n + n - 2) % n);
    iron_tensor_t *in[3] = {lo, all_values(dt, 1, true), hi};
    snprintf(what, sizeof(what), "clamp %s", iron_dtype_name(dt));
    add_case(&b, in, CMP_EXACT, what);
    ht_init(&b, IRON_OP_SELECT);
    ht_operand(&b, IRON_DTYPE_PRED, 1, dims);
    ht_operand(&b, dt, 1, dims);
    ht_operand(&b, dt, 0, dims);
    ht_result(&b, dt, 1, dims);
    iron_tensor_t *p = ht_tensor(IRON_DTYPE_PRED, 1, dims);
    for (int i = 0; i < n; ++i) ((uint8_t *)p->data)[i] = (uint8_t)(i % 3 == 0);
    iron_tensor_t *h2 = ht_tensor(dt, 0, dims);
    *(uint8_t *)h2->data = narrow_value(dt, n / 2);
    iron_tensor_t *sin_[3] = {p, all_values(dt, 1, true), h2};
    snprintf(what, sizeof(what), "select %s", iron_dtype_name(dt));
    add_case(&b, sin_, CMP_EXACT, what);
  }
  // iota (600 elements: past every narrow float's exact integers).
  if (dt != IRON_DTYPE_F8E8M0FNU) {
    int64_t dims[1] = {600}, dim = 0;
    ht_init(&b, IRON_OP_IOTA);
    ht_result(&b, dt, 1, dims);
    ht_attr_i64(&b, "iota_dimension", 1, &dim);
    snprintf(what, sizeof(what), "iota %s", iron_dtype_name(dt));
    add_case(&b, NULL, CMP_EXACT, what);
  }
  // converts from/to some regular dtypes (only f8E8M0FNU's are generated
  // by the fusion generator; the others have their own kernel, covered by
  // test_cuda_codegen).
  if (dt == IRON_DTYPE_F8E8M0FNU) {
    static const iron_dtype_t kTo[] = {
        IRON_DTYPE_F32, IRON_DTYPE_F64, IRON_DTYPE_BF16, IRON_DTYPE_F16,
        IRON_DTYPE_S32, IRON_DTYPE_PRED, IRON_DTYPE_F8E4M3FN, IRON_DTYPE_C64,
        IRON_DTYPE_U8};
    for (size_t t = 0; t < sizeof(kTo) / sizeof(kTo[0]); ++t) {
      int64_t dims[1] = {256};
      ht_init(&b, IRON_OP_CONVERT);
      ht_operand(&b, dt, 1, dims);
      ht_result(&b, kTo[t], 1, dims);
      iron_tensor_t *x = ht_tensor(dt, 1, dims);
      for (int i = 0; i < 256; ++i) ((uint8_t *)x->data)[i] = (uint8_t)i;
      iron_tensor_t *in[1] = {x};
      snprintf(what, sizeof(what), "convert %s -> %s", iron_dtype_name(dt),
               iron_dtype_name(kTo[t]));
      add_case(&b, in, CMP_EXACT, what);
      // And back, from special and random values of that dtype.
      if (kTo[t] == IRON_DTYPE_PRED || kTo[t] == IRON_DTYPE_C64) continue;
      ht_init(&b, IRON_OP_CONVERT);
      ht_operand(&b, kTo[t], 1, dims);
      ht_result(&b, dt, 1, dims);
      iron_tensor_t *y = ht_tensor(kTo[t], 1, dims);
      ht_fill_bytes(y);
      if (kTo[t] == IRON_DTYPE_F32) {
        static const float kSpec[] = {0.0f, -0.0f, 1.0f, 1.5f, 1.4999f,
                                      0.75f, 0.7f, -1.0f, 3e38f, INFINITY,
                                      -INFINITY, NAN, 0x1p-127f,
                                      0x1.8p-127f, 1e-40f, 0x1p-128f};
        memcpy(y->data, kSpec, sizeof(kSpec));
      }
      iron_tensor_t *in2[1] = {y};
      snprintf(what, sizeof(what), "convert %s -> %s",
               iron_dtype_name(kTo[t]), iron_dtype_name(dt));
      add_case(&b, in2, CMP_EXACT, what);
    }
  }
}

// The f6 types: convert from every byte (the 64 encodings, and the bits
// above them, which both devices ignore) to every dtype, and to f6 from
// values of every dtype that probe the rounding (every f16/bf16 and narrow
// encoding; for f32/f64/complex a 1/64 grid past both f6 ranges, which
// holds every halfway point, with each point's neighbours one ulp away,
// specials and random bits; small and random integers). Converts with
// f8E8M0FNU on a side come from the fusion generator, the others from
// gen/convert_narrow.c. (test_host_elementwise's f6_convert checks the
// host against ml_dtypes.)
static const iron_dtype_t kEvery[] = {
    IRON_DTYPE_PRED,       IRON_DTYPE_S8,          IRON_DTYPE_S16,
    IRON_DTYPE_S32,        IRON_DTYPE_S64,         IRON_DTYPE_U8,
    IRON_DTYPE_U16,        IRON_DTYPE_U32,         IRON_DTYPE_U64,
    IRON_DTYPE_F16,        IRON_DTYPE_BF16,        IRON_DTYPE_F32,
    IRON_DTYPE_F64,        IRON_DTYPE_C64,         IRON_DTYPE_C128,
    IRON_DTYPE_S4,         IRON_DTYPE_U4,          IRON_DTYPE_S2,
    IRON_DTYPE_U2,         IRON_DTYPE_F8E5M2,      IRON_DTYPE_F8E4M3,
    IRON_DTYPE_F8E3M4,     IRON_DTYPE_F8E4M3FN,    IRON_DTYPE_F8E4M3FNUZ,
    IRON_DTYPE_F8E5M2FNUZ, IRON_DTYPE_F8E4M3B11FNUZ, IRON_DTYPE_F4E2M1FN,
    IRON_DTYPE_F8E8M0FNU,  IRON_DTYPE_F6E2M3FN,    IRON_DTYPE_F6E3M2FN};

// Element i of a probe of real value v (complex: imaginary part from the
// random bits already there).
static void put_real(iron_tensor_t *t, int64_t i, double v) {
  switch (t->dtype) {
    case IRON_DTYPE_F32: ((float *)t->data)[i] = (float)v; break;
    case IRON_DTYPE_F64: ((double *)t->data)[i] = v; break;
    case IRON_DTYPE_C64: ((float *)t->data)[2 * i] = (float)v; break;
    default: ((double *)t->data)[2 * i] = v; break;  // c128
  }
}

static iron_tensor_t *f6_probe(iron_dtype_t dt) {
  int bits = iron_dtype_bits(dt);
  bool wide = dt == IRON_DTYPE_F64 || dt == IRON_DTYPE_C128;
  int64_t n;
  if (dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16) {
    n = 65536;
  } else if (iron_ew_narrow_is(dt)) {
    n = 256;
  } else if (iron_dtype_is_float(dt) || dt == IRON_DTYPE_C64 ||
             dt == IRON_DTYPE_C128) {
    n = 3 * 4609 + 64 + 1024;
  } else {
    n = 2048;
  }
  iron_tensor_t *t = ht_tensor(dt, 1, &n);
  ht_fill_bytes(t);
  if (dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16) {
    for (int64_t i = 0; i < n; ++i) ((uint16_t *)t->data)[i] = (uint16_t)i;
  } else if (iron_ew_narrow_is(dt)) {
    // Every encoding (the sub-byte ones in the low bits).
    for (int64_t i = 0; i < n; ++i)
      ((uint8_t *)t->data)[i] = (uint8_t)(bits < 8 ? i & ((1 << bits) - 1) : i);
  } else if (iron_dtype_is_float(dt) || dt == IRON_DTYPE_C64 ||
             dt == IRON_DTYPE_C128) {
    int64_t i = 0;
    for (int k = -2304; k <= 2304; ++k) {  // +-36 in steps of 1/64
      double v = k / 64.0;
      put_real(t, i++, v);
      put_real(t, i++, wide ? nextafter(v, INFINITY)
                            : (double)nextafterf((float)v, INFINITY));
      put_real(t, i++, wide ? nextafter(v, -INFINITY)
                            : (double)nextafterf((float)v, -INFINITY));
    }
    static const double kSpec[] = {
        0.0,       -0.0,     INFINITY, -INFINITY, NAN,      -NAN,
        1e-40,     -1e-40,   1e-310,   -1e-310,   1e30,     -1e30,
        1e300,     65504,    1e-3,     -1e-3,     0.0625,   0.03125,
        0.09375,   0.046875, 7.5,      7.75,      -7.75,    8.0,
        28.0,      30.0,     32.0,     -31.99,    0.124999, 0.0625001,
        3.5e38,    -3.5e38,  0.15,     0.1,       2.0,      2.25};
    for (size_t k = 0; k < sizeof(kSpec) / sizeof(kSpec[0]); ++k)
      put_real(t, i++, kSpec[k]);
    // The rest keep their random bits.
  } else {  // integers (and pred): small values, then random bits
    size_t es = iron_dtype_size(dt);
    for (int64_t i = 0; i < 600; ++i) {
      int64_t v = dt == IRON_DTYPE_PRED ? (i & 1) : i - 300;
      memcpy((char *)t->data + (size_t)i * es, &v, es);
    }
  }
  return t;
}

static void add_f6_cases(void) {
  const size_t ne = sizeof(kEvery) / sizeof(kEvery[0]);
  for (int w = 0; w < 2; ++w) {
    iron_dtype_t f6 = w ? IRON_DTYPE_F6E3M2FN : IRON_DTYPE_F6E2M3FN;
    for (size_t j = 0; j < ne; ++j) {
      iron_dtype_t dt = kEvery[j];
      char what[96];
      ht_op_t b;
      // f6 -> dt: every byte.
      int64_t dims[1] = {256};
      ht_init(&b, IRON_OP_CONVERT);
      ht_operand(&b, f6, 1, dims);
      ht_result(&b, dt, 1, dims);
      iron_tensor_t *x = ht_tensor(f6, 1, dims);
      for (int i = 0; i < 256; ++i) ((uint8_t *)x->data)[i] = (uint8_t)i;
      iron_tensor_t *in[1] = {x};
      snprintf(what, sizeof(what), "convert %s -> %s", iron_dtype_name(f6),
               iron_dtype_name(dt));
      add_case(&b, in, CMP_EXACT, what);
      // dt -> f6: the probe.
      iron_tensor_t *y = f6_probe(dt);
      ht_init(&b, IRON_OP_CONVERT);
      ht_operand(&b, dt, 1, y->dims);
      ht_result(&b, f6, 1, y->dims);
      iron_tensor_t *in2[1] = {y};
      snprintf(what, sizeof(what), "convert %s -> %s", iron_dtype_name(dt),
               iron_dtype_name(f6));
      add_case(&b, in2, CMP_EXACT, what);
    }
    // A one-element operand broadcast to the result.
    {
      int64_t one[1] = {1}, dims[1] = {7};
      ht_op_t b;
      ht_init(&b, IRON_OP_CONVERT);
      ht_operand(&b, IRON_DTYPE_F32, 1, one);
      ht_result(&b, f6, 1, dims);
      iron_tensor_t *x = ht_tensor(IRON_DTYPE_F32, 1, one);
      ((float *)x->data)[0] = -2.7f;
      iron_tensor_t *in[1] = {x};
      add_case(&b, in, CMP_EXACT, "convert f32 scalar -> f6");
    }
  }
}

// bitcast_convert with a sub-byte side (repacked as the host does).
static void add_bitcast_cases(void) {
  static const struct {
    iron_dtype_t from, to;
    int rin, rout;
    int64_t din[2], dout[2];
  } kB[] = {
      {IRON_DTYPE_S4, IRON_DTYPE_S8, 2, 1, {16, 2}, {16}},
      {IRON_DTYPE_U4, IRON_DTYPE_F16, 2, 1, {8, 4}, {8}},
      {IRON_DTYPE_S4, IRON_DTYPE_U4, 1, 1, {32}, {32}},
      {IRON_DTYPE_F32, IRON_DTYPE_S4, 1, 2, {4}, {4, 8}},
      {IRON_DTYPE_S8, IRON_DTYPE_U4, 1, 2, {16}, {16, 2}},
      {IRON_DTYPE_U2, IRON_DTYPE_U8, 2, 1, {16, 4}, {16}},
      {IRON_DTYPE_U16, IRON_DTYPE_U2, 1, 2, {8}, {8, 8}},
      {IRON_DTYPE_F4E2M1FN, IRON_DTYPE_S8, 2, 1, {8, 2}, {8}},
  };
  for (size_t i = 0; i < sizeof(kB) / sizeof(kB[0]); ++i) {
    ht_op_t b;
    ht_init(&b, IRON_OP_BITCAST_CONVERT);
    ht_operand(&b, kB[i].from, kB[i].rin, kB[i].din);
    ht_result(&b, kB[i].to, kB[i].rout, kB[i].dout);
    iron_tensor_t *x = ht_tensor_like(&b.operand_types[0]);
    ht_fill_bytes(x);
    iron_tensor_t *in[1] = {x};
    char what[64];
    snprintf(what, sizeof(what), "bitcast %s -> %s",
             iron_dtype_name(kB[i].from), iron_dtype_name(kB[i].to));
    add_case(&b, in, CMP_EXACT, what);
  }
}

// The dot's pack kernels for narrow operands/results (cuda_dot.c): f8/f4
// -> f32 exactly, f32 -> f8/f4 through f16 as the host's dot stores its
// f32 results, s4/u4 -> s8/u8, f8E8M0FNU <-> f32 by the f32 bits.
static void add_pack_cases(void) {
  static const iron_dtype_t kF[] = {
      IRON_DTYPE_F8E4M3FN, IRON_DTYPE_F8E5M2, IRON_DTYPE_F8E4M3B11FNUZ,
      IRON_DTYPE_F8E4M3FNUZ, IRON_DTYPE_F8E5M2FNUZ, IRON_DTYPE_F8E4M3,
      IRON_DTYPE_F8E3M4, IRON_DTYPE_F4E2M1FN, IRON_DTYPE_S4, IRON_DTYPE_U4,
      IRON_DTYPE_F8E8M0FNU};
  int64_t n = 256, one = 1;
  for (size_t f = 0; f < sizeof(kF) / sizeof(kF[0]); ++f) {
    iron_dtype_t dt = kF[f];
    bool n4 = dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4;
    for (int dir = 0; dir < (n4 ? 1 : 2); ++dir) {
      iron_dtype_t wide = n4 ? (dt == IRON_DTYPE_S4 ? IRON_DTYPE_S8
                                                    : IRON_DTYPE_U8)
                             : IRON_DTYPE_F32;
      iron_dtype_t from = dir ? wide : dt, to = dir ? dt : wide;
      char name[48];
      snprintf(name, sizeof(name), "iron_lowp_pack_%zu_%d", f, dir);
      char *src = NULL;
      iron_status_t st =
          iron_cuda_gen_pack(name, from, to, 1, &n, &one, &src);
      CHECK_OK(st);
      if (st || g_ncases >= MAX_CASES) {
        free(src);
        continue;
      }
      iron_tensor_t *x = ht_tensor(from, 1, &n);
      iron_tensor_t *want = ht_tensor(to, 1, &n);
      for (int64_t i = 0; i < n; ++i) {
        if (n4) {
          ((uint8_t *)x->data)[i] = (uint8_t)i;
          int v = (int)(i & 0xf);
          ((int8_t *)want->data)[i] =
              (int8_t)(dt == IRON_DTYPE_S4 && v >= 8 ? v - 16 : v);
        } else if (!dir) {
          ((uint8_t *)x->data)[i] = (uint8_t)i;
          ((float *)want->data)[i] =
              (float)iron_ew_narrow_dot_load(dt, (unsigned)i);
        } else {
          // Values around the formats' ranges, specials at the start.
          static const float kSpec[] = {0.0f, -0.0f, INFINITY, -INFINITY,
                                        NAN, 65504.0f, 65520.0f, 1e-8f,
                                        448.0f, 464.0f, 57344.0f, 6.0f,
                                        7.0f, 0.25f, 0x1p-10f, 0x1p-17f,
                                        1e-40f, -3e-39f, 0x1.8p-126f};
          float v = i < 19 ? kSpec[i]
                           : (float)((double)(int64_t)(ht_rand() % 20001 - 10000) /
                                     (double)(1 << (ht_rand() % 24)));
          ((float *)x->data)[i] = v;
          ((uint8_t *)want->data)[i] = iron_ew_narrow_dot_store(dt, v);
        }
      }
      emu_case_t *c = &g_cases[g_ncases++];
      snprintf(c->what, sizeof(c->what), "pack %s -> %s",
               iron_dtype_name(from), iron_dtype_name(to));
      c->src = src;
      c->name = strdup(name);
      c->nin = 1;
      c->in[0] = x;
      c->want = want;
      c->cmp = CMP_EXACT;
      c->ops = true;
    }
  }
}

// complex tan/tanh on the grid of the conformance case
// tan_tanh_complex_specials.
static void add_cplx_cases(void) {
  static const double kV[] = {0.0, -0.0, 1.0, -1.0, 0.5, 20.0, -400.0,
                              1e30, INFINITY, -INFINITY, NAN};
  const int nv = (int)(sizeof(kV) / sizeof(kV[0]));
  for (int w = 0; w < 2; ++w) {
    iron_dtype_t dt = w ? IRON_DTYPE_C128 : IRON_DTYPE_C64;
    for (int t = 0; t < 2; ++t) {
      int64_t dims[1] = {nv * nv};
      ht_op_t b;
      ht_init(&b, t ? IRON_OP_TANH : IRON_OP_TAN);
      ht_operand(&b, dt, 1, dims);
      ht_result(&b, dt, 1, dims);
      iron_tensor_t *x = ht_tensor(dt, 1, dims);
      for (int i = 0; i < nv; ++i) {
        for (int j = 0; j < nv; ++j) {
          if (w) {
            double *p = (double *)x->data + 2 * (i * nv + j);
            p[0] = kV[i];
            p[1] = kV[j];
          } else {
            float *p = (float *)x->data + 2 * (i * nv + j);
            p[0] = (float)kV[i];
            p[1] = (float)kV[j];
          }
        }
      }
      iron_tensor_t *in[1] = {x};
      char what[64];
      snprintf(what, sizeof(what), "%s %s specials", t ? "tanh" : "tan",
               iron_dtype_name(dt));
      add_case(&b, in, CMP_CPLX, what);
    }
  }
}

// --- comparison --------------------------------------------------------------

static bool narrow_nan(iron_dtype_t dt, uint8_t v) {
  if (dt == IRON_DTYPE_F8E8M0FNU) return v == 0xff;
  return isnan(iron_narrow_float_decode(dt, v));
}

static bool part_close(double g, double w, double rtol) {
  if (isnan(w) || isnan(g)) return isnan(w) && isnan(g);
  if (isinf(w) || isinf(g)) return g == w;
  return fabs(g - w) <= rtol * fabs(w) + 1e-300;
}

static bool elem_same(const emu_case_t *c, const uint8_t *g, const uint8_t *w,
                      int64_t i) {
  iron_dtype_t dt = c->want->dtype;
  size_t es = iron_dtype_size(dt);
  const uint8_t *gp = g + i * es, *wp = w + i * es;
  if (c->cmp == CMP_CPLX) {
    if (dt == IRON_DTYPE_C64) {
      float a[2], b[2];
      memcpy(a, gp, 8);
      memcpy(b, wp, 8);
      return part_close(a[0], b[0], 1e-5) && part_close(a[1], b[1], 1e-5);
    }
    double a[2], b[2];
    memcpy(a, gp, 16);
    memcpy(b, wp, 16);
    return part_close(a[0], b[0], 1e-12) && part_close(a[1], b[1], 1e-12);
  }
  if (dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4) {
    return ((gp[0] ^ wp[0]) & 0xf) == 0;
  }
  if (dt == IRON_DTYPE_S2 || dt == IRON_DTYPE_U2) {
    return ((gp[0] ^ wp[0]) & 0x3) == 0;
  }
  if (iron_ew_narrow_is(dt)) {
    if (narrow_nan(dt, gp[0]) || narrow_nan(dt, wp[0]))
      return narrow_nan(dt, gp[0]) && narrow_nan(dt, wp[0]);
    if (gp[0] == wp[0]) return true;
    if (c->cmp != CMP_ULP) return false;
    // One step of the encoding apart, same sign (E8M0 has none).
    int bits = iron_dtype_bits(dt);
    unsigned sb = dt == IRON_DTYPE_F8E8M0FNU ? 0 : 1u << (bits - 1);
    if ((gp[0] & sb) != (wp[0] & sb)) return false;
    int d = (int)(gp[0] & ~sb) - (int)(wp[0] & ~sb);
    if (d < -1 || d > 1) return false;
    g_ulp_elems++;
    return true;
  }
  if (dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16) {
    uint16_t a, b;
    memcpy(&a, gp, 2);
    memcpy(&b, wp, 2);
    bool an = (a & 0x7fff) > (dt == IRON_DTYPE_F16 ? 0x7c00 : 0x7f80);
    bool bn = (b & 0x7fff) > (dt == IRON_DTYPE_F16 ? 0x7c00 : 0x7f80);
    return an || bn ? an && bn : a == b;
  }
  if (dt == IRON_DTYPE_F32 || dt == IRON_DTYPE_C64) {
    for (size_t k = 0; k < es; k += 4) {
      float a, b;
      memcpy(&a, gp + k, 4);
      memcpy(&b, wp + k, 4);
      if (isnan(a) || isnan(b)) {
        if (!(isnan(a) && isnan(b))) return false;
      } else if (memcmp(gp + k, wp + k, 4) != 0) {
        return false;
      }
    }
    return true;
  }
  if (dt == IRON_DTYPE_F64) {
    double a, b;
    memcpy(&a, gp, 8);
    memcpy(&b, wp, 8);
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  }
  return memcmp(gp, wp, es) == 0;
}

typedef void (*k0_t)(void *);
typedef void (*k1_t)(const void *, void *);
typedef void (*k2_t)(const void *, const void *, void *);
typedef void (*k3_t)(const void *, const void *, const void *, void *);

static void run_emulation(void) {
  CHECK(cuda_emu_have_cxx());
  if (!cuda_emu_have_cxx() || g_ncases == 0) return;
  const char **srcs = calloc((size_t)g_ncases, sizeof(*srcs));
  for (int i = 0; i < g_ncases; ++i) srcs[i] = g_cases[i].src;
  cuda_emu_lib_t lib;
  bool built = cuda_emu_build(srcs, g_ncases, iron_cuda_prelude(), &lib);
  free(srcs);
  CHECK(built);
  if (!built) return;
#if defined(__x86_64__)
  // XLA:CPU (and the host kernels) flush f32 denormals, as the device does
  // under -ftz: FTZ and DAZ.
  unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);
#endif
  int bad_cases = 0;
  for (int i = 0; i < g_ncases; ++i) {
    emu_case_t *c = &g_cases[i];
    void *sym = cuda_emu_sym(&lib, c->name);
    CHECK(sym != NULL);
    if (!sym) continue;
    iron_tensor_t *got = ht_tensor(c->want->dtype, c->want->rank,
                                   c->want->dims);
    memset(got->data, 0xa5, got->nbytes);
    void *o = got->data;
    switch (c->nin) {
      case 0: { k0_t f; memcpy(&f, &sym, sizeof(f)); f(o); break; }
      case 1: { k1_t f; memcpy(&f, &sym, sizeof(f)); f(c->in[0]->data, o); break; }
      case 2: {
        k2_t f;
        memcpy(&f, &sym, sizeof(f));
        f(c->in[0]->data, c->in[1]->data, o);
        break;
      }
      default: {
        k3_t f;
        memcpy(&f, &sym, sizeof(f));
        f(c->in[0]->data, c->in[1]->data, c->in[2]->data, o);
        break;
      }
    }
    int64_t nbad = 0, first = -1;
    for (int64_t e = 0; e < got->count; ++e) {
      if (!elem_same(c, got->data, c->want->data, e)) {
        if (first < 0) first = e;
        nbad++;
      }
    }
    if (nbad) {
      size_t es = iron_dtype_size(got->dtype);
      fprintf(stderr, "emulation mismatch: %s: %lld/%lld elements, first %lld:",
              c->what, (long long)nbad, (long long)got->count, (long long)first);
      for (int k = 0; k < c->nin; ++k) {
        const iron_tensor_t *t = c->in[k];
        int64_t at = t->count == 1 ? 0 : first;
        fprintf(stderr, " in%d=0x", k);
        for (size_t q = iron_dtype_size(t->dtype); q-- > 0;)
          fprintf(stderr, "%02x", ((uint8_t *)t->data)[at * iron_dtype_size(t->dtype) + q]);
      }
      fprintf(stderr, " got=0x");
      for (size_t q = es; q-- > 0;)
        fprintf(stderr, "%02x", ((uint8_t *)got->data)[first * es + q]);
      fprintf(stderr, " want=0x");
      for (size_t q = es; q-- > 0;)
        fprintf(stderr, "%02x", ((uint8_t *)c->want->data)[first * es + q]);
      fprintf(stderr, "\n");
      bad_cases++;
    }
    ht_tensor_free(got);
  }
#if defined(__x86_64__)
  _mm_setcsr(csr);
#endif
  CHECK_EQ_INT(bad_cases, 0);
  fprintf(stderr,
          "emulated %d kernels, %d mismatched (%d refused by both); %lld "
          "transcendental results one narrow ulp from the host's\n",
          g_ncases, bad_cases, g_both_refused, (long long)g_ulp_elems);
  cuda_emu_close(&lib);
}

// NVRTC compiles every generated source (one program per source group).
static void compile_all(void) {
  load_nvrtc();
  CHECK(g_have_nvrtc);
  if (!g_have_nvrtc) return;
  const char *prelude = iron_cuda_prelude();
  size_t pl = strlen(prelude);
  // One program: the prelude once, then every kernel body in a namespace.
  size_t len = pl + 1;
  for (int i = 0; i < g_ncases; ++i) len += strlen(g_cases[i].src) + 64;
  char *text = malloc(len);
  size_t at = (size_t)snprintf(text, len, "%s", prelude);
  for (int i = 0; i < g_ncases; ++i) {
    const char *s = g_cases[i].src;
    if (g_cases[i].ops) {  // its own prelude: a program of its own
      void *cb = NULL;
      size_t cs = 0;
      CHECK_OK(iron_cuda_nvrtc_compile(&g_api, s, "sm_90a", &cb, &cs));
      free(cb);
      continue;
    }
    CHECK(strncmp(s, prelude, pl) == 0);
    bool dup = false;
    for (int j = 0; j < i && !dup; ++j) dup = strcmp(g_cases[j].src, s) == 0;
    if (dup) continue;
    at += (size_t)snprintf(text + at, len - at, "namespace n%d {\n%s\n}\n", i,
                           s + pl);
  }
  void *cubin = NULL;
  size_t size = 0;
  iron_status_t st = iron_cuda_nvrtc_compile(&g_api, text, "sm_90a", &cubin,
                                             &size);
  CHECK_OK(st);
  CHECK(size > 0);
  free(cubin);
  free(text);
}

static void test_lowp(void) {
  g_dev = calloc(1, sizeof(*g_dev));
  snprintf(g_dev->arch, sizeof(g_dev->arch), "sm_90a");
  g_dev->num_sms = 132;
  g_dev->api = &g_api;
  static const iron_dtype_t kNarrow[] = {
      IRON_DTYPE_S4,          IRON_DTYPE_U4,          IRON_DTYPE_F8E4M3FN,
      IRON_DTYPE_F8E5M2,      IRON_DTYPE_F8E4M3B11FNUZ, IRON_DTYPE_F8E4M3FNUZ,
      IRON_DTYPE_F8E5M2FNUZ,  IRON_DTYPE_F8E4M3,      IRON_DTYPE_F8E3M4,
      IRON_DTYPE_F4E2M1FN,    IRON_DTYPE_F8E8M0FNU,   IRON_DTYPE_F6E2M3FN,
      IRON_DTYPE_F6E3M2FN};
  for (size_t i = 0; i < sizeof(kNarrow) / sizeof(kNarrow[0]); ++i)
    add_narrow_cases(kNarrow[i]);
  add_f6_cases();
  // f6: select and every convert run, every other op of add_narrow_cases
  // (9 binary and 20 unary float ops, 7 compares, clamp, iota per type) is
  // refused.
  fprintf(stderr, "f6: %d cases run, %d refused by name\n", g_f6_run,
          g_f6_refused);
  CHECK_EQ_INT(g_f6_run, 2 * (1 + 2 * 30 + 1));
  CHECK_EQ_INT(g_f6_refused, 2 * (9 + 7 + 20 + 1 + 1));
  add_cplx_cases();
  add_bitcast_cases();
  add_pack_cases();
  fprintf(stderr, "%d cases generated\n", g_ncases);
  CHECK(g_ncases > 300);
  run_emulation();
  compile_all();
  for (int i = 0; i < g_ncases; ++i) {
    free(g_cases[i].src);
    free(g_cases[i].name);
    for (int k = 0; k < g_cases[i].nin; ++k) ht_tensor_free(g_cases[i].in[k]);
    ht_tensor_free(g_cases[i].want);
  }
  iron_cuda_compiler_destroy(g_dev->compiler);
  free(g_dev);
}

static const iron_test_case_t kTests[] = {
    {"lowp", test_lowp},
};

IRON_TEST_MAIN(kTests)
