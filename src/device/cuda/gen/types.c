// The generators' dtype table (types.h).
#include "device/cuda/gen/types.h"

#include <string.h>

// Narrow floats with an iron_nf_decode/encode format (the host's formats,
// src/base/narrow_float.c). `arith`: element-wise ops compute them as f16
// (XLA:CPU); the f6 types have no arithmetic (the host's
// iron_ew_narrow_wide gives none): they are loaded, stored, selected and
// converted only, and their store encodes the value directly.
typedef struct nf_row {
  iron_dtype_t dt;
  const char *ld, *st;
  int ebits, mbits, bias, kind;
  bool arith;
} nf_row_t;
static const nf_row_t kNarrowFloats[] = {
    {IRON_DTYPE_F8E5M2, "IRON_LD_F8E5M2", "IRON_ST_F8E5M2", 5, 2, 15, 0, true},
    {IRON_DTYPE_F8E4M3, "IRON_LD_F8E4M3", "IRON_ST_F8E4M3", 4, 3, 7, 0, true},
    {IRON_DTYPE_F8E3M4, "IRON_LD_F8E3M4", "IRON_ST_F8E3M4", 3, 4, 3, 0, true},
    {IRON_DTYPE_F8E4M3FN, "IRON_LD_F8E4M3FN", "IRON_ST_F8E4M3FN", 4, 3, 7, 1,
     true},
    {IRON_DTYPE_F8E4M3FNUZ, "IRON_LD_F8E4M3FNUZ", "IRON_ST_F8E4M3FNUZ", 4, 3, 8,
     2, true},
    {IRON_DTYPE_F8E5M2FNUZ, "IRON_LD_F8E5M2FNUZ", "IRON_ST_F8E5M2FNUZ", 5, 2,
     16, 2, true},
    {IRON_DTYPE_F8E4M3B11FNUZ, "IRON_LD_F8E4M3B11FNUZ", "IRON_ST_F8E4M3B11FNUZ",
     4, 3, 11, 2, true},
    {IRON_DTYPE_F4E2M1FN, "IRON_LD_F4E2M1FN", "IRON_ST_F4E2M1FN", 2, 1, 1, 3,
     true},
    {IRON_DTYPE_F6E2M3FN, "IRON_LD_F6E2M3FN", "IRON_ST_F6E2M3FN", 2, 3, 1, 3,
     false},
    {IRON_DTYPE_F6E3M2FN, "IRON_LD_F6E3M2FN", "IRON_ST_F6E3M2FN", 3, 2, 3, 3,
     false},
};
#define NUM_NF (sizeof(kNarrowFloats) / sizeof(kNarrowFloats[0]))

static const nf_row_t *narrow_float(iron_dtype_t dt) {
  for (size_t i = 0; i < NUM_NF; ++i)
    if (kNarrowFloats[i].dt == dt) return &kNarrowFloats[i];
  return NULL;
}

iron_cuda_type_t iron_cuda_type(iron_dtype_t dt) {
  iron_cuda_type_t t;
  memset(&t, 0, sizeof(t));
  t.dtype = dt;
  t.wide = dt;
  t.ld = t.st = "";
  t.nf_kind = -1;
#define PLAIN(S, INT, SGN) \
  t.store = t.comp = S;    \
  t.is_int = INT;          \
  t.is_signed = SGN;       \
  break
  switch (dt) {
    case IRON_DTYPE_PRED:
      // The stored byte as it is, as the host device reads a pred: a byte
      // other than 0/1 (a bitcast, numpy bytes viewed as bool) converts to
      // its value and combines bitwise (scalar.c); any non-zero is true.
      t.store = t.comp = "uint8_t";
      break;
    case IRON_DTYPE_S8:
      PLAIN("int8_t", true, true);
    case IRON_DTYPE_S16:
      PLAIN("int16_t", true, true);
    case IRON_DTYPE_S32:
      PLAIN("int32_t", true, true);
    case IRON_DTYPE_S64:
      PLAIN("int64_t", true, true);
    case IRON_DTYPE_U8:
      PLAIN("uint8_t", true, false);
    case IRON_DTYPE_U16:
      PLAIN("uint16_t", true, false);
    case IRON_DTYPE_U32:
      PLAIN("uint32_t", true, false);
    case IRON_DTYPE_U64:
      PLAIN("uint64_t", true, false);
    case IRON_DTYPE_F16:
      t.store = "uint16_t";
      t.comp = "float";
      t.ld = "iron_ld_f16";
      t.st = "iron_st_f16";
      t.ld_fast = "iron_ld_f16_hw";
      t.is_float = true;
      break;
    case IRON_DTYPE_BF16:
      t.store = "uint16_t";
      t.comp = "float";
      t.ld = "iron_ld_bf16";
      t.st = "iron_st_bf16";
      t.is_float = true;
      break;
    case IRON_DTYPE_F32:
      t.store = t.comp = "float";
      t.is_float = true;
      break;
    case IRON_DTYPE_F64:
      t.store = t.comp = "double";
      t.is_float = true;
      break;
    case IRON_DTYPE_C64:
      t.store = t.comp = "iron_c64";
      t.is_complex = true;
      break;
    case IRON_DTYPE_C128:
      t.store = t.comp = "iron_c128";
      t.is_complex = true;
      break;
    case IRON_DTYPE_S4:
      t.store = "uint8_t";
      t.comp = "int8_t";
      t.ld = "IRON_LD_S4";
      t.st = "IRON_ST_N4";
      t.wide = IRON_DTYPE_S8;
      t.is_int = t.is_signed = t.is_narrow = true;
      break;
    case IRON_DTYPE_U4:
      t.store = "uint8_t";
      t.comp = "uint8_t";
      t.ld = "IRON_LD_U4";
      t.st = "IRON_ST_N4";
      t.wide = IRON_DTYPE_U8;
      t.is_int = t.is_narrow = true;
      break;
    case IRON_DTYPE_F8E8M0FNU:  // 2^(b - 127), computed in f32 (XLA:CPU)
      t.store = "uint8_t";
      t.comp = "float";
      t.ld = "iron_e8m0_ld";
      t.st = "iron_e8m0_st";
      t.wide = IRON_DTYPE_F32;
      t.is_float = t.is_narrow = true;
      break;
    default: {
      const nf_row_t *f = narrow_float(dt);
      if (!f) break;
      t.store = "uint8_t";
      t.comp = "float";
      t.ld = f->ld;
      t.st = f->st;
      t.wide = f->arith ? IRON_DTYPE_F16 : IRON_DTYPE_INVALID;
      t.is_float = t.is_narrow = true;
      t.no_arith = !f->arith;
      t.nf_ebits = f->ebits;
      t.nf_mbits = f->mbits;
      t.nf_bias = f->bias;
      t.nf_kind = f->kind;
      break;
    }
  }
#undef PLAIN
  if (!t.ld_fast) t.ld_fast = t.ld;
  return t;
}

const char *iron_cuda_ctype(iron_dtype_t dt) {
  iron_cuda_type_t t = iron_cuda_type(dt);
  return t.is_narrow ? NULL : t.store;
}

const char *iron_cuda_bits_ctype(size_t elem_size) {
  switch (elem_size) {
    case 1:
      return "uint8_t";
    case 2:
      return "uint16_t";
    case 4:
      return "uint32_t";
    case 8:
      return "uint64_t";
    case 16:
      return "iron_b16";
    default:
      return NULL;
  }
}

bool iron_cuda_nf_format(iron_dtype_t dt, int *out_ebits, int *out_mbits,
                         int *out_bias, int *out_kind) {
  const nf_row_t *f = narrow_float(dt);
  if (!f) return false;
  *out_ebits = f->ebits;
  *out_mbits = f->mbits;
  *out_bias = f->bias;
  *out_kind = f->kind;
  return true;
}

void iron_cuda_prelude_narrow_macros(iron_cuda_text_t *t) {
  for (size_t i = 0; i < NUM_NF; ++i) {
    const nf_row_t *f = &kNarrowFloats[i];
    iron_cuda_text_printf(t,
                          "#define %s(b) IRON_LD_NF_(b, %d, %d, %d, %d)\n"
                          "#define %s(x) %s(x, %d, %d, %d, %d)\n",
                          f->ld, f->ebits, f->mbits, f->bias, f->kind, f->st,
                          f->arith ? "IRON_ST_NF_" : "IRON_ST_NFD_", f->ebits,
                          f->mbits, f->bias, f->kind);
  }
}
