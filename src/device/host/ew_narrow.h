// convert from/to the narrow dtypes (f8 family, f4E2M1FN, f6, s4/u4/s2/u2),
// used by the convert kernel (convert.c). See ew_narrow.c for semantics.
#ifndef IRON_DEVICE_HOST_EW_NARROW_H_
#define IRON_DEVICE_HOST_EW_NARROW_H_

#include "device/host/ew_common.h"

// First field of the narrow params, so convert's run can tell them from
// iron_ew_params_t (whose `magic` is 0).
#define IRON_EW_NARROW_MAGIC 0x4e52u

// The regular convert loop from -> to, or NULL.
typedef iron_ew_loop_fn_t (*iron_ew_convert_lookup_fn_t)(iron_dtype_t from,
                                                         iron_dtype_t to);

// True for the dtypes handled here.
bool iron_ew_narrow_is(iron_dtype_t dt);
// Prepares convert(op) where operand or result is narrow; UNIMPLEMENTED for
// the pairs not handled (f8E8M0FNU -> s4/u4/s2/u2).
iron_status_t iron_ew_narrow_prepare(const iron_ir_op_t *op,
                                     iron_ew_convert_lookup_fn_t lookup,
                                     void **out_params);
iron_status_t iron_ew_narrow_run(const iron_kernel_ctx_t *ctx,
                                 const void *params,
                                 const iron_tensor_t *const *inputs,
                                 iron_tensor_t *const *outputs);

// The regular (non-narrow) convert loop from -> to of convert.c, or NULL.
iron_ew_loop_fn_t iron_ew_convert_loop(iron_dtype_t from, iron_dtype_t to);

// The value of an operand element of dot/convolution in a narrow float
// dtype (iron_dot_plan_narrow_is; exact in f32), and a result element from
// its f32 value; f8E8M0FNU by its f32 bits, the f32 dot flushing denormals
// (2^-127, 0x00, reads as 0; a denormal result as 0, which is NaN in
// f8E8M0FNU) unless IRON_HOST_DENORMALS=keep.
double iron_ew_narrow_dot_load(iron_dtype_t dt, unsigned bits);
uint8_t iron_ew_narrow_dot_store(iron_dtype_t dt, float v);

// Element-wise ops on narrow dtypes. XLA:CPU has no arithmetic of its own
// for them: its FloatNormalization pass converts the operands to a wider
// dtype, runs the op there and converts the result back (s4 -> s8,
// u4 -> u8, f8 and f4E2M1FN -> f16, f8E8M0FNU -> f32). These helpers do the
// same around the wide dtype's loops.
#define IRON_EW_WRAP_MAGIC 0x4e57u

// The dtype dt is computed in, or INVALID where not handled here (s2/u2,
// which XLA:CPU computes natively in 2 bits; the f6 types, which XLA:CPU
// has no arithmetic for).
iron_dtype_t iron_ew_narrow_wide(iron_dtype_t dt);
// Params (freed with free()) for an op with num_inputs inputs of dtypes
// in[i]: each input whose dtype differs from in_wide[i] is converted to it,
// then the wide loop fns[variant] (as in iron_ew_params_t) runs, producing
// out_wide, which is converted to out when they differ.
iron_status_t iron_ew_narrow_wrap_create(int num_inputs,
                                         const iron_dtype_t *in,
                                         const iron_dtype_t *in_wide,
                                         iron_dtype_t out_wide,
                                         iron_dtype_t out,
                                         const iron_ew_loop_fn_t *fns,
                                         void **out_params);
iron_status_t iron_ew_narrow_wrap_run(const iron_kernel_ctx_t *ctx,
                                      const void *params,
                                      const iron_tensor_t *const *inputs,
                                      iron_tensor_t *const *outputs);

#endif  // IRON_DEVICE_HOST_EW_NARROW_H_
