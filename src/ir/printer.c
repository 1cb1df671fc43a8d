// The IR printer: StableHLO-like text in MLIR's generic op form,
//   %3 = "stablehlo.compare"(%1, %2) {comparison_direction =
//        #stablehlo<comparison_direction LT>} : (tensor<4xf32>,
//        tensor<4xf32>) -> tensor<4xi1>
// with regions nested in ({ ... }). Values print as %<id> (function
// arguments as %arg<i>), so the text names every value uniquely.
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "ir/ir.h"

typedef struct {
  char *buf;
  size_t len, cap;
  bool failed;
} out_t;

static void out_reserve(out_t *o, size_t more) {
  if (o->failed) return;
  if (o->len + more + 1 <= o->cap) return;
  size_t ncap = o->cap ? o->cap : 4096;
  while (ncap < o->len + more + 1) ncap *= 2;
  char *nb = realloc(o->buf, ncap);
  if (!nb) {
    o->failed = true;
    return;
  }
  o->buf = nb;
  o->cap = ncap;
}

static void out_write(out_t *o, const char *s, size_t n) {
  out_reserve(o, n);
  if (o->failed) return;
  memcpy(o->buf + o->len, s, n);
  o->len += n;
  o->buf[o->len] = '\0';
}

static void out_puts(out_t *o, const char *s) { out_write(o, s, strlen(s)); }

static void out_printf(out_t *o, const char *fmt, ...) IRON_PRINTF_LIKE(2, 3);
static void out_printf(out_t *o, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof(tmp)) {
    out_write(o, tmp, (size_t)n);
    return;
  }
  out_reserve(o, (size_t)n);
  if (o->failed) return;
  va_start(ap, fmt);
  vsnprintf(o->buf + o->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  o->len += (size_t)n;
}

static void indent(out_t *o, int depth) {
  for (int i = 0; i < depth; ++i) out_puts(o, "  ");
}

static void print_type(out_t *o, const iron_ir_type_t *t) {
  if (!t) {
    out_puts(o, "<<NULL TYPE>>");
    return;
  }
  char small[256];
  size_t n = iron_ir_type_format(t, small, sizeof(small));
  if (n < sizeof(small)) {
    out_write(o, small, n);
    return;
  }
  char *big = malloc(n + 1);
  if (!big) {
    o->failed = true;
    return;
  }
  iron_ir_type_format(t, big, n + 1);
  out_write(o, big, n);
  free(big);
}

static void print_string_lit(out_t *o, const char *s, size_t len) {
  out_puts(o, "\"");
  for (size_t i = 0; i < len; ++i) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\') {
      char e[3] = {'\\', (char)ch, 0};
      out_puts(o, e);
    } else if (ch == '\n') {
      out_puts(o, "\\0A");
    } else if (ch < 0x20 || ch >= 0x7f) {
      out_printf(o, "\\%02X", ch);
    } else {
      out_write(o, (const char *)&ch, 1);
    }
  }
  out_puts(o, "\"");
}

static void print_double(out_t *o, double v) {
  if (v != v) {
    out_puts(o, "0x7FC00000");
    return;
  }
  if (v == __builtin_inf()) {
    out_puts(o, "0x7F800000");
    return;
  }
  if (v == -__builtin_inf()) {
    out_puts(o, "0xFF800000");
    return;
  }
  char tmp[64];
  snprintf(tmp, sizeof(tmp), "%.9g", v);
  // Always look like a float literal (MLIR prints 1.000000e+00).
  if (!strpbrk(tmp, ".eEn")) strcat(tmp, ".0");
  out_puts(o, tmp);
}

// Small float formats (f8/f6/f4): value of a bit pattern. flavor: 0 IEEE
// (inf and NaN at the top exponent), 1 FN (NaN only at all ones), 2 FNUZ
// (NaN is the negative-zero pattern), 3 finite only.
static double minifloat(unsigned bits, int ebits, int mbits, int bias,
                        int flavor) {
  int total = 1 + ebits + mbits;
  unsigned sign = (bits >> (total - 1)) & 1;
  unsigned e = (bits >> mbits) & ((1u << ebits) - 1);
  unsigned m = bits & ((1u << mbits) - 1);
  unsigned emax = (1u << ebits) - 1;
  if (flavor == 2 && sign && e == 0 && m == 0) return __builtin_nan("");
  if (flavor == 0 && e == emax)
    return m ? __builtin_nan("") : (sign ? -__builtin_inf() : __builtin_inf());
  if (flavor == 1 && e == emax && m == (1u << mbits) - 1)
    return __builtin_nan("");
  double v = e == 0 ? __builtin_ldexp((double)m, 1 - bias - mbits)
                    : __builtin_ldexp((double)((1u << mbits) | m),
                                      (int)e - bias - mbits);
  return sign ? -v : v;
}

static bool small_float_value(iron_dtype_t dt, unsigned b, double *out) {
  switch (dt) {
    case IRON_DTYPE_F8E5M2: *out = minifloat(b, 5, 2, 15, 0); return true;
    case IRON_DTYPE_F8E4M3FN: *out = minifloat(b, 4, 3, 7, 1); return true;
    case IRON_DTYPE_F8E4M3: *out = minifloat(b, 4, 3, 7, 0); return true;
    case IRON_DTYPE_F8E3M4: *out = minifloat(b, 3, 4, 3, 0); return true;
    case IRON_DTYPE_F8E4M3FNUZ: *out = minifloat(b, 4, 3, 8, 2); return true;
    case IRON_DTYPE_F8E5M2FNUZ: *out = minifloat(b, 5, 2, 16, 2); return true;
    case IRON_DTYPE_F8E4M3B11FNUZ: *out = minifloat(b, 4, 3, 11, 2); return true;
    case IRON_DTYPE_F4E2M1FN: *out = minifloat(b & 0xf, 2, 1, 1, 3); return true;
    case IRON_DTYPE_F6E2M3FN: *out = minifloat(b & 0x3f, 2, 3, 1, 3); return true;
    case IRON_DTYPE_F6E3M2FN: *out = minifloat(b & 0x3f, 3, 2, 3, 3); return true;
    default: return false;
  }
}

// One element of a dense literal.
static void print_element(out_t *o, iron_dtype_t dt, const unsigned char *p) {
  switch (dt) {
    case IRON_DTYPE_PRED: out_puts(o, p[0] ? "true" : "false"); return;
    case IRON_DTYPE_S2:
    case IRON_DTYPE_S4:
    case IRON_DTYPE_S8: out_printf(o, "%d", (int)(int8_t)p[0]); return;
    case IRON_DTYPE_U2:
    case IRON_DTYPE_U4:
    case IRON_DTYPE_U8: out_printf(o, "%u", (unsigned)p[0]); return;
    case IRON_DTYPE_S16: {
      int16_t v;
      memcpy(&v, p, 2);
      out_printf(o, "%d", v);
      return;
    }
    case IRON_DTYPE_U16: {
      uint16_t v;
      memcpy(&v, p, 2);
      out_printf(o, "%u", v);
      return;
    }
    case IRON_DTYPE_S32: {
      int32_t v;
      memcpy(&v, p, 4);
      out_printf(o, "%" PRId32, v);
      return;
    }
    case IRON_DTYPE_U32: {
      uint32_t v;
      memcpy(&v, p, 4);
      out_printf(o, "%" PRIu32, v);
      return;
    }
    case IRON_DTYPE_S64:
    case IRON_DTYPE_INDEX: {
      int64_t v;
      memcpy(&v, p, 8);
      out_printf(o, "%" PRId64, v);
      return;
    }
    case IRON_DTYPE_U64: {
      uint64_t v;
      memcpy(&v, p, 8);
      out_printf(o, "%" PRIu64, v);
      return;
    }
    case IRON_DTYPE_F16: {
      uint16_t v;
      memcpy(&v, p, 2);
      print_double(o, iron_f16_to_f32(v));
      return;
    }
    case IRON_DTYPE_BF16: {
      uint16_t v;
      memcpy(&v, p, 2);
      print_double(o, iron_bf16_to_f32(v));
      return;
    }
    case IRON_DTYPE_F32: {
      float v;
      memcpy(&v, p, 4);
      print_double(o, v);
      return;
    }
    case IRON_DTYPE_F64: {
      double v;
      memcpy(&v, p, 8);
      print_double(o, v);
      return;
    }
    case IRON_DTYPE_C64: {
      float re, im;
      memcpy(&re, p, 4);
      memcpy(&im, p + 4, 4);
      out_puts(o, "(");
      print_double(o, re);
      out_puts(o, ",");
      print_double(o, im);
      out_puts(o, ")");
      return;
    }
    case IRON_DTYPE_C128: {
      double re, im;
      memcpy(&re, p, 8);
      memcpy(&im, p + 8, 8);
      out_puts(o, "(");
      print_double(o, re);
      out_puts(o, ",");
      print_double(o, im);
      out_puts(o, ")");
      return;
    }
    default: {
      double v;
      if (small_float_value(dt, p[0], &v)) {
        print_double(o, v);
        return;
      }
      // Anything else: raw bits.
      size_t n = iron_dtype_size(dt);
      out_puts(o, "0x");
      for (size_t i = n; i-- > 0;) out_printf(o, "%02X", p[i]);
      return;
    }
  }
}

// Literals longer than this print elided (MLIR prints hex blobs there).
#define PRINT_MAX_ELEMENTS 64

static void print_dense(out_t *o, const iron_ir_attr_t *a) {
  const iron_ir_type_t *t = a->dense.type;
  size_t es = iron_dtype_size(t->dtype);
  int64_t n = iron_ir_type_num_elements(t);
  const unsigned char *d = a->dense.data;
  out_puts(o, "dense<");
  if (a->dense.splat || n == 1) {
    if (es && a->dense.size >= es) print_element(o, t->dtype, d);
  } else if (n > PRINT_MAX_ELEMENTS || t->rank == 0) {
    out_printf(o, "\"<%lld elements>\"", (long long)n);
  } else if (n == 0) {
    out_puts(o, "");
    for (int32_t i = 0; i < t->rank; ++i) out_puts(o, "[");
    for (int32_t i = 0; i < t->rank; ++i) out_puts(o, "]");
  } else {
    // Nested brackets per dimension, like MLIR.
    int64_t strides[IRON_MAX_RANK];
    int64_t s = 1;
    for (int32_t i = t->rank - 1; i >= 0; --i) {
      strides[i] = s;
      s *= t->dims[i];
    }
    for (int64_t e = 0; e < n; ++e) {
      // Dimension i spans strides[i] * dims[i] elements.
      int opens = 0;
      for (int32_t i = 0; i < t->rank; ++i)
        if (e % (strides[i] * t->dims[i]) == 0) opens++;
      if (e > 0) out_puts(o, ", ");
      for (int i = 0; i < opens; ++i) out_puts(o, "[");
      print_element(o, t->dtype, d + (size_t)e * es);
      int closes = 0;
      for (int32_t i = 0; i < t->rank; ++i)
        if ((e + 1) % (strides[i] * t->dims[i]) == 0) closes++;
      for (int i = 0; i < closes; ++i) out_puts(o, "]");
    }
  }
  out_puts(o, "> : ");
  print_type(o, t);
}

static const char *enum_text(iron_enum_kind_t kind, int32_t v,
                             const char **out_kind) {
  static const char *const kCmp[] = {"EQ", "NE", "GE", "GT", "LE", "LT"};
  static const char *const kCmpType[] = {"NOTYPE", "FLOAT", "TOTALORDER",
                                         "SIGNED", "UNSIGNED"};
  static const char *const kPrec[] = {"DEFAULT", "HIGH", "HIGHEST"};
  static const char *const kRng[] = {"DEFAULT", "THREE_FRY", "PHILOX"};
  static const char *const kDist[] = {"INVALID", "UNIFORM", "NORMAL"};
  static const char *const kFft[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  static const char *const kTr[] = {"TRANSPOSE_INVALID", "NO_TRANSPOSE",
                                    "TRANSPOSE", "ADJOINT"};
  static const char *const kApi[] = {
      "API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL",
      "API_VERSION_STATUS_RETURNING", "API_VERSION_STATUS_RETURNING_UNIFIED",
      "API_VERSION_TYPED_FFI"};
  static const char *const kAcc[] = {"DEFAULT", "HIGHEST", "TOLERANCE"};
#define PICK(name, arr)                                                \
  do {                                                                 \
    *out_kind = name;                                                  \
    return (v >= 0 && (size_t)v < sizeof(arr) / sizeof(arr[0])) ? arr[v] \
                                                                : NULL; \
  } while (0)
  switch (kind) {
    case IRON_ENUM_COMPARISON_DIRECTION: PICK("comparison_direction", kCmp);
    case IRON_ENUM_COMPARISON_TYPE: PICK("comparison_type", kCmpType);
    case IRON_ENUM_PRECISION: PICK("precision", kPrec);
    case IRON_ENUM_RNG_ALGORITHM: PICK("rng_algorithm", kRng);
    case IRON_ENUM_RNG_DISTRIBUTION: PICK("rng_distribution", kDist);
    case IRON_ENUM_FFT_TYPE: PICK("fft_type", kFft);
    case IRON_ENUM_TRANSPOSE: PICK("transpose", kTr);
    case IRON_ENUM_CUSTOM_CALL_API_VERSION: PICK("api_version", kApi);
    case IRON_ENUM_RESULT_ACCURACY_MODE: PICK("result_accuracy_mode", kAcc);
  }
#undef PICK
  *out_kind = "enum";
  return NULL;
}

static void print_attr(out_t *o, const iron_ir_attr_t *a);

static void print_i64s(out_t *o, const int64_t *v, uint32_t n) {
  out_puts(o, "[");
  for (uint32_t i = 0; i < n; ++i)
    out_printf(o, "%s%" PRId64, i ? ", " : "", v[i]);
  out_puts(o, "]");
}

static void print_attr(out_t *o, const iron_ir_attr_t *a) {
  if (!a) {
    out_puts(o, "<<NULL ATTR>>");
    return;
  }
  switch (a->kind) {
    case IRON_ATTR_UNIT: out_puts(o, "unit"); return;
    case IRON_ATTR_BOOL: out_puts(o, a->b ? "true" : "false"); return;
    case IRON_ATTR_INT:
      if (iron_dtype_is_unsigned_int(a->int_dtype))
        out_printf(o, "%" PRIu64 " : %s", (uint64_t)a->i,
                   iron_dtype_name(a->int_dtype));
      else
        out_printf(o, "%" PRId64 " : %s", a->i, iron_dtype_name(a->int_dtype));
      return;
    case IRON_ATTR_FLOAT:
      print_double(o, a->f);
      out_printf(o, " : %s", iron_dtype_name(a->float_dtype));
      return;
    case IRON_ATTR_STRING: print_string_lit(o, a->str, a->str_len); return;
    case IRON_ATTR_SYMBOL:
      out_puts(o, "@");
      out_write(o, a->str, a->str_len);
      return;
    case IRON_ATTR_ARRAY:
      out_puts(o, "[");
      for (uint32_t i = 0; i < a->array.count; ++i) {
        if (i) out_puts(o, ", ");
        print_attr(o, a->array.items[i]);
      }
      out_puts(o, "]");
      return;
    case IRON_ATTR_DICT:
      out_puts(o, "{");
      for (uint32_t i = 0; i < a->dict.count; ++i) {
        if (i) out_puts(o, ", ");
        out_puts(o, a->dict.entries[i].name);
        out_puts(o, " = ");
        print_attr(o, a->dict.entries[i].value);
      }
      out_puts(o, "}");
      return;
    case IRON_ATTR_DENSE: print_dense(o, a); return;
    case IRON_ATTR_TYPE: print_type(o, a->type); return;
    case IRON_ATTR_ENUM: {
      const char *kind;
      const char *text = enum_text(a->enumv.kind, a->enumv.value, &kind);
      if (text)
        out_printf(o, "#stablehlo<%s %s>", kind, text);
      else
        out_printf(o, "#stablehlo<%s %d>", kind, (int)a->enumv.value);
      return;
    }
    case IRON_ATTR_OUTPUT_OPERAND_ALIAS:
      out_puts(o, "#stablehlo.output_operand_alias<output_tuple_indices = ");
      print_i64s(o, a->alias.output_tuple_indices,
                 a->alias.num_output_tuple_indices);
      out_printf(o, ", operand_index = %" PRId64 ", operand_tuple_indices = ",
                 a->alias.operand_index);
      print_i64s(o, a->alias.operand_tuple_indices,
                 a->alias.num_operand_tuple_indices);
      out_puts(o, ">");
      return;
    case IRON_ATTR_RESULT_ACCURACY: {
      const char *kind;
      const char *mode =
          enum_text(IRON_ENUM_RESULT_ACCURACY_MODE, a->accuracy.mode, &kind);
      out_puts(o, "#stablehlo.result_accuracy<atol = ");
      print_double(o, a->accuracy.atol);
      out_puts(o, ", rtol = ");
      print_double(o, a->accuracy.rtol);
      out_printf(o, ", ulps = %" PRId64 ", mode = #stablehlo<%s %s>>",
                 a->accuracy.ulps, kind, mode ? mode : "?");
      return;
    }
    case IRON_ATTR_OPAQUE:
      if (a->str)
        out_write(o, a->str, a->str_len);
      else
        out_puts(o, "#opaque");
      return;
  }
  out_puts(o, "<<attr>>");
}

static void print_value(out_t *o, const iron_ir_value_t *v) {
  if (!v) {
    out_puts(o, "%<<NULL>>");
    return;
  }
  // Function entry arguments: %argN like jax's text; everything else by id.
  if (v->def_block && v->def_block->parent &&
      v->def_block->parent->parent == NULL)
    out_printf(o, "%%arg%u", v->index);
  else
    out_printf(o, "%%%u", v->id);
}

static void print_loc(out_t *o, const iron_ir_loc_t *loc) {
  if (!loc->file && !loc->name) {
    out_puts(o, " loc(unknown)");
    return;
  }
  out_puts(o, " loc(");
  if (loc->name) {
    print_string_lit(o, loc->name, strlen(loc->name));
    if (loc->file) out_puts(o, "(");
  }
  if (loc->file) {
    print_string_lit(o, loc->file, strlen(loc->file));
    out_printf(o, ":%d:%d", (int)loc->line, (int)loc->col);
    if (loc->name) out_puts(o, ")");
  }
  out_puts(o, ")");
}

static void print_region(out_t *o, const iron_ir_region_t *r, int depth,
                         const iron_ir_print_options_t *opts);

static void print_op(out_t *o, const iron_ir_op_t *op, int depth,
                     const iron_ir_print_options_t *opts) {
  indent(o, depth);
  for (uint32_t i = 0; i < op->num_results; ++i) {
    if (i) out_puts(o, ", ");
    print_value(o, &op->results[i]);
  }
  if (op->num_results) out_puts(o, " = ");
  out_puts(o, "\"");
  out_puts(o, op->name ? op->name : iron_op_kind_name(op->kind));
  out_puts(o, "\"(");
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    if (i) out_puts(o, ", ");
    print_value(o, op->operands[i]);
  }
  out_puts(o, ")");
  if (op->num_regions) {
    out_puts(o, " (");
    for (uint32_t i = 0; i < op->num_regions; ++i) {
      if (i) out_puts(o, ", ");
      print_region(o, &op->regions[i], depth, opts);
    }
    out_puts(o, ")");
  }
  if (op->num_attrs) {
    out_puts(o, " {");
    for (uint32_t i = 0; i < op->num_attrs; ++i) {
      if (i) out_puts(o, ", ");
      out_puts(o, op->attrs[i].name);
      out_puts(o, " = ");
      print_attr(o, op->attrs[i].value);
    }
    out_puts(o, "}");
  }
  out_puts(o, " : (");
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    if (i) out_puts(o, ", ");
    print_type(o, op->operands[i] ? op->operands[i]->type : NULL);
  }
  out_puts(o, ") -> ");
  if (op->num_results != 1) out_puts(o, "(");
  for (uint32_t i = 0; i < op->num_results; ++i) {
    if (i) out_puts(o, ", ");
    print_type(o, op->results[i].type);
  }
  if (op->num_results != 1) out_puts(o, ")");
  if (opts && opts->print_locations) print_loc(o, &op->loc);
  out_puts(o, "\n");
}

static void print_block_body(out_t *o, const iron_ir_block_t *b, int depth,
                             const iron_ir_print_options_t *opts) {
  for (uint32_t i = 0; i < b->num_ops; ++i) print_op(o, b->ops[i], depth, opts);
}

static void print_region(out_t *o, const iron_ir_region_t *r, int depth,
                         const iron_ir_print_options_t *opts) {
  out_puts(o, "{\n");
  for (uint32_t b = 0; b < r->num_blocks; ++b) {
    const iron_ir_block_t *blk = &r->blocks[b];
    if (blk->num_args || r->num_blocks > 1) {
      indent(o, depth);
      out_printf(o, "^bb%u", b);
      if (blk->num_args) {
        out_puts(o, "(");
        for (uint32_t i = 0; i < blk->num_args; ++i) {
          if (i) out_puts(o, ", ");
          print_value(o, &blk->args[i]);
          out_puts(o, ": ");
          print_type(o, blk->args[i].type);
        }
        out_puts(o, ")");
      }
      out_puts(o, ":\n");
    }
    print_block_body(o, blk, depth + 1, opts);
  }
  indent(o, depth);
  out_puts(o, "}");
}

static void print_named_dict(out_t *o, const iron_ir_attr_t *d) {
  if (!d || d->kind != IRON_ATTR_DICT || d->dict.count == 0) return;
  out_puts(o, " ");
  print_attr(o, d);
}

static void print_func(out_t *o, const iron_ir_func_t *f,
                       const iron_ir_print_options_t *opts) {
  out_printf(o, "  func.func %s @%s(", f->is_public ? "public" : "private",
             f->name ? f->name : "?");
  uint32_t na = iron_ir_func_num_args(f), nr = iron_ir_func_num_results(f);
  for (uint32_t i = 0; i < na; ++i) {
    if (i) out_puts(o, ", ");
    out_printf(o, "%%arg%u: ", i);
    print_type(o, iron_ir_func_arg_type(f, i));
    if (f->arg_attrs) print_named_dict(o, f->arg_attrs[i]);
  }
  out_puts(o, ") -> (");
  for (uint32_t i = 0; i < nr; ++i) {
    if (i) out_puts(o, ", ");
    print_type(o, iron_ir_func_result_type(f, i));
    if (f->res_attrs) print_named_dict(o, f->res_attrs[i]);
  }
  out_puts(o, ") {\n");
  if (f->body.num_blocks) print_block_body(o, &f->body.blocks[0], 2, opts);
  out_puts(o, "  }");
  if (opts && opts->print_locations) print_loc(o, &f->loc);
  out_puts(o, "\n");
}

char *iron_ir_module_print_to_string(const iron_ir_module_t *module,
                                     const iron_ir_print_options_t *options) {
  out_t o = {NULL, 0, 0, false};
  out_reserve(&o, 0);
  if (o.failed) return NULL;
  o.buf[0] = '\0';
  out_puts(&o, "module");
  if (module->name) out_printf(&o, " @%s", module->name);
  if (module->num_attrs) {
    out_puts(&o, " attributes {");
    for (uint32_t i = 0; i < module->num_attrs; ++i) {
      if (i) out_puts(&o, ", ");
      out_puts(&o, module->attrs[i].name);
      out_puts(&o, " = ");
      print_attr(&o, module->attrs[i].value);
    }
    out_puts(&o, "}");
  }
  out_puts(&o, " {\n");
  for (uint32_t i = 0; i < module->num_funcs; ++i)
    print_func(&o, &module->funcs[i], options);
  out_puts(&o, "}\n");
  if (o.failed) {
    free(o.buf);
    return NULL;
  }
  return o.buf;
}

void iron_ir_module_print(const iron_ir_module_t *module,
                          const iron_ir_print_options_t *options,
                          void *file) {
  char *s = iron_ir_module_print_to_string(module, options);
  if (!s) return;
  fputs(s, (FILE *)file);
  free(s);
}
