// The vector kernels of CUDA element-wise fusions (gen/fusion.c), GPU-free:
// a chain x -> f(x, s) over n elements with a scalar s broadcast into it
// (a one-element input read once before the loops), for every dtype class
// the vector widths differ by (1, 2, 4, 8 bytes; f16/bf16 computed in f32
// registers), cheap chains (16-byte vectors) and chains with
// transcendentals (vectors of 4 elements), lengths around each vector width
// (not multiples of it, below the vector kernel's minimum, 0), operand
// pointers offset by 0..3 elements (unaligned: the kernel runs everything
// through its tail loop) and several grid shapes (grid-stride steps), run
// on the CPU by the multi-thread emulation (cuda_emu.h). The reference is
// the same fusion generated one element per thread (IRON_CUDA_VECTORIZE=0):
// same scalar emitter, so every bit (NaN payloads included) must match;
// elements around the output must stay untouched. The ops' own semantics
// against the host are test_cuda_scalar_ops_emu's.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/fuse.h"
#include "cuda_emu.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_fusion.h"
#include "ir/builder.h"
#include "test.h"

enum { CHAIN_CHEAP, CHAIN_MATH, NUM_CHAINS };

static const iron_dtype_t kDtypes[] = {
    IRON_DTYPE_S8,  IRON_DTYPE_U16, IRON_DTYPE_F16, IRON_DTYPE_BF16,
    IRON_DTYPE_S32, IRON_DTYPE_F32, IRON_DTYPE_F64,
};
#define NUM_DTYPES (int)(sizeof(kDtypes) / sizeof(kDtypes[0]))
// Around 4 x the vector width of every class (the vector kernel's minimum
// length) and its multiples.
static const int64_t kLengths[] = {0,  1,  3,  7,  8,  9,  15,  16, 17,
                                   31, 32, 33, 63, 64, 65, 100, 257};
#define NUM_LENGTHS (int)(sizeof(kLengths) / sizeof(kLengths[0]))

static bool is_float(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16 ||
         dt == IRON_DTYPE_F32 || dt == IRON_DTYPE_F64;
}

typedef struct fb {
  iron_ir_module_t *m;
  iron_ir_func_t *f;
  iron_ir_block_t *b;
  const iron_ir_type_t *t;
} fb_t;

static iron_ir_value_t *op1(fb_t *p, iron_op_kind_t k, iron_ir_value_t *a) {
  return iron_ir_builder_op1(p->m, p->f, p->b, k, 1, &a, p->t);
}
static iron_ir_value_t *op2(fb_t *p, iron_op_kind_t k, iron_ir_value_t *a,
                            iron_ir_value_t *b) {
  iron_ir_value_t *in[2] = {a, b};
  return iron_ir_builder_op1(p->m, p->f, p->b, k, 2, in, p->t);
}

// main(x: [n] dt, s: [] dt): cheap: x * s + x; math (floats):
// tanh(x) * s + exp(x) - log1p(|x|) (ints: remainder(x, s) + x * s).
static iron_ir_module_t *build(iron_dtype_t dt, int chain, int64_t n) {
  fb_t p;
  p.m = iron_ir_builder_module_create("ew_vector", 1);
  p.t = iron_ir_builder_tensor_type(p.m, dt, 1, &n);
  const iron_ir_type_t *ts = iron_ir_builder_scalar_type(p.m, dt);
  const iron_ir_type_t *ins[2] = {p.t, ts};
  p.f = iron_ir_builder_func(p.m, "main", true, 2, ins, 1, &p.t);
  p.b = iron_ir_builder_func_block(p.f);
  iron_ir_value_t *x = &p.b->args[0], *s0 = &p.b->args[1];
  iron_ir_op_t *bc = iron_ir_builder_op(p.m, p.f, p.b, IRON_OP_BROADCAST_IN_DIM,
                                        1, &s0, 1, &p.t, 0);
  iron_ir_builder_attr(p.m, bc, "broadcast_dimensions",
                       iron_ir_builder_attr_i64s(p.m, 0, NULL));
  iron_ir_value_t *s = &bc->results[0], *y;
  if (chain == CHAIN_CHEAP) {
    y = op2(&p, IRON_OP_ADD, op2(&p, IRON_OP_MULTIPLY, x, s), x);
  } else if (is_float(dt)) {
    iron_ir_value_t *a = op2(&p, IRON_OP_MULTIPLY, op1(&p, IRON_OP_TANH, x), s);
    iron_ir_value_t *e = op1(&p, IRON_OP_EXPONENTIAL, x);
    iron_ir_value_t *l = op1(&p, IRON_OP_LOG_PLUS_ONE, op1(&p, IRON_OP_ABS, x));
    y = op2(&p, IRON_OP_SUBTRACT, op2(&p, IRON_OP_ADD, a, e), l);
  } else {
    y = op2(&p, IRON_OP_ADD, op2(&p, IRON_OP_REMAINDER, x, s),
            op2(&p, IRON_OP_MULTIPLY, x, s));
  }
  iron_ir_builder_return(p.m, p.f, p.b, IRON_OP_FUNC_RETURN, 1, &y);
  return p.m;
}

// The kernel of the module's one fusion, generated with the vector kernel
// allowed or not.
static bool generate(iron_ir_module_t *m, bool vectorize, char **src,
                     char **name) {
  *src = *name = NULL;
  int nf = 0;
  CHECK_OK(iron_compiler_fuse(m, iron_cuda_fusable, &nf));
  CHECK_EQ_INT(nf, 1);
  const iron_ir_block_t *b = &m->funcs[0].body.blocks[0];
  const iron_ir_op_t *fop = NULL;
  for (uint32_t k = 0; k < b->num_ops; ++k)
    if (b->ops[k]->kind == IRON_OP_FUSION) fop = b->ops[k];
  CHECK(fop != NULL);
  if (!fop) return false;
  const iron_ir_block_t *fb = &fop->regions[0].blocks[0];
  const iron_ir_op_t *term = fb->ops[fb->num_ops - 1];
  const iron_ir_value_t *inputs[2];
  CHECK_EQ_INT((int)fb->num_args, 2);
  if (fb->num_args != 2) return false;
  // The fusion's inputs in the order of main's arguments (x, s).
  for (uint32_t k = 0; k < 2; ++k) {
    const iron_ir_value_t *o = fop->operands[k];
    CHECK(o->def_op == NULL);  // main's arguments: the broadcast is fused
    inputs[o->index == 0 ? 0 : 1] = &fb->args[k];
  }
  iron_cuda_fusion_t fu = {
      .num_ops = fb->num_ops - 1,
      .ops = (const iron_ir_op_t *const *)fb->ops,
      .num_inputs = 2,
      .inputs = inputs,
      .num_outputs = 1,
      .outputs = (const iron_ir_value_t *const *)term->operands,
      .owner = fop,
  };
  setenv("IRON_CUDA_VECTORIZE", vectorize ? "1" : "0", 1);
  iron_status_t st = iron_cuda_codegen_fusion(&fu, src, name);
  unsetenv("IRON_CUDA_VECTORIZE");
  CHECK_OK(st);
  return *src && *name;
}

// Element k of the input: a hash spread over the dtype's values, with
// specials (zeros, infinities, NaNs, denormals) among them for floats.
static void fill(iron_dtype_t dt, void *data, int64_t n, uint32_t seed) {
  size_t es = iron_dtype_size(dt);
  for (int64_t k = 0; k < n; ++k) {
    uint32_t h = (uint32_t)k * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    unsigned char *e = (unsigned char *)data + k * es;
    if (dt == IRON_DTYPE_F32) {
      float v = ((float)(h % 2001) - 1000.0f) / 97.0f;
      if (h % 17 == 0) v = (h & 32) ? 1e-40f : -0.0f;
      if (h % 23 == 0) v = (h & 32) ? __builtin_inff() : __builtin_nanf("");
      memcpy(e, &v, 4);
    } else if (dt == IRON_DTYPE_F64) {
      double v = ((double)(h % 2001) - 1000.0) / 97.0;
      if (h % 17 == 0) v = (h & 32) ? 1e-310 : -0.0;
      if (h % 23 == 0) v = (h & 32) ? -__builtin_inf() : __builtin_nan("");
      memcpy(e, &v, 8);
    } else if (dt == IRON_DTYPE_BF16) {
      float v = ((float)(h % 2001) - 1000.0f) / 97.0f;
      uint32_t u;
      memcpy(&u, &v, 4);
      uint16_t b = (uint16_t)(u >> 16);
      if (h % 17 == 0) b = (h & 32) ? 0x0003 : 0x8000;  // denormal, -0
      if (h % 23 == 0) b = (h & 32) ? 0x7f80 : 0x7fc1;  // inf, NaN
      memcpy(e, &b, 2);
    } else if (dt == IRON_DTYPE_F16) {
      uint16_t b = (uint16_t)(0x3c00u + (h % 0x1000u) - 0x800u);
      if (h & 1) b |= 0x8000;
      if (h % 17 == 0) b = (h & 32) ? 0x0003 : 0x8000;
      if (h % 23 == 0) b = (h & 32) ? 0xfc00 : 0x7e01;
      memcpy(e, &b, 2);
    } else {
      memcpy(e, &h, es);                  // the low bytes (little-endian)
      if (h % 11 == 0) memset(e, 0, es);  // remainder by zero
    }
  }
}

enum { GUARD = 8, MAX_OFF = 3 };

static void test_vector_kernels(void) {
  CHECK(cuda_emu_have_cxx());
  if (!cuda_emu_have_cxx()) return;
  // Every case's two kernels, compiled as one library.
  typedef struct kcase {
    iron_dtype_t dt;
    int chain;
    int64_t n;
    char *src[2], *name[2];  // [0]: one element per thread, [1]: default
  } kcase_t;
  kcase_t cases[NUM_DTYPES * NUM_CHAINS * NUM_LENGTHS];
  int nc = 0, vec_kernels = 0;
  const char *srcs[2 * NUM_DTYPES * NUM_CHAINS * NUM_LENGTHS];
  int ns = 0;
  for (int d = 0; d < NUM_DTYPES; ++d)
    for (int c = 0; c < NUM_CHAINS; ++c)
      for (int l = 0; l < NUM_LENGTHS; ++l) {
        kcase_t *kc = &cases[nc];
        memset(kc, 0, sizeof(*kc));
        kc->dt = kDtypes[d];
        kc->chain = c;
        kc->n = kLengths[l];
        bool ok = true;
        for (int v = 0; v < 2 && ok; ++v) {
          iron_ir_module_t *m = build(kc->dt, c, kc->n);
          ok = generate(m, v == 1, &kc->src[v], &kc->name[v]);
          iron_ir_module_destroy(m);
        }
        if (!ok) continue;
        // The length where the vector kernel must be generated: 4 vectors
        // (16 bytes, at most 8 elements; 4 elements with transcendentals).
        size_t es = iron_dtype_size(kc->dt);
        int64_t vw = (int64_t)(16 / es) > 8 ? 8 : (int64_t)(16 / es);
        if (c == CHAIN_MATH && vw > 4) vw = 4;
        bool has_vec = strstr(kc->src[1], "iron_vec<") != NULL;
        if (kc->n >= 4 * vw && !has_vec)
          fprintf(stderr, "no vector kernel: %s chain %d n=%lld\n",
                  iron_dtype_name(kc->dt), c, (long long)kc->n);
        CHECK(has_vec == (kc->n >= 4 * vw));
        vec_kernels += has_vec;
        if (getenv("IRON_TEST_VERBOSE") && has_vec && kc->n == 64)
          fputs(strstr(kc->src[1], "static __device__"), stderr);
        srcs[ns++] = kc->src[0];
        srcs[ns++] = kc->src[1];
        nc++;
      }
  cuda_emu_lib_t lib;
  bool built = cuda_emu_build_mt(srcs, ns, NULL, &lib);
  CHECK(built);
  int runs = 0, bad_cases = 0;
  static const unsigned kGrids[][2] = {{1, 1}, {2, 3}, {3, 32}};
  for (int i = 0; i < nc && built; ++i) {
    kcase_t *kc = &cases[i];
    size_t es = iron_dtype_size(kc->dt);
    size_t cap = (size_t)(kc->n + 2 * GUARD + MAX_OFF) * es;
    unsigned char *x = malloc(cap), *s = malloc(es), *out[2];
    out[0] = malloc(cap);
    out[1] = malloc(cap);
    fill(kc->dt, x, kc->n + 2 * GUARD + MAX_OFF, 7u + (uint32_t)i);
    fill(kc->dt, s, 1, 99u + (uint32_t)i);
    int bad = 0;
    for (int xo = 0; xo <= MAX_OFF; ++xo)
      for (int oo = 0; oo <= MAX_OFF; oo += 1 + (xo & 1))
        for (int g = 0; g < 3; ++g) {
          for (int v = 0; v < 2; ++v) {
            memset(out[v], 0xa5, cap);
            void *px = x + (GUARD + xo) * es, *ps = s;
            void *po = out[v] + (GUARD + oo) * es;
            void *args[3] = {&px, &ps, &po};
            int r = cuda_emu_launch(&lib, kc->name[v], kGrids[g][0],
                                    kGrids[g][1], args);
            CHECK_EQ_INT(r, 0);
          }
          runs++;
          if (memcmp(out[0], out[1], cap) != 0) {
            if (!bad)
              fprintf(stderr,
                      "%s chain %d n=%lld offsets x+%d out+%d grid %ux%u: "
                      "vector kernel differs\n",
                      iron_dtype_name(kc->dt), kc->chain, (long long)kc->n, xo,
                      oo, kGrids[g][0], kGrids[g][1]);
            bad++;
          }
          // The guards: nothing written outside the output.
          for (size_t b = 0; b < (size_t)(GUARD + oo) * es; ++b)
            if (out[1][b] != 0xa5) bad++;
          for (size_t b = (size_t)(GUARD + oo + kc->n) * es; b < cap; ++b)
            if (out[1][b] != 0xa5) bad++;
        }
    bad_cases += bad != 0;
    free(x);
    free(s);
    free(out[0]);
    free(out[1]);
  }
  fprintf(stderr,
          "vector kernels: %d cases (%d vectorized), %d runs, %d "
          "cases differ\n",
          nc, vec_kernels, runs, bad_cases);
  CHECK_EQ_INT(bad_cases, 0);
  CHECK(vec_kernels > 0);
  CHECK_EQ_INT(nc, NUM_DTYPES * NUM_CHAINS * NUM_LENGTHS);
  if (built) cuda_emu_close(&lib);
  for (int i = 0; i < nc; ++i)
    for (int v = 0; v < 2; ++v) {
      free(cases[i].src[v]);
      free(cases[i].name[v]);
    }
}

static const iron_test_case_t kTests[] = {
    {"vector_kernels", test_vector_kernels},
};
IRON_TEST_MAIN(kTests)
