// GPU-free tests of the CUDA code generation: every kernel our CUDA kernels
// generate (for op x dtype sweeps built by hand and for every op of every
// corpus artifact) is compiled by NVRTC to sm_90a CUBIN, many kernels per
// program; plus the compile cache (keys, disk entries, corrupt entries).
//
// NVRTC is loaded here by dlopen (the plugin's loader is cuda_api.c); no
// GPU or driver is needed.
#include <dirent.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compiler/fuse.h"
#include "compiler/inline.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_fusion.h"
#include "device/cuda/gen/ops.h"
#include "host_test_ops.h"
#include "ir/builder.h"
#include "stablehlo/reader.h"
#include "cuda_test_nvrtc.h"
#include "corpus_files.h"
#include "test.h"

static iron_cuda_api_t g_api;
static bool g_have_nvrtc;

static void load_nvrtc(void) {
  static bool done;
  if (done) return;
  done = true;
  g_have_nvrtc = cuda_test_load_nvrtc(&g_api);
}

// ---------------------------------------------------------------------------
// A fake device: enough for prepare (arch, SM count, the compiler).

static iron_cuda_device_t *fake_device(void) {
  iron_cuda_device_t *d = calloc(1, sizeof(*d));
  snprintf(d->arch, sizeof(d->arch), "sm_90a");
  d->num_sms = 132;
  d->api = &g_api;
  return d;
}

static void fake_device_free(iron_cuda_device_t *d) {
  iron_cuda_compiler_destroy(d->compiler);
  free(d);
}

// Kernel bodies collected over the whole test (prelude stripped, deduped);
// compiled at the end many per program.
static char **g_bodies;
static size_t g_num_bodies, g_cap_bodies;
static uint64_t *g_body_hash;

static size_t g_num_generated;

static void collect_pending(iron_cuda_device_t *d) {
  const char *prelude = iron_cuda_prelude();
  size_t pl = strlen(prelude);
  size_t n = iron_cuda_compiler_pending_count(d);
  for (size_t i = 0; i < n; ++i) {
    const char *s = iron_cuda_compiler_pending_source(d, i);
    CHECK(s != NULL && strncmp(s, prelude, pl) == 0);
    if (!s || strncmp(s, prelude, pl) != 0) continue;
    const char *body = s + pl;
    // Kernels that differ only in numbers (sizes, strides, constants, the
    // kernel name's hash) compile alike: one of each shape of text is
    // compiled, which keeps the test fast.
    char *norm = cuda_test_normalize(body);
    uint64_t h[2];
    iron_cuda_hash128(norm, strlen(norm), 7, h);
    free(norm);
    bool seen = false;
    for (size_t k = 0; k < g_num_bodies && !seen; ++k) {
      seen = g_body_hash[k] == h[0];
    }
    g_num_generated++;
    if (seen) continue;
    if (g_num_bodies == g_cap_bodies) {
      g_cap_bodies = g_cap_bodies ? 2 * g_cap_bodies : 256;
      g_bodies = realloc(g_bodies, g_cap_bodies * sizeof(*g_bodies));
      g_body_hash = realloc(g_body_hash, g_cap_bodies * sizeof(*g_body_hash));
    }
    g_bodies[g_num_bodies] = strdup(body);
    g_body_hash[g_num_bodies] = h[0];
    g_num_bodies++;
  }
}

static iron_cuda_kernel_table_t g_table;

static const iron_kernel_t *lookup(iron_op_kind_t k) {
  static bool init;
  if (!init) {
    init = true;
    iron_cuda_register_elementwise(g_table);
    iron_cuda_register_shape(g_table);
    g_table[IRON_OP_FUSION] = &iron_cuda_fusion_kernel;
  }
  return g_table[k];
}

typedef struct prep_stats {
  int ok, refused;
} prep_stats_t;

// Prepares `op` with our CUDA kernel on `d`. Refusals must be
// UNIMPLEMENTED; *other* errors fail the test (unless expect_error).
static iron_status_t prepare(iron_cuda_device_t *d, const iron_ir_op_t *op,
                             prep_stats_t *stats) {
  const iron_kernel_t *k = lookup(op->kind);
  if (!k) return IRON_ERR(NOT_FOUND, "no kernel");
  iron_region_t *regions[8] = {0};
  void *params = NULL;
  iron_status_t st = k->prepare_on((iron_device_t *)d, op, regions, &params);
  if (!st) {
    if (k->destroy) k->destroy(params); else free(params);
    stats->ok++;
    return IRON_OK;
  }
  if (iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED) {
    stats->refused++;
    if (getenv("IRON_TEST_VERBOSE")) {
      fprintf(stderr, "refused: %s\n", iron_status_message(st));
    }
  } else {
    fprintf(stderr, "prepare %s: %s\n", op->name, iron_status_message(st));
  }
  return st;
}

// ---------------------------------------------------------------------------
// Sweeps over hand-built ops

static const iron_dtype_t kDtypes[] = {
    IRON_DTYPE_PRED, IRON_DTYPE_S8,   IRON_DTYPE_S16, IRON_DTYPE_S32,
    IRON_DTYPE_S64,  IRON_DTYPE_U8,   IRON_DTYPE_U16, IRON_DTYPE_U32,
    IRON_DTYPE_U64,  IRON_DTYPE_F16,  IRON_DTYPE_BF16, IRON_DTYPE_F32,
    IRON_DTYPE_F64,  IRON_DTYPE_C64,  IRON_DTYPE_C128};
#define NDT (sizeof(kDtypes) / sizeof(kDtypes[0]))

static void attr_enum(ht_op_t *b, const char *name, iron_enum_kind_t kind,
                      int32_t v) {
  uint32_t i = b->op.num_attrs++;
  b->attrs[i].kind = IRON_ATTR_ENUM;
  b->attrs[i].enumv.kind = kind;
  b->attrs[i].enumv.value = v;
  b->named[i].name = name;
  b->named[i].value = &b->attrs[i];
}

static iron_dtype_t unary_out(iron_op_kind_t k, iron_dtype_t dt) {
  if (k == IRON_OP_IS_FINITE) return IRON_DTYPE_PRED;
  if (iron_dtype_is_complex(dt) &&
      (k == IRON_OP_ABS || k == IRON_OP_REAL || k == IRON_OP_IMAG))
    return iron_dtype_complex_part(dt);
  return dt;
}

static void test_elementwise_sweep(void) {
  iron_cuda_device_t *d = fake_device();
  prep_stats_t stats = {0};
  int64_t dims[2] = {3, 5};
  ht_op_t b;
  for (int k = 0; k < IRON_OP_COUNT; ++k) {
    iron_op_class_t c = iron_op_kind_class((iron_op_kind_t)k);
    if (c != IRON_OP_CLASS_UNARY && c != IRON_OP_CLASS_BINARY) continue;
    for (size_t i = 0; i < NDT; ++i) {
      iron_dtype_t dt = kDtypes[i];
      ht_init(&b, (iron_op_kind_t)k);
      ht_operand(&b, dt, 2, dims);
      iron_dtype_t out = dt;
      if (c == IRON_OP_CLASS_BINARY) {
        // The second operand is a broadcast scalar in every other case.
        ht_operand(&b, dt, (i & 1) ? 0 : 2, dims);
        if (k == IRON_OP_COMPLEX) {
          out = dt == IRON_DTYPE_F32   ? IRON_DTYPE_C64
                : dt == IRON_DTYPE_F64 ? IRON_DTYPE_C128
                                       : dt;
        }
      } else {
        out = unary_out((iron_op_kind_t)k, dt);
      }
      ht_result(&b, out, 2, dims);
      iron_status_t st = prepare(d, &b.op, &stats);
      CHECK(!st || iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED);
      iron_status_free(st);
    }
  }
  // Things the host supports must be generated: spot checks.
  struct {
    iron_op_kind_t k;
    iron_dtype_t dt;
  } must[] = {{IRON_OP_ADD, IRON_DTYPE_BF16},      {IRON_OP_DIVIDE, IRON_DTYPE_S8},
              {IRON_OP_POWER, IRON_DTYPE_C128},    {IRON_OP_ATAN2, IRON_DTYPE_F64},
              {IRON_OP_SHIFT_RIGHT_ARITHMETIC, IRON_DTYPE_U16},
              {IRON_OP_TANH, IRON_DTYPE_C64},      {IRON_OP_CLZ, IRON_DTYPE_U64},
              {IRON_OP_NOT, IRON_DTYPE_PRED},      {IRON_OP_LOGISTIC, IRON_DTYPE_F16},
              {IRON_OP_REMAINDER, IRON_DTYPE_F32}, {IRON_OP_MAXIMUM, IRON_DTYPE_PRED}};
  for (size_t m = 0; m < sizeof(must) / sizeof(must[0]); ++m) {
    ht_init(&b, must[m].k);
    ht_operand(&b, must[m].dt, 2, dims);
    if (iron_op_kind_class(must[m].k) == IRON_OP_CLASS_BINARY)
      ht_operand(&b, must[m].dt, 2, dims);
    ht_result(&b, must[m].dt, 2, dims);
    CHECK_OK(prepare(d, &b.op, &stats));
  }
  // Refusals name the op and dtype: abs of an unsigned type (the host has
  // none), float shifts.
  ht_init(&b, IRON_OP_SHIFT_LEFT);
  ht_operand(&b, IRON_DTYPE_F32, 2, dims);
  ht_operand(&b, IRON_DTYPE_F32, 2, dims);
  ht_result(&b, IRON_DTYPE_F32, 2, dims);
  iron_status_t st = prepare(d, &b.op, &stats);
  CHECK(st && iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED &&
        strstr(iron_status_message(st), "f32") != NULL);
  iron_status_free(st);

  // compare: every direction x dtype, TOTALORDER for floats.
  for (int dir = 0; dir < 6; ++dir) {
    for (size_t i = 0; i < NDT; ++i) {
      for (int total = 0; total < 2; ++total) {
        if (total && !iron_dtype_is_float(kDtypes[i])) continue;
        ht_init(&b, IRON_OP_COMPARE);
        ht_operand(&b, kDtypes[i], 2, dims);
        ht_operand(&b, kDtypes[i], 2, dims);
        ht_result(&b, IRON_DTYPE_PRED, 2, dims);
        attr_enum(&b, "comparison_direction",
                  IRON_ENUM_COMPARISON_DIRECTION, dir);
        attr_enum(&b, "compare_type", IRON_ENUM_COMPARISON_TYPE,
                  total ? IRON_CMP_TYPE_TOTALORDER : IRON_CMP_TYPE_NOTYPE);
        CHECK_OK(prepare(d, &b.op, &stats));
      }
    }
  }
  // convert: every pair.
  for (size_t i = 0; i < NDT; ++i) {
    for (size_t j = 0; j < NDT; ++j) {
      ht_init(&b, IRON_OP_CONVERT);
      ht_operand(&b, kDtypes[i], 2, dims);
      ht_result(&b, kDtypes[j], 2, dims);
      CHECK_OK(prepare(d, &b.op, &stats));
    }
  }
  // convert to/from the narrow types (gen/convert_narrow.c; f8E8M0FNU's
  // below).
  {
    const iron_dtype_t narrow[] = {
        IRON_DTYPE_F8E5M2,     IRON_DTYPE_F8E4M3,     IRON_DTYPE_F8E3M4,
        IRON_DTYPE_F8E4M3FN,   IRON_DTYPE_F8E4M3FNUZ, IRON_DTYPE_F8E5M2FNUZ,
        IRON_DTYPE_F8E4M3B11FNUZ, IRON_DTYPE_F4E2M1FN, IRON_DTYPE_F6E2M3FN,
        IRON_DTYPE_F6E3M2FN,   IRON_DTYPE_S4,         IRON_DTYPE_U4,
        IRON_DTYPE_S2,         IRON_DTYPE_U2};
    for (size_t i = 0; i < sizeof(narrow) / sizeof(narrow[0]); ++i) {
      for (size_t j = 0; j < NDT; ++j) {
        for (int dir = 0; dir < 2; ++dir) {
          ht_init(&b, IRON_OP_CONVERT);
          ht_operand(&b, dir ? kDtypes[j] : narrow[i], 2, dims);
          ht_result(&b, dir ? narrow[i] : kDtypes[j], 2, dims);
          CHECK_OK(prepare(d, &b.op, &stats));
        }
      }
      // narrow -> narrow: each to its neighbour in the list (a float and
      // an int pair among them), to bound the test's compile time.
      ht_init(&b, IRON_OP_CONVERT);
      ht_operand(&b, narrow[i], 2, dims);
      ht_result(&b, narrow[(i + 1) % (sizeof(narrow) / sizeof(narrow[0]))],
                2, dims);
      CHECK_OK(prepare(d, &b.op, &stats));
    }
    // f8E8M0FNU: to/from every dtype (fusion generator); to s4/u4 is
    // refused as on the host.
    for (size_t j = 0; j < NDT; ++j) {
      for (int dir = 0; dir < 2; ++dir) {
        ht_init(&b, IRON_OP_CONVERT);
        ht_operand(&b, dir ? kDtypes[j] : IRON_DTYPE_F8E8M0FNU, 2, dims);
        ht_result(&b, dir ? IRON_DTYPE_F8E8M0FNU : kDtypes[j], 2, dims);
        CHECK_OK(prepare(d, &b.op, &stats));
      }
    }
    ht_init(&b, IRON_OP_CONVERT);
    ht_operand(&b, IRON_DTYPE_F8E8M0FNU, 2, dims);
    ht_result(&b, IRON_DTYPE_F8E4M3FN, 2, dims);
    CHECK_OK(prepare(d, &b.op, &stats));
    ht_init(&b, IRON_OP_CONVERT);
    ht_operand(&b, IRON_DTYPE_F8E8M0FNU, 2, dims);
    ht_result(&b, IRON_DTYPE_S4, 2, dims);
    iron_status_t st8 = prepare(d, &b.op, &stats);
    CHECK(iron_status_code(st8) == IRON_STATUS_UNIMPLEMENTED);
    iron_status_free(st8);
  }
  // Element-wise ops on the narrow dtypes (computed widened, as XLA:CPU):
  // every unary/binary op the wide dtype has, compare, select, clamp.
  {
    const iron_dtype_t nw[] = {IRON_DTYPE_S4, IRON_DTYPE_U4,
                               IRON_DTYPE_F8E4M3FN, IRON_DTYPE_F8E5M2FNUZ,
                               IRON_DTYPE_F4E2M1FN, IRON_DTYPE_F8E8M0FNU};
    int ok = 0;
    for (size_t i = 0; i < sizeof(nw) / sizeof(nw[0]); ++i) {
      iron_dtype_t dt = nw[i];
      for (int k = 0; k < IRON_OP_COUNT; ++k) {
        iron_op_class_t c = iron_op_kind_class((iron_op_kind_t)k);
        if (c != IRON_OP_CLASS_UNARY && c != IRON_OP_CLASS_BINARY) continue;
        ht_init(&b, (iron_op_kind_t)k);
        ht_operand(&b, dt, 2, dims);
        if (c == IRON_OP_CLASS_BINARY) ht_operand(&b, dt, (k & 1) ? 0 : 2, dims);
        ht_result(&b, c == IRON_OP_CLASS_UNARY ? unary_out((iron_op_kind_t)k, dt)
                                               : dt, 2, dims);
        st = prepare(d, &b.op, &stats);
        CHECK(!st || iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED);
        ok += st == IRON_OK;
        iron_status_free(st);
      }
      ht_init(&b, IRON_OP_COMPARE);
      ht_operand(&b, dt, 2, dims);
      ht_operand(&b, dt, 2, dims);
      ht_result(&b, IRON_DTYPE_PRED, 2, dims);
      attr_enum(&b, "comparison_direction", IRON_ENUM_COMPARISON_DIRECTION,
                IRON_CMP_LT);
      attr_enum(&b, "compare_type", IRON_ENUM_COMPARISON_TYPE,
                iron_dtype_is_float(dt) ? IRON_CMP_TYPE_TOTALORDER
                                        : IRON_CMP_TYPE_NOTYPE);
      CHECK_OK(prepare(d, &b.op, &stats));
      ht_init(&b, IRON_OP_SELECT);
      ht_operand(&b, IRON_DTYPE_PRED, 2, dims);
      ht_operand(&b, dt, 2, dims);
      ht_operand(&b, dt, 0, dims);
      ht_result(&b, dt, 2, dims);
      CHECK_OK(prepare(d, &b.op, &stats));
      ht_init(&b, IRON_OP_CLAMP);
      ht_operand(&b, dt, 0, dims);
      ht_operand(&b, dt, 2, dims);
      ht_operand(&b, dt, 0, dims);
      ht_result(&b, dt, 2, dims);
      CHECK_OK(prepare(d, &b.op, &stats));
    }
    // Most ops of the wide dtypes are generated.
    CHECK(ok > 100);
  }
  // f6: select is generated; arithmetic, compare and clamp are refused by
  // name, as on the host.
  for (int w = 0; w < 2; ++w) {
    iron_dtype_t f6 = w ? IRON_DTYPE_F6E3M2FN : IRON_DTYPE_F6E2M3FN;
    ht_init(&b, IRON_OP_SELECT);
    ht_operand(&b, IRON_DTYPE_PRED, 2, dims);
    ht_operand(&b, f6, 2, dims);
    ht_operand(&b, f6, 0, dims);
    ht_result(&b, f6, 2, dims);
    CHECK_OK(prepare(d, &b.op, &stats));
    static const iron_op_kind_t kRefused[] = {
        IRON_OP_ADD, IRON_OP_NEGATE, IRON_OP_COMPARE, IRON_OP_CLAMP};
    for (size_t k = 0; k < sizeof(kRefused) / sizeof(kRefused[0]); ++k) {
      iron_op_kind_t kind = kRefused[k];
      int nin = kind == IRON_OP_NEGATE ? 1 : kind == IRON_OP_CLAMP ? 3 : 2;
      ht_init(&b, kind);
      for (int i = 0; i < nin; ++i) ht_operand(&b, f6, 2, dims);
      ht_result(&b, kind == IRON_OP_COMPARE ? IRON_DTYPE_PRED : f6, 2, dims);
      if (kind == IRON_OP_COMPARE)
        attr_enum(&b, "comparison_direction", IRON_ENUM_COMPARISON_DIRECTION,
                  IRON_CMP_LT);
      st = prepare(d, &b.op, &stats);
      CHECK(iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED);
      CHECK(st && strstr(iron_status_message(st), iron_op_kind_name(kind)) &&
            strstr(iron_status_message(st), iron_dtype_name(f6)));
      iron_status_free(st);
    }
  }
  // select / clamp (scalar bounds too).
  for (size_t i = 0; i < NDT; ++i) {
    ht_init(&b, IRON_OP_SELECT);
    ht_operand(&b, IRON_DTYPE_PRED, (i & 1) ? 0 : 2, dims);
    ht_operand(&b, kDtypes[i], 2, dims);
    ht_operand(&b, kDtypes[i], 2, dims);
    ht_result(&b, kDtypes[i], 2, dims);
    CHECK_OK(prepare(d, &b.op, &stats));
    ht_init(&b, IRON_OP_CLAMP);
    ht_operand(&b, kDtypes[i], 0, dims);
    ht_operand(&b, kDtypes[i], 2, dims);
    ht_operand(&b, kDtypes[i], 0, dims);
    ht_result(&b, kDtypes[i], 2, dims);
    st = prepare(d, &b.op, &stats);
    bool expect_ok = kDtypes[i] != IRON_DTYPE_PRED &&
                     !iron_dtype_is_complex(kDtypes[i]);
    CHECK(expect_ok ? st == IRON_OK
                    : iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED);
    iron_status_free(st);
  }
  // Larger arrays take the vectorized path (16-byte loads/stores).
  {
    int64_t big[2] = {64, 33};
    ht_init(&b, IRON_OP_ADD);
    ht_operand(&b, IRON_DTYPE_F32, 2, big);
    ht_operand(&b, IRON_DTYPE_F32, 0, big);
    ht_result(&b, IRON_DTYPE_F32, 2, big);
    CHECK_OK(prepare(d, &b.op, &stats));
    ht_init(&b, IRON_OP_CONVERT);
    ht_operand(&b, IRON_DTYPE_F32, 2, big);
    ht_result(&b, IRON_DTYPE_BF16, 2, big);
    CHECK_OK(prepare(d, &b.op, &stats));
    ht_init(&b, IRON_OP_SELECT);
    ht_operand(&b, IRON_DTYPE_PRED, 2, big);
    ht_operand(&b, IRON_DTYPE_C64, 2, big);
    ht_operand(&b, IRON_DTYPE_C64, 0, big);
    ht_result(&b, IRON_DTYPE_C64, 2, big);
    CHECK_OK(prepare(d, &b.op, &stats));
    ht_init(&b, IRON_OP_COMPARE);
    ht_operand(&b, IRON_DTYPE_U8, 2, big);
    ht_operand(&b, IRON_DTYPE_U8, 2, big);
    ht_result(&b, IRON_DTYPE_PRED, 2, big);
    attr_enum(&b, "comparison_direction", IRON_ENUM_COMPARISON_DIRECTION,
              IRON_CMP_LT);
    CHECK_OK(prepare(d, &b.op, &stats));
    size_t nvec = 0;
    for (size_t i = 0; i < iron_cuda_compiler_pending_count(d); ++i) {
      const char *s = iron_cuda_compiler_pending_source(d, i);
      if (strstr(s, "iron_vec<float, 4>") || strstr(s, "iron_vec<uint8_t, 8>"))
        nvec++;
    }
    CHECK(nvec >= 3);  // add, convert, compare (the complex select is not)
  }
  // bitcast_convert
  {
    int64_t d4[1] = {4}, d44[2] = {4, 4};
    ht_init(&b, IRON_OP_BITCAST_CONVERT);
    ht_operand(&b, IRON_DTYPE_F32, 1, d4);
    ht_result(&b, IRON_DTYPE_U8, 2, d44);
    CHECK_OK(prepare(d, &b.op, &stats));
  }
  fprintf(stderr, "elementwise sweep: %d prepared, %d refused, %zu sources\n",
          stats.ok, stats.refused, iron_cuda_compiler_pending_count(d));
  CHECK(stats.ok > 700);
  collect_pending(d);
  fake_device_free(d);
}


// Data movement: every shape op for dtypes of each element size.
static void test_shape_sweep(void) {
  iron_cuda_device_t *d = fake_device();
  prep_stats_t stats = {0};
  const iron_dtype_t dts[] = {IRON_DTYPE_PRED, IRON_DTYPE_S4,
                              IRON_DTYPE_F8E4M3FN, IRON_DTYPE_BF16,
                              IRON_DTYPE_F32, IRON_DTYPE_F64, IRON_DTYPE_C128};
  ht_op_t b;
  for (size_t t = 0; t < sizeof(dts) / sizeof(dts[0]); ++t) {
    iron_dtype_t dt = dts[t];
    {  // broadcast_in_dim [3] -> [2,3,4]; [1,4] -> [3,4]; [] -> [5]
      int64_t i1[1] = {3}, o1[3] = {2, 3, 4}, bd1[1] = {1};
      ht_init(&b, IRON_OP_BROADCAST_IN_DIM);
      ht_operand(&b, dt, 1, i1);
      ht_result(&b, dt, 3, o1);
      ht_attr_i64(&b, "broadcast_dimensions", 1, bd1);
      CHECK_OK(prepare(d, &b.op, &stats));
      int64_t i2[2] = {1, 4}, o2[2] = {3, 4}, bd2[2] = {0, 1};
      ht_init(&b, IRON_OP_BROADCAST_IN_DIM);
      ht_operand(&b, dt, 2, i2);
      ht_result(&b, dt, 2, o2);
      ht_attr_i64(&b, "broadcast_dimensions", 2, bd2);
      CHECK_OK(prepare(d, &b.op, &stats));
      int64_t o3[1] = {5};
      ht_init(&b, IRON_OP_BROADCAST_IN_DIM);
      ht_operand(&b, dt, 0, o3);
      ht_result(&b, dt, 1, o3);
      ht_attr_i64(&b, "broadcast_dimensions", 0, bd2);
      CHECK_OK(prepare(d, &b.op, &stats));
      int64_t sz[1] = {2}, o4[2] = {2, 3};
      ht_init(&b, IRON_OP_BROADCAST);
      ht_operand(&b, dt, 1, i1);
      ht_result(&b, dt, 2, o4);
      ht_attr_i64(&b, "broadcast_sizes", 1, sz);
      CHECK_OK(prepare(d, &b.op, &stats));
    }
    {  // transpose: general and tiled
      int64_t i1[3] = {4, 5, 6}, o1[3] = {6, 4, 5}, p1[3] = {2, 0, 1};
      ht_init(&b, IRON_OP_TRANSPOSE);
      ht_operand(&b, dt, 3, i1);
      ht_result(&b, dt, 3, o1);
      ht_attr_i64(&b, "permutation", 3, p1);
      CHECK_OK(prepare(d, &b.op, &stats));
      int64_t i2[3] = {3, 40, 64}, o2[3] = {3, 64, 40}, p2[3] = {0, 2, 1};
      ht_init(&b, IRON_OP_TRANSPOSE);
      ht_operand(&b, dt, 3, i2);
      ht_result(&b, dt, 3, o2);
      ht_attr_i64(&b, "permutation", 3, p2);
      CHECK_OK(prepare(d, &b.op, &stats));
    }
    {  // slice with strides; reverse
      int64_t i1[2] = {10, 12}, o1[2] = {4, 4};
      int64_t st[2] = {1, 2}, li[2] = {9, 12}, sr[2] = {2, 3};
      ht_init(&b, IRON_OP_SLICE);
      ht_operand(&b, dt, 2, i1);
      ht_result(&b, dt, 2, o1);
      ht_attr_i64(&b, "start_indices", 2, st);
      ht_attr_i64(&b, "limit_indices", 2, li);
      ht_attr_i64(&b, "strides", 2, sr);
      CHECK_OK(prepare(d, &b.op, &stats));
      int64_t rd[2] = {0, 1};
      ht_init(&b, IRON_OP_REVERSE);
      ht_operand(&b, dt, 2, i1);
      ht_result(&b, dt, 2, i1);
      ht_attr_i64(&b, "dimensions", 1, rd + 1);
      CHECK_OK(prepare(d, &b.op, &stats));
      ht_init(&b, IRON_OP_REVERSE);
      ht_operand(&b, dt, 2, i1);
      ht_result(&b, dt, 2, i1);
      ht_attr_i64(&b, "dimensions", 2, rd);
      CHECK_OK(prepare(d, &b.op, &stats));
    }
    {  // concatenate along 0 and 1
      int64_t a[2] = {2, 3}, c[2] = {4, 3}, o[2] = {6, 3}, dim0 = 0;
      ht_init(&b, IRON_OP_CONCATENATE);
      ht_operand(&b, dt, 2, a);
      ht_operand(&b, dt, 2, c);
      ht_result(&b, dt, 2, o);
      ht_attr_i64(&b, "dimension", 1, &dim0);
      CHECK_OK(prepare(d, &b.op, &stats));
      int64_t e[2] = {2, 5}, z[2] = {2, 0}, o2[2] = {2, 8}, dim1 = 1;
      ht_init(&b, IRON_OP_CONCATENATE);
      ht_operand(&b, dt, 2, a);
      ht_operand(&b, dt, 2, z);
      ht_operand(&b, dt, 2, e);
      ht_result(&b, dt, 2, o2);
      ht_attr_i64(&b, "dimension", 1, &dim1);
      CHECK_OK(prepare(d, &b.op, &stats));
    }
    {  // pad with negative and interior padding
      int64_t i1[2] = {3, 4}, o1[2] = {8, 3};
      int64_t lo[2] = {1, -1}, hi[2] = {2, 0}, ip[2] = {1, 0};
      ht_init(&b, IRON_OP_PAD);
      ht_operand(&b, dt, 2, i1);
      ht_operand(&b, dt, 0, i1);
      ht_result(&b, dt, 2, o1);
      ht_attr_i64(&b, "edge_padding_low", 2, lo);
      ht_attr_i64(&b, "edge_padding_high", 2, hi);
      ht_attr_i64(&b, "interior_padding", 2, ip);
      CHECK_OK(prepare(d, &b.op, &stats));
    }
    {  // dynamic_slice (s32 and u64 starts), dynamic_update_slice (s64)
      int64_t i1[2] = {8, 9}, o1[2] = {3, 4};
      ht_init(&b, IRON_OP_DYNAMIC_SLICE);
      ht_operand(&b, dt, 2, i1);
      ht_operand(&b, IRON_DTYPE_S32, 0, i1);
      ht_operand(&b, IRON_DTYPE_U64, 0, i1);
      ht_result(&b, dt, 2, o1);
      ht_attr_i64(&b, "slice_sizes", 2, o1);
      CHECK_OK(prepare(d, &b.op, &stats));
      ht_init(&b, IRON_OP_DYNAMIC_UPDATE_SLICE);
      ht_operand(&b, dt, 2, i1);
      ht_operand(&b, dt, 2, o1);
      ht_operand(&b, IRON_DTYPE_S64, 0, i1);
      ht_operand(&b, IRON_DTYPE_S64, 0, i1);
      ht_result(&b, dt, 2, i1);
      CHECK_OK(prepare(d, &b.op, &stats));
    }
    {  // iota (typed: refused for dtypes without arithmetic)
      int64_t o1[2] = {4, 5}, dim = 1;
      ht_init(&b, IRON_OP_IOTA);
      ht_result(&b, dt, 2, o1);
      ht_attr_i64(&b, "iota_dimension", 1, &dim);
      iron_status_t st = prepare(d, &b.op, &stats);
      if (iron_cuda_fusion_dtype_ok(dt)) {
        CHECK(st == IRON_OK);
      } else {
        CHECK(iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED);
      }
      iron_status_free(st);
    }
    {  // reshape (a copy when not aliased)
      int64_t i1[1] = {6}, o1[2] = {2, 3};
      ht_init(&b, IRON_OP_RESHAPE);
      ht_operand(&b, dt, 1, i1);
      ht_result(&b, dt, 2, o1);
      CHECK_OK(prepare(d, &b.op, &stats));
    }
  }
  // The tiled transpose uses shared memory.
  bool tiled = false;
  for (size_t i = 0; i < iron_cuda_compiler_pending_count(d); ++i) {
    const char *s = iron_cuda_compiler_pending_source(d, i);
    if (strstr(s, "__shared__") && strstr(s, "iron_transpose_")) tiled = true;
  }
  CHECK(tiled);
  fprintf(stderr, "shape sweep: %d prepared, %d refused, %zu sources\n",
          stats.ok, stats.refused, iron_cuda_compiler_pending_count(d));
  collect_pending(d);
  fake_device_free(d);
}

// A fusion: y = select(x > 0, x * c, exp(x)) + broadcast(b), two outputs,
// built with the IR builder and prepared as a fusion op region.
static void test_fusion(void) {
  iron_ir_module_t *m = iron_ir_builder_module_create("fusion", 1);
  int64_t dims[2] = {4, 8}, bd[1] = {8};
  const iron_ir_type_t *t = iron_ir_builder_tensor_type(m, IRON_DTYPE_BF16, 2, dims);
  const iron_ir_type_t *tb = iron_ir_builder_tensor_type(m, IRON_DTYPE_BF16, 1, bd);
  const iron_ir_type_t *ts = iron_ir_builder_scalar_type(m, IRON_DTYPE_BF16);
  const iron_ir_type_t *tp = iron_ir_builder_tensor_type(m, IRON_DTYPE_PRED, 2, dims);
  const iron_ir_type_t *tf = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 2, dims);
  int64_t flat[1] = {32};
  const iron_ir_type_t *tff = iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, flat);
  const iron_ir_type_t *ins[2] = {t, tb};
  const iron_ir_type_t *outs[2] = {t, tff};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 2, ins, 2, outs);
  iron_ir_block_t *blk = iron_ir_builder_func_block(f);
  // The fusion op: operands = the function's arguments.
  iron_ir_value_t *fargs[2] = {&blk->args[0], &blk->args[1]};
  iron_ir_op_t *fop = iron_ir_builder_op(m, f, blk, IRON_OP_UNKNOWN, 2, fargs,
                                         2, outs, 1);
  iron_ir_block_t *rb = iron_ir_builder_region_block(fop, 0);
  iron_ir_builder_block_arg(m, f, rb, t);
  iron_ir_builder_block_arg(m, f, rb, tb);
  // (Taken after both were added: adding may move the argument array.)
  iron_ir_value_t *x = &rb->args[0];
  iron_ir_value_t *bv = &rb->args[1];
  uint16_t zero = 0, c = 0x4040;  // bf16 0 and 3
  iron_ir_value_t *z = iron_ir_builder_constant(m, f, rb, ts, &zero, 2, true);
  iron_ir_value_t *cc = iron_ir_builder_constant(m, f, rb, ts, &c, 2, true);
  iron_ir_value_t *zb_in[1] = {z};
  iron_ir_op_t *zbo = iron_ir_builder_op(m, f, rb, IRON_OP_BROADCAST_IN_DIM,
                                         1, zb_in, 1, &t, 0);
  iron_ir_builder_attr(m, zbo, "broadcast_dimensions",
                       iron_ir_builder_attr_i64s(m, 0, NULL));
  iron_ir_value_t *cmp_in[2] = {x, &zbo->results[0]};
  iron_ir_op_t *cmp = iron_ir_builder_op(m, f, rb, IRON_OP_COMPARE, 2, cmp_in,
                                         1, &tp, 0);
  iron_ir_builder_attr(m, cmp, "comparison_direction",
                       iron_ir_builder_attr_enum(
                           m, IRON_ENUM_COMPARISON_DIRECTION, IRON_CMP_GT));
  iron_ir_value_t *mul_in[2] = {x, cc};
  iron_ir_value_t *mul = iron_ir_builder_op1(m, f, rb, IRON_OP_MULTIPLY, 2,
                                             mul_in, t);
  iron_ir_value_t *ex = iron_ir_builder_op1(m, f, rb, IRON_OP_EXPONENTIAL, 1,
                                            &x, t);
  iron_ir_value_t *sel_in[3] = {&cmp->results[0], mul, ex};
  iron_ir_value_t *sel = iron_ir_builder_op1(m, f, rb, IRON_OP_SELECT, 3,
                                             sel_in, t);
  iron_ir_op_t *bbo = iron_ir_builder_op(m, f, rb, IRON_OP_BROADCAST_IN_DIM, 1,
                                         &bv, 1, &t, 0);
  int64_t one[1] = {1};
  iron_ir_builder_attr(m, bbo, "broadcast_dimensions",
                       iron_ir_builder_attr_i64s(m, 1, one));
  iron_ir_value_t *add_in[2] = {sel, &bbo->results[0]};
  iron_ir_value_t *y = iron_ir_builder_op1(m, f, rb, IRON_OP_ADD, 2, add_in, t);
  iron_ir_value_t *yf = iron_ir_builder_op1(m, f, rb, IRON_OP_CONVERT, 1, &y, tf);
  iron_ir_value_t *yr = iron_ir_builder_op1(m, f, rb, IRON_OP_RESHAPE, 1, &yf, tff);
  iron_ir_value_t *rets[2] = {y, yr};
  iron_ir_builder_return(m, f, rb, IRON_OP_RETURN, 2, rets);

  iron_cuda_device_t *d = fake_device();
  void *params = NULL;
  iron_region_t *regions[1] = {NULL};
  CHECK_OK(iron_cuda_fusion_kernel.prepare_on((iron_device_t *)d, fop, regions,
                                              &params));
  CHECK(params != NULL);
  if (params) {
    const iron_cuda_ew_params_t *p = params;
    CHECK_EQ_INT(p->num_inputs, 2);
    CHECK_EQ_INT(p->num_outputs, 2);
    CHECK_EQ_INT(p->count, 32);
  }
  free(params);
  CHECK_EQ_INT(iron_cuda_compiler_pending_count(d), 1);
  const char *src = iron_cuda_compiler_pending_source(d, 0);
  // One kernel: the broadcast operand is read at c1 (its only dim).
  CHECK(src && strstr(src, "in1[c1 * (int)1]") != NULL);
  CHECK(src && strstr(src, "iron_rnd_bf16") != NULL);
  collect_pending(d);
  fake_device_free(d);
  iron_ir_module_destroy(m);
}

// ---------------------------------------------------------------------------
// Corpus: prepare every op our kernels claim.

static void prepare_block(iron_cuda_device_t *d, const iron_ir_block_t *b,
                          prep_stats_t *stats, const char *file) {
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    for (uint32_t r = 0; r < op->num_regions; ++r) {
      for (uint32_t k = 0; k < op->regions[r].num_blocks; ++k) {
        prepare_block(d, &op->regions[r].blocks[k], stats, file);
      }
    }
    if (!lookup(op->kind)) continue;
    iron_status_t st = prepare(d, op, stats);
    if (st && iron_status_code(st) != IRON_STATUS_UNIMPLEMENTED) {
      fprintf(stderr, "%s: %s\n", file, iron_status_message(st));
      CHECK(iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED);
    }
    iron_status_free(st);
  }
}

// Counts fusions (and those ending in a reduce) and prepares each.
static void prepare_fusions(iron_cuda_device_t *d, const iron_ir_block_t *b,
                            prep_stats_t *stats, int *fusions, int *reduces,
                            const char *file) {
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    if (op->kind != IRON_OP_FUSION) {
      for (uint32_t r = 0; r < op->num_regions; ++r)
        for (uint32_t k = 0; k < op->regions[r].num_blocks; ++k)
          prepare_fusions(d, &op->regions[r].blocks[k], stats, fusions,
                          reduces, file);
      continue;
    }
    const iron_ir_block_t *fb = &op->regions[0].blocks[0];
    bool red = fb->num_ops >= 2 && fb->ops[fb->num_ops - 2]->kind ==
                                       IRON_OP_REDUCE;
    (*fusions)++;
    iron_status_t st = prepare(d, op, stats);
    if (!st && red) (*reduces)++;
    if (st && iron_status_code(st) != IRON_STATUS_UNIMPLEMENTED) {
      fprintf(stderr, "%s: %s\n", file, iron_status_message(st));
      CHECK(iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED);
    }
    iron_status_free(st);
  }
}

// Calls fn on every module of the program corpus the reader accepts (the
// reader's own tests cover refusals); returns how many.
typedef void (*corpus_fn_t)(iron_ir_module_t *m, const char *file,
                            void *arg);
static int for_each_corpus_module(corpus_fn_t fn, void *arg) {
  const char *dir = IRON_TEST_DATA_DIR "/corpus";
  DIR *dd = opendir(dir);
  CHECK(dd != NULL);
  if (!dd) return 0;
  int files = 0;
  struct dirent *e;
  while ((e = readdir(dd)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 8 || strcmp(e->d_name + len - 7, ".mlirbc") != 0) continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    size_t size = 0;
    char *bytes = test_read_file(path, &size);
    CHECK(bytes != NULL);
    if (!bytes) continue;
    iron_ir_module_t *m = NULL;
    iron_status_t st = iron_stablehlo_read(bytes, size, &m);
    free(bytes);
    if (st) {
      iron_status_free(st);
      continue;
    }
    files++;
    fn(m, e->d_name, arg);
    iron_ir_module_destroy(m);
  }
  closedir(dd);
  return files;
}

typedef struct corpus_run {
  iron_cuda_device_t *d;
  prep_stats_t stats;
  int fusions, reduces;
} corpus_run_t;

static void prepare_module(iron_ir_module_t *m, const char *file, void *arg) {
  corpus_run_t *r = arg;
  for (uint32_t fi = 0; fi < m->num_funcs; ++fi) {
    const iron_ir_region_t *body = &m->funcs[fi].body;
    for (uint32_t k = 0; k < body->num_blocks; ++k)
      prepare_block(r->d, &body->blocks[k], &r->stats, file);
  }
}

static void prepare_module_fused(iron_ir_module_t *m, const char *file,
                                 void *arg) {
  corpus_run_t *r = arg;
  // As the executable compiles for CUDA: calls inlined, then fused.
  CHECK_OK(iron_compiler_inline_calls(m, IRON_INLINE_MAX_OPS, NULL));
  CHECK_OK(iron_compiler_fuse(m, iron_cuda_fusable, NULL));
  for (uint32_t fi = 0; fi < m->num_funcs; ++fi) {
    const iron_ir_region_t *body = &m->funcs[fi].body;
    for (uint32_t k = 0; k < body->num_blocks; ++k)
      prepare_fusions(r->d, &body->blocks[k], &r->stats, &r->fusions,
                      &r->reduces, file);
  }
}

// The corpus through the fusion pass with the CUDA predicate: every fusion
// (element-wise chains and reduces with fused producers) is generated;
// test_compile_all then compiles them with NVRTC.
static void test_corpus_fused(void) {
  corpus_run_t r = {.d = fake_device()};
  setenv("IRON_CUDA_FUSE_REDUCE", "all", 1);  // the corpus' are all narrow
  for_each_corpus_module(prepare_module_fused, &r);
  unsetenv("IRON_CUDA_FUSE_REDUCE");
  fprintf(stderr, "fused corpus: %d fusions (%d with a reduce), %d prepared, "
                  "%d refused, %zu sources\n",
          r.fusions, r.reduces, r.stats.ok, r.stats.refused,
          iron_cuda_compiler_pending_count(r.d));
  CHECK(r.fusions > 50);
  CHECK(r.reduces > 10);
  collect_pending(r.d);
  fake_device_free(r.d);
}

static void test_corpus(void) {
  corpus_run_t r = {.d = fake_device()};
  int files = for_each_corpus_module(prepare_module, &r);
  fprintf(stderr, "corpus: %d artifacts, %d ops prepared, %d refused, "
                  "%zu sources\n",
          files, r.stats.ok, r.stats.refused,
          iron_cuda_compiler_pending_count(r.d));
  CHECK(files > 100);
  CHECK(r.stats.ok > 100);
  collect_pending(r.d);
  fake_device_free(r.d);
}

// ---------------------------------------------------------------------------
// NVRTC: compile everything collected, many kernels per program.

static void test_compile_all(void) {
  load_nvrtc();
  CHECK(g_have_nvrtc);
  if (!g_have_nvrtc) return;
  setenv("IRON_CUDA_CACHE", "0", 1);
  const char *prelude = iron_cuda_prelude();
  // IRON_TEST_DUMP=file writes every generated kernel there (for reading).
  const char *dump = getenv("IRON_TEST_DUMP");
  if (dump) {
    FILE *df = fopen(dump, "w");
    if (df) {
      fputs(prelude, df);
      for (size_t k = 0; k < g_num_bodies; ++k) fputs(g_bodies[k], df);
      fclose(df);
    }
  }
  const size_t per = 160;
  size_t nprog = (g_num_bodies + per - 1) / per;
  char **srcs = calloc(nprog ? nprog : 1, sizeof(*srcs));
  for (size_t p = 0; p < nprog; ++p) {
    iron_cuda_text_t s;
    iron_cuda_text_init(&s);
    iron_cuda_text_printf(&s, "%s", prelude);
    // One namespace per kernel text: helper functions of the same name
    // (iron_body, iron_fz) in different texts stay apart.
    for (size_t k = p * per; k < g_num_bodies && k < (p + 1) * per; ++k) {
      iron_cuda_text_printf(&s, "namespace tk%zu {\n%s}\n", k, g_bodies[k]);
    }
    CHECK_OK(iron_cuda_text_finish(&s, &srcs[p]));
  }
  void **cubins = calloc(nprog ? nprog : 1, sizeof(*cubins));
  size_t *sizes = calloc(nprog ? nprog : 1, sizeof(*sizes));
  iron_status_t *sts = calloc(nprog ? nprog : 1, sizeof(*sts));
  CHECK_OK(iron_cuda_compile_sources(&g_api, "sm_90a", nprog,
                                     (const char *const *)srcs, cubins, sizes,
                                     sts));
  for (size_t p = 0; p < nprog; ++p) {
    if (sts[p]) {
      fprintf(stderr, "program %zu: %s\n", p, iron_status_message(sts[p]));
    }
    CHECK(sts[p] == IRON_OK && sizes[p] > 0);
    iron_status_free(sts[p]);
    free(cubins[p]);
    free(srcs[p]);
  }
  fprintf(stderr,
          "compiled %zu kernel texts (of %zu generated, alike up to "
          "numbers) in %zu NVRTC programs\n",
          g_num_bodies, g_num_generated, nprog);
  CHECK(g_num_bodies > 300);
  free(srcs);
  free(cubins);
  free(sizes);
  free(sts);
  for (size_t k = 0; k < g_num_bodies; ++k) free(g_bodies[k]);
  free(g_bodies);
  free(g_body_hash);
  g_bodies = NULL;
  g_num_bodies = g_cap_bodies = 0;
}

// ---------------------------------------------------------------------------
// Cache

static void test_cache_key(void) {
  char a[33], b[33], c[33], e[33], f[33];
  iron_cuda_cache_key("x", "sm_90a", 13, 0, a);
  iron_cuda_cache_key("x", "sm_90a", 13, 0, b);
  iron_cuda_cache_key("y", "sm_90a", 13, 0, c);
  iron_cuda_cache_key("x", "sm_80", 13, 0, e);
  iron_cuda_cache_key("x", "sm_90a", 12, 8, f);
  CHECK_EQ_INT(strlen(a), 32);
  CHECK(strspn(a, "0123456789abcdef") == 32);
  CHECK(strcmp(a, b) == 0);
  CHECK(strcmp(a, c) != 0);
  CHECK(strcmp(a, e) != 0);
  CHECK(strcmp(a, f) != 0);
}

static void test_nvrtc_error(void) {
  load_nvrtc();
  CHECK(g_have_nvrtc);
  if (!g_have_nvrtc) return;
  void *cubin = NULL;
  size_t size = 0;
  iron_status_t st = iron_cuda_nvrtc_compile(
      &g_api, "extern \"C\" __global__ void k() { undefined_thing(); }",
      "sm_90a", &cubin, &size);
  CHECK(st && iron_status_code(st) == IRON_STATUS_INVALID_ARGUMENT);
  CHECK(st && strstr(iron_status_message(st), "undefined_thing") != NULL);
  iron_status_free(st);
  CHECK(cubin == NULL);
}

static void test_disk_cache(void) {
  load_nvrtc();
  CHECK(g_have_nvrtc);
  if (!g_have_nvrtc) return;
  char tmpl[] = "/tmp/iron_cuda_cache_XXXXXX";
  char *root = mkdtemp(tmpl);
  CHECK(root != NULL);
  if (!root) return;
  setenv("IRON_CACHE_DIR", root, 1);
  unsetenv("IRON_CUDA_CACHE");
  iron_cuda_text_t body;
  iron_cuda_text_init(&body);
  iron_cuda_text_printf(&body,
                       "extern \"C\" __global__ void %s(float *p) "
                       "{ p[threadIdx.x] = iron_fmax(p[threadIdx.x], 0.0f); }\n",
                       IRON_CUDA_KERNEL_PLACEHOLDER);
  char *src = NULL, *name = NULL;
  CHECK_OK(iron_cuda_source_make(&body, "t", &src, &name));
  CHECK(src && name && strstr(src, name) != NULL);
  CHECK(src && strstr(src, IRON_CUDA_KERNEL_PLACEHOLDER) == NULL);
  void *c1 = NULL, *c2 = NULL, *c3 = NULL, *c4 = NULL;
  size_t s1 = 0, s2 = 0, s3 = 0, s4 = 0;
  bool hit = true;
  CHECK_OK(iron_cuda_compile_cached(&g_api, src, "sm_90a", &c1, &s1, &hit));
  CHECK(!hit);
  CHECK_OK(iron_cuda_compile_cached(&g_api, src, "sm_90a", &c2, &s2, &hit));
  CHECK(hit);
  CHECK(s1 == s2 && c1 && c2 && memcmp(c1, c2, s1) == 0);
  // Corrupt the entry: flip a payload byte. It is ignored and rebuilt.
  char dir[1024];
  CHECK(iron_cuda_cache_dir(dir, sizeof(dir)));
  int major = 0, minor = 0;
  g_api.nvrtcVersion(&major, &minor);
  char key[33];
  iron_cuda_cache_key(src, "sm_90a", major, minor, key);
  char path[1200];
  snprintf(path, sizeof(path), "%s/%s.cubin", dir, key);
  FILE *fp = fopen(path, "r+b");
  CHECK(fp != NULL);
  if (fp) {
    fseek(fp, 100, SEEK_SET);
    int ch = fgetc(fp);
    fseek(fp, 100, SEEK_SET);
    fputc(ch ^ 0x5a, fp);
    fclose(fp);
  }
  void *junk = NULL;
  size_t js = 0;
  CHECK(!iron_cuda_cache_read(dir, key, &junk, &js));
  CHECK_OK(iron_cuda_compile_cached(&g_api, src, "sm_90a", &c3, &s3, &hit));
  CHECK(!hit);
  CHECK(s3 == s1 && c3 && memcmp(c1, c3, s1) == 0);
  // Truncated entry: ignored too; then the rewritten one is a hit.
  fp = fopen(path, "wb");
  if (fp) {
    fwrite("IRONCUB1", 1, 8, fp);
    fclose(fp);
  }
  CHECK_OK(iron_cuda_compile_cached(&g_api, src, "sm_90a", &c4, &s4, &hit));
  CHECK(!hit);
  free(c4);
  c4 = NULL;
  CHECK_OK(iron_cuda_compile_cached(&g_api, src, "sm_90a", &c4, &s4, &hit));
  CHECK(hit);
  free(c1);
  free(c2);
  free(c3);
  free(c4);
  free(src);
  free(name);
  // Clean up the temporary cache.
  DIR *dd = opendir(dir);
  if (dd) {
    struct dirent *e;
    while ((e = readdir(dd)) != NULL) {
      if (e->d_name[0] == '.') continue;
      char p[1300];
      snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
      unlink(p);
    }
    closedir(dd);
  }
  rmdir(dir);
  rmdir(root);
  unsetenv("IRON_CACHE_DIR");
}

// Requests dedup by (source, name).
static void test_request_dedup(void) {
  iron_cuda_device_t *d = fake_device();
  iron_cuda_function_t *a = NULL, *b = NULL, *c = NULL;
  CHECK_OK(iron_cuda_function_request(d, "src1", "k1", &a));
  CHECK_OK(iron_cuda_function_request(d, "src1", "k1", &b));
  CHECK_OK(iron_cuda_function_request(d, "src2", "k1", &c));
  CHECK(a && a == b && a != c);
  CHECK(a && strcmp(a->name, "k1") == 0 && a->fn == NULL);
  CHECK_EQ_INT(iron_cuda_compiler_pending_count(d), 2);
  fake_device_free(d);
}

static const iron_test_case_t kTests[] = {
    {"cache_key", test_cache_key},
    {"request_dedup", test_request_dedup},
    {"nvrtc_error", test_nvrtc_error},
    {"disk_cache", test_disk_cache},
    {"elementwise_sweep", test_elementwise_sweep},
    {"fusion", test_fusion},
    {"shape_sweep", test_shape_sweep},
    {"corpus", test_corpus},
    {"corpus_fused", test_corpus_fused},
    {"compile_all", test_compile_all},
};

IRON_TEST_MAIN(kTests)
