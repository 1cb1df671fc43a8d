// The CUDA device's fusion kernels. A fusion (a group of element-wise ops
// fuse.c formed into an iron.fusion op, or one element-wise op) is planned
// by cuda_fusion_plan.h, generated as one kernel by gen/fusion.h and
// launched by cuda_launch.h; this file's entry points prepare it on a
// device. (The headers of those three are included for the callers that
// take the fusion struct, the generator or the launcher from here.)
#ifndef IRON_DEVICE_CUDA_CUDA_FUSION_H_
#define IRON_DEVICE_CUDA_CUDA_FUSION_H_

#include <stdbool.h>
#include <stdint.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_fusion_plan.h"
#include "device/cuda/cuda_launch.h"
#include "device/cuda/gen/fusion.h"
#include "device/kernel.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Generates, requests (compiled at plan_finish) and builds params
// (iron_cuda_ew_params_t, run by iron_cuda_ew_run) for a fusion on `dev`
// (an iron_cuda_device_t).
iron_status_t iron_cuda_fusion_prepare(iron_device_t *dev,
                                       const iron_cuda_fusion_t *fusion,
                                       void **out_params);

// The kernel for a fusion op: an op whose region 0 is one block whose
// arguments stand for the op's operands (in order) and whose terminator
// (stablehlo.return or func.return) returns the op's results; the block's
// other ops form the DAG (or, ending in stablehlo.reduce, the reduce's
// fused producers). prepare_on only (code is generated from the region's
// IR; the compiled region is not used). Not in place.
extern const iron_kernel_t iron_cuda_fusion_kernel;

// True for the dtypes generated code holds (gen/types.h): those with a C
// type and the narrow dtypes it computes as wider ones (s4/u4 -> s8/u8,
// f8/f4E2M1FN -> f16, f8E8M0FNU -> f32, as XLA:CPU). Narrow values are
// stored one per byte (low bits).
bool iron_cuda_fusion_dtype_ok(iron_dtype_t dt);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_FUSION_H_
