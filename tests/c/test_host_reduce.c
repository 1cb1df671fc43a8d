// Host reduce: the typed fast paths (every single-op body on every dtype it
// covers, random shapes and reduced-dim sets, long accurate sums, NaN and
// signed-zero rules) against a sequential reference, and the generic path
// (variadic argmax body through call_region, vectorized and per element).
#include "base/half.h"
#include "base/threadpool.h"
#include "compiler/plan.h"
#include "host_test_ops.h"
#include "test.h"

static iron_threadpool_t *g_pool;

// A body region `return op(arg0, arg1)` (or argument order swapped).
typedef struct ht_body {
  iron_ir_region_t region;
  iron_ir_block_t block;
  iron_ir_value_t args[2];
  iron_ir_type_t type;
  iron_ir_op_t ops[2];
  iron_ir_op_t *op_ptrs[2];
  iron_ir_value_t *bin_operands[2];
  iron_ir_value_t *ret_operands[1];
  iron_ir_value_t result;
} ht_body_t;

static void ht_body_init(ht_body_t *b, iron_op_kind_t kind, iron_dtype_t dt,
                         bool swapped) {
  memset(b, 0, sizeof(*b));
  ht_type(&b->type, dt, 0, NULL);
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
  b->result.type = &b->type;
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

typedef struct val {
  double re, im;
  int64_t i;
} val_t;

static val_t load(iron_dtype_t dt, const void *p, int64_t k) {
  val_t v = {0, 0, 0};
  switch (dt) {
    case IRON_DTYPE_PRED: case IRON_DTYPE_U8: v.i = ((uint8_t *)p)[k]; break;
    case IRON_DTYPE_S8: v.i = ((int8_t *)p)[k]; break;
    case IRON_DTYPE_S16: v.i = ((int16_t *)p)[k]; break;
    case IRON_DTYPE_U16: v.i = ((uint16_t *)p)[k]; break;
    case IRON_DTYPE_S32: v.i = ((int32_t *)p)[k]; break;
    case IRON_DTYPE_U32: v.i = ((uint32_t *)p)[k]; break;
    case IRON_DTYPE_S64: case IRON_DTYPE_U64: v.i = ((int64_t *)p)[k]; break;
    case IRON_DTYPE_F16: v.re = iron_f16_to_f32(((uint16_t *)p)[k]); break;
    case IRON_DTYPE_BF16: v.re = iron_bf16_to_f32(((uint16_t *)p)[k]); break;
    case IRON_DTYPE_F32: v.re = ((float *)p)[k]; break;
    case IRON_DTYPE_F64: v.re = ((double *)p)[k]; break;
    case IRON_DTYPE_C64:
      v.re = ((float *)p)[2 * k];
      v.im = ((float *)p)[2 * k + 1];
      break;
    case IRON_DTYPE_C128:
      v.re = ((double *)p)[2 * k];
      v.im = ((double *)p)[2 * k + 1];
      break;
    default: break;
  }
  return v;
}

static void store(iron_dtype_t dt, void *p, int64_t k, double re, double im,
                  int64_t iv) {
  switch (dt) {
    case IRON_DTYPE_PRED: ((uint8_t *)p)[k] = iv & 1; break;
    case IRON_DTYPE_U8: case IRON_DTYPE_S8: ((uint8_t *)p)[k] = (uint8_t)iv; break;
    case IRON_DTYPE_S16: case IRON_DTYPE_U16: ((uint16_t *)p)[k] = (uint16_t)iv; break;
    case IRON_DTYPE_S32: case IRON_DTYPE_U32: ((uint32_t *)p)[k] = (uint32_t)iv; break;
    case IRON_DTYPE_S64: case IRON_DTYPE_U64: ((int64_t *)p)[k] = iv; break;
    case IRON_DTYPE_F16: ((uint16_t *)p)[k] = iron_f32_to_f16((float)re); break;
    case IRON_DTYPE_BF16: ((uint16_t *)p)[k] = iron_f32_to_bf16((float)re); break;
    case IRON_DTYPE_F32: ((float *)p)[k] = (float)re; break;
    case IRON_DTYPE_F64: ((double *)p)[k] = re; break;
    case IRON_DTYPE_C64:
      ((float *)p)[2 * k] = (float)re;
      ((float *)p)[2 * k + 1] = (float)im;
      break;
    case IRON_DTYPE_C128:
      ((double *)p)[2 * k] = re;
      ((double *)p)[2 * k + 1] = im;
      break;
    default: break;
  }
}

static bool is_signed(iron_dtype_t dt) { return iron_dtype_is_signed_int(dt); }
static bool is_floatish(iron_dtype_t dt) {
  return iron_dtype_is_float(dt) || iron_dtype_is_complex(dt);
}

// Reference combine with the same wrap-around as the dtype.
static val_t ref_op(iron_op_kind_t k, iron_dtype_t dt, val_t a, val_t b) {
  val_t r = {0, 0, 0};
  if (is_floatish(dt)) {
    switch (k) {
      case IRON_OP_ADD: r.re = a.re + b.re; r.im = a.im + b.im; break;
      case IRON_OP_MULTIPLY:
        r.re = a.re * b.re - a.im * b.im;
        r.im = a.re * b.im + a.im * b.re;
        break;
      case IRON_OP_MAXIMUM:
        r.re = isnan(a.re) || isnan(b.re) ? NAN : a.re > b.re ? a.re : b.re;
        if (a.re == b.re) r.re = signbit(a.re) ? b.re : a.re;
        break;
      default:
        r.re = isnan(a.re) || isnan(b.re) ? NAN : a.re < b.re ? a.re : b.re;
        if (a.re == b.re) r.re = signbit(a.re) ? a.re : b.re;
        break;
    }
    return r;
  }
  uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i;
  int bits = dt == IRON_DTYPE_PRED ? 1 : (int)iron_dtype_size(dt) * 8;
  uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  // Comparable values: sign-extend signed ints, zero-extend unsigned.
  int64_t sx = a.i, sy = b.i;
  if (!is_signed(dt)) {
    sx = (int64_t)(x & mask);
    sy = (int64_t)(y & mask);
  }
  uint64_t z = 0;
  switch (k) {
    case IRON_OP_ADD: z = x + y; break;
    case IRON_OP_MULTIPLY: z = x * y; break;
    case IRON_OP_AND: z = x & y; break;
    case IRON_OP_OR: z = x | y; break;
    case IRON_OP_XOR: z = x ^ y; break;
    case IRON_OP_MAXIMUM:
      z = (uint64_t)(is_signed(dt) || bits == 64
                         ? (is_signed(dt) ? (sx > sy ? sx : sy)
                                          : (x > y ? (int64_t)x : (int64_t)y))
                         : (sx > sy ? sx : sy));
      break;
    default:
      z = (uint64_t)(is_signed(dt) || bits == 64
                         ? (is_signed(dt) ? (sx < sy ? sx : sy)
                                          : (x < y ? (int64_t)x : (int64_t)y))
                         : (sx < sy ? sx : sy));
      break;
  }
  z &= mask;
  if (is_signed(dt) && bits < 64 && (z >> (bits - 1)) & 1) z |= ~mask;
  r.i = (int64_t)z;
  return r;
}

static void unravel(int64_t flat, int rank, const int64_t *dims,
                    int64_t *idx) {
  for (int i = rank - 1; i >= 0; --i) {
    idx[i] = flat % dims[i];
    flat /= dims[i];
  }
}
static int64_t ravel(int rank, const int64_t *dims, const int64_t *idx) {
  int64_t f = 0;
  for (int i = 0; i < rank; ++i) f = f * dims[i] + idx[i];
  return f;
}

static void fill_values(iron_tensor_t *t, iron_op_kind_t k) {
  for (int64_t i = 0; i < t->count; ++i) {
    double re = (double)(int64_t)(ht_rand() % 2001 - 1000) / 500.0;
    double im = (double)(int64_t)(ht_rand() % 2001 - 1000) / 500.0;
    if (k == IRON_OP_MULTIPLY) {  // keep long products finite
      re = 0.9 + (double)(ht_rand() % 201) / 1000.0;
      im = (double)(int64_t)(ht_rand() % 201 - 100) / 1000.0;
    }
    int64_t iv = (int64_t)ht_rand();
    if (t->dtype == IRON_DTYPE_PRED) iv &= 1;
    store(t->dtype, t->data, i, re, im, iv);
  }
}

typedef struct fast_case {
  iron_op_kind_t kind;
  iron_dtype_t dtype;
} fast_case_t;

// Runs one reduce with a single-op body and checks it against the
// sequential reference. Returns the number of mismatches.
static int check_fast(iron_op_kind_t kind, iron_dtype_t dt, int rank,
                      const int64_t *dims, const bool *red, iron_tensor_t *in,
                      const void *init_value, iron_threadpool_t *pool) {
  ht_body_t body;
  ht_body_init(&body, kind, dt, ht_rand() % 2);
  int64_t rd[IRON_MAX_RANK], od[IRON_MAX_RANK];
  int nr = 0, orank = 0;
  for (int d = 0; d < rank; ++d) {
    if (red[d]) rd[nr++] = d; else od[orank++] = dims[d];
  }
  ht_op_t b;
  ht_init(&b, IRON_OP_REDUCE);
  ht_operand(&b, dt, rank, dims);
  ht_operand(&b, dt, 0, NULL);
  ht_result(&b, dt, orank, od);
  ht_attr_i64(&b, "dimensions", nr, rd);
  b.op.num_regions = 1;
  b.op.regions = &body.region;
  iron_tensor_t *init = ht_tensor(dt, 0, NULL);
  memcpy(init->data, init_value, iron_dtype_size(dt));
  iron_tensor_t *ins[2] = {in, init};
  iron_tensor_t *out = ht_tensor(dt, orank, od);
  // No compiled regions: prepare must take the fast path.
  CHECK_OK(ht_run(&b, pool, NULL, ins, &out));
  int bad = 0;
  int64_t rcount = 1;
  int64_t rdims[IRON_MAX_RANK];
  for (int k = 0; k < nr; ++k) rcount *= (rdims[k] = dims[rd[k]]);
  for (int64_t f = 0; f < out->count; ++f) {
    int64_t oi[IRON_MAX_RANK], ii[IRON_MAX_RANK], ri[IRON_MAX_RANK];
    unravel(f, orank, od, oi);
    for (int d = 0, o = 0; d < rank; ++d)
      if (!red[d]) ii[d] = oi[o++];
    val_t acc = load(dt, init->data, 0);
    double mag = fabs(acc.re) + fabs(acc.im);
    for (int64_t r = 0; r < rcount; ++r) {
      unravel(r, nr, rdims, ri);
      for (int k = 0; k < nr; ++k) ii[rd[k]] = ri[k];
      val_t x = load(dt, in->data, ravel(rank, dims, ii));
      mag += fabs(x.re) + fabs(x.im);
      acc = ref_op(kind, dt, acc, x);
    }
    val_t got = load(dt, out->data, f);
    bool ok;
    if (!is_floatish(dt)) {
      ok = got.i == acc.i;
    } else if (kind == IRON_OP_MAXIMUM || kind == IRON_OP_MINIMUM) {
      ok = (isnan(acc.re) && isnan(got.re)) ||
           (got.re == acc.re && signbit(got.re) == signbit(acc.re));
    } else {
      double eps = dt == IRON_DTYPE_F64 || dt == IRON_DTYPE_C128 ? 1e-13
                   : dt == IRON_DTYPE_F16 ? 1e-3
                   : dt == IRON_DTYPE_BF16 ? 8e-3 : 2e-6;
      double scale = kind == IRON_OP_ADD
                         ? mag
                         : (fabs(acc.re) + fabs(acc.im)) * (double)(rcount + 1);
      double tol = eps * scale + 1e-30;
      ok = fabs(got.re - acc.re) <= tol && fabs(got.im - acc.im) <= tol;
    }
    if (!ok) {
      if (bad < 3)
        fprintf(stderr, "  %s %s: out %lld got %g/%lld want %g/%lld\n",
                iron_op_kind_name(kind), iron_dtype_name(dt), (long long)f,
                got.re, (long long)got.i, acc.re, (long long)acc.i);
      bad++;
    }
  }
  ht_tensor_free(init);
  ht_tensor_free(out);
  return bad;
}

static const fast_case_t kFast[] = {
    {IRON_OP_ADD, IRON_DTYPE_F32},      {IRON_OP_MULTIPLY, IRON_DTYPE_F32},
    {IRON_OP_MAXIMUM, IRON_DTYPE_F32},  {IRON_OP_MINIMUM, IRON_DTYPE_F32},
    {IRON_OP_ADD, IRON_DTYPE_F64},      {IRON_OP_MAXIMUM, IRON_DTYPE_F64},
    {IRON_OP_ADD, IRON_DTYPE_F16},      {IRON_OP_MAXIMUM, IRON_DTYPE_F16},
    {IRON_OP_ADD, IRON_DTYPE_BF16},     {IRON_OP_MINIMUM, IRON_DTYPE_BF16},
    {IRON_OP_MULTIPLY, IRON_DTYPE_BF16}, {IRON_OP_ADD, IRON_DTYPE_C64},
    {IRON_OP_MULTIPLY, IRON_DTYPE_C64}, {IRON_OP_ADD, IRON_DTYPE_C128},
    {IRON_OP_ADD, IRON_DTYPE_S32},      {IRON_OP_MULTIPLY, IRON_DTYPE_S32},
    {IRON_OP_MAXIMUM, IRON_DTYPE_S32},  {IRON_OP_MINIMUM, IRON_DTYPE_S8},
    {IRON_OP_MAXIMUM, IRON_DTYPE_S64},  {IRON_OP_ADD, IRON_DTYPE_S16},
    {IRON_OP_MAXIMUM, IRON_DTYPE_U8},   {IRON_OP_MINIMUM, IRON_DTYPE_U32},
    {IRON_OP_MAXIMUM, IRON_DTYPE_U64},  {IRON_OP_ADD, IRON_DTYPE_U16},
    {IRON_OP_AND, IRON_DTYPE_U32},      {IRON_OP_OR, IRON_DTYPE_S64},
    {IRON_OP_XOR, IRON_DTYPE_U8},       {IRON_OP_AND, IRON_DTYPE_PRED},
    {IRON_OP_OR, IRON_DTYPE_PRED},      {IRON_OP_XOR, IRON_DTYPE_PRED},
    {IRON_OP_MAXIMUM, IRON_DTYPE_PRED}, {IRON_OP_MINIMUM, IRON_DTYPE_PRED},
};

static void test_fast_random(void) {
  size_t ncases = sizeof(kFast) / sizeof(kFast[0]);
  for (int iter = 0; iter < 640; ++iter) {
    const fast_case_t *c = &kFast[(size_t)iter % ncases];
    int rank = (int)ht_rand_range(0, 4);
    int64_t dims[IRON_MAX_RANK];
    bool red[IRON_MAX_RANK];
    for (int d = 0; d < rank; ++d) {
      dims[d] = ht_rand() % 10 == 0 ? 0 : ht_rand_range(1, 6);
      red[d] = ht_rand() % 2;
    }
    iron_tensor_t *in = ht_tensor(c->dtype, rank, dims);
    fill_values(in, c->kind);
    unsigned char init[16];
    iron_tensor_t tmp = {.data = init, .dtype = c->dtype, .count = 1};
    fill_values(&tmp, c->kind);
    CHECK_EQ_INT(check_fast(c->kind, c->dtype, rank, dims, red, in, init,
                            g_pool), 0);
    ht_tensor_free(in);
  }
}

static void test_fast_long(void) {
  // Long rows (pairwise), long columns (cascade), and a full reduction that
  // is split across threads: sums of 0.1 stay within a few ulps.
  static const int64_t shapes[][3] = {
      {3, 200000, 1}, {1, 100000, 3}, {1, 300000, 1}, {2, 5000, 300},
      {1, 40, 1000},  {1, 20000, 600}};
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); ++s) {
    int64_t dims[3] = {shapes[s][0], shapes[s][1], shapes[s][2]};
    bool red[3] = {false, true, false};
    iron_tensor_t *in = ht_tensor(IRON_DTYPE_F32, 3, dims);
    for (int64_t i = 0; i < in->count; ++i)
      ((float *)in->data)[i] = 0.1f + (float)(i % 7) * 0.01f;
    float zero = 0.0f;
    CHECK_EQ_INT(check_fast(IRON_OP_ADD, IRON_DTYPE_F32, 3, dims, red, in,
                            &zero, g_pool), 0);
    float ninf = -INFINITY;
    CHECK_EQ_INT(check_fast(IRON_OP_MAXIMUM, IRON_DTYPE_F32, 3, dims, red, in,
                            &ninf, g_pool), 0);
    ht_tensor_free(in);
  }
}

static void test_fast_nan_zero(void) {
  int64_t dims[2] = {4, 40};
  bool red[2] = {false, true};
  iron_tensor_t *in = ht_tensor(IRON_DTYPE_F32, 2, dims);
  float *x = in->data;
  for (int64_t i = 0; i < 160; ++i) x[i] = (float)(i % 13);
  x[5] = NAN;                                 // row 0
  x[40 + 39] = NAN;                           // row 1, last
  for (int i = 0; i < 40; ++i) x[80 + i] = (i % 2) ? -0.0f : 0.0f;  // row 2
  float ninf = -INFINITY, pinf = INFINITY;
  CHECK_EQ_INT(check_fast(IRON_OP_MAXIMUM, IRON_DTYPE_F32, 2, dims, red, in,
                          &ninf, g_pool), 0);
  CHECK_EQ_INT(check_fast(IRON_OP_MINIMUM, IRON_DTYPE_F32, 2, dims, red, in,
                          &pinf, g_pool), 0);
  ht_tensor_free(in);
}

// ---------------------------------------------------------------------------
// Generic path: argmax over (value f32, index s32) with a fake runtime that
// evaluates jax's body on vectors: the first operand wins when it is NaN
// (also against a NaN: the body is not commutative, so the order in which
// the kernel merges matters), a NaN second operand wins over a number, and
// equal values take the lower index.

static int g_calls = 0;

static iron_status_t fake_call_region(const iron_kernel_ctx_t *ctx,
                                      const iron_region_t *region,
                                      const iron_tensor_t *const *in,
                                      iron_tensor_t *const *out) {
  (void)ctx;
  (void)region;
  g_calls++;
  int64_t n = out[0]->count;
  for (int64_t i = 0; i < n; ++i) {
    // Inputs: (acc value, acc index, x value, x index).
    int64_t ia = in[0]->count == 1 ? 0 : i, ib = in[2]->count == 1 ? 0 : i;
    float av = ((float *)in[0]->data)[ia], bv = ((float *)in[2]->data)[ib];
    int32_t ai = ((int32_t *)in[1]->data)[ia], bi = ((int32_t *)in[3]->data)[ib];
    bool take_a;
    if (av != av) take_a = true;
    else if (bv != bv) take_a = false;
    else take_a = av > bv || (av == bv && ai < bi);
    ((float *)out[0]->data)[i] = take_a ? av : bv;
    ((int32_t *)out[1]->data)[i] = take_a ? ai : bi;
  }
  return IRON_OK;
}

static void run_argmax(bool elementwise) {
  // A compare/select body is not a single op: prepare must pick the generic
  // path. The IR is only pattern-matched, so a 4-arg block suffices.
  ht_body_t body;
  ht_body_init(&body, IRON_OP_SELECT, IRON_DTYPE_F32, false);
  struct iron_region region;
  memset(&region, 0, sizeof(region));
  region.ir = &body.region;
  region.elementwise = elementwise;
  iron_region_t *regions[1] = {&region};
  for (int iter = 0; iter < 80; ++iter) {
    int rank = (int)ht_rand_range(1, 3);
    int64_t dims[3];
    bool red[3];
    int64_t rd[3], od[3];
    int nr = 0, orank = 0;
    for (int d = 0; d < rank; ++d) {
      dims[d] = ht_rand() % 12 == 0 ? 0 : ht_rand_range(1, 7);
      red[d] = ht_rand() % 2;
    }
    if (iter >= 60) {  // long reductions of few outputs: pairwise regime
      rank = 2;
      dims[0] = ht_rand_range(1, 5);
      dims[1] = ht_rand_range(65, 300);
      red[0] = false;
      red[1] = true;
    }
    for (int d = 0; d < rank; ++d) {
      if (red[d]) rd[nr++] = d; else od[orank++] = dims[d];
    }
    ht_op_t b;
    ht_init(&b, IRON_OP_REDUCE);
    ht_operand(&b, IRON_DTYPE_F32, rank, dims);
    ht_operand(&b, IRON_DTYPE_S32, rank, dims);
    ht_operand(&b, IRON_DTYPE_F32, 0, NULL);
    ht_operand(&b, IRON_DTYPE_S32, 0, NULL);
    ht_result(&b, IRON_DTYPE_F32, orank, od);
    ht_result(&b, IRON_DTYPE_S32, orank, od);
    ht_attr_i64(&b, "dimensions", nr, rd);
    b.op.num_regions = 1;
    b.op.regions = &body.region;
    iron_tensor_t *ins[4] = {ht_tensor(IRON_DTYPE_F32, rank, dims),
                             ht_tensor(IRON_DTYPE_S32, rank, dims),
                             ht_tensor(IRON_DTYPE_F32, 0, NULL),
                             ht_tensor(IRON_DTYPE_S32, 0, NULL)};
    // Values with ties; the index operand is the flat position over the
    // reduced dims (what jnp.argmax feeds in).
    int64_t rdims[3];
    for (int k = 0; k < nr; ++k) rdims[k] = dims[rd[k]];
    for (int64_t f = 0; f < ins[0]->count; ++f) {
      int64_t ii[3], ri[3];
      unravel(f, rank, dims, ii);
      for (int k = 0; k < nr; ++k) ri[k] = ii[rd[k]];
      ((float *)ins[0]->data)[f] = (float)(ht_rand() % 5);
      if (ht_rand() % 40 == 0) ((float *)ins[0]->data)[f] = NAN;
      ((int32_t *)ins[1]->data)[f] = (int32_t)ravel(nr, rdims, ri);
    }
    *(float *)ins[2]->data = -INFINITY;
    *(int32_t *)ins[3]->data = 0;
    iron_tensor_t *outs[2] = {ht_tensor(IRON_DTYPE_F32, orank, od),
                              ht_tensor(IRON_DTYPE_S32, orank, od)};
    const iron_kernel_t *k = iron_host_kernel_lookup(IRON_OP_REDUCE);
    void *params = NULL;
    CHECK_OK(k->prepare(&b.op, regions, &params));
    iron_kernel_ctx_t ctx = {0};
    ctx.pool = g_pool;
    ctx.call_region = fake_call_region;
    g_calls = 0;
    CHECK_OK(k->run(&ctx, params, (const iron_tensor_t *const *)ins, outs));
    free(params);
    int64_t rcount = 1;
    for (int kk = 0; kk < nr; ++kk) rcount *= rdims[kk];
    if (elementwise && outs[0]->count > 0 && rcount > 0) {
      if (rcount <= 64 || outs[0]->count >= 64) {
        CHECK_EQ_INT(g_calls, rcount);  // sequential, XLA's order
      } else {
        int64_t logn = 0;
        while ((1ll << logn) < rcount) logn++;
        CHECK(g_calls <= logn + 1);
      }
    }
    int bad = 0;
    for (int64_t f = 0; f < outs[0]->count; ++f) {
      int64_t oi[3], ii[3], ri[3];
      unravel(f, orank, od, oi);
      for (int d = 0, o = 0; d < rank; ++d)
        if (!red[d]) ii[d] = oi[o++];
      float best = -INFINITY;
      int32_t bidx = 0;
      for (int64_t r = 0; r < rcount; ++r) {
        unravel(r, nr, rdims, ri);
        for (int kk = 0; kk < nr; ++kk) ii[rd[kk]] = ri[kk];
        float v = ((float *)ins[0]->data)[ravel(rank, dims, ii)];
        if (best != best) continue;  // first NaN wins
        if (v != v || v > best) {
          best = v;
          bidx = (int32_t)r;
        }
      }
      float gv = ((float *)outs[0]->data)[f];
      int32_t gi = ((int32_t *)outs[1]->data)[f];
      bool ok = gi == bidx && ((gv != gv && best != best) || gv == best);
      if (!ok) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    for (int i = 0; i < 4; ++i) ht_tensor_free(ins[i]);
    ht_tensor_free(outs[0]);
    ht_tensor_free(outs[1]);
  }
}

static void test_generic_vectorized(void) { run_argmax(true); }
static void test_generic_per_element(void) { run_argmax(false); }

static void setup(void) { CHECK_OK(iron_threadpool_create(2, &g_pool)); }
static void teardown(void) { iron_threadpool_destroy(g_pool); }

static const iron_test_case_t kTests[] = {
    {"setup", setup},
    {"fast_random", test_fast_random},
    {"fast_long", test_fast_long},
    {"fast_nan_zero", test_fast_nan_zero},
    {"generic_vectorized", test_generic_vectorized},
    {"generic_per_element", test_generic_per_element},
    {"teardown", teardown},
};
IRON_TEST_MAIN(kTests)
