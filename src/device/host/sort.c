// stablehlo.sort on the host.
//
// Every sort is a stable merge sort of an index permutation per row (a row is
// the 1-D slice along `dimension`), after which all operands are gathered
// through the permutation. Only the comparison differs between the paths:
//
//  - Fast path: prepare recognises comparators of the form jax emits
//    (jnp.sort / argsort / lax.sort with num_keys >= 1, complex keys as
//    (real, imag)), i.e. lexicographic
//      or(cmp_0(a0, b0), and(eq_0(a0, b0), or(cmp_1(..), and(eq_1, ...))))
//    where cmp is LT or GT and each key ak/bk is an argument, its real/imag
//    part, and optionally jax's canonicalisation chain
//      select(x != x, NaN, select(x == 0, 0, x))
//    Keys are extracted into typed 64-bit values once per row and compared
//    with exactly the semantics of the IR (FLOAT: IEEE <, ==; TOTALORDER:
//    -NaN < -inf < ... < -0 < +0 < ... < inf < NaN; SIGNED; UNSIGNED), so
//    the fast path gives the same permutation as evaluating the region
//    would, whatever the data (NaNs included).
//  - Generic path: any other comparator is evaluated through
//    ctx->call_region on rank-0 views of the elements (slow, but correct).
//
// IRON_SORT_GENERIC=1 turns the fast path off (for A/B comparison);
// IRON_SORT_RADIX=0 keeps the fast path's keys but sorts them by merge sort
// instead of radix sort.
//
// is_stable=false is sorted stably as well (a stable order is a valid
// unstable one; XLA's own unstable order for ties is not reproduced).
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "device/host/ew_common.h"
#include "device/host/host_kernel.h"

#define SORT_MAX_KEYS 16
#define SORT_MAX_CANON 4
#define SORT_MAX_OPERANDS 64

typedef enum key_mode { KEY_S64, KEY_U64, KEY_F64 } key_mode_t;

typedef union key_val {
  int64_t s;
  uint64_t u;
  double d;
} key_val_t;

// One step of a canonicalisation chain: when the test holds, the value is
// replaced by the constant's bits. Steps are tried outermost first.
typedef struct canon_step {
  bool is_nan_test;  // x != x; else x == eq_value (FLOAT compare)
  double eq_value;
  uint64_t repl_bits;
} canon_step_t;

typedef struct sort_key {
  int32_t operand;  // which sort operand
  int32_t part;     // 0 whole value, 1 real part, 2 imag part
  iron_dtype_t dtype;  // dtype of the compared scalar (the part's dtype)
  size_t elem_size;    // bytes of one operand element
  key_mode_t mode;
  bool descending;  // GT, or LT with the operands swapped
  bool is_float;
  int32_t nbits;     // 8 * bytes of the compared scalar
  size_t part_size;  // bytes of the compared scalar
  int32_t num_canon;
  canon_step_t canon[SORT_MAX_CANON];
  // The canonicalisation's `x == 0` sees denormals (of the f32/f64 compute
  // type) as zero, as XLA:CPU's compare does with denormals flushed.
  bool daz;
} sort_key_t;

typedef struct sort_params {
  int32_t num_operands;
  int32_t rank;
  int64_t outer, n, inner;  // elements before / along / after `dimension`
  size_t elem_size[SORT_MAX_OPERANDS];
  bool fast;
  bool radix;  // fast path with only integer-ordered keys: LSD radix sort
  int32_t num_keys;
  sort_key_t keys[SORT_MAX_KEYS];
  const iron_region_t *region;  // generic path
} sort_params_t;

// ---------------------------------------------------------------------------
// Comparator pattern matching (prepare time)

static const iron_ir_op_t *def_of(const iron_ir_value_t *v,
                                  iron_op_kind_t kind) {
  return v->def_op && v->def_op->kind == kind ? v->def_op : NULL;
}

// Bits of a scalar constant (little-endian, zero-extended) and its dtype.
static bool constant_bits(const iron_ir_value_t *v, iron_dtype_t dtype,
                          uint64_t *out_bits) {
  const iron_ir_op_t *c = def_of(v, IRON_OP_CONSTANT);
  if (!c) return false;
  const iron_ir_attr_t *a = iron_ir_op_attr(c, "value");
  if (!a || a->kind != IRON_ATTR_DENSE || a->dense.type->dtype != dtype)
    return false;
  size_t es = iron_dtype_size(dtype);
  if (es == 0 || es > 8 || a->dense.size < es) return false;
  uint64_t bits = 0;
  memcpy(&bits, a->dense.data, es);
  *out_bits = bits;
  return true;
}

static bool is_float_key_dtype(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16 ||
         dt == IRON_DTYPE_F32 || dt == IRON_DTYPE_F64;
}

static double bits_to_double(uint64_t bits, iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_F16: return iron_f16_to_f32((uint16_t)bits);
    case IRON_DTYPE_BF16: return iron_bf16_to_f32((uint16_t)bits);
    case IRON_DTYPE_F32: return iron_f32_from_bits((uint32_t)bits);
    default: {
      double d;
      memcpy(&d, &bits, sizeof(d));
      return d;
    }
  }
}

typedef struct leaf {
  const iron_ir_value_t *base;  // block argument or real/imag of one
  int32_t arg;
  int32_t part;
  iron_dtype_t dtype;
  int32_t num_canon;
  canon_step_t canon[SORT_MAX_CANON];
} leaf_t;

static bool is_float_cmp(const iron_ir_op_t *cmp) {
  int32_t t = iron_ir_op_enum(cmp, "compare_type", IRON_CMP_TYPE_NOTYPE);
  return t == IRON_CMP_TYPE_FLOAT || t == IRON_CMP_TYPE_NOTYPE;
}

static bool match_leaf(const iron_ir_value_t *v, const iron_ir_block_t *blk,
                       leaf_t *out) {
  memset(out, 0, sizeof(*out));
  // Peel the canonicalisation selects, outermost first.
  const iron_ir_op_t *sel;
  const iron_ir_op_t *sels[SORT_MAX_CANON];
  while ((sel = def_of(v, IRON_OP_SELECT)) != NULL) {
    if (out->num_canon == SORT_MAX_CANON || sel->num_operands != 3)
      return false;
    sels[out->num_canon++] = sel;
    v = sel->operands[2];
  }
  out->base = v;
  const iron_ir_value_t *arg = v;
  const iron_ir_op_t *part_op;
  if ((part_op = def_of(v, IRON_OP_REAL)) != NULL) {
    out->part = 1;
    arg = part_op->operands[0];
  } else if ((part_op = def_of(v, IRON_OP_IMAG)) != NULL) {
    out->part = 2;
    arg = part_op->operands[0];
  }
  if (arg->def_op || arg->def_block != blk) return false;
  out->arg = (int32_t)arg->index;
  if (v->type->kind != IRON_TYPE_TENSOR || v->type->rank != 0) return false;
  out->dtype = v->type->dtype;
  for (int32_t i = 0; i < out->num_canon; ++i) {
    const iron_ir_op_t *s = sels[i];
    canon_step_t *st = &out->canon[i];
    if (!is_float_key_dtype(out->dtype)) return false;
    if (!constant_bits(s->operands[1], out->dtype, &st->repl_bits))
      return false;
    const iron_ir_op_t *c = def_of(s->operands[0], IRON_OP_COMPARE);
    if (!c || c->num_operands != 2 || !is_float_cmp(c)) return false;
    int32_t dir = iron_ir_op_enum(c, "comparison_direction", -1);
    const iron_ir_value_t *x = c->operands[0], *y = c->operands[1];
    if (dir == IRON_CMP_NE && x == v && y == v) {
      st->is_nan_test = true;
    } else if (dir == IRON_CMP_EQ && (x == v || y == v)) {
      uint64_t cb;
      if (!constant_bits(x == v ? y : x, out->dtype, &cb)) return false;
      st->eq_value = bits_to_double(cb, out->dtype);
    } else {
      return false;
    }
  }
  return true;
}

static bool leaf_same_transform(const leaf_t *a, const leaf_t *b) {
  if (a->part != b->part || a->dtype != b->dtype ||
      a->num_canon != b->num_canon)
    return false;
  for (int32_t i = 0; i < a->num_canon; ++i) {
    const canon_step_t *x = &a->canon[i], *y = &b->canon[i];
    if (x->is_nan_test != y->is_nan_test || x->repl_bits != y->repl_bits)
      return false;
    if (!x->is_nan_test && !(x->eq_value == y->eq_value)) return false;
  }
  return true;
}

// The comparison semantics of a compare op on `dt` as a key mode.
static bool key_mode_for(int32_t cmp_type, iron_dtype_t dt,
                         key_mode_t *out_mode) {
  iron_dtype_class_t cls = iron_dtype_class(dt);
  if (cls == IRON_DTYPE_CLASS_FLOAT) {
    if (!is_float_key_dtype(dt)) return false;
    if (cmp_type == IRON_CMP_TYPE_FLOAT || cmp_type == IRON_CMP_TYPE_NOTYPE) {
      *out_mode = KEY_F64;
      return true;
    }
    if (cmp_type == IRON_CMP_TYPE_TOTALORDER) {
      *out_mode = KEY_S64;
      return true;
    }
    return false;
  }
  if (cls == IRON_DTYPE_CLASS_SINT || cls == IRON_DTYPE_CLASS_UINT ||
      cls == IRON_DTYPE_CLASS_BOOL) {
    if (iron_dtype_bits(dt) % 8 != 0 && dt != IRON_DTYPE_PRED) return false;
    if (cmp_type == IRON_CMP_TYPE_NOTYPE)
      cmp_type = cls == IRON_DTYPE_CLASS_SINT ? IRON_CMP_TYPE_SIGNED
                                              : IRON_CMP_TYPE_UNSIGNED;
    if (cmp_type == IRON_CMP_TYPE_SIGNED && cls == IRON_DTYPE_CLASS_SINT) {
      *out_mode = KEY_S64;
      return true;
    }
    if (cmp_type == IRON_CMP_TYPE_UNSIGNED && cls != IRON_DTYPE_CLASS_SINT) {
      *out_mode = KEY_U64;
      return true;
    }
  }
  return false;
}

// Matches an ordering compare (LT/GT) of the lhs/rhs argument pair of one
// operand; fills key (not yet appended) and returns its two leaf values.
static bool match_order_cmp(const iron_ir_op_t *c, const iron_ir_block_t *blk,
                            sort_key_t *key) {
  if (!c || c->num_operands != 2) return false;
  int32_t dir = iron_ir_op_enum(c, "comparison_direction", -1);
  if (dir != IRON_CMP_LT && dir != IRON_CMP_GT) return false;
  leaf_t a, b;
  if (!match_leaf(c->operands[0], blk, &a) ||
      !match_leaf(c->operands[1], blk, &b))
    return false;
  if (!leaf_same_transform(&a, &b)) return false;
  bool a_is_lhs;
  if (a.arg % 2 == 0 && b.arg == a.arg + 1) {
    a_is_lhs = true;
  } else if (b.arg % 2 == 0 && a.arg == b.arg + 1) {
    a_is_lhs = false;
  } else {
    return false;
  }
  memset(key, 0, sizeof(*key));
  key->operand = (a_is_lhs ? a.arg : b.arg) / 2;
  key->part = a.part;
  key->dtype = a.dtype;
  key->descending = (dir == IRON_CMP_GT) == a_is_lhs;
  int32_t ct = iron_ir_op_enum(c, "compare_type", IRON_CMP_TYPE_NOTYPE);
  if (!key_mode_for(ct, a.dtype, &key->mode)) return false;
  key->num_canon = a.num_canon;
  memcpy(key->canon, a.canon, sizeof(key->canon));
  key->daz = iron_ew_flush_enabled();
  return true;
}

// True when `e` is compare(EQ) of the same two values (either order) with
// the same compare type as the ordering compare `c`.
static bool is_matching_eq(const iron_ir_op_t *e, const iron_ir_op_t *c) {
  if (!e || e->num_operands != 2) return false;
  if (iron_ir_op_enum(e, "comparison_direction", -1) != IRON_CMP_EQ)
    return false;
  if (iron_ir_op_enum(e, "compare_type", IRON_CMP_TYPE_NOTYPE) !=
      iron_ir_op_enum(c, "compare_type", IRON_CMP_TYPE_NOTYPE))
    return false;
  const iron_ir_value_t *x = e->operands[0], *y = e->operands[1];
  const iron_ir_value_t *a = c->operands[0], *b = c->operands[1];
  return (x == a && y == b) || (x == b && y == a);
}

static bool match_lex(const iron_ir_value_t *v, const iron_ir_block_t *blk,
                      sort_params_t *p) {
  if (p->num_keys == SORT_MAX_KEYS) return false;
  const iron_ir_op_t *c = def_of(v, IRON_OP_COMPARE);
  if (c) return match_order_cmp(c, blk, &p->keys[p->num_keys++]);
  const iron_ir_op_t *o = def_of(v, IRON_OP_OR);
  if (!o || o->num_operands != 2) return false;
  for (int side = 0; side < 2; ++side) {
    const iron_ir_op_t *lt = def_of(o->operands[side], IRON_OP_COMPARE);
    const iron_ir_op_t *an = def_of(o->operands[1 - side], IRON_OP_AND);
    if (!lt || !an || an->num_operands != 2) continue;
    for (int s2 = 0; s2 < 2; ++s2) {
      const iron_ir_op_t *eq = def_of(an->operands[s2], IRON_OP_COMPARE);
      if (!is_matching_eq(eq, lt)) continue;
      int32_t saved = p->num_keys;
      if (!match_order_cmp(lt, blk, &p->keys[p->num_keys++])) {
        p->num_keys = saved;
        continue;
      }
      if (match_lex(an->operands[1 - s2], blk, p)) return true;
      p->num_keys = saved;
    }
  }
  return false;
}

static bool match_comparator(const iron_ir_op_t *op, sort_params_t *p) {
  if (op->num_regions != 1 || op->regions[0].num_blocks != 1) return false;
  const iron_ir_block_t *blk = &op->regions[0].blocks[0];
  if (blk->num_ops == 0) return false;
  const iron_ir_op_t *ret = blk->ops[blk->num_ops - 1];
  if (ret->kind != IRON_OP_RETURN || ret->num_operands != 1) return false;
  p->num_keys = 0;
  if (!match_lex(ret->operands[0], blk, p)) return false;
  for (int32_t k = 0; k < p->num_keys; ++k) {
    sort_key_t *key = &p->keys[k];
    if (key->operand >= p->num_operands) return false;
    key->elem_size = p->elem_size[key->operand];
    key->part_size = iron_dtype_size(key->dtype);
    key->nbits = (int32_t)(key->part_size * 8);
    key->is_float = iron_dtype_class(key->dtype) == IRON_DTYPE_CLASS_FLOAT;
    // The argument's type must be the operand's element type (or its part).
    const iron_ir_type_t *at = blk->args[2 * key->operand].type;
    iron_dtype_t want = key->part ? iron_dtype_complex_part(at->dtype)
                                  : at->dtype;
    if (want != key->dtype) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Stable merge sort of an index permutation.

typedef struct cmp_ctx cmp_ctx_t;
typedef bool (*less_fn_t)(cmp_ctx_t *c, int64_t i, int64_t j);

static void merge_sort(cmp_ctx_t *c, less_fn_t less, int64_t *a, int64_t *tmp,
                       int64_t n) {
  // Insertion-sort runs of 16 (stable: only strictly smaller moves left).
  const int64_t run = 16;
  for (int64_t lo = 0; lo < n; lo += run) {
    int64_t hi = lo + run < n ? lo + run : n;
    for (int64_t i = lo + 1; i < hi; ++i) {
      int64_t x = a[i], j = i;
      while (j > lo && less(c, x, a[j - 1])) {
        a[j] = a[j - 1];
        --j;
      }
      a[j] = x;
    }
  }
  int64_t *src = a, *dst = tmp;
  for (int64_t w = run; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n;
      int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      // Take from the right only when strictly smaller: stable.
      while (i < mid && j < hi)
        dst[k++] = less(c, src[j], src[i]) ? src[j++] : src[i++];
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    int64_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof(int64_t));
}

// ---------------------------------------------------------------------------
// LSD radix sort for keys whose order is an integer order (ints, and floats
// under TOTALORDER after canonicalisation): stable, so sorting by the last key
// first gives the lexicographic order. Keys are mapped to unsigned values in
// the same order and offset by their minimum, so only the bytes that vary
// within the row are passed over.

#define SORT_RADIX_MIN 64

static void radix_sort(const sort_params_t *p, const key_val_t *keys,
                       int64_t n, int64_t *perm, int64_t *tmp_idx,
                       uint64_t *val, uint64_t *tmp_val) {
  size_t nk = (size_t)p->num_keys;
  int64_t *cur = perm, *alt = tmp_idx;
  for (int32_t k = p->num_keys - 1; k >= 0; --k) {
    const sort_key_t *key = &p->keys[k];
    uint64_t flip = key->mode == KEY_S64 ? (1ull << 63) : 0;
    uint64_t inv = key->descending ? ~0ull : 0;
    uint64_t mn = ~0ull, mx = 0;
    for (int64_t i = 0; i < n; ++i) {
      uint64_t v = (keys[(size_t)cur[i] * nk + (size_t)k].u ^ flip) ^ inv;
      val[i] = v;
      if (v < mn) mn = v;
      if (v > mx) mx = v;
    }
    uint64_t range = mx - mn;
    if (range == 0) continue;
    for (int64_t i = 0; i < n; ++i) val[i] -= mn;
    for (int shift = 0; shift < 64 && (range >> shift) != 0; shift += 8) {
      int64_t count[256] = {0};
      for (int64_t i = 0; i < n; ++i) count[(val[i] >> shift) & 255]++;
      int64_t off = 0;
      for (int b = 0; b < 256; ++b) {
        int64_t c = count[b];
        count[b] = off;
        off += c;
      }
      for (int64_t i = 0; i < n; ++i) {
        int64_t d = count[(val[i] >> shift) & 255]++;
        tmp_val[d] = val[i];
        alt[d] = cur[i];
      }
      uint64_t *tv = val;
      val = tmp_val;
      tmp_val = tv;
      int64_t *ti = cur;
      cur = alt;
      alt = ti;
    }
  }
  if (cur != perm) memcpy(perm, cur, (size_t)n * sizeof(int64_t));
}

// ---------------------------------------------------------------------------
// Run time

struct cmp_ctx {
  const sort_params_t *p;
  // Fast path: keys[t * num_keys + k] for element t of the row.
  const key_val_t *keys;
  // Generic path.
  const iron_kernel_ctx_t *hctx;
  const iron_tensor_t *const *inputs;
  int64_t row_base, stride;  // element offset of t = row_base + t * stride
  iron_tensor_t *args;       // 2N rank-0 views
  const iron_tensor_t **arg_ptrs;
  iron_tensor_t *result;
  iron_status_t status;
};

static uint64_t read_bits(const void *base, size_t elem_size, int32_t part,
                          size_t part_size, int64_t idx) {
  const unsigned char *p = (const unsigned char *)base + (size_t)idx * elem_size;
  if (part == 2) p += part_size;
  uint64_t v = 0;
  memcpy(&v, p, part ? part_size : elem_size);
  return v;
}

// f16 computes in f32, where its denormals are normal numbers; bf16's
// denormals stay denormal in f32.
static bool is_compute_denormal(double d, iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_F32:
    case IRON_DTYPE_BF16:
      return fpclassify((float)d) == FP_SUBNORMAL;
    case IRON_DTYPE_F64:
      return fpclassify(d) == FP_SUBNORMAL;
    default:
      return false;
  }
}

static key_val_t make_key(const sort_key_t *k, uint64_t bits) {
  key_val_t out = {.u = 0};
  int nbits = k->nbits;
  if (k->num_canon) {
    double d = bits_to_double(bits, k->dtype);
    for (int32_t i = 0; i < k->num_canon; ++i) {
      const canon_step_t *st = &k->canon[i];
      bool hit = st->is_nan_test ? d != d : d == st->eq_value;
      if (!hit && k->daz && !st->is_nan_test && st->eq_value == 0)
        hit = is_compute_denormal(d, k->dtype);
      if (hit) {
        bits = st->repl_bits;
        break;
      }
    }
  }
  switch (k->mode) {
    case KEY_F64:
      out.d = bits_to_double(bits, k->dtype);
      break;
    case KEY_U64:
      out.u = bits;
      break;
    case KEY_S64: {
      // Sign-extend from the element width.
      int64_t s = nbits == 64 ? (int64_t)bits
                              : (int64_t)(bits << (64 - nbits)) >> (64 - nbits);
      if (k->is_float && s < 0)
        s ^= INT64_MAX;  // total order: negative floats reverse
      out.s = s;
      break;
    }
  }
  return out;
}

static bool fast_less(cmp_ctx_t *c, int64_t i, int64_t j) {
  const sort_params_t *p = c->p;
  const key_val_t *a = c->keys + i * p->num_keys;
  const key_val_t *b = c->keys + j * p->num_keys;
  for (int32_t k = 0; k < p->num_keys; ++k) {
    key_val_t x = a[k], y = b[k];
    if (p->keys[k].descending) {
      key_val_t t = x;
      x = y;
      y = t;
    }
    bool lt, eq;
    switch (p->keys[k].mode) {
      case KEY_S64: lt = x.s < y.s, eq = x.s == y.s; break;
      case KEY_U64: lt = x.u < y.u, eq = x.u == y.u; break;
      default: lt = x.d < y.d, eq = x.d == y.d; break;
    }
    if (lt) return true;
    if (!eq || k == p->num_keys - 1) return false;
  }
  return false;
}

static bool generic_less(cmp_ctx_t *c, int64_t i, int64_t j) {
  if (c->status) return false;
  const sort_params_t *p = c->p;
  int64_t ei = c->row_base + i * c->stride, ej = c->row_base + j * c->stride;
  for (int32_t k = 0; k < p->num_operands; ++k) {
    const unsigned char *base = (const unsigned char *)c->inputs[k]->data;
    c->args[2 * k].data = (void *)(base + (size_t)ei * p->elem_size[k]);
    c->args[2 * k + 1].data = (void *)(base + (size_t)ej * p->elem_size[k]);
  }
  iron_tensor_t *outs[1] = {c->result};
  c->status =
      c->hctx->call_region(c->hctx, c->p->region, c->arg_ptrs, outs);
  if (c->status) return false;
  return *(const unsigned char *)c->result->data != 0;
}

typedef struct sort_job {
  const sort_params_t *p;
  const iron_kernel_ctx_t *hctx;
  const iron_tensor_t *const *inputs;
  iron_tensor_t *const *outputs;
  atomic_int failed;  // 1: out of memory
  iron_status_t status;  // generic path error (single-threaded)
} sort_job_t;

static void gather_row(const sort_params_t *p, const iron_tensor_t *const *in,
                       iron_tensor_t *const *out, int64_t row_base,
                       const int64_t *perm) {
  int64_t s = p->inner;
  for (int32_t k = 0; k < p->num_operands; ++k) {
    size_t es = p->elem_size[k];
    const unsigned char *src = (const unsigned char *)in[k]->data;
    unsigned char *dst = (unsigned char *)out[k]->data;
    for (int64_t t = 0; t < p->n; ++t) {
      size_t d = (size_t)(row_base + t * s) * es;
      size_t from = (size_t)(row_base + perm[t] * s) * es;
      switch (es) {
        case 1: dst[d] = src[from]; break;
        case 2: memcpy(dst + d, src + from, 2); break;
        case 4: memcpy(dst + d, src + from, 4); break;
        case 8: memcpy(dst + d, src + from, 8); break;
        default: memcpy(dst + d, src + from, es); break;
      }
    }
  }
}

static void sort_rows(void *arg, int64_t begin, int64_t end) {
  sort_job_t *job = (sort_job_t *)arg;
  const sort_params_t *p = job->p;
  int64_t n = p->n;
  size_t nk = p->fast ? (size_t)p->num_keys : 0;
  int64_t *perm = (int64_t *)malloc((size_t)n * 2 * sizeof(int64_t));
  key_val_t *keys = nk ? (key_val_t *)malloc((size_t)n * nk * sizeof(key_val_t))
                       : NULL;
  bool radix = p->radix && n >= SORT_RADIX_MIN;
  uint64_t *vals = radix ? (uint64_t *)malloc((size_t)n * 2 * sizeof(uint64_t))
                         : NULL;
  iron_tensor_t *args = NULL;
  const iron_tensor_t **arg_ptrs = NULL;
  iron_tensor_t result;
  unsigned char result_byte = 0;
  if (!p->fast) {
    args = (iron_tensor_t *)calloc((size_t)p->num_operands * 2, sizeof(*args));
    arg_ptrs = (const iron_tensor_t **)calloc((size_t)p->num_operands * 2,
                                              sizeof(*arg_ptrs));
  }
  if (!perm || (nk && !keys) || (radix && !vals) ||
      (!p->fast && (!args || !arg_ptrs))) {
    atomic_store(&job->failed, 1);
    goto done;
  }
  cmp_ctx_t c = {.p = p, .keys = keys, .hctx = job->hctx,
                 .inputs = job->inputs, .stride = p->inner};
  if (!p->fast) {
    for (int32_t k = 0; k < 2 * p->num_operands; ++k) {
      iron_tensor_t *t = &args[k];
      t->dtype = job->inputs[k / 2]->dtype;
      t->rank = 0;
      t->count = 1;
      t->nbytes = p->elem_size[k / 2];
      arg_ptrs[k] = t;
    }
    memset(&result, 0, sizeof(result));
    result.data = &result_byte;
    result.dtype = IRON_DTYPE_PRED;
    result.count = 1;
    result.nbytes = 1;
    c.args = args;
    c.arg_ptrs = arg_ptrs;
    c.result = &result;
  }
  for (int64_t row = begin; row < end; ++row) {
    int64_t o = row / p->inner, in = row % p->inner;
    int64_t row_base = o * n * p->inner + in;
    c.row_base = row_base;
    for (int64_t t = 0; t < n; ++t) perm[t] = t;
    if (p->fast) {
      for (int64_t t = 0; t < n; ++t) {
        for (size_t k = 0; k < nk; ++k) {
          const sort_key_t *key = &p->keys[k];
          uint64_t bits = read_bits(job->inputs[key->operand]->data,
                                    key->elem_size, key->part,
                                    key->part_size,
                                    row_base + t * p->inner);
          keys[(size_t)t * nk + k] = make_key(key, bits);
        }
      }
      if (radix)
        radix_sort(p, keys, n, perm, perm + n, vals, vals + n);
      else
        merge_sort(&c, fast_less, perm, perm + n, n);
    } else {
      merge_sort(&c, generic_less, perm, perm + n, n);
      if (c.status) {
        job->status = c.status;
        goto done;
      }
    }
    gather_row(p, job->inputs, job->outputs, row_base, perm);
  }
done:
  free(perm);
  free(keys);
  free(vals);
  free(args);
  free(arg_ptrs);
}

static iron_status_t sort_run(const iron_kernel_ctx_t *ctx, const void *params,
                              const iron_tensor_t *const *inputs,
                              iron_tensor_t *const *outputs) {
  const sort_params_t *p = (const sort_params_t *)params;
  int64_t rows = p->outer * p->inner;
  if (rows == 0 || p->n == 0) return IRON_OK;
  sort_job_t job = {.p = p, .hctx = ctx, .inputs = inputs,
                    .outputs = outputs};
  atomic_init(&job.failed, 0);
  if (p->fast) {
    int64_t grain = 16384 / p->n;
    iron_threadpool_parallel_for(ctx ? ctx->pool : NULL, rows,
                                 grain > 0 ? grain : 1, sort_rows, &job);
  } else {
    if (!ctx || !ctx->call_region)
      return IRON_ERR(FAILED_PRECONDITION,
                      "stablehlo.sort: comparator needs call_region");
    // One thread: the region evaluator is not assumed re-entrant.
    sort_rows(&job, 0, rows);
    if (job.status)
      return iron_status_annotate(job.status, "stablehlo.sort comparator");
  }
  if (atomic_load(&job.failed))
    return IRON_ERR(RESOURCE_EXHAUSTED, "stablehlo.sort: out of memory");
  return IRON_OK;
}

static iron_status_t sort_prepare(const iron_ir_op_t *op,
                                  iron_region_t *const *regions,
                                  void **out_params) {
  *out_params = NULL;
  uint32_t n_ops = op->num_operands;
  if (n_ops == 0 || n_ops > SORT_MAX_OPERANDS || op->num_results != n_ops)
    return iron_ir_op_unimplemented(op, "with %u operands", n_ops);
  const iron_ir_type_t *t0 = op->operands[0]->type;
  if (t0->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t0))
    return iron_ir_op_unimplemented(op, "for non-static shapes");
  sort_params_t *p = (sort_params_t *)calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  iron_status_t st = IRON_OK;
  p->num_operands = (int32_t)n_ops;
  p->rank = t0->rank;
  for (uint32_t k = 0; k < n_ops; ++k) {
    const iron_ir_type_t *t = op->operands[k]->type;
    if (t->kind != IRON_TYPE_TENSOR || t->rank != t0->rank ||
        !iron_ir_type_equal(t, op->results[k].type)) {
      st = IRON_ERR(INVALID_ARGUMENT,
                    "stablehlo.sort: operand %u type differs from its result "
                    "or from operand 0",
                    k);
      goto fail;
    }
    for (int32_t d = 0; d < t->rank; ++d)
      if (t->dims[d] != t0->dims[d]) {
        st = IRON_ERR(INVALID_ARGUMENT,
                      "stablehlo.sort: operand shapes differ");
        goto fail;
      }
    p->elem_size[k] = iron_dtype_size(t->dtype);
    if (p->elem_size[k] == 0) {
      st = iron_ir_op_unimplemented(op, "for dtype %s",
                                    iron_dtype_name(t->dtype));
      goto fail;
    }
  }
  int64_t dim = 0;
  const iron_ir_attr_t *da = iron_ir_op_attr(op, "dimension");
  if (da && !iron_ir_attr_as_i64(da, &dim)) {
    st = IRON_ERR(INVALID_ARGUMENT, "stablehlo.sort: bad dimension");
    goto fail;
  }
  if (dim < 0) dim += t0->rank;
  if (t0->rank > 0 && (dim < 0 || dim >= t0->rank)) {
    st = IRON_ERR(INVALID_ARGUMENT,
                  "stablehlo.sort: dimension %lld out of range for rank %d",
                  (long long)dim, t0->rank);
    goto fail;
  }
  p->outer = 1, p->n = 1, p->inner = 1;
  for (int32_t d = 0; d < t0->rank; ++d) {
    if (d < dim) p->outer *= t0->dims[d];
    else if (d == dim) p->n = t0->dims[d];
    else p->inner *= t0->dims[d];
  }
  if (op->num_regions != 1 || op->regions[0].num_blocks != 1 ||
      op->regions[0].blocks[0].num_args != 2 * n_ops) {
    st = IRON_ERR(INVALID_ARGUMENT,
                  "stablehlo.sort: comparator must take %u arguments",
                  2 * n_ops);
    goto fail;
  }
  const char *env = getenv("IRON_SORT_GENERIC");
  bool allow_fast = !(env && env[0] && env[0] != '0');
  p->fast = allow_fast && match_comparator(op, p);
  if (p->fast) {
    const char *renv = getenv("IRON_SORT_RADIX");
    p->radix = !(renv && renv[0] == '0');
    for (int32_t k = 0; k < p->num_keys; ++k)
      if (p->keys[k].mode == KEY_F64) p->radix = false;
  }
  if (!p->fast) {
    p->num_keys = 0;
    if (!regions || !regions[0]) {
      st = iron_ir_op_unimplemented(
          op, "with this comparator (no compiled region to call)");
      goto fail;
    }
    p->region = regions[0];
  }
  *out_params = p;
  return IRON_OK;
fail:
  free(p);
  return st;
}

static const iron_kernel_t kSort = {
    /* .name = */ "sort",
    /* .prepare = */ sort_prepare,
    /* .run = */ sort_run,
    /* .destroy = */ NULL,
    /* .inplace_ok = */ false,
    /* .elementwise = */ false,
};

void iron_host_register_sort(iron_kernel_table_t table) {
  table[IRON_OP_SORT] = &kSort;
}
