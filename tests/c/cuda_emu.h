// Runs generated CUDA kernels on the CPU (GPU-free tests): complete
// translation units (prelude + kernels, as iron_cuda_function_request gets
// them) are compiled as host C++ with a shim for the CUDA built-ins (one
// block of one thread, so each kernel's grid-stride loop visits every
// element) and IRON_CUDA_EMU defined (the prelude's f16 conversions then
// use the portable code below instead of PTX), then dlopen'ed.
#ifndef IRON_TESTS_CUDA_EMU_H_
#define IRON_TESTS_CUDA_EMU_H_

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char kCudaEmuShim[] =
    "#define IRON_CUDA_EMU 1\n"
    "#include <math.h>\n#include <string.h>\n#include <utility>\n"
    // iron_emu_call(kernel, args): calls a kernel of any pointer parameter
    // list with args[0..] (cuLaunchKernel's view: one pointer per
    // parameter), so a test needs no per-kernel prototype.
    "template <class... A, unsigned long... I>\n"
    "static inline void iron_emu_call_(void (*f)(A...), void *const *a,\n"
    "    std::integer_sequence<unsigned long, I...>) { f((A)a[I]...); }\n"
    "template <class... A>\n"
    "static inline void iron_emu_call(void (*f)(A...), void *const *a) {\n"
    "  iron_emu_call_(f, a,\n"
    "      std::make_integer_sequence<unsigned long, sizeof...(A)>{});\n"
    "}\n"
    "#define __device__\n#define __global__\n"
    "#define __forceinline__ inline\n#define __launch_bounds__(x)\n"
    "#define __align__(n) alignas(n)\n"
    // One thread: shared arrays are locals, barriers are no-ops.
    "#define __shared__\n"
    "static inline void __syncthreads() {}\n"
    "struct iemu_dim3_ { unsigned x, y, z; };\n"
    "static const iemu_dim3_ threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0},\n"
    "  blockDim = {1, 1, 1}, gridDim = {1, 1, 1};\n"
    "static inline float __uint_as_float(unsigned u) { float f; "
    "memcpy(&f, &u, 4); return f; }\n"
    "static inline float __int_as_float(int u) { float f; "
    "memcpy(&f, &u, 4); return f; }\n"
    "static inline unsigned __float_as_uint(float f) { unsigned u; "
    "memcpy(&u, &f, 4); return u; }\n"
    "static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); "
    "return u; }\n"
    "static inline long long __double_as_longlong(double f) { long long u; "
    "memcpy(&u, &f, 8); return u; }\n"
    "static inline double __longlong_as_double(long long u) { double f; "
    "memcpy(&f, &u, 8); return f; }\n"
    "static inline int __popcll(unsigned long long x) { "
    "return __builtin_popcountll(x); }\n"
    "static inline int __clzll(long long x) { "
    "return x ? __builtin_clzll((unsigned long long)x) : 64; }\n"
    "template <typename T> static inline T __shfl_down_sync(unsigned, T v, "
    "int) { return v; }\n"
    // f16 <-> f32 (round to nearest even; NaN is handled by the caller).
    "static inline float iron_emu_h2f(unsigned short h) {\n"
    "  unsigned s = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu,\n"
    "           m = h & 0x3ffu;\n"
    "  float v;\n"
    "  if (e == 0) v = ldexpf((float)m, -24);\n"
    "  else if (e == 31) v = m ? NAN : INFINITY;\n"
    "  else v = ldexpf((float)(m | 0x400u), (int)e - 25);\n"
    "  unsigned u; memcpy(&u, &v, 4); u |= s; memcpy(&v, &u, 4); return v;\n"
    "}\n"
    "static inline unsigned short iron_emu_f2h(float f) {\n"
    "  unsigned u; memcpy(&u, &f, 4);\n"
    "  unsigned s = (u >> 16) & 0x8000u; u &= 0x7fffffffu;\n"
    "  if (u >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);\n"
    "  if (u < 0x38800000u) {\n"
    "    float a; memcpy(&a, &u, 4);\n"
    "    return (unsigned short)(s | (unsigned)rintf(a * 16777216.0f));\n"
    "  }\n"
    "  unsigned h = (((u >> 23) - 112u) << 10) | ((u & 0x7fffffu) >> 13);\n"
    "  unsigned r = u & 0x1fffu;\n"
    "  if (r > 0x1000u || (r == 0x1000u && (h & 1u))) h++;\n"
    "  return (unsigned short)(s | h);\n"
    "}\n";

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
static inline bool cuda_emu_build(const char *const *sources, int n,
                                  const char *common, cuda_emu_lib_t *out) {
  memset(out, 0, sizeof(*out));
  snprintf(out->dir, sizeof(out->dir), "iron_cuda_emuXXXXXX");
  if (!mkdtemp(out->dir)) return false;
  char cwd[512];
  if (!getcwd(cwd, sizeof(cwd))) return false;
  snprintf(out->cpp, sizeof(out->cpp), "%s/%s/k.cpp", cwd, out->dir);
  snprintf(out->so, sizeof(out->so), "%s/%s/k.so", cwd, out->dir);
  FILE *f = fopen(out->cpp, "w");
  if (!f) return false;
  fputs(kCudaEmuShim, f);
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

static inline void *cuda_emu_sym(const cuda_emu_lib_t *l, const char *name) {
  return l->handle ? dlsym(l->handle, name) : NULL;
}

static inline void cuda_emu_close(cuda_emu_lib_t *l) {
  if (l->handle) dlclose(l->handle);
  unlink(l->cpp);
  unlink(l->so);
  rmdir(l->dir);
  memset(l, 0, sizeof(*l));
}

#endif  // IRON_TESTS_CUDA_EMU_H_
