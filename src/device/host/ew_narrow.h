// convert from/to the narrow dtypes (f8 family, f4E2M1FN, s4/u4/s2/u2),
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
// the narrow dtypes not handled (f8E8M0FNU, f6*).
iron_status_t iron_ew_narrow_prepare(const iron_ir_op_t *op,
                                     iron_ew_convert_lookup_fn_t lookup,
                                     void **out_params);
iron_status_t iron_ew_narrow_run(const iron_host_ctx_t *ctx,
                                 const void *params,
                                 const iron_tensor_t *const *inputs,
                                 iron_tensor_t *const *outputs);

#endif  // IRON_DEVICE_HOST_EW_NARROW_H_
