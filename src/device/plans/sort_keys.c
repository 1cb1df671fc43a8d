// Sort comparator recognition shared by the devices (sort_keys.h). Moved
// from the host's sort.c unchanged in substance.
#include "device/plans/sort_keys.h"

#include <string.h>

#include "base/half.h"

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

double iron_sort_bits_to_double(uint64_t bits, iron_dtype_t dt) {
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
  iron_sort_canon_step_t canon[IRON_SORT_MAX_CANON];
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
  const iron_ir_op_t *sels[IRON_SORT_MAX_CANON];
  while ((sel = def_of(v, IRON_OP_SELECT)) != NULL) {
    if (out->num_canon == IRON_SORT_MAX_CANON || sel->num_operands != 3)
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
    iron_sort_canon_step_t *st = &out->canon[i];
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
      st->eq_value = iron_sort_bits_to_double(cb, out->dtype);
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
    const iron_sort_canon_step_t *x = &a->canon[i], *y = &b->canon[i];
    if (x->is_nan_test != y->is_nan_test || x->repl_bits != y->repl_bits)
      return false;
    if (!x->is_nan_test && !(x->eq_value == y->eq_value)) return false;
  }
  return true;
}

// The comparison semantics of a compare op on `dt` as a key mode.
static bool key_mode_for(int32_t cmp_type, iron_dtype_t dt,
                         iron_sort_key_mode_t *out_mode) {
  iron_dtype_class_t cls = iron_dtype_class(dt);
  if (cls == IRON_DTYPE_CLASS_FLOAT) {
    if (!is_float_key_dtype(dt)) return false;
    if (cmp_type == IRON_CMP_TYPE_FLOAT || cmp_type == IRON_CMP_TYPE_NOTYPE) {
      *out_mode = IRON_SORT_KEY_F64;
      return true;
    }
    if (cmp_type == IRON_CMP_TYPE_TOTALORDER) {
      *out_mode = IRON_SORT_KEY_S64;
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
      *out_mode = IRON_SORT_KEY_S64;
      return true;
    }
    if (cmp_type == IRON_CMP_TYPE_UNSIGNED && cls != IRON_DTYPE_CLASS_SINT) {
      *out_mode = IRON_SORT_KEY_U64;
      return true;
    }
  }
  return false;
}

// Matches an ordering compare (LT/GT) of the lhs/rhs argument pair of one
// operand; fills key (not yet appended) and returns its two leaf values.
static bool match_order_cmp(const iron_ir_op_t *c, const iron_ir_block_t *blk,
                            iron_sort_key_t *key) {
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
                      iron_sort_keys_t *p) {
  if (p->num_keys == IRON_SORT_MAX_KEYS) return false;
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

bool iron_sort_keys_match(const iron_ir_op_t *op, iron_sort_keys_t *p) {
  if (op->num_regions != 1 || op->regions[0].num_blocks != 1) return false;
  const iron_ir_block_t *blk = &op->regions[0].blocks[0];
  if (blk->num_ops == 0 || blk->num_args != 2 * op->num_operands) return false;
  const iron_ir_op_t *ret = blk->ops[blk->num_ops - 1];
  if (ret->kind != IRON_OP_RETURN || ret->num_operands != 1) return false;
  p->num_keys = 0;
  if (!match_lex(ret->operands[0], blk, p)) return false;
  for (int32_t k = 0; k < p->num_keys; ++k) {
    iron_sort_key_t *key = &p->keys[k];
    if (key->operand >= (int32_t)op->num_operands) return false;
    const iron_ir_type_t *ot = op->operands[key->operand]->type;
    key->elem_size = iron_dtype_size(ot->dtype);
    key->part_size = iron_dtype_size(key->dtype);
    key->nbits = (int32_t)(key->part_size * 8);
    key->is_float = iron_dtype_class(key->dtype) == IRON_DTYPE_CLASS_FLOAT;
    // The argument's type must be the operand's element type (or its part).
    const iron_ir_type_t *at = blk->args[2 * key->operand].type;
    iron_dtype_t want = key->part ? iron_dtype_complex_part(at->dtype)
                                  : at->dtype;
    if (want != key->dtype || at->dtype != ot->dtype) return false;
  }
  return true;
}

bool iron_sort_keys_integer_ordered(const iron_sort_keys_t *keys) {
  for (int32_t k = 0; k < keys->num_keys; ++k)
    if (keys->keys[k].mode == IRON_SORT_KEY_F64) return false;
  return true;
}

iron_status_t iron_sort_check_comparator(const iron_ir_op_t *op) {
  uint32_t n = op->num_operands;
  if (op->num_regions != 1 || op->regions[0].num_blocks != 1 ||
      op->regions[0].blocks[0].num_args != 2 * n)
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: comparator must take %u arguments", op->name, 2 * n);
  const iron_ir_block_t *blk = &op->regions[0].blocks[0];
  for (uint32_t a = 0; a < 2 * n; ++a) {
    const iron_ir_type_t *at = blk->args[a].type;
    const iron_ir_type_t *ot = op->operands[a / 2]->type;
    if (!at || !ot || at->kind != IRON_TYPE_TENSOR || at->rank != 0 ||
        ot->kind != IRON_TYPE_TENSOR || at->dtype != ot->dtype)
      return IRON_ERR(INVALID_ARGUMENT,
                      "%s: comparator argument %u is not a scalar of operand "
                      "%u's element type",
                      op->name, a, a / 2);
  }
  return IRON_OK;
}
