// GPU-free test of the CUDA op generators (src/device/cuda/cuda_ops_gen*.c):
// every generated source of a representative set (dot pack/transposes and
// integer matmul, each reduce variant, gather/scatter, rng) is compiled by
// NVRTC to an sm_90a CUBIN. NVRTC runs without a GPU; the test loads it
// itself (dlopen) so it needs nothing but libnvrtc.
#include <dlfcn.h>
#include <pthread.h>

#include "device/cuda/cuda_ops_gen.h"
#include "host_test_ops.h"
#include "test.h"

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
#define MAX_SOURCES 128
static struct {
  char *src;
  char name[96];
  bool ok;
} g_src[MAX_SOURCES];
static int g_nsrc;
static int g_next;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void compile_one(int i) {
  void *prog = NULL;
  if (g_nvrtc.create(&prog, g_src[i].src, g_src[i].name, 0, NULL, NULL)) {
    fprintf(stderr, "nvrtcCreateProgram failed for %s\n", g_src[i].name);
    return;
  }
  const char *opts[] = {"--gpu-architecture=sm_90a", "-std=c++17"};
  int r = g_nvrtc.compile(prog, 2, opts);
  size_t cubin = 0;
  if (r == 0) g_nvrtc.cubin_size(prog, &cubin);
  if (r != 0 || cubin == 0) {
    size_t n = 0;
    g_nvrtc.log_size(prog, &n);
    char *log = calloc(n + 1, 1);
    if (log) g_nvrtc.log(prog, log);
    pthread_mutex_lock(&g_mu);
    fprintf(stderr, "NVRTC failed for %s:\n%s\n--- source ---\n%s\n",
            g_src[i].name, log ? log : "", g_src[i].src);
    pthread_mutex_unlock(&g_mu);
    free(log);
  } else {
    g_src[i].ok = true;
  }
  g_nvrtc.destroy(&prog);
}

static void *compile_worker(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&g_mu);
    int i = g_next++;
    pthread_mutex_unlock(&g_mu);
    if (i >= g_nsrc) return NULL;
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
}

static const iron_test_case_t kTests[] = {
    {"dot_sources", test_dot_sources},
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
