// Runs generated CUDA kernels on the CPU (GPU-free tests): complete
// translation units (prelude + kernels, as iron_cuda_function_request gets
// them) are compiled as host C++ with a shim for the CUDA built-ins and
// IRON_CUDA_EMU defined (the prelude's f16 conversions then use the
// portable code below instead of PTX), then dlopen'ed.
//
// Two shims. kCudaEmuShim (cuda_emu_build) runs a kernel as one block of
// one thread: call the kernel's symbol directly, and its grid-stride loop
// visits every element (kernels whose threads cooperate cannot run so).
// kCudaEmuShimBlocks (cuda_emu_build_blocks) runs real launches through
// cuda_emu_launch: the blocks of the grid one after another, each CUDA
// thread a fiber (ucontext) switched at __syncthreads and
// __shfl_down_sync, so warp shuffles, shared memory, barriers and the
// cross-block merges of the generated reduces run with CUDA's semantics
// (deterministically: ready fibers run in thread order).
#ifndef IRON_TESTS_CUDA_EMU_H_
#define IRON_TESTS_CUDA_EMU_H_

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CUDA_EMU_SHIM_HEAD_                                     \
  "#define IRON_CUDA_EMU 1\n"                                    \
  "#include <math.h>\n#include <string.h>\n"                     \
  "#define __device__\n#define __global__\n"                     \
  "#define __forceinline__ inline\n#define __launch_bounds__(x)\n" \
  "#define __align__(n) alignas(n)\n"

// Bit casts and the f16 <-> f32 conversions (round to nearest even; NaN
// is handled by the caller).
#define CUDA_EMU_SHIM_CONV_ \
    "static inline float __uint_as_float(unsigned u) { float f; " \
    "memcpy(&f, &u, 4); return f; }\n" \
    "static inline float __int_as_float(int u) { float f; " \
    "memcpy(&f, &u, 4); return f; }\n" \
    "static inline unsigned __float_as_uint(float f) { unsigned u; " \
    "memcpy(&u, &f, 4); return u; }\n" \
    "static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); " \
    "return u; }\n" \
    "static inline long long __double_as_longlong(double f) { long long u; " \
    "memcpy(&u, &f, 8); return u; }\n" \
    "static inline double __longlong_as_double(long long u) { double f; " \
    "memcpy(&f, &u, 8); return f; }\n" \
    "static inline int __popcll(unsigned long long x) { " \
    "return __builtin_popcountll(x); }\n" \
    "static inline int __clzll(long long x) { " \
    "return x ? __builtin_clzll((unsigned long long)x) : 64; }\n" \
    "static inline float iron_emu_h2f(unsigned short h) {\n" \
    "  unsigned s = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu,\n" \
    "           m = h & 0x3ffu;\n" \
    "  float v;\n" \
    "  if (e == 0) v = ldexpf((float)m, -24);\n" \
    "  else if (e == 31) v = m ? NAN : INFINITY;\n" \
    "  else v = ldexpf((float)(m | 0x400u), (int)e - 25);\n" \
    "  unsigned u; memcpy(&u, &v, 4); u |= s; memcpy(&v, &u, 4); return v;\n" \
    "}\n" \
    "static inline unsigned short iron_emu_f2h(float f) {\n" \
    "  unsigned u; memcpy(&u, &f, 4);\n" \
    "  unsigned s = (u >> 16) & 0x8000u; u &= 0x7fffffffu;\n" \
    "  if (u >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);\n" \
    "  if (u < 0x38800000u) {\n" \
    "    float a; memcpy(&a, &u, 4);\n" \
    "    return (unsigned short)(s | (unsigned)rintf(a * 16777216.0f));\n" \
    "  }\n" \
    "  unsigned h = (((u >> 23) - 112u) << 10) | ((u & 0x7fffffu) >> 13);\n" \
    "  unsigned r = u & 0x1fffu;\n" \
    "  if (r > 0x1000u || (r == 0x1000u && (h & 1u))) h++;\n" \
    "  return (unsigned short)(s | h);\n" \
    "}\n"

// One block of one thread: shared arrays are locals, barriers are no-ops.
static const char kCudaEmuShim[] =
    CUDA_EMU_SHIM_HEAD_
    "#define __shared__\n"
    "static inline void __syncthreads() {}\n"
    "struct iemu_dim3_ { unsigned x, y, z; };\n"
    "static const iemu_dim3_ threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0},\n"
    "  blockDim = {1, 1, 1}, gridDim = {1, 1, 1};\n"
    "template <typename T> static inline T __shfl_down_sync(unsigned, T v, "
    "int) { return v; }\n"
    CUDA_EMU_SHIM_CONV_;

// Real launches (cuda_emu_launch): blocks one after another; within a
// block, one fiber per thread, each run until it waits at a barrier or
// returns. __shared__ variables are statics (one block runs at a time). A
// barrier opens when every live thread of its scope (the block for
// __syncthreads, the warp for shuffles) waits at it; threads that returned
// no longer count. A launch whose live threads wait at different barriers
// fails (a divergent barrier: undefined behaviour on the GPU). Atomics are
// plain read-modify-writes (fibers never interleave within one).
static const char kCudaEmuShimBlocks[] =
    CUDA_EMU_SHIM_HEAD_
    "#include <ucontext.h>\n#include <stdlib.h>\n"
    "#define __shared__ static\n"
    "struct iemu_dim3_ { unsigned x, y, z; };\n"
    "static iemu_dim3_ threadIdx, blockIdx, blockDim, gridDim;\n"
    "enum { IEMU_READY, IEMU_BLOCK, IEMU_WARP, IEMU_DONE };\n"
    "struct iemu_fiber_ { ucontext_t ctx; int state; };\n"
    "static iemu_fiber_ *iemu_f_;\n"
    "static ucontext_t iemu_sched_;\n"
    "static unsigned iemu_cur_;\n"
    "static unsigned char iemu_xchg_[1024][16];\n"
    "static void iemu_wait_(int state) {\n"
    "  unsigned me = iemu_cur_;\n"
    "  iemu_f_[me].state = state;\n"
    "  swapcontext(&iemu_f_[me].ctx, &iemu_sched_);\n"
    "}\n"
    "static inline void __syncthreads() { iemu_wait_(IEMU_BLOCK); }\n"
    "static inline void __threadfence() {}\n"
    "template <typename T> static inline T __shfl_down_sync(unsigned, T v, "
    "int d) {\n"
    "  unsigned t = threadIdx.x, lane = t & 31u;\n"
    "  memcpy(iemu_xchg_[t], &v, sizeof(T));\n"
    "  iemu_wait_(IEMU_WARP);\n"
    "  T r = v;\n"
    "  if (lane + (unsigned)d < 32u && t + (unsigned)d < blockDim.x)\n"
    "    memcpy(&r, iemu_xchg_[t + d], sizeof(T));\n"
    "  iemu_wait_(IEMU_WARP);\n"
    "  return r;\n"
    "}\n"
    "template <typename T, typename U> static inline T atomicAdd(T *p, U v) "
    "{ T o = *p; *p = (T)(o + v); return o; }\n"
    "template <typename T> static inline T atomicCAS(T *p, T c, T v) "
    "{ T o = *p; if (o == c) *p = v; return o; }\n"
    "template <typename T> static inline T atomicExch(T *p, T v) "
    "{ T o = *p; *p = v; return o; }\n"
    "template <typename T> static inline T atomicMax(T *p, T v) "
    "{ T o = *p; if (v > o) *p = v; return o; }\n"
    "template <typename T> static inline T atomicMin(T *p, T v) "
    "{ T o = *p; if (v < o) *p = v; return o; }\n"
    "typedef void (*iemu_k_)(void *, void *, void *, void *, void *, void *,\n"
    "                        void *, void *, void *, void *, void *, void *,\n"
    "                        void *, void *, void *, void *);\n"
    "static iemu_k_ iemu_kern_;\n"
    "static void **iemu_args_;\n"
    "static void iemu_entry_() {\n"
    "  void **a = iemu_args_;\n"
    "  iemu_kern_(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],\n"
    "             a[10], a[11], a[12], a[13], a[14], a[15]);\n"
    "  iemu_f_[iemu_cur_].state = IEMU_DONE;\n"
    "}\n"
    "extern \"C\" int iemu_launch(void *kern, int nargs, void **args,\n"
    "                             unsigned grid, unsigned block) {\n"
    "  void *a[16] = {0};\n"
    "  for (int i = 0; i < nargs && i < 16; ++i) a[i] = args[i];\n"
    "  memcpy(&iemu_kern_, &kern, sizeof(kern));\n"
    "  iemu_args_ = a;\n"
    "  blockDim = {block, 1, 1}; gridDim = {grid, 1, 1};\n"
    "  const size_t stack = 256 * 1024;\n"
    "  iemu_fiber_ *f = (iemu_fiber_ *)calloc(block, sizeof(iemu_fiber_));\n"
    "  char *stacks = (char *)malloc(stack * block);\n"
    "  if (!f || !stacks) { free(f); free(stacks); return -2; }\n"
    "  iemu_f_ = f;\n"
    "  int rc = 0;\n"
    "  for (unsigned b = 0; b < grid && rc == 0; ++b) {\n"
    "    blockIdx = {b, 0, 0};\n"
    "    for (unsigned t = 0; t < block; ++t) {\n"
    "      getcontext(&f[t].ctx);\n"
    "      f[t].ctx.uc_stack.ss_sp = stacks + stack * t;\n"
    "      f[t].ctx.uc_stack.ss_size = stack;\n"
    "      f[t].ctx.uc_link = &iemu_sched_;\n"
    "      makecontext(&f[t].ctx, iemu_entry_, 0);\n"
    "      f[t].state = IEMU_READY;\n"
    "    }\n"
    "    for (;;) {\n"
    "      bool ran = false;\n"
    "      for (unsigned t = 0; t < block; ++t) {\n"
    "        if (f[t].state != IEMU_READY) continue;\n"
    "        iemu_cur_ = t; threadIdx = {t, 0, 0};\n"
    "        swapcontext(&iemu_sched_, &f[t].ctx);\n"
    "        ran = true;\n"
    "      }\n"
    "      if (ran) continue;\n"
    "      unsigned live = 0, at_block = 0;\n"
    "      for (unsigned t = 0; t < block; ++t) {\n"
    "        live += f[t].state != IEMU_DONE;\n"
    "        at_block += f[t].state == IEMU_BLOCK;\n"
    "      }\n"
    "      if (live == 0) break;\n"
    "      bool released = false;\n"
    "      for (unsigned w = 0; w * 32 < block; ++w) {\n"
    "        unsigned wl = 0, ww = 0;\n"
    "        for (unsigned t = w * 32; t < block && t < w * 32 + 32; ++t) {\n"
    "          wl += f[t].state != IEMU_DONE;\n"
    "          ww += f[t].state == IEMU_WARP;\n"
    "        }\n"
    "        if (wl > 0 && ww == wl) {\n"
    "          for (unsigned t = w * 32; t < block && t < w * 32 + 32; ++t)\n"
    "            f[t].state = IEMU_READY;\n"
    "          released = true;\n"
    "        }\n"
    "      }\n"
    "      if (!released && at_block == live) {\n"
    "        for (unsigned t = 0; t < block; ++t)\n"
    "          if (f[t].state == IEMU_BLOCK) f[t].state = IEMU_READY;\n"
    "        released = true;\n"
    "      }\n"
    "      if (!released) { rc = -1; break; }\n"
    "    }\n"
    "  }\n"
    "  free(stacks); free(f);\n"
    "  return rc;\n"
    "}\n"
    CUDA_EMU_SHIM_CONV_;

// Compiles `n` complete sources (duplicates once, each wrapped in its own namespace) into a
// shared object in a fresh directory under the working directory (/tmp may
// be noexec) and opens it. NULL on failure (reported on stderr).
typedef struct cuda_emu_lib {
  void *handle;
  char dir[64], cpp[700], so[700];
} cuda_emu_lib_t;

static inline bool cuda_emu_have_cxx(void) {
  return system("c++ --version > /dev/null 2>&1") == 0;
}

// Sources that start with `common` (e.g. iron_cuda_prelude(); may be NULL)
// share one copy of it: their bodies go in namespaces nested in the one
// that holds it (C++ compile time is mostly the prelude).
static inline bool cuda_emu_build_with_(const char *shim,
                                       const char *const *sources, int n,
                                       const char *common,
                                       cuda_emu_lib_t *out) {
  memset(out, 0, sizeof(*out));
  snprintf(out->dir, sizeof(out->dir), "iron_cuda_emuXXXXXX");
  if (!mkdtemp(out->dir)) return false;
  char cwd[512];
  if (!getcwd(cwd, sizeof(cwd))) return false;
  snprintf(out->cpp, sizeof(out->cpp), "%s/%s/k.cpp", cwd, out->dir);
  snprintf(out->so, sizeof(out->so), "%s/%s/k.so", cwd, out->dir);
  FILE *f = fopen(out->cpp, "w");
  if (!f) return false;
  fputs(shim, f);
  size_t cl = common ? strlen(common) : 0;
  if (cl) fprintf(f, "namespace emuc {\n%s\n", common);
  for (int pass = cl ? 0 : 1; pass < 2; ++pass) {
    for (int i = 0; i < n; ++i) {
      bool shared = cl && strncmp(sources[i], common, cl) == 0;
      if (shared != (pass == 0)) continue;
      // Identical requests share a kernel (an extern "C" name once).
      bool dup = false;
      for (int j = 0; j < i && !dup; ++j)
        dup = strcmp(sources[j], sources[i]) == 0;
      if (!dup)
        fprintf(f, "namespace emu%d {\n%s\n}\n", i,
                shared ? sources[i] + cl : sources[i]);
    }
    if (pass == 0) fprintf(f, "}\n");
  }
  fclose(f);
  // -ffp-contract=off: products and sums round separately, as on the
  // device (-fmad=false).
  char cmd[1600];
  snprintf(cmd, sizeof(cmd),
           "c++ -std=c++17 -O1 -ffp-contract=off -fPIC -shared -w -o %s %s",
           out->so, out->cpp);
  if (system(cmd) != 0) {
    fprintf(stderr, "cuda_emu: C++ compile failed: %s\n", out->cpp);
    return false;
  }
  out->handle = dlopen(out->so, RTLD_NOW | RTLD_LOCAL);
  if (!out->handle) fprintf(stderr, "cuda_emu: %s\n", dlerror());
  return out->handle != NULL;
}

static inline bool cuda_emu_build(const char *const *sources, int n,
                                  const char *common, cuda_emu_lib_t *out) {
  return cuda_emu_build_with_(kCudaEmuShim, sources, n, common, out);
}

// The same with kCudaEmuShimBlocks, for cuda_emu_launch.
static inline bool cuda_emu_build_blocks(const char *const *sources, int n,
                                         const char *common,
                                         cuda_emu_lib_t *out) {
  return cuda_emu_build_with_(kCudaEmuShimBlocks, sources, n, common, out);
}

static inline void *cuda_emu_sym(const cuda_emu_lib_t *l, const char *name) {
  return l->handle ? dlsym(l->handle, name) : NULL;
}

// Launches kernel `name` of a cuda_emu_build_blocks library: `grid` blocks
// of `block` threads (at most 1024), `nargs` (<= 16) pointer arguments.
// False when the kernel or the launcher is missing or the threads of a
// block wait at different barriers.
static inline bool cuda_emu_launch(const cuda_emu_lib_t *l, const char *name,
                                   unsigned grid, unsigned block, int nargs,
                                   void **args) {
  void *k = cuda_emu_sym(l, name), *launch = cuda_emu_sym(l, "iemu_launch");
  if (!k || !launch || block == 0 || block > 1024 || nargs > 16) return false;
  int (*fn)(void *, int, void **, unsigned, unsigned);
  memcpy(&fn, &launch, sizeof(fn));
  return fn(k, nargs, args, grid, block) == 0;
}

static inline void cuda_emu_close(cuda_emu_lib_t *l) {
  if (l->handle) dlclose(l->handle);
  unlink(l->cpp);
  unlink(l->so);
  rmdir(l->dir);
  memset(l, 0, sizeof(*l));
}

#endif  // IRON_TESTS_CUDA_EMU_H_
