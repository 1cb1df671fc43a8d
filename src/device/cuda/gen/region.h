// A region (reduce/scatter/window body, sort comparator, while condition
// and body) as a CUDA __device__ function over scalars.
#ifndef IRON_DEVICE_CUDA_GEN_REGION_H_
#define IRON_DEVICE_CUDA_GEN_REGION_H_

#include "base/status.h"
#include "device/cuda/gen/text.h"
#include "device/kernel.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Appends `__device__ void fname(const A0 a0, ..., R0 *r0, ...)` computing
// the region's results from its arguments, all in compute types
// (gen/types.h), to `t`. Each op goes through the scalar emitter
// (gen/scalar.h) in its region mode, so a region accepts every op a fusion
// does (and func.call, inlined from region->module); operands are rank-0.
// UNIMPLEMENTED naming the op for anything else.
iron_status_t iron_cuda_gen_region_fn(iron_cuda_text_t *t, const char *fname,
                                      const iron_region_t *region);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_GEN_REGION_H_
