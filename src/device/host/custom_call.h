// stablehlo.custom_call on the host: targets by call_target_name.
//
// The host kernel of IRON_OP_CUSTOM_CALL (custom_call.c) finds the target,
// reads the op's operand_layouts/result_layouts and hands the target its
// operands and results in those physical layouts (XLA's contract: a custom
// call sees the layouts it declared). Tensors keep their logical dims; only
// the byte order of `data` follows the layout. Identity targets of sharding
// annotations never get here (the planner aliases them).
#ifndef IRON_DEVICE_HOST_CUSTOM_CALL_H_
#define IRON_DEVICE_HOST_CUSTOM_CALL_H_

#include "device/host/host_kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iron_host_custom_call_target {
  const char *name;  // for diagnostics
  // Compile time: validate the op (types, attributes, layouts) and build
  // params. Unsupported variants return iron_ir_op_unimplemented.
  iron_status_t (*prepare)(const iron_ir_op_t *op, void **out_params);
  // Execute time, as iron_kernel_t.run but in declared layouts.
  iron_status_t (*run)(const iron_kernel_ctx_t *ctx, const void *params,
                       const iron_tensor_t *const *inputs,
                       iron_tensor_t *const *outputs);
  void (*destroy)(void *params);  // optional: NULL means free()
} iron_host_custom_call_target_t;

// The LAPACK FFI targets jax's CPU lowerings emit ("lapack_dgetrf_ffi" ...),
// or NULL when `name` is not one (custom_call_lapack.c).
const iron_host_custom_call_target_t *iron_host_custom_call_lapack_find(
    const char *name);

// jaxlib's "tridiagonal_solve_perturbed_ffi" (custom_call_tridiag.c), or
// NULL when `name` is not it.
const iron_host_custom_call_target_t *iron_host_custom_call_tridiag_find(
    const char *name);

// The minor-to-major layout of operand (results: result) `index` of a
// custom call, written to out_m2m (rank entries). Absent layouts are the
// default row-major one. INVALID_ARGUMENT when malformed.
iron_status_t iron_host_custom_call_layout(const iron_ir_op_t *op,
                                           bool result, uint32_t index,
                                           int64_t *out_m2m);

// The value of `name` in the typed-FFI attribute dictionary of a custom call
// (mhlo.backend_config, or backend_config when it is a dictionary), or NULL.
const iron_ir_attr_t *iron_host_custom_call_ffi_attr(const iron_ir_op_t *op,
                                                     const char *name);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_HOST_CUSTOM_CALL_H_
