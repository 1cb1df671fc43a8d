// Row fusions on the CUDA device (src/compiler/fuse_rows.h): the
// predicate the pass asks, and the kernel of the iron.fusion ops it makes
// (gen/row.h describes the kernel). IRON_CUDA_ROW_FUSION: unset, the
// size heuristic below; 0: no row fusion; all: every row reduce the
// kernel supports.
#ifndef IRON_DEVICE_CUDA_CUDA_ROW_FUSION_H_
#define IRON_DEVICE_CUDA_CUDA_ROW_FUSION_H_

#include <stdbool.h>

#include "base/status.h"
#include "device/device.h"
#include "device/kernel.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// The device's iron_row_fuse_predicate_t: f16/bf16/f32/f64 reduces of one
// input whose body is add, multiply, maximum or minimum; trivial reduces
// (unit dims) always; row reduces of rows of at most 2^19 elements, and
// (unless IRON_CUDA_ROW_FUSION=all) with at least 128 rows or at most 2^20
// elements in all: with fewer, longer rows the reduce kernels' split over
// many blocks keeps more of the GPU busy.
bool iron_cuda_row_fusable(const iron_ir_op_t *reduce);

// Whether `fusion` (an iron.fusion op) is a row fusion: its region holds
// two reduces or more, or one that is not its last op before the return
// (a fused reduce, cuda_fusion.c, ends with its only reduce).
bool iron_cuda_fusion_is_row(const iron_ir_op_t *fusion);

// GPU-free: the kernel's complete source, name and launch shape for a row
// fusion op (num_sms sizes the grid). UNIMPLEMENTED naming the op for what
// the generator refuses ("in this CUDA fusion" when the fusion pass formed
// a group the generator cannot run: a bug).
iron_status_t iron_cuda_row_fusion_codegen(const iron_ir_op_t *fusion,
                                           int num_sms, char **out_source,
                                           char **out_name, unsigned *out_grid,
                                           unsigned *out_block);

// prepare_on of a row fusion: generates, requests (compiled at
// plan_finish) and fills iron_cuda_ew_params_t, so that iron_cuda_ew_run
// launches it (inputs, then outputs).
iron_status_t iron_cuda_row_fusion_prepare(iron_device_t *dev,
                                           const iron_ir_op_t *fusion,
                                           void **out_params);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_ROW_FUSION_H_
