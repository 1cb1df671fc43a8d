// Element-wise fusion for the CUDA device: a DAG of element-wise IR ops
// (unary/binary arithmetic, compare, select, clamp, convert, splat
// constants, broadcast_in_dim of inputs, iota, reshape) becomes ONE
// generated kernel with N inputs and M outputs, one thread per output
// element (grid-stride; 16-byte vectors per thread when no op needs
// coordinates).
// The single-op element-wise kernels (cuda_elementwise.c) are the one-op
// case; a fusion pass groups ops into an op with a region and prepares it
// with iron_cuda_fusion_kernel.
//
// Semantics are XLA:CPU's, op by op (f16/bf16 results are rounded after
// every op, as separate kernels would), so fusing never changes a result.
#ifndef IRON_DEVICE_CUDA_CUDA_FUSION_H_
#define IRON_DEVICE_CUDA_CUDA_FUSION_H_

#include <stdbool.h>
#include <stdint.h>

#include "device/cuda/cuda_compile.h"
#include "device/kernel.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// The DAG. `ops` in an order where every operand is defined earlier (or is
// one of `inputs`); `outputs` are values defined by the ops or inputs. Every
// output has the same element count N (the iteration space, with the dims
// of output 0). An input is read at the output's index when it has N
// elements and the dims of output 0, at 0 when it has one element, and
// otherwise only through broadcast_in_dim ops of the list.
typedef struct iron_cuda_fusion {
  uint32_t num_ops;
  const iron_ir_op_t *const *ops;
  uint32_t num_inputs;
  const iron_ir_value_t *const *inputs;
  uint32_t num_outputs;
  const iron_ir_value_t *const *outputs;
  // Used in error messages when an op is refused (may be NULL).
  const iron_ir_op_t *owner;
  // Non-NULL: generate no kernel but `static __device__ void
  // <device_fn>(const S0 *in0, ..., long long i, C0 &r0, ...)` that
  // computes the outputs' element i in compute types (float for f16/bf16,
  // bool for pred), without the prelude (a reduce kernel reads its inputs
  // through it; see cuda_gen_reduce.c).
  const char *device_fn;
} iron_cuda_fusion_t;

// True when the generator handles op kind `kind` inside a fusion (the dtype
// may still be refused by iron_cuda_codegen_fusion).
bool iron_cuda_fusion_op_supported(iron_op_kind_t kind);

// Generates the kernel: `in0..` (const storage pointers, in `inputs`
// order) then `out0..`. On success *out_source / *out_name are malloc'ed.
// UNIMPLEMENTED naming the op for an op or dtype the generator refuses.
iron_status_t iron_cuda_codegen_fusion(const iron_cuda_fusion_t *fusion,
                                       char **out_source, char **out_name);

// Params of a prepared generated element-wise kernel (single op or fusion).
typedef struct iron_cuda_ew_params {
  iron_cuda_function_t *fn;
  uint32_t num_inputs, num_outputs;
  int64_t count;  // iteration space
  unsigned grid, block;
  // Fusions with dynamic_update_slice roots: output dus_out[k] is input
  // dus_in[k] (dus_bytes[k] bytes) with the update written in place; when
  // the runtime did not give the output that input's storage, run copies
  // the input over first.
  uint32_t num_dus;
  uint32_t dus_out[16], dus_in[16];
  size_t dus_bytes[16];
} iron_cuda_ew_params_t;

// Generates, requests (compiled at plan_finish) and builds params for a
// fusion on `dev` (an iron_cuda_device_t).
iron_status_t iron_cuda_fusion_prepare(iron_device_t *dev,
                                       const iron_cuda_fusion_t *fusion,
                                       void **out_params);
// Launches a prepared kernel: inputs[i]->data / outputs[j]->data are
// device pointers.
iron_status_t iron_cuda_ew_run(const iron_kernel_ctx_t *ctx, const void *params,
                               const iron_tensor_t *const *inputs,
                               iron_tensor_t *const *outputs);

// The kernel for a fusion op: an op whose region 0 is one block whose
// arguments stand for the op's operands (in order) and whose terminator
// (stablehlo.return or func.return) returns the op's results; the block's
// other ops form the DAG. prepare_on only (code is generated from the
// region's IR; the compiled region is not used). Not in place.
extern const iron_kernel_t iron_cuda_fusion_kernel;

// convert where the operand or the result is a narrow dtype (f8 family,
// f4E2M1FN, s4/u4/s2/u2, one element per byte), with the host's semantics
// (src/device/host/ew_narrow.c). UNIMPLEMENTED for f8E8M0FNU and f6.
bool iron_cuda_dtype_is_narrow(iron_dtype_t dt);
iron_status_t iron_cuda_convert_narrow_prepare(iron_device_t *dev,
                                               const iron_ir_op_t *op,
                                               void **out_params);

// True for the dtypes the fusion generator computes: those with a C type
// (iron_cuda_ctype) and the narrow dtypes it widens (s4/u4 -> s8/u8,
// f8/f4E2M1FN -> f16, f8E8M0FNU -> f32, as XLA:CPU). Narrow values are
// stored one per byte (low bits).
bool iron_cuda_fusion_dtype_ok(iron_dtype_t dt);

// The libm function (double spelling; append "f" for float) computing a
// real float unary or binary op kind in one call, as the element-wise
// generator emits it ("exp", "log1p", "pow", ...); NULL for other kinds.
const char *iron_cuda_libm_name(iron_op_kind_t kind);

// False when IRON_CUDA_VECTORIZE=0: element-wise kernels then move one
// element per thread instead of 16-byte vectors.
bool iron_cuda_vectorize_enabled(void);

// Launch shape for `count` elements on `dev` (grid-stride).
void iron_cuda_launch_dims(const iron_device_t *dev, int64_t count,
                           unsigned *out_grid, unsigned *out_block);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_FUSION_H_
