#include "ir/ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *name;
  const char *vhlo;
  iron_op_class_t cls;
} iron_op_info_t;

static const iron_op_info_t kOpInfo[IRON_OP_COUNT] = {
#define IRON_OP(e, name, vhlo, kind) \
  [IRON_OP_##e] = {name, vhlo, IRON_OP_CLASS_##kind},
#include "ir/ops.def"
};

const char *iron_op_kind_name(iron_op_kind_t kind) {
  if ((unsigned)kind >= IRON_OP_COUNT) return "<invalid>";
  return kOpInfo[kind].name;
}

const char *iron_op_kind_vhlo_name(iron_op_kind_t kind) {
  if ((unsigned)kind >= IRON_OP_COUNT) return NULL;
  return kOpInfo[kind].vhlo;
}

iron_op_class_t iron_op_kind_class(iron_op_kind_t kind) {
  if ((unsigned)kind >= IRON_OP_COUNT) return IRON_OP_CLASS_OTHER;
  return kOpInfo[kind].cls;
}

iron_op_kind_t iron_op_kind_from_vhlo(const char *base, size_t len) {
  // ~130 entries, looked up once per distinct op name per artifact: a linear
  // scan is fine.
  for (int i = 0; i < IRON_OP_COUNT; ++i) {
    const char *v = kOpInfo[i].vhlo;
    if (v && strlen(v) == len && memcmp(v, base, len) == 0)
      return (iron_op_kind_t)i;
  }
  return IRON_OP_UNKNOWN;
}

int64_t iron_ir_type_num_elements(const iron_ir_type_t *type) {
  if (type->kind != IRON_TYPE_TENSOR) return -1;
  int64_t n = 1;
  for (int32_t i = 0; i < type->rank; ++i) {
    if (type->dims[i] < 0) return -1;
    if (iron_mul_overflow_i64(n, type->dims[i], &n)) return -1;
  }
  return n;
}

bool iron_ir_type_byte_size(const iron_ir_type_t *type, size_t *out_bytes) {
  if (type->kind == IRON_TYPE_TOKEN) {
    *out_bytes = 0;
    return true;
  }
  int64_t n = iron_ir_type_num_elements(type);
  if (n < 0) return false;
  size_t bytes;
  if (iron_mul_overflow_size((size_t)n, iron_dtype_size(type->dtype), &bytes))
    return false;
  *out_bytes = bytes;
  return true;
}

bool iron_ir_type_is_static(const iron_ir_type_t *type) {
  if (type->kind == IRON_TYPE_TOKEN) return true;
  if (type->kind == IRON_TYPE_TUPLE) {
    for (uint32_t i = 0; i < type->num_elements; ++i)
      if (!iron_ir_type_is_static(type->elements[i])) return false;
    return true;
  }
  return iron_ir_type_num_elements(type) >= 0;
}

bool iron_ir_type_same_dims(const iron_ir_type_t *a, const iron_ir_type_t *b) {
  if (a->kind != IRON_TYPE_TENSOR || b->kind != IRON_TYPE_TENSOR ||
      a->rank != b->rank)
    return false;
  for (int32_t i = 0; i < a->rank; ++i)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

bool iron_ir_type_equal(const iron_ir_type_t *a, const iron_ir_type_t *b) {
  if (a == b) return true;
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case IRON_TYPE_TENSOR:
      if (a->dtype != b->dtype || a->rank != b->rank) return false;
      for (int32_t i = 0; i < a->rank; ++i)
        if (a->dims[i] != b->dims[i]) return false;
      return true;
    case IRON_TYPE_TOKEN:
      return true;
    case IRON_TYPE_UNRANKED:
      return a->dtype == b->dtype;
    case IRON_TYPE_TUPLE:
    case IRON_TYPE_FUNCTION:
      if (a->num_elements != b->num_elements ||
          a->num_func_inputs != b->num_func_inputs)
        return false;
      for (uint32_t i = 0; i < a->num_elements; ++i)
        if (!iron_ir_type_equal(a->elements[i], b->elements[i])) return false;
      return true;
    case IRON_TYPE_OTHER:
      return a->description && b->description &&
             strcmp(a->description, b->description) == 0;
  }
  return false;
}

typedef struct {
  char *buf;
  size_t cap, len;
} iron_sbuf_t;

static void sb_printf(iron_sbuf_t *sb, const char *fmt, ...)
    IRON_PRINTF_LIKE(2, 3);
static void sb_printf(iron_sbuf_t *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = sb->len < sb->cap ? sb->cap - sb->len : 0;
  int n = vsnprintf(room ? sb->buf + sb->len : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) sb->len += (size_t)n;
}

static void type_format(const iron_ir_type_t *t, iron_sbuf_t *sb) {
  switch (t->kind) {
    case IRON_TYPE_TENSOR:
      sb_printf(sb, "tensor<");
      for (int32_t i = 0; i < t->rank; ++i) {
        if (t->dims[i] == IRON_DIM_DYNAMIC)
          sb_printf(sb, "?x");
        else
          sb_printf(sb, "%lldx", (long long)t->dims[i]);
      }
      sb_printf(sb, "%s>", iron_dtype_name(t->dtype));
      return;
    case IRON_TYPE_UNRANKED:
      sb_printf(sb, "tensor<*x%s>", iron_dtype_name(t->dtype));
      return;
    case IRON_TYPE_TOKEN:
      sb_printf(sb, "!stablehlo.token");
      return;
    case IRON_TYPE_TUPLE:
      sb_printf(sb, "tuple<");
      for (uint32_t i = 0; i < t->num_elements; ++i) {
        if (i) sb_printf(sb, ", ");
        type_format(t->elements[i], sb);
      }
      sb_printf(sb, ">");
      return;
    case IRON_TYPE_FUNCTION:
      sb_printf(sb, "(");
      for (uint32_t i = 0; i < t->num_func_inputs; ++i) {
        if (i) sb_printf(sb, ", ");
        type_format(t->elements[i], sb);
      }
      sb_printf(sb, ") -> (");
      for (uint32_t i = t->num_func_inputs; i < t->num_elements; ++i) {
        if (i > t->num_func_inputs) sb_printf(sb, ", ");
        type_format(t->elements[i], sb);
      }
      sb_printf(sb, ")");
      return;
    case IRON_TYPE_OTHER:
      sb_printf(sb, "%s", t->description ? t->description : "<type>");
      return;
  }
}

size_t iron_ir_type_format(const iron_ir_type_t *type, char *buf, size_t cap) {
  iron_sbuf_t sb = {buf, cap, 0};
  if (cap) buf[0] = '\0';
  type_format(type, &sb);
  if (cap) buf[sb.len < cap ? sb.len : cap - 1] = '\0';
  return sb.len;
}

void iron_ir_module_destroy(iron_ir_module_t *module) {
  if (!module) return;
  iron_arena_t arena = module->arena;
  // The module struct itself lives in its arena.
  iron_arena_deinit(&arena);
}

const iron_ir_func_t *iron_ir_module_lookup(const iron_ir_module_t *module,
                                            const char *name) {
  for (uint32_t i = 0; i < module->num_funcs; ++i)
    if (module->funcs[i].name && strcmp(module->funcs[i].name, name) == 0)
      return &module->funcs[i];
  return NULL;
}

const iron_ir_func_t *iron_ir_module_main(const iron_ir_module_t *module) {
  const iron_ir_func_t *f = iron_ir_module_lookup(module, "main");
  if (f) return f;
  const iron_ir_func_t *only = NULL;
  for (uint32_t i = 0; i < module->num_funcs; ++i) {
    if (!module->funcs[i].is_public) continue;
    if (only) return NULL;
    only = &module->funcs[i];
  }
  return only;
}

const iron_ir_attr_t *iron_ir_op_attr(const iron_ir_op_t *op,
                                      const char *name) {
  for (uint32_t i = 0; i < op->num_attrs; ++i)
    if (strcmp(op->attrs[i].name, name) == 0) return op->attrs[i].value;
  return NULL;
}

const iron_ir_attr_t *iron_ir_dict_get(const iron_ir_attr_t *dict,
                                       const char *name) {
  if (!dict || dict->kind != IRON_ATTR_DICT) return NULL;
  for (uint32_t i = 0; i < dict->dict.count; ++i)
    if (strcmp(dict->dict.entries[i].name, name) == 0)
      return dict->dict.entries[i].value;
  return NULL;
}

static bool read_int_elem(const void *data, iron_dtype_t dt, size_t idx,
                          int64_t *out) {
  const unsigned char *p = (const unsigned char *)data;
  switch (dt) {
    case IRON_DTYPE_PRED:
    case IRON_DTYPE_U8:
    case IRON_DTYPE_U4:
    case IRON_DTYPE_U2: *out = p[idx]; return true;
    case IRON_DTYPE_S8:
    case IRON_DTYPE_S4:
    case IRON_DTYPE_S2: *out = ((const int8_t *)data)[idx]; return true;
    case IRON_DTYPE_S16: *out = ((const int16_t *)data)[idx]; return true;
    case IRON_DTYPE_U16: *out = ((const uint16_t *)data)[idx]; return true;
    case IRON_DTYPE_S32: *out = ((const int32_t *)data)[idx]; return true;
    case IRON_DTYPE_U32: *out = ((const uint32_t *)data)[idx]; return true;
    case IRON_DTYPE_S64:
    case IRON_DTYPE_U64:
    case IRON_DTYPE_INDEX: *out = ((const int64_t *)data)[idx]; return true;
    default: return false;
  }
}

iron_status_t iron_ir_attr_i64_list(const iron_ir_attr_t *attr,
                                    const char *what, int64_t *out_values,
                                    uint32_t cap, uint32_t *out_count) {
  *out_count = 0;
  if (!attr) return IRON_OK;
  switch (attr->kind) {
    case IRON_ATTR_INT:
      if (cap < 1) break;
      out_values[0] = attr->i;
      *out_count = 1;
      return IRON_OK;
    case IRON_ATTR_ARRAY: {
      if (attr->array.count > cap) break;
      for (uint32_t i = 0; i < attr->array.count; ++i) {
        if (!iron_ir_attr_as_i64(attr->array.items[i], &out_values[i]))
          return IRON_ERR(INVALID_ARGUMENT,
                          "attribute %s: element %u is not an integer", what,
                          i);
      }
      *out_count = attr->array.count;
      return IRON_OK;
    }
    case IRON_ATTR_DENSE: {
      const iron_ir_type_t *t = attr->dense.type;
      int64_t n = iron_ir_type_num_elements(t);
      if (n < 0 || (uint64_t)n > cap) break;
      for (int64_t i = 0; i < n; ++i) {
        if (!read_int_elem(attr->dense.data, t->dtype,
                           attr->dense.splat ? 0 : (size_t)i, &out_values[i]))
          return IRON_ERR(INVALID_ARGUMENT,
                          "attribute %s: not an integer tensor", what);
      }
      *out_count = (uint32_t)n;
      return IRON_OK;
    }
    default:
      return IRON_ERR(INVALID_ARGUMENT,
                      "attribute %s: expected a list of integers", what);
  }
  return IRON_ERR(INVALID_ARGUMENT,
                  "attribute %s: too many entries (at most %u)", what, cap);
}

iron_status_t iron_ir_op_i64_list(const iron_ir_op_t *op, const char *name,
                                  int64_t *out_values, uint32_t cap,
                                  uint32_t *out_count) {
  return iron_ir_attr_i64_list(iron_ir_op_attr(op, name), name, out_values,
                               cap, out_count);
}

// Static tensors of one dtype and element count (a reshape's types).
static bool same_elements(const iron_ir_type_t *in, const iron_ir_type_t *out) {
  return in && out && in->kind == IRON_TYPE_TENSOR &&
         out->kind == IRON_TYPE_TENSOR && iron_ir_type_is_static(in) &&
         iron_ir_type_is_static(out) && in->dtype == out->dtype &&
         iron_ir_type_num_elements(in) == iron_ir_type_num_elements(out);
}

bool iron_ir_reduce_is_reshape(const iron_ir_op_t *op) {
  if (op->kind != IRON_OP_REDUCE || op->num_results == 0 ||
      op->num_operands != 2 * op->num_results)
    return false;
  for (uint32_t i = 0; i < op->num_results; ++i) {
    if (!same_elements(op->operands[i]->type, op->results[i].type))
      return false;
  }
  return true;
}

// The constant behind `v` (through rank-0 broadcasts), or NULL.
static const iron_ir_attr_t *scalar_constant(const iron_ir_value_t *v) {
  for (int hops = 0; v && v->def_op && hops < 4; ++hops) {
    const iron_ir_op_t *d = v->def_op;
    if (d->kind == IRON_OP_CONSTANT) {
      const iron_ir_attr_t *a = iron_ir_op_attr(d, "value");
      return a && a->kind == IRON_ATTR_DENSE && a->dense.data ? a : NULL;
    }
    if (d->kind != IRON_OP_BROADCAST_IN_DIM || d->num_operands != 1 ||
        iron_ir_type_num_elements(d->operands[0]->type) != 1)
      return NULL;
    v = d->operands[0];
  }
  return NULL;
}

// Whether the dense scalar `a` of dtype `dt` is an identity of `k` that
// XLA's simplifier drops: 0 (either sign) for add, -inf or the lowest
// integer for max, +inf or the highest for min. (It keeps a multiply by 1:
// measured, 1 * denormal flushes on XLA:CPU.)
static bool is_identity(iron_op_kind_t k, iron_dtype_t dt,
                        const iron_ir_attr_t *a) {
  size_t es = iron_dtype_size(dt);
  if (es == 0 || es > 8 || a->dense.size < es) return false;
  if (dt == IRON_DTYPE_F32 || dt == IRON_DTYPE_F64) {
    double f;
    if (dt == IRON_DTYPE_F32) {
      float x;
      memcpy(&x, a->dense.data, 4);
      f = x;
    } else {
      memcpy(&f, a->dense.data, 8);
    }
    return k == IRON_OP_ADD       ? f == 0
           : k == IRON_OP_MAXIMUM ? f == -__builtin_inf()
           : k == IRON_OP_MINIMUM ? f == __builtin_inf()
                                  : false;
  }
  bool sgn = dt == IRON_DTYPE_S8 || dt == IRON_DTYPE_S16 ||
             dt == IRON_DTYPE_S32 || dt == IRON_DTYPE_S64;
  bool uns = dt == IRON_DTYPE_U8 || dt == IRON_DTYPE_U16 ||
             dt == IRON_DTYPE_U32 || dt == IRON_DTYPE_U64;
  if (!sgn && !uns) return false;  // halves, complex, bool: not needed
  uint64_t u = 0;
  memcpy(&u, a->dense.data, es);
  uint64_t mask = es == 8 ? ~0ull : (1ull << (8 * es)) - 1;
  uint64_t sign_bit = 1ull << (8 * es - 1);
  return k == IRON_OP_ADD       ? u == 0
         : k == IRON_OP_MAXIMUM ? u == (sgn ? sign_bit : 0)
         : k == IRON_OP_MINIMUM ? u == (sgn ? (mask >> 1) : mask)
                                : false;
}

bool iron_ir_reduce_window_is_identity(const iron_ir_op_t *op) {
  if (op->kind != IRON_OP_REDUCE_WINDOW || op->num_operands != 2 ||
      op->num_results != 1 || op->num_regions != 1 ||
      op->regions[0].num_blocks != 1)
    return false;
  const iron_ir_type_t *in = op->operands[0]->type, *out = op->results[0].type;
  if (!same_elements(in, out)) return false;
  int64_t v[2 * IRON_MAX_RANK];
  uint32_t n = 0;
  static const char *const kOnes[] = {"window_dimensions", "base_dilations"};
  for (int i = 0; i < 2; ++i) {
    iron_status_t st = iron_ir_op_i64_list(op, kOnes[i], v, IRON_MAX_RANK, &n);
    if (st) {
      iron_status_free(st);
      return false;
    }
    if (i == 0 && n != (uint32_t)in->rank) return false;
    for (uint32_t d = 0; d < n; ++d)
      if (v[d] != 1) return false;
  }
  iron_status_t st = iron_ir_op_i64_list(op, "padding", v, 2 * IRON_MAX_RANK, &n);
  if (st) {
    iron_status_free(st);
    return false;
  }
  for (uint32_t d = 0; d < n; ++d)
    if (v[d] != 0) return false;
  // body(a, b) = op(a, b) or op(b, a), returned.
  const iron_ir_block_t *body = &op->regions[0].blocks[0];
  if (body->num_args != 2 || body->num_ops != 2) return false;
  const iron_ir_op_t *f = body->ops[0], *ret = body->ops[1];
  if (f->num_operands != 2 || f->num_results != 1 || ret->num_operands != 1 ||
      ret->operands[0] != &f->results[0])
    return false;
  const iron_ir_value_t *a0 = f->operands[0], *a1 = f->operands[1];
  bool args = (a0 == &body->args[0] && a1 == &body->args[1]) ||
              (a0 == &body->args[1] && a1 == &body->args[0]);
  if (!args) return false;
  const iron_ir_attr_t *init = scalar_constant(op->operands[1]);
  return init && is_identity(f->kind, in->dtype, init);
}

bool iron_ir_broadcast_is_reshape(const iron_ir_op_t *op) {
  if (op->kind != IRON_OP_BROADCAST_IN_DIM || op->num_operands != 1 ||
      op->num_results != 1)
    return false;
  const iron_ir_type_t *in = op->operands[0]->type, *out = op->results[0].type;
  if (!same_elements(in, out)) return false;
  int64_t bd[IRON_MAX_RANK];
  uint32_t nb = 0;
  iron_status_t st =
      iron_ir_op_i64_list(op, "broadcast_dimensions", bd, IRON_MAX_RANK, &nb);
  if (st) {  // the kernel's prepare reports the bad attribute
    iron_status_free(st);
    return false;
  }
  if (nb != (uint32_t)in->rank) return false;
  for (uint32_t i = 0; i < nb; ++i) {
    if (bd[i] < 0 || bd[i] >= out->rank || (i > 0 && bd[i] <= bd[i - 1]) ||
        out->dims[bd[i]] != in->dims[i])
      return false;
  }
  return true;
}

bool iron_ir_pad_dim_is_valid(int64_t n, int64_t lo, int64_t hi, int64_t ip,
                              int64_t od) {
  const int64_t kMax = (int64_t)1 << 40;
  if (n < 0 || od < 0 || od > ((int64_t)1 << 62) || ip < 0 || ip > kMax ||
      lo < -kMax || lo > kMax || hi < -kMax || hi > kMax)
    return false;
  // Attribute values come from the program: 128-bit so that nothing wraps.
  __int128 want = (__int128)lo + hi + n;
  if (n > 0) want += (__int128)(n - 1) * ip;
  return want == od;
}

bool iron_ir_attr_as_i64(const iron_ir_attr_t *attr, int64_t *out) {
  if (!attr) return false;
  switch (attr->kind) {
    case IRON_ATTR_INT: *out = attr->i; return true;
    case IRON_ATTR_BOOL: *out = attr->b; return true;
    case IRON_ATTR_DENSE:
      if (iron_ir_type_num_elements(attr->dense.type) != 1) return false;
      return read_int_elem(attr->dense.data, attr->dense.type->dtype, 0, out);
    default: return false;
  }
}

int32_t iron_ir_op_enum(const iron_ir_op_t *op, const char *name,
                        int32_t dflt) {
  const iron_ir_attr_t *a = iron_ir_op_attr(op, name);
  if (!a || a->kind != IRON_ATTR_ENUM) return dflt;
  return a->enumv.value;
}

const char *iron_ir_op_string(const iron_ir_op_t *op, const char *name) {
  const iron_ir_attr_t *a = iron_ir_op_attr(op, name);
  if (!a || (a->kind != IRON_ATTR_STRING && a->kind != IRON_ATTR_SYMBOL))
    return NULL;
  return a->str;
}

const char *iron_ir_loc_format(const iron_ir_loc_t *loc, char *buf,
                               size_t cap) {
  if (loc && loc->file && loc->line > 0) {
    const char *base = strrchr(loc->file, '/');
    snprintf(buf, cap, "%s:%d", base ? base + 1 : loc->file, loc->line);
  } else if (loc && loc->name) {
    snprintf(buf, cap, "%s", loc->name);
  } else {
    snprintf(buf, cap, "<unknown>");
  }
  return buf;
}

iron_status_t iron_ir_op_unimplemented(const iron_ir_op_t *op,
                                       const char *detail_fmt, ...) {
  char detail[256] = "";
  if (detail_fmt && detail_fmt[0]) {
    va_list ap;
    va_start(ap, detail_fmt);
    detail[0] = ' ';
    vsnprintf(detail + 1, sizeof(detail) - 1, detail_fmt, ap);
    va_end(ap);
  }
  char loc[512];
  iron_ir_loc_format(&op->loc, loc, sizeof(loc));
  return IRON_ERR(UNIMPLEMENTED, "%s is not supported yet%s (%s)", op->name,
                  detail, loc);
}
