// stablehlo.sort host kernel. Comparators are built as the IR jax emits
// (jnp.sort's NaN/-0 canonicalising TOTALORDER compare, argsort's iota
// payload, lax.sort num_keys=2 lexicographic, complex (real, imag), SIGNED /
// UNSIGNED / FLOAT compares, GT / swapped operands) and checked three ways:
// against an independent reference stable sort written here, fast path
// against the generic path (IRON_SORT_GENERIC=1) whose call_region is a small
// IR interpreter in this file, and refusals.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>

#include "base/half.h"
#include "device/host/host_kernel.h"
#include "stablehlo/reader.h"
#include "test.h"

#ifndef IRON_TEST_DATA_DIR
#define IRON_TEST_DATA_DIR "tests/data"
#endif

// ---------------------------------------------------------------------------
// A tiny static IR pool (reset per sort op).

#define POOL 256
static iron_ir_type_t g_types[POOL];
static int g_ntypes;
static iron_ir_op_t g_ops[POOL];
static int g_nops;
static iron_ir_value_t g_results[POOL];
static iron_ir_value_t *g_operand_ptrs[POOL * 4];
static int g_noperand_ptrs;
static iron_ir_attr_t g_attrs[POOL];
static int g_nattrs;
static iron_ir_named_attr_t g_named[POOL];
static int g_nnamed;
static iron_ir_op_t *g_block_ops[POOL];
static iron_ir_value_t g_args[64];
static iron_ir_region_t g_region;
static iron_ir_block_t g_block;
static iron_ir_value_t g_sort_operands[16];
static iron_ir_value_t *g_sort_operand_ptrs[16];
static iron_ir_value_t g_sort_results[16];
static iron_ir_op_t g_sort;
static bool g_hoist_constants;

static void pool_reset(void) {
  g_ntypes = g_nops = g_noperand_ptrs = g_nattrs = g_nnamed = 0;
  memset(&g_block, 0, sizeof(g_block));
  memset(&g_region, 0, sizeof(g_region));
  g_block.ops = g_block_ops;
  g_block.args = g_args;
  g_region.num_blocks = 1;
  g_region.blocks = &g_block;
}

static const iron_ir_type_t *type_of(iron_dtype_t dt, int32_t rank,
                                     const int64_t *dims) {
  iron_ir_type_t *t = &g_types[g_ntypes++];
  memset(t, 0, sizeof(*t));
  t->kind = IRON_TYPE_TENSOR;
  t->dtype = dt;
  t->rank = rank;
  for (int32_t i = 0; i < rank; ++i) t->dims[i] = dims[i];
  return t;
}

static const iron_ir_attr_t *attr_enum(iron_enum_kind_t kind, int32_t v) {
  iron_ir_attr_t *a = &g_attrs[g_nattrs++];
  memset(a, 0, sizeof(*a));
  a->kind = IRON_ATTR_ENUM;
  a->enumv.kind = kind;
  a->enumv.value = v;
  return a;
}

static iron_ir_op_t *new_op(iron_op_kind_t kind, int nops,
                            iron_ir_value_t *a, iron_ir_value_t *b,
                            iron_ir_value_t *c, const iron_ir_type_t *rt) {
  iron_ir_op_t *op = &g_ops[g_nops];
  memset(op, 0, sizeof(*op));
  op->kind = kind;
  op->name = iron_op_kind_name(kind);
  op->operands = &g_operand_ptrs[g_noperand_ptrs];
  iron_ir_value_t *in[3] = {a, b, c};
  for (int i = 0; i < nops; ++i) g_operand_ptrs[g_noperand_ptrs++] = in[i];
  op->num_operands = (uint32_t)nops;
  if (rt) {
    iron_ir_value_t *r = &g_results[g_nops];
    memset(r, 0, sizeof(*r));
    r->type = rt;
    r->def_op = op;
    op->results = r;
    op->num_results = 1;
  }
  g_nops++;
  // jax's portable artifacts hoist comparator constants out of the region
  // (MLIR CSE); g_hoist_constants mimics that by leaving them outside.
  if (kind == IRON_OP_CONSTANT && g_hoist_constants) return op;
  op->parent = &g_block;
  g_block.ops[g_block.num_ops++] = op;
  return op;
}

static iron_ir_value_t *arg(int i) { return &g_args[i]; }

static iron_ir_value_t *cmp(int dir, int ctype, iron_ir_value_t *a,
                            iron_ir_value_t *b) {
  iron_ir_op_t *op = new_op(IRON_OP_COMPARE, 2, a, b, NULL,
                            type_of(IRON_DTYPE_PRED, 0, NULL));
  iron_ir_named_attr_t *na = &g_named[g_nnamed];
  na[0].name = "comparison_direction";
  na[0].value = attr_enum(IRON_ENUM_COMPARISON_DIRECTION, dir);
  na[1].name = "compare_type";
  na[1].value = attr_enum(IRON_ENUM_COMPARISON_TYPE, ctype);
  g_nnamed += 2;
  op->attrs = na;
  op->num_attrs = 2;
  return op->results;
}

static unsigned char g_const_bytes[POOL][16];
static iron_ir_value_t *constant(iron_dtype_t dt, uint64_t bits) {
  iron_ir_op_t *op =
      new_op(IRON_OP_CONSTANT, 0, NULL, NULL, NULL, type_of(dt, 0, NULL));
  iron_ir_attr_t *a = &g_attrs[g_nattrs++];
  memset(a, 0, sizeof(*a));
  a->kind = IRON_ATTR_DENSE;
  a->dense.type = op->results->type;
  memcpy(g_const_bytes[g_nops], &bits, 8);
  a->dense.data = g_const_bytes[g_nops];
  a->dense.size = iron_dtype_size(dt);
  a->dense.splat = true;
  iron_ir_named_attr_t *na = &g_named[g_nnamed++];
  na->name = "value";
  na->value = a;
  op->attrs = na;
  op->num_attrs = 1;
  return op->results;
}

static iron_ir_value_t *binop(iron_op_kind_t k, iron_ir_value_t *a,
                              iron_ir_value_t *b) {
  return new_op(k, 2, a, b, NULL, a->type)->results;
}
static iron_ir_value_t *select3(iron_ir_value_t *p, iron_ir_value_t *t,
                                iron_ir_value_t *f) {
  return new_op(IRON_OP_SELECT, 3, p, t, f, t->type)->results;
}
static iron_ir_value_t *unop(iron_op_kind_t k, iron_ir_value_t *a,
                             iron_dtype_t rdt) {
  return new_op(k, 1, a, NULL, NULL, type_of(rdt, 0, NULL))->results;
}

static uint64_t zero_bits(iron_dtype_t dt) { (void)dt; return 0; }
static uint64_t nan_bits(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_F16: return 0x7E00;
    case IRON_DTYPE_BF16: return 0x7FC0;
    case IRON_DTYPE_F32: return 0x7FC00000;
    default: return 0x7FF8000000000000ull;
  }
}

// jax's _canonicalize_float_for_sort: select(x != x, NaN, select(x == 0, 0,
// x)).
static iron_ir_value_t *canon(iron_ir_value_t *x) {
  iron_dtype_t dt = x->type->dtype;
  iron_ir_value_t *z = constant(dt, zero_bits(dt));
  iron_ir_value_t *is0 = cmp(IRON_CMP_EQ, IRON_CMP_TYPE_FLOAT, x, z);
  iron_ir_value_t *s1 = select3(is0, constant(dt, zero_bits(dt)), x);
  iron_ir_value_t *isn = cmp(IRON_CMP_NE, IRON_CMP_TYPE_FLOAT, x, x);
  return select3(isn, constant(dt, nan_bits(dt)), s1);
}

// Key values of operand k for lhs/rhs, canonicalised for floats.
static int ctype_for(iron_dtype_t dt) {
  switch (iron_dtype_class(dt)) {
    case IRON_DTYPE_CLASS_FLOAT: return IRON_CMP_TYPE_TOTALORDER;
    case IRON_DTYPE_CLASS_SINT: return IRON_CMP_TYPE_SIGNED;
    default: return IRON_CMP_TYPE_UNSIGNED;
  }
}

// Builds the sort op over `n` operands of dtypes[] with shape dims; the
// comparator body must be added by the caller and finished with ret().
static void begin_sort(int n, const iron_dtype_t *dtypes, int32_t rank,
                       const int64_t *dims, int64_t dimension) {
  pool_reset();
  memset(&g_sort, 0, sizeof(g_sort));
  for (int k = 0; k < n; ++k) {
    const iron_ir_type_t *t = type_of(dtypes[k], rank, dims);
    memset(&g_sort_operands[k], 0, sizeof(iron_ir_value_t));
    g_sort_operands[k].type = t;
    g_sort_operand_ptrs[k] = &g_sort_operands[k];
    memset(&g_sort_results[k], 0, sizeof(iron_ir_value_t));
    g_sort_results[k].type = t;
    g_sort_results[k].def_op = &g_sort;
    g_sort_results[k].index = (uint32_t)k;
    for (int s = 0; s < 2; ++s) {
      iron_ir_value_t *a = &g_args[2 * k + s];
      memset(a, 0, sizeof(*a));
      a->type = type_of(dtypes[k], 0, NULL);
      a->def_block = &g_block;
      a->index = (uint32_t)(2 * k + s);
    }
  }
  g_block.num_args = (uint32_t)(2 * n);
  g_sort.kind = IRON_OP_SORT;
  g_sort.name = "stablehlo.sort";
  g_sort.num_operands = (uint32_t)n;
  g_sort.operands = g_sort_operand_ptrs;
  g_sort.num_results = (uint32_t)n;
  g_sort.results = g_sort_results;
  g_sort.num_regions = 1;
  g_sort.regions = &g_region;
  g_region.parent = &g_sort;
  iron_ir_attr_t *da = &g_attrs[g_nattrs++];
  memset(da, 0, sizeof(*da));
  da->kind = IRON_ATTR_INT;
  da->i = dimension;
  da->int_dtype = IRON_DTYPE_S64;
  iron_ir_attr_t *st = &g_attrs[g_nattrs++];
  memset(st, 0, sizeof(*st));
  st->kind = IRON_ATTR_BOOL;
  st->b = true;
  iron_ir_named_attr_t *na = &g_named[g_nnamed];
  na[0].name = "dimension";
  na[0].value = da;
  na[1].name = "is_stable";
  na[1].value = st;
  g_nnamed += 2;
  g_sort.attrs = na;
  g_sort.num_attrs = 2;
}

static void ret(iron_ir_value_t *v) {
  new_op(IRON_OP_RETURN, 1, v, NULL, NULL, NULL);
}

// jax's lexicographic comparator over the first num_keys operands.
static iron_ir_value_t *jax_lt(int num_keys, bool canonicalize) {
  iron_ir_value_t *lt[16], *eq[16];
  int nk = 0;
  for (int k = 0; k < num_keys; ++k) {
    iron_dtype_t dt = g_args[2 * k].type->dtype;
    iron_dtype_t part = iron_dtype_complex_part(dt);
    int parts = part != IRON_DTYPE_INVALID ? 2 : 1;
    for (int p = 0; p < parts; ++p) {
      iron_ir_value_t *a = arg(2 * k), *b = arg(2 * k + 1);
      iron_dtype_t kdt = dt;
      if (parts == 2) {
        kdt = part;
        a = unop(p ? IRON_OP_IMAG : IRON_OP_REAL, a, part);
        b = unop(p ? IRON_OP_IMAG : IRON_OP_REAL, b, part);
      }
      if (canonicalize && iron_dtype_class(kdt) == IRON_DTYPE_CLASS_FLOAT) {
        a = canon(a);
        b = canon(b);
      }
      int ct = ctype_for(kdt);
      lt[nk] = cmp(IRON_CMP_LT, ct, a, b);
      eq[nk] = cmp(IRON_CMP_EQ, ct, a, b);
      nk++;
    }
  }
  iron_ir_value_t *p = lt[nk - 1];
  for (int k = nk - 2; k >= 0; --k)
    p = binop(IRON_OP_OR, lt[k], binop(IRON_OP_AND, eq[k], p));
  return p;
}

// ---------------------------------------------------------------------------
// The generic path's call_region: an interpreter of the comparator IR.

typedef struct ival {
  unsigned char b[16];
  iron_dtype_t dt;
} ival_t;

static double ival_f(const ival_t *v) {
  uint64_t u = 0;
  memcpy(&u, v->b, 8);
  switch (v->dt) {
    case IRON_DTYPE_F16: return iron_f16_to_f32((uint16_t)u);
    case IRON_DTYPE_BF16: return iron_bf16_to_f32((uint16_t)u);
    case IRON_DTYPE_F32: return iron_f32_from_bits((uint32_t)u);
    default: { double d; memcpy(&d, &u, 8); return d; }
  }
}
static int64_t ival_s(const ival_t *v) {
  switch (iron_dtype_size(v->dt)) {
    case 1: return *(const int8_t *)v->b;
    case 2: { int16_t x; memcpy(&x, v->b, 2); return x; }
    case 4: { int32_t x; memcpy(&x, v->b, 4); return x; }
    default: { int64_t x; memcpy(&x, v->b, 8); return x; }
  }
}
static uint64_t ival_u(const ival_t *v) {
  uint64_t u = 0;
  memcpy(&u, v->b, iron_dtype_size(v->dt));
  return u;
}

// Total order written independently of the kernel: (-NaN by payload
// descending) < numbers (with -0 < +0) < (+NaN by payload ascending).
static int total_cmp(const ival_t *a, const ival_t *b) {
  double x = ival_f(a), y = ival_f(b);
  int cx = isnan(x) ? (signbit(x) ? 0 : 2) : 1;
  int cy = isnan(y) ? (signbit(y) ? 0 : 2) : 1;
  if (cx != cy) return cx < cy ? -1 : 1;
  uint64_t ux = ival_u(a), uy = ival_u(b);
  uint64_t mag = ~0ull >> (64 - 8 * iron_dtype_size(a->dt) + 1);
  if (cx == 1) {
    if (x != y) return x < y ? -1 : 1;
    if (signbit(x) != signbit(y)) return signbit(x) ? -1 : 1;
    return 0;
  }
  ux &= mag, uy &= mag;
  if (ux == uy) return 0;
  int r = ux < uy ? -1 : 1;
  return cx == 0 ? -r : r;
}

static iron_status_t interp_call(const iron_kernel_ctx_t *ctx,
                                 const iron_region_t *region,
                                 const iron_tensor_t *const *inputs,
                                 iron_tensor_t *const *outputs) {
  const iron_ir_block_t *blk = (const iron_ir_block_t *)region;
  ival_t vals[POOL];  // indexed by op index (results) or args
  ival_t args[64];
  for (uint32_t i = 0; i < blk->num_args; ++i) {
    args[i].dt = inputs[i]->dtype;
    memcpy(args[i].b, inputs[i]->data, iron_dtype_size(inputs[i]->dtype));
  }
#define VAL(v) ((v)->def_op ? &vals[(v)->def_op - g_ops] : &args[(v)->index])
  // Constants first: hoisted ones live outside the block.
  for (int i = 0; i < g_nops; ++i)
    if (g_ops[i].kind == IRON_OP_CONSTANT) {
      const iron_ir_attr_t *a = iron_ir_op_attr(&g_ops[i], "value");
      memset(&vals[i], 0, sizeof(vals[i]));
      vals[i].dt = a->dense.type->dtype;
      memcpy(vals[i].b, a->dense.data, a->dense.size);
    }
  for (uint32_t i = 0; i < blk->num_ops; ++i) {
    const iron_ir_op_t *op = blk->ops[i];
    ival_t *r = &vals[op - g_ops];
    memset(r, 0, sizeof(*r));
    if (op->num_results) r->dt = op->results[0].type->dtype;
    switch (op->kind) {
      case IRON_OP_CONSTANT: {
        const iron_ir_attr_t *a = iron_ir_op_attr(op, "value");
        memcpy(r->b, a->dense.data, a->dense.size);
        break;
      }
      case IRON_OP_COMPARE: {
        const ival_t *x = VAL(op->operands[0]), *y = VAL(op->operands[1]);
        int dir = iron_ir_op_enum(op, "comparison_direction", -1);
        int ct = iron_ir_op_enum(op, "compare_type", 0);
        int c;  // -1, 0, 1, or 2 for unordered
        if (ct == IRON_CMP_TYPE_FLOAT) {
          double a = ival_f(x), b = ival_f(y);
          c = a < b ? -1 : a > b ? 1 : a == b ? 0 : 2;
        } else if (ct == IRON_CMP_TYPE_TOTALORDER) {
          c = total_cmp(x, y);
        } else if (ct == IRON_CMP_TYPE_SIGNED) {
          int64_t a = ival_s(x), b = ival_s(y);
          c = a < b ? -1 : a > b;
        } else {
          uint64_t a = ival_u(x), b = ival_u(y);
          c = a < b ? -1 : a > b;
        }
        bool res = false;
        switch (dir) {
          case IRON_CMP_EQ: res = c == 0; break;
          case IRON_CMP_NE: res = c != 0; break;
          case IRON_CMP_LT: res = c == -1; break;
          case IRON_CMP_LE: res = c == -1 || c == 0; break;
          case IRON_CMP_GT: res = c == 1; break;
          case IRON_CMP_GE: res = c == 1 || c == 0; break;
        }
        r->b[0] = res;
        break;
      }
      case IRON_OP_SELECT:
        *r = VAL(op->operands[0])->b[0] ? *VAL(op->operands[1])
                                        : *VAL(op->operands[2]);
        break;
      case IRON_OP_AND:
        r->b[0] = VAL(op->operands[0])->b[0] & VAL(op->operands[1])->b[0];
        break;
      case IRON_OP_OR:
        r->b[0] = VAL(op->operands[0])->b[0] | VAL(op->operands[1])->b[0];
        break;
      case IRON_OP_REAL:
      case IRON_OP_IMAG: {
        const ival_t *x = VAL(op->operands[0]);
        size_t ps = iron_dtype_size(r->dt);
        memcpy(r->b, x->b + (op->kind == IRON_OP_IMAG ? ps : 0), ps);
        break;
      }
      case IRON_OP_NEGATE: {
        const ival_t *x = VAL(op->operands[0]);
        *r = *x;
        if (r->dt == IRON_DTYPE_F32) r->b[3] ^= 0x80;
        else {
          int64_t s = -ival_s(x);
          memcpy(r->b, &s, iron_dtype_size(r->dt));
        }
        break;
      }
      case IRON_OP_RETURN:
        *(unsigned char *)outputs[0]->data = VAL(op->operands[0])->b[0];
        return IRON_OK;
      default:
        return IRON_ERR(UNIMPLEMENTED, "interp: %s", op->name);
    }
  }
#undef VAL
  return IRON_ERR(INTERNAL, "interp: no return");
}

// ---------------------------------------------------------------------------
// Running the kernel.

static iron_tensor_t make_tensor(iron_dtype_t dt, int32_t rank,
                                 const int64_t *dims) {
  iron_tensor_t t;
  memset(&t, 0, sizeof(t));
  t.dtype = dt;
  t.rank = rank;
  t.count = 1;
  for (int32_t i = 0; i < rank; ++i) {
    t.dims[i] = dims[i];
    t.count *= dims[i];
  }
  t.nbytes = (size_t)t.count * iron_dtype_size(dt);
  t.data = calloc(t.count ? (size_t)t.count : 1, iron_dtype_size(dt));
  return t;
}

// Runs the current g_sort on inputs; generic selects IRON_SORT_GENERIC.
static iron_status_t run_sort_env(int n, iron_tensor_t *ins,
                                  iron_tensor_t *outs, bool generic,
                                  bool radix, iron_threadpool_t *pool,
                                  bool *out_fast_ok) {
  setenv("IRON_SORT_GENERIC", generic ? "1" : "0", 1);
  setenv("IRON_SORT_RADIX", radix ? "1" : "0", 1);
  const iron_kernel_t *k = iron_host_kernel_lookup(IRON_OP_SORT);
  iron_region_t *regions[1] = {(iron_region_t *)&g_block};
  void *params = NULL;
  iron_status_t s = k->prepare(&g_sort, regions, &params);
  if (s) return s;
  // Probe: without a region, prepare succeeds only on the fast path.
  if (out_fast_ok) {
    void *p2 = NULL;
    iron_status_t s2 = k->prepare(&g_sort, NULL, &p2);
    *out_fast_ok = s2 == IRON_OK;
    iron_status_free(s2);
    free(p2);
  }
  const iron_tensor_t *in_ptrs[16];
  iron_tensor_t *out_ptrs[16];
  for (int i = 0; i < n; ++i) in_ptrs[i] = &ins[i], out_ptrs[i] = &outs[i];
  iron_kernel_ctx_t ctx = {.pool = pool, .call_region = interp_call};
  s = k->run(&ctx, params, in_ptrs, out_ptrs);
  free(params);
  return s;
}

static iron_status_t run_sort(int n, iron_tensor_t *ins, iron_tensor_t *outs,
                              bool generic, iron_threadpool_t *pool,
                              bool *out_fast_ok) {
  return run_sort_env(n, ins, outs, generic, true, pool, out_fast_ok);
}

// ---------------------------------------------------------------------------
// Data and reference.

static uint64_t g_rng = 88172645463325252ull;
static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

static void fill_random(iron_tensor_t *t) {
  size_t es = iron_dtype_size(t->dtype);
  unsigned char *p = (unsigned char *)t->data;
  for (int64_t i = 0; i < t->count; ++i) {
    uint64_t r = rnd();
    uint64_t bits;
    if (iron_dtype_class(t->dtype) == IRON_DTYPE_CLASS_FLOAT ||
        iron_dtype_class(t->dtype) == IRON_DTYPE_CLASS_COMPLEX) {
      iron_dtype_t pd = iron_dtype_complex_part(t->dtype);
      if (pd == IRON_DTYPE_INVALID) pd = t->dtype;
      for (size_t part = 0; part < es / iron_dtype_size(pd); ++part) {
        static const double specials[] = {0.0, -0.0, INFINITY, -INFINITY,
                                          NAN, -NAN, 1.0, -1.0, 2.5};
        double v = (r % 3 == 0) ? specials[(r >> 8) % 9]
                                : (double)((int)((r >> 16) % 21) - 10) / 4;
        r = rnd();
        switch (pd) {
          case IRON_DTYPE_F16: bits = iron_f32_to_f16((float)v); break;
          case IRON_DTYPE_BF16: bits = iron_f32_to_bf16((float)v); break;
          case IRON_DTYPE_F32: bits = iron_f32_bits((float)v); break;
          default: memcpy(&bits, &v, 8); break;
        }
        // Odd NaN payloads too, so the total order of NaNs is exercised.
        if (isnan(v) && (r & 1)) bits |= 1;
        memcpy(p + i * es + part * iron_dtype_size(pd), &bits,
               iron_dtype_size(pd));
      }
    } else if (t->dtype == IRON_DTYPE_PRED) {
      p[i] = r & 1;
    } else {
      // Small range for ties, with the extremes now and then.
      bits = (r % 7 == 0) ? (r >> 8) : ((r >> 8) % 9) - 4;
      if (r % 11 == 0) bits = 1ull << (8 * es - 1);  // INT_MIN / top bit
      memcpy(p + i * es, &bits, es);
    }
  }
}

// Reference "less" with jax's semantics for one key operand pair.
static int ref_key_cmp(iron_dtype_t dt, const unsigned char *a,
                       const unsigned char *b, bool canonicalize) {
  iron_dtype_t part = iron_dtype_complex_part(dt);
  if (part != IRON_DTYPE_INVALID) {
    size_t ps = iron_dtype_size(part);
    int c = ref_key_cmp(part, a, b, canonicalize);
    return c ? c : ref_key_cmp(part, a + ps, b + ps, canonicalize);
  }
  ival_t x = {.dt = dt}, y = {.dt = dt};
  memcpy(x.b, a, iron_dtype_size(dt));
  memcpy(y.b, b, iron_dtype_size(dt));
  switch (iron_dtype_class(dt)) {
    case IRON_DTYPE_CLASS_FLOAT: {
      double fx = ival_f(&x), fy = ival_f(&y);
      if (canonicalize) {
        // All NaNs equal and last; -0 == +0.
        if (isnan(fx) || isnan(fy))
          return isnan(fx) && isnan(fy) ? 0 : isnan(fx) ? 1 : -1;
        return fx < fy ? -1 : fx > fy;
      }
      return total_cmp(&x, &y);
    }
    case IRON_DTYPE_CLASS_SINT: {
      int64_t sx = ival_s(&x), sy = ival_s(&y);
      return sx < sy ? -1 : sx > sy;
    }
    default: {
      uint64_t ux = ival_u(&x), uy = ival_u(&y);
      return ux < uy ? -1 : ux > uy;
    }
  }
}

// Reference: stable insertion sort of each row, lexicographic over the first
// num_keys operands (descending flips every key), then gathers all operands.
static void ref_sort(int n, const iron_tensor_t *ins, iron_tensor_t *outs,
                     int num_keys, int64_t dim, bool canonicalize,
                     bool descending) {
  const iron_tensor_t *t0 = &ins[0];
  int64_t outer = 1, len = t0->rank ? t0->dims[dim] : 1, inner = 1;
  for (int32_t d = 0; d < t0->rank; ++d) {
    if (d < dim) outer *= t0->dims[d];
    if (d > dim) inner *= t0->dims[d];
  }
  int64_t *perm = (int64_t *)malloc((size_t)(len > 0 ? len : 1) * 8);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      int64_t base = o * len * inner + in;
      for (int64_t t = 0; t < len; ++t) {
        int64_t x = t, j = t;
        while (j > 0) {
          int c = 0;
          for (int k = 0; k < num_keys && c == 0; ++k) {
            size_t es = iron_dtype_size(ins[k].dtype);
            const unsigned char *p = (const unsigned char *)ins[k].data;
            c = ref_key_cmp(ins[k].dtype, p + (base + x * inner) * es,
                            p + (base + perm[j - 1] * inner) * es,
                            canonicalize);
          }
          if (descending) c = -c;
          if (c >= 0) break;
          perm[j] = perm[j - 1];
          --j;
        }
        perm[j] = x;
      }
      for (int k = 0; k < n; ++k) {
        size_t es = iron_dtype_size(ins[k].dtype);
        for (int64_t t = 0; t < len; ++t)
          memcpy((char *)outs[k].data + (base + t * inner) * es,
                 (const char *)ins[k].data + (base + perm[t] * inner) * es, es);
      }
    }
  free(perm);
}

static void free_tensors(iron_tensor_t *t, int n) {
  for (int i = 0; i < n; ++i) free(t[i].data);
}

// Sorts operands of dtypes[] (the first num_keys are keys; an S32 iota
// payload is appended when with_iota) on the fast path, the generic path and
// the reference, and checks all three agree bit for bit.
typedef enum comparator { CMP_JAX, CMP_GT, CMP_SWAPPED_LT } comparator_t;

static void check_sort(int nk, const iron_dtype_t *kdt, bool with_iota,
                       int32_t rank, const int64_t *dims, int64_t dim,
                       comparator_t which, iron_threadpool_t *pool) {
  iron_dtype_t dts[16];
  int n = nk;
  for (int i = 0; i < nk; ++i) dts[i] = kdt[i];
  if (with_iota) dts[n++] = IRON_DTYPE_S32;
  iron_tensor_t ins[16], fast[16], merge[16], gen[16], ref[16];
  for (int i = 0; i < n; ++i) {
    ins[i] = make_tensor(dts[i], rank, dims);
    fast[i] = make_tensor(dts[i], rank, dims);
    merge[i] = make_tensor(dts[i], rank, dims);
    gen[i] = make_tensor(dts[i], rank, dims);
    ref[i] = make_tensor(dts[i], rank, dims);
    fill_random(&ins[i]);
  }
  if (with_iota) {
    int32_t *p = (int32_t *)ins[n - 1].data;
    int64_t inner = 1;
    for (int32_t d = dim + 1; d < rank; ++d) inner *= dims[d];
    for (int64_t i = 0; i < ins[n - 1].count; ++i)
      p[i] = (int32_t)((i / inner) % (rank ? dims[dim] : 1));
  }
  begin_sort(n, dts, rank, dims, dim);
  bool canonical = which == CMP_JAX;
  if (which == CMP_JAX) {
    ret(jax_lt(nk, true));
  } else {
    int ct = ctype_for(dts[0]);
    ret(which == CMP_GT ? cmp(IRON_CMP_GT, ct, arg(0), arg(1))
                        : cmp(IRON_CMP_LT, ct, arg(1), arg(0)));
  }
  bool fast_ok = false;
  CHECK_OK(run_sort(n, ins, fast, false, pool, &fast_ok));
  CHECK(fast_ok);
  CHECK_OK(run_sort_env(n, ins, merge, false, false, pool, NULL));
  CHECK_OK(run_sort(n, ins, gen, true, NULL, NULL));
  ref_sort(n, ins, ref, which == CMP_JAX ? nk : 1, dim, canonical,
           which != CMP_JAX);
  for (int i = 0; i < n; ++i) {
    bool same_fast = memcmp(fast[i].data, ref[i].data, ref[i].nbytes) == 0;
    bool same_gen = memcmp(gen[i].data, ref[i].data, ref[i].nbytes) == 0;
    bool same_merge = memcmp(merge[i].data, ref[i].data, ref[i].nbytes) == 0;
    if (!same_fast || !same_gen || !same_merge)
      fprintf(stderr, "  operand %d (%s) rank %d dim %lld cmp %d: fast %d "
              "merge %d generic %d\n", i, iron_dtype_name(dts[i]), rank,
              (long long)dim, which, same_fast, same_merge, same_gen);
    CHECK(same_fast);
    CHECK(same_merge);
    CHECK(same_gen);
  }
  free_tensors(ins, n);
  free_tensors(fast, n);
  free_tensors(merge, n);
  free_tensors(gen, n);
  free_tensors(ref, n);
}

static const iron_dtype_t kAllDtypes[] = {
    IRON_DTYPE_S8,  IRON_DTYPE_S16, IRON_DTYPE_S32,  IRON_DTYPE_S64,
    IRON_DTYPE_U8,  IRON_DTYPE_U16, IRON_DTYPE_U32,  IRON_DTYPE_U64,
    IRON_DTYPE_PRED, IRON_DTYPE_F16, IRON_DTYPE_BF16, IRON_DTYPE_F32,
    IRON_DTYPE_F64, IRON_DTYPE_C64, IRON_DTYPE_C128};
#define NUM_DTYPES (sizeof(kAllDtypes) / sizeof(kAllDtypes[0]))

static void test_jnp_sort_all_dtypes_ranks(void) {
  static const int64_t shapes[][3] = {{37, 0, 0}, {5, 9, 0}, {3, 4, 5}};
  // Rows long enough for the radix path.
  static const int64_t big[][3] = {{300, 0, 0}, {70, 3, 0}, {2, 65, 3}};
  static const int64_t kBigDim[3] = {0, 0, 1};
  for (size_t d = 0; d < NUM_DTYPES; ++d)
    for (int32_t rank = 1; rank <= 3; ++rank)
      for (int64_t dim = 0; dim < rank; ++dim)
        check_sort(1, &kAllDtypes[d], false, rank, shapes[rank - 1], dim,
                   CMP_JAX, NULL);
  for (size_t d = 0; d < NUM_DTYPES; ++d)
    for (int32_t rank = 1; rank <= 3; ++rank)
      check_sort(1, &kAllDtypes[d], true, rank, big[rank - 1], kBigDim[rank - 1],
                 CMP_JAX, NULL);
}

static void test_argsort_stability(void) {
  // Many ties: the iota payload shows the kernel kept the input order.
  int64_t dims[1] = {1000};
  for (size_t d = 0; d < NUM_DTYPES; ++d)
    check_sort(1, &kAllDtypes[d], true, 1, dims, 0, CMP_JAX, NULL);
  int64_t dims3[3] = {4, 33, 6};
  for (int64_t dim = 0; dim < 3; ++dim)
    check_sort(1, &kAllDtypes[11], true, 3, dims3, dim, CMP_JAX, NULL);
}

static void test_multi_key(void) {
  int64_t dims[2] = {7, 90};
  iron_dtype_t k2[2] = {IRON_DTYPE_F32, IRON_DTYPE_S32};
  check_sort(2, k2, true, 2, dims, 1, CMP_JAX, NULL);
  iron_dtype_t k3[3] = {IRON_DTYPE_PRED, IRON_DTYPE_BF16, IRON_DTYPE_U16};
  check_sort(3, k3, true, 2, dims, 1, CMP_JAX, NULL);
  check_sort(3, k3, false, 2, dims, 0, CMP_JAX, NULL);
  iron_dtype_t kc[2] = {IRON_DTYPE_C64, IRON_DTYPE_S8};
  check_sort(2, kc, true, 2, dims, 1, CMP_JAX, NULL);
}

static void test_descending_forms(void) {
  int64_t dims[2] = {6, 80};
  for (size_t d = 0; d < NUM_DTYPES; ++d) {
    if (iron_dtype_class(kAllDtypes[d]) == IRON_DTYPE_CLASS_COMPLEX) continue;
    check_sort(1, &kAllDtypes[d], true, 2, dims, 1, CMP_GT, NULL);
    check_sort(1, &kAllDtypes[d], true, 2, dims, 0, CMP_SWAPPED_LT, NULL);
  }
}

static void test_hoisted_constants(void) {
  g_hoist_constants = true;
  int64_t dims[2] = {5, 40};
  static const iron_dtype_t f[] = {IRON_DTYPE_F32, IRON_DTYPE_F16,
                                   IRON_DTYPE_BF16, IRON_DTYPE_F64,
                                   IRON_DTYPE_C64};
  for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); ++i)
    check_sort(1, &f[i], true, 2, dims, 1, CMP_JAX, NULL);
  g_hoist_constants = false;
}

// jnp.argsort of f32 with NaN/-0/inf ties, as jax's CPU backend computed it
// (NaNs last in input order, -0 and +0 tied in input order).
static const uint32_t kJaxF32Bits[24] = {
    0xbf800000, 0x3f000000, 0xbfc00000, 0xbf800000, 0xff800000, 0x7f800000,
    0x7fc00000, 0x3f000000, 0xbf800000, 0xbf000000, 0xbf800000, 0x00000000,
    0xbf800000, 0xbf800000, 0xbfc00000, 0xbf800000, 0x00000000, 0x7fc00000,
    0x00000000, 0xff800000, 0xbf800000, 0x80000000, 0x3f800000, 0x7f800000};
static const int32_t kJaxF32Argsort[24] = {4,  19, 2,  14, 0,  3, 8,  10,
                                           12, 13, 15, 20, 9,  11, 16, 18,
                                           21, 1,  7,  22, 5,  23, 6,  17};

static void test_jax_cpu_argsort(void) {
  int64_t dims[1] = {24};
  iron_dtype_t dts[2] = {IRON_DTYPE_F32, IRON_DTYPE_S32};
  iron_tensor_t in[2], out[2];
  for (int i = 0; i < 2; ++i) {
    in[i] = make_tensor(dts[i], 1, dims);
    out[i] = make_tensor(dts[i], 1, dims);
  }
  memcpy(in[0].data, kJaxF32Bits, sizeof(kJaxF32Bits));
  for (int i = 0; i < 24; ++i) ((int32_t *)in[1].data)[i] = i;
  for (int generic = 0; generic < 2; ++generic) {
    g_hoist_constants = true;
    begin_sort(2, dts, 1, dims, 0);
    ret(jax_lt(1, true));
    g_hoist_constants = false;
    CHECK_OK(run_sort(2, in, out, generic, NULL, NULL));
    CHECK(memcmp(out[1].data, kJaxF32Argsort, sizeof(kJaxF32Argsort)) == 0);
    for (int i = 0; i < 24; ++i)
      CHECK(((uint32_t *)out[0].data)[i] == kJaxF32Bits[kJaxF32Argsort[i]]);
  }
  free_tensors(in, 2), free_tensors(out, 2);
}

static void test_threaded_large(void) {
  iron_threadpool_t *pool = NULL;
  CHECK_OK(iron_threadpool_create(4, &pool));
  int64_t dims[2] = {16, 1500};
  iron_dtype_t k = IRON_DTYPE_F32;
  check_sort(1, &k, true, 2, dims, 1, CMP_JAX, pool);
  check_sort(1, &k, true, 2, dims, 0, CMP_JAX, pool);
  iron_threadpool_destroy(pool);
}

static void test_edge_shapes(void) {
  iron_dtype_t k = IRON_DTYPE_S32;
  int64_t one[1] = {1}, zero[1] = {0}, z2[2] = {3, 0};
  check_sort(1, &k, true, 1, one, 0, CMP_JAX, NULL);
  check_sort(1, &k, true, 1, zero, 0, CMP_JAX, NULL);
  check_sort(1, &k, false, 2, z2, 0, CMP_JAX, NULL);
  // Negative dimension counts from the back.
  int64_t dims[2] = {4, 9};
  iron_dtype_t dts[1] = {IRON_DTYPE_S32};
  iron_tensor_t in = make_tensor(IRON_DTYPE_S32, 2, dims);
  iron_tensor_t a = make_tensor(IRON_DTYPE_S32, 2, dims);
  iron_tensor_t b = make_tensor(IRON_DTYPE_S32, 2, dims);
  fill_random(&in);
  begin_sort(1, dts, 2, dims, -1);
  ret(jax_lt(1, true));
  CHECK_OK(run_sort(1, &in, &a, false, NULL, NULL));
  begin_sort(1, dts, 2, dims, 1);
  ret(jax_lt(1, true));
  CHECK_OK(run_sort(1, &in, &b, false, NULL, NULL));
  CHECK(memcmp(a.data, b.data, a.nbytes) == 0);
  free(in.data), free(a.data), free(b.data);
}

// A comparator outside the fast patterns (negate is not recognised) goes
// through call_region and still sorts: descending by negation.
static void test_generic_only(void) {
  int64_t dims[1] = {200};
  iron_dtype_t dts[2] = {IRON_DTYPE_S32, IRON_DTYPE_S32};
  iron_tensor_t in[2], out[2], ref[2];
  for (int i = 0; i < 2; ++i) {
    in[i] = make_tensor(dts[i], 1, dims);
    out[i] = make_tensor(dts[i], 1, dims);
    ref[i] = make_tensor(dts[i], 1, dims);
  }
  int32_t *keys = (int32_t *)in[0].data, *pay = (int32_t *)in[1].data;
  for (int i = 0; i < 200; ++i) keys[i] = (int32_t)(rnd() % 13) - 6, pay[i] = i;
  begin_sort(2, dts, 1, dims, 0);
  ret(cmp(IRON_CMP_LT, IRON_CMP_TYPE_SIGNED,
          unop(IRON_OP_NEGATE, arg(0), IRON_DTYPE_S32),
          unop(IRON_OP_NEGATE, arg(1), IRON_DTYPE_S32)));
  bool fast_ok = true;
  CHECK_OK(run_sort(2, in, out, false, NULL, &fast_ok));
  CHECK(!fast_ok);  // needs the region
  ref_sort(2, in, ref, 1, 0, false, true);
  CHECK(memcmp(out[0].data, ref[0].data, ref[0].nbytes) == 0);
  CHECK(memcmp(out[1].data, ref[1].data, ref[1].nbytes) == 0);
  // Errors from the region propagate.
  begin_sort(2, dts, 1, dims, 0);
  ret(cmp(IRON_CMP_LT, IRON_CMP_TYPE_SIGNED,
          binop(IRON_OP_ADD, arg(0), arg(2)), arg(1)));
  iron_status_t s = run_sort(2, in, out, false, NULL, NULL);
  CHECK(s != IRON_OK);
  iron_status_free(s);
  free_tensors(in, 2), free_tensors(out, 2), free_tensors(ref, 2);
}

// Patterns that look close but must not be fast-pathed.
static void test_not_fast(void) {
  int64_t dims[1] = {8};
  iron_dtype_t f = IRON_DTYPE_F32;
  iron_dtype_t two[2] = {IRON_DTYPE_F32, IRON_DTYPE_F32};
  const iron_kernel_t *k = iron_host_kernel_lookup(IRON_OP_SORT);
  setenv("IRON_SORT_GENERIC", "0", 1);
  void *p = NULL;
  iron_status_t s;
  // Same-side arguments (lhs vs lhs).
  begin_sort(2, two, 1, dims, 0);
  ret(cmp(IRON_CMP_LT, IRON_CMP_TYPE_FLOAT, arg(0), arg(2)));
  s = k->prepare(&g_sort, NULL, &p);
  CHECK(s != IRON_OK);
  iron_status_free(s);
  // LE is not a strict order.
  begin_sort(1, &f, 1, dims, 0);
  ret(cmp(IRON_CMP_LE, IRON_CMP_TYPE_FLOAT, arg(0), arg(1)));
  s = k->prepare(&g_sort, NULL, &p);
  CHECK(s != IRON_OK);
  iron_status_free(s);
  // Canonicalisation applied to one side only.
  begin_sort(1, &f, 1, dims, 0);
  ret(cmp(IRON_CMP_LT, IRON_CMP_TYPE_TOTALORDER, canon(arg(0)), arg(1)));
  s = k->prepare(&g_sort, NULL, &p);
  CHECK(s != IRON_OK);
  iron_status_free(s);
  // Lexicographic with a mismatched EQ.
  begin_sort(2, two, 1, dims, 0);
  ret(binop(IRON_OP_OR, cmp(IRON_CMP_LT, IRON_CMP_TYPE_FLOAT, arg(0), arg(1)),
            binop(IRON_OP_AND,
                  cmp(IRON_CMP_EQ, IRON_CMP_TYPE_FLOAT, arg(2), arg(3)),
                  cmp(IRON_CMP_LT, IRON_CMP_TYPE_FLOAT, arg(2), arg(3)))));
  s = k->prepare(&g_sort, NULL, &p);
  CHECK(s != IRON_OK);
  iron_status_free(s);
  // The well-formed version of that is fast.
  begin_sort(2, two, 1, dims, 0);
  ret(binop(IRON_OP_OR, cmp(IRON_CMP_LT, IRON_CMP_TYPE_FLOAT, arg(0), arg(1)),
            binop(IRON_OP_AND,
                  cmp(IRON_CMP_EQ, IRON_CMP_TYPE_FLOAT, arg(1), arg(0)),
                  cmp(IRON_CMP_LT, IRON_CMP_TYPE_FLOAT, arg(2), arg(3)))));
  CHECK_OK(k->prepare(&g_sort, NULL, &p));
  free(p);
}

// Every sort in the committed corpus of real jax artifacts (comparator
// constants hoisted out of the region, x64 variants, top_k's GT) must be
// recognised by the fast path: prepare without a compiled region succeeds.
static void walk_sorts(const iron_ir_region_t *r, int *out_sorts,
                       int *out_fast) {
  for (uint32_t b = 0; b < r->num_blocks; ++b)
    for (uint32_t i = 0; i < r->blocks[b].num_ops; ++i) {
      const iron_ir_op_t *op = r->blocks[b].ops[i];
      if (op->kind == IRON_OP_SORT) {
        (*out_sorts)++;
        void *params = NULL;
        setenv("IRON_SORT_GENERIC", "0", 1);
        iron_status_t s =
            iron_host_kernel_lookup(IRON_OP_SORT)->prepare(op, NULL, &params);
        if (s) {
          fprintf(stderr, "  not fast: %s\n", iron_status_message(s));
          iron_status_free(s);
        } else {
          (*out_fast)++;
        }
        free(params);
      }
      for (uint32_t k = 0; k < op->num_regions; ++k)
        walk_sorts(&op->regions[k], out_sorts, out_fast);
    }
}

static void test_corpus_sorts_are_fast(void) {
  const char *dir = IRON_TEST_DATA_DIR "/corpus";
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  if (!d) return;
  int sorts = 0, fast = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 8 || strcmp(e->d_name + len - 7, ".mlirbc") != 0) continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *bytes = malloc((size_t)size);
    size_t got = bytes ? fread(bytes, 1, (size_t)size, f) : 0;
    fclose(f);
    iron_ir_module_t *m = NULL;
    if (got == (size_t)size) {
      iron_status_t s = iron_stablehlo_read(bytes, (size_t)size, &m);
      iron_status_free(s);
    }
    free(bytes);
    if (!m) continue;
    int before = fast;
    int sorts_before = sorts;
    for (uint32_t i = 0; i < m->num_funcs; ++i)
      walk_sorts(&m->funcs[i].body, &sorts, &fast);
    if (fast - before != sorts - sorts_before)
      fprintf(stderr, "  in %s\n", e->d_name);
    iron_ir_module_destroy(m);
  }
  closedir(d);
  CHECK(sorts >= 10);  // the corpus has sort, argsort, top_k, permutation
  CHECK_EQ_INT(fast, sorts);
}

static const iron_test_case_t kTests[] = {
    {"corpus_sorts_are_fast", test_corpus_sorts_are_fast},
    {"jnp_sort_all_dtypes_ranks", test_jnp_sort_all_dtypes_ranks},
    {"argsort_stability", test_argsort_stability},
    {"multi_key", test_multi_key},
    {"descending_forms", test_descending_forms},
    {"hoisted_constants", test_hoisted_constants},
    {"jax_cpu_argsort", test_jax_cpu_argsort},
    {"threaded_large", test_threaded_large},
    {"edge_shapes", test_edge_shapes},
    {"generic_only", test_generic_only},
    {"not_fast", test_not_fast},
};
IRON_TEST_MAIN(kTests)
