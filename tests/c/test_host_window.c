// Host reduce_window / select_and_scatter against naive references written
// from the definition (padding and base-dilation holes are skipped; window
// elements combine in row-major window order; select keeps the running
// choice while select(cur, cand) holds). Random shapes, windows, strides,
// paddings and dilations; typed fast paths on several dtypes and the generic
// call_region paths (per element and vectorized) with a fake runtime.
#include <math.h>

#include "base/half.h"
#include "base/threadpool.h"
#include "compiler/plan.h"
#include "host_test_ops.h"
#include "test.h"

static iron_threadpool_t *g_pool;

// A body region `return op(arg0, arg1)`; for compare the result is i1 and the
// direction is stored as an enum attribute.
typedef struct ht_body {
  iron_ir_region_t region;
  iron_ir_block_t block;
  iron_ir_value_t args[2];
  iron_ir_type_t type, rtype;
  iron_ir_op_t ops[2];
  iron_ir_op_t *op_ptrs[2];
  iron_ir_value_t *bin_operands[2];
  iron_ir_value_t *ret_operands[1];
  iron_ir_value_t result;
  iron_ir_attr_t dir_attr, type_attr;
  iron_ir_named_attr_t named[2];
} ht_body_t;

static void ht_body_init(ht_body_t *b, iron_op_kind_t kind, iron_dtype_t dt,
                         bool swapped, int32_t cmp_dir) {
  memset(b, 0, sizeof(*b));
  ht_type(&b->type, dt, 0, NULL);
  ht_type(&b->rtype, kind == IRON_OP_COMPARE ? IRON_DTYPE_PRED : dt, 0, NULL);
  for (int i = 0; i < 2; ++i) {
    b->args[i].type = &b->type;
    b->args[i].def_block = &b->block;
    b->args[i].index = (uint32_t)i;
  }
  b->bin_operands[0] = &b->args[swapped ? 1 : 0];
  b->bin_operands[1] = &b->args[swapped ? 0 : 1];
  b->ops[0].kind = kind;
  b->ops[0].name = iron_op_kind_name(kind);
  b->ops[0].num_operands = 2;
  b->ops[0].operands = b->bin_operands;
  b->ops[0].num_results = 1;
  b->ops[0].results = &b->result;
  if (kind == IRON_OP_COMPARE) {
    b->dir_attr.kind = IRON_ATTR_ENUM;
    b->dir_attr.enumv.kind = IRON_ENUM_COMPARISON_DIRECTION;
    b->dir_attr.enumv.value = cmp_dir;
    b->type_attr.kind = IRON_ATTR_ENUM;
    b->type_attr.enumv.kind = IRON_ENUM_COMPARISON_TYPE;
    b->type_attr.enumv.value = iron_dtype_is_float(dt)
                                   ? IRON_CMP_TYPE_FLOAT
                                   : iron_dtype_is_signed_int(dt)
                                         ? IRON_CMP_TYPE_SIGNED
                                         : IRON_CMP_TYPE_UNSIGNED;
    b->named[0].name = "comparison_direction";
    b->named[0].value = &b->dir_attr;
    b->named[1].name = "compare_type";
    b->named[1].value = &b->type_attr;
    b->ops[0].num_attrs = 2;
    b->ops[0].attrs = b->named;
  }
  b->result.type = &b->rtype;
  b->result.def_op = &b->ops[0];
  b->ret_operands[0] = &b->result;
  b->ops[1].kind = IRON_OP_RETURN;
  b->ops[1].name = "stablehlo.return";
  b->ops[1].num_operands = 1;
  b->ops[1].operands = b->ret_operands;
  b->op_ptrs[0] = &b->ops[0];
  b->op_ptrs[1] = &b->ops[1];
  b->block.num_args = 2;
  b->block.args = b->args;
  b->block.num_ops = 2;
  b->block.ops = b->op_ptrs;
  b->block.parent = &b->region;
  b->region.num_blocks = 1;
  b->region.blocks = &b->block;
}

// ---------------------------------------------------------------------------
// Values: ints as int64 (sign/zero-extended), floats as double.

static int64_t load_i(iron_dtype_t dt, const void *p, int64_t k) {
  switch (dt) {
    case IRON_DTYPE_PRED: case IRON_DTYPE_U8: return ((uint8_t *)p)[k];
    case IRON_DTYPE_S8: return ((int8_t *)p)[k];
    case IRON_DTYPE_S16: return ((int16_t *)p)[k];
    case IRON_DTYPE_U16: return ((uint16_t *)p)[k];
    case IRON_DTYPE_S32: return ((int32_t *)p)[k];
    case IRON_DTYPE_U32: return ((uint32_t *)p)[k];
    default: return ((int64_t *)p)[k];
  }
}
static void store_i(iron_dtype_t dt, void *p, int64_t k, int64_t v) {
  switch (iron_dtype_size(dt)) {
    case 1: ((uint8_t *)p)[k] = (uint8_t)(dt == IRON_DTYPE_PRED ? v & 1 : v); break;
    case 2: ((uint16_t *)p)[k] = (uint16_t)v; break;
    case 4: ((uint32_t *)p)[k] = (uint32_t)v; break;
    default: ((int64_t *)p)[k] = v; break;
  }
}
// Floats round through the storage type after each step (half types: each
// op in f32, result rounded to the half type, as XLA:CPU does).
static double load_f(iron_dtype_t dt, const void *p, int64_t k) {
  switch (dt) {
    case IRON_DTYPE_F16: return iron_f16_to_f32(((uint16_t *)p)[k]);
    case IRON_DTYPE_BF16: return iron_bf16_to_f32(((uint16_t *)p)[k]);
    case IRON_DTYPE_F32: return ((float *)p)[k];
    default: return ((double *)p)[k];
  }
}
static void store_f(iron_dtype_t dt, void *p, int64_t k, double v) {
  switch (dt) {
    case IRON_DTYPE_F16: ((uint16_t *)p)[k] = iron_f32_to_f16((float)v); break;
    case IRON_DTYPE_BF16: ((uint16_t *)p)[k] = iron_f32_to_bf16((float)v); break;
    case IRON_DTYPE_F32: ((float *)p)[k] = (float)v; break;
    default: ((double *)p)[k] = v; break;
  }
}

static bool is_f(iron_dtype_t dt) { return iron_dtype_is_float(dt); }
static bool is_c(iron_dtype_t dt) { return iron_dtype_is_complex(dt); }

// Rounds to f32 (through a float object, so the rounding cannot be elided).
static double rnd32(double v) {
  volatile float f = (float)v;
  return f;
}

static double f_acc(iron_dtype_t dt, double v) {
  if (dt == IRON_DTYPE_F16) return iron_f16_to_f32(iron_f32_to_f16((float)v));
  if (dt == IRON_DTYPE_BF16)
    return iron_bf16_to_f32(iron_f32_to_bf16((float)v));
  return dt == IRON_DTYPE_F64 ? v : (double)(float)v;
}

typedef struct cval {
  double re, im;
  int64_t i;
} cval_t;

static cval_t ref_combine(iron_op_kind_t k, iron_dtype_t dt, cval_t a,
                          cval_t b) {
  cval_t r = {0, 0, 0};
  if (is_c(dt)) {
    bool f = dt == IRON_DTYPE_C64;
    if (k == IRON_OP_ADD) {
      r.re = a.re + b.re;
      r.im = a.im + b.im;
    } else {
      r.re = f ? (double)((float)a.re * (float)b.re -
                          (float)a.im * (float)b.im)
               : a.re * b.re - a.im * b.im;
      r.im = f ? (double)((float)a.re * (float)b.im +
                          (float)a.im * (float)b.re)
               : a.re * b.im + a.im * b.re;
    }
    if (f) {
      r.re = rnd32(r.re);
      r.im = rnd32(r.im);
    }
    return r;
  }
  if (is_f(dt)) {
    double x = a.re, y = b.re;
    switch (k) {
      case IRON_OP_ADD: r.re = f_acc(dt, x + y); break;
      case IRON_OP_MULTIPLY: r.re = f_acc(dt, x * y); break;
      case IRON_OP_SUBTRACT: r.re = f_acc(dt, x - y); break;
      case IRON_OP_MAXIMUM: r.re = (isnan(x) || isnan(y)) ? NAN : x > y ? x : y; break;
      default: r.re = (isnan(x) || isnan(y)) ? NAN : x < y ? x : y; break;
    }
    return r;
  }
  uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i;
  bool uns = iron_dtype_is_unsigned_int(dt) || dt == IRON_DTYPE_PRED;
  switch (k) {
    case IRON_OP_ADD: r.i = (int64_t)(x + y); break;
    case IRON_OP_MULTIPLY: r.i = (int64_t)(x * y); break;
    case IRON_OP_AND: r.i = (int64_t)(x & y); break;
    case IRON_OP_OR: r.i = (int64_t)(x | y); break;
    case IRON_OP_XOR: r.i = (int64_t)(x ^ y); break;
    case IRON_OP_MAXIMUM:
      r.i = uns ? (int64_t)(x > y ? x : y) : (a.i > b.i ? a.i : b.i);
      break;
    default:
      r.i = uns ? (int64_t)(x < y ? x : y) : (a.i < b.i ? a.i : b.i);
      break;
  }
  return r;
}

static cval_t load_v(iron_dtype_t dt, const void *p, int64_t k) {
  cval_t v = {0, 0, 0};
  if (is_c(dt)) {
    if (dt == IRON_DTYPE_C64) {
      v.re = ((float *)p)[2 * k];
      v.im = ((float *)p)[2 * k + 1];
    } else {
      v.re = ((double *)p)[2 * k];
      v.im = ((double *)p)[2 * k + 1];
    }
  } else if (is_f(dt)) {
    v.re = load_f(dt, p, k);
  } else {
    v.i = load_i(dt, p, k);
  }
  return v;
}
static void store_v(iron_dtype_t dt, void *p, int64_t k, cval_t v) {
  if (dt == IRON_DTYPE_C64) {
    ((float *)p)[2 * k] = (float)v.re;
    ((float *)p)[2 * k + 1] = (float)v.im;
  } else if (dt == IRON_DTYPE_C128) {
    ((double *)p)[2 * k] = v.re;
    ((double *)p)[2 * k + 1] = v.im;
  } else if (is_f(dt)) {
    store_f(dt, p, k, v.re);
  } else {
    store_i(dt, p, k, v.i);
  }
}

static void fill_random(iron_tensor_t *t, iron_op_kind_t k) {
  for (int64_t i = 0; i < t->count; ++i) {
    cval_t v;
    v.re = (double)(int64_t)(ht_rand() % 2001 - 1000) / 250.0;
    v.im = (double)(int64_t)(ht_rand() % 2001 - 1000) / 250.0;
    if (k == IRON_OP_MULTIPLY) {
      v.re = 0.8 + (double)(ht_rand() % 401) / 1000.0;
      v.im = (double)(int64_t)(ht_rand() % 201 - 100) / 1000.0;
    }
    if (k == IRON_OP_MAXIMUM && ht_rand() % 50 == 0) v.re = NAN;
    v.i = (int64_t)ht_rand();
    if (t->dtype == IRON_DTYPE_PRED) v.i &= 1;
    store_v(t->dtype, t->data, i, v);
  }
}

static bool same_elem(iron_dtype_t dt, const void *a, const void *b,
                      int64_t k) {
  if (is_f(dt)) {
    double x = load_f(dt, a, k), y = load_f(dt, b, k);
    return (isnan(x) && isnan(y)) || x == y;
  }
  size_t es = iron_dtype_size(dt);
  return memcmp((const char *)a + (size_t)k * es, (const char *)b + (size_t)k * es,
                es) == 0;
}

// ---------------------------------------------------------------------------
// Window geometry shared by the references.

typedef struct wcfg {
  int rank;
  int64_t in[4], win[4], str[4], bd[4], wd[4], pad[8], out[4];
} wcfg_t;

static bool random_cfg(wcfg_t *c, bool dilations) {
  c->rank = (int)ht_rand_range(1, 3);
  for (int d = 0; d < c->rank; ++d) {
    c->in[d] = ht_rand() % 15 == 0 ? 0 : ht_rand_range(1, 7);
    c->win[d] = ht_rand_range(1, 4);
    c->str[d] = ht_rand_range(1, 3);
    c->bd[d] = dilations && ht_rand() % 3 == 0 ? ht_rand_range(2, 3) : 1;
    c->wd[d] = dilations && ht_rand() % 3 == 0 ? ht_rand_range(2, 3) : 1;
    c->pad[2 * d] = ht_rand() % 2 ? ht_rand_range(0, 3) : 0;
    c->pad[2 * d + 1] = ht_rand() % 2 ? ht_rand_range(0, 3) : 0;
    int64_t dil = c->in[d] == 0 ? 0 : (c->in[d] - 1) * c->bd[d] + 1;
    int64_t padded = dil + c->pad[2 * d] + c->pad[2 * d + 1];
    int64_t ext = (c->win[d] - 1) * c->wd[d] + 1;
    c->out[d] = padded < ext ? 0 : (padded - ext) / c->str[d] + 1;
  }
  return true;
}

static int64_t count_of(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= dims[d];
  return n;
}

// Input flat index for output o and window position k, or -1 when it falls
// on padding or a hole.
static int64_t ref_src(const wcfg_t *c, int64_t o, int64_t k) {
  int64_t oi[4], ki[4];
  for (int d = c->rank - 1; d >= 0; --d) {
    oi[d] = o % c->out[d];
    o /= c->out[d];
    ki[d] = k % c->win[d];
    k /= c->win[d];
  }
  int64_t f = 0;
  for (int d = 0; d < c->rank; ++d) {
    int64_t pos = oi[d] * c->str[d] + ki[d] * c->wd[d] - c->pad[2 * d];
    int64_t dil = c->in[d] == 0 ? 0 : (c->in[d] - 1) * c->bd[d] + 1;
    if (pos < 0 || pos >= dil || pos % c->bd[d]) return -1;
    f = f * c->in[d] + pos / c->bd[d];
  }
  return f;
}

static void build_rw(ht_op_t *b, const wcfg_t *c, iron_dtype_t dt,
                     iron_ir_region_t *body) {
  ht_init(b, IRON_OP_REDUCE_WINDOW);
  ht_operand(b, dt, c->rank, c->in);
  ht_operand(b, dt, 0, NULL);
  ht_result(b, dt, c->rank, c->out);
  ht_attr_i64(b, "window_dimensions", c->rank, c->win);
  ht_attr_i64(b, "window_strides", c->rank, c->str);
  ht_attr_i64(b, "base_dilations", c->rank, c->bd);
  ht_attr_i64(b, "window_dilations", c->rank, c->wd);
  ht_attr_i64(b, "padding", 2 * c->rank, c->pad);
  b->op.num_regions = 1;
  b->op.regions = body;
}

static cval_t init_for(iron_op_kind_t k, iron_dtype_t dt) {
  cval_t v = {0, 0, 0};
  if (k == IRON_OP_MULTIPLY) { v.re = 1; v.i = 1; }
  if (k == IRON_OP_AND) v.i = -1;
  if (k == IRON_OP_MAXIMUM) { v.re = -INFINITY; v.i = INT64_MIN; }
  if (k == IRON_OP_MINIMUM) { v.re = INFINITY; v.i = INT64_MAX; }
  if (iron_dtype_is_unsigned_int(dt) && k == IRON_OP_MAXIMUM) v.i = 0;
  if (iron_dtype_is_unsigned_int(dt) && k == IRON_OP_MINIMUM) v.i = -1;
  // A non-identity init for add shows that padding is skipped, not combined.
  if (k == IRON_OP_ADD) { v.re = 0.5; v.i = 3; }
  return v;
}

// ---------------------------------------------------------------------------
// Fake runtime for the generic paths: subtract body (acc - x) for
// reduce_window; for select_and_scatter the select region (GE on f32) and
// the scatter region (add) are told apart by pointer.

static struct iron_region g_sel_region, g_scat_region;
static int g_calls;

static iron_status_t fake_call_region(const iron_kernel_ctx_t *ctx,
                                      const iron_region_t *region,
                                      const iron_tensor_t *const *in,
                                      iron_tensor_t *const *out) {
  (void)ctx;
  g_calls++;
  int64_t n = out[0]->count;
  for (int64_t i = 0; i < n; ++i) {
    int64_t ia = in[0]->count == 1 ? 0 : i, ib = in[1]->count == 1 ? 0 : i;
    float a = ((float *)in[0]->data)[ia], b = ((float *)in[1]->data)[ib];
    if (region == &g_sel_region)
      ((uint8_t *)out[0]->data)[i] = a >= b;
    else if (region == &g_scat_region)
      ((float *)out[0]->data)[i] = a + b;
    else
      ((float *)out[0]->data)[i] = a - b;
  }
  return IRON_OK;
}

// XLA:CPU's rewrite of cumulative windows longer than 16 (a two-level scan
// over blocks of 16, the tail padded with init; see window.c), written out
// plainly: v[0..n) in, inclusive scan out.
static void ref_scan(iron_op_kind_t k, iron_dtype_t dt, cval_t *v, int64_t n,
                     cval_t init, bool rev) {
  if (n <= 16) {
    cval_t out[16];
    for (int64_t j = 0; j < n; ++j) {
      cval_t acc = init;
      for (int64_t e = rev ? j : 0; e <= (rev ? n - 1 : j); ++e)
        acc = ref_combine(k, dt, acc, v[e]);
      out[j] = acc;
    }
    memcpy(v, out, sizeof(cval_t) * (size_t)n);
    return;
  }
  int64_t nb = (n + 15) / 16;
  cval_t *w = malloc(sizeof(cval_t) * (size_t)(nb * 16));
  cval_t *col = malloc(sizeof(cval_t) * (size_t)nb);
  for (int64_t i = 0; i < nb * 16; ++i) w[i] = i < n ? v[i] : init;
  for (int64_t b = 0; b < nb; ++b) {
    ref_scan(k, dt, w + b * 16, 16, init, rev);
    col[b] = w[b * 16 + (rev ? 0 : 15)];
  }
  ref_scan(k, dt, col, nb, init, rev);
  for (int64_t i = 0; i < n; ++i) {
    int64_t b = i / 16;
    cval_t across = rev ? (b + 1 < nb ? col[b + 1] : init)
                        : (b > 0 ? col[b - 1] : init);
    v[i] = ref_combine(k, dt, w[i], across);
  }
  free(w);
  free(col);
}

// Set while the config is a cumulative window (scan along g_scan_dim).
static int g_scan_dim = -1;

static int run_rw_case(iron_op_kind_t k, iron_dtype_t dt, const wcfg_t *c,
                       int mode) {  // mode 0 fast, 1 generic scalar, 2 vec
  ht_body_t body;
  ht_body_init(&body, k, dt, ht_rand() % 2, 0);
  struct iron_region region;
  memset(&region, 0, sizeof(region));
  region.ir = &body.region;
  region.elementwise = mode == 2;
  iron_region_t *regions[1] = {&region};
  ht_op_t b;
  build_rw(&b, c, dt, &body.region);
  iron_tensor_t *in = ht_tensor(dt, c->rank, c->in);
  iron_tensor_t *init = ht_tensor(dt, 0, NULL);
  iron_tensor_t *out = ht_tensor(dt, c->rank, c->out);
  iron_tensor_t *ref = ht_tensor(dt, c->rank, c->out);
  fill_random(in, k);
  cval_t iv = init_for(k, dt);
  store_v(dt, init->data, 0, iv);
  iv = load_v(dt, init->data, 0);
  const iron_kernel_t *kern =
      iron_host_kernel_lookup(IRON_OP_REDUCE_WINDOW);
  void *params = NULL;
  int bad = 0;
  iron_status_t st = kern->prepare(&b.op, regions, &params);
  if (st) {
    iron_status_free(st);
    bad = 1000;
  } else {
    iron_kernel_ctx_t ctx = {0};
    ctx.pool = mode ? NULL : g_pool;
    ctx.call_region = fake_call_region;
    iron_tensor_t *ins[2] = {in, init}, *outs[1] = {out};
    st = kern->run(&ctx, params, (const iron_tensor_t *const *)ins,
                   (iron_tensor_t *const *)outs);
    if (st) {
      iron_status_free(st);
      bad = 1000;
    }
    kern->destroy(params);
  }
  int64_t W = count_of(c->rank, c->win);
  if (g_scan_dim >= 0) {
    int sd = g_scan_dim;
    int64_t n = c->in[sd], inner = 1, outer = 1;
    for (int d = 0; d < sd; ++d) outer *= c->in[d];
    for (int d = sd + 1; d < c->rank; ++d) inner *= c->in[d];
    cval_t *line = malloc(sizeof(cval_t) * (size_t)n);
    for (int64_t l = 0; l < outer * inner; ++l) {
      int64_t base = (l / inner) * n * inner + l % inner;
      for (int64_t i = 0; i < n; ++i)
        line[i] = load_v(dt, in->data, base + i * inner);
      ref_scan(k, dt, line, n, iv, c->pad[2 * sd] == 0);
      for (int64_t i = 0; i < n; ++i) {
        store_v(dt, ref->data, base + i * inner, line[i]);
        if (!same_elem(dt, out->data, ref->data, base + i * inner)) bad++;
      }
    }
    free(line);
    W = 0;
  }
  for (int64_t o = 0; o < out->count && W; ++o) {
    cval_t acc = iv;
    for (int64_t w = 0; w < W; ++w) {
      int64_t s = ref_src(c, o, w);
      if (s < 0) continue;
      acc = ref_combine(k, dt, acc, load_v(dt, in->data, s));
    }
    store_v(dt, ref->data, o, acc);
    if (!same_elem(dt, out->data, ref->data, o)) bad++;
  }
  ht_tensor_free(in);
  ht_tensor_free(init);
  ht_tensor_free(out);
  ht_tensor_free(ref);
  return bad;
}

static void test_rw_fast_random(void) {
  static const struct {
    iron_op_kind_t k;
    iron_dtype_t dt;
  } cases[] = {
      {IRON_OP_ADD, IRON_DTYPE_S32},     {IRON_OP_MAXIMUM, IRON_DTYPE_S32},
      {IRON_OP_MULTIPLY, IRON_DTYPE_S64}, {IRON_OP_MINIMUM, IRON_DTYPE_U8},
      {IRON_OP_ADD, IRON_DTYPE_U16},     {IRON_OP_AND, IRON_DTYPE_U32},
      {IRON_OP_XOR, IRON_DTYPE_S8},      {IRON_OP_MAXIMUM, IRON_DTYPE_U64},
      {IRON_OP_ADD, IRON_DTYPE_F32},     {IRON_OP_MAXIMUM, IRON_DTYPE_F32},
      {IRON_OP_MINIMUM, IRON_DTYPE_F64}, {IRON_OP_MULTIPLY, IRON_DTYPE_F64},
      {IRON_OP_ADD, IRON_DTYPE_BF16},    {IRON_OP_MAXIMUM, IRON_DTYPE_F16},
      {IRON_OP_OR, IRON_DTYPE_PRED},     {IRON_OP_AND, IRON_DTYPE_PRED},
      {IRON_OP_ADD, IRON_DTYPE_C64},     {IRON_OP_MULTIPLY, IRON_DTYPE_C128},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    for (int iter = 0; iter < 30; ++iter) {
      wcfg_t c;
      random_cfg(&c, true);
      int bad = run_rw_case(cases[i].k, cases[i].dt, &c, 0);
      if (bad) fprintf(stderr, "case %zu iter %d: %d bad\n", i, iter, bad);
      CHECK_EQ_INT(bad, 0);
    }
  }
}

static void test_rw_generic(void) {
  for (int mode = 1; mode <= 2; ++mode)
    for (int iter = 0; iter < 60; ++iter) {
      wcfg_t c;
      random_cfg(&c, true);
      CHECK_EQ_INT(run_rw_case(IRON_OP_SUBTRACT, IRON_DTYPE_F32, &c, mode), 0);
    }
}

// Cumulative windows (window n, padding n-1 low or high) along either dim,
// long and short (<= 16 is not rewritten by XLA), against the blocked
// reference (with a non-identity add init, XLA's rewrite folds the init in
// several times; integers show that too).
static void test_rw_cumsum(void) {
  static const int64_t lens[] = {5, 16, 17, 300, 1500};
  for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); ++li)
    for (int sd = 0; sd < 2; ++sd)
      for (int rev = 0; rev < 2; ++rev) {
        int64_t n = lens[li];
        wcfg_t c;
        memset(&c, 0, sizeof(c));
        c.rank = 2;
        c.in[sd] = n;
        c.in[1 - sd] = 3;
        c.win[sd] = n;
        c.win[1 - sd] = 1;
        c.str[0] = c.str[1] = c.bd[0] = c.bd[1] = c.wd[0] = c.wd[1] = 1;
        c.pad[2 * sd + rev] = n - 1;
        c.out[0] = c.in[0];
        c.out[1] = c.in[1];
        g_scan_dim = sd;
        CHECK_EQ_INT(run_rw_case(IRON_OP_ADD, IRON_DTYPE_S32, &c, 0), 0);
        CHECK_EQ_INT(run_rw_case(IRON_OP_MAXIMUM, IRON_DTYPE_S64, &c, 0), 0);
        CHECK_EQ_INT(run_rw_case(IRON_OP_ADD, IRON_DTYPE_F32, &c, 0), 0);
        CHECK_EQ_INT(run_rw_case(IRON_OP_ADD, IRON_DTYPE_BF16, &c, 0), 0);
        CHECK_EQ_INT(run_rw_case(IRON_OP_MULTIPLY, IRON_DTYPE_F64, &c, 0), 0);
        CHECK_EQ_INT(run_rw_case(IRON_OP_MAXIMUM, IRON_DTYPE_F16, &c, 0), 0);
        CHECK_EQ_INT(run_rw_case(IRON_OP_ADD, IRON_DTYPE_S16, &c, 0), 0);
        CHECK_EQ_INT(run_rw_case(IRON_OP_ADD, IRON_DTYPE_C64, &c, 0), 0);
        CHECK_EQ_INT(run_rw_case(IRON_OP_MULTIPLY, IRON_DTYPE_C128, &c, 0), 0);
        g_scan_dim = -1;
      }
}

static void test_rw_bad_result(void) {
  ht_body_t body;
  ht_body_init(&body, IRON_OP_ADD, IRON_DTYPE_F32, false, 0);
  wcfg_t c;
  memset(&c, 0, sizeof(c));
  c.rank = 1;
  c.in[0] = 5;
  c.win[0] = 2;
  c.str[0] = c.bd[0] = c.wd[0] = 1;
  c.out[0] = 5;  // should be 4
  ht_op_t b;
  build_rw(&b, &c, IRON_DTYPE_F32, &body.region);
  void *params = NULL;
  iron_status_t st = iron_host_kernel_lookup(IRON_OP_REDUCE_WINDOW)
                         ->prepare(&b.op, NULL, &params);
  CHECK(st != IRON_OK);
  iron_status_free(st);
}

// ---------------------------------------------------------------------------
// select_and_scatter

static int run_sas_case(iron_dtype_t dt, int32_t dir, bool swapped,
                        const wcfg_t *c, bool generic) {
  ht_body_t sel, scat;
  ht_body_init(&sel, IRON_OP_COMPARE, dt, swapped, dir);
  ht_body_init(&scat, IRON_OP_ADD, dt, false, 0);
  // Generic mode: a select body the kernel cannot pattern-match.
  if (generic) sel.ops[0].kind = IRON_OP_SUBTRACT;
  iron_ir_region_t regs[2] = {sel.region, scat.region};
  memset(&g_sel_region, 0, sizeof(g_sel_region));
  memset(&g_scat_region, 0, sizeof(g_scat_region));
  g_sel_region.ir = &sel.region;
  g_scat_region.ir = &scat.region;
  iron_region_t *regions[2] = {&g_sel_region, &g_scat_region};
  ht_op_t b;
  ht_init(&b, IRON_OP_SELECT_AND_SCATTER);
  ht_operand(&b, dt, c->rank, c->in);
  ht_operand(&b, dt, c->rank, c->out);
  ht_operand(&b, dt, 0, NULL);
  ht_result(&b, dt, c->rank, c->in);
  ht_attr_i64(&b, "window_dimensions", c->rank, c->win);
  ht_attr_i64(&b, "window_strides", c->rank, c->str);
  ht_attr_i64(&b, "padding", 2 * c->rank, c->pad);
  b.op.num_regions = 2;
  b.op.regions = regs;
  iron_tensor_t *x = ht_tensor(dt, c->rank, c->in);
  iron_tensor_t *src = ht_tensor(dt, c->rank, c->out);
  iron_tensor_t *init = ht_tensor(dt, 0, NULL);
  iron_tensor_t *out = ht_tensor(dt, c->rank, c->in);
  iron_tensor_t *ref = ht_tensor(dt, c->rank, c->in);
  // Few distinct values so ties (first wins) are common.
  for (int64_t i = 0; i < x->count; ++i) {
    cval_t v = {(double)(ht_rand() % 5), 0, (int64_t)(ht_rand() % 5) - 2};
    if (is_f(dt) && ht_rand() % 40 == 0) v.re = NAN;
    store_v(dt, x->data, i, v);
  }
  for (int64_t i = 0; i < src->count; ++i) {
    cval_t v = {(double)(ht_rand() % 100) / 8.0, 0,
                (int64_t)(ht_rand() % 100)};
    store_v(dt, src->data, i, v);
  }
  cval_t iv = {0.25, 0, 7};
  store_v(dt, init->data, 0, iv);
  const iron_kernel_t *kern =
      iron_host_kernel_lookup(IRON_OP_SELECT_AND_SCATTER);
  void *params = NULL;
  int bad = 0;
  iron_status_t st = kern->prepare(&b.op, regions, &params);
  if (st) {
    iron_status_free(st);
    bad = 1000;
  } else {
    iron_kernel_ctx_t ctx = {0};
    ctx.pool = g_pool;
    ctx.call_region = fake_call_region;
    iron_tensor_t *ins[3] = {x, src, init}, *outs[1] = {out};
    g_calls = 0;
    st = kern->run(&ctx, params, (const iron_tensor_t *const *)ins,
                   (iron_tensor_t *const *)outs);
    if (st) {
      iron_status_free(st);
      bad = 1000;
    }
    kern->destroy(params);
    if (!generic && g_calls != 0) bad += 10000;
  }
  // Reference.
  for (int64_t i = 0; i < ref->count; ++i) store_v(dt, ref->data, i, iv);
  int64_t W = count_of(c->rank, c->win);
  wcfg_t cc = *c;
  for (int d = 0; d < cc.rank; ++d) cc.bd[d] = cc.wd[d] = 1;
  for (int64_t s = 0; s < src->count; ++s) {
    int64_t best = -1;
    for (int64_t w = 0; w < W; ++w) {
      int64_t e = ref_src(&cc, s, w);
      if (e < 0) continue;
      if (best < 0) {
        best = e;
        continue;
      }
      // select(cur, cand) with the body's operand order.
      cval_t a = load_v(dt, x->data, best), bb = load_v(dt, x->data, e);
      if (swapped) {
        cval_t t = a;
        a = bb;
        bb = t;
      }
      bool keep;
      if (is_f(dt)) {
        keep = dir == IRON_CMP_GE   ? a.re >= bb.re
               : dir == IRON_CMP_GT ? a.re > bb.re
               : dir == IRON_CMP_LE ? a.re <= bb.re
                                    : a.re < bb.re;
      } else {
        keep = dir == IRON_CMP_GE   ? a.i >= bb.i
               : dir == IRON_CMP_GT ? a.i > bb.i
               : dir == IRON_CMP_LE ? a.i <= bb.i
                                    : a.i < bb.i;
      }
      if (!keep) best = e;
    }
    if (best < 0) continue;
    cval_t cur = load_v(dt, ref->data, best), v = load_v(dt, src->data, s);
    store_v(dt, ref->data, best, ref_combine(IRON_OP_ADD, dt, cur, v));
  }
  for (int64_t i = 0; i < ref->count; ++i)
    if (!same_elem(dt, out->data, ref->data, i)) bad++;
  ht_tensor_free(x);
  ht_tensor_free(src);
  ht_tensor_free(init);
  ht_tensor_free(out);
  ht_tensor_free(ref);
  return bad;
}

static void test_sas_fast(void) {
  static const iron_dtype_t dts[] = {IRON_DTYPE_F32, IRON_DTYPE_F64,
                                     IRON_DTYPE_BF16, IRON_DTYPE_S32,
                                     IRON_DTYPE_S8, IRON_DTYPE_U16};
  static const int32_t dirs[] = {IRON_CMP_GE, IRON_CMP_GT, IRON_CMP_LE,
                                 IRON_CMP_LT};
  for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); ++i)
    for (int iter = 0; iter < 40; ++iter) {
      wcfg_t c;
      random_cfg(&c, false);
      int32_t dir = dirs[ht_rand() % 4];
      bool swapped = ht_rand() % 2;
      int bad = run_sas_case(dts[i], dir, swapped, &c, false);
      if (bad) fprintf(stderr, "sas dtype %zu iter %d: %d bad\n", i, iter, bad);
      CHECK_EQ_INT(bad, 0);
    }
}

static void test_sas_generic(void) {
  for (int iter = 0; iter < 60; ++iter) {
    wcfg_t c;
    random_cfg(&c, false);
    // The fake select region computes GE on f32 (not swapped).
    CHECK_EQ_INT(run_sas_case(IRON_DTYPE_F32, IRON_CMP_GE, false, &c, true),
                 0);
  }
}

// A window far larger than its input (2^40 positions, padded so that each
// of the 6 outputs covers the input up to its own position): every path
// costs the input's extent, not the window's size, and folds the right
// elements (issue 13: the window was tabulated, or walked, in full).
static void test_rw_huge_window(void) {
  const int64_t W = (int64_t)1 << 40;
  wcfg_t c;
  memset(&c, 0, sizeof(c));
  c.rank = 1;
  c.in[0] = 6;
  c.win[0] = W;
  c.str[0] = c.bd[0] = c.wd[0] = 1;
  c.pad[0] = W - 1;
  c.out[0] = 6;
  for (int mode = 0; mode <= 2; ++mode) {
    iron_op_kind_t k = mode == 0 ? IRON_OP_ADD : IRON_OP_SUBTRACT;
    ht_body_t body;
    ht_body_init(&body, k, IRON_DTYPE_F32, false, 0);
    iron_region_t region;
    memset(&region, 0, sizeof(region));
    region.ir = &body.region;
    region.elementwise = mode == 2;
    iron_region_t *regions[1] = {&region};
    ht_op_t b;
    build_rw(&b, &c, IRON_DTYPE_F32, &body.region);
    iron_tensor_t *in = ht_tensor(IRON_DTYPE_F32, 1, c.in);
    iron_tensor_t *init = ht_tensor(IRON_DTYPE_F32, 0, NULL);
    iron_tensor_t *out = ht_tensor(IRON_DTYPE_F32, 1, c.out);
    for (int i = 0; i < 6; ++i) ((float *)in->data)[i] = (float)(1 << i);
    *(float *)init->data = 100.0f;
    const iron_kernel_t *kern =
        iron_host_kernel_lookup(IRON_OP_REDUCE_WINDOW);
    void *params = NULL;
    CHECK_OK(kern->prepare(&b.op, mode ? regions : NULL, &params));
    if (params) {
      iron_kernel_ctx_t ctx = {0};
      ctx.pool = g_pool;
      ctx.call_region = fake_call_region;
      iron_tensor_t *ins[2] = {in, init}, *outs[1] = {out};
      CHECK_OK(kern->run(&ctx, params, (const iron_tensor_t *const *)ins,
                         (iron_tensor_t *const *)outs));
      kern->destroy(params);
      float acc = 100.0f;
      for (int o = 0; o < 6; ++o) {
        float x = (float)(1 << o);
        acc = k == IRON_OP_ADD ? acc + x : acc - x;
        CHECK(((float *)out->data)[o] == acc);
      }
    }
    ht_tensor_free(in);
    ht_tensor_free(init);
    ht_tensor_free(out);
  }
}

static void setup(void) { CHECK_OK(iron_threadpool_create(2, &g_pool)); }
static void teardown(void) { iron_threadpool_destroy(g_pool); }

static const iron_test_case_t kTests[] = {
    {"setup", setup},
    {"rw_fast_random", test_rw_fast_random},
    {"rw_generic", test_rw_generic},
    {"rw_cumsum", test_rw_cumsum},
    {"rw_bad_result", test_rw_bad_result},
    {"sas_fast", test_sas_fast},
    {"sas_generic", test_sas_generic},
    {"rw_huge_window", test_rw_huge_window},
    {"teardown", teardown},
};
IRON_TEST_MAIN(kTests)
