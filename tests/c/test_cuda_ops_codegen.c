// GPU-free test of the CUDA op generators (src/device/cuda/cuda_ops_gen*.c):
// every generated source of a representative set (dot pack/transposes and
// integer matmul, each reduce variant, gather/scatter, rng) is compiled by
// NVRTC to an sm_90a CUBIN. NVRTC runs without a GPU; the test loads it
// itself (dlopen) so it needs nothing but libnvrtc.
#include <dlfcn.h>
#include <pthread.h>

#include "device/cuda/gen/ops.h"
#include "host_test_ops.h"
#include "region_builder.h"
#include "stablehlo/reader.h"
#include "test.h"

// A region as the generators take it (gen/ops.h): IR, no module.
#define GEN_REGION(r) (&(iron_region_t){.ir = (r)})

typedef int (*nvrtc_create_t)(void **, const char *, const char *, int,
                              const char *const *, const char *const *);
typedef int (*nvrtc_compile_t)(void *, int, const char *const *);
typedef int (*nvrtc_size_t)(void *, size_t *);
typedef int (*nvrtc_log_t)(void *, char *);
typedef int (*nvrtc_destroy_t)(void **);

static struct {
  void *lib;
  nvrtc_create_t create;
  nvrtc_compile_t compile;
  nvrtc_size_t log_size, cubin_size;
  nvrtc_log_t log;
  nvrtc_destroy_t destroy;
} g_nvrtc;

static bool nvrtc_load(void) {
  const char *names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                         "/usr/local/cuda/lib64/libnvrtc.so"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !g_nvrtc.lib;
       ++i)
    g_nvrtc.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!g_nvrtc.lib) return false;
  g_nvrtc.create = (nvrtc_create_t)dlsym(g_nvrtc.lib, "nvrtcCreateProgram");
  g_nvrtc.compile = (nvrtc_compile_t)dlsym(g_nvrtc.lib, "nvrtcCompileProgram");
  g_nvrtc.log_size = (nvrtc_size_t)dlsym(g_nvrtc.lib, "nvrtcGetProgramLogSize");
  g_nvrtc.log = (nvrtc_log_t)dlsym(g_nvrtc.lib, "nvrtcGetProgramLog");
  g_nvrtc.cubin_size = (nvrtc_size_t)dlsym(g_nvrtc.lib, "nvrtcGetCUBINSize");
  g_nvrtc.destroy = (nvrtc_destroy_t)dlsym(g_nvrtc.lib, "nvrtcDestroyProgram");
  return g_nvrtc.create && g_nvrtc.compile && g_nvrtc.log_size &&
         g_nvrtc.log && g_nvrtc.cubin_size && g_nvrtc.destroy;
}

// Sources are collected and compiled at the end on two threads (CI has two
// cores; NVRTC takes ~0.3 s per source).
#define MAX_SOURCES 256
static struct {
  char *src;
  char name[96];
  bool ok;
} g_src[MAX_SOURCES];
static int g_nsrc;
static int g_next;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

// NVRTC's start-up cost dominates small programs, so sources are compiled
// in groups of GROUP, each wrapped in its own namespace (the kernels'
// extern "C" names are unique).
#define GROUP 8

static void compile_one(int unit) {
  int lo = unit * GROUP, hi = lo + GROUP < g_nsrc ? lo + GROUP : g_nsrc;
  size_t len = 1;
  for (int i = lo; i < hi; ++i) len += strlen(g_src[i].src) + 64;
  char *text = malloc(len);
  if (!text) return;
  size_t at = 0;
  for (int i = lo; i < hi; ++i)
    at += (size_t)snprintf(text + at, len - at, "namespace u%d {\n%s\n}\n", i,
                           g_src[i].src);
  void *prog = NULL;
  if (g_nvrtc.create(&prog, text, g_src[lo].name, 0, NULL, NULL)) {
    fprintf(stderr, "nvrtcCreateProgram failed for %s\n", g_src[lo].name);
    free(text);
    return;
  }
  // The options of the device's compiler (cuda_compile.c).
  const char *opts[] = {"--gpu-architecture=sm_90a", "-default-device",
                        "-std=c++17",     "-ftz=true",
                        "-prec-div=true", "-prec-sqrt=true",
                        "-fmad=false"};
  int r = g_nvrtc.compile(prog, (int)(sizeof(opts) / sizeof(opts[0])), opts);
  size_t cubin = 0;
  if (r == 0) g_nvrtc.cubin_size(prog, &cubin);
  if (r != 0 || cubin == 0) {
    size_t n = 0;
    g_nvrtc.log_size(prog, &n);
    char *log = calloc(n + 1, 1);
    if (log) g_nvrtc.log(prog, log);
    pthread_mutex_lock(&g_mu);
    fprintf(stderr, "NVRTC failed for the group of %s .. %s:\n%s\n",
            g_src[lo].name, g_src[hi - 1].name, log ? log : "");
    if (getenv("DUMP")) fprintf(stderr, "--- source ---\n%s\n", text);
    pthread_mutex_unlock(&g_mu);
    free(log);
  } else {
    for (int i = lo; i < hi; ++i) {
      g_src[i].ok = true;
      if (getenv("DUMP") && strstr(g_src[i].name, getenv("DUMP")))
        printf("%s\n", g_src[i].src);
    }
  }
  g_nvrtc.destroy(&prog);
  free(text);
}

static void *compile_worker(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&g_mu);
    int i = g_next++;
    pthread_mutex_unlock(&g_mu);
    if (i * GROUP >= g_nsrc) return NULL;
    compile_one(i);
  }
}

// Takes ownership of src (NULL when generation failed: a failure).
static void add_source(const char *name, iron_status_t st, char *src) {
  CHECK_OK(st);
  if (st || !src) return;
  CHECK(g_nsrc < MAX_SOURCES);
  if (g_nsrc >= MAX_SOURCES) {
    free(src);
    return;
  }
  g_src[g_nsrc].src = src;
  snprintf(g_src[g_nsrc].name, sizeof(g_src[g_nsrc].name), "%s.cu", name);
  ++g_nsrc;
}

// --- dot -------------------------------------------------------------------

static void test_dot_sources(void) {
  char *src = NULL;
  // Transposed [B, M, K] gather of a [K, B, M] operand (f32 -> f32).
  int64_t dims3[3] = {4, 5, 6}, strides3[3] = {6, 1, 20};
  { iron_status_t st_ = iron_cuda_gen_pack("pack_f32", IRON_DTYPE_F32,
                                            IRON_DTYPE_F32, 3, dims3,
                                            strides3, &src); add_source("pack_f32", st_, src); }
  // Conversions the dot glue uses: bf16/f16/ints -> f32, f32 -> bf16/f16
  // (result rounding), f32 -> f64, real -> complex.
  const iron_dtype_t conv[][2] = {
      {IRON_DTYPE_BF16, IRON_DTYPE_F32}, {IRON_DTYPE_F16, IRON_DTYPE_F32},
      {IRON_DTYPE_S8, IRON_DTYPE_F32},   {IRON_DTYPE_F32, IRON_DTYPE_BF16},
      {IRON_DTYPE_F32, IRON_DTYPE_F16},  {IRON_DTYPE_F32, IRON_DTYPE_F64},
      {IRON_DTYPE_F32, IRON_DTYPE_C64},  {IRON_DTYPE_C128, IRON_DTYPE_C128},
      {IRON_DTYPE_U64, IRON_DTYPE_F64},  {IRON_DTYPE_PRED, IRON_DTYPE_F32},
  };
  for (size_t i = 0; i < sizeof(conv) / sizeof(conv[0]); ++i) {
    char name[64];
    snprintf(name, sizeof(name), "pack_%s_%s", iron_dtype_name(conv[i][0]),
             iron_dtype_name(conv[i][1]));
    for (char *c = name; *c; ++c)
      if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9'))) *c = '_';
    src = NULL;
    int64_t d2[2] = {7, 9}, s2[2] = {1, 7};
    { iron_status_t st_ = iron_cuda_gen_pack(name, conv[i][0], conv[i][1], 2, d2,
                                        s2, &src); add_source(name, st_, src); }
  }
  // complex -> real is refused.
  src = NULL;
  int64_t d1[1] = {3}, s1[1] = {1};
  iron_status_t st = iron_cuda_gen_pack("x", IRON_DTYPE_C64, IRON_DTYPE_F32,
                                        1, d1, s1, &src);
  CHECK(st != IRON_OK);
  iron_status_free(st);
  // Integer matmuls.
  int64_t ls[3] = {35, 7, 1}, rs[3] = {21, 1, 7};
  src = NULL;
  { iron_status_t st_ = iron_cuda_gen_dot_int("dot_s32", IRON_DTYPE_S32,
                                              IRON_DTYPE_S32, IRON_DTYPE_S32,
                                              2, 5, 3, 7, ls, rs, &src); add_source("dot_s32", st_, src); }
  src = NULL;
  { iron_status_t st_ = iron_cuda_gen_dot_int("dot_s8_s32", IRON_DTYPE_S8, IRON_DTYPE_S8,
                                   IRON_DTYPE_S32, 2, 5, 3, 7, ls, rs, &src); add_source("dot_s8_s32", st_, src); }
  src = NULL;
  { iron_status_t st_ = iron_cuda_gen_dot_int("dot_pred", IRON_DTYPE_PRED,
                                   IRON_DTYPE_PRED, IRON_DTYPE_PRED, 2, 5, 3,
                                   7, ls, rs, &src); add_source("dot_pred", st_, src); }
  // s4/u4 dots: operands packed to s8/u8, the result's low 4 bits.
  src = NULL;
  { iron_status_t st_ = iron_cuda_gen_dot_int("dot_u4", IRON_DTYPE_U8,
                                   IRON_DTYPE_U8, IRON_DTYPE_U4, 2, 5, 3,
                                   7, ls, rs, &src);
    CHECK(st_ || strstr(src, "acc & 0xfu") != NULL);
    add_source("dot_u4", st_, src); }
}


// --- reduce ------------------------------------------------------------------

static void add_reduce(const char *name, int32_t rank, const int64_t *dims,
                       const bool *reduced, uint32_t num,
                       const iron_dtype_t *dts, rb_t *body) {
  char *src = NULL;
  unsigned grid = 0, block = 0;
  iron_status_t st = iron_cuda_gen_reduce(name, rank, dims, reduced, num, dts,
                                          GEN_REGION(&body->region), &src, &grid, &block);
  add_source(name, st, src);
  CHECK(st || (grid >= 1 && block == 256));
  free(body);
}

static void test_reduce_sources(void) {
  const iron_op_kind_t kinds[] = {IRON_OP_ADD, IRON_OP_MULTIPLY,
                                  IRON_OP_MAXIMUM, IRON_OP_MINIMUM};
  const iron_dtype_t fdts[] = {IRON_DTYPE_F32, IRON_DTYPE_BF16,
                               IRON_DTYPE_F16, IRON_DTYPE_F64, IRON_DTYPE_S32,
                               IRON_DTYPE_U8, IRON_DTYPE_S64};
  // Every single-op body over the layouts: warp rows, block rows, columns
  // (thread per output), non-adjacent dims, everything.
  int64_t d3[3] = {64, 33, 300};
  bool last[3] = {false, false, true}, mid[3] = {false, true, false},
       outer_inner[3] = {true, false, true}, all[3] = {true, true, true};
  int64_t big[2] = {8, 4096};
  bool big_row[2] = {false, true};
  int64_t col[2] = {100000, 3};
  bool col0[2] = {true, false};
  int n = 0;
  for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); ++k)
    for (size_t d = 0; d < sizeof(fdts) / sizeof(fdts[0]); ++d) {
      char name[64];
      snprintf(name, sizeof(name), "reduce_%d", n);
      const bool *shapes[4] = {last, mid, outer_inner, all};
      int which = n % 6;
      iron_dtype_t dt = fdts[d];
      if (which < 4)
        add_reduce(name, 3, d3, shapes[which], 1, &dt, rb_binary(kinds[k], dt));
      else if (which == 4)
        add_reduce(name, 2, big, big_row, 1, &dt, rb_binary(kinds[k], dt));
      else
        add_reduce(name, 2, col, col0, 1, &dt, rb_binary(kinds[k], dt));
      ++n;
    }
  // Bitwise bodies on pred and ints.
  const iron_op_kind_t bits[] = {IRON_OP_AND, IRON_OP_OR, IRON_OP_XOR};
  const iron_dtype_t bdts[] = {IRON_DTYPE_PRED, IRON_DTYPE_U32,
                               IRON_DTYPE_S16};
  for (size_t k = 0; k < 3; ++k)
    for (size_t d = 0; d < 3; ++d) {
      char name[64];
      snprintf(name, sizeof(name), "reduce_bits_%zu_%zu", k, d);
      iron_dtype_t dt = bdts[d];
      add_reduce(name, 3, d3, k == 0 ? last : k == 1 ? mid : all, 1, &dt,
                 rb_binary(bits[k], dt));
    }
  // Variadic argmax in every mode.
  iron_dtype_t am[2] = {IRON_DTYPE_F32, IRON_DTYPE_S32};
  add_reduce("argmax_warp", 3, d3, last, 2, am,
             rb_argmax(IRON_DTYPE_F32, IRON_DTYPE_S32));
  add_reduce("argmax_block", 2, big, big_row, 2, am,
             rb_argmax(IRON_DTYPE_F32, IRON_DTYPE_S32));
  add_reduce("argmax_thread", 3, d3, mid, 2, am,
             rb_argmax(IRON_DTYPE_F32, IRON_DTYPE_S32));
  iron_dtype_t am16[2] = {IRON_DTYPE_BF16, IRON_DTYPE_S64};
  add_reduce("argmax_bf16", 3, d3, all, 2, am16,
             rb_argmax(IRON_DTYPE_BF16, IRON_DTYPE_S64));
  // Column reduces split over row segments (few outputs, many rows): f32
  // add (a layernorm's gamma gradient), ordered argmax, f16, int.
  int64_t ln[2] = {16384, 512}, narrow_col[2] = {4096, 40};
  iron_dtype_t f32 = IRON_DTYPE_F32;
  const iron_dtype_t f16 = IRON_DTYPE_F16,
                     s32 = IRON_DTYPE_S32;
  add_reduce("reduce_split_f32", 2, ln, col0, 1, &f32,
             rb_binary(IRON_OP_ADD, IRON_DTYPE_F32));
  add_reduce("argmax_split", 2, narrow_col, col0, 2, am,
             rb_argmax(IRON_DTYPE_F32, IRON_DTYPE_S32));
  add_reduce("reduce_split_f16", 2, narrow_col, col0, 1, &f16,
             rb_binary(IRON_OP_ADD, IRON_DTYPE_F16));
  add_reduce("reduce_split_s32", 2, ln, col0, 1, &s32,
             rb_binary(IRON_OP_MAXIMUM, IRON_DTYPE_S32));
  {
    char *src = NULL;
    unsigned grid = 0, block = 0;
    rb_t *b = rb_binary(IRON_OP_ADD, IRON_DTYPE_F32);
    CHECK_OK(iron_cuda_gen_reduce("split_check", 2, ln, col0, 1, &f32,
                                  GEN_REGION(&b->region), &src, &grid, &block));
    // 16 tiles of 32 columns, each split into row segments.
    CHECK(grid > 16 && grid % 16 == 0);
    CHECK(src && strstr(src, "atomicAdd(&iron_count[tile]"));
    CHECK(iron_cuda_reduce_threads(2, ln, col0) == (int64_t)grid * 256);
    free(src);
    free(b);
  }
  // Row reduces split over segments (few outputs, long rows): a full sum
  // to a scalar, a few long rows, ordered argmax, a middle-axis reduce.
  {
    int64_t full[1] = {(int64_t)1 << 28}, rows[2] = {3, 1 << 20},
            midd[3] = {2, 1 << 18, 1};
    bool all1[1] = {true}, row1[2] = {false, true},
         mid1[3] = {false, true, false};
    add_reduce("reduce_rowsplit_full", 1, full, all1, 1, &f32,
               rb_binary(IRON_OP_ADD, IRON_DTYPE_F32));
    add_reduce("reduce_rowsplit_rows_s32", 2, rows, row1, 1, &s32,
               rb_binary(IRON_OP_MAXIMUM, IRON_DTYPE_S32));
    add_reduce("reduce_rowsplit_f16", 2, rows, row1, 1, &f16,
               rb_binary(IRON_OP_ADD, IRON_DTYPE_F16));
    add_reduce("argmax_rowsplit", 2, rows, row1, 2, am,
               rb_argmax(IRON_DTYPE_F32, IRON_DTYPE_S32));
    add_reduce("reduce_rowsplit_mid", 3, midd, mid1, 1, &f32,
               rb_binary(IRON_OP_MINIMUM, IRON_DTYPE_F32));
    char *src = NULL;
    unsigned grid = 0, block = 0;
    rb_t *b = rb_binary(IRON_OP_ADD, IRON_DTYPE_F32);
    CHECK_OK(iron_cuda_gen_reduce("rowsplit_check", 1, full, all1, 1, &f32,
                                  GEN_REGION(&b->region), &src, &grid, &block));
    // One output: its row splits into many segments, one block each.
    CHECK(grid >= 256);
    CHECK(src && strstr(src, "atomicAdd(&iron_count[o]"));
    CHECK(iron_cuda_reduce_threads(1, full, all1) == (int64_t)grid * 256);
    free(src);
    free(b);
    // IRON_CUDA_REDUCE_SPLIT=0: one block.
    setenv("IRON_CUDA_REDUCE_SPLIT", "0", 1);
    b = rb_binary(IRON_OP_ADD, IRON_DTYPE_F32);
    CHECK_OK(iron_cuda_gen_reduce("rowsplit_off", 1, full, all1, 1, &f32,
                                  GEN_REGION(&b->region), &src, &grid, &block));
    CHECK(grid == 1);
    free(src);
    free(b);
    unsetenv("IRON_CUDA_REDUCE_SPLIT");
  }
  // The staged ordered loops (K = 8 f32+s32, K = 4 f64+s64, unstaged for
  // many wide operands), batch norm's narrow columns, 12
  // operands in every mode.
  {
    int64_t rows8k[2] = {64, 8192}, bn[2] = {131072, 64}, w[2] = {64, 1000};
    bool row1[2] = {false, true};
    iron_dtype_t am64[2] = {IRON_DTYPE_F64, IRON_DTYPE_S64};
    add_reduce("argmax_staged_rows", 2, rows8k, row1, 2, am,
               rb_argmax(IRON_DTYPE_F32, IRON_DTYPE_S32));
    add_reduce("argmax_staged_warp", 2, w, row1, 2, am,
               rb_argmax(IRON_DTYPE_F32, IRON_DTYPE_S32));
    add_reduce("argmax_staged_f64", 2, rows8k, row1, 2, am64,
               rb_argmax(IRON_DTYPE_F64, IRON_DTYPE_S64));
    add_reduce("colsum_bn", 2, bn, col0, 1, &f32,
               rb_binary(IRON_OP_ADD, IRON_DTYPE_F32));
    iron_dtype_t many[12];
    for (int k = 0; k < 12; ++k)
      many[k] = k % 3 == 0 ? IRON_DTYPE_F64 : k % 3 == 1 ? IRON_DTYPE_S32
                                                         : IRON_DTYPE_BF16;
    // 12 operands: return op pairs of (a_i, b_i) for each operand.
    for (int shape = 0; shape < 3; ++shape) {
      rb_t *b = rb_new();
      iron_ir_value_t *x[24], *r[12];
      for (int k = 0; k < 24; ++k) x[k] = rb_arg(b, many[k % 12]);
      for (int k = 0; k < 12; ++k)
        r[k] = rb_op(b, IRON_OP_MAXIMUM, many[k], x[k], x[12 + k], NULL);
      rb_return(b, 12, r);
      char name[32];
      snprintf(name, sizeof(name), "reduce12_%d", shape);
      add_reduce(name, 2, shape == 0 ? rows8k : shape == 1 ? bn : w,
                 shape == 1 ? col0 : row1, 12, many, b);
    }
  }
  // Empty reduced dims and empty outputs still generate.
  int64_t e[2] = {0, 5};

  add_reduce("reduce_empty_out", 2, e, big_row, 1, &f32,
             rb_binary(IRON_OP_ADD, f32));
  add_reduce("reduce_empty_red", 2, e, col0, 1, &f32,
             rb_binary(IRON_OP_ADD, f32));
  // Complex reductions in every mode: add/multiply, a custom body with an
  // outer complex constant (compare, select, sub, negate, real/imag,
  // complex), and a variadic (c128 value, s32 index) body.
  iron_dtype_t c64 = IRON_DTYPE_C64, c128 = IRON_DTYPE_C128;
  add_reduce("reduce_c64_add_warp", 3, d3, last, 1, &c64,
             rb_binary(IRON_OP_ADD, c64));
  add_reduce("reduce_c128_add_block", 2, big, big_row, 1, &c128,
             rb_binary(IRON_OP_ADD, c128));
  add_reduce("reduce_c128_mul_cols", 2, col, col0, 1, &c128,
             rb_binary(IRON_OP_MULTIPLY, c128));
  add_reduce("reduce_c64_mul_thread", 3, d3, mid, 1, &c64,
             rb_binary(IRON_OP_MULTIPLY, c64));
  for (int w = 0; w < 2; ++w) {
    iron_dtype_t cdt = w ? c128 : c64;
    iron_dtype_t rdt = w ? IRON_DTYPE_F64 : IRON_DTYPE_F32;
    outer_const_t oc;
    const double kd[2] = {1.5, -2.0};
    const float kf[2] = {1.5f, -2.0f};
    iron_ir_value_t *k = outer_const(&oc, cdt, w ? (const void *)kd
                                                 : (const void *)kf);
    rb_t *cb = rb_new();
    iron_ir_value_t *x = rb_arg(cb, cdt), *y = rb_arg(cb, cdt);
    iron_ir_value_t *eq = rb_cmp(cb, IRON_CMP_EQ, IRON_CMP_TYPE_FLOAT, x, y);
    iron_ir_value_t *m = rb_op(cb, IRON_OP_MULTIPLY, cdt, x, y, NULL);
    iron_ir_value_t *sb = rb_op(cb, IRON_OP_SUBTRACT, cdt, m, k, NULL);
    iron_ir_value_t *ng = rb_op(cb, IRON_OP_NEGATE, cdt, sb, NULL, NULL);
    iron_ir_value_t *re = rb_op(cb, IRON_OP_REAL, rdt, ng, NULL, NULL);
    iron_ir_value_t *im = rb_op(cb, IRON_OP_IMAG, rdt, x, NULL, NULL);
    iron_ir_value_t *cx = rb_op(cb, IRON_OP_COMPLEX, cdt, re, im, NULL);
    iron_ir_value_t *r = rb_op(cb, IRON_OP_SELECT, cdt, eq, x, cx);
    rb_return(cb, 1, &r);
    add_reduce(w ? "reduce_c128_custom" : "reduce_c64_custom", 3, d3,
               w ? last : mid, 1, &cdt, cb);
  }
  rb_t *vb = rb_new();
  iron_ir_value_t *av = rb_arg(vb, c128), *ai = rb_arg(vb, IRON_DTYPE_S32);
  iron_ir_value_t *bv = rb_arg(vb, c128), *bi = rb_arg(vb, IRON_DTYPE_S32);
  iron_ir_value_t *sum = rb_op(vb, IRON_OP_ADD, c128, av, bv, NULL);
  iron_ir_value_t *lt = rb_cmp(vb, IRON_CMP_LT, IRON_CMP_TYPE_SIGNED, ai, bi);
  iron_ir_value_t *idx = rb_op(vb, IRON_OP_SELECT, IRON_DTYPE_S32, lt, ai, bi);
  iron_ir_value_t *rets[2] = {sum, idx};
  rb_return(vb, 2, rets);
  iron_dtype_t cv[2] = {c128, IRON_DTYPE_S32};
  add_reduce("reduce_c128_variadic", 3, d3, last, 2, cv, vb);
  // Complex ordering compares and max/min (XLA:CPU's rules).
  for (int dir = 0; dir < 6; ++dir) {
    rb_t *gb = rb_new();
    iron_ir_value_t *gx = rb_arg(gb, c128), *gy = rb_arg(gb, c128);
    iron_ir_value_t *gt = rb_cmp(gb, dir, IRON_CMP_TYPE_FLOAT, gx, gy);
    iron_ir_value_t *gs = rb_op(gb, IRON_OP_SELECT, c128, gt, gx, gy);
    iron_ir_value_t *mx = rb_op(gb, dir & 1 ? IRON_OP_MAXIMUM : IRON_OP_MINIMUM,
                                c128, gs, gy, NULL);
    rb_return(gb, 1, &mx);
    char name[32];
    snprintf(name, sizeof(name), "reduce_c128_cmp_%d", dir);
    add_reduce(name, 3, d3, dir & 1 ? mid : last, 1, &c128, gb);
  }
  // jnp.logaddexp as a reduce body (corpus lax_reduce_custom_body):
  // exponential/log_plus_one in a region, spelled as the element-wise
  // generator spells them; pow/atan2 too; f16 results rounded.
  {
    const iron_dtype_t ldts[3] = {IRON_DTYPE_F32, IRON_DTYPE_F64,
                                  IRON_DTYPE_F16};
    for (int w = 0; w < 3; ++w) {
      iron_dtype_t dt = ldts[w];
      rb_t *lb = rb_new();
      iron_ir_value_t *x = rb_arg(lb, dt), *y = rb_arg(lb, dt);
      iron_ir_value_t *mx = rb_op(lb, IRON_OP_MAXIMUM, dt, x, y, NULL);
      iron_ir_value_t *df = rb_op(lb, IRON_OP_SUBTRACT, dt, x, y, NULL);
      iron_ir_value_t *nn = rb_cmp(lb, IRON_CMP_NE, IRON_CMP_TYPE_FLOAT, df, df);
      iron_ir_value_t *sm = rb_op(lb, IRON_OP_ADD, dt, x, y, NULL);
      iron_ir_value_t *ab = rb_op(lb, IRON_OP_ABS, dt, df, NULL, NULL);
      iron_ir_value_t *ng = rb_op(lb, IRON_OP_NEGATE, dt, ab, NULL, NULL);
      iron_ir_value_t *ex = rb_op(lb, IRON_OP_EXPONENTIAL, dt, ng, NULL, NULL);
      iron_ir_value_t *lp = rb_op(lb, IRON_OP_LOG_PLUS_ONE, dt, ex, NULL, NULL);
      iron_ir_value_t *pw = rb_op(lb, IRON_OP_POWER, dt, lp, lp, NULL);
      iron_ir_value_t *at = rb_op(lb, IRON_OP_ATAN2, dt, pw, lp, NULL);
      iron_ir_value_t *ad = rb_op(lb, IRON_OP_ADD, dt, mx, at, NULL);
      iron_ir_value_t *r = rb_op(lb, IRON_OP_SELECT, dt, nn, sm, ad);
      rb_return(lb, 1, &r);
      add_reduce(w == 0 ? "reduce_logaddexp_f32"
                 : w == 1 ? "reduce_logaddexp_f64" : "reduce_logaddexp_f16",
                 3, d3, w == 1 ? mid : last, 1, &dt, lb);
    }
  }
  // Complex division in a body: the scalar emitter's (the element-wise
  // kernels' formula), as every op fusions support.
  rb_t *gb = rb_binary(IRON_OP_DIVIDE, c64);
  char *src = NULL;
  unsigned g, bl;
  iron_status_t st = iron_cuda_gen_reduce("reduce_cdiv", 3, d3, last, 1, &c64,
                                          GEN_REGION(&gb->region), &src, &g,
                                          &bl);
  CHECK(st == IRON_OK && src && strstr(src, " / ") != NULL);
  add_source("reduce_cdiv", st, src);
  free(gb);
}


// A reduce body that calls functions (jnp.where in a lax.reduce body lowers
// to func.call): inlined when the module is known, refused by name
// otherwise. From the corpus artifact lax_reduce_variadic.
static void test_region_calls(void) {
  const char *path = IRON_TEST_DATA_DIR "/corpus/lax_reduce_variadic.mlirbc";
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  if (!f) return;
  char *bytes = malloc(1 << 20);
  size_t n = bytes ? fread(bytes, 1, 1 << 20, f) : 0;
  fclose(f);
  iron_ir_module_t *m = NULL;
  CHECK_OK(iron_stablehlo_read(bytes, n, &m));
  free(bytes);
  if (!m) return;
  const iron_ir_func_t *main_fn = iron_ir_module_main(m);
  const iron_ir_op_t *red = NULL;
  for (uint32_t i = 0; main_fn && i < main_fn->body.blocks[0].num_ops; ++i)
    if (main_fn->body.blocks[0].ops[i]->kind == IRON_OP_REDUCE)
      red = main_fn->body.blocks[0].ops[i];
  CHECK(red != NULL);
  if (red) {
    const iron_ir_type_t *in = red->operands[0]->type;
    bool reduced[2] = {false, true};
    iron_dtype_t dts[2] = {red->operands[0]->type->dtype,
                           red->operands[1]->type->dtype};
    char *src = NULL;
    unsigned g = 0, bl = 0;
    iron_status_t st = iron_cuda_gen_reduce("x", in->rank, in->dims, reduced, 2,
                                            dts, GEN_REGION(&red->regions[0]),
                                            &src, &g, &bl);
    CHECK(st != IRON_OK && strstr(iron_status_message(st), "func.call"));
    iron_status_free(st);
    st = iron_cuda_gen_reduce(
        "reduce_calls", in->rank, in->dims, reduced, 2, dts,
        &(iron_region_t){.ir = &red->regions[0], .module = m}, &src, &g, &bl);
    CHECK(!st && src && strstr(src, "cr0_5_0") != NULL);
    add_source("reduce_calls", st, src);
  }
  iron_ir_module_destroy(m);
}

// --- gather / scatter ----------------------------------------------------------

static void make_gather(ht_op_t *b, iron_dtype_t dt, int orank,
                        const int64_t *odims, iron_dtype_t idt, int irank,
                        const int64_t *idims, int rrank, const int64_t *rdims,
                        int noff, const int64_t *off, int ncol,
                        const int64_t *col, int nsm, const int64_t *sm,
                        const int64_t *slice, int64_t ivd, int nbatch,
                        const int64_t *obatch, const int64_t *ibatch) {
  ht_init(b, IRON_OP_GATHER);
  ht_operand(b, dt, orank, odims);
  ht_operand(b, idt, irank, idims);
  ht_result(b, dt, rrank, rdims);
  ht_attr_i64(b, "offset_dims", noff, off);
  ht_attr_i64(b, "collapsed_slice_dims", ncol, col);
  ht_attr_i64(b, "start_index_map", nsm, sm);
  ht_attr_i64(b, "slice_sizes", orank, slice);
  ht_attr_i64(b, "index_vector_dim", 1, &ivd);
  ht_attr_i64(b, "operand_batching_dims", nbatch, obatch);
  ht_attr_i64(b, "start_indices_batching_dims", nbatch, ibatch);
}

static void add_gather(const char *name, ht_op_t *b) {
  iron_cuda_gs_plan_t plan;
  iron_status_t st = iron_cuda_gather_plan(&b->op, &plan);
  CHECK_OK(st);
  if (st) return;
  char *src = NULL;
  st = iron_cuda_gen_gather(name, &plan, &src);
  add_source(name, st, src);
}

static void test_gather_sources(void) {
  ht_op_t b;
  // Embedding lookup: [1000, 64][idx [8, 16]] -> [8, 16, 64].
  int64_t od[2] = {1000, 64}, id[2] = {8, 16}, rd[3] = {8, 16, 64};
  int64_t off[1] = {2}, col[1] = {0}, sm[1] = {0}, sl[2] = {1, 64};
  const iron_dtype_t dts[] = {IRON_DTYPE_F32, IRON_DTYPE_BF16, IRON_DTYPE_PRED,
                              IRON_DTYPE_F64, IRON_DTYPE_C128};
  const iron_dtype_t idts[] = {IRON_DTYPE_S32, IRON_DTYPE_S64, IRON_DTYPE_U64,
                               IRON_DTYPE_S4, IRON_DTYPE_U8};
  for (int i = 0; i < 5; ++i) {
    make_gather(&b, dts[i], 2, od, idts[i], 2, id, 3, rd, 1, off, 1, col, 1,
                sm, sl, 2, 0, NULL, NULL);
    char name[32];
    snprintf(name, sizeof(name), "gather_embed_%d", i);
    add_gather(name, &b);
  }
  // take_along_axis with batching dims (cross-entropy's label pick):
  // [32, 100][idx [32, 1]] -> [32].
  int64_t od2[2] = {32, 100}, id2[2] = {32, 1}, rd2[1] = {32};
  int64_t col2[1] = {1}, sm2[1] = {1}, sl2[2] = {1, 1}, ob[1] = {0},
          ib[1] = {0};
  make_gather(&b, IRON_DTYPE_F32, 2, od2, IRON_DTYPE_S32, 2, id2, 1, rd2, 0,
              NULL, 1, col2, 1, sm2, sl2, 1, 1, ob, ib);
  add_gather("gather_batching", &b);
  // A bad dimension number is an error, not a kernel.
  int64_t bad_sl[2] = {2, 64};
  make_gather(&b, IRON_DTYPE_F32, 2, od, IRON_DTYPE_S32, 2, id, 3, rd, 1, off,
              1, col, 1, sm, bad_sl, 2, 0, NULL, NULL);
  iron_cuda_gs_plan_t plan;
  iron_status_t st = iron_cuda_gather_plan(&b.op, &plan);
  CHECK(st != IRON_OK);
  iron_status_free(st);
}

static void make_scatter(ht_op_t *b, iron_dtype_t dt, int orank,
                         const int64_t *odims, int irank, const int64_t *idims,
                         int urank, const int64_t *udims, int nuwd,
                         const int64_t *uwd, int niwd, const int64_t *iwd,
                         int nsd, const int64_t *sd, int64_t ivd) {
  ht_init(b, IRON_OP_SCATTER);
  ht_operand(b, dt, orank, odims);
  ht_operand(b, IRON_DTYPE_S32, irank, idims);
  ht_operand(b, dt, urank, udims);
  ht_result(b, dt, orank, odims);
  ht_attr_i64(b, "update_window_dims", nuwd, uwd);
  ht_attr_i64(b, "inserted_window_dims", niwd, iwd);
  ht_attr_i64(b, "scatter_dims_to_operand_dims", nsd, sd);
  ht_attr_i64(b, "index_vector_dim", 1, &ivd);
}

static void add_scatter(const char *name, ht_op_t *b, rb_t *body,
                        bool unique, bool expect_overlap) {
  iron_cuda_gs_plan_t plan;
  // The shared plan wants the op's update body (gather_plan.c).
  b->op.num_regions = 1;
  b->op.regions = &body->region;
  iron_status_t st = iron_cuda_scatter_plan(&b->op, &plan);
  CHECK_OK(st);
  if (!st) {
    CHECK(plan.overlap == expect_overlap);
    char *src = NULL;
    unsigned grid = 0;
    iron_cuda_scatter_op_t op = iron_cuda_scatter_classify(&body->region);
    st = iron_cuda_gen_scatter(name, &plan, op, GEN_REGION(&body->region),
                               unique, &src, &grid);
    add_source(name, st, src);
    CHECK(st || grid >= 1);
  }
  free(body);
}

// return a1 (scatter "set")
static rb_t *rb_set(iron_dtype_t dt) {
  rb_t *b = rb_new();
  rb_arg(b, dt);
  iron_ir_value_t *y = rb_arg(b, dt);
  rb_return(b, 1, &y);
  return b;
}

static void test_scatter_sources(void) {
  ht_op_t b;
  // Embedding gradient: [1000, 64] += updates [128, 64] at idx [128, 1].
  int64_t od[2] = {1000, 64}, id[2] = {128, 1}, ud[2] = {128, 64};
  int64_t uwd[1] = {1}, iwd[1] = {0}, sd[1] = {0};
  struct {
    iron_dtype_t dt;
    iron_op_kind_t kind;
  } cases[] = {
      {IRON_DTYPE_F32, IRON_OP_ADD},     {IRON_DTYPE_BF16, IRON_OP_ADD},
      {IRON_DTYPE_F16, IRON_OP_MAXIMUM}, {IRON_DTYPE_S8, IRON_OP_ADD},
      {IRON_DTYPE_F64, IRON_OP_ADD},     {IRON_DTYPE_C64, IRON_OP_ADD},
      {IRON_DTYPE_S64, IRON_OP_MAXIMUM}, {IRON_DTYPE_F32, IRON_OP_MINIMUM},
      {IRON_DTYPE_PRED, IRON_OP_OR},     {IRON_DTYPE_U16, IRON_OP_MULTIPLY},
      {IRON_DTYPE_F64, IRON_OP_MULTIPLY}, {IRON_DTYPE_S32, IRON_OP_ADD},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    char name[32];
    snprintf(name, sizeof(name), "scatter_%zu", i);
    make_scatter(&b, cases[i].dt, 2, od, 2, id, 2, ud, 1, uwd, 1, iwd, 1, sd,
                 1);
    add_scatter(name, &b, rb_binary(cases[i].kind, cases[i].dt), false, false);
  }
  // Set: in order (serial over points) and with unique indices (parallel).
  make_scatter(&b, IRON_DTYPE_F32, 2, od, 2, id, 2, ud, 1, uwd, 1, iwd, 1, sd,
               1);
  add_scatter("scatter_set", &b, rb_set(IRON_DTYPE_F32), false, false);
  add_scatter("scatter_set_unique", &b, rb_set(IRON_DTYPE_F32), true, false);
  add_scatter("scatter_set_c128", &b, rb_set(IRON_DTYPE_F32), false, false);
  // A generic body: argmax-like select on f32.
  rb_t *g = rb_new();
  iron_ir_value_t *x = rb_arg(g, IRON_DTYPE_F32), *y = rb_arg(g, IRON_DTYPE_F32);
  iron_ir_value_t *s = rb_op(g, IRON_OP_SUBTRACT, IRON_DTYPE_F32, x, y, NULL);
  rb_return(g, 1, &s);
  add_scatter("scatter_generic", &b, g, false, false);
  // Complex products have no atomic: in order, and parallel when unique.
  make_scatter(&b, IRON_DTYPE_C64, 2, od, 2, id, 2, ud, 1, uwd, 1, iwd, 1, sd,
               1);
  add_scatter("scatter_c64_mul", &b,
              rb_binary(IRON_OP_MULTIPLY, IRON_DTYPE_C64), false, false);
  make_scatter(&b, IRON_DTYPE_C128, 2, od, 2, id, 2, ud, 1, uwd, 1, iwd, 1, sd,
               1);
  add_scatter("scatter_c128_mul_unique", &b,
              rb_binary(IRON_OP_MULTIPLY, IRON_DTYPE_C128), true, false);
  add_scatter("scatter_c128_sub", &b,
              rb_binary(IRON_OP_SUBTRACT, IRON_DTYPE_C128), false, false);
  // scatter_apply(v * 2 + 1): the constants come from outside the body.
  {
    outer_const_t c2, c1;
    const float two = 2.0f, onef = 1.0f;
    make_scatter(&b, IRON_DTYPE_F32, 2, od, 2, id, 2, ud, 1, uwd, 1, iwd, 1,
                 sd, 1);
    rb_t *ab = rb_new();
    iron_ir_value_t *v = rb_arg(ab, IRON_DTYPE_F32);
    rb_arg(ab, IRON_DTYPE_F32);
    iron_ir_value_t *m2 = rb_op(ab, IRON_OP_MULTIPLY, IRON_DTYPE_F32, v,
                                outer_const(&c2, IRON_DTYPE_F32, &two), NULL);
    iron_ir_value_t *p1 = rb_op(ab, IRON_OP_ADD, IRON_DTYPE_F32, m2,
                                outer_const(&c1, IRON_DTYPE_F32, &onef), NULL);
    rb_return(ab, 1, &p1);
    add_scatter("scatter_apply_outer_consts", &b, ab, false, false);
  }
  // Overlapping windows: [10] with windows of 2 at 3 points.
  int64_t od1[1] = {10}, id1[2] = {3, 1}, ud1[2] = {3, 2}, uwd1[1] = {1};
  make_scatter(&b, IRON_DTYPE_F32, 1, od1, 2, id1, 2, ud1, 1, uwd1, 0, NULL, 1,
               sd, 1);
  add_scatter("scatter_overlap", &b, rb_set(IRON_DTYPE_F32), false, true);
  make_scatter(&b, IRON_DTYPE_S32, 1, od1, 2, id1, 2, ud1, 1, uwd1, 0, NULL, 1,
               sd, 1);
  add_scatter("scatter_overlap_add", &b, rb_binary(IRON_OP_ADD, IRON_DTYPE_S32),
              false, true);
}


// --- rng ---------------------------------------------------------------------------

static void test_rng_sources(void) {
  struct {
    int32_t alg, words, bytes, rank;
    int64_t dims[2];
  } cases[] = {
      {IRON_RNG_THREE_FRY, 2, 4, 2, {4, 5}}, {IRON_RNG_THREE_FRY, 2, 4, 2, {3, 5}},
      {IRON_RNG_THREE_FRY, 2, 8, 1, {7, 0}}, {IRON_RNG_THREE_FRY, 2, 1, 0, {0, 0}},
      {IRON_RNG_PHILOX, 2, 4, 2, {3, 3}},    {IRON_RNG_PHILOX, 2, 8, 1, {5, 0}},
      {IRON_RNG_PHILOX, 3, 2, 1, {9, 0}},    {IRON_RNG_PHILOX, 3, 8, 2, {2, 2}},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    char name[32];
    snprintf(name, sizeof(name), "rng_%zu", i);
    char *src = NULL;
    unsigned grid = 0;
    iron_status_t st =
        iron_cuda_gen_rng(name, cases[i].alg, cases[i].words, cases[i].bytes,
                          cases[i].rank, cases[i].dims, &src, &grid);
    add_source(name, st, src);
    CHECK(st || grid >= 1);
  }
  char *src = NULL;
  unsigned grid = 0;
  int64_t d[1] = {4};
  iron_status_t st =
      iron_cuda_gen_rng("x", IRON_RNG_THREE_FRY, 3, 4, 1, d, &src, &grid);
  CHECK(st != IRON_OK);
  iron_status_free(st);
}


// --- sort --------------------------------------------------------------------------

// lt(a0, a1) on the first operand; other operands' arguments unused.
static rb_t *rb_sort_cmp(uint32_t num, const iron_dtype_t *dts, int32_t type) {
  rb_t *b = rb_new();
  iron_ir_value_t *x = NULL, *y = NULL;
  for (uint32_t i = 0; i < num; ++i) {
    iron_ir_value_t *l = rb_arg(b, dts[i]), *r = rb_arg(b, dts[i]);
    if (i == 0) x = l, y = r;
  }
  iron_ir_value_t *lt = rb_cmp(b, IRON_CMP_LT, type, x, y);
  rb_return(b, 1, &lt);
  return b;
}

static void add_sort(const char *name, int32_t rank, const int64_t *dims,
                     int32_t dim, uint32_t num, const iron_dtype_t *dts,
                     int32_t type) {
  rb_t *cmp = rb_sort_cmp(num, dts, type);
  char *src = NULL;
  unsigned grid = 0, block = 0;
  iron_status_t st = iron_cuda_gen_sort(name, rank, dims, dim, num, dts,
                                        GEN_REGION(&cmp->region), &src, &grid, &block);
  add_source(name, st, src);
  CHECK(st || (grid >= 1 && block >= 32 && block <= 512));
  free(cmp);
}

static void test_sort_sources(void) {
  int64_t d2[2] = {16, 1000};
  iron_dtype_t f32 = IRON_DTYPE_F32, bf = IRON_DTYPE_BF16, s64 = IRON_DTYPE_S64;
  add_sort("sort_f32_last", 2, d2, 1, 1, &f32, IRON_CMP_TYPE_TOTALORDER);
  add_sort("sort_bf16_first", 2, d2, 0, 1, &bf, IRON_CMP_TYPE_FLOAT);
  add_sort("sort_s64", 2, d2, 1, 1, &s64, IRON_CMP_TYPE_SIGNED);
  iron_dtype_t argsort[2] = {IRON_DTYPE_F32, IRON_DTYPE_S32};
  add_sort("argsort", 2, d2, 1, 2, argsort, IRON_CMP_TYPE_TOTALORDER);
  // Complex keys (lexicographic LT), with a payload.
  iron_dtype_t ckeys[2] = {IRON_DTYPE_C128, IRON_DTYPE_S32};
  add_sort("sort_c128_kv", 2, d2, 1, 2, ckeys, IRON_CMP_TYPE_FLOAT);
  iron_dtype_t c64 = IRON_DTYPE_C64;
  add_sort("sort_c64", 2, d2, 0, 1, &c64, IRON_CMP_TYPE_FLOAT);
  int64_t d1[1] = {IRON_CUDA_SORT_MAX_ROW};
  add_sort("sort_max_row", 1, d1, 0, 1, &f32, IRON_CMP_TYPE_FLOAT);
  int64_t one[1] = {1};
  add_sort("sort_one", 1, one, 0, 1, &f32, IRON_CMP_TYPE_FLOAT);
  // jnp.sort / jnp.argsort's comparator: x == 0 -> 0, x != x -> NaN (outer
  // constants shared by both arguments), then LT TOTALORDER.
  const iron_dtype_t jdts[3] = {IRON_DTYPE_F32, IRON_DTYPE_F64,
                                IRON_DTYPE_BF16};
  for (int j = 0; j < 3; ++j) {
    iron_dtype_t dt = jdts[j];
    outer_const_t cz, cn;
    unsigned char zero[8] = {0}, nan[8] = {0};
    if (dt == IRON_DTYPE_F32) {
      uint32_t u = 0x7fc00000u;
      memcpy(nan, &u, 4);
    } else if (dt == IRON_DTYPE_F64) {
      uint64_t u = 0x7ff8000000000000ull;
      memcpy(nan, &u, 8);
    } else {
      uint16_t u = 0x7fc0;
      memcpy(nan, &u, 2);
    }
    iron_ir_value_t *z = outer_const(&cz, dt, zero);
    iron_ir_value_t *qn = outer_const(&cn, dt, nan);
    rb_t *jc = rb_new();
    iron_ir_value_t *args[2];
    iron_ir_value_t *x0 = rb_arg(jc, dt), *x1 = rb_arg(jc, dt);
    bool argsort = j == 0;
    if (argsort) {
      rb_arg(jc, IRON_DTYPE_S32);
      rb_arg(jc, IRON_DTYPE_S32);
    }
    iron_ir_value_t *xs[2] = {x0, x1};
    for (int a = 0; a < 2; ++a) {
      iron_ir_value_t *e =
          rb_cmp(jc, IRON_CMP_EQ, IRON_CMP_TYPE_FLOAT, xs[a], z);
      iron_ir_value_t *s0 = rb_op(jc, IRON_OP_SELECT, dt, e, z, xs[a]);
      iron_ir_value_t *n = rb_cmp(jc, IRON_CMP_NE, IRON_CMP_TYPE_FLOAT, xs[a],
                                  xs[a]);
      args[a] = rb_op(jc, IRON_OP_SELECT, dt, n, qn, s0);
    }
    iron_ir_value_t *lt = rb_cmp(jc, IRON_CMP_LT, IRON_CMP_TYPE_TOTALORDER,
                                 args[0], args[1]);
    rb_return(jc, 1, &lt);
    iron_dtype_t sd2[2] = {dt, IRON_DTYPE_S32};
    char name[32], *jsrc = NULL;
    unsigned jg = 0, jb = 0;
    snprintf(name, sizeof(name), "jax_sort_%d", j);
    iron_status_t js = iron_cuda_gen_sort(name, 2, d2, 1, argsort ? 2 : 1, sd2,
                                          GEN_REGION(&jc->region), &jsrc, &jg, &jb);
    add_source(name, js, jsrc);
    free(jc);
  }
  // Longer rows are refused.
  int64_t big[1] = {IRON_CUDA_SORT_MAX_ROW + 1};
  rb_t *cmp = rb_sort_cmp(1, &f32, IRON_CMP_TYPE_FLOAT);
  char *src = NULL;
  unsigned g, bl;
  iron_status_t st = iron_cuda_gen_sort("x", 1, big, 0, 1, &f32, GEN_REGION(&cmp->region),
                                        &src, &g, &bl);
  CHECK(st != IRON_OK);
  iron_status_free(st);
  free(cmp);
}


// --- reduce_window -------------------------------------------------------------------

static void test_window_sources(void) {
  // cumsum along dim 1 of [4, 100] (window 100, padding 99 low), 2x2 max
  // pooling with stride 2 and padding, dilations, a rank-0 window.
  iron_cuda_window_t w;
  memset(&w, 0, sizeof(w));
  w.rank = 2;
  int64_t in[2] = {4, 100};
  for (int d = 0; d < 2; ++d) {
    w.in_dims[d] = in[d];
    w.out_dims[d] = in[d];
    w.wdims[d] = d == 1 ? 100 : 1;
    w.strides[d] = w.base_dil[d] = w.win_dil[d] = 1;
    w.pad_lo[d] = d == 1 ? 99 : 0;
  }
  iron_dtype_t f32 = IRON_DTYPE_F32;
  char *src = NULL;
  unsigned grid = 0;
  rb_t *b = rb_binary(IRON_OP_ADD, f32);
  iron_status_t st =
      iron_cuda_gen_reduce_window("cumsum", &w, 1, &f32, GEN_REGION(&b->region), &src, &grid);
  add_source("cumsum", st, src);
  free(b);
  iron_cuda_window_t pool = w;
  for (int d = 0; d < 2; ++d) {
    pool.wdims[d] = 2;
    pool.strides[d] = 2;
    pool.pad_lo[d] = 1;
    pool.base_dil[d] = d + 1;
    pool.win_dil[d] = 2 - d;
    pool.out_dims[d] = 3;
  }
  iron_dtype_t bf = IRON_DTYPE_BF16;
  b = rb_binary(IRON_OP_MAXIMUM, bf);
  src = NULL;
  st = iron_cuda_gen_reduce_window("maxpool", &pool, 1, &bf, GEN_REGION(&b->region), &src,
                                   &grid);
  add_source("maxpool", st, src);
  free(b);
  iron_dtype_t am[2] = {IRON_DTYPE_F32, IRON_DTYPE_S32};
  b = rb_argmax(IRON_DTYPE_F32, IRON_DTYPE_S32);
  src = NULL;
  st = iron_cuda_gen_reduce_window("window_argmax", &w, 2, am, GEN_REGION(&b->region),
                                   &src, &grid);
  add_source("window_argmax", st, src);
  free(b);
  // select_and_scatter (max-pool gradient): select GE, scatter add; and a
  // generic scatter body (in order).
  iron_cuda_window_t sw = pool;
  for (int d = 0; d < 2; ++d) sw.base_dil[d] = sw.win_dil[d] = 1;
  rb_t *sel = rb_new();
  iron_ir_value_t *sa = rb_arg(sel, f32), *sb = rb_arg(sel, f32);
  iron_ir_value_t *ge = rb_cmp(sel, IRON_CMP_GE, IRON_CMP_TYPE_FLOAT, sa, sb);
  rb_return(sel, 1, &ge);
  b = rb_binary(IRON_OP_ADD, f32);
  src = NULL;
  st = iron_cuda_gen_select_and_scatter("sas_add", &sw, f32, GEN_REGION(&sel->region),
                                        GEN_REGION(&b->region), &src, &grid);
  add_source("sas_add", st, src);
  free(b);
  b = rb_binary(IRON_OP_SUBTRACT, f32);
  src = NULL;
  st = iron_cuda_gen_select_and_scatter("sas_generic", &sw, f32, GEN_REGION(&sel->region),
                                        GEN_REGION(&b->region), &src, &grid);
  add_source("sas_generic", st, src);
  free(b);
  free(sel);
  iron_cuda_window_t r0;
  memset(&r0, 0, sizeof(r0));
  b = rb_binary(IRON_OP_ADD, f32);
  src = NULL;
  st = iron_cuda_gen_reduce_window("window_rank0", &r0, 1, &f32, GEN_REGION(&b->region),
                                   &src, &grid);
  add_source("window_rank0", st, src);
  free(b);
}

// Cumulative windows in the host's two-level scan order: every op x a
// spread of dtypes, forward/reverse, inclusive/exclusive, one level (n <=
// 16), two (n = 70) and three (n = 5000) levels.
static void test_scan_sources(void) {
  const struct {
    iron_op_kind_t k;
    iron_dtype_t dt;
    int64_t n, outer, inner;
    bool rev, excl;
  } cases[] = {
      {IRON_OP_ADD, IRON_DTYPE_F32, 70, 3, 1, false, false},
      {IRON_OP_ADD, IRON_DTYPE_F16, 70, 3, 1, false, false},
      {IRON_OP_ADD, IRON_DTYPE_F64, 33, 1, 2, true, false},
      {IRON_OP_ADD, IRON_DTYPE_BF16, 5000, 1, 1, true, true},
      {IRON_OP_ADD, IRON_DTYPE_U8, 70, 3, 1, false, true},
      {IRON_OP_ADD, IRON_DTYPE_S64, 33, 1, 2, true, false},
      {IRON_OP_MULTIPLY, IRON_DTYPE_S32, 6, 1, 4, false, false},
      {IRON_OP_MULTIPLY, IRON_DTYPE_U16, 5000, 2, 3, false, false},
      {IRON_OP_MAXIMUM, IRON_DTYPE_BF16, 20, 1, 3, false, false},
      {IRON_OP_MAXIMUM, IRON_DTYPE_S8, 20, 1, 3, true, false},
      {IRON_OP_MINIMUM, IRON_DTYPE_U16, 20, 3, 1, false, false},
      {IRON_OP_MINIMUM, IRON_DTYPE_F64, 1, 3, 1, true, true},
      {IRON_OP_ADD, IRON_DTYPE_C64, 70, 2, 1, false, false},
      {IRON_OP_MULTIPLY, IRON_DTYPE_C128, 40, 1, 1, true, true},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    iron_cuda_scan_t sc = {cases[i].k, cases[i].n, cases[i].outer,
                           cases[i].inner, cases[i].rev, cases[i].excl};
    CHECK(iron_cuda_scan_supported(cases[i].k, cases[i].dt));
    char *src = NULL, name[48];
    unsigned grid = 0;
    snprintf(name, sizeof(name), "scan_%zu", i);
    add_source(name, iron_cuda_gen_scan(name, &sc, cases[i].dt, &src, &grid),
               src);
    CHECK(grid >= 1);
  }
  // The host has no scan of complex max or of pred.
  CHECK(!iron_cuda_scan_supported(IRON_OP_MAXIMUM, IRON_DTYPE_C64));
  CHECK(!iron_cuda_scan_supported(IRON_OP_ADD, IRON_DTYPE_PRED));
  CHECK(!iron_cuda_scan_supported(IRON_OP_AND, IRON_DTYPE_S32));
}


// --- reduce_precision ----------------------------------------------------------------

static void test_precision_sources(void) {
  const iron_dtype_t dts[] = {IRON_DTYPE_F16, IRON_DTYPE_BF16, IRON_DTYPE_F32,
                              IRON_DTYPE_F64};
  const int64_t bits[][2] = {{5, 10}, {8, 7}, {8, 23}, {11, 52}, {4, 3},
                             {2, 0}};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; j += 2) {
      char name[32];
      snprintf(name, sizeof(name), "rp_%d_%d", i, j);
      char *src = NULL;
      iron_status_t st = iron_cuda_gen_reduce_precision(
          name, dts[i], bits[(i + j) % 6][0], bits[(i + j) % 6][1], 1000, &src);
      add_source(name, st, src);
    }
  char *src = NULL;
  iron_status_t st = iron_cuda_gen_reduce_precision("x", IRON_DTYPE_S32, 8, 7,
                                                    10, &src);
  CHECK(st != IRON_OK);
  iron_status_free(st);
}

static const iron_test_case_t kTests[] = {
    {"dot_sources", test_dot_sources},
    {"reduce_sources", test_reduce_sources},
    {"gather_sources", test_gather_sources},
    {"scatter_sources", test_scatter_sources},
    {"rng_sources", test_rng_sources},
    {"sort_sources", test_sort_sources},
    {"window_sources", test_window_sources},
    {"scan_sources", test_scan_sources},
    {"region_calls", test_region_calls},
    {"precision_sources", test_precision_sources},
};

int main(void) {
  if (!nvrtc_load()) {
    fprintf(stderr, "FAIL: libnvrtc not found (needed by this test)\n");
    return 1;
  }
  for (size_t i = 0; i < sizeof(kTests) / sizeof(kTests[0]); ++i) {
    iron_test_current_ = kTests[i].name;
    kTests[i].fn();
  }
  iron_test_current_ = "nvrtc";
  pthread_t th[2];
  for (int i = 0; i < 2; ++i) pthread_create(&th[i], NULL, compile_worker, NULL);
  for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
  for (int i = 0; i < g_nsrc; ++i) {
    CHECK(g_src[i].ok);
    free(g_src[i].src);
  }
  printf("%d sources compiled; %d checks, %d failed\n", g_nsrc,
         iron_test_checks_, iron_test_failures_);
  return iron_test_failures_ ? 1 : 0;
}
