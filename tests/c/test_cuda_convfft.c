// GPU-free tests of the CUDA convolution and FFT (cuda_gen_conv.c,
// cuda_conv.c, cuda_fft.c):
// - every generated convolution variant (random geometries: 0-3 spatial
//   dims, any layout, strides, negative padding, lhs/rhs dilation, window
//   reversal, feature and batch groups, every dtype family) and the FFT
//   helper kernels are compiled by NVRTC to sm_90a;
// - the same convolution sources run on the CPU: the generated text is
//   compiled as C++ with a shim for the CUDA built-ins (one thread, one
//   block) and its results must equal the host kernel's direct loops bit
//   for bit (same accumulation order and dtype);
// - cuFFT is found and resolves every symbol (when the toolkit's
//   libcufft is installed), a missing/bad library is reported by name, and
//   IRON_CUDA_LIB_DIR is searched first;
// - refusals name what is missing.
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/half.h"
#include "base/threadpool.h"
#include "device/cuda/cuda_api.h"
#include "device/cuda/cuda_fft.h"
#include "device/cuda/gen/conv.h"
#include "device/cuda/gen/ops.h"
#include "cuda_emu.h"
#include "base/narrow_float.h"
#include "conv_test_op.h"
#include "host_test_ops.h"
#include "test.h"

// --- NVRTC -----------------------------------------------------------------

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
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !g_nvrtc.lib; ++i)
    g_nvrtc.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!g_nvrtc.lib) return false;
  g_nvrtc.create = (nvrtc_create_t)dlsym(g_nvrtc.lib, "nvrtcCreateProgram");
  g_nvrtc.compile = (nvrtc_compile_t)dlsym(g_nvrtc.lib, "nvrtcCompileProgram");
  g_nvrtc.log_size = (nvrtc_size_t)dlsym(g_nvrtc.lib, "nvrtcGetProgramLogSize");
  g_nvrtc.log = (nvrtc_log_t)dlsym(g_nvrtc.lib, "nvrtcGetProgramLog");
  g_nvrtc.cubin_size = (nvrtc_size_t)dlsym(g_nvrtc.lib, "nvrtcGetCUBINSize");
  g_nvrtc.destroy = (nvrtc_destroy_t)dlsym(g_nvrtc.lib, "nvrtcDestroyProgram");
  return g_nvrtc.create && g_nvrtc.compile && g_nvrtc.log_size && g_nvrtc.log &&
         g_nvrtc.cubin_size && g_nvrtc.destroy;
}

#define MAX_SOURCES 160
#define GROUP 10
static struct {
  char *src;
  char name[64];
  bool ok;
} g_src[MAX_SOURCES];
static int g_nsrc, g_next;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

// Sources are grouped (each in its own namespace: NVRTC's start-up cost
// dominates small programs) and compiled on two threads (CI has 2 cores).
static void compile_group(int unit) {
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
    free(text);
    return;
  }
  // The options of the device's compiler (cuda_compile.c).
  const char *opts[] = {"--gpu-architecture=sm_90a",
                        "-default-device",
                        "-std=c++17",
                        "-ftz=true",
                        "-prec-div=true",
                        "-prec-sqrt=true",
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
    fprintf(stderr, "NVRTC failed for %s .. %s:\n%s\n", g_src[lo].name,
            g_src[hi - 1].name, log ? log : "");
    pthread_mutex_unlock(&g_mu);
    free(log);
  } else {
    for (int i = lo; i < hi; ++i) g_src[i].ok = true;
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
    compile_group(i);
  }
}

// Keeps a copy of src for NVRTC.
static void add_source(const char *name, const char *src) {
  CHECK(g_nsrc < MAX_SOURCES);
  if (g_nsrc >= MAX_SOURCES) return;
  g_src[g_nsrc].src = strdup(src);
  snprintf(g_src[g_nsrc].name, sizeof(g_src[g_nsrc].name), "%s.cu", name);
  ++g_nsrc;
}

// FFT helper kernels kept for the CPU emulation (test_conv_emulation).
static char *g_fft_src[8];
static int g_nfft;

// --- convolution ops ---------------------------------------------------------

typedef struct geom {
  int nsp;
  int64_t n, ci, co, fgc, bgc;
  int64_t in[3], k[3], out[3];
  int64_t str[3], pad[6], ld[3], rd[3], rev[3];
  // positions: [batch/in-feature, feature/out-feature, spatial...]
  int64_t lpos[5], kpos[5], opos[5];
} geom_t;

static void shuffle(int64_t *p, int n) {
  for (int i = 0; i < n; ++i) p[i] = i;
  for (int i = n - 1; i > 0; --i) {
    int j = (int)ht_rand_range(0, i);
    int64_t t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
}

static void build(conv_op_t *c, const geom_t *g, iron_dtype_t lhs_dt,
                  iron_dtype_t rhs_dt, iron_dtype_t out_dt) {
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
  ht_operand(&c->b, lhs_dt, rank, ld);
  ht_operand(&c->b, rhs_dt, rank, kd);
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

static void random_geom(geom_t *g, int nsp) {
  memset(g, 0, sizeof(*g));
  g->nsp = nsp;
  int64_t groups = ht_rand_range(1, 3);
  bool batch = ht_rand_range(0, 2) == 0;
  g->fgc = batch ? 1 : groups;
  g->bgc = batch ? groups : 1;
  g->n = ht_rand_range(1, 3) * g->bgc;
  g->ci = ht_rand_range(1, 4) * g->fgc;
  g->co = ht_rand_range(1, 5) * groups;
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

// Random values of a dtype that keep every path finite: floats in
// [-4, 4] with two decimals, integers over their whole range, pred 0/1.
static bool g_fill_ints;  // floats take small integers (exact sums)

static void fill(iron_tensor_t *t) {
  for (int64_t i = 0; i < t->count; ++i) {
    float f = g_fill_ints ? (float)ht_rand_range(-4, 4)
                          : (float)ht_rand_range(-400, 400) / 100.0f;
    switch (t->dtype) {
      case IRON_DTYPE_F16:
        ((uint16_t *)t->data)[i] = iron_f32_to_f16(f);
        break;
      case IRON_DTYPE_BF16:
        ((uint16_t *)t->data)[i] = iron_f32_to_bf16(f);
        break;
      case IRON_DTYPE_F32:
        ((float *)t->data)[i] = f;
        break;
      case IRON_DTYPE_F64:
        ((double *)t->data)[i] = (double)ht_rand_range(-4000, 4000) / 997.0;
        break;
      case IRON_DTYPE_C64:
        ((float *)t->data)[2 * i] = f;
        ((float *)t->data)[2 * i + 1] =
            (float)ht_rand_range(-400, 400) / 100.0f;
        break;
      case IRON_DTYPE_C128:
        ((double *)t->data)[2 * i] = (double)ht_rand_range(-400, 400) / 7.0;
        ((double *)t->data)[2 * i + 1] = (double)ht_rand_range(-400, 400) / 9.0;
        break;
      case IRON_DTYPE_PRED:
        ((uint8_t *)t->data)[i] = ht_rand() & 1;
        break;
      default: {
        if (iron_narrow_float_is(t->dtype)) {
          ((uint8_t *)t->data)[i] = iron_narrow_float_encode(t->dtype, f);
          break;
        }
        if (t->dtype == IRON_DTYPE_F8E8M0FNU) {  // 2^-7 .. 2^8, some 2^-127
          ((uint8_t *)t->data)[i] =
              ht_rand() % 16 == 0 ? 0 : (uint8_t)(120 + ht_rand() % 16);
          break;
        }
        uint64_t v = ht_rand();
        memcpy((char *)t->data + (size_t)i * iron_dtype_size(t->dtype), &v,
               iron_dtype_size(t->dtype));
        break;
      }
    }
  }
}

// --- CPU emulation
// -------------------------------------------------------------

// The generated kernels run on the CPU with cuda_emu.h's shim (one block
// of one thread, so each kernel's grid-stride loop visits every output
// element).

#define MAX_EMU 64
typedef void (*conv_fn_t)(const void *, const void *, void *);
static struct {
  char name[32];
  char *src;
  iron_tensor_t *x, *w, *want;
  char what[96];
  // im2col + GEMM cases: kernels <name>_i (im2col), _w (pack), _u (unpack)
  // around a GEMM done here.
  bool gemm;
  int64_t groups, m, n, k;
} g_emu[MAX_EMU];
static int g_nemu;

static void emu_free(void) {
  for (int i = 0; i < g_nemu; ++i) {
    free(g_emu[i].src);
    ht_tensor_free(g_emu[i].x);
    ht_tensor_free(g_emu[i].w);
    ht_tensor_free(g_emu[i].want);
  }
  g_nemu = 0;
}

static iron_threadpool_t *g_pool;

// Plans and generates one case, runs the host's direct loops for the
// expected result, queues both the NVRTC compile and the CPU emulation.
static void add_conv_case(const geom_t *g, iron_dtype_t lt, iron_dtype_t rt,
                          iron_dtype_t ot) {
  conv_op_t c;
  build(&c, g, lt, rt, ot);
  iron_cuda_conv_t plan;
  iron_status_t st = iron_cuda_conv_plan(&c.b.op, &plan);
  CHECK_OK(st);
  if (st) return;
  // Small shapes plan 32-bit indices; every third case runs the 64-bit
  // variant of the same kernel.
  CHECK(!plan.wide_index);
  plan.wide_index = g_nemu % 3 == 2;
  char name[32];
  snprintf(name, sizeof(name), "iron_conv_e%d", g_nemu);
  char *src = NULL;
  unsigned grid = 0;
  st = iron_cuda_gen_conv(name, &plan, &src, &grid);
  CHECK_OK(st);
  if (st) return;
  CHECK(grid >= 1);
  add_source(name, src);
  CHECK(g_nemu < MAX_EMU);
  if (g_nemu >= MAX_EMU) {
    free(src);
    return;
  }
  iron_tensor_t *x = ht_tensor_like(&c.b.operand_types[0]);
  iron_tensor_t *w = ht_tensor_like(&c.b.operand_types[1]);
  iron_tensor_t *want = ht_tensor_like(&c.b.result_types[0]);
  fill(x);
  fill(w);
  iron_tensor_t *ins[2] = {x, w};
  CHECK_OK(ht_run(&c.b, g_pool, NULL, ins, &want));
  int i = g_nemu++;
  snprintf(g_emu[i].name, sizeof(g_emu[i].name), "%s", name);
  g_emu[i].src = src;
  g_emu[i].x = x;
  g_emu[i].w = w;
  g_emu[i].want = want;
  snprintf(g_emu[i].what, sizeof(g_emu[i].what),
           "%s x %s -> %s nsp=%d fgc=%lld bgc=%lld", iron_dtype_name(lt),
           iron_dtype_name(rt), iron_dtype_name(ot), g->nsp, (long long)g->fgc,
           (long long)g->bgc);
}

// Concatenates the three GEMM-path kernels of a case into one source.
static char *gemm_sources(const iron_cuda_conv_t *plan, const char *base) {
  char name[48];
  char *parts[3] = {NULL, NULL, NULL};
  unsigned grid = 0;
  snprintf(name, sizeof(name), "%s_i", base);
  CHECK_OK(iron_cuda_gen_conv_im2col(name, plan, &parts[0], &grid));
  snprintf(name, sizeof(name), "%s_w", base);
  CHECK_OK(iron_cuda_gen_conv_wpack(name, plan, &parts[1], &grid));
  snprintf(name, sizeof(name), "%s_u", base);
  CHECK_OK(iron_cuda_gen_conv_unpack(name, plan, &parts[2], &grid));
  char *out = NULL;
  if (parts[0] && parts[1] && parts[2]) {
    size_t len = strlen(parts[0]) + strlen(parts[1]) + strlen(parts[2]) + 128;
    out = malloc(len);
    // Each part has its own prelude: separate namespaces.
    snprintf(out, len,
             "namespace pi {\n%s\n}\nnamespace pw {\n%s\n}\n"
             "namespace pu {\n%s\n}\n",
             parts[0], parts[1], parts[2]);
  }
  for (int i = 0; i < 3; ++i) free(parts[i]);
  return out;
}

static void add_gemm_case(const geom_t *g, iron_dtype_t dt, iron_dtype_t ot) {
  conv_op_t c;
  build(&c, g, dt, dt, ot);
  iron_cuda_conv_t plan;
  iron_status_t st = iron_cuda_conv_plan(&c.b.op, &plan);
  CHECK_OK(st);
  if (st || g_nemu >= MAX_EMU) return;
  char name[32];
  snprintf(name, sizeof(name), "iron_convg_e%d", g_nemu);
  char *src = gemm_sources(&plan, name);
  CHECK(src != NULL);
  if (!src) return;
  add_source(name, src);
  iron_tensor_t *x = ht_tensor_like(&c.b.operand_types[0]);
  iron_tensor_t *w = ht_tensor_like(&c.b.operand_types[1]);
  iron_tensor_t *want = ht_tensor_like(&c.b.result_types[0]);
  g_fill_ints = true;
  fill(x);
  fill(w);
  g_fill_ints = false;
  iron_tensor_t *ins[2] = {x, w};
  CHECK_OK(ht_run(&c.b, g_pool, NULL, ins, &want));
  int i = g_nemu++;
  snprintf(g_emu[i].name, sizeof(g_emu[i].name), "%s", name);
  g_emu[i].src = src;
  g_emu[i].x = x;
  g_emu[i].w = w;
  g_emu[i].want = want;
  g_emu[i].gemm = true;
  g_emu[i].groups = plan.groups;
  iron_cuda_conv_gemm_dims(&plan, &g_emu[i].m, &g_emu[i].n, &g_emu[i].k);
  snprintf(g_emu[i].what, sizeof(g_emu[i].what),
           "gemm path %s -> %s nsp=%d fgc=%lld bgc=%lld", iron_dtype_name(dt),
           iron_dtype_name(ot), g->nsp, (long long)g->fgc, (long long)g->bgc);
}

static float load_f(iron_dtype_t dt, const void *p, int64_t i) {
  switch (dt) {
    case IRON_DTYPE_F16:
      return iron_f16_to_f32(((const uint16_t *)p)[i]);
    case IRON_DTYPE_BF16:
      return iron_bf16_to_f32(((const uint16_t *)p)[i]);
    default:
      return ((const float *)p)[i];
  }
}

static void store_f(iron_dtype_t dt, void *p, int64_t i, double v) {
  switch (dt) {
    case IRON_DTYPE_F16:
      ((uint16_t *)p)[i] = iron_f32_to_f16((float)v);
      break;
    case IRON_DTYPE_BF16:
      ((uint16_t *)p)[i] = iron_f32_to_bf16((float)v);
      break;
    default:
      ((float *)p)[i] = (float)v;
      break;
  }
}

typedef void (*pass_fn_t)(const void *, void *);
typedef void (*im2col_fn_t)(const void *, void *, long long, long long);

static pass_fn_t pass_sym(void *h, const char *base, const char *suffix) {
  char name[48];
  snprintf(name, sizeof(name), "%.31s_%.15s", base, suffix);
  void *sym = dlsym(h, name);
  CHECK(sym != NULL);
  pass_fn_t fn = NULL;
  if (sym) memcpy(&fn, &sym, sizeof(fn));
  return fn;
}

// The GEMM path on the CPU: generated im2col (in chunks of rows, as the
// device runs it) and pack, the product here (exact: small integers), the
// generated unpack.
static void run_gemm_case(void *h, int i, void *got) {
  pass_fn_t im2col_p = pass_sym(h, g_emu[i].name, "i");
  im2col_fn_t im2col = NULL;
  if (im2col_p) memcpy(&im2col, &im2col_p, sizeof(im2col));
  pass_fn_t wpack = pass_sym(h, g_emu[i].name, "w");
  pass_fn_t unpack = pass_sym(h, g_emu[i].name, "u");
  if (!im2col || !wpack || !unpack) return;
  iron_dtype_t dt = g_emu[i].x->dtype, ot = g_emu[i].want->dtype;
  size_t es = iron_dtype_size(dt), eo = iron_dtype_size(ot);
  int64_t G = g_emu[i].groups, M = g_emu[i].m, N = g_emu[i].n, K = g_emu[i].k;
  // Chunks of 1, M/2 + 1 or all rows, by case.
  int64_t chunk = i % 3 == 0 ? 1 : i % 3 == 1 ? M / 2 + 1 : M;
  char *pt = malloc((size_t)(G * chunk * K) * es + 1);
  char *wt = malloc((size_t)(G * K * N) * es + 1);
  char *ct = malloc((size_t)(G * M * N) * eo + 1);
  wpack(g_emu[i].w->data, wt);
  for (int64_t r0 = 0; r0 < M; r0 += chunk) {
    int64_t rows = M - r0 < chunk ? M - r0 : chunk;
    im2col(g_emu[i].x->data, pt, r0, rows);
    for (int64_t g = 0; g < G; ++g)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t col = 0; col < N; ++col) {
          double acc = 0;
          for (int64_t kk = 0; kk < K; ++kk)
            acc += (double)load_f(dt, pt, (g * rows + r) * K + kk) *
                   (double)load_f(dt, wt, (g * K + kk) * N + col);
          store_f(ot, ct, (g * M + r0 + r) * N + col, acc);
        }
  }
  unpack(ct, got);
  free(pt);
  free(wt);
  free(ct);
}

static void test_conv_cases(void) {
  // The host's direct loops: the accumulation order the generated kernel
  // reproduces (the GEMM path sums in blocks).
  setenv("IRON_HOST_CONV_FAST", "0", 1);
  static const iron_dtype_t kTypes[][3] = {
      {IRON_DTYPE_F32, IRON_DTYPE_F32, IRON_DTYPE_F32},
      {IRON_DTYPE_F16, IRON_DTYPE_F16, IRON_DTYPE_F16},
      {IRON_DTYPE_BF16, IRON_DTYPE_BF16, IRON_DTYPE_BF16},
      {IRON_DTYPE_F64, IRON_DTYPE_F64, IRON_DTYPE_F64},
      {IRON_DTYPE_C64, IRON_DTYPE_C64, IRON_DTYPE_C64},
      {IRON_DTYPE_C128, IRON_DTYPE_C128, IRON_DTYPE_C128},
      {IRON_DTYPE_S8, IRON_DTYPE_S8, IRON_DTYPE_S32},
      {IRON_DTYPE_S32, IRON_DTYPE_S32, IRON_DTYPE_S32},
      {IRON_DTYPE_U8, IRON_DTYPE_U8, IRON_DTYPE_U8},
      {IRON_DTYPE_S64, IRON_DTYPE_S64, IRON_DTYPE_S64},
      {IRON_DTYPE_U64, IRON_DTYPE_U64, IRON_DTYPE_U64},
      {IRON_DTYPE_PRED, IRON_DTYPE_PRED, IRON_DTYPE_PRED},
      {IRON_DTYPE_F16, IRON_DTYPE_F16, IRON_DTYPE_F32},
      {IRON_DTYPE_BF16, IRON_DTYPE_F32, IRON_DTYPE_F32},
      {IRON_DTYPE_S8, IRON_DTYPE_S8, IRON_DTYPE_F32},
      {IRON_DTYPE_F32, IRON_DTYPE_F32, IRON_DTYPE_C64},
      // f8/f4: read as f32, the f32 sum stored through f16 (XLA:CPU).
      {IRON_DTYPE_F8E4M3FN, IRON_DTYPE_F8E4M3FN, IRON_DTYPE_F8E4M3FN},
      {IRON_DTYPE_F4E2M1FN, IRON_DTYPE_F4E2M1FN, IRON_DTYPE_F4E2M1FN},
      {IRON_DTYPE_F8E5M2, IRON_DTYPE_F8E4M3B11FNUZ, IRON_DTYPE_F32},
      {IRON_DTYPE_F8E3M4, IRON_DTYPE_F8E3M4, IRON_DTYPE_F8E5M2FNUZ},
      // f8E8M0FNU: by its f32 bits both ways.
      {IRON_DTYPE_F8E8M0FNU, IRON_DTYPE_F8E8M0FNU, IRON_DTYPE_F8E8M0FNU},
      {IRON_DTYPE_F8E8M0FNU, IRON_DTYPE_F8E4M3FN, IRON_DTYPE_F32},
  };
  const int nt = (int)(sizeof(kTypes) / sizeof(kTypes[0]));
  // Every dtype combination in 1-2 spatial dims, then geometry variety
  // (0-3 spatial dims) in f32 and f16.
  for (int i = 0; i < nt; ++i) {
    geom_t g;
    random_geom(&g, 1 + i % 2);
    add_conv_case(&g, kTypes[i][0], kTypes[i][1], kTypes[i][2]);
  }
  for (int i = 0; i < 24; ++i) {
    geom_t g;
    random_geom(&g, i % 4);
    int t = i % 3 == 2 ? 1 : i % 3 == 1 ? 6 : 0;
    add_conv_case(&g, kTypes[t][0], kTypes[t][1], kTypes[t][2]);
  }
  // The im2col + GEMM path over the same geometry variety.
  static const iron_dtype_t kGemm[] = {IRON_DTYPE_F32, IRON_DTYPE_F16,
                                       IRON_DTYPE_BF16};
  for (int i = 0; i < 15; ++i) {
    geom_t g;
    random_geom(&g, i % 4);
    add_gemm_case(&g, kGemm[i % 3], kGemm[i % 3]);
  }
  // f16/bf16 operands, f32 result (preferred_element_type).
  for (int i = 0; i < 4; ++i) {
    geom_t g;
    random_geom(&g, 1 + i % 2);
    add_gemm_case(&g, i % 2 ? IRON_DTYPE_BF16 : IRON_DTYPE_F16, IRON_DTYPE_F32);
  }
  unsetenv("IRON_HOST_CONV_FAST");
}

typedef void (*fft_fn_t)(void *);

static fft_fn_t fft_sym(void *h, const char *name) {
  void *sym = dlsym(h, name);
  CHECK(sym != NULL);
  fft_fn_t fn = NULL;
  if (sym) memcpy(&fn, &sym, sizeof(fn));
  return fn;
}

// The IRFFT fix-up zeroes exactly the DC and (even n) Nyquist imaginary
// parts of every line; the scale multiplies by the rounded factor.
static void check_fft_kernels(void *h) {
  static const struct {
    const char *name;
    bool wide;
    int64_t lines, n;
  } fix[] = {{"iron_fft_fix0", false, 12, 8},
             {"iron_fft_fix1", false, 3, 7},
             {"iron_fft_fix2", true, 5, 16},
             {"iron_fft_fix3", true, 1, 1}};
  for (size_t c = 0; c < sizeof(fix) / sizeof(fix[0]); ++c) {
    fft_fn_t fn = fft_sym(h, fix[c].name);
    if (!fn) continue;
    int64_t half = fix[c].n / 2 + 1, reals = 2 * fix[c].lines * half;
    double *dd = malloc(sizeof(double) * (size_t)reals);
    float *fd = malloc(sizeof(float) * (size_t)reals);
    for (int64_t i = 0; i < reals; ++i) dd[i] = fd[i] = (float)(i + 1);
    fn(fix[c].wide ? (void *)dd : (void *)fd);
    int bad = 0;
    for (int64_t i = 0; i < reals; ++i) {
      int64_t j = (i / 2) % half;
      bool zero =
          (i % 2 == 1) && (j == 0 || (fix[c].n % 2 == 0 && j == fix[c].n / 2));
      double v = fix[c].wide ? dd[i] : fd[i];
      bad += v != (zero ? 0.0 : (double)(i + 1));
    }
    CHECK_EQ_INT(bad, 0);
    free(dd);
    free(fd);
  }
  fft_fn_t s0 = fft_sym(h, "iron_fft_scale0"),
           s1 = fft_sym(h, "iron_fft_scale1");
  if (s0 && s1) {
    float f[1000];
    double d[1000];
    for (int i = 0; i < 1000; ++i) f[i] = (float)(d[i] = i - 500.25);
    s0(f);
    s1(d);
    int bad = 0;
    for (int i = 0; i < 1000; ++i) {
      bad += f[i] != (float)(i - 500.25) * (float)(1.0 / 12.0);
      bad += d[i] != (i - 500.25) * (1.0 / 12.0);
    }
    CHECK_EQ_INT(bad, 0);
  }
}

static bool have_cxx(void) {
  return system("c++ --version > /dev/null 2>&1") == 0;
}

static void test_conv_emulation(void) {
  // The C++ compiler of the build machine runs the generated kernels.
  CHECK(have_cxx());
  if (!have_cxx() || g_nemu == 0) return;
  // In the working directory (the build tree under ctest): /tmp may be
  // mounted noexec, which would make dlopen fail.
  char dir[] = "iron_conv_emuXXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char cwd[512], cpp[640], so[640], cmd[1600];
  CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
  snprintf(cpp, sizeof(cpp), "%s/%s/k.cpp", cwd, dir);
  snprintf(so, sizeof(so), "%s/%s/k.so", cwd, dir);
  FILE *f = fopen(cpp, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(kCudaEmuShim, f);
  for (int i = 0; i < g_nemu; ++i)
    fprintf(f, "namespace e%d {\n%s\n}\n", i, g_emu[i].src);
  for (int i = 0; i < g_nfft; ++i)
    fprintf(f, "namespace f%d {\n%s\n}\n", i, g_fft_src[i]);
  fclose(f);
  // -ffp-contract=off: products and sums round separately, as on the
  // device (-fmad=false) and in the host's loops.
  snprintf(cmd, sizeof(cmd),
           "c++ -std=c++17 -O1 -ffp-contract=off -fPIC -shared -w -o %s %s", so,
           cpp);
  int rc = system(cmd);
  CHECK_EQ_INT(rc, 0);
  void *h = rc == 0 ? dlopen(so, RTLD_NOW | RTLD_LOCAL) : NULL;
  CHECK(h != NULL);
  for (int i = 0; h && i < g_nemu; ++i) {
    iron_tensor_t *got = ht_tensor(g_emu[i].want->dtype, g_emu[i].want->rank,
                                   g_emu[i].want->dims);
    memset(got->data, 0xa5, got->nbytes);
    if (g_emu[i].gemm) {
      run_gemm_case(h, i, got->data);
    } else {
      conv_fn_t fn;
      void *sym = dlsym(h, g_emu[i].name);
      CHECK(sym != NULL);
      if (sym) {
        memcpy(&fn, &sym, sizeof(fn));
        fn(g_emu[i].x->data, g_emu[i].w->data, got->data);
      }
    }
    bool same = memcmp(got->data, g_emu[i].want->data, got->nbytes) == 0;
    if (!same) fprintf(stderr, "emulation mismatch: %s\n", g_emu[i].what);
    CHECK(same);
    ht_tensor_free(got);
  }
  if (h) check_fft_kernels(h);
  if (h) dlclose(h);
  unlink(cpp);
  unlink(so);
  rmdir(dir);
}

// A conv op of one geometry for refusal checks.
static iron_status_t plan_of(const geom_t *g, iron_dtype_t lt, iron_dtype_t ot,
                             int64_t fgc_override) {
  conv_op_t c;
  build(&c, g, lt, lt, ot);
  if (fgc_override) {
    // Rewrite feature_group_count in place.
    for (uint32_t i = 0; i < c.b.op.num_attrs; ++i)
      if (strcmp(c.named[i].name, "feature_group_count") == 0)
        c.attrs[i].i = fgc_override;
  }
  iron_cuda_conv_t plan;
  return iron_cuda_conv_plan(&c.b.op, &plan);
}

static void test_conv_refusals(void) {
  geom_t g;
  memset(&g, 0, sizeof(g));
  g.nsp = 1;
  g.n = 2;
  g.ci = 4;
  g.co = 4;
  g.fgc = 1;
  g.bgc = 2;
  g.in[0] = 5;
  g.k[0] = 3;
  g.out[0] = 3;
  g.str[0] = g.ld[0] = g.rd[0] = 1;
  for (int l = 0; l < 3; ++l) g.lpos[l] = g.kpos[l] = g.opos[l] = l;
  CHECK_OK(plan_of(&g, IRON_DTYPE_F32, IRON_DTYPE_F32, 0));
  // Both group counts > 1: refused as on the host.
  iron_status_t st = plan_of(&g, IRON_DTYPE_F32, IRON_DTYPE_F32, 2);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(st && strstr(iron_status_message(st), "batch_group_count"));
  iron_status_free(st);
  // Sub-byte integers: the host takes them, the CUDA generators do not.
  st = plan_of(&g, IRON_DTYPE_S4, IRON_DTYPE_S32, 0);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  CHECK(st && strstr(iron_status_message(st), "i4"));
  iron_status_free(st);
  // Integer operands with a float result are fine; float operands with an
  // integer result are refused (as on the host).
  st = plan_of(&g, IRON_DTYPE_F32, IRON_DTYPE_S32, 0);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_UNIMPLEMENTED);
  iron_status_free(st);
  // Offsets past 2^30 switch the direct kernel to 64-bit indices.
  {
    conv_op_t c;
    iron_cuda_conv_t plan;
    build(&c, &g, IRON_DTYPE_F32, IRON_DTYPE_F32, IRON_DTYPE_F32);
    CHECK_OK(iron_cuda_conv_plan(&c.b.op, &plan));
    CHECK(!plan.wide_index);
    geom_t big = g;
    big.n = (int64_t)1 << 28;
    build(&c, &big, IRON_DTYPE_F32, IRON_DTYPE_F32, IRON_DTYPE_F32);
    CHECK_OK(iron_cuda_conv_plan(&c.b.op, &plan));
    CHECK(plan.wide_index);
  }
  // A wrong result size is INVALID_ARGUMENT with the host's message.
  g.out[0] = 4;
  st = plan_of(&g, IRON_DTYPE_F32, IRON_DTYPE_F32, 0);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INVALID_ARGUMENT);
  CHECK(st && strstr(iron_status_message(st), "spatial dim 0"));
  iron_status_free(st);
}

// --- FFT --------------------------------------------------------------------

static void test_fft_sources(void) {
  struct {
    bool wide;
    int64_t lines, n;
  } fix[] = {{false, 12, 8}, {false, 3, 7}, {true, 5, 16}, {true, 1, 1}};
  for (size_t i = 0; i < sizeof(fix) / sizeof(fix[0]); ++i) {
    char name[32], *src = NULL;
    unsigned grid = 0;
    snprintf(name, sizeof(name), "iron_fft_fix%zu", i);
    CHECK_OK(iron_cuda_gen_fft_fix(name, fix[i].wide, fix[i].lines, fix[i].n,
                                   &src, &grid));
    if (!src) continue;
    CHECK(grid >= 1);
    // Odd lengths have no Nyquist entry to fix.
    CHECK((strstr(src, "+ 4LL)") != NULL) == (fix[i].n == 8));
    add_source(name, src);
    g_fft_src[g_nfft++] = src;
  }
  for (int wide = 0; wide < 2; ++wide) {
    char name[32], *src = NULL;
    unsigned grid = 0;
    snprintf(name, sizeof(name), "iron_fft_scale%d", wide);
    CHECK_OK(
        iron_cuda_gen_fft_scale(name, wide, 1000, 1.0 / 12.0, &src, &grid));
    if (!src) continue;
    CHECK_EQ_INT(grid, 4);
    add_source(name, src);
    g_fft_src[g_nfft++] = src;
  }
  char *src = NULL;
  unsigned grid = 0;
  iron_status_t st = iron_cuda_gen_fft_fix("x", false, 4, 0, &src, &grid);
  CHECK(st != IRON_OK);
  iron_status_free(st);
}

#define TOOLKIT_CUFFT "/usr/local/cuda/lib64/libcufft.so.12"

static bool contains(const char *s, const char *sub) {
  return s && strstr(s, sub) != NULL;
}

static void test_cufft_loader(void) {
  iron_cuda_api_t *api = calloc(1, sizeof(*api));
  if (!api) return;
  // Missing and wrong libraries are named.
  iron_cuda_api_load_cufft_from("/nonexistent/iron/libcufft.so.12", api);
  CHECK(!api->has_cufft);
  CHECK(contains(api->cufft_error, "libcufft"));
  CHECK(contains(api->cufft_error, "/nonexistent/iron/libcufft.so.12"));
  iron_cuda_api_load_cufft_from("libm.so.6", api);
  CHECK(!api->has_cufft);
  CHECK(contains(api->cufft_error, "lacks the symbol cufftGetVersion"));
  // An empty IRON_CUDA_LIB_DIR: the library named there is not found.
  char dir[] = "/tmp/iron_cufft_dirXXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[128];
  snprintf(path, sizeof(path), "%s/libcufft.so.12", dir);
  setenv("IRON_CUDA_LIB_DIR", dir, 1);
  iron_cuda_api_load_cufft_from(path, api);
  CHECK(!api->has_cufft);
  CHECK(contains(api->cufft_error, path));
  if (access(TOOLKIT_CUFFT, R_OK) == 0) {
    // The toolkit's cuFFT resolves every symbol, and a copy reachable
    // through IRON_CUDA_LIB_DIR is taken before the system paths.
    iron_cuda_api_load_cufft_from(TOOLKIT_CUFFT, api);
    CHECK(api->has_cufft);
    CHECK(api->cufftCreate && api->cufftMakePlanMany64 && api->cufftExecC2R &&
          api->cufftExecZ2D && api->cufftSetStream);
    int version = 0;
    if (api->cufftGetVersion) {
      CHECK_EQ_INT(api->cufftGetVersion(&version), 0);
      CHECK(version >= 10000);
    }
    CHECK(symlink(TOOLKIT_CUFFT, path) == 0);
    iron_cuda_api_load_cufft_from(NULL, api);
    CHECK(api->has_cufft);
    CHECK(contains(api->cufft_path, dir));
    unlink(path);
  } else {
    fprintf(stderr, "note: %s absent; only the error paths were checked\n",
            TOOLKIT_CUFFT);
  }
  unsetenv("IRON_CUDA_LIB_DIR");
  rmdir(dir);
  free(api);
}

static const iron_test_case_t kTests[] = {
    {"conv_cases", test_conv_cases},
    {"conv_refusals", test_conv_refusals},
    {"fft_sources", test_fft_sources},
    {"cufft_loader", test_cufft_loader},
    {"conv_emulation", test_conv_emulation},
};

int main(void) {
  if (!nvrtc_load()) {
    fprintf(stderr, "FAIL: libnvrtc not found (needed by this test)\n");
    return 1;
  }
  CHECK_OK(iron_threadpool_create(2, &g_pool));
  for (size_t i = 0; i < sizeof(kTests) / sizeof(kTests[0]); ++i) {
    iron_test_current_ = kTests[i].name;
    kTests[i].fn();
  }
  iron_test_current_ = "nvrtc";
  pthread_t th[2];
  for (int i = 0; i < 2; ++i)
    pthread_create(&th[i], NULL, compile_worker, NULL);
  for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
  for (int i = 0; i < g_nsrc; ++i) {
    CHECK(g_src[i].ok);
    free(g_src[i].src);
  }
  emu_free();
  for (int i = 0; i < g_nfft; ++i) free(g_fft_src[i]);
  iron_threadpool_destroy(g_pool);
  printf("%d sources compiled, conv emulated; %d checks, %d failed\n", g_nsrc,
         iron_test_checks_, iron_test_failures_);
  return iron_test_failures_ ? 1 : 0;
}
