// Runs generated CUDA kernels on the CPU (GPU-free tests): complete
// translation units (prelude + kernels, as iron_cuda_function_request gets
// them) are compiled as host C++ with a shim for the CUDA built-ins and
// IRON_CUDA_EMU defined (the prelude's f16 conversions then use the
// portable code below instead of PTX), then dlopen'ed. Two shims:
// cuda_emu_build's runs one block of one thread (each kernel's grid-stride
// loop visits every element; kernels are called directly);
// cuda_emu_build_mt's runs real grids of multi-thread blocks with shared
// memory, barriers and warp intrinsics (cuda_emu_launch).
#ifndef IRON_TESTS_CUDA_EMU_H_
#define IRON_TESTS_CUDA_EMU_H_

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Built-ins both shims share: bit casts, bit counts, f16 <-> f32.
#define CUDA_EMU_COMMON_ \
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

// The one-thread shim (cuda_emu_build).
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
    "#define __forceinline__ inline\n#define __launch_bounds__(...)\n"
    "#define __align__(n) alignas(n)\n"
    // One thread: shared arrays are locals, barriers are no-ops.
    "#define __shared__\n"
    "static inline void __syncthreads() {}\n"
    "struct iemu_dim3_ { unsigned x, y, z; };\n"
    "static const iemu_dim3_ threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0},\n"
    "  blockDim = {1, 1, 1}, gridDim = {1, 1, 1};\n"
    "template <typename T> static inline T __shfl_down_sync(unsigned, T v, "
    "int) { return v; }\n" CUDA_EMU_COMMON_;


// Compiles `n` complete sources (duplicates once, each wrapped in its own namespace) into a
// shared object in a fresh directory under the working directory (/tmp may
// be noexec) and opens it. NULL on failure (reported on stderr).
typedef struct cuda_emu_lib {
  void *handle;
  char dir[600], cpp[700], so[700];
} cuda_emu_lib_t;

static inline bool cuda_emu_have_cxx(void) {
  return system("c++ --version > /dev/null 2>&1") == 0;
}

// The multi-thread shim (cuda_emu_build_mt): every thread of a block is a
// fiber (its own stack, switched cooperatively on one OS thread), so
// kernels with shared memory, __syncthreads and warp intrinsics run as on
// the GPU, blocks one after another (kernels that wait for other blocks
// are not supported). threadIdx is the running fiber's; __shared__
// variables are statics (one copy, used by one block at a time). A fiber
// switches only at a barrier or a warp intrinsic, so shared-memory atomics
// are plain read-modify-writes. Warp intrinsics exchange values through
// per-warp slots (double-buffered: a lane cannot reach the next exchange
// before every lane of its warp has passed this one). A barrier that can
// never be released (divergent __syncthreads, a warp split between a warp
// barrier and a block barrier) fails the launch. IRON_TEST_EMU_REVERSE=1
// runs the blocks of a grid and the fibers between two barriers in the
// reverse order: a read of another thread's (or block's) write that no
// barrier orders then sees the other side of the race.
static const char kCudaEmuShimMT[] =
    "#define IRON_CUDA_EMU 1\n"
    "#define IRON_CUDA_EMU_MT 1\n"
    "#include <math.h>\n#include <string.h>\n#include <stdlib.h>\n"
    "#include <stdint.h>\n"
    "#define __device__\n#define __global__\n"
    "#define __forceinline__ inline\n#define __launch_bounds__(...)\n"
    "#define __align__(n) alignas(n)\n"
    "#define __shared__ static\n"
    "struct iemu_dim3_ { unsigned x, y, z; };\n"
    "struct iemu_fiber_ { void *sp; iemu_dim3_ tid; unsigned lin; int state;\n"
    "  unsigned phase; };\n"
    "enum { IEMU_RUN = 0, IEMU_BAR = 1, IEMU_WARP = 2, IEMU_DONE = 3 };\n"
    "static iemu_fiber_ *iemu_cur;\n"
    "static iemu_dim3_ iemu_bidx, iemu_bdim, iemu_gdim;\n"
    "#define threadIdx (iemu_cur->tid)\n"
    "#define blockIdx iemu_bidx\n#define blockDim iemu_bdim\n"
    "#define gridDim iemu_gdim\n"
    "extern \"C\" void iemu_swap(void **save, void *to);\n"
    "#if defined(__x86_64__)\n"
    "asm(\".text\\n.p2align 4\\n.globl iemu_swap\\n.hidden iemu_swap\\n"
    ".type iemu_swap,@function\\niemu_swap:\\n"
    "pushq %rbp\\npushq %rbx\\npushq %r12\\npushq %r13\\npushq %r14\\n"
    "pushq %r15\\nmovq %rsp, (%rdi)\\nmovq %rsi, %rsp\\npopq %r15\\n"
    "popq %r14\\npopq %r13\\npopq %r12\\npopq %rbx\\npopq %rbp\\nret\\n"
    ".size iemu_swap, .-iemu_swap\\n\");\n"
    "#define IEMU_ASM 1\n"
    "#else\n"
    "#include <ucontext.h>\n"
    "extern \"C\" void iemu_swap(void **save, void *to) {\n"
    "  swapcontext((ucontext_t *)*save, (ucontext_t *)to);\n"
    "}\n"
    "#endif\n"
    "static void *iemu_sched_sp;\n"
    "static void (*iemu_tramp)(void **);\n"
    "static void **iemu_args;\n"
    "static inline void iemu_wait(int kind) {\n"
    "  iemu_cur->state = kind;\n"
    "  iemu_swap(&iemu_cur->sp, iemu_sched_sp);\n"
    "}\n"
    "static inline void __syncthreads() { iemu_wait(IEMU_BAR); }\n"
    "static inline void __syncwarp(unsigned m = 0xffffffffu) {\n"
    "  (void)m; iemu_wait(IEMU_WARP);\n"
    "}\n"
    "static inline void __threadfence() {}\n"
    "static inline void __threadfence_block() {}\n"
    // Exchange slots [buffer][warp][lane] and the lanes present at the
    // exchange (set by the scheduler when it releases the warp).
    "static unsigned long long iemu_slot[2][32][32];\n"
    "static unsigned iemu_live[2][32];\n"
    "static inline unsigned long long *iemu_xchg(unsigned long long v,\n"
    "                                            unsigned *live) {\n"
    "  unsigned w = iemu_cur->lin >> 5, l = iemu_cur->lin & 31, ph =\n"
    "      iemu_cur->phase;\n"
    "  iemu_cur->phase ^= 1u;\n"
    "  iemu_slot[ph][w][l] = v;\n"
    "  iemu_wait(IEMU_WARP);\n"
    "  *live = iemu_live[ph][w];\n"
    "  return iemu_slot[ph][w];\n"
    "}\n"
    "template <typename T> static inline unsigned long long iemu_bits(T v) {\n"
    "  unsigned long long u = 0; memcpy(&u, &v, sizeof(T)); return u;\n"
    "}\n"
    "template <typename T> static inline T iemu_val(unsigned long long u) {\n"
    "  T v; memcpy(&v, &u, sizeof(T)); return v;\n"
    "}\n"
    "static inline unsigned iemu_lane() { return iemu_cur->lin & 31; }\n"
    "template <typename T> static inline T __shfl_sync(unsigned, T v, int s,\n"
    "                                                  int width = 32) {\n"
    "  unsigned live; unsigned long long *x = iemu_xchg(iemu_bits(v), &live);\n"
    "  unsigned l = iemu_lane(), b = l & ~(unsigned)(width - 1);\n"
    "  return iemu_val<T>(x[b + ((unsigned)s & (unsigned)(width - 1))]);\n"
    "}\n"
    "template <typename T> static inline T __shfl_up_sync(unsigned, T v,\n"
    "    unsigned d, int width = 32) {\n"
    "  unsigned live; unsigned long long *x = iemu_xchg(iemu_bits(v), &live);\n"
    "  unsigned l = iemu_lane(), b = l & ~(unsigned)(width - 1);\n"
    "  return l >= b + d ? iemu_val<T>(x[l - d]) : v;\n"
    "}\n"
    "template <typename T> static inline T __shfl_down_sync(unsigned, T v,\n"
    "    unsigned d, int width = 32) {\n"
    "  unsigned live; unsigned long long *x = iemu_xchg(iemu_bits(v), &live);\n"
    "  unsigned l = iemu_lane(), b = l & ~(unsigned)(width - 1);\n"
    "  return l + d < b + (unsigned)width ? iemu_val<T>(x[l + d]) : v;\n"
    "}\n"
    "template <typename T> static inline T __shfl_xor_sync(unsigned, T v,\n"
    "    int m, int width = 32) {\n"
    "  unsigned live; unsigned long long *x = iemu_xchg(iemu_bits(v), &live);\n"
    "  unsigned l = iemu_lane();\n"
    "  (void)width; return iemu_val<T>(x[l ^ (unsigned)m]);\n"
    "}\n"
    "static inline unsigned __ballot_sync(unsigned, int p) {\n"
    "  unsigned live; unsigned long long *x = iemu_xchg(p != 0, &live);\n"
    "  unsigned r = 0;\n"
    "  for (int i = 0; i < 32; ++i) if ((live >> i & 1u) && x[i]) r |= 1u << i;\n"
    "  return r;\n"
    "}\n"
    "static inline int __any_sync(unsigned m, int p) { return __ballot_sync(m, p) != 0; }\n"
    "static inline int __all_sync(unsigned m, int p) {\n"
    "  unsigned live; unsigned long long *x = iemu_xchg(p != 0, &live);\n"
    "  for (int i = 0; i < 32; ++i) if ((live >> i & 1u) && !x[i]) return 0;\n"
    "  return 1;\n"
    "}\n"
    "template <typename T> static inline unsigned __match_any_sync(unsigned,\n"
    "                                                              T v) {\n"
    "  unsigned live; unsigned long long u = iemu_bits(v),\n"
    "      *x = iemu_xchg(u, &live);\n"
    "  unsigned r = 0;\n"
    "  for (int i = 0; i < 32; ++i) if ((live >> i & 1u) && x[i] == u) r |= 1u << i;\n"
    "  return r;\n"
    "}\n"
    "static inline unsigned __activemask() {\n"
    "  unsigned live; iemu_xchg(0, &live); return live;\n"
    "}\n"
    "template <typename T> static inline T atomicAdd(T *p, T v) {\n"
    "  T o = *p; *p = (T)(o + v); return o;\n"
    "}\n"
    "template <typename T> static inline T atomicMax(T *p, T v) {\n"
    "  T o = *p; if (v > o) *p = v; return o;\n"
    "}\n"
    "template <typename T> static inline T atomicMin(T *p, T v) {\n"
    "  T o = *p; if (v < o) *p = v; return o;\n"
    "}\n"
    "template <typename T> static inline T atomicExch(T *p, T v) {\n"
    "  T o = *p; *p = v; return o;\n"
    "}\n"
    "template <typename T> static inline T atomicCAS(T *p, T c, T v) {\n"
    "  T o = *p; if (o == c) *p = v; return o;\n"
    "}\n"
    "template <typename T> static inline T __ldg(const T *p) { return *p; }\n"
    "static inline int __popc(unsigned x) { return __builtin_popcount(x); }\n"
    "static inline int __clz(int x) {\n"
    "  return x ? __builtin_clz((unsigned)x) : 32; }\n"
    "static inline int __ffs(int x) { return __builtin_ffs(x); }\n"
    "static inline unsigned __brev(unsigned x) {\n"
    "  unsigned r = 0; for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);\n"
    "  return r;\n"
    "}\n"
    // The fibers: stacks of 128 KiB, at most 1024 threads per block.
    "#define IEMU_STACK (128 * 1024)\n"
    "static iemu_fiber_ iemu_fibers[1024];\n"
    "static char *iemu_stacks;\n"
    "#if !defined(IEMU_ASM)\n"
    "static ucontext_t iemu_ctx[1025];\n"
    "#endif\n"
    "static void iemu_fiber_main() {\n"
    "  iemu_tramp(iemu_args);\n"
    "  iemu_cur->state = IEMU_DONE;\n"
    "  iemu_swap(&iemu_cur->sp, iemu_sched_sp);\n"
    "  abort();\n"
    "}\n"
    "static void iemu_fiber_init(unsigned t) {\n"
    "  char *top = iemu_stacks + (size_t)(t + 1) * IEMU_STACK;\n"
    "#if defined(IEMU_ASM)\n"
    "  void **sp = (void **)((uintptr_t)top & ~(uintptr_t)15);\n"
    "  sp -= 2;\n"
    "  sp[0] = (void *)iemu_fiber_main;\n"
    "  sp[1] = 0;\n"
    "  sp -= 6;\n"
    "  for (int i = 0; i < 6; ++i) sp[i] = 0;\n"
    "  iemu_fibers[t].sp = sp;\n"
    "#else\n"
    "  getcontext(&iemu_ctx[t]);\n"
    "  iemu_ctx[t].uc_stack.ss_sp = top - IEMU_STACK;\n"
    "  iemu_ctx[t].uc_stack.ss_size = IEMU_STACK;\n"
    "  iemu_ctx[t].uc_link = 0;\n"
    "  makecontext(&iemu_ctx[t], iemu_fiber_main, 0);\n"
    "  iemu_fibers[t].sp = &iemu_ctx[t];\n"
    "#endif\n"
    "}\n"
    // The fibers' stacks, freed when the library is closed.
    "extern \"C\" void iemu_release() { free(iemu_stacks); iemu_stacks = 0; }\n"
    // 0: ran; 1: bad launch; 2: a barrier that never releases.
    "extern \"C\" int iemu_launch(void (*tramp)(void **), unsigned gx,\n"
    "    unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,\n"
    "    void **args) {\n"
    "  unsigned nt = bx * by * bz;\n"
    "  if (nt == 0 || nt > 1024) return 1;\n"
    "  if (!iemu_stacks) iemu_stacks = (char *)malloc((size_t)1024 * IEMU_STACK);\n"
    "  if (!iemu_stacks) return 1;\n"
    "#if !defined(IEMU_ASM)\n"
    "  iemu_sched_sp = &iemu_ctx[1024];\n"
    "#endif\n"
    "  iemu_tramp = tramp; iemu_args = args;\n"
    "  iemu_gdim = {gx, gy, gz}; iemu_bdim = {bx, by, bz};\n"
    "  unsigned nw = (nt + 31) / 32;\n"
    "  static int rev = -1;\n"
    "  if (rev < 0) { const char *e = getenv(\"IRON_TEST_EMU_REVERSE\");\n"
    "    rev = e && *e == '1'; }\n"
    "  for (unsigned z = 0; z < gz; ++z)\n"
    "  for (unsigned y = 0; y < gy; ++y)\n"
    "  for (unsigned xi = 0; xi < gx; ++xi) {\n"
    "    unsigned x = rev ? gx - 1 - xi : xi;\n"
    "    iemu_bidx = {x, y, z};\n"
    "    for (unsigned t = 0; t < nt; ++t) {\n"
    "      iemu_fiber_ *f = &iemu_fibers[t];\n"
    "      f->tid = {t % bx, (t / bx) % by, t / (bx * by)};\n"
    "      f->lin = t; f->state = IEMU_RUN; f->phase = 0;\n"
    "      iemu_fiber_init(t);\n"
    "    }\n"
    "    for (;;) {\n"
    "      for (unsigned ti = 0; ti < nt; ++ti) {\n"
    "        unsigned t = rev ? nt - 1 - ti : ti;\n"
    "        if (iemu_fibers[t].state != IEMU_RUN) continue;\n"
    "        iemu_cur = &iemu_fibers[t];\n"
    "        iemu_swap(&iemu_sched_sp, iemu_cur->sp);\n"
    "      }\n"
    "      bool released = false, any_live = false, all_bar = true;\n"
    "      for (unsigned w = 0; w < nw; ++w) {\n"
    "        unsigned live = 0; bool all_warp = true;\n"
    "        for (unsigned l = 0; l < 32 && w * 32 + l < nt; ++l) {\n"
    "          iemu_fiber_ *f = &iemu_fibers[w * 32 + l];\n"
    "          if (f->state == IEMU_DONE) continue;\n"
    "          live |= 1u << l; any_live = true;\n"
    "          if (f->state != IEMU_WARP) all_warp = false;\n"
    "          if (f->state != IEMU_BAR) all_bar = false;\n"
    "        }\n"
    "        if (!live || !all_warp) continue;\n"
    "        for (unsigned l = 0; l < 32 && w * 32 + l < nt; ++l) {\n"
    "          iemu_fiber_ *f = &iemu_fibers[w * 32 + l];\n"
    "          if (f->state != IEMU_WARP) continue;\n"
    "          iemu_live[f->phase ^ 1u][w] = live;\n"
    "          f->state = IEMU_RUN;\n"
    "        }\n"
    "        released = true;\n"
    "      }\n"
    "      if (!any_live) break;\n"
    "      if (released) continue;\n"
    "      if (!all_bar) return 2;\n"
    "      for (unsigned t = 0; t < nt; ++t)\n"
    "        if (iemu_fibers[t].state == IEMU_BAR) iemu_fibers[t].state = IEMU_RUN;\n"
    "    }\n"
    "  }\n"
    "  return 0;\n"
    "}\n" CUDA_EMU_COMMON_;

// Writes, for every `__global__ void NAME(params)` of `src`, an
// `extern "C" void iemu_k_NAME(void **a)` calling it with a[i] pointing
// at parameter i (as cuLaunchKernel's params), in the source's namespace.
static inline void cuda_emu_write_trampolines(FILE *f, const char *src) {
  const char *p = src;
  static const char kMark[] = "__global__ void";
  while ((p = strstr(p, kMark)) != NULL) {
    p += sizeof(kMark) - 1;
    while (*p == ' ' || *p == '\n') ++p;
    if (strncmp(p, "__launch_bounds__(", 18) == 0) {
      p = strchr(p, ')');
      if (!p) return;
      ++p;
      while (*p == ' ' || *p == '\n') ++p;
    }
    const char *name = p;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
           (*p >= '0' && *p <= '9') || *p == '_')
      ++p;
    int name_len = (int)(p - name);
    if (*p != '(' || name_len == 0) continue;
    ++p;
    fprintf(f, "extern \"C\" void iemu_k_%.*s(void **a) {\n  %.*s(", name_len,
            name, name_len, name);
    int idx = 0, depth = 0;
    const char *start = p;
    for (;; ++p) {
      if (*p == '\0') return;
      if (*p == '(' || *p == '<') depth++;
      if ((*p == ')' || *p == '>') && depth > 0) {
        depth--;
        continue;
      }
      if ((*p == ',' || *p == ')') && depth == 0) {
        // One parameter: its type is the text before its name.
        const char *end = p;
        while (end > start && (end[-1] == ' ' || end[-1] == '\n')) --end;
        const char *nm = end;
        while (nm > start &&
               ((nm[-1] >= 'a' && nm[-1] <= 'z') ||
                (nm[-1] >= 'A' && nm[-1] <= 'Z') ||
                (nm[-1] >= '0' && nm[-1] <= '9') || nm[-1] == '_'))
          --nm;
        char type[256];
        int tl = 0;
        for (const char *c = start; c < nm && tl < 250; ++c) {
          if (strncmp(c, "__restrict__", 12) == 0) {
            c += 11;
            continue;
          }
          type[tl++] = *c;
        }
        type[tl] = '\0';
        bool empty = true;
        for (int i = 0; i < tl; ++i)
          if (type[i] != ' ' && type[i] != '\n') empty = false;
        if (!empty && strcmp(type, "void") != 0) {
          fprintf(f, "%s*(%s *)a[%d]", idx ? ", " : "", type, idx);
          idx++;
        }
        start = p + 1;
        if (*p == ')') break;
      }
    }
    fprintf(f, ");\n}\n");
  }
}

// Sources that start with `common` (e.g. iron_cuda_prelude(); may be NULL)
// share one copy of it: their bodies go in namespaces nested in the one
// that holds it (C++ compile time is mostly the prelude).
static inline bool cuda_emu_build_with(const char *shim, bool tramps,
                                       const char *const *sources, int n,
                                       const char *common,
                                       cuda_emu_lib_t *out) {
  memset(out, 0, sizeof(*out));
  // Under $TMPDIR (or /tmp): a run killed midway leaves nothing in the
  // tree it ran from.
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !tmp[0]) tmp = "/tmp";
  if ((size_t)snprintf(out->dir, sizeof(out->dir), "%s/iron_cuda_emuXXXXXX",
                       tmp) >= sizeof(out->dir))
    return false;
  if (!mkdtemp(out->dir)) return false;
  snprintf(out->cpp, sizeof(out->cpp), "%s/k.cpp", out->dir);
  snprintf(out->so, sizeof(out->so), "%s/k.so", out->dir);
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
      if (dup) continue;
      const char *body = shared ? sources[i] + cl : sources[i];
      fprintf(f, "namespace emu%d {\n%s\n", i, body);
      if (tramps) cuda_emu_write_trampolines(f, body);
      fprintf(f, "}\n");
    }
    if (pass == 0) fprintf(f, "}\n");
  }
  fclose(f);
  // -ffp-contract=off: products and sums round separately, as on the
  // device (-fmad=false). -frounding-math: libm calls on arguments the
  // compiler knows are not folded into its own correctly rounded results
  // (glibc's expm1f(64) is 1 ulp off them; the host device calls glibc).
  // IRON_TEST_EMU_CFLAGS adds compiler flags (debugging a kernel:
  // "-g -O0", or "-g -fsanitize=address" with the test run under ASan).
  const char *extra = getenv("IRON_TEST_EMU_CFLAGS");
  char cmd[1800];
  snprintf(cmd, sizeof(cmd),
           "c++ -std=c++17 -O1 -ffp-contract=off -frounding-math -fPIC "
           "-shared -w %s -o %s %s",
           extra ? extra : "", out->so, out->cpp);
  if (system(cmd) != 0) {
    fprintf(stderr, "cuda_emu: C++ compile failed: %s\n", out->cpp);
    return false;
  }
  out->handle = dlopen(out->so, RTLD_NOW | RTLD_LOCAL);
  if (!out->handle) fprintf(stderr, "cuda_emu: %s\n", dlerror());
  return out->handle != NULL;
}

// One block of one thread per launch (kernels are called directly).
static inline bool cuda_emu_build(const char *const *sources, int n,
                                  const char *common, cuda_emu_lib_t *out) {
  return cuda_emu_build_with(kCudaEmuShim, false, sources, n, common, out);
}

// Blocks of many threads (kCudaEmuShimMT), launched by name with
// cuda_emu_launch.
static inline bool cuda_emu_build_mt(const char *const *sources, int n,
                                     const char *common,
                                     cuda_emu_lib_t *out) {
  return cuda_emu_build_with(kCudaEmuShimMT, true, sources, n, common, out);
}

// Runs kernel `name` of a cuda_emu_build_mt library on a 1-D grid, with
// `args` as cuLaunchKernel takes them. 0 when it ran; otherwise an error
// was printed.
static inline int cuda_emu_launch(const cuda_emu_lib_t *l, const char *name,
                                  unsigned grid, unsigned block,
                                  void **args) {
  char sym[200];
  snprintf(sym, sizeof(sym), "iemu_k_%s", name);
  void *k = l->handle ? dlsym(l->handle, sym) : NULL;
  void *launch = l->handle ? dlsym(l->handle, "iemu_launch") : NULL;
  if (!k || !launch) {
    fprintf(stderr, "cuda_emu: no kernel %s\n", name);
    return 1;
  }
  typedef int (*launch_t)(void (*)(void **), unsigned, unsigned, unsigned,
                          unsigned, unsigned, unsigned, void **);
  typedef void (*tramp_t)(void **);
  launch_t lf;
  tramp_t kf;
  memcpy(&lf, &launch, sizeof(lf));
  memcpy(&kf, &k, sizeof(kf));
  int r = lf(kf, grid, 1, 1, block, 1, 1, args);
  if (r)
    fprintf(stderr, "cuda_emu: launch of %s (%u x %u) failed: %s\n", name,
            grid, block, r == 2 ? "barrier never released" : "bad launch");
  return r;
}

// As cuda_emu_launch on a 3-D grid.
static inline int cuda_emu_launch3(const cuda_emu_lib_t *l, const char *name,
                                   const unsigned grid[3], unsigned block,
                                   void **args) {
  char sym[200];
  snprintf(sym, sizeof(sym), "iemu_k_%s", name);
  void *k = l->handle ? dlsym(l->handle, sym) : NULL;
  void *launch = l->handle ? dlsym(l->handle, "iemu_launch") : NULL;
  if (!k || !launch) {
    fprintf(stderr, "cuda_emu: no kernel %s\n", name);
    return 1;
  }
  typedef int (*launch_t)(void (*)(void **), unsigned, unsigned, unsigned,
                          unsigned, unsigned, unsigned, void **);
  typedef void (*tramp_t)(void **);
  launch_t lf;
  tramp_t kf;
  memcpy(&lf, &launch, sizeof(lf));
  memcpy(&kf, &k, sizeof(kf));
  int r = lf(kf, grid[0], grid[1], grid[2], block, 1, 1, args);
  if (r)
    fprintf(stderr, "cuda_emu: launch of %s (%u,%u,%u x %u) failed: %s\n",
            name, grid[0], grid[1], grid[2], block,
            r == 2 ? "barrier never released" : "bad launch");
  return r;
}

static inline void *cuda_emu_sym(const cuda_emu_lib_t *l, const char *name) {
  return l->handle ? dlsym(l->handle, name) : NULL;
}

// IRON_TEST_KEEP_EMU=1 keeps the generated C++ and library (debugging).
static inline void cuda_emu_close(cuda_emu_lib_t *l) {
  if (l->handle) {
    // The multi-thread shim's fiber stacks.
    void *rel = dlsym(l->handle, "iemu_release");
    if (rel) {
      void (*fn)(void);
      memcpy(&fn, &rel, sizeof(fn));
      fn();
    }
    dlclose(l->handle);
  }
  if (getenv("IRON_TEST_KEEP_EMU")) {
    fprintf(stderr, "cuda_emu: kept %s\n", l->cpp);
    memset(l, 0, sizeof(*l));
    return;
  }
  unlink(l->cpp);
  unlink(l->so);
  rmdir(l->dir);
  memset(l, 0, sizeof(*l));
}

#endif  // IRON_TESTS_CUDA_EMU_H_
