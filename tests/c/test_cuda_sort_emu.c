// The CUDA sort (src/device/cuda/cuda_sort_program.c), GPU-free: for a
// sweep of sorts (lengths 1..40, around the 2048-element tiles, the merge
// widths and the radix chunks, 16384 +- 1, 10^5, a few 10^6; every key
// dtype with NaN/-0/inf/denormals and many ties; 1..3 operands; ascending
// and descending; jax's comparators, lexicographic keys, a FLOAT compare
// and a custom comparator on absolute values; rows of a rank-3 tensor
// along each dim), the program's launches run on the CPU through
// cuda_emu.h's multi-thread emulation and every result must equal the host
// device's sort bit for bit (the host runs the same module through the
// runtime). Every distinct generated source is also compiled by NVRTC for
// sm_90a with the device's options.
//
// IRON_TEST_SORT_LONG=1 adds the larger cases (several 10^6-element sorts
// per dtype class); IRON_TEST_SORT_FILTER=text runs only cases whose label
// contains it; IRON_TEST_DUMP=path writes each distinct source to
// path.<i>.cu; IRON_TEST_VERBOSE=1 prints each case's algorithm and times.
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/half.h"
#include "cuda_emu.h"
#include "cuda_test_nvrtc.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_sort_program.h"
#include "iron/iron.h"
#include "ir/builder.h"
#include "runtime/executable.h"
#include "test.h"

typedef enum cmp_kind {
  CMP_JAX,    // jax's lexicographic comparator (canonicalised floats)
  CMP_FLOAT,  // LT with compare_type FLOAT on operand 0 (no canon)
  CMP_ABS,    // LT of abs values (TOTALORDER / SIGNED): not recognized
} cmp_kind_t;

typedef enum data_kind {
  DATA_SPECIAL,  // random, NaNs (both signs, payloads), +-0, inf, denormals
  DATA_TIES,     // three distinct values (stability)
  DATA_PLAIN,    // no NaN, no denormals
} data_kind_t;

#define MAX_OPS 4

typedef struct sort_case {
  char label[96];
  int num;
  iron_dtype_t dt[MAX_OPS];
  int rank;
  int64_t dims[3];
  int dim;
  cmp_kind_t cmp;
  int num_keys;
  bool desc;
  bool iota1;  // operand 1 holds positions along dim (argsort's payload)
  bool iota_arg;  // ... passed as an argument (else a stablehlo.iota)
  data_kind_t data;
  iron_cuda_sort_options_t opt;
  iron_cuda_sort_algorithm_t want;
  iron_ir_module_t *m;
  iron_cuda_sort_program_t *prog;
} sort_case_t;

#define MAX_CASES 400
static sort_case_t g_cases[MAX_CASES];
static int g_ncases;
static bool g_long;

// --- the program under test -------------------------------------------------

static const iron_ir_type_t *scalar(iron_ir_module_t *m, iron_dtype_t dt) {
  return iron_ir_builder_scalar_type(m, dt);
}

static iron_ir_value_t *cmp_op(iron_ir_module_t *m, iron_ir_func_t *f,
                               iron_ir_block_t *b, int dir, int ctype,
                               iron_ir_value_t *x, iron_ir_value_t *y) {
  iron_ir_value_t *in[2] = {x, y};
  const iron_ir_type_t *pt = scalar(m, IRON_DTYPE_PRED);
  iron_ir_op_t *op = iron_ir_builder_op(m, f, b, IRON_OP_COMPARE, 2, in, 1,
                                        &pt, 0);
  iron_ir_builder_attr(
      m, op, "comparison_direction",
      iron_ir_builder_attr_enum(m, IRON_ENUM_COMPARISON_DIRECTION, dir));
  iron_ir_builder_attr(
      m, op, "compare_type",
      iron_ir_builder_attr_enum(m, IRON_ENUM_COMPARISON_TYPE, ctype));
  return &op->results[0];
}

static iron_ir_value_t *binop(iron_ir_module_t *m, iron_ir_func_t *f,
                              iron_ir_block_t *b, iron_op_kind_t k,
                              iron_ir_value_t *x, iron_ir_value_t *y) {
  iron_ir_value_t *in[2] = {x, y};
  return iron_ir_builder_op1(m, f, b, k, 2, in, x->type);
}

static uint64_t nan_bits(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_F16: return 0x7e00;
    case IRON_DTYPE_BF16: return 0x7fc0;
    case IRON_DTYPE_F32: return 0x7fc00000u;
    default: return 0x7ff8000000000000ull;
  }
}

// jax's _canonicalize_float_for_sort: select(x != x, NaN, select(x == 0,
// 0, x)).
static iron_ir_value_t *canon(iron_ir_module_t *m, iron_ir_func_t *f,
                              iron_ir_block_t *b, iron_ir_value_t *x) {
  iron_dtype_t dt = x->type->dtype;
  uint64_t zero = 0, nan = nan_bits(dt);
  size_t es = iron_dtype_size(dt);
  iron_ir_value_t *z = iron_ir_builder_constant(m, f, b, x->type, &zero, es,
                                                true);
  iron_ir_value_t *e = cmp_op(m, f, b, IRON_CMP_EQ, IRON_CMP_TYPE_FLOAT, x, z);
  iron_ir_value_t *z2 = iron_ir_builder_constant(m, f, b, x->type, &zero, es,
                                                 true);
  iron_ir_value_t *s0in[3] = {e, z2, x};
  iron_ir_value_t *s0 = iron_ir_builder_op1(m, f, b, IRON_OP_SELECT, 3, s0in,
                                            x->type);
  iron_ir_value_t *ne = cmp_op(m, f, b, IRON_CMP_NE, IRON_CMP_TYPE_FLOAT, x, x);
  iron_ir_value_t *qn = iron_ir_builder_constant(m, f, b, x->type, &nan, es,
                                                 true);
  iron_ir_value_t *s1in[3] = {ne, qn, s0};
  return iron_ir_builder_op1(m, f, b, IRON_OP_SELECT, 3, s1in, x->type);
}

static int ctype_of(iron_dtype_t dt) {
  switch (iron_dtype_class(dt)) {
    case IRON_DTYPE_CLASS_FLOAT: return IRON_CMP_TYPE_TOTALORDER;
    case IRON_DTYPE_CLASS_SINT: return IRON_CMP_TYPE_SIGNED;
    default: return IRON_CMP_TYPE_UNSIGNED;
  }
}

// main(x0, ..) -> sort(x0, ..) along c->dim with c's comparator.
static bool iota_op(const sort_case_t *c, int i) {
  return i == 1 && c->iota1 && !c->iota_arg;
}

static iron_ir_module_t *build_module(const sort_case_t *c,
                                      const iron_ir_op_t **out_sort) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_sort", 1);
  const iron_ir_type_t *ts[MAX_OPS], *args[MAX_OPS];
  uint32_t nargs = 0;
  for (int i = 0; i < c->num; ++i) {
    ts[i] = iron_ir_builder_tensor_type(m, c->dt[i], c->rank, c->dims);
    if (!iota_op(c, i)) args[nargs++] = ts[i];
  }
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, nargs, args,
                                           (uint32_t)c->num, ts);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  iron_ir_value_t *in[MAX_OPS];
  for (int i = 0, a = 0; i < c->num; ++i) {
    if (!iota_op(c, i)) {
      in[i] = &b->args[a++];
      continue;
    }
    // jnp.argsort's payload: iota along the sorted dim.
    iron_ir_op_t *io = iron_ir_builder_op(m, f, b, IRON_OP_IOTA, 0, NULL, 1,
                                          &ts[i], 0);
    int64_t d = c->dim;
    iron_ir_builder_attr(m, io, "iota_dimension",
                         iron_ir_builder_attr_i64s(m, 1, &d));
    in[i] = &io->results[0];
  }
  iron_ir_op_t *s = iron_ir_builder_op(m, f, b, IRON_OP_SORT,
                                       (uint32_t)c->num, in, (uint32_t)c->num,
                                       ts, 1);
  iron_ir_builder_attr(m, s, "dimension", iron_ir_builder_attr_int(m, c->dim));
  iron_ir_builder_attr(m, s, "is_stable", iron_ir_builder_attr_bool(m, true));
  iron_ir_block_t *rb = iron_ir_builder_region_block(s, 0);
  iron_ir_value_t *a[2 * MAX_OPS];
  for (int i = 0; i < 2 * c->num; ++i)
    a[i] = iron_ir_builder_block_arg(m, f, rb, scalar(m, c->dt[i / 2]));
  iron_ir_value_t *res = NULL;
  if (c->cmp == CMP_JAX) {
    iron_ir_value_t *lt[MAX_OPS] = {NULL}, *eq[MAX_OPS] = {NULL};
    for (int k = 0; k < c->num_keys; ++k) {
      iron_ir_value_t *x = a[2 * k], *y = a[2 * k + 1];
      iron_dtype_t dt = c->dt[k];
      if (iron_dtype_class(dt) == IRON_DTYPE_CLASS_FLOAT) {
        x = canon(m, f, rb, x);
        y = canon(m, f, rb, y);
      }
      lt[k] = cmp_op(m, f, rb, c->desc ? IRON_CMP_GT : IRON_CMP_LT,
                     ctype_of(dt), x, y);
      eq[k] = cmp_op(m, f, rb, IRON_CMP_EQ, ctype_of(dt), x, y);
    }
    res = lt[c->num_keys - 1];
    for (int k = c->num_keys - 2; k >= 0; --k)
      res = binop(m, f, rb, IRON_OP_OR, lt[k],
                  binop(m, f, rb, IRON_OP_AND, eq[k], res));
  } else if (c->cmp == CMP_FLOAT) {
    res = cmp_op(m, f, rb, c->desc ? IRON_CMP_GT : IRON_CMP_LT,
                 IRON_CMP_TYPE_FLOAT, a[0], a[1]);
  } else {
    iron_ir_value_t *x = iron_ir_builder_op1(m, f, rb, IRON_OP_ABS, 1, &a[0],
                                             a[0]->type);
    iron_ir_value_t *y = iron_ir_builder_op1(m, f, rb, IRON_OP_ABS, 1, &a[1],
                                             a[1]->type);
    res = cmp_op(m, f, rb, c->desc ? IRON_CMP_GT : IRON_CMP_LT,
                 ctype_of(c->dt[0]), x, y);
  }
  iron_ir_builder_return(m, f, rb, IRON_OP_RETURN, 1, &res);
  iron_ir_value_t *outs[MAX_OPS];
  for (int i = 0; i < c->num; ++i) outs[i] = &s->results[i];
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, (uint32_t)c->num, outs);
  *out_sort = s;
  return m;
}

// --- cases ----------------------------------------------------------------------

static iron_cuda_sort_options_t opts(int64_t block_max, bool radix,
                                     bool generic) {
  iron_cuda_sort_options_t o;
  memset(&o, 0, sizeof(o));
  o.block_max = block_max;
  o.radix = radix;
  o.generic = generic;
  o.daz = true;  // the default (IRON_CUDA_DENORMALS unset), as the host's
  return o;
}

static sort_case_t *add_case(const char *label, int num,
                             const iron_dtype_t *dt, int rank,
                             const int64_t *dims, int dim, cmp_kind_t cmp,
                             int num_keys, bool desc, bool iota1,
                             data_kind_t data, iron_cuda_sort_options_t o,
                             iron_cuda_sort_algorithm_t want) {
  const char *filter = getenv("IRON_TEST_SORT_FILTER");
  if (g_ncases == MAX_CASES) {
    fprintf(stderr, "too many sort cases\n");
    return NULL;
  }
  sort_case_t *c = &g_cases[g_ncases];
  memset(c, 0, sizeof(*c));
  int at = snprintf(c->label, sizeof(c->label), "%s", label);
  for (int i = 0; i < num && at < (int)sizeof(c->label) - 8; ++i)
    at += snprintf(c->label + at, sizeof(c->label) - (size_t)at, "%s%s",
                   i ? "," : " ", iron_dtype_name(dt[i]));
  at += snprintf(c->label + at, sizeof(c->label) - (size_t)at, " [");
  for (int d = 0; d < rank && at < (int)sizeof(c->label) - 8; ++d)
    at += snprintf(c->label + at, sizeof(c->label) - (size_t)at, "%s%lld",
                   d ? "x" : "", (long long)dims[d]);
  snprintf(c->label + at, sizeof(c->label) - (size_t)at, "]/%d%s", dim,
           desc ? " desc" : "");
  if (filter && !strstr(c->label, filter)) return NULL;
  c->num = num;
  for (int i = 0; i < num; ++i) c->dt[i] = dt[i];
  c->rank = rank;
  for (int d = 0; d < rank; ++d) c->dims[d] = dims[d];
  c->dim = dim;
  c->cmp = cmp;
  c->num_keys = num_keys;
  c->desc = desc;
  c->iota1 = iota1;
  c->data = data;
  c->opt = o;
  c->want = want;
  g_ncases++;
  return c;
}

// 1-D sort of n elements.
static sort_case_t *add1(const char *label, int64_t n, int num,
                         const iron_dtype_t *dt, cmp_kind_t cmp, int keys,
                         bool desc, bool iota1, data_kind_t data,
                         iron_cuda_sort_options_t o,
                         iron_cuda_sort_algorithm_t want) {
  int64_t d[1] = {n};
  return add_case(label, num, dt, 1, d, 0, cmp, keys, desc, iota1, data, o,
                  want);
}

static const iron_dtype_t kF32[1] = {IRON_DTYPE_F32};
static const iron_dtype_t kArgF32[2] = {IRON_DTYPE_F32, IRON_DTYPE_S32};

static void add_cases(void) {
  iron_cuda_sort_options_t dflt = opts(IRON_CUDA_SORT_MAX_ROW, true, false);
  iron_cuda_sort_options_t wide = opts(0, true, false);
  iron_cuda_sort_options_t merge = opts(0, false, false);
  iron_cuda_sort_options_t generic = opts(0, true, true);
  // Lengths 1..40 on every path.
  for (int64_t n = 1; n <= 40; ++n) {
    add1("len", n, 2, kArgF32, CMP_JAX, 1, n % 3 == 0, true, DATA_SPECIAL,
         dflt, IRON_CUDA_SORT_BLOCK);
    add1("len-radix", n, 2, kArgF32, CMP_JAX, 1, n % 3 == 0, true,
         DATA_SPECIAL, wide, IRON_CUDA_SORT_RADIX);
    if (n % 4 == 1 || n < 4)
      add1("len-merge", n, 2, kArgF32, CMP_JAX, 1, n % 2 == 0, true,
           DATA_SPECIAL, merge, IRON_CUDA_SORT_MERGE);
  }
  // Around the tiles (2048), the merge widths and the one-block limit.
  static const int64_t kEdges[] = {255,  256,  257,  2047, 2048,  2049,
                                   4095, 4096, 4097, 6143, 8193,  12289,
                                   16383, 16384, 16385, 20481, 32769};
  for (size_t i = 0; i < sizeof(kEdges) / sizeof(kEdges[0]); ++i) {
    int64_t n = kEdges[i];
    add1("edge", n, 2, kArgF32, CMP_JAX, 1, i % 2, true, DATA_SPECIAL, dflt,
         0);
    add1("edge-radix", n, 1, kF32, CMP_JAX, 1, i % 2 == 0, false,
         DATA_SPECIAL, wide, IRON_CUDA_SORT_RADIX);
    add1("edge-merge", n, 2, kArgF32, CMP_JAX, 1, i % 2, true, DATA_TIES,
         merge, IRON_CUDA_SORT_MERGE);
  }
  // Every key dtype on the radix path (10^5 elements), ascending and
  // descending, with an iota payload and a third operand.
  static const iron_dtype_t kKeys[] = {
      IRON_DTYPE_F32, IRON_DTYPE_F16, IRON_DTYPE_BF16, IRON_DTYPE_F64,
      IRON_DTYPE_S8,  IRON_DTYPE_S16, IRON_DTYPE_S32,  IRON_DTYPE_S64,
      IRON_DTYPE_U8,  IRON_DTYPE_U16, IRON_DTYPE_U32,  IRON_DTYPE_U64,
      IRON_DTYPE_PRED};
  for (size_t i = 0; i < sizeof(kKeys) / sizeof(kKeys[0]); ++i) {
    iron_dtype_t one[1] = {kKeys[i]};
    iron_dtype_t three[3] = {kKeys[i], IRON_DTYPE_S32, IRON_DTYPE_F64};
    add1("dtype", 100000, 1, one, CMP_JAX, 1, false, false, DATA_SPECIAL,
         dflt, IRON_CUDA_SORT_RADIX);
    add1("dtype-argsort", 100000, 3, three, CMP_JAX, 1, true, true,
         DATA_SPECIAL, dflt, IRON_CUDA_SORT_RADIX);
    sort_case_t *t = add1("dtype-ties", 20000, 2, three, CMP_JAX, 1, i % 2,
                          true, DATA_TIES, dflt, IRON_CUDA_SORT_RADIX);
    if (t) t->iota_arg = true;  // positions as data: gathered
    // The same on the merge path (the keys' comparator, not radix).
    add1("dtype-merge", 30000, 2, three, CMP_JAX, 1, i % 2 == 0, true,
         DATA_SPECIAL, merge, IRON_CUDA_SORT_MERGE);
    // And the one-block path.
    add1("dtype-block", 3000, 2, three, CMP_JAX, 1, i % 2 == 1, true,
         DATA_SPECIAL, dflt, IRON_CUDA_SORT_BLOCK);
  }
  // Lexicographic keys (jnp.lexsort / lax.sort num_keys=2,3).
  {
    iron_dtype_t k2[3] = {IRON_DTYPE_S16, IRON_DTYPE_F32, IRON_DTYPE_S32};
    add1("lex2", 50000, 3, k2, CMP_JAX, 2, false, false, DATA_TIES, dflt,
         IRON_CUDA_SORT_RADIX);
    add1("lex2", 50000, 3, k2, CMP_JAX, 2, true, false, DATA_SPECIAL, merge,
         IRON_CUDA_SORT_MERGE);
    iron_dtype_t k3[3] = {IRON_DTYPE_U8, IRON_DTYPE_BF16, IRON_DTYPE_F64};
    add1("lex3", 40000, 3, k3, CMP_JAX, 3, false, false, DATA_TIES, dflt,
         IRON_CUDA_SORT_RADIX);
    add1("lex3-block", 999, 3, k3, CMP_JAX, 3, true, false, DATA_TIES, dflt,
         IRON_CUDA_SORT_BLOCK);
  }
  // The comparator region (not the recognized keys): jax's comparator with
  // IRON_SORT_GENERIC, a FLOAT compare (keys, but not integer-ordered) and
  // a custom comparator on absolute values.
  add1("generic", 70000, 2, kArgF32, CMP_JAX, 1, false, true, DATA_SPECIAL,
       generic, IRON_CUDA_SORT_MERGE);
  add1("generic-block", 5000, 2, kArgF32, CMP_JAX, 1, true, true,
       DATA_SPECIAL, opts(IRON_CUDA_SORT_MAX_ROW, true, true),
       IRON_CUDA_SORT_BLOCK);
  {
    iron_dtype_t f64[2] = {IRON_DTYPE_F64, IRON_DTYPE_S32};
    add1("float-cmp", 60000, 2, kArgF32, CMP_FLOAT, 1, false, true,
         DATA_PLAIN, dflt, IRON_CUDA_SORT_MERGE);
    add1("float-cmp", 20000, 2, f64, CMP_FLOAT, 1, true, true, DATA_PLAIN,
         dflt, IRON_CUDA_SORT_MERGE);
    iron_dtype_t bf[2] = {IRON_DTYPE_BF16, IRON_DTYPE_S32};
    add1("float-cmp", 20000, 2, bf, CMP_FLOAT, 1, false, true, DATA_PLAIN,
         dflt, IRON_CUDA_SORT_MERGE);
    add1("abs", 50000, 2, kArgF32, CMP_ABS, 1, false, true, DATA_PLAIN, dflt,
         IRON_CUDA_SORT_MERGE);
    iron_dtype_t s32[2] = {IRON_DTYPE_S32, IRON_DTYPE_U8};
    add1("abs", 50000, 2, s32, CMP_ABS, 1, true, false, DATA_TIES, dflt,
         IRON_CUDA_SORT_MERGE);
    add1("abs-block", 10000, 2, s32, CMP_ABS, 1, false, false, DATA_SPECIAL,
         dflt, IRON_CUDA_SORT_BLOCK);
  }
  // Rows: many rows, the sorted dim first / middle / last.
  {
    int64_t d3[3] = {3, 20000, 2};
    add_case("rows", 2, kArgF32, 3, d3, 1, CMP_JAX, 1, false, true,
             DATA_SPECIAL, dflt, IRON_CUDA_SORT_RADIX);
    add_case("rows", 2, kArgF32, 3, d3, 1, CMP_JAX, 1, true, true,
             DATA_SPECIAL, merge, IRON_CUDA_SORT_MERGE);
    int64_t d0[2] = {17000, 3};
    add_case("rows", 1, kF32, 2, d0, 0, CMP_JAX, 1, true, false, DATA_SPECIAL,
             dflt, IRON_CUDA_SORT_RADIX);
    add_case("rows", 2, kArgF32, 2, d0, 0, CMP_JAX, 1, false, true,
             DATA_TIES, merge, IRON_CUDA_SORT_MERGE);
    int64_t dl[2] = {37, 5000};
    add_case("rows", 2, kArgF32, 2, dl, 1, CMP_JAX, 1, false, true,
             DATA_SPECIAL, wide, IRON_CUDA_SORT_RADIX);
    add_case("rows", 2, kArgF32, 2, dl, 1, CMP_JAX, 1, true, true,
             DATA_SPECIAL, dflt, IRON_CUDA_SORT_BLOCK);
    int64_t dm[3] = {5, 7, 300};
    add_case("rows", 2, kArgF32, 3, dm, 1, CMP_JAX, 1, false, true,
             DATA_TIES, wide, IRON_CUDA_SORT_RADIX);
    add_case("rows", 2, kArgF32, 3, dm, 0, CMP_JAX, 1, true, true,
             DATA_TIES, merge, IRON_CUDA_SORT_MERGE);
    // A chunk of several tiles per row (rows x tiles >= 2048).
    int64_t dc[2] = {1024, 2049};
    add_case("chunks", 2, kArgF32, 2, dc, 1, CMP_JAX, 1, false, true,
             DATA_SPECIAL, wide, IRON_CUDA_SORT_RADIX);
    // Rank 0 and empty.
    add_case("scalar", 2, kArgF32, 0, NULL, 0, CMP_JAX, 1, false, false,
             DATA_SPECIAL, dflt, IRON_CUDA_SORT_BLOCK);
    int64_t de[2] = {0, 30000};
    add_case("empty", 1, kF32, 2, de, 1, CMP_JAX, 1, false, false,
             DATA_SPECIAL, dflt, IRON_CUDA_SORT_NONE);
  }
  // Millions: one row with chunks of several tiles (radix), a long merge.
  add1("big", 5000000, 2, kArgF32, CMP_JAX, 1, false, true, DATA_SPECIAL,
       dflt, IRON_CUDA_SORT_RADIX);
  add1("big", 1000000, 2, kArgF32, CMP_JAX, 1, true, true, DATA_SPECIAL,
       merge, IRON_CUDA_SORT_MERGE);
  if (g_long) {
    iron_dtype_t f64[1] = {IRON_DTYPE_F64};
    iron_dtype_t s64[2] = {IRON_DTYPE_S64, IRON_DTYPE_U32};
    add1("big", 2000000, 1, f64, CMP_JAX, 1, true, false, DATA_SPECIAL, dflt,
         IRON_CUDA_SORT_RADIX);
    add1("big", 3000000, 2, s64, CMP_JAX, 2, false, false, DATA_TIES, dflt,
         IRON_CUDA_SORT_RADIX);
    add1("big", 2000000, 2, kArgF32, CMP_ABS, 1, false, true, DATA_PLAIN,
         dflt, IRON_CUDA_SORT_MERGE);
    add1("big-generic", 1000000, 2, kArgF32, CMP_JAX, 1, false, true,
         DATA_SPECIAL, generic, IRON_CUDA_SORT_MERGE);
  }
}

// --- data ---------------------------------------------------------------------------

static uint64_t g_rng = 0x243f6a8885a308d3ull;
static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

typedef struct fl {
  int bits, exp_bits;
} fl_t;

static fl_t fl_of(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_F16: return (fl_t){16, 5};
    case IRON_DTYPE_BF16: return (fl_t){16, 8};
    case IRON_DTYPE_F32: return (fl_t){32, 8};
    default: return (fl_t){64, 11};
  }
}

// A float's bits: sign, exponent (all ones: inf/NaN; zero: +-0 and
// denormals), mantissa.
static uint64_t fbits(fl_t f, int sign, uint64_t e, uint64_t man) {
  int mb = f.bits - 1 - f.exp_bits;
  return ((uint64_t)sign << (f.bits - 1)) | (e << mb) |
         (man & ((1ull << mb) - 1));
}

static uint64_t float_value(iron_dtype_t dt, data_kind_t kind,
                            const uint64_t *pool) {
  fl_t f = fl_of(dt);
  uint64_t emax = (1ull << f.exp_bits) - 1;
  int mb = f.bits - 1 - f.exp_bits;
  uint64_t r = rnd();
  if (kind == DATA_TIES) return pool[r % 3];
  unsigned pick = (unsigned)(r >> 40) % 100;
  int sign = (int)(r >> 63);
  if (pick < 12) {
    switch ((r >> 32) % (kind == DATA_PLAIN ? 3 : 8)) {
      case 0: return fbits(f, sign, 0, 0);           // +-0
      case 1: return fbits(f, sign, emax, 0);        // +-inf
      case 2: return pool[(r >> 8) % 8];              // a repeated value
      case 3: return fbits(f, sign, emax, 1ull << (mb - 1));  // qNaN
      case 4: return fbits(f, sign, emax, 1 + (r & 0xff));    // payloads
      case 5: return fbits(f, sign, 0, 1);           // smallest denormal
      case 6: return fbits(f, sign, 0, r >> 3);      // denormals
      default: return fbits(f, 0, emax, 1ull << (mb - 1));
    }
  }
  if (pick < 35) return pool[(r >> 8) % 8];
  // Exponents around 1 (many close values) and the whole range.
  uint64_t e = pick < 70 ? (emax / 2 - 4 + (r >> 20) % 8) : 1 + (r >> 20) % (emax - 1);
  return fbits(f, sign, e, r >> 5);
}

static void fill(iron_dtype_t dt, data_kind_t kind, int64_t count,
                 unsigned char *out) {
  size_t es = iron_dtype_size(dt);
  uint64_t pool[8];
  bool fl = iron_dtype_class(dt) == IRON_DTYPE_CLASS_FLOAT;
  for (int i = 0; i < 8; ++i) {
    if (fl) {
      fl_t f = fl_of(dt);
      uint64_t emax = (1ull << f.exp_bits) - 1;
      pool[i] = fbits(f, (int)(rnd() & 1), emax / 2 + rnd() % 3, rnd() >> 7);
      if (i == 7 && kind != DATA_PLAIN)  // a negative zero among the ties
        pool[i] = fbits(f, 1, 0, 0);
      if (i == 6) pool[i] = fbits(f, 0, 0, 0);
    } else {
      pool[i] = rnd();
    }
  }
  for (int64_t k = 0; k < count; ++k) {
    uint64_t v;
    if (dt == IRON_DTYPE_PRED) {
      v = rnd() & 1;
    } else if (fl) {
      v = float_value(dt, kind, pool);
    } else if (kind == DATA_TIES || rnd() % 3 == 0) {
      v = pool[rnd() % (kind == DATA_TIES ? 3 : 8)];
      if (rnd() % 5 == 0) v = rnd() % 4;  // small values and zero
    } else {
      v = rnd();
    }
    memcpy(out + (size_t)k * es, &v, es);
  }
}

// Positions along dim (jax's argsort payload).
static void fill_iota(const sort_case_t *c, unsigned char *out, int64_t count) {
  int64_t inner = 1;
  for (int d = c->dim + 1; d < c->rank; ++d) inner *= c->dims[d];
  int64_t n = c->rank ? c->dims[c->dim] : 1;
  size_t es = iron_dtype_size(c->dt[1]);
  for (int64_t k = 0; k < count; ++k) {
    int64_t v = (k / inner) % n;
    memcpy(out + (size_t)k * es, &v, es);
  }
}

// --- running --------------------------------------------------------------------------

static iron_runtime_t *g_rt;

static bool run_host(sort_case_t *c, unsigned char *const *in,
                     unsigned char **out, size_t *bytes) {
  iron_executable_t *exe = NULL;
  iron_status_t st =
      iron_executable_compile_module(g_rt, c->m, NULL, 0, NULL, &exe);
  c->m = NULL;  // owned by the executable (or destroyed) now
  if (st) {
    fprintf(stderr, "%s: host compile: %s\n", c->label,
            iron_status_message(st));
    iron_status_free(st);
    return false;
  }
  iron_device_t *dev = iron_runtime_device(g_rt, 0);
  iron_buffer_t *args[MAX_OPS] = {NULL}, *res[MAX_OPS] = {NULL};
  bool ok = true;
  uint32_t nargs = 0;
  for (int i = 0; i < c->num && ok; ++i) {
    if (iota_op(c, i)) continue;
    st = iron_buffer_create_from_host(dev, c->dt[i], c->rank, c->dims, in[i],
                                      NULL, &args[nargs++]);
    ok = st == IRON_OK;
  }
  iron_event_t *done = NULL;
  if (ok) {
    st = iron_executable_execute(exe, args, nargs, NULL, res, &done);
    ok = st == IRON_OK;
  }
  if (ok) {
    st = iron_event_wait(done);
    ok = st == IRON_OK;
  }
  for (int i = 0; i < c->num && ok; ++i) {
    iron_event_t *ev = NULL;
    st = iron_buffer_to_host(res[i], out[i], bytes[i], &ev);
    if (!st) st = iron_event_wait(ev);
    iron_event_release(ev);
    ok = st == IRON_OK;
  }
  if (!ok) {
    fprintf(stderr, "%s: host run: %s\n", c->label, iron_status_message(st));
    iron_status_free(st);
  }
  if (done) iron_event_release(done);
  for (int i = 0; i < c->num; ++i) {
    if (args[i]) iron_buffer_release(args[i]);
    if (res[i]) iron_buffer_release(res[i]);
  }
  iron_executable_release(exe);
  return ok;
}

static bool run_emu(const cuda_emu_lib_t *lib, const sort_case_t *c,
                    unsigned char *const *in, unsigned char **out) {
  const iron_cuda_sort_program_t *p = c->prog;
  unsigned char *scratch = NULL;
  if (p->scratch_bytes) {
    scratch = malloc(p->scratch_bytes);
    if (!scratch) return false;
    memset(scratch, 0xa5, p->scratch_bytes);  // no zeroed memory assumed
  }
  bool ok = true;
  for (uint32_t l = 0; l < p->num_launches && ok; ++l) {
    const iron_cuda_sort_launch_t *ln = &p->launches[l];
    union {
      void *ptr;
      long long i64;
    } vals[2 * IRON_CUDA_SORT_MAX_OPERANDS + 8];
    void *args[2 * IRON_CUDA_SORT_MAX_OPERANDS + 8];
    for (uint32_t a = 0; a < ln->num_args; ++a) {
      const iron_cuda_sort_arg_t *ar = &p->args[ln->first_arg + a];
      switch (ar->kind) {
        case IRON_CUDA_SORT_ARG_INPUT: vals[a].ptr = in[ar->index]; break;
        case IRON_CUDA_SORT_ARG_OUTPUT: vals[a].ptr = out[ar->index]; break;
        case IRON_CUDA_SORT_ARG_SCRATCH:
          vals[a].ptr = scratch + ar->value;
          break;
        default: vals[a].i64 = ar->value; break;
      }
      args[a] = &vals[a];
    }
    ok = cuda_emu_launch(lib, p->kernels[ln->kernel], ln->grid, ln->block,
                         args) == 0;
  }
  free(scratch);
  return ok;
}

static int64_t count_of(const sort_case_t *c) {
  int64_t n = 1;
  for (int d = 0; d < c->rank; ++d) n *= c->dims[d];
  return n;
}

static void run_case(const cuda_emu_lib_t *lib, sort_case_t *c) {
  int64_t count = count_of(c);
  unsigned char *in[MAX_OPS] = {NULL}, *want[MAX_OPS] = {NULL},
                *got[MAX_OPS] = {NULL};
  size_t bytes[MAX_OPS];
  for (int i = 0; i < c->num; ++i) {
    bytes[i] = (size_t)count * iron_dtype_size(c->dt[i]);
    in[i] = malloc(bytes[i] + 1);
    want[i] = malloc(bytes[i] + 1);
    got[i] = malloc(bytes[i] + 1);
    if (i == 1 && c->iota1)
      fill_iota(c, in[i], count);
    else
      fill(c->dt[i], c->data, count, in[i]);
    memset(got[i], 0x5a, bytes[i]);
  }
  clock_t t0 = clock();
  bool host_ok = run_host(c, in, want, bytes);
  clock_t t1 = clock();
  // Inputs the program does not read get garbage (so reading them would
  // show); the iota operand must be one of them on the radix path.
  unsigned char *ein[MAX_OPS];
  for (int i = 0; i < c->num; ++i) {
    ein[i] = in[i];
    if (c->prog->unread_inputs >> i & 1) {
      ein[i] = malloc(bytes[i] + 1);
      memset(ein[i], 0xee, bytes[i]);
    }
  }
  if (iota_op(c, 1) && c->prog->algorithm == IRON_CUDA_SORT_RADIX &&
      c->num > 1)
    CHECK(c->prog->unread_inputs >> 1 & 1);
  bool emu_ok = run_emu(lib, c, ein, got);
  for (int i = 0; i < c->num; ++i)
    if (ein[i] != in[i]) free(ein[i]);
  clock_t t2 = clock();
  CHECK(host_ok);
  CHECK(emu_ok);
  int bad = 0;
  for (int i = 0; i < c->num && host_ok && emu_ok; ++i) {
    if (memcmp(want[i], got[i], bytes[i]) == 0) continue;
    size_t es = iron_dtype_size(c->dt[i]);
    int64_t k = 0;
    while (memcmp(want[i] + k * es, got[i] + k * es, es) == 0) ++k;
    uint64_t w = 0, g = 0;
    memcpy(&w, want[i] + k * es, es);
    memcpy(&g, got[i] + k * es, es);
    fprintf(stderr,
            "%s: result %d differs at %lld of %lld: host 0x%llx, cuda 0x%llx\n",
            c->label, i, (long long)k, (long long)count,
            (unsigned long long)w, (unsigned long long)g);
    bad++;
  }
  CHECK_EQ_INT(bad, 0);
  if (getenv("IRON_TEST_VERBOSE"))
    fprintf(stderr, "%-48s %-6s %3u launches host %.2fs emu %.2fs\n",
            c->label,
            c->prog->algorithm == IRON_CUDA_SORT_RADIX   ? "radix"
            : c->prog->algorithm == IRON_CUDA_SORT_MERGE ? "merge"
            : c->prog->algorithm == IRON_CUDA_SORT_BLOCK ? "block"
                                                         : "none",
            c->prog->num_launches, (double)(t1 - t0) / CLOCKS_PER_SEC,
            (double)(t2 - t1) / CLOCKS_PER_SEC);
  for (int i = 0; i < c->num; ++i) {
    free(in[i]);
    free(want[i]);
    free(got[i]);
  }
}

// --- NVRTC --------------------------------------------------------------------------------

static iron_cuda_api_t g_api;
static const char *g_srcs[MAX_CASES];
static bool g_src_ok[MAX_CASES];
static int g_nsrcs, g_next_src;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

// NVRTC's start-up dominates, so sources compile in groups of 8, each in
// its own namespace (their kernel names differ).
#define GROUP 8

static void *nvrtc_worker(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&g_mu);
    int lo = g_next_src;
    g_next_src += GROUP;
    pthread_mutex_unlock(&g_mu);
    if (lo >= g_nsrcs) return NULL;
    int hi = lo + GROUP < g_nsrcs ? lo + GROUP : g_nsrcs;
    iron_cuda_text_t t;
    iron_cuda_text_init(&t);
    for (int i = lo; i < hi; ++i)
      iron_cuda_text_printf(&t, "namespace u%d {\n%s\n}\n", i, g_srcs[i]);
    char *text = NULL;
    if (iron_cuda_text_finish(&t, &text)) continue;
    void *cubin = NULL;
    size_t size = 0;
    iron_status_t st =
        iron_cuda_nvrtc_compile(&g_api, text, "sm_90a", &cubin, &size);
    if (st) {
      pthread_mutex_lock(&g_mu);
      fprintf(stderr, "NVRTC: %s\n", iron_status_message(st));
      pthread_mutex_unlock(&g_mu);
      iron_status_free(st);
    }
    for (int i = lo; i < hi; ++i) g_src_ok[i] = st == IRON_OK && size > 0;
    free(cubin);
    free(text);
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// --- the test ------------------------------------------------------------------------------

static void test_sort_programs(void) {
  add_cases();
  // Programs first (they read the modules, which the host run consumes).
  for (int i = 0; i < g_ncases; ++i) {
    sort_case_t *c = &g_cases[i];
    const iron_ir_op_t *op = NULL;
    c->m = build_module(c, &op);
    iron_status_t st = iron_cuda_sort_program_create(op, &(iron_region_t){.ir = &op->regions[0]},
                                                     &c->opt, &c->prog);
    if (st) {
      fprintf(stderr, "%s: %s\n", c->label, iron_status_message(st));
      iron_status_free(st);
    }
    CHECK(c->prog != NULL);
    if (c->prog && c->want && c->prog->algorithm != c->want) {
      fprintf(stderr, "%s: algorithm %d, expected %d\n", c->label,
              (int)c->prog->algorithm, (int)c->want);
      CHECK(false);
    }
    if (!c->prog || !c->prog->source) continue;
    bool dup = false;
    for (int j = 0; j < g_nsrcs && !dup; ++j)
      dup = strcmp(g_srcs[j], c->prog->source) == 0;
    if (dup) continue;
    g_srcs[g_nsrcs++] = c->prog->source;
    const char *dump = getenv("IRON_TEST_DUMP");
    if (dump) {  // each distinct source as <dump>.<n>.cu
      char path[600];
      snprintf(path, sizeof(path), "%s.%d.cu", dump, g_nsrcs - 1);
      FILE *f = fopen(path, "w");
      if (f) {
        fprintf(f, "// %s\n%s", c->label, c->prog->source);
        fclose(f);
      }
    }
  }
  // Every distinct source through NVRTC (two threads: CI has two cores).
  double t0 = now_s();
  if (cuda_test_load_nvrtc(&g_api)) {
    pthread_t th[2];
    for (int i = 0; i < 2; ++i)
      pthread_create(&th[i], NULL, nvrtc_worker, NULL);
    for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
    for (int i = 0; i < g_nsrcs; ++i) CHECK(g_src_ok[i]);
  } else {
    CHECK(false);  // NVRTC is part of the test environment
  }
  double t1 = now_s();
  CHECK(cuda_emu_have_cxx());
  cuda_emu_lib_t lib;
  bool built = g_nsrcs > 0 && cuda_emu_build_mt(g_srcs, g_nsrcs,
                                                iron_cuda_prelude(), &lib);
  CHECK(built);
  double t2 = now_s();
  setenv("IRON_DEVICE", "host", 1);
  CHECK_OK(iron_runtime_create(NULL, &g_rt));
  for (int i = 0; i < g_ncases && built && g_rt; ++i) {
    sort_case_t *c = &g_cases[i];
    if (c->prog) run_case(&lib, c);
  }
  if (built) cuda_emu_close(&lib);
  for (int i = 0; i < g_ncases; ++i) {
    iron_cuda_sort_program_destroy(g_cases[i].prog);
    if (g_cases[i].m) iron_ir_module_destroy(g_cases[i].m);
  }
  if (g_rt) iron_runtime_release(g_rt);
  printf("%d sort cases, %d distinct sources (NVRTC %.1f s, C++ %.1f s, "
         "runs %.1f s)\n",
         g_ncases, g_nsrcs, t1 - t0, t2 - t1, now_s() - t2);
}

// Refusals name their reason; nothing is refused for its length.
static void test_refusals(void) {
  iron_cuda_sort_options_t o = opts(IRON_CUDA_SORT_MAX_ROW, true, false);
  sort_case_t c;
  memset(&c, 0, sizeof(c));
  c.num = 1;
  c.dt[0] = IRON_DTYPE_F32;
  c.rank = 1;
  c.dims[0] = 100000000;  // 10^8: planned (radix), not refused
  c.cmp = CMP_JAX;
  c.num_keys = 1;
  const iron_ir_op_t *op = NULL;
  iron_ir_module_t *m = build_module(&c, &op);
  iron_cuda_sort_program_t *p = NULL;
  CHECK_OK(iron_cuda_sort_program_create(op, &(iron_region_t){.ir = &op->regions[0]}, &o, &p));
  CHECK(p && p->algorithm == IRON_CUDA_SORT_RADIX);
  // 10^8 f32 + index: two key and two index buffers and the counts.
  CHECK(p && p->scratch_bytes >= (size_t)100000000 * 16);
  CHECK(p && p->scratch_bytes < (size_t)100000000 * 17);
  iron_cuda_sort_program_destroy(p);
  iron_ir_module_destroy(m);
}

int main(void) {
  g_long = getenv("IRON_TEST_SORT_LONG") &&
           strcmp(getenv("IRON_TEST_SORT_LONG"), "0") != 0;
  static const iron_test_case_t kTests[] = {
      {"refusals", test_refusals},
      {"sort_programs", test_sort_programs},
  };
  int failed = 0;
  for (size_t i = 0; i < sizeof(kTests) / sizeof(kTests[0]); ++i) {
    int before = iron_test_failures_;
    iron_test_current_ = kTests[i].name;
    kTests[i].fn();
    if (iron_test_failures_ != before) {
      failed++;
      fprintf(stderr, "FAILED: %s\n", kTests[i].name);
    }
  }
  printf("%d checks, %d failed\n", iron_test_checks_, iron_test_failures_);
  return failed ? 1 : 0;
}
