// Host convert and bitcast_convert kernels.
//
// convert follows XLA:CPU (verified against jax 0.10.2's CPU backend by
// tests/gen_ew_vectors.py):
//   float -> int saturates at the bounds, NaN -> 0;
//   int -> int wraps (two's complement truncation);
//   anything -> pred is x != 0 (complex: real part != 0, the imaginary part
//   is ignored, as XLA:CPU does);
//   complex -> real takes the real part; real -> complex sets imag 0;
//   -> f16/bf16 goes through f32: f64 and wide ints are first rounded to f32
//   and then to the half type (double rounding, exactly as XLA:CPU does);
//   int -> f32/f64 rounds to nearest even.
// bitcast_convert copies bytes: the host stores every dtype of 8 bits or more
// densely in little-endian order, so any legal bitcast (same total bytes,
// including f32[4] <-> u8[4,4]) is a plain copy.
#include <stdlib.h>

#include "device/host/ew_common.h"
#include "device/host/ew_narrow.h"
#include "device/plans/bitcast_plan.h"

// Source dtypes: X(tok, DTYPE, storage, compute, load, class, dst...)
// class: I integer/pred, F real float, C complex.
#define CV_SRC_LIST(X, ...)                                                  \
  X(pred, PRED, uint8_t, uint8_t, EW_ID, I, __VA_ARGS__)                     \
  X(s8, S8, int8_t, int8_t, EW_ID, I, __VA_ARGS__)                           \
  X(s16, S16, int16_t, int16_t, EW_ID, I, __VA_ARGS__)                       \
  X(s32, S32, int32_t, int32_t, EW_ID, I, __VA_ARGS__)                       \
  X(s64, S64, int64_t, int64_t, EW_ID, I, __VA_ARGS__)                       \
  X(u8, U8, uint8_t, uint8_t, EW_ID, I, __VA_ARGS__)                         \
  X(u16, U16, uint16_t, uint16_t, EW_ID, I, __VA_ARGS__)                     \
  X(u32, U32, uint32_t, uint32_t, EW_ID, I, __VA_ARGS__)                     \
  X(u64, U64, uint64_t, uint64_t, EW_ID, I, __VA_ARGS__)                     \
  X(f16, F16, uint16_t, float, iron_f16_to_f32, F, __VA_ARGS__)              \
  X(bf16, BF16, uint16_t, float, iron_bf16_to_f32, F, __VA_ARGS__)           \
  X(f32, F32, float, float, EW_ID, F, __VA_ARGS__)                           \
  X(f64, F64, double, double, EW_ID, F, __VA_ARGS__)                         \
  X(c64, C64, float _Complex, float _Complex, EW_ID, C, __VA_ARGS__)         \
  X(c128, C128, double _Complex, double _Complex, EW_ID, C, __VA_ARGS__)

// Destination dtypes: X(tok, DTYPE, storage, kind, arg)
// kind: P pred, S signed (arg = bits), U unsigned (arg = bits), H half
// (arg = f32 -> storage), F native float, C complex.
#define CV_DST_LIST(X)                                     \
  X(pred, PRED, uint8_t, P, 1)                             \
  X(s8, S8, int8_t, S, 8)                                  \
  X(s16, S16, int16_t, S, 16)                              \
  X(s32, S32, int32_t, S, 32)                              \
  X(s64, S64, int64_t, S, 64)                              \
  X(u8, U8, uint8_t, U, 8)                                 \
  X(u16, U16, uint16_t, U, 16)                             \
  X(u32, U32, uint32_t, U, 32)                             \
  X(u64, U64, uint64_t, U, 64)                             \
  X(f16, F16, uint16_t, H, iron_f32_to_f16)                \
  X(bf16, BF16, uint16_t, H, iron_f32_to_bf16)             \
  X(f32, F32, float, F, 0)                                 \
  X(f64, F64, double, F, 0)                                \
  X(c64, C64, float _Complex, C, 0)                        \
  X(c128, C128, double _Complex, C, 0)

#define CV_I_P(x, T, A) (T)((x) != 0)
#define CV_F_P(x, T, A) (T)((x) != 0)
#define CV_C_P(x, T, A) (T)(creal(x) != 0)
#define CV_I_S(x, T, A) (T)(x)
#define CV_F_S(x, T, A) (T)ew_f2s((double)(x), A)
#define CV_C_S(x, T, A) (T)ew_f2s(creal(x), A)
#define CV_I_U(x, T, A) (T)(x)
#define CV_F_U(x, T, A) (T)ew_f2u((double)(x), A)
#define CV_C_U(x, T, A) (T)ew_f2u(creal(x), A)
#define CV_I_H(x, T, A) A((float)(x))
#define CV_F_H(x, T, A) A((float)(x))
#define CV_C_H(x, T, A) A((float)creal(x))
#define CV_I_F(x, T, A) (T)(x)
#define CV_F_F(x, T, A) (T)(x)
#define CV_C_F(x, T, A) (T)creal(x)
#define CV_I_C(x, T, A) (T)(x)
#define CV_F_C(x, T, A) (T)(x)
#define CV_C_C(x, T, A) (T)(x)

#define CV_DEF_PAIR(stok, SDT, SST, SCT, SLD, SCLS, dtok, DDT, DST, DK, DA) \
  static void cv_##stok##_##dtok(void *out_, const void *const *in,         \
                                 int64_t b, int64_t e) {                    \
    DST *restrict o = (DST *)out_;                                          \
    const SST *restrict a = (const SST *)in[0];                             \
    for (int64_t i = b; i < e; ++i) {                                       \
      SCT x = SLD(a[i]);                                                    \
      o[i] = CV_##SCLS##_##DK(x, DST, DA);                                  \
    }                                                                       \
  }
#define CV_ENT_PAIR(stok, SDT, SST, SCT, SLD, SCLS, dtok, DDT, DST, DK, DA) \
  {IRON_DTYPE_##SDT, IRON_DTYPE_##DDT, cv_##stok##_##dtok},
#define CV_DEF_DST(dtok, DDT, DST, DK, DA) \
  CV_SRC_LIST(CV_DEF_PAIR, dtok, DDT, DST, DK, DA)
#define CV_ENT_DST(dtok, DDT, DST, DK, DA) \
  CV_SRC_LIST(CV_ENT_PAIR, dtok, DDT, DST, DK, DA)

CV_DST_LIST(CV_DEF_DST)

typedef struct cv_entry {
  iron_dtype_t from, to;
  iron_ew_loop_fn_t fn;
} cv_entry_t;

// f16/bf16 -> pred test the bits: XLA:CPU says a bf16 denormal is true
// although f32 denormals convert to false (flushed to zero first).
static void cv_half_pred(void *out_, const void *const *in, int64_t b,
                         int64_t e) {
  uint8_t *restrict o = (uint8_t *)out_;
  const uint16_t *restrict a = (const uint16_t *)in[0];
  for (int64_t i = b; i < e; ++i) o[i] = (uint8_t)((a[i] & 0x7fffu) != 0);
}

// Searched in order: the overrides come first.
static const cv_entry_t kConvert[] = {
    {IRON_DTYPE_F16, IRON_DTYPE_PRED, cv_half_pred},
    {IRON_DTYPE_BF16, IRON_DTYPE_PRED, cv_half_pred},
    CV_DST_LIST(CV_ENT_DST)};

iron_ew_loop_fn_t iron_ew_convert_loop(iron_dtype_t from, iron_dtype_t to) {
  for (size_t i = 0; i < sizeof(kConvert) / sizeof(kConvert[0]); ++i) {
    if (kConvert[i].from == from && kConvert[i].to == to) {
      return kConvert[i].fn;
    }
  }
  return NULL;
}

static iron_status_t cv_prepare(const iron_ir_op_t *op,
                                iron_region_t *const *regions,
                                void **out_params) {
  (void)regions;
  IRON_RETURN_IF_ERROR_PLAIN(iron_ew_check_shapes(op, 1));
  iron_dtype_t from = op->operands[0]->type->dtype;
  iron_dtype_t to = op->results[0].type->dtype;
  if (iron_ew_narrow_is(from) || iron_ew_narrow_is(to)) {
    return iron_ew_narrow_prepare(op, iron_ew_convert_loop, out_params);
  }
  iron_ew_loop_fn_t fn = iron_ew_convert_loop(from, to);
  if (fn) return iron_ew_params_create(1, to, &fn, 1, out_params);
  return iron_ir_op_unimplemented(op, "for dtype %s -> %s",
                                  iron_dtype_name(from), iron_dtype_name(to));
}

// ---------------------------------------------------------------------------
// bitcast_convert

// A bitcast with a sub-byte side sees both sides as a little-endian bit
// stream (element 0 in the lowest bits, as XLA:CPU): a "unit" is an element
// of a sub-byte dtype or a byte of a dense one.
typedef struct bc_params {
  int in_unit, out_unit;  // bits per unit: 1, 2, 4 or 8
} bc_params_t;

static iron_status_t bc_run_sub(const bc_params_t *p, const iron_tensor_t *in,
                                iron_tensor_t *out) {
  const uint8_t *s = in->data;
  uint8_t *d = out->data;
  int bi = p->in_unit, bo = p->out_unit;
  unsigned mi = (1u << bi) - 1, mo = (1u << bo) - 1;
  size_t n_in = in->nbytes, n_out = out->nbytes;  // units (1 byte each)
  if (n_in * (size_t)bi != n_out * (size_t)bo) {
    return IRON_ERR(INVALID_ARGUMENT, "bitcast_convert: %zu bits in, %zu out",
                    n_in * (size_t)bi, n_out * (size_t)bo);
  }
  if (bo >= bi) {
    size_t r = (size_t)(bo / bi);
    for (size_t k = 0; k < n_out; ++k) {
      unsigned v = 0;
      for (size_t t = 0; t < r; ++t) {
        v |= (s[k * r + t] & mi) << (t * (size_t)bi);
      }
      d[k] = (uint8_t)(v & mo);
    }
  } else {
    size_t r = (size_t)(bi / bo);
    // Backwards so that an in-place run (out aliasing in) reads each input
    // byte before it is overwritten: output units k*r.. come from input k.
    for (size_t k = n_out; k-- > 0;) {
      d[k] = (uint8_t)(((s[k / r] & mi) >> ((k % r) * (size_t)bo)) & mo);
    }
  }
  return IRON_OK;
}
static iron_status_t bc_prepare(const iron_ir_op_t *op,
                                iron_region_t *const *regions,
                                void **out_params) {
  (void)regions;
  iron_bitcast_plan_t plan;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bitcast_plan_read(op, &plan));
  *out_params = NULL;
  if (!plan.sub) return IRON_OK;
  bc_params_t *p = malloc(sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->in_unit = plan.in_unit;
  p->out_unit = plan.out_unit;
  *out_params = p;
  return IRON_OK;
}

static iron_status_t bc_run(const iron_kernel_ctx_t *ctx, const void *params,
                            const iron_tensor_t *const *inputs,
                            iron_tensor_t *const *outputs) {
  (void)ctx;
  if (params) return bc_run_sub(params, inputs[0], outputs[0]);
  if (inputs[0]->nbytes != outputs[0]->nbytes) {
    return IRON_ERR(INVALID_ARGUMENT,
                    "bitcast_convert: %zu bytes in, %zu bytes out",
                    inputs[0]->nbytes, outputs[0]->nbytes);
  }
  if (outputs[0]->data != inputs[0]->data && inputs[0]->nbytes) {
    memcpy(outputs[0]->data, inputs[0]->data, inputs[0]->nbytes);
  }
  return IRON_OK;
}

static iron_status_t cv_run(const iron_kernel_ctx_t *ctx, const void *params,
                            const iron_tensor_t *const *inputs,
                            iron_tensor_t *const *outputs) {
  if (*(const uint32_t *)params == IRON_EW_NARROW_MAGIC) {
    return iron_ew_narrow_run(ctx, params, inputs, outputs);
  }
  return iron_ew_run(ctx, params, inputs, outputs);
}

static const iron_kernel_t kConvertKernel = {
    .name = "convert",
    .prepare = cv_prepare,
    .run = cv_run,
    .destroy = NULL,
    .inplace_ok = true,
    .elementwise = true,
};

// Not element-wise: the element counts differ when the element sizes do.
static const iron_kernel_t kBitcastKernel = {
    .name = "bitcast_convert",
    .prepare = bc_prepare,
    .run = bc_run,
    .destroy = NULL,
    .inplace_ok = true,
    .elementwise = false,
};

void iron_host_register_convert(iron_kernel_table_t table) {
  table[IRON_OP_CONVERT] = &kConvertKernel;
  table[IRON_OP_BITCAST_CONVERT] = &kBitcastKernel;
}
