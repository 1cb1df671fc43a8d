// The scalar emitter (scalar.h): one op on compute-type values.
//
// Edge semantics follow the host kernels (src/device/host/elementwise.c,
// convert.c, ew_common.h, ew_narrow.c, ew_complex.h); the helpers are in
// the prelude. Denormals: XLA:CPU flushes f32/f64 denormal inputs and
// results of float arithmetic (not of negate/abs/select/copies, and
// remainder keeps them); f32 is flushed by NVRTC's -ftz, f64 (and the libm
// calls the host flushes explicitly) by iron_daz in the generated code.
// Narrow dtypes compute as their wide dtype (gen/types.h) and round every
// result back, as XLA:CPU's kernels for them.
#include "device/cuda/gen/scalar.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/half.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/types.h"

// ---------------------------------------------------------------------------
// dtypes (of compute values: narrow dtypes are asked as their `wide`)

static bool is_half(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16;
}
// Real floats computed in float registers.
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
    case IRON_DTYPE_S8:
    case IRON_DTYPE_S16:
    case IRON_DTYPE_S32:
    case IRON_DTYPE_S64:
    case IRON_DTYPE_U8:
    case IRON_DTYPE_U16:
    case IRON_DTYPE_U32:
    case IRON_DTYPE_U64:
      return true;
    default:
      return false;
  }
}
static bool is_sint(iron_dtype_t dt) {
  return is_int(dt) && iron_dtype_is_signed_int(dt);
}
// libm suffix of the compute type.
static const char *fsuffix(iron_dtype_t dt) { return is_f32ish(dt) ? "f" : ""; }
static bool is_narrow(iron_dtype_t dt) { return iron_cuda_type(dt).is_narrow; }
// The dtype a value of dt is computed as.
static iron_dtype_t wide_of(iron_dtype_t dt) {
  iron_cuda_type_t t = iron_cuda_type(dt);
  return t.store ? t.wide : dt;
}
static bool held(iron_dtype_t dt) { return iron_cuda_type(dt).store != NULL; }

// ---------------------------------------------------------------------------
// Storage <-> compute

void iron_cuda_emit_load(iron_cuda_text_t *t, const char *indent,
                         iron_dtype_t dt, const char *var, const char *lvalue,
                         bool fast) {
  iron_cuda_type_t ty = iron_cuda_type(dt);
  iron_cuda_text_printf(t, "%sconst %s %s = %s(%s);\n", indent, ty.comp, var,
                        fast ? ty.ld_fast : ty.ld, lvalue);
}

void iron_cuda_store_expr(iron_dtype_t dt, const char *v, char *buf,
                          size_t cap) {
  iron_cuda_type_t ty = iron_cuda_type(dt);
  if (dt == IRON_DTYPE_PRED)
    snprintf(buf, cap, "(uint8_t)(%s)", v);
  else if (ty.st && ty.st[0])
    snprintf(buf, cap, "%s(%s)", ty.st, v);
  else
    snprintf(buf, cap, "%s", v);
}

void iron_cuda_store_rounded_expr(iron_dtype_t dt, const char *v, char *buf,
                                  size_t cap) {
  if (dt == IRON_DTYPE_BF16 && iron_cuda_hw_round_enabled())
    snprintf(buf, cap, "iron_st_bf16r(%s)", v);
  else
    iron_cuda_store_expr(dt, v, buf, cap);
}

// ---------------------------------------------------------------------------
// Expressions

typedef struct expr {
  char text[2048];
} expr_t;

#define EXPR(...) snprintf(e->text, sizeof(e->text), __VA_ARGS__)

// Ops that read float denormals as they are (host: sign-bit ops, copies,
// remainder); every other float op flushes them as XLA:CPU does.
// complex(re, im) only moves its operands: XLA:CPU keeps denormal parts
// (measured: complex(d, d') has the bits of d and d').
static bool op_keeps_denormals(iron_op_kind_t k) {
  return k == IRON_OP_NEGATE || k == IRON_OP_ABS || k == IRON_OP_REMAINDER ||
         k == IRON_OP_REAL || k == IRON_OP_IMAG || k == IRON_OP_SELECT ||
         k == IRON_OP_IS_FINITE || k == IRON_OP_RESHAPE || k == IRON_OP_COMPLEX;
}

// Complex ops whose parts are float arithmetic that XLA:CPU runs with
// FTZ/DAZ, so that a denormal part is read and written as zero; the GPU
// has no -ftz for c128's f64 parts (fuzz_programs on the H100). Other
// complex ops keep denormal parts where XLA:CPU does (max/min select an
// operand, exp/log/pow go through their own formulas: measured by
// test_cuda_scalar_ops_emu against the host, which matches XLA:CPU).
static bool cplx_arith(iron_op_kind_t k) {
  return k == IRON_OP_ADD || k == IRON_OP_SUBTRACT || k == IRON_OP_MULTIPLY;
}

// A region body's fold arithmetic on real floats (IRON_CUDA_SCALAR_BODY):
// computed without f16/bf16 rounding (the accumulator stays f32, as on the
// host), denormals flushed as in every other op (the host's reduce, scan
// and window loops run with FTZ/DAZ, as XLA:CPU's).
static bool body_raw_op(const iron_cuda_scalar_t *s, iron_op_kind_t k,
                        iron_dtype_t wide) {
  if (s->mode != IRON_CUDA_SCALAR_BODY || !is_real_float(wide)) return false;
  switch (k) {
    case IRON_OP_ADD:
    case IRON_OP_SUBTRACT:
    case IRON_OP_MULTIPLY:
    case IRON_OP_DIVIDE:
    case IRON_OP_MAXIMUM:
    case IRON_OP_MINIMUM:
      return true;
    default:
      return false;
  }
}

const char *iron_cuda_libm_name(iron_op_kind_t k) {
  switch (k) {
    case IRON_OP_FLOOR:
      return "floor";
    case IRON_OP_CEIL:
      return "ceil";
    case IRON_OP_ROUND_NEAREST_AFZ:
      return "round";
    case IRON_OP_ROUND_NEAREST_EVEN:
      return "rint";
    case IRON_OP_EXPONENTIAL:
      return "exp";
    case IRON_OP_EXPONENTIAL_MINUS_ONE:
      return "expm1";
    case IRON_OP_LOG:
      return "log";
    case IRON_OP_LOG_PLUS_ONE:
      return "log1p";
    case IRON_OP_SQRT:
      return "sqrt";
    case IRON_OP_CBRT:
      return "cbrt";
    case IRON_OP_SINE:
      return "sin";
    case IRON_OP_COSINE:
      return "cos";
    case IRON_OP_TAN:
      return "tan";
    case IRON_OP_TANH:
      return "tanh";
    case IRON_OP_POWER:
      return "pow";
    case IRON_OP_ATAN2:
      return "atan2";
    default:
      return NULL;
  }
}

// Unary op on dtype `dt` (x: the operand after the flush wrapper). False
// when refused.
static bool unary_expr(iron_op_kind_t k, iron_dtype_t dt, const char *x,
                       expr_t *e) {
  const char *F = fsuffix(dt);
  if (is_int(dt) || dt == IRON_DTYPE_PRED) {
    bool pred = dt == IRON_DTYPE_PRED;
    switch (k) {
      case IRON_OP_ABS:
        if (!is_sint(dt)) return false;
        EXPR("iron_iabs(%s)", x);
        return true;
      case IRON_OP_NEGATE:
        if (pred) return false;
        EXPR("iron_ineg(%s)", x);
        return true;
      case IRON_OP_NOT:
        if (pred)
          EXPR("(uint8_t)(%s == 0)", x);
        else
          EXPR("iron_inot(%s)", x);
        return true;
      case IRON_OP_SIGN:
        if (!is_sint(dt)) return false;
        EXPR("iron_isign(%s)", x);
        return true;
      case IRON_OP_POPCNT:
        if (pred) return false;
        EXPR("iron_popcnt(%s)", x);
        return true;
      case IRON_OP_CLZ:
        if (pred) return false;
        EXPR("iron_clz(%s)", x);
        return true;
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
      // Sign-bit ops on the bits: under -ftz a float negate would flush.
      case IRON_OP_ABS:
        if (f32)
          EXPR("__uint_as_float(__float_as_uint(%s) & 0x7fffffffu)", x);
        else
          EXPR("fabs(%s)", x);
        return true;
      case IRON_OP_NEGATE:
        if (f32)
          EXPR("__uint_as_float(__float_as_uint(%s) ^ 0x80000000u)", x);
        else
          EXPR("(-%s)", x);
        return true;
      case IRON_OP_SIGN:
        EXPR("iron_fsign(%s)", x);
        return true;
      case IRON_OP_LOGISTIC:
        EXPR("iron_logistic(%s)", x);
        return true;
      case IRON_OP_RSQRT:
        EXPR("iron_rsqrt(%s)", x);
        return true;
      case IRON_OP_REAL:
        EXPR("%s", x);
        return true;
      case IRON_OP_IMAG:
        EXPR("%s", f32 ? "0.0f" : "0.0");
        return true;
      case IRON_OP_IS_FINITE:
        EXPR("iron_isfinite(%s)", x);
        return true;
      default:
        return false;
    }
  }
  if (is_cplx(dt)) {
    switch (k) {
      case IRON_OP_ABS:
        EXPR("iron_cabs(%s)", x);
        return true;
      case IRON_OP_NEGATE:
        EXPR("(-%s)", x);
        return true;
      case IRON_OP_SIGN:
        EXPR("iron_csign(%s)", x);
        return true;
      case IRON_OP_EXPONENTIAL:
        EXPR("iron_cexp(%s)", x);
        return true;
      case IRON_OP_EXPONENTIAL_MINUS_ONE:
        EXPR("iron_cexpm1(%s)", x);
        return true;
      case IRON_OP_LOG:
        EXPR("iron_clog(%s)", x);
        return true;
      case IRON_OP_LOG_PLUS_ONE:
        EXPR("iron_clog1p(%s)", x);
        return true;
      case IRON_OP_LOGISTIC:
        EXPR("iron_clogistic(%s)", x);
        return true;
      case IRON_OP_SQRT:
        EXPR("iron_csqrt(%s)", x);
        return true;
      case IRON_OP_RSQRT:
        EXPR("iron_crsqrt(%s)", x);
        return true;
      case IRON_OP_SINE:
        EXPR("iron_csin(%s)", x);
        return true;
      case IRON_OP_COSINE:
        EXPR("iron_ccos(%s)", x);
        return true;
      case IRON_OP_TAN:
        EXPR("iron_ctan(%s)", x);
        return true;
      case IRON_OP_TANH:
        EXPR("iron_ctanh(%s)", x);
        return true;
      case IRON_OP_REAL:
        EXPR("%s.re", x);
        return true;
      case IRON_OP_IMAG:
        EXPR("%s.im", x);
        return true;
      default:
        return false;
    }
  }
  return false;
}

// The result dtype the host's tables give for unary op k on dt.
static iron_dtype_t unary_result(iron_op_kind_t k, iron_dtype_t dt) {
  if (k == IRON_OP_IS_FINITE) return IRON_DTYPE_PRED;
  if (is_cplx(dt) &&
      (k == IRON_OP_ABS || k == IRON_OP_REAL || k == IRON_OP_IMAG)) {
    return iron_dtype_complex_part(dt);
  }
  return dt;
}

static bool binary_expr(const iron_cuda_scalar_t *s, iron_op_kind_t k,
                        iron_dtype_t dt, const char *x, const char *y,
                        expr_t *e) {
  const char *F = fsuffix(dt);
  if (dt == IRON_DTYPE_PRED) {
    switch (k) {
      // Bitwise on the stored bytes, as the host device.
      case IRON_OP_ADD:
      case IRON_OP_OR:
      case IRON_OP_MAXIMUM:
        EXPR("(uint8_t)(%s | %s)", x, y);
        return true;
      case IRON_OP_MULTIPLY:
      case IRON_OP_AND:
      case IRON_OP_MINIMUM:
        EXPR("(uint8_t)(%s & %s)", x, y);
        return true;
      case IRON_OP_XOR:
        EXPR("(uint8_t)(%s ^ %s)", x, y);
        return true;
      default:
        return false;
    }
  }
  if (is_int(dt)) {
    const char *fn = NULL;
    switch (k) {
      case IRON_OP_ADD:
        fn = "iron_iadd";
        break;
      case IRON_OP_SUBTRACT:
        fn = "iron_isub";
        break;
      case IRON_OP_MULTIPLY:
        fn = "iron_imul";
        break;
      case IRON_OP_DIVIDE:
        fn = "iron_idiv";
        break;
      case IRON_OP_REMAINDER:
        fn = "iron_irem";
        break;
      case IRON_OP_POWER:
        fn = "iron_ipow";
        break;
      case IRON_OP_MAXIMUM:
        fn = "iron_imax";
        break;
      case IRON_OP_MINIMUM:
        fn = "iron_imin";
        break;
      case IRON_OP_SHIFT_LEFT:
        fn = "iron_shl";
        break;
      case IRON_OP_SHIFT_RIGHT_ARITHMETIC:
        fn = "iron_shra";
        break;
      case IRON_OP_SHIFT_RIGHT_LOGICAL:
        fn = "iron_shrl";
        break;
      case IRON_OP_AND:
        EXPR("(%s)(%s & %s)", iron_cuda_ctype(dt), x, y);
        return true;
      case IRON_OP_OR:
        EXPR("(%s)(%s | %s)", iron_cuda_ctype(dt), x, y);
        return true;
      case IRON_OP_XOR:
        EXPR("(%s)(%s ^ %s)", iron_cuda_ctype(dt), x, y);
        return true;
      default:
        return false;
    }
    EXPR("%s(%s, %s)", fn, x, y);
    return true;
  }
  if (is_real_float(dt)) {
    switch (k) {
      case IRON_OP_ADD:
        EXPR("(%s + %s)", x, y);
        return true;
      case IRON_OP_SUBTRACT:
        EXPR("(%s - %s)", x, y);
        return true;
      case IRON_OP_MULTIPLY:
        EXPR("(%s * %s)", x, y);
        return true;
      case IRON_OP_DIVIDE:
        EXPR("(%s / %s)", x, y);
        return true;
      case IRON_OP_REMAINDER:
        // iron_frem keeps f32 denormal dividends that -ftz would flush.
        if (is_f32ish(dt))
          EXPR("iron_frem(%s, %s)", x, y);
        else
          EXPR("fmod(%s, %s)", x, y);
        return true;
      case IRON_OP_POWER:
      case IRON_OP_ATAN2:
        EXPR("%s%s(%s, %s)", iron_cuda_libm_name(k), F, x, y);
        return true;
      case IRON_OP_MAXIMUM:
        EXPR("iron_fmax(%s, %s)", x, y);
        return true;
      case IRON_OP_MINIMUM:
        EXPR("iron_fmin(%s, %s)", x, y);
        return true;
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
      default:
        return false;
    }
  }
  if (is_cplx(dt)) {
    switch (k) {
      case IRON_OP_ADD:
        EXPR("(%s + %s)", x, y);
        return true;
      case IRON_OP_SUBTRACT:
        EXPR("(%s - %s)", x, y);
        return true;
      case IRON_OP_MULTIPLY:
        if (s->mode == IRON_CUDA_SCALAR_BODY)
          EXPR("iron_cmul_plain(%s, %s)", x, y);
        else
          EXPR("(%s * %s)", x, y);
        return true;
      case IRON_OP_DIVIDE:
        EXPR("(%s / %s)", x, y);
        return true;
      case IRON_OP_POWER:
        EXPR("iron_cpow(%s, %s)", x, y);
        return true;
      case IRON_OP_MAXIMUM:
        EXPR("iron_cmax(%s, %s)", x, y);
        return true;
      case IRON_OP_MINIMUM:
        EXPR("iron_cmin(%s, %s)", x, y);
        return true;
      default:
        return false;
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

// `unsigned_ints`: compare_type UNSIGNED on signed integers (the bits as
// unsigned; sign extension keeps that order).
static bool compare_expr(const iron_cuda_scalar_t *s, int dir, bool total,
                         bool unsigned_ints, iron_dtype_t dt, const char *x,
                         const char *y, expr_t *e) {
  if (dir < 0 || dir > 5) return false;
  const char *o = kCmpOps[dir];
  if (dt == IRON_DTYPE_PRED || is_int(dt)) {
    if (unsigned_ints && is_sint(dt))
      EXPR("((uint64_t)%s %s (uint64_t)%s)", x, o, y);
    else
      EXPR("(%s %s %s)", x, o, y);
    return true;
  }
  if (is_real_float(dt)) {
    if (!total) {
      EXPR("(%s %s %s)", x, o, y);
    } else if (dt == IRON_DTYPE_F16) {
      EXPR("(iron_tkey16(iron_st_f16(%s)) %s iron_tkey16(iron_st_f16(%s)))", x,
           o, y);
    } else if (dt == IRON_DTYPE_BF16) {
      EXPR(
          "(iron_tkey16((uint16_t)(__float_as_uint(%s) >> 16)) %s "
          "iron_tkey16((uint16_t)(__float_as_uint(%s) >> 16)))",
          x, o, y);
    } else {
      EXPR("(iron_tkey(%s) %s iron_tkey(%s))", x, o, y);
    }
    return true;
  }
  if (is_cplx(dt) && !total) {
    // As the host's element-wise complex compares (ew_complex.h, measured
    // on XLA:CPU): EQ/NE on both parts, GT/LT lexicographic, GE/LE on the
    // real parts only; parts read with denormals as zero like every float
    // compare.
    const char *dz = s->flush ? "iron_daz" : "";
    char ar[300], ai[300], br[300], bi[300];
    snprintf(ar, sizeof(ar), "%s(%s.re)", dz, x);
    snprintf(ai, sizeof(ai), "%s(%s.im)", dz, x);
    snprintf(br, sizeof(br), "%s(%s.re)", dz, y);
    snprintf(bi, sizeof(bi), "%s(%s.im)", dz, y);
    switch (dir) {
      case IRON_CMP_EQ:
      case IRON_CMP_NE:
        EXPR("%s(%s == %s && %s == %s)", dir == IRON_CMP_NE ? "!" : "", ar, br,
             ai, bi);
        return true;
      case IRON_CMP_GT:
      case IRON_CMP_LT:
        EXPR("(%s %s %s || (%s == %s && %s %s %s))", ar, o, br, ar, br, ai, o,
             bi);
        return true;
      default:  // GE, LE
        EXPR("(%s %s %s)", ar, o, br);
        return true;
    }
  }
  return false;
}

bool iron_cuda_convert_expr(iron_dtype_t from, iron_dtype_t to, const char *x,
                            char *buf, size_t cap) {
  bool src_int = from == IRON_DTYPE_PRED || is_int(from);
  bool src_flt = is_real_float(from);
  bool src_cpx = is_cplx(from);
  if (!src_int && !src_flt && !src_cpx) return false;
  // A real view of the source for conversions that drop the imaginary part.
  char re[512];
  snprintf(re, sizeof(re), src_cpx ? "%s.re" : "%s", x);
  const char *T = iron_cuda_ctype(to);
  if (to == IRON_DTYPE_PRED) {
    if (from == IRON_DTYPE_F16) {
      // f16/bf16 -> pred test the bits (a bf16 denormal is true).
      snprintf(buf, cap, "((iron_st_f16(%s) & 0x7fffu) != 0)", x);
    } else if (from == IRON_DTYPE_BF16) {
      snprintf(buf, cap, "((__float_as_uint(%s) & 0x7fff0000u) != 0)", x);
    } else {
      snprintf(buf, cap, "(%s != 0)", re);
    }
    return true;
  }
  if (is_int(to)) {
    int bits = iron_dtype_bits(to);
    if (src_int) {
      snprintf(buf, cap, "(%s)(%s)", T, x);
    } else if (iron_dtype_is_signed_int(to)) {
      snprintf(buf, cap, "iron_f2s<%s>((double)(%s), %d)", T, re, bits);
    } else {
      snprintf(buf, cap, "iron_f2u<%s>((double)(%s), %d)", T, re, bits);
    }
    return true;
  }
  if (is_half(to) || to == IRON_DTYPE_F32) {
    // -> f16/bf16 goes through f32 (double rounding, as XLA:CPU).
    snprintf(buf, cap, "(float)(%s)", re);
    return true;
  }
  if (to == IRON_DTYPE_F64) {
    snprintf(buf, cap, "(double)(%s)", re);
    return true;
  }
  if (is_cplx(to)) {
    const char *R = to == IRON_DTYPE_C64 ? "float" : "double";
    if (src_cpx) {
      snprintf(buf, cap, "iron_mk((%s)%s.re, (%s)%s.im, (%s *)0)", R, x, R, x,
               T);
    } else {
      snprintf(buf, cap, "iron_mk((%s)(%s), (%s)0, (%s *)0)", R, x, R, T);
    }
    return true;
  }
  return false;
}

// convert where `from` or `to` is a narrow dtype (values in their wide
// form), as the host's ew_narrow.c: through f64 (floats) or s64 (ints) and
// the regular conversion on the other side; f8E8M0FNU <-> f32/bf16 by
// bits.
static bool narrow_convert_expr(iron_dtype_t from, iron_dtype_t to,
                                const char *x, bool flush, expr_t *e) {
  iron_cuda_type_t ft = iron_cuda_type(from), tt = iron_cuda_type(to);
  bool sf = ft.nf_kind >= 0, df = tt.nf_kind >= 0;
  bool si = from == IRON_DTYPE_S4 || from == IRON_DTYPE_U4;
  bool di = to == IRON_DTYPE_S4 || to == IRON_DTYPE_U4;
  bool se = from == IRON_DTYPE_F8E8M0FNU, de = to == IRON_DTYPE_F8E8M0FNU;
  if (!ft.store || !tt.store) return false;
  if (se && di) return false;  // not measured on XLA:CPU (host refuses)
  bool src_is_int =
      si || (!ft.is_narrow && (is_int(from) || from == IRON_DTYPE_PRED));
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
    if (from == IRON_DTYPE_F4E2M1FN && (di || is_int(to))) {
      // XLA:CPU converts the largest f4E2M1FN magnitude to an integer as
      // if it were infinite (ew_narrow.c: sat_max_is_inf; not the f6
      // types, although of the same kind).
      double mx = ldexp(2.0 - ldexp(1.0, -ft.nf_mbits),
                        (1 << ft.nf_ebits) - 1 - ft.nf_bias);
      snprintf(m, sizeof(m),
               "(fabsf(%s) == (float)%.17g ? (%s < 0 ? -IRON_INF : IRON_INF) : "
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
    EXPR(
        "(float)iron_nf_decode(iron_nf_encode((double)(%s), %d, %d, %d, %d), "
        "%d, %d, %d, %d)",
        m, tt.nf_ebits, tt.nf_mbits, tt.nf_bias, tt.nf_kind, tt.nf_ebits,
        tt.nf_mbits, tt.nf_bias, tt.nf_kind);
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
      snprintf(pat, sizeof(pat), "(int)(iron_f2u<uint64_t>(%s, 4) & 0xfu)", m);
    }
    if (to == IRON_DTYPE_S4)
      EXPR("(int8_t)iron_n4sext(%s)", pat);
    else
      EXPR("(uint8_t)(%s)", pat);
    return true;
  }
  if (de) {
    EXPR("iron_e8m0_ld(iron_e8m0_enc64((double)(%s)))", m);
    return true;
  }
  return iron_cuda_convert_expr(via_int ? IRON_DTYPE_S64 : IRON_DTYPE_F64, to,
                                m, e->text, sizeof(e->text));
}

// A literal of a splat (or one-element) dense constant, as an expression
// of its compute type.
static iron_status_t constant_literal(const iron_ir_op_t *op, char *buf,
                                      size_t cap) {
  const iron_ir_attr_t *a = iron_ir_op_attr(op, "value");
  const iron_ir_type_t *t = op->results[0].type;
  if (!a || a->kind != IRON_ATTR_DENSE || !a->dense.data || !t ||
      t->kind != IRON_TYPE_TENSOR) {
    return iron_ir_op_unimplemented(op, "in CUDA code without a value");
  }
  int64_t n = iron_ir_type_num_elements(t);
  size_t es = iron_dtype_size(t->dtype);
  if (!(a->dense.splat || n == 1) || a->dense.size < es) {
    return iron_ir_op_unimplemented(op, "in CUDA code unless it is a splat");
  }
  const unsigned char *d = a->dense.data;
  iron_dtype_t dt = t->dtype;
  uint64_t u = 0;
  switch (dt) {
    case IRON_DTYPE_PRED:
      snprintf(buf, cap, "(uint8_t)%d", d[0] ? 1 : 0);
      return IRON_OK;
    case IRON_DTYPE_F16:
    case IRON_DTYPE_BF16: {
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
    default: {
      iron_cuda_type_t ty = iron_cuda_type(dt);
      if (ty.is_narrow) {  // the byte, decoded (exact in the compute type)
        snprintf(buf, cap, "%s((uint8_t)0x%02x)", ty.ld, (unsigned)d[0]);
        return IRON_OK;
      }
      if (!is_int(dt))
        return iron_ir_op_unimplemented(op, "in CUDA code for dtype %s",
                                        iron_dtype_name(dt));
      memcpy(&u, d, es);
      snprintf(buf, cap, "(%s)0x%llxULL", iron_cuda_ctype(dt),
               (unsigned long long)u);
      return IRON_OK;
    }
  }
}

// ---------------------------------------------------------------------------
// Statements

bool iron_cuda_scalar_op_supported(iron_op_kind_t kind) {
  iron_op_class_t c = iron_op_kind_class(kind);
  if (c == IRON_OP_CLASS_UNARY || c == IRON_OP_CLASS_BINARY) return true;
  switch (kind) {
    case IRON_OP_COMPARE:
    case IRON_OP_SELECT:
    case IRON_OP_CLAMP:
    case IRON_OP_CONVERT:
    case IRON_OP_CONSTANT:
    case IRON_OP_RESHAPE:
      return true;
    default:
      return false;
  }
}

// Ops whose PTX instruction on float registers flushes denormal operands
// and results itself when kernels compile with -ftz (the flush mode):
// add.ftz, sub.ftz, mul.ftz and div.rn.ftz, so explicit iron_daz calls
// around them only cost instructions (2 per call; 9 per op of a chain).
// The CPU emulation runs with FTZ/DAZ on, the same. Transcendental calls
// keep their explicit flushes: libdevice's ftz behaviour at denormal
// inputs/results is not a documented contract.
static bool hw_flushes(const iron_cuda_scalar_t *s, iron_op_kind_t k,
                       iron_dtype_t dt) {
  if (!s->flush || !is_f32ish(dt) || !iron_cuda_ftz_ops_enabled()) return false;
  return k == IRON_OP_ADD || k == IRON_OP_SUBTRACT || k == IRON_OP_MULTIPLY ||
         k == IRON_OP_DIVIDE;
}

// Whether the value op `d` computes (a real float) is flushed already:
// emit_plain flushed it (or -ftz did, hw_flushes), so reading it as zero
// again only costs instructions (IRON_CUDA_FTZ_OPS). Mirrors emit_plain.
static bool result_flushed(const iron_cuda_scalar_t *s, const iron_ir_op_t *d) {
  if (!s->flush || !iron_cuda_ftz_ops_enabled() || d->num_results != 1 ||
      !d->results[0].type || !iron_cuda_scalar_op_supported(d->kind))
    return false;
  iron_dtype_t out = d->results[0].type->dtype;
  if (!held(out) || is_narrow(out)) return false;
  iron_op_kind_t k = d->kind;
  return ((is_real_float(out) && !op_keeps_denormals(k)) ||
          (is_cplx(out) && cplx_arith(k))) &&
         k != IRON_OP_CONSTANT && k != IRON_OP_CONVERT && k != IRON_OP_IOTA;
}

// The argument text of operand i of op: its value, wrapped in iron_daz
// where the op reads float denormals as zero.
static void arg_text(const iron_cuda_scalar_t *s, const iron_ir_op_t *op,
                     uint32_t i, const char *name, char *buf, size_t cap) {
  const iron_ir_value_t *v = op->operands[i];
  iron_dtype_t dt = wide_of(v->type->dtype);
  bool flush = s->flush && is_real_float(dt) && !op_keeps_denormals(op->kind);
  // remainder keeps a denormal dividend but reads a denormal divisor as
  // zero (XLA:CPU: rem(d, 1) = d, rem(1, d) = NaN, for f32 and f64 alike);
  // -ftz does that for f32, f64 needs the explicit flush.
  if (op->kind == IRON_OP_REMAINDER && i == 1)
    flush = s->flush && is_real_float(dt);
  if (op->kind == IRON_OP_CONVERT) {
    // XLA:CPU converts between f16/bf16/f32 with integer code (denormals
    // kept); f32 <-> f64 and float -> int/pred go through the FPU (flushed).
    iron_dtype_t to = op->results[0].type->dtype;
    bool same_comp = (is_f32ish(dt) && is_f32ish(to)) ||
                     (dt == IRON_DTYPE_F64 && to == IRON_DTYPE_F64);
    // Measured on the host's kernels (test_cuda_scalar_ops_emu): real ->
    // complex of the same part width keeps a denormal part, and f16/bf16
    // -> pred tests the bits (a bf16 denormal is true).
    bool keeps = (is_f32ish(dt) && to == IRON_DTYPE_C64) ||
                 (dt == IRON_DTYPE_F64 && to == IRON_DTYPE_C128) ||
                 (is_half(dt) && to == IRON_DTYPE_PRED);
    flush = flush && !same_comp && !keeps;
    // Converts from/to narrow dtypes flush as they need (narrow_convert).
    if (is_narrow(v->type->dtype) || is_narrow(to)) flush = false;
  }
  // Complex arithmetic flushes both parts of its operands (and results,
  // emit_plain) as XLA:CPU's FTZ/DAZ does; the GPU has no -ftz for the
  // f64 parts of c128 (fuzz_programs on the H100: denormal parts kept).
  // Converts to and from complex keep their rules above.
  if (s->flush && is_cplx(dt) && cplx_arith(op->kind)) flush = true;
  if (hw_flushes(s, op->kind, dt)) flush = false;
  // An operand computed in the same block by an op whose result the
  // emitter flushed (every generator emits such ops through it).
  if (flush && v->def_op && v->def_op->parent == op->parent &&
      result_flushed(s, v->def_op))
    flush = false;
  snprintf(buf, cap, flush ? "iron_daz(%s)" : "%s", name);
}

// Declares `var` = expression of dtype `out` (not narrow) with the
// result's rounding and flush (of an op of kind k; IRON_OP_IOTA: a value
// made from integers, rounded but not flushed).
static void emit_plain(const iron_cuda_scalar_t *s, iron_op_kind_t k,
                       iron_dtype_t out, const char *var, const char *expr) {
  const char *ct = iron_cuda_type(out).comp;
  const char *in = s->indent;
  bool flush_out = s->flush &&
                   ((is_real_float(out) && !op_keeps_denormals(k)) ||
                    (is_cplx(out) && cplx_arith(k))) &&
                   k != IRON_OP_CONSTANT && k != IRON_OP_CONVERT &&
                   k != IRON_OP_IOTA && !hw_flushes(s, k, out);
  if (body_raw_op(s, k, out)) {  // no rounding to f16/bf16
    iron_cuda_text_printf(s->t, "%sconst %s %s = %s%s%s;\n", in, ct, var,
                          flush_out ? "iron_daz(" : "", expr,
                          flush_out ? ")" : "");
    return;
  }
  // A select or reshape moves f16/bf16 values that are rounded already:
  // rounding again would change nothing but a NaN's payload (the hardware
  // rounding returns the canonical NaN), which the host and XLA:CPU keep
  // (fz_bf16_select_nan).
  bool moves = k == IRON_OP_SELECT || k == IRON_OP_RESHAPE;
  if ((out == IRON_DTYPE_F16 || out == IRON_DTYPE_BF16) && moves) {
    iron_cuda_text_printf(s->t, "%sconst float %s = %s;\n", in, var, expr);
  } else if (out == IRON_DTYPE_F16) {
    iron_cuda_text_printf(s->t, "%sconst float %s = iron_rnd_f16(%s);\n", in,
                          var, expr);
  } else if (out == IRON_DTYPE_BF16) {
    iron_cuda_text_printf(s->t, "%sconst float %s = iron_rnd_bf16(%s%s%s);\n",
                          in, var, flush_out ? "iron_daz(" : "", expr,
                          flush_out ? ")" : "");
  } else if (flush_out) {
    iron_cuda_text_printf(s->t, "%sconst %s %s = iron_daz(%s);\n", in, ct, var,
                          expr);
  } else {
    iron_cuda_text_printf(s->t, "%sconst %s %s = %s;\n", in, ct, var, expr);
  }
}

// A narrow result: the wide op's value (as the wide dtype's kernels round
// it), then rounded to the narrow dtype (ops that only move values skip
// that: their values are narrow already).
static void emit_result(const iron_cuda_scalar_t *s, iron_op_kind_t k,
                        iron_dtype_t out, const char *var, const char *expr) {
  iron_cuda_type_t ot = iron_cuda_type(out);
  if (!ot.is_narrow) {
    emit_plain(s, k, out, var, expr);
    return;
  }
  if (k == IRON_OP_SELECT || k == IRON_OP_RESHAPE || k == IRON_OP_CONVERT ||
      k == IRON_OP_CONSTANT) {
    iron_cuda_text_printf(s->t, "%sconst %s %s = %s;\n", s->indent, ot.comp,
                          var, expr);
    return;
  }
  char w[64];
  snprintf(w, sizeof(w), "%sw", var);
  emit_plain(s, k, ot.wide, w, expr);
  iron_cuda_text_printf(s->t, "%sconst %s %s = %s(%s(%s));\n", s->indent,
                        ot.comp, var, ot.ld, ot.st, w);
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

static iron_status_t refuse_dtype(const iron_ir_op_t *op, iron_dtype_t dt) {
  return iron_ir_op_unimplemented(op, "on the CUDA device for dtype %s",
                                  iron_dtype_name(dt));
}

iron_status_t iron_cuda_scalar_emit(const iron_cuda_scalar_t *s,
                                    const iron_ir_op_t *op,
                                    const char *const *args, const char *var) {
  iron_op_kind_t k = op->kind;
  if (!iron_cuda_scalar_op_supported(k))
    return iron_ir_op_unimplemented(op, "in generated CUDA code");
  if (op->num_results != 1 || !op->results[0].type ||
      op->results[0].type->kind != IRON_TYPE_TENSOR)
    return iron_ir_op_unimplemented(op, "on the CUDA device for this type");
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (!t || t->kind != IRON_TYPE_TENSOR)
      return iron_ir_op_unimplemented(op, "on the CUDA device for this type");
  }
  iron_dtype_t out = op->results[0].type->dtype;
  if (!held(out)) return refuse_dtype(op, out);
  // The f6 types only move and convert (types.h: no_arith), as on the
  // host, which refuses every other op on them.
  if (k != IRON_OP_SELECT && k != IRON_OP_CONVERT && k != IRON_OP_RESHAPE &&
      k != IRON_OP_CONSTANT) {
    if (iron_cuda_type(out).no_arith) return refuse_dtype(op, out);
    for (uint32_t i = 0; i < op->num_operands; ++i) {
      iron_dtype_t dt = op->operands[i]->type->dtype;
      if (iron_cuda_type(dt).no_arith) return refuse_dtype(op, dt);
    }
  }
  iron_op_class_t cls = iron_op_kind_class(k);
  uint32_t arity = cls == IRON_OP_CLASS_UNARY                       ? 1
                   : cls == IRON_OP_CLASS_BINARY                    ? 2
                   : k == IRON_OP_COMPARE                           ? 2
                   : (k == IRON_OP_SELECT || k == IRON_OP_CLAMP)    ? 3
                   : (k == IRON_OP_CONVERT || k == IRON_OP_RESHAPE) ? 1
                                                                    : 0;
  if (op->num_operands != arity) {
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected %u operands, got %u",
                    op->name, arity, op->num_operands);
  }
  char a[3][256];
  for (uint32_t i = 0; i < arity; ++i)
    arg_text(s, op, i, args[i], a[i], sizeof(a[i]));
  expr_t ex;
  expr_t *e = &ex;
  iron_dtype_t in = arity ? op->operands[0]->type->dtype : out;
  // Narrow dtypes run the wide dtype's expression (gen/types.h).
  iron_dtype_t inw = wide_of(in);
  bool n4 = in == IRON_DTYPE_S4 || in == IRON_DTYPE_U4;
  if (cls == IRON_OP_CLASS_UNARY) {
    bool ok;
    if (n4 && k == IRON_OP_CLZ) {  // counts in 4 bits (XLA:CPU)
      EXPR("iron_n4clz((int)%s)", a[0]);
      ok = out == in;
    } else {
      iron_dtype_t r = unary_result(k, inw);
      ok =
          held(in) && unary_expr(k, inw, a[0], e) && (r == inw ? in : r) == out;
    }
    if (!ok) return refuse_dtype(op, in);
  } else if (cls == IRON_OP_CLASS_BINARY) {
    IRON_RETURN_IF_ERROR_PLAIN(check_same_operand_dtypes(op, 0, 2));
    bool ok;
    if (n4 && (k == IRON_OP_SHIFT_RIGHT_LOGICAL ||
               k == IRON_OP_SHIFT_RIGHT_ARITHMETIC)) {  // shift in 4 bits
      EXPR("iron_n4shr%s((int)%s, (int)%s)",
           k == IRON_OP_SHIFT_RIGHT_LOGICAL ? "l" : "a", a[0], a[1]);
      ok = out == in;
    } else {
      iron_dtype_t r = binary_result(k, inw);
      ok = held(in) && binary_expr(s, k, inw, a[0], a[1], e) &&
           (r == inw ? in : r) == out;
    }
    if (!ok) return refuse_dtype(op, in);
  } else if (k == IRON_OP_COMPARE) {
    IRON_RETURN_IF_ERROR_PLAIN(check_same_operand_dtypes(op, 0, 2));
    if (out != IRON_DTYPE_PRED)
      return IRON_ERR(INVALID_ARGUMENT, "%s: result must be i1", op->name);
    int32_t dir = iron_ir_op_enum(op, "comparison_direction", -1);
    int32_t type = iron_ir_op_enum(op, "compare_type", IRON_CMP_TYPE_NOTYPE);
    bool total = type == IRON_CMP_TYPE_TOTALORDER && is_real_float(inw);
    // TOTALORDER compares bits: no flush of its operands.
    if (total) {
      snprintf(a[0], sizeof(a[0]), "%s", args[0]);
      snprintf(a[1], sizeof(a[1]), "%s", args[1]);
    }
    if (!held(in) ||
        !compare_expr(s, dir, total, type == IRON_CMP_TYPE_UNSIGNED, inw, a[0],
                      a[1], e)) {
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
    inw = wide_of(in);
    if (in != out || !held(in)) return refuse_dtype(op, in);
    if (is_int(inw)) {
      EXPR("iron_imin(iron_imax(%s, %s), %s)", a[1], a[0], a[2]);
    } else if (is_real_float(inw)) {
      EXPR("iron_fmin(iron_fmax(%s, %s), %s)", a[1], a[0], a[2]);
    } else {
      // Complex clamp: XLA:CPU's results fit no composition (host refuses).
      return refuse_dtype(op, in);
    }
  } else if (k == IRON_OP_CONVERT) {
    bool ok = is_narrow(in) || is_narrow(out)
                  ? narrow_convert_expr(in, out, a[0], s->flush, e)
                  : held(in) && iron_cuda_convert_expr(in, out, a[0], e->text,
                                                       sizeof(e->text));
    if (!ok) {
      return iron_ir_op_unimplemented(
          op, "on the CUDA device for dtype %s -> %s", iron_dtype_name(in),
          iron_dtype_name(out));
    }
  } else if (k == IRON_OP_RESHAPE) {
    // Values are indexed by the linear element index: a reshape of equal
    // count is the same value.
    if (iron_ir_type_num_elements(op->operands[0]->type) !=
            iron_ir_type_num_elements(op->results[0].type) ||
        in != out) {
      return IRON_ERR(INVALID_ARGUMENT, "%s: element counts or dtypes differ",
                      op->name);
    }
    EXPR("%s", a[0]);
  } else {  // IRON_OP_CONSTANT
    IRON_RETURN_IF_ERROR_PLAIN(constant_literal(op, e->text, sizeof(e->text)));
  }
  emit_result(s, k, out, var, e->text);
  return IRON_OK;
}

void iron_cuda_emit_rounded(const iron_cuda_scalar_t *s, iron_dtype_t out,
                            const char *var, const char *expr) {
  emit_result(s, IRON_OP_IOTA, out, var, expr);
}

void iron_cuda_emit_clamped_start(iron_cuda_text_t *t, const char *indent,
                                  const char *var, const char *value,
                                  iron_dtype_t dt, int64_t hi) {
  iron_cuda_text_printf(t, "%slong long %s = (long long)%s;\n", indent, var,
                        value);
  if (dt == IRON_DTYPE_U64)
    iron_cuda_text_printf(t,
                          "%sif ((uint64_t)%s > 0x7fffffffffffffffULL) %s = "
                          "0x7fffffffffffffffLL;\n",
                          indent, value, var);
  iron_cuda_text_printf(t, "%s%s = %s < 0 ? 0 : %s > %lldLL ? %lldLL : %s;\n",
                        indent, var, var, var, (long long)hi, (long long)hi,
                        var);
}
