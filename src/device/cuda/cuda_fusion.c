// Element-wise DAG -> one CUDA kernel (see cuda_fusion.h).
//
// Each IR value becomes a local of its compute type (cuda_codegen.h);
// each op one statement. Edge semantics follow the host kernels
// (src/device/host/elementwise.c, convert.c, ew_common.h): the helpers are
// in the prelude. Denormals: XLA:CPU flushes f32/f64 denormal inputs and
// results of float arithmetic (not of negate/abs/select/copies, and
// remainder keeps them); f32 is flushed by NVRTC's -ftz, f64 (and the libm
// calls the host flushes explicitly) by iron_daz in the generated code.
#include "device/cuda/cuda_fusion.h"

#include "device/cuda/cuda_ops_gen.h"
#include "device/cuda/cuda_ops_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "device/cuda/cuda_codegen.h"
#include "device/cuda/cuda_ops_gen.h"
#include "device/cuda/cuda_ops_internal.h"
#include "device/cuda/cuda_row_fusion.h"

// ---------------------------------------------------------------------------
// dtype helpers

static bool is_half(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16;
}
// Float dtypes computed in float registers.
static bool is_f32ish(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F32 || is_half(dt);
}
static bool is_real_float(iron_dtype_t dt) {
  return is_f32ish(dt) || dt == IRON_DTYPE_F64;
}
static bool is_cplx(iron_dtype_t dt) {
  return dt == IRON_DTYPE_C64 || dt == IRON_DTYPE_C128;
}
static bool is_int(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_S8: case IRON_DTYPE_S16: case IRON_DTYPE_S32:
    case IRON_DTYPE_S64: case IRON_DTYPE_U8: case IRON_DTYPE_U16:
    case IRON_DTYPE_U32: case IRON_DTYPE_U64:
      return true;
    default:
      return false;
  }
}
static bool is_sint(iron_dtype_t dt) {
  return is_int(dt) && iron_dtype_is_signed_int(dt);
}
// libm suffix of the compute type.
static const char *fs(iron_dtype_t dt) { return is_f32ish(dt) ? "f" : ""; }

typedef struct nf_fmt {
  iron_dtype_t dt;
  int ebits, mbits, bias, kind;
} nf_fmt_t;

static const nf_fmt_t kNarrowFloats[] = {
    {IRON_DTYPE_F8E5M2, 5, 2, 15, 0},       {IRON_DTYPE_F8E4M3, 4, 3, 7, 0},
    {IRON_DTYPE_F8E3M4, 3, 4, 3, 0},        {IRON_DTYPE_F8E4M3FN, 4, 3, 7, 1},
    {IRON_DTYPE_F8E4M3FNUZ, 4, 3, 8, 2},    {IRON_DTYPE_F8E5M2FNUZ, 5, 2, 16, 2},
    {IRON_DTYPE_F8E4M3B11FNUZ, 4, 3, 11, 2}, {IRON_DTYPE_F4E2M1FN, 2, 1, 1, 3},
};

static const nf_fmt_t *narrow_float(iron_dtype_t dt) {
  for (size_t i = 0; i < sizeof(kNarrowFloats) / sizeof(kNarrowFloats[0]);
       ++i) {
    if (kNarrowFloats[i].dt == dt) return &kNarrowFloats[i];
  }
  return NULL;
}

static bool narrow_int(iron_dtype_t dt, int *bits, bool *sgn) {
  switch (dt) {
    case IRON_DTYPE_S4: *bits = 4; *sgn = true; return true;
    case IRON_DTYPE_U4: *bits = 4; *sgn = false; return true;
    case IRON_DTYPE_S2: *bits = 2; *sgn = true; return true;
    case IRON_DTYPE_U2: *bits = 2; *sgn = false; return true;
    default: return false;
  }
}

// Narrow dtypes in element-wise ops: XLA:CPU computes them in a wider
// dtype and converts every result back (the host's ew_narrow.h): s4 -> s8,
// u4 -> u8, f8/f4E2M1FN -> f16, f8E8M0FNU -> f32. Generated code keeps
// such a value in the wide dtype's compute type (already rounded to the
// narrow dtype) and stores it as one byte (low bits).
static iron_dtype_t nw_wide(iron_dtype_t dt) {
  if (dt == IRON_DTYPE_S4) return IRON_DTYPE_S8;
  if (dt == IRON_DTYPE_U4) return IRON_DTYPE_U8;
  if (narrow_float(dt)) return IRON_DTYPE_F16;
  if (dt == IRON_DTYPE_F8E8M0FNU) return IRON_DTYPE_F32;
  return IRON_DTYPE_INVALID;
}
static bool is_nw(iron_dtype_t dt) { return nw_wide(dt) != IRON_DTYPE_INVALID; }
// The dtype a value is computed in.
static iron_dtype_t cdt(iron_dtype_t dt) { return is_nw(dt) ? nw_wide(dt) : dt; }
// Storage and compute C types (narrow: one byte / the wide compute type).
static const char *st_ctype(iron_dtype_t dt) {
  return is_nw(dt) ? "uint8_t" : iron_cuda_ctype(dt);
}
static const char *cp_ctype(iron_dtype_t dt) {
  return iron_cuda_compute_ctype(cdt(dt));
}

bool iron_cuda_nf_format(iron_dtype_t dt, int *out_ebits, int *out_mbits,
                         int *out_bias, int *out_kind) {
  const nf_fmt_t *f = narrow_float(dt);
  if (!f) return false;
  *out_ebits = f->ebits;
  *out_mbits = f->mbits;
  *out_bias = f->bias;
  *out_kind = f->kind;
  return true;
}

bool iron_cuda_fusion_dtype_ok(iron_dtype_t dt) {
  return iron_cuda_ctype(dt) != NULL || is_nw(dt);
}

// Text of the wide value of narrow byte expression `b`.
static void nw_decode(iron_dtype_t dt, const char *b, char *buf, size_t cap) {
  const nf_fmt_t *f = narrow_float(dt);
  if (dt == IRON_DTYPE_S4) {
    snprintf(buf, cap, "(int8_t)iron_n4sext((int)(%s))", b);
  } else if (dt == IRON_DTYPE_U4) {
    snprintf(buf, cap, "(uint8_t)((%s) & 0xfu)", b);
  } else if (f) {
    snprintf(buf, cap, "(float)iron_nf_decode((unsigned)(%s), %d, %d, %d, %d)",
             b, f->ebits, f->mbits, f->bias, f->kind);
  } else {  // f8E8M0FNU
    snprintf(buf, cap, "iron_e8m0_ld((unsigned)(%s))", b);
  }
}

// Text of the narrow byte of wide value expression `v` (rounded as the
// host's convert wide -> narrow: f16 -> f8 through f64, f32 -> f8E8M0FNU
// from the f32 bits, s8/u8 -> s4/u4 wraps).
static void nw_encode(iron_dtype_t dt, const char *v, char *buf, size_t cap) {
  const nf_fmt_t *f = narrow_float(dt);
  if (dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4) {
    snprintf(buf, cap, "(uint8_t)((%s) & 0xf)", v);
  } else if (f) {
    snprintf(buf, cap, "iron_nf_encode((double)(%s), %d, %d, %d, %d)", v,
             f->ebits, f->mbits, f->bias, f->kind);
  } else {
    snprintf(buf, cap, "iron_e8m0_st(%s)", v);
  }
}

// ---------------------------------------------------------------------------
// Values

typedef struct fz_val {
  const iron_ir_value_t *v;
  char name[24];
} fz_val_t;

typedef struct fz_gen {
  const iron_cuda_fusion_t *f;
  iron_cuda_src_t *s;
  fz_val_t *vals;
  uint32_t num_vals, cap_vals;
  int32_t rank;
  int64_t dims[IRON_MAX_RANK];
  int64_t count;
  const char *idx;  // "int" or "long long"
  bool flush;
} fz_gen_t;

static const char *fz_name(const fz_gen_t *g, const iron_ir_value_t *v) {
  for (uint32_t i = 0; i < g->num_vals; ++i) {
    if (g->vals[i].v == v) return g->vals[i].name;
  }
  return NULL;
}

static iron_status_t fz_add(fz_gen_t *g, const iron_ir_value_t *v,
                            const char *fmt, uint32_t k) {
  if (g->num_vals == g->cap_vals) {
    uint32_t cap = g->cap_vals ? 2 * g->cap_vals : 32;
    fz_val_t *nv = realloc(g->vals, cap * sizeof(*nv));
    if (!nv) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (fusion)");
    g->vals = nv;
    g->cap_vals = cap;
  }
  fz_val_t *e = &g->vals[g->num_vals++];
  e->v = v;
  snprintf(e->name, sizeof(e->name), fmt, k);
  return IRON_OK;
}

static int64_t type_count(const iron_ir_type_t *t) {
  return iron_ir_type_num_elements(t);
}

static bool dims_equal(const fz_gen_t *g, const iron_ir_type_t *t) {
  if (t->rank != g->rank) return false;
  for (int32_t i = 0; i < t->rank; ++i) {
    if (t->dims[i] != g->dims[i]) return false;
  }
  return true;
}

static iron_status_t refuse_dtype(const fz_gen_t *g, const iron_ir_op_t *op,
                                  iron_dtype_t dt) {
  (void)g;
  return iron_ir_op_unimplemented(op, "on the CUDA device for dtype %s",
                                  iron_dtype_name(dt));
}

// storage -> compute
static void emit_load(iron_cuda_src_t *s, iron_dtype_t dt, const char *var,
                      const char *lvalue) {
  if (dt == IRON_DTYPE_PRED) {
    // The stored byte as it is, as the host device (and XLA:CPU) read a
    // pred: a byte other than 0/1 (a bitcast, a view of numpy bytes)
    // converts to its value and combines bitwise.
    iron_cuda_src_printf(s, "    const uint8_t %s = %s;\n", var, lvalue);
  } else if (is_nw(dt)) {
    char d[512];
    nw_decode(dt, lvalue, d, sizeof(d));
    iron_cuda_src_printf(s, "    const %s %s = %s;\n", cp_ctype(dt), var, d);
  } else {
    iron_cuda_src_printf(s, "    const %s %s = iron_ld(%s);\n",
                         iron_cuda_compute_ctype(dt), var, lvalue);
  }
}

// compute -> storage expression
static void store_expr(iron_dtype_t dt, const char *v, char *buf, size_t cap) {
  if (is_nw(dt)) {
    nw_encode(dt, v, buf, cap);
    return;
  }
  switch (dt) {
    case IRON_DTYPE_PRED: snprintf(buf, cap, "(uint8_t)(%s)", v); break;
    case IRON_DTYPE_F16: snprintf(buf, cap, "iron_st_f16(%s)", v); break;
    case IRON_DTYPE_BF16: snprintf(buf, cap, "iron_st_bf16(%s)", v); break;
    default: snprintf(buf, cap, "%s", v); break;
  }
}

// ---------------------------------------------------------------------------
// Expressions. A: arguments after the flush wrapper.

typedef struct fz_expr {
  char text[1024];
} fz_expr_t;

#define EXPR(...) snprintf(e->text, sizeof(e->text), __VA_ARGS__)

// Ops that read float denormals as they are (host: sign-bit ops, copies,
// remainder); every other float op flushes them as XLA:CPU does.
// complex(re, im) only moves its operands: XLA:CPU keeps denormal parts
// (measured: complex(d, d') has the bits of d and d').
static bool op_keeps_denormals(iron_op_kind_t k) {
  return k == IRON_OP_NEGATE || k == IRON_OP_ABS || k == IRON_OP_REMAINDER ||
         k == IRON_OP_REAL || k == IRON_OP_IMAG || k == IRON_OP_SELECT ||
         k == IRON_OP_IS_FINITE || k == IRON_OP_RESHAPE ||
         k == IRON_OP_COMPLEX;
}

// The libm function (double spelling; "f" appended for float) of a real
// float unary/binary op that is exactly one libm call, else NULL. Shared
// with the region generator (cuda_gen_region.c).
const char *iron_cuda_libm_name(iron_op_kind_t k) {
  switch (k) {
    case IRON_OP_FLOOR: return "floor";
    case IRON_OP_CEIL: return "ceil";
    case IRON_OP_ROUND_NEAREST_AFZ: return "round";
    case IRON_OP_ROUND_NEAREST_EVEN: return "rint";
    case IRON_OP_EXPONENTIAL: return "exp";
    case IRON_OP_EXPONENTIAL_MINUS_ONE: return "expm1";
    case IRON_OP_LOG: return "log";
    case IRON_OP_LOG_PLUS_ONE: return "log1p";
    case IRON_OP_SQRT: return "sqrt";
    case IRON_OP_CBRT: return "cbrt";
    case IRON_OP_SINE: return "sin";
    case IRON_OP_COSINE: return "cos";
    case IRON_OP_TAN: return "tan";
    case IRON_OP_TANH: return "tanh";
    case IRON_OP_POWER: return "pow";
    case IRON_OP_ATAN2: return "atan2";
    default: return NULL;
  }
}

// Unary op on dtype `dt` (x = A[0]). False when refused.
static bool unary_expr(iron_op_kind_t k, iron_dtype_t dt, const char *x,
                       fz_expr_t *e) {
  const char *F = fs(dt);
  if (is_int(dt) || dt == IRON_DTYPE_PRED) {
    bool pred = dt == IRON_DTYPE_PRED;
    switch (k) {
      case IRON_OP_ABS:
        if (!is_sint(dt)) return false;
        EXPR("iron_iabs(%s)", x); return true;
      case IRON_OP_NEGATE:
        if (pred) return false;
        EXPR("iron_ineg(%s)", x); return true;
      case IRON_OP_NOT:
        if (pred) EXPR("(uint8_t)(%s == 0)", x); else EXPR("iron_inot(%s)", x);
        return true;
      case IRON_OP_SIGN:
        if (!is_sint(dt)) return false;
        EXPR("iron_isign(%s)", x); return true;
      case IRON_OP_POPCNT:
        if (pred) return false;
        EXPR("iron_popcnt(%s)", x); return true;
      case IRON_OP_CLZ:
        if (pred) return false;
        EXPR("iron_clz(%s)", x); return true;
      default:
        return false;
    }
  }
  if (is_real_float(dt)) {
    bool f32 = is_f32ish(dt);
    const char *lm = iron_cuda_libm_name(k);
    if (lm && iron_op_kind_class(k) == IRON_OP_CLASS_UNARY) {
      EXPR("%s%s(%s)", lm, F, x);
      return true;
    }
    switch (k) {
      case IRON_OP_ABS:
        if (f32) EXPR("__uint_as_float(__float_as_uint(%s) & 0x7fffffffu)", x);
        else EXPR("fabs(%s)", x);
        return true;
      case IRON_OP_NEGATE:
        if (f32) EXPR("__uint_as_float(__float_as_uint(%s) ^ 0x80000000u)", x);
        else EXPR("(-%s)", x);
        return true;
      case IRON_OP_SIGN: EXPR("iron_fsign(%s)", x); return true;
      case IRON_OP_LOGISTIC: EXPR("iron_logistic(%s)", x); return true;
      case IRON_OP_RSQRT: EXPR("iron_rsqrt(%s)", x); return true;
      case IRON_OP_REAL: EXPR("%s", x); return true;
      case IRON_OP_IMAG: EXPR("%s", f32 ? "0.0f" : "0.0"); return true;
      case IRON_OP_IS_FINITE: EXPR("iron_isfinite(%s)", x); return true;
      default: return false;
    }
  }
  if (is_cplx(dt)) {
    switch (k) {
      case IRON_OP_ABS: EXPR("iron_cabs(%s)", x); return true;
      case IRON_OP_NEGATE: EXPR("(-%s)", x); return true;
      case IRON_OP_SIGN: EXPR("iron_csign(%s)", x); return true;
      case IRON_OP_EXPONENTIAL: EXPR("iron_cexp(%s)", x); return true;
      case IRON_OP_EXPONENTIAL_MINUS_ONE: EXPR("iron_cexpm1(%s)", x); return true;
      case IRON_OP_LOG: EXPR("iron_clog(%s)", x); return true;
      case IRON_OP_LOG_PLUS_ONE: EXPR("iron_clog1p(%s)", x); return true;
      case IRON_OP_LOGISTIC: EXPR("iron_clogistic(%s)", x); return true;
      case IRON_OP_SQRT: EXPR("iron_csqrt(%s)", x); return true;
      case IRON_OP_RSQRT: EXPR("iron_crsqrt(%s)", x); return true;
      case IRON_OP_SINE: EXPR("iron_csin(%s)", x); return true;
      case IRON_OP_COSINE: EXPR("iron_ccos(%s)", x); return true;
      case IRON_OP_TAN: EXPR("iron_ctan(%s)", x); return true;
      case IRON_OP_TANH: EXPR("iron_ctanh(%s)", x); return true;
      case IRON_OP_REAL: EXPR("%s.re", x); return true;
      case IRON_OP_IMAG: EXPR("%s.im", x); return true;
      default: return false;
    }
  }
  return false;
}

// The result dtype the host's tables give for unary op k on dt.
static iron_dtype_t unary_result(iron_op_kind_t k, iron_dtype_t dt) {
  if (k == IRON_OP_IS_FINITE) return IRON_DTYPE_PRED;
  if (is_cplx(dt) && (k == IRON_OP_ABS || k == IRON_OP_REAL ||
                      k == IRON_OP_IMAG)) {
    return iron_dtype_complex_part(dt);
  }
  return dt;
}

static bool binary_expr(iron_op_kind_t k, iron_dtype_t dt, const char *x,
                        const char *y, fz_expr_t *e) {
  const char *F = fs(dt);
  (void)F;
  if (dt == IRON_DTYPE_PRED) {
    switch (k) {
      // Bitwise on the stored bytes, as the host device.
      case IRON_OP_ADD: case IRON_OP_OR: case IRON_OP_MAXIMUM:
        EXPR("(uint8_t)(%s | %s)", x, y); return true;
      case IRON_OP_MULTIPLY: case IRON_OP_AND: case IRON_OP_MINIMUM:
        EXPR("(uint8_t)(%s & %s)", x, y); return true;
      case IRON_OP_XOR: EXPR("(uint8_t)(%s ^ %s)", x, y); return true;
      default: return false;
    }
  }
  if (is_int(dt)) {
    const char *fn = NULL;
    switch (k) {
      case IRON_OP_ADD: fn = "iron_iadd"; break;
      case IRON_OP_SUBTRACT: fn = "iron_isub"; break;
      case IRON_OP_MULTIPLY: fn = "iron_imul"; break;
      case IRON_OP_DIVIDE: fn = "iron_idiv"; break;
      case IRON_OP_REMAINDER: fn = "iron_irem"; break;
      case IRON_OP_POWER: fn = "iron_ipow"; break;
      case IRON_OP_MAXIMUM: fn = "iron_imax"; break;
      case IRON_OP_MINIMUM: fn = "iron_imin"; break;
      case IRON_OP_SHIFT_LEFT: fn = "iron_shl"; break;
      case IRON_OP_SHIFT_RIGHT_ARITHMETIC: fn = "iron_shra"; break;
      case IRON_OP_SHIFT_RIGHT_LOGICAL: fn = "iron_shrl"; break;
      case IRON_OP_AND:
        EXPR("(%s)(%s & %s)", iron_cuda_ctype(dt), x, y); return true;
      case IRON_OP_OR:
        EXPR("(%s)(%s | %s)", iron_cuda_ctype(dt), x, y); return true;
      case IRON_OP_XOR:
        EXPR("(%s)(%s ^ %s)", iron_cuda_ctype(dt), x, y); return true;
      default: return false;
    }
    EXPR("%s(%s, %s)", fn, x, y);
    return true;
  }
  if (is_real_float(dt)) {
    switch (k) {
      case IRON_OP_ADD: EXPR("(%s + %s)", x, y); return true;
      case IRON_OP_SUBTRACT: EXPR("(%s - %s)", x, y); return true;
      case IRON_OP_MULTIPLY: EXPR("(%s * %s)", x, y); return true;
      case IRON_OP_DIVIDE: EXPR("(%s / %s)", x, y); return true;
      case IRON_OP_REMAINDER:
        // iron_frem keeps f32 denormal dividends that -ftz would flush.
        if (is_f32ish(dt)) EXPR("iron_frem(%s, %s)", x, y);
        else EXPR("fmod(%s, %s)", x, y);
        return true;
      case IRON_OP_POWER: case IRON_OP_ATAN2:
        EXPR("%s%s(%s, %s)", iron_cuda_libm_name(k), F, x, y);
        return true;
      case IRON_OP_MAXIMUM: EXPR("iron_fmax(%s, %s)", x, y); return true;
      case IRON_OP_MINIMUM: EXPR("iron_fmin(%s, %s)", x, y); return true;
      case IRON_OP_COMPLEX:
        if (dt == IRON_DTYPE_F32) {
          EXPR("iron_mk(%s, %s, (iron_c64 *)0)", x, y);
          return true;
        }
        if (dt == IRON_DTYPE_F64) {
          EXPR("iron_mk(%s, %s, (iron_c128 *)0)", x, y);
          return true;
        }
        return false;
      default: return false;
    }
  }
  if (is_cplx(dt)) {
    switch (k) {
      case IRON_OP_ADD: EXPR("(%s + %s)", x, y); return true;
      case IRON_OP_SUBTRACT: EXPR("(%s - %s)", x, y); return true;
      case IRON_OP_MULTIPLY: EXPR("(%s * %s)", x, y); return true;
      case IRON_OP_DIVIDE: EXPR("(%s / %s)", x, y); return true;
      case IRON_OP_POWER: EXPR("iron_cpow(%s, %s)", x, y); return true;
      case IRON_OP_MAXIMUM: EXPR("iron_cmax(%s, %s)", x, y); return true;
      case IRON_OP_MINIMUM: EXPR("iron_cmin(%s, %s)", x, y); return true;
      default: return false;
    }
  }
  return false;
}

static iron_dtype_t binary_result(iron_op_kind_t k, iron_dtype_t dt) {
  if (k == IRON_OP_COMPLEX) {
    return dt == IRON_DTYPE_F32   ? IRON_DTYPE_C64
           : dt == IRON_DTYPE_F64 ? IRON_DTYPE_C128
                                  : IRON_DTYPE_INVALID;
  }
  return dt;
}

static const char *const kCmpOps[6] = {"==", "!=", ">=", ">", "<=", "<"};

static bool compare_expr(int dir, bool total, iron_dtype_t dt, const char *x,
                         const char *y, fz_expr_t *e) {
  if (dir < 0 || dir > 5) return false;
  const char *o = kCmpOps[dir];
  if (dt == IRON_DTYPE_PRED || is_int(dt)) {
    EXPR("(%s %s %s)", x, o, y);
    return true;
  }
  if (is_real_float(dt)) {
    if (!total) {
      EXPR("(%s %s %s)", x, o, y);
    } else if (dt == IRON_DTYPE_F16) {
      EXPR("(iron_tkey16(iron_st_f16(%s).bits) %s iron_tkey16(iron_st_f16(%s).bits))",
           x, o, y);
    } else if (dt == IRON_DTYPE_BF16) {
      EXPR("(iron_tkey16((uint16_t)(__float_as_uint(%s) >> 16)) %s "
           "iron_tkey16((uint16_t)(__float_as_uint(%s) >> 16)))",
           x, o, y);
    } else {
      EXPR("(iron_tkey(%s) %s iron_tkey(%s))", x, o, y);
    }
    return true;
  }
  if (is_cplx(dt) && !total) {
    static const char *const kC[6] = {NULL, NULL, "iron_cge", "iron_cgt",
                                      "iron_cle", "iron_clt"};
    if (dir <= 1) EXPR("(%s %s %s)", x, o, y);
    else EXPR("%s(%s, %s)", kC[dir], x, y);
    return true;
  }
  return false;
}

// convert from -> to (compute values).
static bool convert_expr(iron_dtype_t from, iron_dtype_t to, const char *x,
                         fz_expr_t *e) {
  bool src_int = from == IRON_DTYPE_PRED || is_int(from);
  bool src_flt = is_real_float(from);
  bool src_cpx = is_cplx(from);
  if (!src_int && !src_flt && !src_cpx) return false;
  // A real view of the source for conversions that drop the imaginary part.
  char re[256];
  snprintf(re, sizeof(re), src_cpx ? "%s.re" : "%s", x);
  const char *T = iron_cuda_ctype(to);
  if (to == IRON_DTYPE_PRED) {
    if (from == IRON_DTYPE_F16) {
      // f16/bf16 -> pred test the bits (a bf16 denormal is true).
      EXPR("((iron_st_f16(%s).bits & 0x7fffu) != 0)", x);
    } else if (from == IRON_DTYPE_BF16) {
      EXPR("((__float_as_uint(%s) & 0x7fff0000u) != 0)", x);
    } else {
      EXPR("(%s != 0)", re);
    }
    return true;
  }
  if (is_int(to)) {
    int bits = iron_dtype_bits(to);
    if (src_int) {
      EXPR("(%s)(%s)", T, x);
    } else if (iron_dtype_is_signed_int(to)) {
      EXPR("iron_f2s<%s>((double)(%s), %d)", T, re, bits);
    } else {
      EXPR("iron_f2u<%s>((double)(%s), %d)", T, re, bits);
    }
    return true;
  }
  if (is_half(to) || to == IRON_DTYPE_F32) {
    // -> f16/bf16 goes through f32 (double rounding, as XLA:CPU).
    EXPR("(float)(%s)", re);
    return true;
  }
  if (to == IRON_DTYPE_F64) {
    EXPR("(double)(%s)", re);
    return true;
  }
  if (is_cplx(to)) {
    const char *R = to == IRON_DTYPE_C64 ? "float" : "double";
    if (src_cpx) {
      EXPR("iron_mk((%s)%s.re, (%s)%s.im, (%s *)0)", R, x, R, x, T);
    } else {
      EXPR("iron_mk((%s)(%s), (%s)0, (%s *)0)", R, x, R, T);
    }
    return true;
  }
  return false;
}

// convert where `from` or `to` is a narrow dtype of nw_wide (values in
// their wide form), as the host's ew_narrow.c: through f64 (floats) or s64
// (ints) and the regular conversion on the other side; f8E8M0FNU <->
// f32/bf16 by bits.
static bool narrow_convert_expr(iron_dtype_t from, iron_dtype_t to,
                                const char *x, bool flush, fz_expr_t *e) {
  const nf_fmt_t *sf = narrow_float(from), *df = narrow_float(to);
  bool si = from == IRON_DTYPE_S4 || from == IRON_DTYPE_U4;
  bool di = to == IRON_DTYPE_S4 || to == IRON_DTYPE_U4;
  bool se = from == IRON_DTYPE_F8E8M0FNU, de = to == IRON_DTYPE_F8E8M0FNU;
  bool sn = is_nw(from), dn = is_nw(to);
  if ((!sn && !iron_cuda_ctype(from)) || (!dn && !iron_cuda_ctype(to))) {
    return false;
  }
  if (se && di) return false;  // not measured on XLA:CPU (host refuses)
  bool src_is_int = si || (!sn && (is_int(from) || from == IRON_DTYPE_PRED));
  bool via_int = src_is_int && !df && !de;
  char m[900];
  if (se) {
    // To f32/bf16/c64 the f32 bits as they are; to pred, 2^-127 (an f32
    // denormal) is false; else through f64.
    if (to == IRON_DTYPE_F32 || to == IRON_DTYPE_BF16) {
      EXPR("%s", x);
      return true;
    }
    if (to == IRON_DTYPE_C64) {
      EXPR("iron_mk(%s, 0.0f, (iron_c64 *)0)", x);
      return true;
    }
    if (to == IRON_DTYPE_PRED) {
      EXPR("(!(%s < 1.17549435e-38f))", x);
      return true;
    }
    snprintf(m, sizeof(m), "iron_e8m0_f64(%s)", x);
  } else if (sf) {
    if (sf->kind == 3 && (di || is_int(to))) {
      // XLA:CPU converts the largest f4E2M1FN magnitude to an integer as
      // if it were infinite (ew_narrow.c: sat_max_is_inf).
      double mx = ldexp(2.0 - ldexp(1.0, -sf->mbits),
                        (1 << sf->ebits) - 1 - sf->bias);
      snprintf(m, sizeof(m),
               "(fabsf(%s) == %.17gf ? (%s < 0 ? -IRON_INF : IRON_INF) : "
               "(double)%s)",
               x, mx, x, x);
    } else {
      snprintf(m, sizeof(m), "(double)%s", x);
    }
  } else if (si) {
    snprintf(m, sizeof(m), via_int ? "(long long)%s" : "(double)%s", x);
  } else {
    if (de && (from == IRON_DTYPE_F32 || from == IRON_DTYPE_BF16)) {
      EXPR("iron_e8m0_ld(iron_e8m0_st(%s))", x);
      return true;
    }
    char re[300];
    snprintf(re, sizeof(re), is_cplx(from) ? "%s.re" : "%s", x);
    if (via_int) {
      snprintf(m, sizeof(m), "(long long)%s", re);
    } else if (is_f32ish(from) && flush) {
      snprintf(m, sizeof(m), "(double)iron_daz(%s)", re);
    } else {
      snprintf(m, sizeof(m), "(double)(%s)", re);
    }
  }
  if (df) {
    EXPR("(float)iron_nf_decode(iron_nf_encode((double)(%s), %d, %d, %d, %d), "
         "%d, %d, %d, %d)",
         m, df->ebits, df->mbits, df->bias, df->kind, df->ebits, df->mbits,
         df->bias, df->kind);
    return true;
  }
  if (di) {
    char pat[1000];
    if (via_int) {
      snprintf(pat, sizeof(pat), "(int)((uint64_t)(%s) & 0xfu)", m);
    } else if (to == IRON_DTYPE_S4) {
      snprintf(pat, sizeof(pat),
               "(int)((uint64_t)iron_f2s<int64_t>(%s, 4) & 0xfu)", m);
    } else {
      snprintf(pat, sizeof(pat), "(int)(iron_f2u<uint64_t>(%s, 4) & 0xfu)",
               m);
    }
    if (to == IRON_DTYPE_S4) EXPR("(int8_t)iron_n4sext(%s)", pat);
    else EXPR("(uint8_t)(%s)", pat);
    return true;
  }
  if (de) {
    EXPR("iron_e8m0_ld(iron_e8m0_enc64((double)(%s)))", m);
    return true;
  }
  return convert_expr(via_int ? IRON_DTYPE_S64 : IRON_DTYPE_F64, to, m, e);
}

// ---------------------------------------------------------------------------
// Constants

static iron_status_t constant_literal(const iron_ir_op_t *op, char *buf,
                                      size_t cap) {
  const iron_ir_attr_t *a = iron_ir_op_attr(op, "value");
  const iron_ir_type_t *t = op->results[0].type;
  if (!a || a->kind != IRON_ATTR_DENSE || !t ||
      t->kind != IRON_TYPE_TENSOR) {
    return iron_ir_op_unimplemented(op, "in a CUDA fusion without a value");
  }
  int64_t n = type_count(t);
  size_t es = iron_dtype_size(t->dtype);
  if (!(a->dense.splat || n == 1) || a->dense.size < es) {
    return iron_ir_op_unimplemented(op,
                                    "in a CUDA fusion unless it is a splat");
  }
  const unsigned char *d = a->dense.data;
  iron_dtype_t dt = t->dtype;
  uint64_t u = 0;
  switch (dt) {
    case IRON_DTYPE_PRED:
      snprintf(buf, cap, "%s", d[0] ? "true" : "false");
      return IRON_OK;
    case IRON_DTYPE_F16: case IRON_DTYPE_BF16: {
      uint16_t h;
      memcpy(&h, d, 2);
      float f = dt == IRON_DTYPE_F16 ? iron_f16_to_f32(h) : iron_bf16_to_f32(h);
      uint32_t b;
      memcpy(&b, &f, 4);
      snprintf(buf, cap, "__uint_as_float(0x%08xu)", b);
      return IRON_OK;
    }
    case IRON_DTYPE_F32: {
      uint32_t b;
      memcpy(&b, d, 4);
      snprintf(buf, cap, "__uint_as_float(0x%08xu)", b);
      return IRON_OK;
    }
    case IRON_DTYPE_F64:
      memcpy(&u, d, 8);
      snprintf(buf, cap, "__longlong_as_double(0x%016llxLL)",
               (unsigned long long)u);
      return IRON_OK;
    case IRON_DTYPE_C64: {
      uint32_t r, i;
      memcpy(&r, d, 4);
      memcpy(&i, d + 4, 4);
      snprintf(buf, cap,
               "iron_mk(__uint_as_float(0x%08xu), __uint_as_float(0x%08xu), "
               "(iron_c64 *)0)",
               r, i);
      return IRON_OK;
    }
    case IRON_DTYPE_C128: {
      uint64_t r, i;
      memcpy(&r, d, 8);
      memcpy(&i, d + 8, 8);
      snprintf(buf, cap,
               "iron_mk(__longlong_as_double(0x%016llxLL), "
               "__longlong_as_double(0x%016llxLL), (iron_c128 *)0)",
               (unsigned long long)r, (unsigned long long)i);
      return IRON_OK;
    }
    default:
      if (!is_int(dt)) return iron_ir_op_unimplemented(
          op, "in a CUDA fusion for dtype %s", iron_dtype_name(dt));
      memcpy(&u, d, es);
      snprintf(buf, cap, "(%s)0x%llxULL", iron_cuda_ctype(dt),
               (unsigned long long)u);
      return IRON_OK;
  }
}

// ---------------------------------------------------------------------------
// Generator

// Vector loads pay off for memory-bound kernels; ops that compute much
// (transcendentals, complex arithmetic) gain little and would double the
// code NVRTC compiles, so they stay one element per thread.
static bool fusion_is_cheap(const iron_cuda_fusion_t *f) {
  for (uint32_t i = 0; i < f->num_ops; ++i) {
    const iron_ir_op_t *op = f->ops[i];
    for (uint32_t r = 0; r < op->num_results; ++r) {
      if (op->results[r].type && is_cplx(op->results[r].type->dtype)) {
        return false;
      }
    }
    switch (op->kind) {
      case IRON_OP_ADD: case IRON_OP_SUBTRACT: case IRON_OP_MULTIPLY:
      case IRON_OP_DIVIDE: case IRON_OP_MAXIMUM: case IRON_OP_MINIMUM:
      case IRON_OP_NEGATE: case IRON_OP_ABS: case IRON_OP_SIGN:
      case IRON_OP_AND: case IRON_OP_OR: case IRON_OP_XOR: case IRON_OP_NOT:
      case IRON_OP_SHIFT_LEFT: case IRON_OP_SHIFT_RIGHT_ARITHMETIC:
      case IRON_OP_SHIFT_RIGHT_LOGICAL: case IRON_OP_COMPARE:
      case IRON_OP_SELECT: case IRON_OP_CLAMP: case IRON_OP_CONVERT:
      case IRON_OP_CONSTANT: case IRON_OP_RESHAPE: case IRON_OP_SQRT:
      case IRON_OP_RSQRT: case IRON_OP_FLOOR: case IRON_OP_CEIL:
      case IRON_OP_ROUND_NEAREST_EVEN: case IRON_OP_ROUND_NEAREST_AFZ:
      case IRON_OP_EXPONENTIAL: case IRON_OP_LOGISTIC: case IRON_OP_IS_FINITE:
      case IRON_OP_REAL: case IRON_OP_IMAG:
        break;
      default:
        return false;
    }
  }
  for (uint32_t i = 0; i < f->num_inputs; ++i) {
    if (f->inputs[i]->type && is_cplx(f->inputs[i]->type->dtype)) return false;
  }
  return f->num_ops <= 16;
}

bool iron_cuda_vectorize_enabled(void) {
  const char *e = getenv("IRON_CUDA_VECTORIZE");
  return !(e && strcmp(e, "0") == 0);
}

bool iron_cuda_fusion_op_supported(iron_op_kind_t kind) {
  iron_op_class_t c = iron_op_kind_class(kind);
  if (c == IRON_OP_CLASS_UNARY || c == IRON_OP_CLASS_BINARY) return true;
  switch (kind) {
    case IRON_OP_COMPARE: case IRON_OP_SELECT: case IRON_OP_CLAMP:
    case IRON_OP_CONVERT: case IRON_OP_CONSTANT:
    case IRON_OP_BROADCAST_IN_DIM: case IRON_OP_IOTA: case IRON_OP_RESHAPE:
    case IRON_OP_SLICE: case IRON_OP_TRANSPOSE: case IRON_OP_DYNAMIC_SLICE:
      return true;
    default:
      return false;
  }
}

// slice, transpose and dynamic_slice read their operand (a fusion input)
// at other coordinates: indexed loads (gen_indexed_load).
static bool is_indexed_load(iron_op_kind_t k) {
  return k == IRON_OP_SLICE || k == IRON_OP_TRANSPOSE ||
         k == IRON_OP_DYNAMIC_SLICE;
}

// The argument text of operand value `v` for op kind k (flush wrapper).
static iron_status_t arg_text(fz_gen_t *g, const iron_ir_op_t *op,
                              uint32_t i, char *buf, size_t cap) {
  const iron_ir_value_t *v = op->operands[i];
  const char *n = fz_name(g, v);
  if (!n) {
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: operand %u is neither a fusion input nor defined "
                    "earlier in the fusion",
                    op->name, i);
  }
  iron_dtype_t dt = cdt(v->type->dtype);
  bool flush = g->flush && is_real_float(dt) && !op_keeps_denormals(op->kind);
  // remainder keeps a denormal dividend but reads a denormal divisor as
  // zero (XLA:CPU: rem(d, 1) = d, rem(1, d) = NaN, for f32 and f64 alike);
  // -ftz does that for f32, f64 needs the explicit flush.
  if (op->kind == IRON_OP_REMAINDER && i == 1)
    flush = g->flush && is_real_float(dt);
  if (op->kind == IRON_OP_CONVERT) {
    // XLA:CPU converts between f16/bf16/f32 with integer code (denormals
    // kept); f32 <-> f64 and float -> int/pred go through the FPU (flushed).
    iron_dtype_t to = op->results[0].type->dtype;
    const char *a = iron_cuda_compute_ctype(dt), *b = iron_cuda_compute_ctype(to);
    flush = flush && !(a && b && strcmp(a, b) == 0);
    // Converts from/to narrow dtypes flush as they need (narrow_convert).
    if (is_nw(v->type->dtype) || is_nw(to)) flush = false;
  }
  snprintf(buf, cap, flush ? "iron_daz(%s)" : "%s", n);
  return IRON_OK;
}

static bool needs_coords(const iron_cuda_fusion_t *f) {
  for (uint32_t i = 0; i < f->num_ops; ++i) {
    iron_op_kind_t k = f->ops[i]->kind;
    if (k == IRON_OP_BROADCAST_IN_DIM || k == IRON_OP_IOTA ||
        is_indexed_load(k) || k == IRON_OP_DYNAMIC_UPDATE_SLICE)
      return true;
  }
  return false;
}

// Declares `var` = expression with the result's rounding/flush.
static void emit_def_plain(fz_gen_t *g, const iron_ir_op_t *op,
                           iron_dtype_t out, const char *var,
                           const char *expr);

// A narrow result: the wide op's value (as the wide dtype's kernels round
// it), then rounded to the narrow dtype (ops that only move values skip
// that: their values are narrow already).
static void emit_def(fz_gen_t *g, const iron_ir_op_t *op, iron_dtype_t out,
                     const char *var, const char *expr) {
  iron_op_kind_t k = op->kind;
  if (!is_nw(out)) {
    emit_def_plain(g, op, out, var, expr);
    return;
  }
  if (k == IRON_OP_SELECT || k == IRON_OP_RESHAPE ||
      k == IRON_OP_BROADCAST_IN_DIM || k == IRON_OP_CONVERT) {
    iron_cuda_src_printf(g->s, "    const %s %s = %s;\n", cp_ctype(out), var,
                         expr);
    return;
  }
  char w[32], enc[256], dec[512];
  snprintf(w, sizeof(w), "%sw", var);
  emit_def_plain(g, op, nw_wide(out), w, expr);
  nw_encode(out, w, enc, sizeof(enc));
  nw_decode(out, enc, dec, sizeof(dec));
  iron_cuda_src_printf(g->s, "    const %s %s = %s;\n", cp_ctype(out), var,
                       dec);
}

static void emit_def_plain(fz_gen_t *g, const iron_ir_op_t *op,
                           iron_dtype_t out, const char *var,
                           const char *expr) {
  const char *ct = iron_cuda_compute_ctype(out);
  bool flush_out = g->flush && is_real_float(out) &&
                   !op_keeps_denormals(op->kind) &&
                   op->kind != IRON_OP_CONSTANT && op->kind != IRON_OP_IOTA &&
                   op->kind != IRON_OP_BROADCAST_IN_DIM &&
                   op->kind != IRON_OP_CONVERT;
  if (out == IRON_DTYPE_F16) {
    iron_cuda_src_printf(g->s, "    const float %s = iron_rnd_f16(%s);\n", var,
                         expr);
  } else if (out == IRON_DTYPE_BF16) {
    iron_cuda_src_printf(g->s, "    const float %s = iron_rnd_bf16(%s%s%s);\n",
                         var, flush_out ? "iron_daz(" : "", expr,
                         flush_out ? ")" : "");
  } else if (flush_out) {
    iron_cuda_src_printf(g->s, "    const %s %s = iron_daz(%s);\n", ct, var,
                         expr);
  } else {
    iron_cuda_src_printf(g->s, "    const %s %s = %s;\n", ct, var, expr);
  }
}

static iron_status_t check_same_operand_dtypes(const iron_ir_op_t *op,
                                               uint32_t first, uint32_t n) {
  for (uint32_t i = first + 1; i < first + n; ++i) {
    if (op->operands[i]->type->dtype != op->operands[first]->type->dtype) {
      return IRON_ERR(INVALID_ARGUMENT, "%s: operand dtypes differ (%s, %s)",
                      op->name,
                      iron_dtype_name(op->operands[first]->type->dtype),
                      iron_dtype_name(op->operands[i]->type->dtype));
    }
  }
  return IRON_OK;
}

// Names the coordinate of each dim of `t` in the group's coordinates, over
// the non-unit dims (size-1 dims of t are "0"); false when t's non-unit
// dims are not the group's (and t has more than one element).
static bool map_coords(const fz_gen_t *g, const iron_ir_type_t *t,
                       char cn[][16]) {
  // One element (a start index, x[i] of a vector, computed for the group
  // by every thread) is at 0 whatever the group's shape.
  if (type_count(t) == 1) {
    for (int32_t d = 0; d < t->rank; ++d) snprintf(cn[d], 16, "0");
    return true;
  }
  int32_t j = 0;
  for (int32_t d = 0; d < t->rank; ++d) {
    if (t->dims[d] == 1) {
      snprintf(cn[d], 16, "0");
      continue;
    }
    while (j < g->rank && g->dims[j] == 1) ++j;
    if (j == g->rank || g->dims[j] != t->dims[d]) return false;
    snprintf(cn[d], 16, "c%d", j++);
  }
  while (j < g->rank && g->dims[j] == 1) ++j;
  return j == g->rank;
}

// The coordinates of a member of another shape than the group but as many
// elements (a load or iota that a reshape took to the group's shape): its
// own dims, from the element's linear index. Declares `<pre>_c<d>`.
static void own_coords(fz_gen_t *g, const iron_ir_type_t *t, const char *pre,
                       char cn[][16]) {
  iron_cuda_src_printf(g->s, "    %s %s_r = (%s)i;\n", g->idx, pre, g->idx);
  for (int32_t d = t->rank - 1; d >= 0; --d) {
    snprintf(cn[d], 16, "%s_c%d", pre, d);
    iron_cuda_src_printf(g->s, "    const %s %s = %s_r %% (%s)%lld;\n",
                         g->idx, cn[d], pre, g->idx, (long long)t->dims[d]);
    if (d)
      iron_cuda_src_printf(g->s, "    %s_r /= (%s)%lld;\n", pre, g->idx,
                           (long long)t->dims[d]);
  }
}

// Names the coordinates of member result type t: the group's (map_coords),
// or its own when only the element count is the group's.
static bool member_coords(fz_gen_t *g, const iron_ir_type_t *t,
                          const char *pre, char cn[][16]) {
  if (map_coords(g, t, cn)) return true;
  if (type_count(t) != g->count) return false;
  own_coords(g, t, pre, cn);
  return true;
}

// Declares `<pre>_s<d>` = start index d of `op` (operands first..), clamped
// so that a `part` slice fits in `full` (XLA's rule; u64 values past
// INT64_MAX clamp high).
static void emit_clamped_starts(fz_gen_t *g, const iron_ir_op_t *op,
                                uint32_t first, const char *pre,
                                const iron_ir_type_t *full,
                                const int64_t *part) {
  for (int32_t d = 0; d < full->rank; ++d) {
    const iron_ir_value_t *sv = op->operands[first + (uint32_t)d];
    char var[40];
    snprintf(var, sizeof(var), "%s_s%d", pre, d);
    iron_cuda_src_clamped_start(g->s, "    ", var, fz_name(g, sv),
                                sv->type->dtype, full->dims[d] - part[d]);
  }
}

// slice, transpose or dynamic_slice of a fusion input: one load at the
// element's coordinates mapped into the operand. The operand has another
// shape than the group (iron_cuda_fusable), so fuse.c never computes it
// inside the fusion; a computed operand is refused.
static iron_status_t gen_indexed_load(fz_gen_t *g, const iron_ir_op_t *op,
                                      uint32_t index, const char *var) {
  const iron_ir_value_t *src = op->operands[0];
  const iron_ir_type_t *st = src->type, *rt = op->results[0].type;
  iron_op_kind_t k = op->kind;
  if (st->dtype != rt->dtype || st->rank != rt->rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: operand and result differ in "
                    "dtype or rank", op->name);
  // The load's coordinates: the group's, over the non-unit dims (fuse.c
  // lets a load to [1, A, B] join a group of shape [A, B] through a
  // reshape); size-1 dims are 0. A load that another reshape took to the
  // group's shape computes its own.
  char cn[IRON_MAX_RANK][16];
  if (!member_coords(g, rt, var, cn))
    return iron_ir_op_unimplemented(op, "in a CUDA fusion of another shape");
  int input = -1;
  for (uint32_t i = 0; i < g->f->num_inputs; ++i)
    if (g->f->inputs[i] == src) input = (int)i;
  if (input < 0)
    return iron_ir_op_unimplemented(op, "in a CUDA fusion of a computed "
                                        "value");
  const int32_t r = st->rank;
  int64_t istr[IRON_MAX_RANK];
  int64_t s = 1;
  for (int32_t d = r - 1; d >= 0; --d) {
    istr[d] = s;
    s *= st->dims[d];
  }
  int64_t a0[IRON_MAX_RANK], a1[IRON_MAX_RANK], a2[IRON_MAX_RANK];
  uint32_t n0 = 0, n1 = 0, n2 = 0;
  if (k == IRON_OP_SLICE) {
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_ir_op_i64_list(op, "start_indices", a0, IRON_MAX_RANK, &n0));
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_ir_op_i64_list(op, "strides", a2, IRON_MAX_RANK, &n2));
    if ((int32_t)n0 != r || (int32_t)n2 != r)
      return IRON_ERR(INVALID_ARGUMENT, "%s: attribute lengths", op->name);
  } else if (k == IRON_OP_TRANSPOSE) {
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_ir_op_i64_list(op, "permutation", a1, IRON_MAX_RANK, &n1));
    if ((int32_t)n1 != r)
      return IRON_ERR(INVALID_ARGUMENT, "%s: permutation length", op->name);
    for (int32_t d = 0; d < r; ++d)
      if (a1[d] < 0 || a1[d] >= r)
        return IRON_ERR(INVALID_ARGUMENT, "%s: bad permutation", op->name);
  } else {
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_ir_op_i64_list(op, "slice_sizes", a0, IRON_MAX_RANK, &n0));
    if ((int32_t)n0 != r || op->num_operands != 1 + (uint32_t)r)
      return IRON_ERR(INVALID_ARGUMENT, "%s: slice_sizes or start count",
                      op->name);
    for (int32_t d = 0; d < r; ++d) {
      const iron_ir_value_t *sv = op->operands[1 + d];
      if (!fz_name(g, sv) || sv->type->rank != 0 || !is_int(sv->type->dtype) ||
          a0[d] < 0 || a0[d] > st->dims[d])
        return iron_ir_op_unimplemented(op, "in a CUDA fusion with start "
                                            "index %d of this kind", d);
    }
  }
  iron_cuda_src_t ix;
  iron_cuda_src_init(&ix);
  iron_cuda_src_printf(&ix, "0LL");
  if (k == IRON_OP_SLICE) {
    for (int32_t d = 0; d < r; ++d)
      iron_cuda_src_printf(&ix, " + ((long long)%s * %lldLL + %lldLL) * %lldLL",
                           cn[d], (long long)a2[d], (long long)a0[d],
                           (long long)istr[d]);
  } else if (k == IRON_OP_TRANSPOSE) {
    for (int32_t d = 0; d < r; ++d)
      iron_cuda_src_printf(&ix, " + (long long)%s * %lldLL", cn[d],
                           (long long)istr[a1[d]]);
  } else {
    emit_clamped_starts(g, op, 1, var, st, a0);
    for (int32_t d = 0; d < r; ++d)
      iron_cuda_src_printf(&ix, " + (%s_s%d + (long long)%s) * %lldLL", var,
                           d, cn[d], (long long)istr[d]);
  }
  char *ixs = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_src_finish(&ix, &ixs));
  size_t cap = strlen(ixs) + 32;
  char *lv = malloc(cap);
  if (!lv) {
    free(ixs);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (fusion)");
  }
  snprintf(lv, cap, "in%d[%s]", input, ixs);
  free(ixs);
  emit_load(g->s, rt->dtype, var, lv);
  free(lv);
  return fz_add(g, &op->results[0], "v%u", index);
}

static iron_status_t gen_op(fz_gen_t *g, const iron_ir_op_t *op,
                            uint32_t index) {
  iron_op_kind_t k = op->kind;
  if (!iron_cuda_fusion_op_supported(k)) {
    return iron_ir_op_unimplemented(op, "inside a CUDA element-wise kernel");
  }
  if (op->num_results != 1 || !op->results[0].type ||
      op->results[0].type->kind != IRON_TYPE_TENSOR ||
      !iron_ir_type_is_static(op->results[0].type)) {
    return iron_ir_op_unimplemented(op, "on the CUDA device for this type");
  }
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (!t || t->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t)) {
      return iron_ir_op_unimplemented(op, "on the CUDA device for this type");
    }
  }
  const iron_ir_type_t *rt = op->results[0].type;
  iron_dtype_t out = rt->dtype;
  int64_t rc = type_count(rt);
  if (rc != g->count && rc != 1) {
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: %lld elements in a fusion of %lld elements", op->name,
                    (long long)rc, (long long)g->count);
  }
  if (!st_ctype(out)) return refuse_dtype(g, op, out);
  char var[24];
  snprintf(var, sizeof(var), "v%u", index);
  if (is_indexed_load(k)) return gen_indexed_load(g, op, index, var);
  char a[3][256];
  fz_expr_t ex;
  fz_expr_t *e = &ex;
  iron_op_class_t cls = iron_op_kind_class(k);
  uint32_t arity = cls == IRON_OP_CLASS_UNARY    ? 1
                   : cls == IRON_OP_CLASS_BINARY ? 2
                   : k == IRON_OP_COMPARE        ? 2
                   : (k == IRON_OP_SELECT || k == IRON_OP_CLAMP) ? 3
                   : (k == IRON_OP_CONVERT || k == IRON_OP_RESHAPE) ? 1
                                                 : 0;
  if (k != IRON_OP_BROADCAST_IN_DIM && op->num_operands != arity) {
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected %u operands, got %u",
                    op->name, arity, op->num_operands);
  }
  for (uint32_t i = 0; i < op->num_operands && i < 3; ++i) {
    if (k == IRON_OP_BROADCAST_IN_DIM) break;
    int64_t c = type_count(op->operands[i]->type);
    if (c != rc && c != 1) {
      return IRON_ERR(INVALID_ARGUMENT,
                      "%s: operand %u has %lld elements, result %lld",
                      op->name, i, (long long)c, (long long)rc);
    }
    IRON_RETURN_IF_ERROR_PLAIN(arg_text(g, op, i, a[i], sizeof(a[i])));
  }
  iron_dtype_t in = op->num_operands ? op->operands[0]->type->dtype : out;
  // Narrow dtypes run the wide dtype's expression (see nw_wide).
  iron_dtype_t inw = cdt(in);
  bool n4 = in == IRON_DTYPE_S4 || in == IRON_DTYPE_U4;
  if (cls == IRON_OP_CLASS_UNARY) {
    bool ok;
    if (n4 && k == IRON_OP_CLZ) {
      EXPR("iron_n4clz((int)%s)", a[0]);
      ok = out == in;
    } else {
      iron_dtype_t r = unary_result(k, inw);
      ok = st_ctype(in) && unary_expr(k, inw, a[0], e) &&
           (r == inw ? in : r) == out;
    }
    if (!ok) return refuse_dtype(g, op, in);
  } else if (cls == IRON_OP_CLASS_BINARY) {
    IRON_RETURN_IF_ERROR_PLAIN(check_same_operand_dtypes(op, 0, 2));
    bool ok;
    if (n4 && (k == IRON_OP_SHIFT_RIGHT_LOGICAL ||
               k == IRON_OP_SHIFT_RIGHT_ARITHMETIC)) {
      EXPR("iron_n4shr%s((int)%s, (int)%s)",
           k == IRON_OP_SHIFT_RIGHT_LOGICAL ? "l" : "a", a[0], a[1]);
      ok = out == in;
    } else {
      iron_dtype_t r = binary_result(k, inw);
      ok = st_ctype(in) && binary_expr(k, inw, a[0], a[1], e) &&
           (r == inw ? in : r) == out;
    }
    if (!ok) return refuse_dtype(g, op, in);
  } else if (k == IRON_OP_COMPARE) {
    IRON_RETURN_IF_ERROR_PLAIN(check_same_operand_dtypes(op, 0, 2));
    if (out != IRON_DTYPE_PRED) {
      return IRON_ERR(INVALID_ARGUMENT, "%s: result must be i1", op->name);
    }
    int32_t dir = iron_ir_op_enum(op, "comparison_direction", -1);
    int32_t type = iron_ir_op_enum(op, "compare_type", IRON_CMP_TYPE_NOTYPE);
    bool total = type == IRON_CMP_TYPE_TOTALORDER && is_real_float(inw);
    // TOTALORDER compares bits: no flush of its operands.
    if (total) {
      snprintf(a[0], sizeof(a[0]), "%s", fz_name(g, op->operands[0]));
      snprintf(a[1], sizeof(a[1]), "%s", fz_name(g, op->operands[1]));
    }
    if (!st_ctype(in) || !compare_expr(dir, total, inw, a[0], a[1], e)) {
      return iron_ir_op_unimplemented(
          op, "on the CUDA device for dtype %s, direction %d%s",
          iron_dtype_name(in), (int)dir, total ? " (TOTALORDER)" : "");
    }
  } else if (k == IRON_OP_SELECT) {
    if (op->operands[0]->type->dtype != IRON_DTYPE_PRED ||
        op->operands[1]->type->dtype != out ||
        op->operands[2]->type->dtype != out) {
      return IRON_ERR(INVALID_ARGUMENT, "%s: expects (i1, T, T) -> T",
                      op->name);
    }
    EXPR("(%s ? %s : %s)", a[0], a[1], a[2]);
  } else if (k == IRON_OP_CLAMP) {
    IRON_RETURN_IF_ERROR_PLAIN(check_same_operand_dtypes(op, 0, 3));
    in = op->operands[1]->type->dtype;
    inw = cdt(in);
    if (in != out || !st_ctype(in)) return refuse_dtype(g, op, in);
    if (is_int(inw)) {
      EXPR("iron_imin(iron_imax(%s, %s), %s)", a[1], a[0], a[2]);
    } else if (is_real_float(inw)) {
      EXPR("iron_fmin(iron_fmax(%s, %s), %s)", a[1], a[0], a[2]);
    } else {
      // Complex clamp: XLA:CPU's results fit no composition (host refuses).
      return refuse_dtype(g, op, in);
    }
  } else if (k == IRON_OP_CONVERT) {
    bool ok = is_nw(in) || is_nw(out)
                  ? narrow_convert_expr(in, out, a[0], g->flush, e)
                  : iron_cuda_ctype(in) && convert_expr(in, out, a[0], e);
    if (!ok) {
      return iron_ir_op_unimplemented(op, "on the CUDA device for dtype %s -> %s",
                                      iron_dtype_name(in),
                                      iron_dtype_name(out));
    }
  } else if (k == IRON_OP_RESHAPE) {
    // Values are indexed by the linear element index: a reshape of equal
    // count is the same value.
    if (type_count(op->operands[0]->type) != rc || in != out) {
      return IRON_ERR(INVALID_ARGUMENT, "%s: element counts or dtypes differ",
                      op->name);
    }
    EXPR("%s", a[0]);
  } else if (k == IRON_OP_CONSTANT) {
    IRON_RETURN_IF_ERROR_PLAIN(constant_literal(op, e->text, sizeof(e->text)));
  } else if (k == IRON_OP_IOTA) {
    int64_t dim = 0;
    uint32_t n = 0;
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_ir_op_i64_list(op, "iota_dimension", &dim, 1, &n));
    // The coordinate along dim: the group's (size-1 dims aside; an iota of
    // one element is 0 in any group of one element).
    char cn[IRON_MAX_RANK][16];
    if (n != 1 || dim < 0 || dim >= rt->rank ||
        !member_coords(g, rt, var, cn)) {
      return iron_ir_op_unimplemented(op, "in a CUDA fusion of another shape");
    }
    const char *c = cn[dim];
    if (out == IRON_DTYPE_PRED) {
      EXPR("(%s != 0)", c);
    } else if (is_cplx(out)) {
      const char *R = out == IRON_DTYPE_C64 ? "float" : "double";
      EXPR("iron_mk((%s)%s, (%s)0, (%s *)0)", R, c, R, iron_cuda_ctype(out));
    } else {
      EXPR("(%s)%s", cp_ctype(out), c);
    }
  } else if (k == IRON_OP_BROADCAST_IN_DIM) {
    if (op->num_operands != 1) {
      return IRON_ERR(INVALID_ARGUMENT, "%s: expected 1 operand", op->name);
    }
    const iron_ir_value_t *src = op->operands[0];
    const iron_ir_type_t *st = src->type;
    if (st->dtype != out) {
      return IRON_ERR(INVALID_ARGUMENT, "%s: dtype changes", op->name);
    }
    int64_t bd[IRON_MAX_RANK];
    uint32_t nb = 0;
    IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(
        op, "broadcast_dimensions", bd, IRON_MAX_RANK, &nb));
    if ((int32_t)nb != st->rank) {
      return IRON_ERR(INVALID_ARGUMENT, "%s: broadcast_dimensions length",
                      op->name);
    }
    for (uint32_t d = 0; d < nb; ++d) {
      if (bd[d] < 0 || bd[d] >= rt->rank ||
          (st->dims[d] != 1 && st->dims[d] != rt->dims[bd[d]])) {
        return IRON_ERR(INVALID_ARGUMENT, "%s: bad broadcast dimension %u",
                        op->name, d);
      }
    }
    const char *sn = fz_name(g, src);
    if (!sn) {
      return IRON_ERR(INVALID_ARGUMENT, "%s: operand not in the fusion",
                      op->name);
    }
    int64_t sc = type_count(st);
    // An input read through the broadcast: an indexed load.
    int input = -1;
    for (uint32_t i = 0; i < g->f->num_inputs; ++i) {
      if (g->f->inputs[i] == src) input = (int)i;
    }
    bool in_order = sc == rc;  // only size-1 dims added: same linear order
    for (uint32_t d = 1; in_order && d < nb; ++d) in_order = bd[d] > bd[d - 1];
    if (sc != 1 && in_order) {
      if (input >= 0) {
        char lv[64];
        snprintf(lv, sizeof(lv), "in%d[i]", input);
        emit_load(g->s, out, var, lv);
        return fz_add(g, &op->results[0], "v%u", index);
      }
      EXPR("%s", sn);
    } else if (sc == 1) {
      if (input >= 0) {
        char lv[64];
        snprintf(lv, sizeof(lv), "in%d[0]", input);
        emit_load(g->s, out, var, lv);
        return fz_add(g, &op->results[0], "v%u", index);
      }
      EXPR("%s", sn);
    } else {
      if (!dims_equal(g, rt)) {
        return iron_ir_op_unimplemented(op,
                                        "in a CUDA fusion of another shape");
      }
      if (input < 0) {
        // A computed value broadcast again: only the identity works
        // without recomputing it at other indices.
        bool identity = st->rank == rt->rank;
        for (uint32_t d = 0; identity && d < nb; ++d) {
          identity = bd[d] == (int64_t)d && st->dims[d] == rt->dims[d];
        }
        if (!identity) {
          return iron_ir_op_unimplemented(
              op, "in a CUDA fusion of a computed value");
        }
        EXPR("%s", sn);
      } else {
        iron_cuda_src_t ix;
        iron_cuda_src_init(&ix);
        int64_t stride = 1;
        bool any = false;
        for (int32_t d = st->rank - 1; d >= 0; --d) {
          if (st->dims[d] != 1) {
            iron_cuda_src_printf(&ix, "%sc%lld * (%s)%lld", any ? " + " : "",
                                 (long long)bd[d], g->idx, (long long)stride);
            any = true;
          }
          stride *= st->dims[d];
        }
        char *ixs = NULL;
        if (!any) iron_cuda_src_printf(&ix, "0");
        IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_src_finish(&ix, &ixs));
        char lv[1200];
        snprintf(lv, sizeof(lv), "in%d[%s]", input, ixs);
        free(ixs);
        emit_load(g->s, out, var, lv);
        return fz_add(g, &op->results[0], "v%u", index);
      }
    }
  }
  emit_def(g, op, out, var, e->text);
  return fz_add(g, &op->results[0], "v%u", index);
}

// Is input i read other than through broadcast_in_dim?
static bool input_read_directly(const iron_cuda_fusion_t *f, uint32_t i) {
  const iron_ir_value_t *v = f->inputs[i];
  for (uint32_t j = 0; j < f->num_outputs; ++j) {
    if (f->outputs[j] == v) return true;
  }
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *op = f->ops[o];
    if (op->kind == IRON_OP_BROADCAST_IN_DIM) continue;
    // The operand of an indexed load is read at its own indices (a
    // dynamic_slice's start indices are read directly).
    uint32_t first = is_indexed_load(op->kind)                      ? 1
                     : op->kind == IRON_OP_DYNAMIC_UPDATE_SLICE ? 2
                                                                 : 0;
    for (uint32_t k = first; k < op->num_operands; ++k) {
      if (op->operands[k] == v) return true;
    }
  }
  return false;
}

// The dynamic_update_slice op whose result output j is, or NULL.
static const iron_ir_op_t *dus_root(const iron_cuda_fusion_t *f, uint32_t j) {
  const iron_ir_op_t *d = f->outputs[j]->def_op;
  return d && d->kind == IRON_OP_DYNAMIC_UPDATE_SLICE ? d : NULL;
}

static bool is_member(const iron_cuda_fusion_t *f, const iron_ir_op_t *op) {
  for (uint32_t o = 0; op && o < f->num_ops; ++o)
    if (f->ops[o] == op) return true;
  return false;
}

// Whether a and b have the same dims once their size-1 dims are dropped.
static bool same_dims_but_units(const iron_ir_type_t *a,
                                const iron_ir_type_t *b) {
  int32_t i = 0, j = 0;
  for (;;) {
    while (i < a->rank && a->dims[i] == 1) ++i;
    while (j < b->rank && b->dims[j] == 1) ++j;
    if (i == a->rank || j == b->rank) return i == a->rank && j == b->rank;
    if (a->dims[i++] != b->dims[j++]) return false;
  }
}

// A member that only adds or drops size-1 dims of a value the fusion
// computes (a reshape or an in-order broadcast_in_dim) to feed a
// dynamic_update_slice root's update: fuse.c lets such an op into a group
// of another shape.
static bool is_unit_reshape_of_member(const iron_cuda_fusion_t *f,
                                      const iron_ir_op_t *op) {
  if ((op->kind != IRON_OP_RESHAPE && op->kind != IRON_OP_BROADCAST_IN_DIM) ||
      op->num_operands != 1 || op->num_results != 1 ||
      !is_member(f, op->operands[0]->def_op))
    return false;
  bool feeds_root = false;
  for (uint32_t o = 0; o < f->num_ops && !feeds_root; ++o)
    feeds_root = f->ops[o]->kind == IRON_OP_DYNAMIC_UPDATE_SLICE &&
                 f->ops[o]->num_operands > 1 &&
                 f->ops[o]->operands[1] == &op->results[0];
  if (!feeds_root) return false;
  if (op->kind == IRON_OP_BROADCAST_IN_DIM)
    return iron_ir_broadcast_is_reshape(op);
  return same_dims_but_units(op->operands[0]->type, op->results[0].type);
}

// The shape the fusion iterates over: the group's shape (fuse.c), which
// every member's result has except dynamic_update_slice roots (the
// operand's shape), unit reshapes of member values feeding a root's update,
// indexed loads and iotas that a reshape took to the group's shape (as
// many elements) and one-element values computed for the group (start
// indices: every thread computes them). So: the first other member's
// result of more than one element (a member computed from one of the
// group's values and reshaped, which a hand-built fusion may hold, is
// read by linear index whatever its dims); failing that, a root's update (through
// such a unit reshape: the value it reshapes), a load's result, or any
// other member's (a group of one element).
// An iota whose value a reshape member takes to another shape.
static bool is_reshaped_iota(const iron_cuda_fusion_t *f,
                             const iron_ir_op_t *op) {
  if (op->kind != IRON_OP_IOTA || op->num_results != 1) return false;
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *u = f->ops[o];
    if ((u->kind == IRON_OP_RESHAPE || u->kind == IRON_OP_BROADCAST_IN_DIM) &&
        u->num_operands == 1 && u->operands[0] == &op->results[0] &&
        !iron_ir_type_equal(u->results[0].type, op->results[0].type))
      return true;
  }
  return false;
}

static bool is_space_member(const iron_cuda_fusion_t *f,
                            const iron_ir_op_t *op) {
  return op->kind != IRON_OP_DYNAMIC_UPDATE_SLICE &&
         !is_indexed_load(op->kind) && !is_unit_reshape_of_member(f, op) &&
         !is_reshaped_iota(f, op) && op->num_results == 1;
}

// The iteration space: the shape of the members that are not one-element
// feeds (fuse.c's scalar groups join fusions of any shape, an empty one
// too: a zero-element space computes nothing, whatever its scalars).
static const iron_ir_type_t *fusion_space(const iron_cuda_fusion_t *f) {
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *op = f->ops[o];
    if (is_space_member(f, op) && type_count(op->results[0].type) != 1)
      return op->results[0].type;
  }
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *d = f->ops[o];
    if (d->kind != IRON_OP_DYNAMIC_UPDATE_SLICE || d->num_operands < 2)
      continue;
    const iron_ir_value_t *u = d->operands[1];
    if (u->def_op && is_member(f, u->def_op) &&
        is_unit_reshape_of_member(f, u->def_op))
      return u->def_op->operands[0]->type;
    return u->type;
  }
  for (uint32_t o = 0; o < f->num_ops; ++o)
    if (is_indexed_load(f->ops[o]->kind)) return f->ops[o]->results[0].type;
  for (uint32_t o = 0; o < f->num_ops; ++o)
    if (is_space_member(f, f->ops[o])) return f->ops[o]->results[0].type;
  return f->num_outputs ? f->outputs[0]->type : NULL;
}

iron_status_t iron_cuda_codegen_fusion(const iron_cuda_fusion_t *f,
                                       char **out_source, char **out_name) {
  const iron_ir_op_t *owner = f->owner ? f->owner
                              : f->num_ops ? f->ops[0]
                                           : NULL;
  if (f->num_outputs == 0) {
    return IRON_ERR(INVALID_ARGUMENT, "CUDA fusion without outputs");
  }
  const iron_ir_type_t *t0 = fusion_space(f);
  if (!t0 || t0->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t0)) {
    return owner ? iron_ir_op_unimplemented(owner, "on the CUDA device for "
                                                   "a non-static result")
                 : IRON_ERR(UNIMPLEMENTED, "non-static fusion result");
  }
  fz_gen_t g;
  memset(&g, 0, sizeof(g));
  g.f = f;
  g.rank = t0->rank;
  memcpy(g.dims, t0->dims, sizeof(int64_t) * (size_t)t0->rank);
  g.count = type_count(t0);
  if (g.count < 0) {
    return IRON_ERR(INVALID_ARGUMENT, "CUDA fusion: result too large");
  }
  g.idx = g.count <= ((int64_t)1 << 30) ? "int" : "long long";
  g.flush = iron_cuda_flush_denormals();
  iron_cuda_src_t body;
  iron_cuda_src_init(&body);
  g.s = &body;
  iron_status_t st = IRON_OK;

  // Types first (refusals), then the vector width: kernels without
  // coordinates (no broadcast/iota) move V elements per thread with one
  // vector load/store per operand (16 bytes for the widest element).
  size_t widest = 1;
  for (uint32_t i = 0; i < f->num_inputs; ++i) {
    const iron_ir_type_t *t = f->inputs[i]->type;
    const char *ct = t ? st_ctype(t->dtype) : NULL;
    if (!ct || t->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t)) {
      st = owner ? iron_ir_op_unimplemented(
                       owner, "on the CUDA device for input dtype %s",
                       t ? iron_dtype_name(t->dtype) : "?")
                 : IRON_ERR(UNIMPLEMENTED, "CUDA fusion input type");
      goto fail;
    }
    if (type_count(t) == g.count && iron_dtype_size(t->dtype) > widest)
      widest = iron_dtype_size(t->dtype);
  }
  for (uint32_t j = 0; j < f->num_outputs; ++j) {
    const iron_ir_type_t *t = f->outputs[j]->type;
    const char *ct = t ? st_ctype(t->dtype) : NULL;
    if (!ct) {
      st = owner ? iron_ir_op_unimplemented(
                       owner, "on the CUDA device for result dtype %s",
                       t ? iron_dtype_name(t->dtype) : "?")
                 : IRON_ERR(UNIMPLEMENTED, "CUDA fusion output type");
      goto fail;
    }
    if (type_count(t) != g.count && !dus_root(f, j)) {
      st = IRON_ERR(INVALID_ARGUMENT,
                    "CUDA fusion: outputs have different element counts");
      goto fail;
    }
    if (iron_dtype_size(t->dtype) > widest) widest = iron_dtype_size(t->dtype);
  }
  int vw = (int)(16 / widest);
  if (vw > 8) vw = 8;
  bool any_narrow = false;
  for (uint32_t i = 0; i < f->num_inputs; ++i)
    any_narrow = any_narrow || is_nw(f->inputs[i]->type->dtype);
  for (uint32_t j = 0; j < f->num_outputs; ++j)
    any_narrow = any_narrow || is_nw(f->outputs[j]->type->dtype);
  bool vec = vw >= 2 && !needs_coords(f) && g.count >= 4 * vw &&
             fusion_is_cheap(f) && iron_cuda_vectorize_enabled() &&
             !any_narrow && !f->device_fn;

  if (f->device_fn) {
    iron_cuda_src_printf(&body, "static __device__ __forceinline__ void %s(",
                         f->device_fn);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      iron_cuda_src_printf(&body, "const %s *in%u, ",
                           iron_cuda_ctype(f->inputs[i]->type->dtype), i);
    }
    iron_cuda_src_printf(&body, "long long i");
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      iron_cuda_src_printf(&body, ", %s &r%u",
                           iron_cuda_compute_ctype(f->outputs[j]->type->dtype),
                           j);
    }
    iron_cuda_src_printf(&body, ") {\n  {\n");
  } else if (vec) {
    // The element function: storage values in, storage values out.
    iron_cuda_src_printf(&body, "static __device__ __forceinline__ void %s_f(",
                         IRON_CUDA_KERNEL_PLACEHOLDER);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      iron_cuda_src_printf(&body, "%sconst %s s%u", i ? ", " : "",
                           st_ctype(f->inputs[i]->type->dtype), i);
    }
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      iron_cuda_src_printf(&body, "%s%s &r%u", (f->num_inputs || j) ? ", " : "",
                           st_ctype(f->outputs[j]->type->dtype), j);
    }
    iron_cuda_src_printf(&body, ") {\n  {\n");
  } else {
    iron_cuda_src_printf(&body,
                         "extern \"C\" __global__ void __launch_bounds__(256) %s(",
                         IRON_CUDA_KERNEL_PLACEHOLDER);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      iron_cuda_src_printf(&body, "%sconst %s *in%u", i ? ", " : "",
                           st_ctype(f->inputs[i]->type->dtype), i);
    }
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      iron_cuda_src_printf(&body, "%s%s *out%u",
                           (f->num_inputs || j) ? ", " : "",
                           st_ctype(f->outputs[j]->type->dtype), j);
    }
    iron_cuda_src_printf(&body, ") {\n  IRON_LOOP(i, %s, %lldLL) {\n", g.idx,
                         (long long)g.count);
  }
  if (needs_coords(f) && g.rank > 0) {
    iron_cuda_src_printf(&body, "    %s r_ = (%s)i;\n", g.idx, g.idx);
    for (int32_t d = g.rank - 1; d >= 0; --d) {
      iron_cuda_src_printf(&body, "    const %s c%d = r_ %% (%s)%lld;\n",
                           g.idx, d, g.idx, (long long)g.dims[d]);
      if (d) {
        iron_cuda_src_printf(&body, "    r_ /= (%s)%lld;\n", g.idx,
                             (long long)g.dims[d]);
      }
    }
  }
  // Direct loads of inputs.
  for (uint32_t i = 0; i < f->num_inputs; ++i) {
    const iron_ir_value_t *v = f->inputs[i];
    char name[24];
    snprintf(name, sizeof(name), "x%u", i);
    if (input_read_directly(f, i)) {
      int64_t c = type_count(v->type);
      char lv[64];
      if (c != 1 && c != g.count) {
        st = IRON_ERR(INVALID_ARGUMENT,
                      "CUDA fusion: input %u has %lld elements, the fusion "
                      "%lld",
                      i, (long long)c, (long long)g.count);
        goto fail;
      }
      // Same count with other dims: element-wise ops see one linear order.
      if (vec) {
        snprintf(lv, sizeof(lv), "s%u", i);
      } else {
        snprintf(lv, sizeof(lv), c == 1 ? "in%u[0]" : "in%u[i]", i);
      }
      emit_load(&body, v->type->dtype, name, lv);
    }
    st = fz_add(&g, v, "x%u", i);
    if (st) goto fail;
  }
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    if (f->ops[o]->kind == IRON_OP_DYNAMIC_UPDATE_SLICE) continue;  // below
    st = gen_op(&g, f->ops[o], o);
    if (st) goto fail;
  }
  for (uint32_t j = 0; j < f->num_outputs; ++j) {
    const iron_ir_op_t *d = dus_root(f, j);
    if (d) {
      // The update's element goes to its place in the operand, which the
      // output holds (in place, or copied there by iron_cuda_ew_run).
      const iron_ir_type_t *xt = d->operands[0]->type;
      const iron_ir_type_t *ut = d->operands[1]->type;
      const char *n = fz_name(&g, d->operands[1]);
      char cn[IRON_MAX_RANK][16];
      if (!n || f->device_fn || vec || !map_coords(&g, ut, cn)) {
        st = iron_ir_op_unimplemented(d, "in this CUDA fusion");
        goto fail;
      }
      char pre[16];
      snprintf(pre, sizeof(pre), "u%u", j);
      iron_cuda_src_printf(&body, "    {\n");
      emit_clamped_starts(&g, d, 2, pre, xt, ut->dims);
      int64_t xs = 1, xstr[IRON_MAX_RANK];
      for (int32_t k = xt->rank - 1; k >= 0; --k) {
        xstr[k] = xs;
        xs *= xt->dims[k];
      }
      char se[512];
      store_expr(f->outputs[j]->type->dtype, n, se, sizeof(se));
      iron_cuda_src_printf(&body, "    out%u[0LL", j);
      for (int32_t k = 0; k < xt->rank; ++k)
        iron_cuda_src_printf(&body, " + (%s_s%d + (long long)%s) * %lldLL",
                             pre, k, cn[k], (long long)xstr[k]);
      iron_cuda_src_printf(&body, "] = %s;\n    }\n", se);
      continue;
    }
    const char *n = fz_name(&g, f->outputs[j]);
    if (!n) {
      st = IRON_ERR(INVALID_ARGUMENT, "CUDA fusion: output %u not defined", j);
      goto fail;
    }
    char se[512];
    if (f->device_fn)
      snprintf(se, sizeof(se), "%s", n);
    else
      store_expr(f->outputs[j]->type->dtype, n, se, sizeof(se));
    iron_cuda_src_printf(&body,
                         vec || f->device_fn ? "    r%u = %s;\n"
                                             : "    out%u[i] = %s;\n",
                         j, se);
  }
  if (vec) {
    // The kernel: vector loop when every full operand is aligned to its
    // vector, then the tail; otherwise element by element.
    const char *I = g.idx;
    iron_cuda_src_printf(&body,
                         "  }\n}\n"
                         "extern \"C\" __global__ void __launch_bounds__(256) %s(",
                         IRON_CUDA_KERNEL_PLACEHOLDER);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      iron_cuda_src_printf(&body, "%sconst %s *in%u", i ? ", " : "",
                           st_ctype(f->inputs[i]->type->dtype), i);
    }
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      iron_cuda_src_printf(&body, "%s%s *out%u",
                           (f->num_inputs || j) ? ", " : "",
                           st_ctype(f->outputs[j]->type->dtype), j);
    }
    iron_cuda_src_printf(&body,
                         ") {\n"
                         "  const %s n = %lldLL;\n"
                         "  const %s tid = (%s)blockIdx.x * blockDim.x + threadIdx.x;\n"
                         "  const %s nt = (%s)gridDim.x * blockDim.x;\n"
                         "  bool al = true;\n",
                         I, (long long)g.count, I, I, I, I);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      if (type_count(f->inputs[i]->type) != g.count) continue;
      iron_cuda_src_printf(&body,
                           "  al = al && ((unsigned long long)in%u %% "
                           "(sizeof(*in%u) * %d)) == 0;\n",
                           i, i, vw);
    }
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      iron_cuda_src_printf(&body,
                           "  al = al && ((unsigned long long)out%u %% "
                           "(sizeof(*out%u) * %d)) == 0;\n",
                           j, j, vw);
    }
    // Arguments of the element function, per element k of vector j.
    iron_cuda_src_t va, sa;
    iron_cuda_src_init(&va);
    iron_cuda_src_init(&sa);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      bool full = type_count(f->inputs[i]->type) == g.count && g.count != 1;
      iron_cuda_src_printf(&va, "%s%s", i ? ", " : "", full ? "" : "");
      if (full) {
        iron_cuda_src_printf(&va, "a%u.v[k]", i);
        iron_cuda_src_printf(&sa, "%sin%u[i]", i ? ", " : "", i);
      } else {
        iron_cuda_src_printf(&va, "in%u[0]", i);
        iron_cuda_src_printf(&sa, "%sin%u[0]", i ? ", " : "", i);
      }
    }
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      const char *sep = (f->num_inputs || j) ? ", " : "";
      iron_cuda_src_printf(&va, "%sb%u.v[k]", sep, j);
      iron_cuda_src_printf(&sa, "%sout%u[i]", sep, j);
    }
    char *vas = NULL, *sas = NULL;
    st = iron_cuda_src_finish(&va, &vas);
    if (!st) st = iron_cuda_src_finish(&sa, &sas);
    if (st) {
      free(vas);
      iron_cuda_src_free(&sa);
      goto fail;
    }
    // Unaligned operands run everything through the tail loop.
    iron_cuda_src_printf(&body,
                         "  const %s nv = al ? n / %d : 0;\n"
                         "  for (%s j = tid; j < nv; j += nt) {\n",
                         I, vw, I);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      if (type_count(f->inputs[i]->type) != g.count) continue;
      const char *ct = st_ctype(f->inputs[i]->type->dtype);
      iron_cuda_src_printf(&body,
                           "      const iron_vec<%s, %d> a%u = "
                           "((const iron_vec<%s, %d> *)in%u)[j];\n",
                           ct, vw, i, ct, vw, i);
    }
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      iron_cuda_src_printf(&body, "      iron_vec<%s, %d> b%u;\n",
                           st_ctype(f->outputs[j]->type->dtype), vw, j);
    }
    iron_cuda_src_printf(&body,
                         "#pragma unroll\n"
                         "      for (int k = 0; k < %d; ++k) %s_f(%s);\n",
                         vw, IRON_CUDA_KERNEL_PLACEHOLDER, vas);
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      const char *ct = st_ctype(f->outputs[j]->type->dtype);
      iron_cuda_src_printf(&body, "      ((iron_vec<%s, %d> *)out%u)[j] = b%u;\n",
                           ct, vw, j, j);
    }
    iron_cuda_src_printf(&body,
                         "  }\n"
                         "  for (%s i = nv * %d + tid; i < n; i += nt) %s_f(%s);\n"
                         "}\n",
                         I, vw, IRON_CUDA_KERNEL_PLACEHOLDER, sas);
    free(vas);
    free(sas);
  } else {
    iron_cuda_src_printf(&body, "  }\n}\n");
  }
  free(g.vals);
  if (f->device_fn) {
    char *nm = strdup(f->device_fn);
    if (!nm) {
      iron_cuda_src_free(&body);
      return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
    }
    st = iron_cuda_src_finish(&body, out_source);
    if (st) {
      free(nm);
      return st;
    }
    *out_name = nm;
    return IRON_OK;
  }
  return iron_cuda_source_make(&body, "iron_ew", out_source, out_name);
fail:
  free(g.vals);
  iron_cuda_src_free(&body);
  return st;
}

// ---------------------------------------------------------------------------
// Prepare / run

void iron_cuda_launch_dims(const iron_device_t *dev, int64_t count,
                           unsigned *out_grid, unsigned *out_block) {
  const iron_cuda_device_t *d = (const iron_cuda_device_t *)dev;
  unsigned block = 256;
  int64_t blocks = (count + block - 1) / block;
  int64_t cap = (d && d->num_sms > 0) ? (int64_t)d->num_sms * 32 : 4096;
  if (blocks > cap) blocks = cap;
  if (blocks < 1) blocks = 1;
  *out_grid = (unsigned)blocks;
  *out_block = block;
}

iron_status_t iron_cuda_fusion_prepare(iron_device_t *dev,
                                       const iron_cuda_fusion_t *fusion,
                                       void **out_params) {
  if (fusion->num_inputs + fusion->num_outputs > IRON_CUDA_MAX_KERNEL_PARAMS) {
    const iron_ir_op_t *o = fusion->owner ? fusion->owner : fusion->ops[0];
    return iron_ir_op_unimplemented(o, "with more than %d operands and "
                                       "results on the CUDA device",
                                    IRON_CUDA_MAX_KERNEL_PARAMS);
  }
  char *src = NULL, *name = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_codegen_fusion(fusion, &src, &name));
  iron_cuda_ew_params_t *p = calloc(1, sizeof(*p));
  if (!p) {
    free(src);
    free(name);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (params)");
  }
  iron_status_t st = iron_cuda_function_request(
      (iron_cuda_device_t *)dev, src, name, &p->fn);
  free(src);
  free(name);
  if (st) {
    free(p);
    return st;
  }
  p->num_inputs = fusion->num_inputs;
  p->num_outputs = fusion->num_outputs;
  p->count = type_count(fusion_space(fusion));
  for (uint32_t j = 0; j < fusion->num_outputs; ++j) {
    const iron_ir_op_t *d = dus_root(fusion, j);
    if (!d) continue;
    uint32_t k = fusion->num_inputs;
    for (uint32_t i = 0; i < fusion->num_inputs; ++i)
      if (fusion->inputs[i] == d->operands[0]) k = i;
    size_t bytes = 0;
    if (k == fusion->num_inputs || p->num_dus == 16 ||
        !iron_ir_type_byte_size(d->operands[0]->type, &bytes)) {
      free(p);
      return iron_ir_op_unimplemented(d, "in this CUDA fusion");
    }
    p->dus_out[p->num_dus] = j;
    p->dus_in[p->num_dus] = k;
    p->dus_bytes[p->num_dus] = bytes;
    p->num_dus++;
  }
  iron_cuda_launch_dims(dev, p->count, &p->grid, &p->block);
  *out_params = p;
  return IRON_OK;
}

iron_status_t iron_cuda_ew_run(const iron_kernel_ctx_t *ctx, const void *params,
                               const iron_tensor_t *const *inputs,
                               iron_tensor_t *const *outputs) {
  const iron_cuda_ew_params_t *p = params;
  iron_cuda_device_t *dev = (iron_cuda_device_t *)ctx->dev;
  for (uint32_t k = 0; k < p->num_dus; ++k) {
    // A dynamic_update_slice root's output starts as its operand: shared
    // storage when the plan let it take the operand's, else a copy.
    void *dst = outputs[p->dus_out[k]]->data;
    const void *src = inputs[p->dus_in[k]]->data;
    if (dst == src || p->dus_bytes[k] == 0) continue;
    for (uint32_t i = 0; i < p->num_inputs; ++i)
      if (inputs[i]->data == dst)
        return IRON_ERR(INTERNAL, "CUDA fusion: output %u shares input %u's "
                        "storage", p->dus_out[k], i);
    IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_device_enter(dev));
    CUresult r = dev->api->cuMemcpyDtoDAsync((CUdeviceptr)dst,
                                             (CUdeviceptr)src,
                                             p->dus_bytes[k], dev->stream);
    if (r != IRON_CU_SUCCESS)
      return IRON_ERR(INTERNAL, "cuMemcpyDtoDAsync of %zu bytes failed (%d)",
                      p->dus_bytes[k], (int)r);
  }
  if (p->count == 0) return IRON_OK;
  if (p->num_inputs + p->num_outputs > IRON_CUDA_MAX_KERNEL_PARAMS)
    return IRON_ERR(INTERNAL, "CUDA kernel with %u parameters",
                    p->num_inputs + p->num_outputs);
  void *ptrs[IRON_CUDA_MAX_KERNEL_PARAMS];
  void *args[IRON_CUDA_MAX_KERNEL_PARAMS];
  uint32_t n = 0;
  for (uint32_t i = 0; i < p->num_inputs; ++i) {
    ptrs[n] = inputs[i]->data;
    args[n] = &ptrs[n];
    n++;
  }
  for (uint32_t j = 0; j < p->num_outputs; ++j) {
    ptrs[n] = outputs[j]->data;
    args[n] = &ptrs[n];
    n++;
  }
  return iron_cuda_launch((iron_cuda_device_t *)ctx->dev, p->fn, p->grid, 1, 1,
                          p->block, 0, args);
}

iron_status_t iron_cuda_ew_multi_run(const iron_kernel_ctx_t *ctx,
                                     const void *params,
                                     const iron_tensor_t *const *inputs,
                                     iron_tensor_t *const *outputs) {
  const iron_cuda_ew_multi_params_t *p = params;
  for (uint32_t k = 0; k < p->num_parts; ++k)
    IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_ew_run(
        ctx, &p->parts[k], inputs + p->first_input[k], outputs));
  return IRON_OK;
}

void iron_cuda_ew_multi_destroy(void *params) {
  iron_cuda_ew_multi_params_t *p = params;
  if (!p) return;
  free(p->parts);
  free(p->first_input);
  free(p);
}

// ---------------------------------------------------------------------------
// The fusion op kernel (region IR).

// A fusion that ends in stablehlo.reduce (src/compiler/fuse.c): the other
// ops become a __device__ function that computes the reduce's operands
// element by element, and the reduce kernel calls it instead of loading
// them, so the producers' values never go through memory.
static iron_status_t fused_reduce_prepare(iron_device_t *dev,
                                          const iron_ir_op_t *op,
                                          iron_region_t *const *regions,
                                          const iron_ir_block_t *b,
                                          const iron_ir_value_t **inputs,
                                          void **out_params) {
  const iron_ir_op_t *red = b->ops[b->num_ops - 2];
  const iron_ir_op_t *term = b->ops[b->num_ops - 1];
  uint32_t num = red->num_results;
  iron_dtype_t dts[8];
  bool reduced[IRON_MAX_RANK];
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_reduce_check(red, dts, reduced));
  if (term->num_operands != num)
    return iron_ir_op_unimplemented(op, "as a fused reduce of this form");
  for (uint32_t i = 0; i < num; ++i)
    if (term->operands[i] != &red->results[i])
      return iron_ir_op_unimplemented(op, "as a fused reduce that does not "
                                          "return the reduce's results");
  const iron_ir_type_t *in0 = red->operands[0]->type;
  const char *vct[8];
  uint32_t init_in[8];
  if (b->num_args + num > IRON_CUDA_MAX_KERNEL_PARAMS)
    return iron_ir_op_unimplemented(op, "with more than %d operands and "
                                        "results on the CUDA device",
                                    IRON_CUDA_MAX_KERNEL_PARAMS);
  for (uint32_t k = 0; k < b->num_args; ++k) {
    if (!iron_cuda_ctype(b->args[k].type->dtype))
      return iron_ir_op_unimplemented(op, "on the CUDA device for input "
                                          "dtype %s",
                                      iron_dtype_name(b->args[k].type->dtype));
  }
  for (uint32_t i = 0; i < num; ++i) {
    vct[i] = iron_cuda_compute_ctype(dts[i]);
    const iron_ir_value_t *init = red->operands[num + i];
    if (init->def_block != b || init->def_op)  // fuse.c keeps inits outside
      return iron_ir_op_unimplemented(red, "as a fused reduce with this init");
    init_in[i] = init->index;
  }
  iron_cuda_fusion_t f = {
      .num_ops = b->num_ops - 2,
      .ops = (const iron_ir_op_t *const *)b->ops,
      .num_inputs = b->num_args,
      .inputs = inputs,
      .num_outputs = num,
      .outputs = (const iron_ir_value_t *const *)red->operands,
      .owner = op,
      .device_fn = "iop_fz",
  };
  char *fn_text = NULL, *fn_name = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_codegen_fusion(&f, &fn_text, &fn_name));
  const char **ict = calloc(b->num_args + 1, sizeof(*ict));
  iron_cuda_ew_params_t *p = calloc(1, sizeof(*p));
  if (!ict || !p) {
    free(ict);
    free(p);
    free(fn_text);
    free(fn_name);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (params)");
  }
  for (uint32_t k = 0; k < b->num_args; ++k)
    ict[k] = iron_cuda_ctype(b->args[k].type->dtype);
  iron_cuda_reduce_fused_t fz = {
      .fn_text = fn_text,
      .fn_name = fn_name,
      .num_inputs = b->num_args,
      .input_ctypes = ict,
      .value_ctypes = vct,
      .init_inputs = init_in,
  };
  char *src = NULL;
  iron_cuda_ops_region_module(regions);
  iron_status_t st = iron_cuda_gen_reduce_fused(
      "iron_reduce", in0->rank, in0->dims, reduced, num, dts,
      &red->regions[0], &fz, &src, &p->grid, &p->block);
  iron_cuda_ops_region_module(NULL);
  free(fn_text);
  free(fn_name);
  free(ict);
  if (st) {
    free(p);
    return iron_cuda_ops_refused(red, st);
  }
  st = iron_cuda_ops_request((iron_cuda_device_t *)dev, src, "iron_reduce",
                             &p->fn);
  free(src);
  if (st) {
    free(p);
    return st;
  }
  p->num_inputs = b->num_args;
  p->num_outputs = num;
  p->count = type_count(red->results[0].type);
  *out_params = p;
  return IRON_OK;
}

static iron_status_t fusion_op_prepare(iron_device_t *dev,
                                       const iron_ir_op_t *op,
                                       iron_region_t *const *regions,
                                       void **out_params) {
  if (op->num_regions < 1 || op->regions[0].num_blocks != 1) {
    return iron_ir_op_unimplemented(op, "as a CUDA fusion without one block");
  }
  const iron_ir_block_t *b = &op->regions[0].blocks[0];
  if (b->num_args != op->num_operands || b->num_ops == 0) {
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: fusion block has %u arguments for %u operands",
                    op->name, b->num_args, op->num_operands);
  }
  const iron_ir_op_t *term = b->ops[b->num_ops - 1];
  if ((term->kind != IRON_OP_RETURN && term->kind != IRON_OP_FUNC_RETURN) ||
      term->num_operands != op->num_results) {
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: fusion block must return the op's %u results",
                    op->name, op->num_results);
  }
  // Row fusions (src/compiler/fuse_rows.h) have their own kernel.
  if (iron_cuda_fusion_is_row(op))
    return iron_cuda_row_fusion_prepare(dev, op, out_params);
  const iron_ir_value_t **inputs =
      calloc(b->num_args ? b->num_args : 1, sizeof(*inputs));
  if (!inputs) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  for (uint32_t i = 0; i < b->num_args; ++i) inputs[i] = &b->args[i];
  if (b->num_ops >= 2 && b->ops[b->num_ops - 2]->kind == IRON_OP_REDUCE) {
    iron_status_t st =
        fused_reduce_prepare(dev, op, regions, b, inputs, out_params);
    free(inputs);
    return st;
  }
  iron_cuda_fusion_t f = {
      .num_ops = b->num_ops - 1,
      .ops = (const iron_ir_op_t *const *)b->ops,
      .num_inputs = b->num_args,
      .inputs = inputs,
      .num_outputs = term->num_operands,
      .outputs = (const iron_ir_value_t *const *)term->operands,
      .owner = op,
  };
  iron_status_t st = iron_cuda_fusion_prepare(dev, &f, out_params);
  free(inputs);
  return st;
}

const iron_kernel_t iron_cuda_fusion_kernel = {
    .name = "cuda_fusion",
    .prepare = NULL,
    .run = iron_cuda_ew_run,
    .destroy = NULL,
    .inplace_ok = false,
    .elementwise = false,
    .prepare_on = fusion_op_prepare,
    .graph_capturable = true,
};

// ---------------------------------------------------------------------------
// convert from/to the narrow dtypes (f8 family, f4E2M1FN, s4/u4/s2/u2; one
// element per byte), as the host's ew_narrow.c: values pass through f64
// (floats) or s64 (ints) and the regular conversions on the other side.

bool iron_cuda_dtype_is_narrow(iron_dtype_t dt) {
  int b;
  bool s;
  return narrow_float(dt) || narrow_int(dt, &b, &s);
}

iron_status_t iron_cuda_convert_narrow_prepare(iron_device_t *dev,
                                               const iron_ir_op_t *op,
                                               void **out_params) {
  iron_dtype_t from = op->operands[0]->type->dtype;
  iron_dtype_t to = op->results[0].type->dtype;
  const nf_fmt_t *sf = narrow_float(from), *df = narrow_float(to);
  int sbits = 0, dbits = 0;
  bool ssg = false, dsg = false;
  bool si = narrow_int(from, &sbits, &ssg), di = narrow_int(to, &dbits, &dsg);
  bool sn = sf || si, dn = df || di;
  if ((!sn && !iron_cuda_ctype(from)) || (!dn && !iron_cuda_ctype(to)) ||
      (!sn && !dn)) {
    return iron_ir_op_unimplemented(op, "on the CUDA device for dtype %s -> %s",
                                    iron_dtype_name(from),
                                    iron_dtype_name(to));
  }
  bool src_is_int = si || (!sn && (is_int(from) || from == IRON_DTYPE_PRED));
  bool via_int = src_is_int && !df;
  bool nan_all_ones = df && df->dt == IRON_DTYPE_F8E5M2 && is_half(from);
  bool sat_max_is_inf = sf && sf->kind == 3 && (di || is_int(to));
  int64_t n = iron_ir_type_num_elements(op->results[0].type);
  int64_t nin = iron_ir_type_num_elements(op->operands[0]->type);
  if (n < 0 || (nin != n && nin != 1)) {
    return IRON_ERR(INVALID_ARGUMENT, "%s: element counts differ", op->name);
  }
  const char *idx = n <= ((int64_t)1 << 30) ? "int" : "long long";
  iron_cuda_src_t s;
  iron_cuda_src_init(&s);
  iron_cuda_src_printf(
      &s,
      "extern \"C\" __global__ void __launch_bounds__(256) %s(const %s *in0, "
      "%s *out0) {\n  IRON_LOOP(i, %s, %lldLL) {\n",
      IRON_CUDA_KERNEL_PLACEHOLDER, sn ? "uint8_t" : iron_cuda_ctype(from),
      dn ? "uint8_t" : iron_cuda_ctype(to), idx, (long long)n);
  const char *at = nin == 1 ? "0" : "i";
  const char *mt = via_int ? "long long" : "double";
  if (sf) {
    iron_cuda_src_printf(&s,
                         "    const unsigned b = in0[%s];\n"
                         "    %s m = iron_nf_decode(b, %d, %d, %d, %d);\n",
                         at, mt, sf->ebits, sf->mbits, sf->bias, sf->kind);
    if (sat_max_is_inf) {
      unsigned mag = (1u << (sf->ebits + sf->mbits)) - 1;
      iron_cuda_src_printf(&s,
                           "    if ((b & %uu) == %uu) m = m < 0 ? -IRON_INF : "
                           "IRON_INF;\n",
                           mag, mag);
    }
  } else if (si) {
    unsigned mask = (1u << sbits) - 1, top = 1u << (sbits - 1);
    iron_cuda_src_printf(&s,
                         "    long long v = in0[%s] & %uu;\n"
                         "    if (%d && (v & %uu)) v -= %uLL;\n"
                         "    const %s m = (%s)v;\n",
                         at, mask, ssg ? 1 : 0, top, mask + 1, mt, mt);
  } else {
    char lv[32];
    snprintf(lv, sizeof(lv), "in0[%s]", at);
    emit_load(&s, from, "x", lv);
    const char *re = is_cplx(from) ? "x.re" : "x";
    if (via_int) {
      iron_cuda_src_printf(&s, "    const long long m = (long long)%s;\n", re);
    } else if (is_f32ish(from) && iron_cuda_flush_denormals()) {
      iron_cuda_src_printf(&s, "    const double m = (double)iron_daz(%s);\n",
                           re);
    } else {
      iron_cuda_src_printf(&s, "    const double m = (double)(%s);\n", re);
    }
  }
  if (df) {
    iron_cuda_src_printf(&s,
                         "    uint8_t r = iron_nf_encode((double)m, %d, %d, "
                         "%d, %d);\n",
                         df->ebits, df->mbits, df->bias, df->kind);
    if (nan_all_ones) {
      iron_cuda_src_printf(&s, "    if (m != m) r |= 0x7f;\n");
    }
    iron_cuda_src_printf(&s, "    out0[i] = r;\n");
  } else if (di) {
    unsigned mask = (1u << dbits) - 1;
    if (via_int) {
      iron_cuda_src_printf(&s,
                           "    out0[i] = (uint8_t)((uint64_t)m & %uu);\n",
                           mask);
    } else if (dsg) {
      iron_cuda_src_printf(&s,
                           "    out0[i] = (uint8_t)((uint64_t)iron_f2s<int64_t>"
                           "(m, %d) & %uu);\n",
                           dbits, mask);
    } else {
      iron_cuda_src_printf(&s,
                           "    out0[i] = (uint8_t)(iron_f2u<uint64_t>(m, %d) "
                           "& %uu);\n",
                           dbits, mask);
    }
  } else {
    fz_expr_t ex;
    iron_dtype_t mid = via_int ? IRON_DTYPE_S64 : IRON_DTYPE_F64;
    if (!convert_expr(mid, to, "m", &ex)) {
      iron_cuda_src_free(&s);
      return iron_ir_op_unimplemented(op, "on the CUDA device for dtype %s -> %s",
                                      iron_dtype_name(from),
                                      iron_dtype_name(to));
    }
    char se[1200];
    store_expr(to, ex.text, se, sizeof(se));
    iron_cuda_src_printf(&s, "    out0[i] = %s;\n", se);
  }
  iron_cuda_src_printf(&s, "  }\n}\n");
  char *src = NULL, *name = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_source_make(&s, "iron_cvn", &src, &name));
  iron_cuda_ew_params_t *p = calloc(1, sizeof(*p));
  if (!p) {
    free(src);
    free(name);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (params)");
  }
  iron_status_t st = iron_cuda_function_request((iron_cuda_device_t *)dev, src,
                                                name, &p->fn);
  free(src);
  free(name);
  if (st) {
    free(p);
    return st;
  }
  p->num_inputs = 1;
  p->num_outputs = 1;
  p->count = n;
  iron_cuda_launch_dims(dev, n, &p->grid, &p->block);
  *out_params = p;
  return IRON_OK;
}
