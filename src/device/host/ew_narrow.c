// convert from/to the narrow types: f8 (E5M2, E4M3, E3M4, E4M3FN,
// E4M3FNUZ, E5M2FNUZ, E4M3B11FNUZ, E8M0FNU), f4E2M1FN, s4/u4/s2/u2; and
// element-wise ops on them (the wrap, at the end). Each element is
// stored in one byte (low bits, as ml_dtypes does).
//
// Semantics measured on jax 0.10.2's CPU backend (tests/gen_ew_vectors.py
// --narrow): floats round to nearest even directly from the source (f64
// too, no double rounding); overflow gives inf (IEEE-like formats), NaN
// (FN: S.1111.111; FNUZ: 0x80) or saturates (f4E2M1FN, which turns NaN into
// 0x8); FNUZ has no -0; float -> s4/u4 saturates (NaN -> 0) and int -> s4/u4
// wraps. Values pass through f64 (floats) or s64 (ints) and reuse the
// regular convert loops on the other side.
//
// f8E8M0FNU has its own rules (iron_e8m0_* in src/base/narrow_float.c,
// also measured; halfway cases round up).
//
// f6E2M3FN and f6E3M2FN (no inf, no NaN) convert like f4E2M1FN: round to
// nearest even, overflow saturates, NaN -> the sign bit alone; that is
// ml_dtypes' rounding. XLA:CPU (jax 0.11.2) has no more than that for them:
// in range its converts to f6 agree, past the largest finite value it
// gives +-0 (100 -> 0, -inf -> -0), and it cannot compile converts from f6
// nor any arithmetic on them ("Invalid bitcast i6 to i8", "failed to
// legalize arith.addf"). iron converts both ways (as ml_dtypes) and
// refuses f6 arithmetic, dot and convolution as XLA:CPU does.
#include "device/host/ew_narrow.h"

#include "base/half.h"
#include "base/narrow_float.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------

typedef struct nr_params {
  uint32_t magic;                  // IRON_EW_NARROW_MAGIC
  const iron_narrow_format_t *sfmt, *dfmt;  // narrow float source/destination
  int sbits, dbits;                // narrow int source/destination bits
  bool s_signed, d_signed;
  bool via_int;                    // intermediate is s64 (else f64)
  bool sat_max_is_inf;             // see iron_ew_narrow_prepare
  bool nan_all_ones;               // see iron_ew_narrow_prepare
  bool e8m0_src, e8m0_dst;         // f8E8M0FNU source/destination
  // f8E8M0FNU destination from f32/bf16 bits (16: bf16), else from f64;
  // f8E8M0FNU source to f32/c64/bf16 bits or pred (0: through f64).
  int e8m0_in_bits, e8m0_out_bits;
  iron_ew_loop_fn_t pre;           // native source -> intermediate
  iron_ew_loop_fn_t post;          // intermediate -> native destination
  size_t in_size, out_size;
} nr_params_t;

#define NR_BLOCK 256

static void nr_block(const nr_params_t *p, void *out, const void *in,
                     int64_t len) {
  union {
    double f[NR_BLOCK];
    int64_t i[NR_BLOCK];
  } tmp;
  const uint8_t *s = in;
  if (p->e8m0_dst && p->e8m0_in_bits) {  // f32/bf16 bits straight to it
    uint8_t *d = out;
    for (int64_t j = 0; j < len; ++j) {
      uint32_t b;
      if (p->e8m0_in_bits == 32) {
        memcpy(&b, s + 4 * j, 4);
      } else {
        uint16_t h;
        memcpy(&h, s + 2 * j, 2);
        b = (uint32_t)h << 16;
      }
      d[j] = iron_e8m0_from_f32_bits(b);
    }
    return;
  }
  if (p->e8m0_src && p->e8m0_out_bits) {  // to f32/bf16/c64 bits or pred
    for (int64_t j = 0; j < len; ++j) {
      uint32_t b = iron_e8m0_to_f32_bits(s[j]);
      switch (p->e8m0_out_bits) {
        case 32: memcpy((char *)out + 4 * j, &b, 4); break;
        case 64: {
          uint32_t c[2] = {b, 0};
          memcpy((char *)out + 8 * j, c, 8);
          break;
        }
        case 16: {
          uint16_t h = (uint16_t)(b >> 16);
          memcpy((char *)out + 2 * j, &h, 2);
          break;
        }
        default:  // pred: 2^-127, an f32 denormal, is false (flushed)
          ((uint8_t *)out)[j] = (uint8_t)((s[j] & 0xffu) != 0);
          break;
      }
    }
    return;
  }
  if (p->e8m0_src) {
    for (int64_t j = 0; j < len; ++j) tmp.f[j] = iron_e8m0_decode(s[j]);
  } else if (p->pre) {
    const void *ins[1] = {in};
    p->pre(&tmp, ins, 0, len);
  } else if (p->sfmt) {
    for (int64_t j = 0; j < len; ++j) tmp.f[j] = iron_narrow_format_decode(p->sfmt, s[j]);
    if (p->sat_max_is_inf) {
      unsigned mag = (1u << (p->sfmt->ebits + p->sfmt->mbits)) - 1;
      for (int64_t j = 0; j < len; ++j) {
        if ((s[j] & mag) == mag) tmp.f[j] = tmp.f[j] < 0 ? -INFINITY : INFINITY;
      }
    }
  } else {
    unsigned mask = (1u << p->sbits) - 1, top = 1u << (p->sbits - 1);
    for (int64_t j = 0; j < len; ++j) {
      unsigned v = s[j] & mask;
      int64_t x = p->s_signed && (v & top) ? (int64_t)v - (int64_t)(mask + 1)
                                           : (int64_t)v;
      if (p->via_int) {
        tmp.i[j] = x;
      } else {
        tmp.f[j] = (double)x;
      }
    }
  }
  uint8_t *d = out;
  if (p->post) {
    const void *ins[1] = {&tmp};
    p->post(out, ins, 0, len);
  } else if (p->e8m0_dst) {
    for (int64_t j = 0; j < len; ++j) {
      double v = p->via_int ? (double)tmp.i[j] : tmp.f[j];
      d[j] = iron_e8m0_from_f64(v);
    }
  } else if (p->dfmt) {
    for (int64_t j = 0; j < len; ++j) {
      double v = p->via_int ? (double)tmp.i[j] : tmp.f[j];
      d[j] = iron_narrow_format_encode(p->dfmt, v);
      if (p->nan_all_ones && isnan(v)) d[j] = 0x7f;  // whatever the sign
    }
  } else {
    unsigned mask = (1u << p->dbits) - 1;
    for (int64_t j = 0; j < len; ++j) {
      int64_t v;
      if (p->via_int) {
        v = tmp.i[j];  // ints wrap
      } else if (p->d_signed) {
        v = ew_f2s(tmp.f[j], p->dbits);  // floats saturate
      } else {
        v = (int64_t)ew_f2u(tmp.f[j], p->dbits);
      }
      d[j] = (uint8_t)((uint64_t)v & mask);
    }
  }
}

typedef struct nr_task {
  const nr_params_t *p;
  void *out;
  const void *in;
} nr_task_t;

static void nr_chunk(void *arg, int64_t begin, int64_t end) {
  const nr_task_t *t = arg;
  uint64_t env = iron_ew_fpenv_enter();
  for (int64_t b = begin; b < end; b += NR_BLOCK) {
    int64_t len = end - b < NR_BLOCK ? end - b : NR_BLOCK;
    nr_block(t->p, (char *)t->out + (size_t)b * t->p->out_size,
             (const char *)t->in + (size_t)b * t->p->in_size, len);
  }
  iron_ew_fpenv_leave(env);
}

static iron_status_t nr_run(const iron_kernel_ctx_t *ctx, const void *params,
                            const iron_tensor_t *const *inputs,
                            iron_tensor_t *const *outputs) {
  const nr_params_t *p = params;
  int64_t n = outputs[0]->count;
  if (n <= 0) return IRON_OK;
  nr_task_t t = {p, outputs[0]->data, inputs[0]->data};
  if (inputs[0]->count == 1 && n > 1) {
    nr_chunk(&t, 0, 1);
    for (int64_t i = 1; i < n; ++i) {
      memcpy((char *)t.out + (size_t)i * p->out_size, t.out, p->out_size);
    }
    return IRON_OK;
  }
  if (inputs[0]->count != n) {
    return IRON_ERR(INVALID_ARGUMENT, "convert: %lld elements in, %lld out",
                    (long long)inputs[0]->count, (long long)n);
  }
  if (!ctx || !ctx->pool || n < 2 * 16384) {
    nr_chunk(&t, 0, n);
  } else {
    iron_threadpool_parallel_for(ctx->pool, n, 16384, nr_chunk, &t);
  }
  return IRON_OK;
}

static bool nr_int_type(iron_dtype_t dt, int *bits, bool *is_signed) {
  switch (dt) {
    case IRON_DTYPE_S4: *bits = 4; *is_signed = true; return true;
    case IRON_DTYPE_U4: *bits = 4; *is_signed = false; return true;
    case IRON_DTYPE_S2: *bits = 2; *is_signed = true; return true;
    case IRON_DTYPE_U2: *bits = 2; *is_signed = false; return true;
    default: return false;
  }
}

bool iron_ew_narrow_is(iron_dtype_t dt) {
  int bits;
  bool sg;
  return iron_narrow_format(dt) != NULL || nr_int_type(dt, &bits, &sg) ||
         dt == IRON_DTYPE_F8E8M0FNU;
}

// Fills *p for convert from -> to (one of them narrow); false when the pair
// is not handled.
static bool nr_init(iron_dtype_t from, iron_dtype_t to,
                    iron_ew_convert_lookup_fn_t lookup, nr_params_t *p) {
  memset(p, 0, sizeof(*p));
  p->magic = IRON_EW_NARROW_MAGIC;
  p->in_size = iron_dtype_size(from);
  p->out_size = iron_dtype_size(to);
  p->sfmt = iron_narrow_format(from);
  p->dfmt = iron_narrow_format(to);
  bool s_int = nr_int_type(from, &p->sbits, &p->s_signed);
  bool d_int = nr_int_type(to, &p->dbits, &p->d_signed);
  p->e8m0_src = from == IRON_DTYPE_F8E8M0FNU;
  p->e8m0_dst = to == IRON_DTYPE_F8E8M0FNU;
  bool s_narrow = p->sfmt || s_int || p->e8m0_src;
  bool d_narrow = p->dfmt || d_int || p->e8m0_dst;
  if ((s_narrow || iron_ew_narrow_is(from)) != s_narrow ||
      (!s_narrow && !d_narrow)) {
    return false;
  }
  if ((iron_dtype_size(from) != 1 && s_narrow) ||
      (iron_dtype_size(to) != 1 && d_narrow)) {
    return false;
  }
  // The intermediate is s64 when the source is an integer (so int -> s4
  // wraps), else f64.
  bool src_is_int = s_int || (!s_narrow && (iron_dtype_is_int(from) ||
                                            from == IRON_DTYPE_PRED));
  // (An int going to a narrow float goes through f64, which also reads u64
  // right.)
  p->via_int = src_is_int && !p->dfmt && !p->e8m0_dst;
  if (p->e8m0_dst) {
    p->e8m0_in_bits = from == IRON_DTYPE_F32    ? 32
                      : from == IRON_DTYPE_BF16 ? 16
                                                : 0;
  }
  if (p->e8m0_src) {
    // f8E8M0FNU -> narrow ints: not measured.
    if (d_int) return false;
    p->e8m0_out_bits = to == IRON_DTYPE_F32    ? 32
                       : to == IRON_DTYPE_C64  ? 64
                       : to == IRON_DTYPE_BF16 ? 16
                       : to == IRON_DTYPE_PRED ? 1
                                               : 0;
  }
  // XLA:CPU converts the largest f4E2M1FN magnitude (all bits set) to an
  // integer as if it were infinite: 6.0 -> INT_MAX.
  // f16/bf16 NaN -> f8E5M2 gives 0.11111.11 on XLA:CPU, for either sign
  // (f32/f64 NaN give S.11111.10).
  p->nan_all_ones = p->dfmt && p->dfmt->dtype == IRON_DTYPE_F8E5M2 &&
                    (from == IRON_DTYPE_F16 || from == IRON_DTYPE_BF16);
  p->sat_max_is_inf = p->sfmt && p->sfmt->dtype == IRON_DTYPE_F4E2M1FN &&
                      (d_int || iron_dtype_is_int(to));
  iron_dtype_t mid = p->via_int ? IRON_DTYPE_S64 : IRON_DTYPE_F64;
  if (!s_narrow && !(p->e8m0_dst && p->e8m0_in_bits)) {
    p->pre = lookup(from, mid);
    if (!p->pre) return false;
  }
  if (!d_narrow) {
    p->post = lookup(mid, to);
    if (!p->post) return false;
  }
  return true;
}

iron_status_t iron_ew_narrow_prepare(const iron_ir_op_t *op,
                                     iron_ew_convert_lookup_fn_t lookup,
                                     void **out_params) {
  iron_dtype_t from = op->operands[0]->type->dtype;
  iron_dtype_t to = op->results[0].type->dtype;
  nr_params_t p;
  if (!nr_init(from, to, lookup, &p)) {
    return iron_ir_op_unimplemented(op, "for dtype %s -> %s",
                                    iron_dtype_name(from),
                                    iron_dtype_name(to));
  }
  nr_params_t *heap = malloc(sizeof(*heap));
  if (!heap) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  *heap = p;
  *out_params = heap;
  return IRON_OK;
}

iron_status_t iron_ew_narrow_run(const iron_kernel_ctx_t *ctx,
                                 const void *params,
                                 const iron_tensor_t *const *inputs,
                                 iron_tensor_t *const *outputs) {
  return nr_run(ctx, params, inputs, outputs);
}

// ---------------------------------------------------------------------------
// Single values (dot, convolution).

double iron_ew_narrow_dot_load(iron_dtype_t dt, unsigned bits) {
  if (dt != IRON_DTYPE_F8E8M0FNU) return iron_narrow_float_decode(dt, bits);
  if ((bits & 0xffu) == 0 && iron_ew_flush_enabled()) return 0.0;
  return iron_e8m0_decode(bits);
}

uint8_t iron_ew_narrow_dot_store(iron_dtype_t dt, float v) {
  if (dt != IRON_DTYPE_F8E8M0FNU) return iron_narrow_float_store_f32(dt, v);
  uint32_t b;
  memcpy(&b, &v, 4);
  if ((b & 0x7f800000u) == 0 && iron_ew_flush_enabled()) b &= 0x80000000u;
  return iron_e8m0_from_f32_bits(b);
}

// ---------------------------------------------------------------------------
// Element-wise ops computed in a wider dtype (see ew_narrow.h).

iron_dtype_t iron_ew_narrow_wide(iron_dtype_t dt) {
  if (dt == IRON_DTYPE_S4) return IRON_DTYPE_S8;
  if (dt == IRON_DTYPE_U4) return IRON_DTYPE_U8;
  if (iron_narrow_format(dt) && !iron_narrow_is_f6(dt)) return IRON_DTYPE_F16;
  if (dt == IRON_DTYPE_F8E8M0FNU) return IRON_DTYPE_F32;
  return IRON_DTYPE_INVALID;
}

typedef struct nw_params {
  uint32_t magic;  // IRON_EW_WRAP_MAGIC
  int num_inputs;
  bool widen[IRON_EW_MAX_INPUTS];  // input i is converted (cv[i])
  bool narrow_out;                 // the wide result is converted (cv_out)
  nr_params_t cv[IRON_EW_MAX_INPUTS], cv_out;
  size_t in_size[IRON_EW_MAX_INPUTS], out_size;
  iron_ew_loop_fn_t fn[IRON_EW_VARIANTS];
} nw_params_t;

// Wide values of one block; 8 bytes is the widest wide dtype (s64 via the
// convert intermediates is never stored here: wide dtypes are <= 8 bytes).
typedef union nw_buf {
  double align;
  unsigned char b[NR_BLOCK * 8];
} nw_buf_t;

typedef struct nw_task {
  const nw_params_t *p;
  unsigned mask;  // inputs that are one broadcast element
  void *out;
  const void *in[IRON_EW_MAX_INPUTS];
} nw_task_t;

static void nw_chunk(void *arg, int64_t begin, int64_t end) {
  const nw_task_t *t = arg;
  const nw_params_t *p = t->p;
  uint64_t env = iron_ew_fpenv_enter();
  nw_buf_t buf[IRON_EW_MAX_INPUTS], wout;
  const void *wins[IRON_EW_MAX_INPUTS] = {NULL, NULL, NULL};
  // Broadcast scalars are widened once.
  for (int i = 0; i < p->num_inputs; ++i) {
    if (!((t->mask >> i) & 1)) continue;
    if (p->widen[i]) {
      nr_block(&p->cv[i], buf[i].b, t->in[i], 1);
      wins[i] = buf[i].b;
    } else {
      wins[i] = t->in[i];
    }
  }
  for (int64_t b = begin; b < end; b += NR_BLOCK) {
    int64_t len = end - b < NR_BLOCK ? end - b : NR_BLOCK;
    for (int i = 0; i < p->num_inputs; ++i) {
      if ((t->mask >> i) & 1) continue;
      const char *src = (const char *)t->in[i] + (size_t)b * p->in_size[i];
      if (p->widen[i]) {
        nr_block(&p->cv[i], buf[i].b, src, len);
        wins[i] = buf[i].b;
      } else {
        wins[i] = src;
      }
    }
    char *dst = (char *)t->out + (size_t)b * p->out_size;
    if (p->narrow_out) {
      p->fn[t->mask](wout.b, wins, 0, len);
      nr_block(&p->cv_out, dst, wout.b, len);
    } else {
      p->fn[t->mask](dst, wins, 0, len);
    }
  }
  iron_ew_fpenv_leave(env);
}

iron_status_t iron_ew_narrow_wrap_run(const iron_kernel_ctx_t *ctx,
                                      const void *params,
                                      const iron_tensor_t *const *inputs,
                                      iron_tensor_t *const *outputs) {
  const nw_params_t *p = params;
  int64_t n = outputs[0]->count;
  if (n <= 0) return IRON_OK;
  nw_task_t t = {p, 0, outputs[0]->data, {NULL, NULL, NULL}};
  for (int i = 0; i < p->num_inputs; ++i) {
    int64_t c = inputs[i]->count;
    t.in[i] = inputs[i]->data;
    if (c == n) continue;
    if (c != 1) {
      return IRON_ERR(INVALID_ARGUMENT,
                      "element-wise input %d has %lld elements, output %lld",
                      i, (long long)c, (long long)n);
    }
    t.mask |= 1u << i;
  }
  if (t.mask == (1u << p->num_inputs) - 1 && n > 1) {
    // Every input is one element: compute it once and replicate.
    t.mask = 0;
    nw_chunk(&t, 0, 1);
    for (int64_t i = 1; i < n; ++i) {
      memcpy((char *)t.out + (size_t)i * p->out_size, t.out, p->out_size);
    }
    return IRON_OK;
  }
  if (!p->fn[t.mask]) {
    return IRON_ERR(INTERNAL, "element-wise kernel has no variant %u", t.mask);
  }
  if (!ctx || !ctx->pool || n < 2 * 16384) {
    nw_chunk(&t, 0, n);
  } else {
    iron_threadpool_parallel_for(ctx->pool, n, 16384, nw_chunk, &t);
  }
  return IRON_OK;
}

iron_status_t iron_ew_narrow_wrap_create(int num_inputs,
                                         const iron_dtype_t *in,
                                         const iron_dtype_t *in_wide,
                                         iron_dtype_t out_wide,
                                         iron_dtype_t out,
                                         const iron_ew_loop_fn_t *fns,
                                         void **out_params) {
  if (num_inputs < 1 || num_inputs > IRON_EW_MAX_INPUTS ||
      iron_dtype_size(out_wide) > 8) {
    return IRON_ERR(INTERNAL, "narrow wrap: bad arguments");
  }
  nw_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->magic = IRON_EW_WRAP_MAGIC;
  p->num_inputs = num_inputs;
  p->out_size = iron_dtype_size(out);
  for (int i = 0; i < num_inputs; ++i) {
    p->in_size[i] = iron_dtype_size(in[i]);
    if (in[i] == in_wide[i]) continue;
    p->widen[i] = true;
    if (iron_dtype_size(in_wide[i]) > 8 ||
        !nr_init(in[i], in_wide[i], iron_ew_convert_loop, &p->cv[i])) {
      free(p);
      return IRON_ERR(INTERNAL, "narrow wrap: no convert %s -> %s",
                      iron_dtype_name(in[i]), iron_dtype_name(in_wide[i]));
    }
  }
  if (out != out_wide) {
    p->narrow_out = true;
    if (!nr_init(out_wide, out, iron_ew_convert_loop, &p->cv_out)) {
      free(p);
      return IRON_ERR(INTERNAL, "narrow wrap: no convert %s -> %s",
                      iron_dtype_name(out_wide), iron_dtype_name(out));
    }
  }
  for (int i = 0; i < IRON_EW_VARIANTS; ++i) p->fn[i] = fns[i];
  *out_params = p;
  return IRON_OK;
}
