// Every op of the CUDA scalar emitter (src/device/cuda/gen/scalar.c) on
// every dtype, through both of its users, GPU-free: a fusion kernel
// (gen/fusion.c, the element-wise mode: what element-wise ops and fusions
// run) and a region body (gen/region.c, the region mode: what reductions,
// scatters, windows, sort comparators and device loops call), each run on
// the CPU as host C++ (cuda_emu.h) over edge values (zeros, signs, limits,
// shift counts past the width, division by zero and MIN / -1, denormals,
// infinities, NaNs) and compared element by element with the host's
// element-wise kernel for the op (NaN payloads aside; transcendentals,
// which the host computes with XLA's approximations, within 16 ulp). The
// region body is
// called the way those kernels call it: operands loaded from storage with
// the dtype table's `ld`, the result stored with `st`.
//
// It also checks the claim of the one emitter: an op a fusion generates,
// a region generates too. Region-mode float arithmetic (add, subtract,
// multiply, divide, max, min) runs unflushed, as the host's reduce loops,
// so elements with a denormal input or result are not compared there, nor
// the region's complex products (the reduce loops' formula, checked by
// test_cuda_complex_emu).
//
// Emulated kernels run with the CPU's FTZ and DAZ on, as the device's
// -ftz flushes f32 (and the host's kernels run). IRON_TEST_VERBOSE=1
// prints every mismatch and refusal.
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "base/half.h"
#include "base/narrow_float.h"
#include "cuda_emu.h"
#include "device/cuda/cuda_fusion.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/region.h"
#include "device/cuda/gen/scalar.h"
#include "device/cuda/gen/types.h"
#include "host_test_ops.h"
#include "region_builder.h"
#include "test.h"

static const iron_dtype_t kDtypes[] = {
    IRON_DTYPE_PRED,      IRON_DTYPE_S8,         IRON_DTYPE_S16,
    IRON_DTYPE_S32,       IRON_DTYPE_S64,        IRON_DTYPE_U8,
    IRON_DTYPE_U16,       IRON_DTYPE_U32,        IRON_DTYPE_U64,
    IRON_DTYPE_F16,       IRON_DTYPE_BF16,       IRON_DTYPE_F32,
    IRON_DTYPE_F64,       IRON_DTYPE_C64,        IRON_DTYPE_C128,
    IRON_DTYPE_S4,        IRON_DTYPE_U4,         IRON_DTYPE_F8E5M2,
    IRON_DTYPE_F8E4M3FN,  IRON_DTYPE_F8E4M3FNUZ, IRON_DTYPE_F4E2M1FN,
    IRON_DTYPE_F8E8M0FNU, IRON_DTYPE_F6E2M3FN,   IRON_DTYPE_F6E3M2FN,
};
#define NUM_DTYPES (int)(sizeof(kDtypes) / sizeof(kDtypes[0]))

// Edge values. Integers are truncated to the dtype's width (two's
// complement), floats rounded to it.
static const int64_t kInts[] = {0,         1,         -1,
                                2,         -2,        3,
                                7,         8,         15,
                                31,        32,        63,
                                64,        -128,      127,
                                255,       -32768,    65535,
                                INT32_MIN, INT32_MAX, (int64_t)UINT32_MAX,
                                INT64_MIN, INT64_MAX, 100};
static const double kFloats[] = {
    0.0,     -0.0,   1.0,    -1.0,  0.5,      -2.5,      3.0,   7.25,
    1e-40,   -3e-42, 1e-310, 65504, 70000.0,  1e30,      -1e30, 1e-5,
    3.14159, -100.5, 2e9,    1e300, INFINITY, -INFINITY, NAN,   0.1};
#define NUM_INTS (int)(sizeof(kInts) / sizeof(kInts[0]))
#define NUM_FLOATS (int)(sizeof(kFloats) / sizeof(kFloats[0]))
// Binary and ternary ops take pairs (triples) of the first few.
#define PAIR_VALUES 14
#define TRIPLE_VALUES 6

static bool is_complex(iron_dtype_t dt) {
  return dt == IRON_DTYPE_C64 || dt == IRON_DTYPE_C128;
}
static bool is_floatish(iron_dtype_t dt) { return iron_cuda_type(dt).is_float; }

// Element k of the value list for dtype dt into `out` (storage bytes).
static int num_values(iron_dtype_t dt) {
  if (dt == IRON_DTYPE_PRED) return 2;
  if (dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4) return 16;
  if (iron_narrow_is_f6(dt)) return 64;  // every encoding
  if (is_floatish(dt) || is_complex(dt)) return NUM_FLOATS;
  return NUM_INTS;
}

static void value_bytes(iron_dtype_t dt, int k, void *out) {
  size_t es = iron_dtype_size(dt);
  memset(out, 0, es);
  if (dt == IRON_DTYPE_PRED) {
    *(uint8_t *)out = (uint8_t)(k & 1);
    return;
  }
  if (dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4) {
    *(uint8_t *)out = (uint8_t)(k & 15);
    return;
  }
  if (iron_narrow_is_f6(dt)) {
    *(uint8_t *)out = (uint8_t)(k & 63);
    return;
  }
  if (!is_floatish(dt) && !is_complex(dt)) {
    int64_t v = kInts[k % NUM_INTS];
    memcpy(out, &v, es);  // low bytes (little-endian)
    return;
  }
  double v = kFloats[k % NUM_FLOATS];
  double im = kFloats[(k * 7 + 3) % NUM_FLOATS];
  switch (dt) {
    case IRON_DTYPE_F16: {
      uint16_t h = iron_f32_to_f16((float)v);
      memcpy(out, &h, 2);
      return;
    }
    case IRON_DTYPE_BF16: {
      uint16_t h = iron_f32_to_bf16((float)v);
      memcpy(out, &h, 2);
      return;
    }
    case IRON_DTYPE_F32: {
      float f = (float)v;
      memcpy(out, &f, 4);
      return;
    }
    case IRON_DTYPE_F64:
      memcpy(out, &v, 8);
      return;
    case IRON_DTYPE_C64: {
      float f[2] = {(float)v, (float)im};
      memcpy(out, f, 8);
      return;
    }
    case IRON_DTYPE_C128: {
      double d[2] = {v, im};
      memcpy(out, d, 16);
      return;
    }
    case IRON_DTYPE_F8E8M0FNU:
      *(uint8_t *)out = iron_e8m0_from_f64(v);
      return;
    default:
      *(uint8_t *)out = iron_narrow_float_encode(dt, v);
      return;
  }
}

// The value of element bytes `p` of dtype dt as double (complex: one part,
// `part`), for NaN and denormal checks.
static double as_double(iron_dtype_t dt, const unsigned char *p, int part) {
  switch (dt) {
    case IRON_DTYPE_F16: {
      uint16_t h;
      memcpy(&h, p, 2);
      return iron_f16_to_f32(h);
    }
    case IRON_DTYPE_BF16: {
      uint16_t h;
      memcpy(&h, p, 2);
      return iron_bf16_to_f32(h);
    }
    case IRON_DTYPE_F32:
    case IRON_DTYPE_C64: {
      float f;
      memcpy(&f, p + 4 * part, 4);
      return f;
    }
    case IRON_DTYPE_F64:
    case IRON_DTYPE_C128: {
      double d;
      memcpy(&d, p + 8 * part, 8);
      return d;
    }
    case IRON_DTYPE_F8E8M0FNU:
      return p[0] == 0xff ? NAN : ldexp(1.0, (int)p[0] - 127);
    default:
      return iron_narrow_float_decode(dt, p[0]);
  }
}

// A float (part) an f32/f64 flush would change: a non-zero denormal.
static bool is_denormal(iron_dtype_t dt, const unsigned char *p) {
  if (!is_floatish(dt) && !is_complex(dt)) return false;
  bool wide = dt == IRON_DTYPE_F64 || dt == IRON_DTYPE_C128;
  for (int part = 0; part < (is_complex(dt) ? 2 : 1); ++part) {
    double v = fabs(as_double(dt, p, part));
    if (v != 0 && v < (wide ? 2.2250738585072014e-308 : 1.17549435e-38))
      return true;
  }
  return false;
}

// Ops computed by libm on the device and by XLA's own approximations on
// the host: a few ulp apart (the conformance suite's TRANS tolerances).
static bool transcendental(iron_op_kind_t k) {
  switch (k) {
    case IRON_OP_EXPONENTIAL:
    case IRON_OP_EXPONENTIAL_MINUS_ONE:
    case IRON_OP_LOG:
    case IRON_OP_LOG_PLUS_ONE:
    case IRON_OP_SINE:
    case IRON_OP_COSINE:
    case IRON_OP_TAN:
    case IRON_OP_TANH:
    case IRON_OP_POWER:
    case IRON_OP_ATAN2:
    case IRON_OP_CBRT:
    case IRON_OP_LOGISTIC:
    case IRON_OP_RSQRT:
      return true;
    default:
      return false;
  }
}

// Distance in units of the last place of two f32/f64 parts (same sign).
static uint64_t ulps(const unsigned char *a, const unsigned char *b,
                     size_t size) {
  uint64_t x = 0, y = 0;
  memcpy(&x, a, size);
  memcpy(&y, b, size);
  uint64_t sign = (uint64_t)1 << (8 * size - 1);
  if ((x & sign) != (y & sign)) return UINT64_MAX;
  return x > y ? x - y : y - x;
}

// Equal bytes, or both NaN (per part), or within `max_ulps` (parts of
// f32/f64 storage).
static bool same_value(iron_dtype_t dt, const unsigned char *a,
                       const unsigned char *b, uint64_t max_ulps) {
  size_t es = iron_dtype_size(dt);
  if (memcmp(a, b, es) == 0) return true;
  if (!is_floatish(dt) && !is_complex(dt)) return false;
  if (max_ulps && (es == 4 || es == 8 || es == 16)) {
    size_t ps = is_complex(dt) ? es / 2 : es;
    bool close = true;
    for (size_t off = 0; off < es && close; off += ps)
      close = ulps(a + off, b + off, ps) <= max_ulps;
    if (close) return true;
  }
  for (int part = 0; part < (is_complex(dt) ? 2 : 1); ++part) {
    double x = as_double(dt, a, part), y = as_double(dt, b, part);
    bool eq = (isnan(x) && isnan(y)) ||
              (!isnan(x) && !isnan(y) && memcmp(&x, &y, sizeof(x)) == 0);
    if (!eq) return false;
  }
  return true;
}

// --- cases -------------------------------------------------------------------

typedef struct scase {
  char what[96];
  ht_op_t op;  // the op on vectors of n elements (host and fusion)
  int64_t n;
  int nin;
  iron_tensor_t *in[3], *want;
  char *fsrc, *fname;     // fusion kernel
  char *rsrc, rname[32];  // region body + harness kernel
  bool region_raw;        // region-mode fold arithmetic (see the file comment)
} scase_t;

#define MAX_CASES 4000
static scase_t *g_cases;
static int g_ncases;
static int g_host_refused, g_cuda_refused, g_region_refused_only;
static int g_f6_refused;  // host refusals on f6 the CUDA code matched

static void add_enum(ht_op_t *b, const char *name, iron_enum_kind_t kind,
                     int32_t v) {
  uint32_t i = b->op.num_attrs++;
  b->attrs[i].kind = IRON_ATTR_ENUM;
  b->attrs[i].enumv.kind = kind;
  b->attrs[i].enumv.value = v;
  b->named[i].name = name;
  b->named[i].value = &b->attrs[i];
}

// Inputs: every value (unary), every pair of the first PAIR_VALUES
// (binary), every triple of the first TRIPLE_VALUES (ternary; select's
// predicate alternates).
static void fill_inputs(scase_t *c, const iron_dtype_t *dts) {
  int nv[3];
  for (int i = 0; i < c->nin; ++i) {
    nv[i] = num_values(dts[i]);
    if (c->nin == 2 && nv[i] > PAIR_VALUES) nv[i] = PAIR_VALUES;
    if (c->nin == 3 && nv[i] > TRIPLE_VALUES) nv[i] = TRIPLE_VALUES;
  }
  int64_t n = 1;
  for (int i = 0; i < c->nin; ++i) n *= nv[i];
  c->n = n;
  for (int i = 0; i < c->nin; ++i) c->in[i] = ht_tensor(dts[i], 1, &n);
  for (int64_t e = 0; e < n; ++e) {
    int64_t r = e;
    for (int i = c->nin - 1; i >= 0; --i) {
      int k = (int)(r % nv[i]);
      r /= nv[i];
      value_bytes(dts[i], k,
                  (char *)c->in[i]->data + e * iron_dtype_size(dts[i]));
    }
  }
}

// The harness of a region body `<name>_body`: every element loaded from
// storage (`ld`), passed to the body, its result stored (`st`).
static void region_harness(iron_cuda_text_t *t, const char *name, int nin,
                           const iron_dtype_t *dts, iron_dtype_t out,
                           int64_t n) {
  iron_cuda_type_t to = iron_cuda_type(out);
  iron_cuda_text_printf(t, "extern \"C\" __global__ void %s(", name);
  for (int i = 0; i < nin; ++i)
    iron_cuda_text_printf(t, "const %s *in%d, ", iron_cuda_type(dts[i]).store,
                          i);
  iron_cuda_text_printf(t,
                        "%s *out0) {\n  for (long long i = 0; i < %lldLL; "
                        "++i) {\n    %s r;\n    %s_body(",
                        to.store, (long long)n, to.comp, name);
  for (int i = 0; i < nin; ++i)
    iron_cuda_text_printf(t, "%s(in%d[i]), ", iron_cuda_type(dts[i]).ld, i);
  iron_cuda_text_printf(t, "&r);\n    out0[i] = %s(r);\n  }\n}\n", to.st);
}

static bool region_raw_op(iron_op_kind_t k, iron_dtype_t dt) {
  if (is_complex(dt)) return k == IRON_OP_MULTIPLY;
  if (!is_floatish(dt)) return false;
  return k == IRON_OP_ADD || k == IRON_OP_SUBTRACT || k == IRON_OP_MULTIPLY ||
         k == IRON_OP_DIVIDE || k == IRON_OP_MAXIMUM || k == IRON_OP_MINIMUM;
}

static iron_status_t region_source(scase_t *c, const iron_dtype_t *dts,
                                   iron_dtype_t out);

// The fusion of the case's op alone, its operands the fusion's inputs.
static iron_status_t op_fusion_source(scase_t *c, char **src, char **name) {
  const iron_ir_op_t *ops[1] = {&c->op.op};
  const iron_ir_value_t *outs[1] = {&c->op.op.results[0]};
  iron_cuda_fusion_t f = {
      .num_ops = 1,
      .ops = ops,
      .num_inputs = c->op.op.num_operands,
      .inputs = (const iron_ir_value_t *const *)c->op.op.operands,
      .num_outputs = 1,
      .outputs = outs,
  };
  return iron_cuda_codegen_fusion(&f, src, name);
}

// An op the host refuses on an f6 operand or result (all but select and
// convert) is refused by the fusion and the region too, by name: CUDA
// runs no more on f6 than the host does.
static void refused_like_host(scase_t *c, const iron_dtype_t *dts,
                              iron_dtype_t out) {
  bool f6 = iron_narrow_is_f6(out);
  for (int i = 0; i < c->nin; ++i) f6 = f6 || iron_narrow_is_f6(dts[i]);
  if (!f6) return;
  char *src = NULL, *name = NULL;
  iron_status_t st[2] = {op_fusion_source(c, &src, &name),
                         region_source(c, dts, out)};
  for (int m = 0; m < 2; ++m) {
    const char *msg = st[m] ? iron_status_message(st[m]) : NULL;
    if (!st[m])
      fprintf(stderr, "%s: the host refuses, the CUDA %s generates it\n",
              c->what, m ? "region" : "fusion");
    CHECK(iron_status_code(st[m]) == IRON_STATUS_UNIMPLEMENTED);
    CHECK(msg && strstr(msg, c->op.op.name) && strstr(msg, "f6E"));
    iron_status_free(st[m]);
  }
  free(src);
  free(name);
  free(c->rsrc);
  c->rsrc = NULL;
  g_f6_refused++;
}

// The region of the case's op on scalars as c->rsrc (body + harness).
static iron_status_t region_source(scase_t *c, const iron_dtype_t *dts,
                                   iron_dtype_t out) {
  rb_t *rb = rb_new();
  iron_ir_value_t *args[3] = {NULL, NULL, NULL};
  for (int i = 0; i < c->nin; ++i) args[i] = rb_arg(rb, dts[i]);
  iron_ir_op_t *rop = rb_op_n(rb, c->op.op.kind, out, c->nin, args);
  rop->num_attrs = c->op.op.num_attrs;
  rop->attrs = c->op.op.attrs;
  rb_return(rb, 1, &rop->results);
  snprintf(c->rname, sizeof(c->rname), "rg_%d", g_ncases);
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  char fn[48];
  snprintf(fn, sizeof(fn), "%s_body", c->rname);
  iron_status_t rs =
      iron_cuda_gen_region_fn(&t, fn, &(iron_region_t){.ir = &rb->region});
  if (!rs) region_harness(&t, c->rname, c->nin, dts, out, c->n);
  if (!rs) {
    CHECK_OK(iron_cuda_text_finish(&t, &c->rsrc));
  } else {
    iron_cuda_text_free(&t);
  }
  free(rb);
  return rs;
}

// Adds the case (the op already built in c->op with n-element operands):
// host reference, fusion source, region source.
static void add_case(scase_t *c, const iron_dtype_t *dts, iron_dtype_t out) {
  bool verbose = getenv("IRON_TEST_VERBOSE") != NULL;
  c->want = ht_tensor(out, 1, &c->n);
  iron_status_t hs = ht_run(&c->op, NULL, NULL, c->in, &c->want);
  if (hs) {  // nothing to compare with
    g_host_refused++;
    iron_status_free(hs);
    refused_like_host(c, dts, out);
    for (int i = 0; i < c->nin; ++i) ht_tensor_free(c->in[i]);
    ht_tensor_free(c->want);
    return;
  }
  // The fusion: the op alone, its operands the fusion's inputs.
  iron_status_t fs = op_fusion_source(c, &c->fsrc, &c->fname);
  // The region: the same op on scalars.
  iron_status_t rs = region_source(c, dts, out);
  // One emitter: what a fusion generates, a region generates.
  if (!fs && rs) {
    fprintf(stderr, "%s: the fusion generates it, the region refuses: %s\n",
            c->what, iron_status_message(rs));
    CHECK(false);
    g_region_refused_only++;
  }
  if (fs) {
    g_cuda_refused++;
    if (verbose)
      fprintf(stderr, "%s: CUDA refuses: %s\n", c->what,
              iron_status_message(fs));
  }
  iron_status_free(fs);
  iron_status_free(rs);
  c->region_raw = region_raw_op(c->op.op.kind, dts[0]);
  g_ncases++;
}

static scase_t *new_case(iron_op_kind_t kind, int nin, const iron_dtype_t *dts,
                         iron_dtype_t out, const char *what) {
  if (g_ncases >= MAX_CASES) return NULL;
  scase_t *c = &g_cases[g_ncases];
  memset(c, 0, sizeof(*c));
  snprintf(c->what, sizeof(c->what), "%s", what);
  c->nin = nin;
  fill_inputs(c, dts);
  ht_init(&c->op, kind);
  for (int i = 0; i < nin; ++i) ht_operand(&c->op, dts[i], 1, &c->n);
  ht_result(&c->op, out, 1, &c->n);
  return c;
}

static void build_cases(void) {
  char what[96];
  for (int d = 0; d < NUM_DTYPES; ++d) {
    iron_dtype_t dt = kDtypes[d];
    const char *dn = iron_dtype_name(dt);
    for (int k = 0; k < IRON_OP_COUNT; ++k) {
      iron_op_class_t cls = iron_op_kind_class((iron_op_kind_t)k);
      if (cls != IRON_OP_CLASS_UNARY && cls != IRON_OP_CLASS_BINARY) continue;
      int nin = cls == IRON_OP_CLASS_UNARY ? 1 : 2;
      iron_dtype_t dts[2] = {dt, dt};
      // Result dtypes as the host's tables: is_finite -> pred, complex
      // abs/real/imag -> the part, complex(re, im) -> complex.
      iron_dtype_t out = dt;
      if (k == IRON_OP_IS_FINITE) out = IRON_DTYPE_PRED;
      if (is_complex(dt) &&
          (k == IRON_OP_ABS || k == IRON_OP_REAL || k == IRON_OP_IMAG))
        out = iron_dtype_complex_part(dt);
      if (k == IRON_OP_COMPLEX)
        out = dt == IRON_DTYPE_F32   ? IRON_DTYPE_C64
              : dt == IRON_DTYPE_F64 ? IRON_DTYPE_C128
                                     : dt;
      snprintf(what, sizeof(what), "%s %s", iron_op_kind_name(k), dn);
      scase_t *c = new_case((iron_op_kind_t)k, nin, dts, out, what);
      if (c) add_case(c, dts, out);
    }
    // compare, every direction; TOTALORDER too on floats.
    for (int dir = 0; dir < 6; ++dir) {
      for (int total = 0; total < (is_floatish(dt) ? 2 : 1); ++total) {
        iron_dtype_t dts[2] = {dt, dt};
        snprintf(what, sizeof(what), "compare %d%s %s", dir,
                 total ? " TOTALORDER" : "", dn);
        scase_t *c = new_case(IRON_OP_COMPARE, 2, dts, IRON_DTYPE_PRED, what);
        if (!c) continue;
        add_enum(&c->op, "comparison_direction", IRON_ENUM_COMPARISON_DIRECTION,
                 dir);
        add_enum(&c->op, "compare_type", IRON_ENUM_COMPARISON_TYPE,
                 total                               ? IRON_CMP_TYPE_TOTALORDER
                 : is_floatish(dt) || is_complex(dt) ? IRON_CMP_TYPE_FLOAT
                 : iron_dtype_is_unsigned_int(dt) || dt == IRON_DTYPE_PRED
                     ? IRON_CMP_TYPE_UNSIGNED
                     : IRON_CMP_TYPE_SIGNED);
        add_case(c, dts, IRON_DTYPE_PRED);
      }
    }
    // select, clamp
    {
      iron_dtype_t dts[3] = {IRON_DTYPE_PRED, dt, dt};
      snprintf(what, sizeof(what), "select %s", dn);
      scase_t *c = new_case(IRON_OP_SELECT, 3, dts, dt, what);
      if (c) add_case(c, dts, dt);
      iron_dtype_t cds[3] = {dt, dt, dt};
      snprintf(what, sizeof(what), "clamp %s", dn);
      c = new_case(IRON_OP_CLAMP, 3, cds, dt, what);
      if (c) add_case(c, cds, dt);
    }
    // convert to every dtype
    for (int d2 = 0; d2 < NUM_DTYPES; ++d2) {
      iron_dtype_t to = kDtypes[d2];
      iron_dtype_t dts[1] = {dt};
      snprintf(what, sizeof(what), "convert %s -> %s", dn, iron_dtype_name(to));
      scase_t *c = new_case(IRON_OP_CONVERT, 1, dts, to, what);
      if (c) add_case(c, dts, to);
    }
  }
}

// --- running
// -------------------------------------------------------------------

typedef void (*k4_t)(void *, void *, void *, void *);

static int run_compare(scase_t *c, void *fn, bool region, int *skipped) {
  if (!fn) return 0;
  const iron_ir_type_t *rt = c->op.op.results[0].type;
  iron_tensor_t *got = ht_tensor(rt->dtype, 1, &c->n);
  void *a[4] = {NULL, NULL, NULL, NULL};
  for (int i = 0; i < c->nin; ++i) a[i] = c->in[i]->data;
  a[c->nin] = got->data;
  k4_t k;
  memcpy(&k, &fn, sizeof(k));
#if defined(__x86_64__)
  // The device flushes f32 denormals (-ftz) as XLA:CPU and the host do.
  unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);  // FTZ and DAZ
#endif
  k(a[0], a[1], a[2], a[3]);
#if defined(__x86_64__)
  _mm_setcsr(csr);
#endif
  int bad = 0;
  bool verbose = getenv("IRON_TEST_VERBOSE") != NULL;
  size_t es = iron_dtype_size(rt->dtype);
  for (int64_t e = 0; e < c->n; ++e) {
    const unsigned char *w = (const unsigned char *)c->want->data + e * es;
    const unsigned char *g = (const unsigned char *)got->data + e * es;
    if (region && c->region_raw) {
      // Region fold arithmetic: unflushed, or (complex) the reduce loops'
      // product: not the element-wise kernel's.
      bool skip = is_complex(c->op.op.operands[0]->type->dtype) ||
                  is_denormal(rt->dtype, w);
      for (int i = 0; i < c->nin && !skip; ++i)
        skip = is_denormal(c->in[i]->dtype,
                           (const unsigned char *)c->in[i]->data +
                               e * iron_dtype_size(c->in[i]->dtype));
      if (skip) {
        (*skipped)++;
        continue;
      }
    }
    uint64_t tol = transcendental(c->op.op.kind) ? 16 : 0;
    if (same_value(rt->dtype, w, g, tol)) continue;
    if (bad < 3 && verbose) {
      fprintf(stderr, "%s (%s) element %lld: want", c->what,
              region ? "region" : "fusion", (long long)e);
      for (size_t b = 0; b < es; ++b) fprintf(stderr, " %02x", w[b]);
      fprintf(stderr, ", got");
      for (size_t b = 0; b < es; ++b) fprintf(stderr, " %02x", g[b]);
      fprintf(stderr, "; inputs");
      for (int i = 0; i < c->nin; ++i) {
        size_t is = iron_dtype_size(c->in[i]->dtype);
        fprintf(stderr, " ");
        for (size_t b = 0; b < is; ++b)
          fprintf(stderr, "%02x",
                  ((const unsigned char *)c->in[i]->data)[e * is + b]);
      }
      fprintf(stderr, "\n");
    }
    bad++;
  }
  ht_tensor_free(got);
  return bad;
}

static void test_scalar_ops(void) {
  CHECK(cuda_emu_have_cxx());
  if (!cuda_emu_have_cxx()) return;
  g_cases = calloc(MAX_CASES, sizeof(*g_cases));
  build_cases();
  CHECK(g_ncases < MAX_CASES);
  // Every source: fusion kernels and region harnesses, one library.
  const char **srcs = calloc((size_t)(2 * g_ncases + 1), sizeof(*srcs));
  int ns = 0, nfusion = 0, nregion = 0;
  for (int i = 0; i < g_ncases; ++i) {
    if (g_cases[i].fsrc) srcs[ns++] = g_cases[i].fsrc, nfusion++;
    if (g_cases[i].rsrc) srcs[ns++] = g_cases[i].rsrc, nregion++;
  }
  printf(
      "scalar ops: %d cases with a host result (%d refused by the host, "
      "%d of them on f6 and refused by CUDA too), %d fusions, %d regions, "
      "%d refused by CUDA\n",
      g_ncases, g_host_refused, g_f6_refused, nfusion, nregion, g_cuda_refused);
  // f6: every unary and binary op, compare and clamp are refused (per
  // type: 2 x 6 compares, clamp, and the element-wise ops).
  CHECK(g_f6_refused > 2 * 30);
  cuda_emu_lib_t lib;
  bool built = cuda_emu_build(srcs, ns, iron_cuda_prelude(), &lib);
  CHECK(built);
  int fbad = 0, rbad = 0, fcases = 0, rcases = 0, skipped = 0;
  for (int i = 0; built && i < g_ncases; ++i) {
    scase_t *c = &g_cases[i];
    if (c->fsrc) {
      void *fn = cuda_emu_sym(&lib, c->fname);
      CHECK(fn != NULL);
      int b = run_compare(c, fn, false, &skipped);
      if (b) {
        fprintf(stderr, "%s: fusion differs from the host in %d of %lld\n",
                c->what, b, (long long)c->n);
        fbad++;
      }
      fcases++;
    }
    if (c->rsrc) {
      void *fn = cuda_emu_sym(&lib, c->rname);
      CHECK(fn != NULL);
      int b = run_compare(c, fn, true, &skipped);
      if (b) {
        fprintf(stderr, "%s: region differs from the host in %d of %lld\n",
                c->what, b, (long long)c->n);
        rbad++;
      }
      rcases++;
    }
  }
  printf(
      "scalar ops: %d fusion and %d region cases run, %d and %d differ "
      "from the host (%d region elements of fold arithmetic skipped)\n",
      fcases, rcases, fbad, rbad, skipped);
  CHECK(fbad == 0);
  CHECK(rbad == 0);
  CHECK(g_region_refused_only == 0);
  // The sweep reaches what it claims: the region accepts the ops it used
  // to refuse (integer division, shifts, float -> int converts).
  CHECK(nregion > 1000);
  if (built) cuda_emu_close(&lib);
  for (int i = 0; i < g_ncases; ++i) {
    scase_t *c = &g_cases[i];
    for (int k = 0; k < c->nin; ++k) ht_tensor_free(c->in[k]);
    ht_tensor_free(c->want);
    free(c->fsrc);
    free(c->fname);
    free(c->rsrc);
  }
  free(srcs);
  free(g_cases);
}

static const iron_test_case_t kTests[] = {
    {"scalar_ops", test_scalar_ops},
};
IRON_TEST_MAIN(kTests)
