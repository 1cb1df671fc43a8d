// Code generation of CUDA fusions: an element-wise DAG (unary/binary
// arithmetic, compare, select, clamp, convert, splat constants,
// broadcast_in_dim of inputs, iota, reshape, slice/transpose/dynamic_slice
// of inputs, dynamic_update_slice roots) becomes ONE kernel with N inputs
// and M outputs, or a __device__ function a reduce kernel calls. The
// single-op element-wise kernels (cuda_elementwise.c) are the one-op case.
//
// Semantics are XLA:CPU's, op by op (f16/bf16 results are rounded after
// every op, as separate kernels would), so fusing never changes a result.
#ifndef IRON_DEVICE_CUDA_GEN_FUSION_H_
#define IRON_DEVICE_CUDA_GEN_FUSION_H_

#include "base/status.h"
#include "device/cuda/cuda_fusion_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

// Generates the kernel `<name>(const S0 *in0, ..., S0 *out0, ...)` (storage
// pointers, in `inputs` / `outputs` order; source = prelude + body) or,
// with fusion->device_fn, that function alone (no prelude; *out_name is
// device_fn). On success *out_source / *out_name are malloc'ed.
// UNIMPLEMENTED naming the op for an op or dtype the generator refuses.
iron_status_t iron_cuda_codegen_fusion(const iron_cuda_fusion_t *fusion,
                                       char **out_source, char **out_name);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_GEN_FUSION_H_
