// convert from/to the narrow dtypes (f8 family, f4E2M1FN, f6E2M3FN,
// f6E3M2FN, s4/u4/s2/u2; one element per byte) as one generated kernel
// (gen/ops.h), with the host's semantics (src/device/host/ew_narrow.c):
// values pass through f64 (floats) or s64 (ints) and the regular
// conversions on the other side.
#include <stdio.h>

#include "device/cuda/gen/ops.h"
#include "device/cuda/gen/scalar.h"
#include "device/cuda/gen/source.h"

// Integers of 8 to 64 bits (not the narrow ones, nor pred).
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
static bool is_cplx(iron_dtype_t dt) {
  return dt == IRON_DTYPE_C64 || dt == IRON_DTYPE_C128;
}
static bool is_f32ish(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F32 || dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16;
}

// s4/u4/s2/u2: width and signedness.
static bool narrow_int(iron_dtype_t dt, int *bits, bool *sgn) {
  switch (dt) {
    case IRON_DTYPE_S4:
      *bits = 4;
      *sgn = true;
      return true;
    case IRON_DTYPE_U4:
      *bits = 4;
      *sgn = false;
      return true;
    case IRON_DTYPE_S2:
      *bits = 2;
      *sgn = true;
      return true;
    case IRON_DTYPE_U2:
      *bits = 2;
      *sgn = false;
      return true;
    default:
      return false;
  }
}

bool iron_cuda_dtype_is_narrow(iron_dtype_t dt) {
  int b;
  bool s;
  return iron_cuda_type(dt).nf_kind >= 0 || narrow_int(dt, &b, &s);
}

iron_status_t iron_cuda_gen_convert_narrow(const iron_ir_op_t *op,
                                           char **out_source, char **out_name) {
  iron_dtype_t from = op->operands[0]->type->dtype;
  iron_dtype_t to = op->results[0].type->dtype;
  iron_cuda_type_t ft = iron_cuda_type(from), tt = iron_cuda_type(to);
  const iron_cuda_type_t *sf = ft.nf_kind >= 0 ? &ft : NULL;
  const iron_cuda_type_t *df = tt.nf_kind >= 0 ? &tt : NULL;
  int sbits = 0, dbits = 0;
  bool ssg = false, dsg = false;
  bool si = narrow_int(from, &sbits, &ssg), di = narrow_int(to, &dbits, &dsg);
  bool sn = sf || si, dn = df || di;
  if ((!sn && !iron_cuda_ctype(from)) || (!dn && !iron_cuda_ctype(to)) ||
      (!sn && !dn)) {
    return iron_ir_op_unimplemented(op, "on the CUDA device for dtype %s -> %s",
                                    iron_dtype_name(from), iron_dtype_name(to));
  }
  bool src_is_int = si || (!sn && (is_int(from) || from == IRON_DTYPE_PRED));
  bool via_int = src_is_int && !df;
  bool nan_all_ones = df && to == IRON_DTYPE_F8E5M2 &&
                      (from == IRON_DTYPE_F16 || from == IRON_DTYPE_BF16);
  // f4E2M1FN's largest magnitude converts to integers as infinity
  // (XLA:CPU); the host keeps that rule to f4E2M1FN: the f6 types (the
  // same SAT kind) convert 7.5 / 28 as the values they are.
  bool sat_max_is_inf = sf && from == IRON_DTYPE_F4E2M1FN && (di || is_int(to));
  int64_t n = iron_ir_type_num_elements(op->results[0].type);
  int64_t nin = iron_ir_type_num_elements(op->operands[0]->type);
  if (n < 0 || (nin != n && nin != 1)) {
    return IRON_ERR(INVALID_ARGUMENT, "%s: element counts differ", op->name);
  }
  const char *idx = n <= ((int64_t)1 << 30) ? "int" : "long long";
  iron_cuda_text_t s;
  iron_cuda_text_init(&s);
  iron_cuda_text_printf(
      &s,
      "extern \"C\" __global__ void __launch_bounds__(256) %s(const %s *in0, "
      "%s *out0) {\n  IRON_LOOP(i, %s, %lldLL) {\n",
      IRON_CUDA_KERNEL_PLACEHOLDER, sn ? "uint8_t" : iron_cuda_ctype(from),
      dn ? "uint8_t" : iron_cuda_ctype(to), idx, (long long)n);
  const char *at = nin == 1 ? "0" : "i";
  const char *mt = via_int ? "long long" : "double";
  if (sf) {
    iron_cuda_text_printf(&s,
                          "    const unsigned b = in0[%s];\n"
                          "    %s m = iron_nf_decode(b, %d, %d, %d, %d);\n",
                          at, mt, sf->nf_ebits, sf->nf_mbits, sf->nf_bias,
                          sf->nf_kind);
    if (sat_max_is_inf) {
      unsigned mag = (1u << (sf->nf_ebits + sf->nf_mbits)) - 1;
      iron_cuda_text_printf(&s,
                            "    if ((b & %uu) == %uu) m = m < 0 ? -IRON_INF : "
                            "IRON_INF;\n",
                            mag, mag);
    }
  } else if (si) {
    unsigned mask = (1u << sbits) - 1, top = 1u << (sbits - 1);
    iron_cuda_text_printf(&s,
                          "    long long v = in0[%s] & %uu;\n"
                          "    if (%d && (v & %uu)) v -= %uLL;\n"
                          "    const %s m = (%s)v;\n",
                          at, mask, ssg ? 1 : 0, top, mask + 1, mt, mt);
  } else {
    char lv[32];
    snprintf(lv, sizeof(lv), "in0[%s]", at);
    iron_cuda_emit_load(&s, "    ", from, "x", lv, true);
    const char *re = is_cplx(from) ? "x.re" : "x";
    if (via_int) {
      iron_cuda_text_printf(&s, "    const long long m = (long long)%s;\n", re);
    } else if (is_f32ish(from) && iron_cuda_flush_denormals()) {
      iron_cuda_text_printf(&s, "    const double m = (double)iron_daz(%s);\n",
                            re);
    } else {
      iron_cuda_text_printf(&s, "    const double m = (double)(%s);\n", re);
    }
  }
  if (df) {
    iron_cuda_text_printf(&s,
                          "    uint8_t r = iron_nf_encode((double)m, %d, %d, "
                          "%d, %d);\n",
                          df->nf_ebits, df->nf_mbits, df->nf_bias, df->nf_kind);
    if (nan_all_ones) {
      iron_cuda_text_printf(&s, "    if (m != m) r |= 0x7f;\n");
    }
    iron_cuda_text_printf(&s, "    out0[i] = r;\n");
  } else if (di) {
    unsigned mask = (1u << dbits) - 1;
    if (via_int) {
      iron_cuda_text_printf(&s, "    out0[i] = (uint8_t)((uint64_t)m & %uu);\n",
                            mask);
    } else if (dsg) {
      iron_cuda_text_printf(
          &s,
          "    out0[i] = (uint8_t)((uint64_t)iron_f2s<int64_t>"
          "(m, %d) & %uu);\n",
          dbits, mask);
    } else {
      iron_cuda_text_printf(&s,
                            "    out0[i] = (uint8_t)(iron_f2u<uint64_t>(m, %d) "
                            "& %uu);\n",
                            dbits, mask);
    }
  } else {
    char ex[512];
    iron_dtype_t mid = via_int ? IRON_DTYPE_S64 : IRON_DTYPE_F64;
    if (!iron_cuda_convert_expr(mid, to, "m", ex, sizeof(ex))) {
      iron_cuda_text_free(&s);
      return iron_ir_op_unimplemented(
          op, "on the CUDA device for dtype %s -> %s", iron_dtype_name(from),
          iron_dtype_name(to));
    }
    char se[1200];
    iron_cuda_store_expr(to, ex, se, sizeof(se));
    iron_cuda_text_printf(&s, "    out0[i] = %s;\n", se);
  }
  iron_cuda_text_printf(&s, "  }\n}\n");
  return iron_cuda_source_make(&s, "iron_cvn", out_source, out_name);
}
