// Attribute, type and location entries of the bytecode: the builtin
// dialect's encodings, the VHLO dialect's encodings (attribute codes 1-25,
// type codes 0-42) and opaque handling of everything else (sdy ...).
// Entries are decoded lazily, on first reference, and cached by index.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/half.h"
#include "stablehlo/reader_internal.h"

// ---------------------------------------------------------------------------
// Cursor primitives

iron_status_t iron_bc_error_at(const iron_bc_cursor_t *c, const uint8_t *at,
                               const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  size_t off = (size_t)(at - c->base);
  if (c->context)
    return IRON_ERR(INVALID_ARGUMENT, "bytecode offset %zu: %s (%s)", off, msg,
                    c->context);
  return IRON_ERR(INVALID_ARGUMENT, "bytecode offset %zu: %s", off, msg);
}

iron_status_t iron_bc_error(const iron_bc_cursor_t *c, const char *what) {
  return iron_bc_error_at(c, c->p, "expected %s", what);
}

iron_status_t iron_bc_read_byte(iron_bc_cursor_t *c, const char *what,
                                uint8_t *out) {
  if (c->p >= c->end) return iron_bc_error(c, what);
  *out = *c->p++;
  return IRON_OK;
}

iron_status_t iron_bc_read_varint(iron_bc_cursor_t *c, const char *what,
                                  uint64_t *out) {
  if (c->p >= c->end) return iron_bc_error(c, what);
  uint8_t first = c->p[0];
  if (first & 1) {
    *out = first >> 1;
    c->p++;
    return IRON_OK;
  }
  unsigned extra = first == 0 ? 8 : (unsigned)__builtin_ctz(first);
  if (iron_bc_remaining(c) < 1 + (size_t)extra) return iron_bc_error(c, what);
  uint64_t v = 0;
  if (first == 0) {
    for (unsigned i = 0; i < 8; ++i) v |= (uint64_t)c->p[1 + i] << (8 * i);
  } else {
    v = first;
    for (unsigned i = 0; i < extra; ++i)
      v |= (uint64_t)c->p[1 + i] << (8 * (i + 1));
    v >>= extra + 1;
  }
  c->p += 1 + extra;
  *out = v;
  return IRON_OK;
}

iron_status_t iron_bc_read_svarint(iron_bc_cursor_t *c, const char *what,
                                   int64_t *out) {
  uint64_t v;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, what, &v));
  *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
  return IRON_OK;
}

iron_status_t iron_bc_read_varint_flag(iron_bc_cursor_t *c, const char *what,
                                       uint64_t *out, bool *out_flag) {
  uint64_t v;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, what, &v));
  *out_flag = v & 1;
  *out = v >> 1;
  return IRON_OK;
}

iron_status_t iron_bc_read_bytes(iron_bc_cursor_t *c, size_t n,
                                 const char *what, const uint8_t **out) {
  if (iron_bc_remaining(c) < n) return iron_bc_error(c, what);
  *out = c->p;
  c->p += n;
  return IRON_OK;
}

iron_status_t iron_bc_read_count(iron_bc_cursor_t *c, const char *what,
                                 size_t min_bytes_each, uint64_t *out) {
  const uint8_t *at = c->p;
  uint64_t v;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, what, &v));
  if (min_bytes_each && v > iron_bc_remaining(c) / min_bytes_each)
    return iron_bc_error_at(c, at, "expected %s (count %llu exceeds the data)",
                            what, (unsigned long long)v);
  if (v > UINT32_MAX)
    return iron_bc_error_at(c, at, "expected %s (count too large)", what);
  *out = v;
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// Strings

iron_status_t iron_bc_string(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                             uint64_t index, const char **out,
                             size_t *out_len) {
  if (index >= r->num_strings)
    return iron_bc_error_at(c, c->p, "expected a string index (got %llu of %llu)",
                            (unsigned long long)index,
                            (unsigned long long)r->num_strings);
  if (!r->string_copies[index]) {
    char *s = iron_arena_strndup(r->arena, r->strings[index],
                                 r->string_lens[index]);
    if (!s) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory reading strings");
    r->string_copies[index] = s;
  }
  *out = r->string_copies[index];
  if (out_len) *out_len = r->string_lens[index];
  return IRON_OK;
}

static iron_status_t read_string_ref(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                     const char **out, size_t *out_len) {
  uint64_t idx;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "a string index", &idx));
  return iron_bc_string(r, c, idx, out, out_len);
}

// ---------------------------------------------------------------------------
// Helpers to build IR objects

static iron_status_t oom(void) {
  return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory reading bytecode");
}

static iron_ir_attr_t *new_attr(iron_bc_reader_t *r, iron_attr_kind_t kind) {
  iron_ir_attr_t *a = iron_arena_alloc(r->arena, sizeof(*a));
  if (a) a->kind = kind;
  return a;
}

static iron_ir_type_t *new_type(iron_bc_reader_t *r, iron_type_kind_t kind) {
  iron_ir_type_t *t = iron_arena_alloc(r->arena, sizeof(*t));
  if (t) t->kind = kind;
  return t;
}

static iron_status_t opaque_attr(iron_bc_reader_t *r, const char *fmt,
                                 const iron_ir_attr_t **out, ...) {
  char buf[128];
  va_list ap;
  va_start(ap, out);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  iron_ir_attr_t *a = new_attr(r, IRON_ATTR_OPAQUE);
  if (!a) return oom();
  a->str = iron_arena_strdup(r->arena, buf);
  if (!a->str) return oom();
  a->str_len = strlen(a->str);
  *out = a;
  return IRON_OK;
}

static iron_status_t other_type(iron_bc_reader_t *r, const char *desc,
                                const iron_ir_type_t **out) {
  iron_ir_type_t *t = new_type(r, IRON_TYPE_OTHER);
  if (!t) return oom();
  t->description = iron_arena_strdup(r->arena, desc);
  if (!t->description) return oom();
  *out = t;
  return IRON_OK;
}

// A rank-0 tensor type stands for an element type (f32, si32 ...).
static iron_status_t scalar_type(iron_bc_reader_t *r, iron_dtype_t dt,
                                 const iron_ir_type_t **out) {
  iron_ir_type_t *t = new_type(r, IRON_TYPE_TENSOR);
  if (!t) return oom();
  t->dtype = dt;
  t->rank = 0;
  *out = t;
  return IRON_OK;
}

static bool is_element_type(const iron_ir_type_t *t) {
  return t->kind == IRON_TYPE_TENSOR && t->rank == 0 &&
         t->dtype != IRON_DTYPE_INVALID && t->dtype != IRON_DTYPE_TOKEN;
}

// ---------------------------------------------------------------------------
// Types

static iron_status_t read_type_list(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                    uint32_t *out_n,
                                    const iron_ir_type_t ***out) {
  uint64_t n;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_count(c, "a type count", 1, &n));
  const iron_ir_type_t **v =
      n ? iron_arena_alloc_array(r->arena, n, sizeof(*v)) : NULL;
  if (n && !v) return oom();
  for (uint64_t i = 0; i < n; ++i)
    IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_type_ref(r, c, "a type index", &v[i]));
  *out_n = (uint32_t)n;
  *out = v;
  return IRON_OK;
}

static iron_status_t ranked_tensor(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                   const iron_ir_type_t **out) {
  uint64_t rank;
  const uint8_t *at = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_count(c, "a tensor rank", 1, &rank));
  if (rank > IRON_MAX_RANK)
    return iron_bc_error_at(c, at, "expected a tensor rank <= %d (got %llu)",
                            IRON_MAX_RANK, (unsigned long long)rank);
  iron_ir_type_t *t = new_type(r, IRON_TYPE_TENSOR);
  if (!t) return oom();
  t->rank = (int32_t)rank;
  for (uint64_t i = 0; i < rank; ++i) {
    int64_t d;
    at = c->p;
    IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_svarint(c, "a dimension size", &d));
    if (d < 0 && d != IRON_DIM_DYNAMIC)
      return iron_bc_error_at(c, at, "expected a dimension size >= 0 (got %lld)",
                              (long long)d);
    t->dims[i] = d;
  }
  const iron_ir_type_t *elem;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_bc_read_type_ref(r, c, "an element type index", &elem));
  if (!is_element_type(elem)) {
    // Quantized or otherwise unmodelled element types.
    char buf[256], eb[160];
    iron_ir_type_format(elem, eb, sizeof(eb));
    int n = snprintf(buf, sizeof(buf), "tensor<");
    for (uint64_t i = 0; i < rank && n < (int)sizeof(buf) - 24; ++i)
      n += snprintf(buf + n, sizeof(buf) - (size_t)n,
                    t->dims[i] == IRON_DIM_DYNAMIC ? "?x" : "%lldx",
                    (long long)t->dims[i]);
    snprintf(buf + n, sizeof(buf) - (size_t)n, "%s>", eb);
    return other_type(r, buf, out);
  }
  t->dtype = elem->dtype;
  *out = t;
  return IRON_OK;
}

static iron_status_t complex_of(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                const iron_ir_type_t **out) {
  const iron_ir_type_t *elem;
  const uint8_t *at = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_bc_read_type_ref(r, c, "a complex element type", &elem));
  if (is_element_type(elem) && elem->dtype == IRON_DTYPE_F32)
    return scalar_type(r, IRON_DTYPE_C64, out);
  if (is_element_type(elem) && elem->dtype == IRON_DTYPE_F64)
    return scalar_type(r, IRON_DTYPE_C128, out);
  (void)at;
  return other_type(r, "complex<?>", out);
}

static iron_status_t decode_vhlo_type(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                      const iron_ir_type_t **out) {
  uint64_t code;
  const uint8_t *at = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "a VHLO type code", &code));
  static const struct {
    uint8_t code;
    iron_dtype_t dt;
  } kScalars[] = {
      {0, IRON_DTYPE_PRED},          {2, IRON_DTYPE_BF16},
      {3, IRON_DTYPE_F16},           {4, IRON_DTYPE_F32},
      {5, IRON_DTYPE_F64},           {6, IRON_DTYPE_F8E4M3FN},
      {7, IRON_DTYPE_F8E5M2},        {9, IRON_DTYPE_INDEX},
      {10, IRON_DTYPE_S4},           {11, IRON_DTYPE_S8},
      {12, IRON_DTYPE_S16},          {13, IRON_DTYPE_S32},
      {14, IRON_DTYPE_S64},          {15, IRON_DTYPE_U4},
      {16, IRON_DTYPE_U8},           {17, IRON_DTYPE_U16},
      {18, IRON_DTYPE_U32},          {19, IRON_DTYPE_U64},
      {27, IRON_DTYPE_F8E4M3FNUZ},   {28, IRON_DTYPE_F8E5M2FNUZ},
      {29, IRON_DTYPE_F8E4M3B11FNUZ}, {31, IRON_DTYPE_S2},
      {32, IRON_DTYPE_U2},           {34, IRON_DTYPE_TF32},
      {35, IRON_DTYPE_F8E4M3},       {36, IRON_DTYPE_F8E3M4},
      {37, IRON_DTYPE_F4E2M1FN},     {38, IRON_DTYPE_F6E2M3FN},
      {39, IRON_DTYPE_F6E3M2FN},     {40, IRON_DTYPE_F8E8M0FNU},
  };
  for (size_t i = 0; i < sizeof(kScalars) / sizeof(kScalars[0]); ++i)
    if (kScalars[i].code == code) return scalar_type(r, kScalars[i].dt, out);
  switch (code) {
    case 1:
      return complex_of(r, c, out);
    case 8: {  // function
      iron_ir_type_t *t = new_type(r, IRON_TYPE_FUNCTION);
      if (!t) return oom();
      uint32_t ni, no;
      const iron_ir_type_t **in, **outs;
      IRON_RETURN_IF_ERROR_PLAIN(read_type_list(r, c, &ni, &in));
      IRON_RETURN_IF_ERROR_PLAIN(read_type_list(r, c, &no, &outs));
      const iron_ir_type_t **all =
          iron_arena_alloc_array(r->arena, (size_t)ni + no + 1, sizeof(*all));
      if (!all) return oom();
      if (ni) memcpy(all, in, ni * sizeof(*all));
      if (no) memcpy(all + ni, outs, no * sizeof(*all));
      t->elements = all;
      t->num_elements = ni + no;
      t->num_func_inputs = ni;
      *out = t;
      return IRON_OK;
    }
    case 20:
      return ranked_tensor(r, c, out);
    case 21: {  // ranked tensor with encoding (bounds): encoding dropped
      uint64_t enc;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint(c, "a tensor encoding attribute", &enc));
      if (enc >= r->num_attrs)
        return iron_bc_error_at(c, at, "expected a valid encoding attribute");
      return ranked_tensor(r, c, out);
    }
    case 22: {
      iron_ir_type_t *t = new_type(r, IRON_TYPE_TOKEN);
      if (!t) return oom();
      t->dtype = IRON_DTYPE_TOKEN;
      *out = t;
      return IRON_OK;
    }
    case 23: {
      iron_ir_type_t *t = new_type(r, IRON_TYPE_TUPLE);
      if (!t) return oom();
      IRON_RETURN_IF_ERROR_PLAIN(
          read_type_list(r, c, &t->num_elements, &t->elements));
      *out = t;
      return IRON_OK;
    }
    case 25: {
      const iron_ir_type_t *elem;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_type_ref(r, c, "an element type index", &elem));
      if (!is_element_type(elem)) return other_type(r, "tensor<*x?>", out);
      iron_ir_type_t *t = new_type(r, IRON_TYPE_UNRANKED);
      if (!t) return oom();
      t->dtype = elem->dtype;
      *out = t;
      return IRON_OK;
    }
    // Quantized types, witness, none and buffer: described, not
    // decoded (the entry is self-delimiting).
    case 24:
      c->p = c->end;
      return other_type(r, "!quant.uniform<...>", out);
    case 30:
      c->p = c->end;
      return other_type(r, "!quant.uniform<per-axis...>", out);
    case 26:
      return other_type(r, "!shape.witness", out);
    case 33:
      return other_type(r, "none", out);
    case 41:
      c->p = c->end;
      return other_type(r, "memref<...>", out);
    case 42: {  // future<types...>: carried like a tuple of them
      iron_ir_type_t *t = new_type(r, IRON_TYPE_TUPLE);
      if (!t) return oom();
      IRON_RETURN_IF_ERROR_PLAIN(
          read_type_list(r, c, &t->num_elements, &t->elements));
      *out = t;
      return IRON_OK;
    }
    default:
      return iron_bc_error_at(c, at, "expected a known VHLO type code (got %llu)",
                              (unsigned long long)code);
  }
}

static iron_status_t decode_builtin_type(iron_bc_reader_t *r,
                                         iron_bc_cursor_t *c,
                                         const iron_ir_type_t **out) {
  uint64_t code;
  const uint8_t *at = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_bc_read_varint(c, "a builtin type code", &code));
  switch (code) {
    case 0: {  // integer: width << 2 | signedness
      uint64_t ws;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint(c, "an integer width", &ws));
      uint64_t w = ws >> 2;
      bool is_unsigned = (ws & 3) == 2;
      iron_dtype_t dt = IRON_DTYPE_INVALID;
      switch (w) {
        case 1: dt = IRON_DTYPE_PRED; break;
        case 2: dt = is_unsigned ? IRON_DTYPE_U2 : IRON_DTYPE_S2; break;
        case 4: dt = is_unsigned ? IRON_DTYPE_U4 : IRON_DTYPE_S4; break;
        case 8: dt = is_unsigned ? IRON_DTYPE_U8 : IRON_DTYPE_S8; break;
        case 16: dt = is_unsigned ? IRON_DTYPE_U16 : IRON_DTYPE_S16; break;
        case 32: dt = is_unsigned ? IRON_DTYPE_U32 : IRON_DTYPE_S32; break;
        case 64: dt = is_unsigned ? IRON_DTYPE_U64 : IRON_DTYPE_S64; break;
        default: {
          char buf[32];
          snprintf(buf, sizeof(buf), "i%llu", (unsigned long long)w);
          return other_type(r, buf, out);
        }
      }
      return scalar_type(r, dt, out);
    }
    case 1: return scalar_type(r, IRON_DTYPE_INDEX, out);
    case 2: {
      iron_ir_type_t *t = new_type(r, IRON_TYPE_FUNCTION);
      if (!t) return oom();
      uint32_t ni, no;
      const iron_ir_type_t **in, **outs;
      IRON_RETURN_IF_ERROR_PLAIN(read_type_list(r, c, &ni, &in));
      IRON_RETURN_IF_ERROR_PLAIN(read_type_list(r, c, &no, &outs));
      const iron_ir_type_t **all =
          iron_arena_alloc_array(r->arena, (size_t)ni + no + 1, sizeof(*all));
      if (!all) return oom();
      if (ni) memcpy(all, in, ni * sizeof(*all));
      if (no) memcpy(all + ni, outs, no * sizeof(*all));
      t->elements = all;
      t->num_elements = ni + no;
      t->num_func_inputs = ni;
      *out = t;
      return IRON_OK;
    }
    case 3: return scalar_type(r, IRON_DTYPE_BF16, out);
    case 4: return scalar_type(r, IRON_DTYPE_F16, out);
    case 5: return scalar_type(r, IRON_DTYPE_F32, out);
    case 6: return scalar_type(r, IRON_DTYPE_F64, out);
    case 7: return other_type(r, "f80", out);
    case 8: return other_type(r, "f128", out);
    case 9: return complex_of(r, c, out);
    case 12: return other_type(r, "none", out);
    case 13: return ranked_tensor(r, c, out);
    case 14: {
      uint64_t enc;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint(c, "a tensor encoding attribute", &enc));
      if (enc >= r->num_attrs)
        return iron_bc_error_at(c, at, "expected a valid encoding attribute");
      return ranked_tensor(r, c, out);
    }
    case 15: {
      iron_ir_type_t *t = new_type(r, IRON_TYPE_TUPLE);
      if (!t) return oom();
      IRON_RETURN_IF_ERROR_PLAIN(
          read_type_list(r, c, &t->num_elements, &t->elements));
      *out = t;
      return IRON_OK;
    }
    case 18: {
      const iron_ir_type_t *elem;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_type_ref(r, c, "an element type index", &elem));
      if (!is_element_type(elem)) return other_type(r, "tensor<*x?>", out);
      iron_ir_type_t *t = new_type(r, IRON_TYPE_UNRANKED);
      if (!t) return oom();
      t->dtype = elem->dtype;
      *out = t;
      return IRON_OK;
    }
    default: {
      // memref, vector and newer builtin types: not needed by StableHLO.
      char buf[48];
      snprintf(buf, sizeof(buf), "!builtin.type<%llu>",
               (unsigned long long)code);
      c->p = c->end;
      return other_type(r, buf, out);
    }
  }
}

iron_status_t iron_bc_type(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                           uint64_t index, const iron_ir_type_t **out) {
  if (index >= r->num_types)
    return iron_bc_error_at(c, c->p, "expected a type index (got %llu of %llu)",
                            (unsigned long long)index,
                            (unsigned long long)r->num_types);
  if (r->type_cache[index]) {
    *out = r->type_cache[index];
    return IRON_OK;
  }
  iron_bc_entry_t *e = &r->types[index];
  if (e->state == 1)
    return iron_bc_error_at(c, e->data, "cyclic type reference (type %llu)",
                            (unsigned long long)index);
  if (r->attr_depth >= IRON_BC_MAX_ATTR_DEPTH)
    return iron_bc_error_at(c, e->data, "type nesting too deep (type %llu)",
                            (unsigned long long)index);
  char ctx[48];
  snprintf(ctx, sizeof(ctx), "type %llu", (unsigned long long)index);
  iron_bc_cursor_t ec = {r->base, e->data, e->data + e->size, ctx};
  e->state = 1;
  r->attr_depth++;
  const iron_ir_type_t *t = NULL;
  iron_status_t st = IRON_OK;
  uint8_t dk = r->dialect_kinds[e->dialect];
  if (!e->custom) {
    // Assembly text: keep it as a description.
    const uint8_t *nul = memchr(e->data, 0, e->size);
    if (!nul)
      st = iron_bc_error_at(&ec, e->data, "expected a NUL-terminated type");
    else
      st = other_type(r, (const char *)e->data, &t);
    ec.p = ec.end;
  } else if (dk == IRON_BC_DIALECT_VHLO) {
    st = decode_vhlo_type(r, &ec, &t);
  } else if (dk == IRON_BC_DIALECT_BUILTIN) {
    st = decode_builtin_type(r, &ec, &t);
  } else {
    char buf[96];
    snprintf(buf, sizeof(buf), "!%s.<type>", r->dialect_names[e->dialect]);
    st = other_type(r, buf, &t);
    ec.p = ec.end;
  }
  r->attr_depth--;
  e->state = 0;
  if (st) return st;
  if (ec.p != ec.end)
    return iron_bc_error_at(&ec, ec.p, "expected the end of the type entry");
  e->state = 2;
  r->type_cache[index] = t;
  *out = t;
  return IRON_OK;
}

iron_status_t iron_bc_read_type_ref(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                    const char *what,
                                    const iron_ir_type_t **out) {
  uint64_t idx;
  const uint8_t *at = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, what, &idx));
  if (idx >= r->num_types)
    return iron_bc_error_at(c, at, "expected %s (type %llu of %llu)", what,
                            (unsigned long long)idx,
                            (unsigned long long)r->num_types);
  return iron_bc_type(r, c, idx, out);
}

// ---------------------------------------------------------------------------
// Numbers

static int dtype_storage_bits(iron_dtype_t dt) {
  if (dt == IRON_DTYPE_INDEX) return 64;
  return iron_dtype_bits(dt);
}

// APInt with a width known from the type: <= 8 bits one byte, <= 64 bits a
// signed varint, wider: word count + signed varints (kept as its low word).
static iron_status_t read_apint(iron_bc_cursor_t *c, int bits,
                                uint64_t *out) {
  if (bits <= 8) {
    uint8_t b = 0;
    IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_byte(c, "an integer byte", &b));
    *out = b;
    return IRON_OK;
  }
  if (bits <= 64) {
    int64_t v;
    IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_svarint(c, "an integer", &v));
    *out = (uint64_t)v;
    return IRON_OK;
  }
  uint64_t n;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_count(c, "a word count", 1, &n));
  *out = 0;
  for (uint64_t i = 0; i < n; ++i) {
    int64_t w;
    IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_svarint(c, "an integer word", &w));
    if (i == 0) *out = (uint64_t)w;
  }
  return IRON_OK;
}

static int64_t extend_bits(uint64_t v, int bits, bool is_signed) {
  if (bits >= 64 || bits <= 0) return (int64_t)v;
  uint64_t mask = (1ull << bits) - 1;
  v &= mask;
  if (is_signed && (v >> (bits - 1)) & 1) v |= ~mask;
  return (int64_t)v;
}

// Small float formats: value of a bit pattern.
static double minifloat(uint64_t bits, int ebits, int mbits, int bias,
                        int flavor /*0 IEEE, 1 FN, 2 FNUZ, 3 no nan/inf*/) {
  int total = 1 + ebits + mbits;
  uint64_t sign = (bits >> (total - 1)) & 1;
  uint64_t e = (bits >> mbits) & ((1u << ebits) - 1);
  uint64_t m = bits & ((1u << mbits) - 1);
  uint64_t emax = (1u << ebits) - 1;
  if (flavor == 2 && sign && e == 0 && m == 0) return __builtin_nan("");
  if (flavor == 0 && e == emax)
    return m ? __builtin_nan("") : (sign ? -__builtin_inf() : __builtin_inf());
  if (flavor == 1 && e == emax && m == (1u << mbits) - 1)
    return __builtin_nan("");
  double v;
  if (e == 0)
    v = __builtin_ldexp((double)m, 1 - bias - mbits);
  else
    v = __builtin_ldexp((double)((1u << mbits) | m), (int)e - bias - mbits);
  return sign ? -v : v;
}

static double float_from_bits(iron_dtype_t dt, uint64_t b) {
  switch (dt) {
    case IRON_DTYPE_F64: {
      double d;
      memcpy(&d, &b, 8);
      return d;
    }
    case IRON_DTYPE_F32: return iron_f32_from_bits((uint32_t)b);
    case IRON_DTYPE_TF32: return iron_f32_from_bits((uint32_t)(b << 13));
    case IRON_DTYPE_F16: return iron_f16_to_f32((uint16_t)b);
    case IRON_DTYPE_BF16: return iron_bf16_to_f32((uint16_t)b);
    case IRON_DTYPE_F8E5M2: return minifloat(b, 5, 2, 15, 0);
    case IRON_DTYPE_F8E4M3FN: return minifloat(b, 4, 3, 7, 1);
    case IRON_DTYPE_F8E4M3: return minifloat(b, 4, 3, 7, 0);
    case IRON_DTYPE_F8E3M4: return minifloat(b, 3, 4, 3, 0);
    case IRON_DTYPE_F8E4M3FNUZ: return minifloat(b, 4, 3, 8, 2);
    case IRON_DTYPE_F8E5M2FNUZ: return minifloat(b, 5, 2, 16, 2);
    case IRON_DTYPE_F8E4M3B11FNUZ: return minifloat(b, 4, 3, 11, 2);
    case IRON_DTYPE_F4E2M1FN: return minifloat(b, 2, 1, 1, 3);
    case IRON_DTYPE_F6E2M3FN: return minifloat(b, 2, 3, 1, 3);
    case IRON_DTYPE_F6E3M2FN: return minifloat(b, 3, 2, 3, 3);
    case IRON_DTYPE_F8E8M0FNU:
      if ((b & 0xff) == 0xff) return __builtin_nan("");
      return __builtin_ldexp(1.0, (int)(b & 0xff) - 127);
    default: return 0.0;
  }
}

static iron_status_t int_attr(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                              const iron_ir_type_t *type,
                              const iron_ir_attr_t **out) {
  const uint8_t *at = c->p;
  if (!is_element_type(type) || !(iron_dtype_is_int(type->dtype) ||
                                  type->dtype == IRON_DTYPE_PRED))
    return iron_bc_error_at(c, at, "expected an integer type for an integer");
  uint64_t v;
  int bits = dtype_storage_bits(type->dtype);
  IRON_RETURN_IF_ERROR_PLAIN(read_apint(c, bits, &v));
  iron_ir_attr_t *a;
  if (type->dtype == IRON_DTYPE_PRED) {
    a = new_attr(r, IRON_ATTR_BOOL);
    if (!a) return oom();
    a->b = v & 1;
  } else {
    a = new_attr(r, IRON_ATTR_INT);
    if (!a) return oom();
    // Index integers are reported as s64 (ir.h).
    a->int_dtype =
        type->dtype == IRON_DTYPE_INDEX ? IRON_DTYPE_S64 : type->dtype;
    a->i = extend_bits(v, bits, !iron_dtype_is_unsigned_int(type->dtype));
  }
  *out = a;
  return IRON_OK;
}

static iron_status_t float_attr(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                const iron_ir_type_t *type,
                                const iron_ir_attr_t **out) {
  const uint8_t *at = c->p;
  if (!is_element_type(type) || !iron_dtype_is_float(type->dtype))
    return iron_bc_error_at(c, at, "expected a float type for a float");
  uint64_t v;
  int bits = type->dtype == IRON_DTYPE_TF32 ? 19 : iron_dtype_bits(type->dtype);
  IRON_RETURN_IF_ERROR_PLAIN(read_apint(c, bits, &v));
  iron_ir_attr_t *a = new_attr(r, IRON_ATTR_FLOAT);
  if (!a) return oom();
  a->float_dtype = type->dtype;
  a->f = float_from_bits(type->dtype, v);
  *out = a;
  return IRON_OK;
}

// A dense literal: `blob` holds row-major elements (or one element for a
// splat). i1 may be bit-packed (8 per byte, LSB first) or a 0x00/0xFF splat.
static iron_status_t dense_attr(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                const uint8_t *at, const iron_ir_type_t *type,
                                const uint8_t *blob, size_t size,
                                const iron_ir_attr_t **out) {
  if (type->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(type))
    return iron_bc_error_at(c, at, "expected a static tensor type for a dense "
                                   "literal");
  int64_t n = iron_ir_type_num_elements(type);
  size_t es = iron_dtype_size(type->dtype);
  if (n < 0 || es == 0)
    return iron_bc_error_at(c, at, "expected a tensor with sized elements");
  iron_ir_attr_t *a = new_attr(r, IRON_ATTR_DENSE);
  if (!a) return oom();
  a->dense.type = type;
  if (type->dtype == IRON_DTYPE_PRED) {
    size_t packed = ((size_t)n + 7) / 8;
    if (size == 1 && (blob[0] == 0xff || (blob[0] == 0 && n != 1) ||
                      (n == 1))) {
      uint8_t *d = iron_arena_alloc(r->arena, 1);
      if (!d) return oom();
      d[0] = blob[0] ? 1 : 0;
      if (n == 1 && blob[0] != 0xff) d[0] = blob[0] & 1;
      a->dense.data = d;
      a->dense.size = 1;
      a->dense.splat = n != 1;
    } else if (size == packed && size != (size_t)n) {
      uint8_t *d = iron_arena_alloc(r->arena, (size_t)n ? (size_t)n : 1);
      if (!d) return oom();
      for (int64_t i = 0; i < n; ++i) d[i] = (blob[i / 8] >> (i % 8)) & 1;
      a->dense.data = d;
      a->dense.size = (size_t)n;
    } else if (size == (size_t)n) {
      uint8_t *d = iron_arena_alloc(r->arena, (size_t)n ? (size_t)n : 1);
      if (!d) return oom();
      for (int64_t i = 0; i < n; ++i) d[i] = blob[i] ? 1 : 0;
      a->dense.data = d;
      a->dense.size = (size_t)n;
    } else {
      return iron_bc_error_at(c, at, "expected %zu bytes of i1 data (got %zu)",
                              packed, size);
    }
    *out = a;
    return IRON_OK;
  }
  size_t total;
  if (iron_mul_overflow_size((size_t)n, es, &total))
    return iron_bc_error_at(c, at, "expected a tensor of addressable size");
  if (size == es && n != 1) {
    a->dense.splat = true;
  } else if (size != total) {
    return iron_bc_error_at(c, at, "expected %zu bytes of tensor data (got %zu)",
                            total, size);
  }
  uint8_t *d = iron_arena_memdup(r->arena, blob, size ? size : 1);
  if (!d) return oom();
  // Sub-byte integers arrive as their low bits in one byte each; the host
  // format is the value sign- or zero-extended to the byte.
  int bits = iron_dtype_bits(type->dtype);
  if (iron_dtype_is_int(type->dtype) && bits < 8) {
    for (size_t i = 0; i < size; ++i)
      d[i] = (uint8_t)extend_bits(d[i], bits,
                                  iron_dtype_is_signed_int(type->dtype));
  }
  a->dense.data = d;
  a->dense.size = size;
  *out = a;
  return IRON_OK;
}

static iron_status_t read_blob(iron_bc_cursor_t *c, const uint8_t **out,
                               size_t *out_size) {
  uint64_t n;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "a blob size", &n));
  if (n > iron_bc_remaining(c)) return iron_bc_error(c, "blob data");
  *out_size = (size_t)n;
  return iron_bc_read_bytes(c, (size_t)n, "blob data", out);
}

// ---------------------------------------------------------------------------
// Attributes

static iron_status_t read_attr_list(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                    const iron_ir_attr_t **out) {
  uint64_t n;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_count(c, "an array size", 1, &n));
  iron_ir_attr_t *a = new_attr(r, IRON_ATTR_ARRAY);
  if (!a) return oom();
  const iron_ir_attr_t **items =
      iron_arena_alloc_array(r->arena, n ? n : 1, sizeof(*items));
  if (!items) return oom();
  for (uint64_t i = 0; i < n; ++i)
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_attr_ref(r, c, "an array element", &items[i]));
  a->array.count = (uint32_t)n;
  a->array.items = items;
  *out = a;
  return IRON_OK;
}

static iron_status_t read_dict(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                               const iron_ir_attr_t **out) {
  uint64_t n;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_bc_read_count(c, "a dictionary size", 2, &n));
  iron_ir_attr_t *a = new_attr(r, IRON_ATTR_DICT);
  if (!a) return oom();
  iron_ir_named_attr_t *e =
      iron_arena_alloc_array(r->arena, n ? n : 1, sizeof(*e));
  if (!e) return oom();
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t name_idx;
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_varint(c, "a dictionary key", &name_idx));
    IRON_RETURN_IF_ERROR_PLAIN(iron_bc_attr_string(r, c, name_idx, &e[i].name));
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_attr_ref(r, c, "a dictionary value", &e[i].value));
  }
  a->dict.count = (uint32_t)n;
  a->dict.entries = e;
  *out = a;
  return IRON_OK;
}

static iron_status_t string_attr(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                 iron_attr_kind_t kind,
                                 const iron_ir_attr_t **out) {
  const char *s;
  size_t len;
  IRON_RETURN_IF_ERROR_PLAIN(read_string_ref(r, c, &s, &len));
  iron_ir_attr_t *a = new_attr(r, kind);
  if (!a) return oom();
  a->str = s;
  a->str_len = len;
  *out = a;
  return IRON_OK;
}

static iron_status_t enum_attr(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                               iron_enum_kind_t kind, uint64_t max,
                               const iron_ir_attr_t **out) {
  uint64_t v;
  const uint8_t *at = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "an enum value", &v));
  if (v > max)
    return iron_bc_error_at(c, at, "expected an enum value <= %llu (got %llu)",
                            (unsigned long long)max, (unsigned long long)v);
  iron_ir_attr_t *a = new_attr(r, IRON_ATTR_ENUM);
  if (!a) return oom();
  a->enumv.kind = kind;
  a->enumv.value = (int32_t)v;
  *out = a;
  return IRON_OK;
}

static iron_status_t read_svarint_list(iron_bc_reader_t *r,
                                       iron_bc_cursor_t *c, uint32_t *out_n,
                                       const int64_t **out) {
  uint64_t n;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_count(c, "a list size", 1, &n));
  int64_t *v = iron_arena_alloc_array(r->arena, n ? n : 1, sizeof(*v));
  if (!v) return oom();
  for (uint64_t i = 0; i < n; ++i)
    IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_svarint(c, "a list element", &v[i]));
  *out_n = (uint32_t)n;
  *out = v;
  return IRON_OK;
}

static iron_status_t decode_vhlo_attr(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                      const iron_ir_attr_t **out) {
  uint64_t code;
  const uint8_t *at = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_bc_read_varint(c, "a VHLO attribute code", &code));
  switch (code) {
    case 1: return read_attr_list(r, c, out);
    case 2: {
      uint64_t v;
      IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "a boolean", &v));
      iron_ir_attr_t *a = new_attr(r, IRON_ATTR_BOOL);
      if (!a) return oom();
      a->b = v != 0;
      *out = a;
      return IRON_OK;
    }
    case 3: return enum_attr(r, c, IRON_ENUM_COMPARISON_DIRECTION, 5, out);
    case 4: return enum_attr(r, c, IRON_ENUM_COMPARISON_TYPE, 4, out);
    case 5: return enum_attr(r, c, IRON_ENUM_CUSTOM_CALL_API_VERSION, 4, out);
    case 6: return read_dict(r, c, out);
    case 7: return enum_attr(r, c, IRON_ENUM_FFT_TYPE, 3, out);
    case 8:
    case 9: {
      const iron_ir_type_t *t;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_type_ref(r, c, "a number type", &t));
      return code == 8 ? float_attr(r, c, t, out) : int_attr(r, c, t, out);
    }
    case 10: {
      iron_ir_attr_t *a = new_attr(r, IRON_ATTR_OUTPUT_OPERAND_ALIAS);
      if (!a) return oom();
      IRON_RETURN_IF_ERROR_PLAIN(
          read_svarint_list(r, c, &a->alias.num_output_tuple_indices,
                            &a->alias.output_tuple_indices));
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_svarint(c, "an operand index", &a->alias.operand_index));
      IRON_RETURN_IF_ERROR_PLAIN(
          read_svarint_list(r, c, &a->alias.num_operand_tuple_indices,
                            &a->alias.operand_tuple_indices));
      *out = a;
      return IRON_OK;
    }
    case 11: return enum_attr(r, c, IRON_ENUM_PRECISION, 2, out);
    case 12: return enum_attr(r, c, IRON_ENUM_RNG_ALGORITHM, 2, out);
    case 13: return enum_attr(r, c, IRON_ENUM_RNG_DISTRIBUTION, 2, out);
    case 14: return string_attr(r, c, IRON_ATTR_STRING, out);
    case 15: {
      const iron_ir_type_t *t;
      const uint8_t *tat = c->p;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_type_ref(r, c, "a tensor type", &t));
      const uint8_t *blob;
      size_t size;
      IRON_RETURN_IF_ERROR_PLAIN(read_blob(c, &blob, &size));
      return dense_attr(r, c, tat, t, blob, size, out);
    }
    case 16: return enum_attr(r, c, IRON_ENUM_TRANSPOSE, 3, out);
    case 17: {
      iron_ir_attr_t *a = new_attr(r, IRON_ATTR_TYPE);
      if (!a) return oom();
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_type_ref(r, c, "a type", &a->type));
      *out = a;
      return IRON_OK;
    }
    case 18: {
      uint32_t n;
      const int64_t *v;
      IRON_RETURN_IF_ERROR_PLAIN(read_svarint_list(r, c, &n, &v));
      return opaque_attr(r, "#stablehlo.bounds<%u dims>", out, n);
    }
    case 19: return enum_attr(r, c, IRON_ENUM_RESULT_ACCURACY_MODE, 2, out);
    case 20: {
      iron_ir_attr_t *a = new_attr(r, IRON_ATTR_RESULT_ACCURACY);
      if (!a) return oom();
      uint64_t atol, rtol;
      IRON_RETURN_IF_ERROR_PLAIN(read_apint(c, 64, &atol));
      IRON_RETURN_IF_ERROR_PLAIN(read_apint(c, 64, &rtol));
      a->accuracy.atol = float_from_bits(IRON_DTYPE_F64, atol);
      a->accuracy.rtol = float_from_bits(IRON_DTYPE_F64, rtol);
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_svarint(c, "ulps", &a->accuracy.ulps));
      const iron_ir_attr_t *mode;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_attr_ref(r, c, "an accuracy mode", &mode));
      a->accuracy.mode = mode->kind == IRON_ATTR_ENUM ? mode->enumv.value : 0;
      *out = a;
      return IRON_OK;
    }
    case 21: case 22: case 23: case 24: case 25: {
      static const char *const kNames[] = {
          "#vhlo.sub_axis_info", "#vhlo.axis_ref",
          "#vhlo.replica_group_mesh_axes", "#vhlo.mesh_axis", "#vhlo.mesh"};
      c->p = c->end;  // mesh attributes are not needed by one device
      return opaque_attr(r, "%s", out, kNames[code - 21]);
    }
    default:
      return iron_bc_error_at(c, at,
                              "expected a known VHLO attribute code (got %llu)",
                              (unsigned long long)code);
  }
}

static iron_status_t decode_builtin_attr(iron_bc_reader_t *r,
                                         iron_bc_cursor_t *c,
                                         const iron_ir_attr_t **out) {
  uint64_t code;
  const uint8_t *at = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_bc_read_varint(c, "a builtin attribute code", &code));
  switch (code) {
    case 0: return read_attr_list(r, c, out);
    case 1: return read_dict(r, c, out);
    case 2: return string_attr(r, c, IRON_ATTR_STRING, out);
    case 3: {
      IRON_RETURN_IF_ERROR_PLAIN(string_attr(r, c, IRON_ATTR_STRING, out));
      const iron_ir_type_t *t;
      return iron_bc_read_type_ref(r, c, "a string type", &t);
    }
    case 4:
    case 5: {
      uint64_t idx;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint(c, "a symbol name", &idx));
      const char *s;
      IRON_RETURN_IF_ERROR_PLAIN(iron_bc_attr_string(r, c, idx, &s));
      if (code == 5) {
        uint64_t n;
        IRON_RETURN_IF_ERROR_PLAIN(
            iron_bc_read_count(c, "a nested symbol count", 1, &n));
        for (uint64_t i = 0; i < n; ++i) {
          const iron_ir_attr_t *nested;
          IRON_RETURN_IF_ERROR_PLAIN(
              iron_bc_read_attr_ref(r, c, "a nested symbol", &nested));
        }
      }
      iron_ir_attr_t *a = new_attr(r, IRON_ATTR_SYMBOL);
      if (!a) return oom();
      a->str = s;
      a->str_len = strlen(s);
      *out = a;
      return IRON_OK;
    }
    case 6: {
      iron_ir_attr_t *a = new_attr(r, IRON_ATTR_TYPE);
      if (!a) return oom();
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_type_ref(r, c, "a type", &a->type));
      *out = a;
      return IRON_OK;
    }
    case 7: {
      iron_ir_attr_t *a = new_attr(r, IRON_ATTR_UNIT);
      if (!a) return oom();
      *out = a;
      return IRON_OK;
    }
    case 8:
    case 9: {
      const iron_ir_type_t *t;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_type_ref(r, c, "a number type", &t));
      return code == 9 ? float_attr(r, c, t, out) : int_attr(r, c, t, out);
    }
    case 17: {  // dense array: element type, count, blob
      const iron_ir_type_t *et;
      const uint8_t *tat = c->p;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_type_ref(r, c, "an element type", &et));
      uint64_t n;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint(c, "a dense array size", &n));
      const uint8_t *blob;
      size_t size;
      IRON_RETURN_IF_ERROR_PLAIN(read_blob(c, &blob, &size));
      if (!is_element_type(et) || n > size)
        return iron_bc_error_at(c, tat, "expected a dense array of scalars");
      iron_ir_type_t *t = new_type(r, IRON_TYPE_TENSOR);
      if (!t) return oom();
      t->dtype = et->dtype;
      t->rank = 1;
      t->dims[0] = (int64_t)n;
      if (t->dtype == IRON_DTYPE_PRED && size == n) {
        uint8_t *d = iron_arena_alloc(r->arena, n ? n : 1);
        if (!d) return oom();
        for (uint64_t i = 0; i < n; ++i) d[i] = blob[i] ? 1 : 0;
        iron_ir_attr_t *a = new_attr(r, IRON_ATTR_DENSE);
        if (!a) return oom();
        a->dense.type = t;
        a->dense.data = d;
        a->dense.size = n;
        *out = a;
        return IRON_OK;
      }
      size_t es = iron_dtype_size(t->dtype), total;
      if (iron_mul_overflow_size(n, es, &total) || total != size)
        return iron_bc_error_at(c, tat, "expected %llu elements of dense array "
                                        "data",
                                (unsigned long long)n);
      return dense_attr(r, c, tat, t, blob, size, out);
    }
    case 18: {
      const iron_ir_type_t *t;
      const uint8_t *tat = c->p;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_type_ref(r, c, "a tensor type", &t));
      const uint8_t *blob;
      size_t size;
      IRON_RETURN_IF_ERROR_PLAIN(read_blob(c, &blob, &size));
      return dense_attr(r, c, tat, t, blob, size, out);
    }
    case 10: case 11: case 12: case 13: case 14: case 15: case 22:
      c->p = c->end;
      return opaque_attr(r, "loc(...)", out);
    default:
      (void)at;
      c->p = c->end;
      return opaque_attr(r, "#builtin.attr<%llu>", out,
                         (unsigned long long)code);
  }
}

iron_status_t iron_bc_attr(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                           uint64_t index, const iron_ir_attr_t **out) {
  if (index >= r->num_attrs)
    return iron_bc_error_at(c, c->p,
                            "expected an attribute index (got %llu of %llu)",
                            (unsigned long long)index,
                            (unsigned long long)r->num_attrs);
  if (r->attr_cache[index]) {
    *out = r->attr_cache[index];
    return IRON_OK;
  }
  iron_bc_entry_t *e = &r->attrs[index];
  if (e->state == 1)
    return iron_bc_error_at(c, e->data, "cyclic attribute reference (%llu)",
                            (unsigned long long)index);
  if (r->attr_depth >= IRON_BC_MAX_ATTR_DEPTH)
    return iron_bc_error_at(c, e->data, "attribute nesting too deep (%llu)",
                            (unsigned long long)index);
  char ctx[48];
  snprintf(ctx, sizeof(ctx), "attribute %llu", (unsigned long long)index);
  iron_bc_cursor_t ec = {r->base, e->data, e->data + e->size, ctx};
  e->state = 1;
  r->attr_depth++;
  const iron_ir_attr_t *a = NULL;
  iron_status_t st = IRON_OK;
  uint8_t dk = r->dialect_kinds[e->dialect];
  if (!e->custom) {
    const uint8_t *nul = memchr(e->data, 0, e->size);
    if (!nul) {
      st = iron_bc_error_at(&ec, e->data,
                            "expected a NUL-terminated attribute");
    } else {
      iron_ir_attr_t *o = new_attr(r, IRON_ATTR_OPAQUE);
      if (!o) {
        st = oom();
      } else {
        o->str = iron_arena_strdup(r->arena, (const char *)e->data);
        o->str_len = o->str ? strlen(o->str) : 0;
        if (!o->str) st = oom();
        a = o;
      }
    }
    ec.p = ec.end;
  } else if (dk == IRON_BC_DIALECT_VHLO) {
    st = decode_vhlo_attr(r, &ec, &a);
  } else if (dk == IRON_BC_DIALECT_BUILTIN) {
    st = decode_builtin_attr(r, &ec, &a);
  } else {
    // sdy and anything else: never decoded, skipped by the entry's size.
    st = opaque_attr(r, "#%s<...>", &a, r->dialect_names[e->dialect]);
    ec.p = ec.end;
  }
  r->attr_depth--;
  e->state = 0;
  if (st) return st;
  if (ec.p != ec.end)
    return iron_bc_error_at(&ec, ec.p,
                            "expected the end of the attribute entry");
  e->state = 2;
  r->attr_cache[index] = a;
  *out = a;
  return IRON_OK;
}

iron_status_t iron_bc_read_attr_ref(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                    const char *what,
                                    const iron_ir_attr_t **out) {
  uint64_t idx;
  const uint8_t *at = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, what, &idx));
  if (idx >= r->num_attrs)
    return iron_bc_error_at(c, at, "expected %s (attribute %llu of %llu)",
                            what, (unsigned long long)idx,
                            (unsigned long long)r->num_attrs);
  return iron_bc_attr(r, c, idx, out);
}

iron_status_t iron_bc_attr_string(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                  uint64_t index, const char **out) {
  const iron_ir_attr_t *a;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_attr(r, c, index, &a));
  if (a->kind != IRON_ATTR_STRING && a->kind != IRON_ATTR_SYMBOL)
    return iron_bc_error_at(c, c->p, "expected a string attribute (%llu)",
                            (unsigned long long)index);
  *out = a->str;
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// Locations

static const iron_ir_loc_t kUnknownLoc = {NULL, 0, 0, NULL};

static iron_status_t loc_ref(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                             const iron_ir_loc_t **out) {
  uint64_t idx;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "a location", &idx));
  return iron_bc_loc(r, c, idx, out);
}

static iron_status_t decode_loc(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                iron_ir_loc_t *loc) {
  uint64_t code;
  const uint8_t *at = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "a location code", &code));
  switch (code) {
    case 10: {  // CallSiteLoc(callee, caller): innermost frame first
      const iron_ir_loc_t *callee, *caller;
      IRON_RETURN_IF_ERROR_PLAIN(loc_ref(r, c, &callee));
      IRON_RETURN_IF_ERROR_PLAIN(loc_ref(r, c, &caller));
      *loc = callee->file ? *callee : *caller;
      loc->name = callee->name ? callee->name : caller->name;
      return IRON_OK;
    }
    case 11:
    case 22: {  // FileLineColLoc / FileLineColRange
      uint64_t fidx;
      IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "a file name", &fidx));
      IRON_RETURN_IF_ERROR_PLAIN(iron_bc_attr_string(r, c, fidx, &loc->file));
      uint64_t line = 0, col = 0;
      if (code == 11) {
        IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "a line", &line));
        IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "a column", &col));
      } else {
        uint64_t n;
        IRON_RETURN_IF_ERROR_PLAIN(
            iron_bc_read_count(c, "a location field count", 1, &n));
        for (uint64_t i = 0; i < n; ++i) {
          uint64_t v;
          IRON_RETURN_IF_ERROR_PLAIN(
              iron_bc_read_varint(c, "a location field", &v));
          if (i == 0) line = v;
          if (i == 1) col = v;
        }
      }
      loc->line = line > INT32_MAX ? INT32_MAX : (int32_t)line;
      loc->col = col > INT32_MAX ? INT32_MAX : (int32_t)col;
      return IRON_OK;
    }
    case 12:
    case 13: {  // FusedLoc: the first location with a file
      uint64_t n;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_count(c, "a fused location count", 1, &n));
      for (uint64_t i = 0; i < n; ++i) {
        const iron_ir_loc_t *sub;
        IRON_RETURN_IF_ERROR_PLAIN(loc_ref(r, c, &sub));
        if (!loc->file && sub->file) {
          loc->file = sub->file;
          loc->line = sub->line;
          loc->col = sub->col;
        }
        if (!loc->name && sub->name) loc->name = sub->name;
      }
      if (code == 13) {
        uint64_t meta;
        IRON_RETURN_IF_ERROR_PLAIN(
            iron_bc_read_varint(c, "location metadata", &meta));
        if (meta >= r->num_attrs)
          return iron_bc_error_at(c, at, "expected valid location metadata");
      }
      return IRON_OK;
    }
    case 14: {  // NameLoc(name, child): the outermost name wins
      uint64_t nidx;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint(c, "a location name", &nidx));
      const char *name;
      IRON_RETURN_IF_ERROR_PLAIN(iron_bc_attr_string(r, c, nidx, &name));
      const iron_ir_loc_t *child;
      IRON_RETURN_IF_ERROR_PLAIN(loc_ref(r, c, &child));
      *loc = *child;
      loc->name = name;
      return IRON_OK;
    }
    case 15:
      return IRON_OK;
    default:
      // Not a location we model: keep it unknown rather than failing.
      c->p = c->end;
      return IRON_OK;
  }
}

iron_status_t iron_bc_loc(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                          uint64_t index, const iron_ir_loc_t **out) {
  if (index >= r->num_attrs)
    return iron_bc_error_at(c, c->p,
                            "expected a location index (got %llu of %llu)",
                            (unsigned long long)index,
                            (unsigned long long)r->num_attrs);
  if (r->loc_cache[index]) {
    *out = r->loc_cache[index];
    return IRON_OK;
  }
  iron_bc_entry_t *e = &r->attrs[index];
  if (!e->custom || r->dialect_kinds[e->dialect] != IRON_BC_DIALECT_BUILTIN) {
    *out = &kUnknownLoc;
    return IRON_OK;
  }
  if (e->loc_state == 1)
    return iron_bc_error_at(c, e->data, "cyclic location reference (%llu)",
                            (unsigned long long)index);
  if (r->loc_depth >= IRON_BC_MAX_LOC_DEPTH) {
    *out = &kUnknownLoc;  // not cached: a shallower use decodes it
    return IRON_OK;
  }
  char ctx[48];
  snprintf(ctx, sizeof(ctx), "location %llu", (unsigned long long)index);
  iron_bc_cursor_t ec = {r->base, e->data, e->data + e->size, ctx};
  iron_ir_loc_t *loc = iron_arena_alloc(r->arena, sizeof(*loc));
  if (!loc) return oom();
  e->loc_state = 1;
  r->loc_depth++;
  iron_status_t st = decode_loc(r, &ec, loc);
  r->loc_depth--;
  e->loc_state = 0;
  if (st) return st;
  if (ec.p != ec.end)
    return iron_bc_error_at(&ec, ec.p, "expected the end of the location");
  r->loc_cache[index] = loc;
  *out = loc;
  return IRON_OK;
}
