// The launcher of generated kernels that take their operands' and results'
// device pointers as parameters (element-wise ops, fusions, fused reduces,
// narrow converts, and the data-movement kernels of cuda_shape.c): params
// built at prepare time, one launch (or a few, in order) at run time.
#ifndef IRON_DEVICE_CUDA_CUDA_LAUNCH_H_
#define IRON_DEVICE_CUDA_CUDA_LAUNCH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/cuda/cuda_compile.h"
#include "device/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

// Pointer parameters one launch of a generated kernel takes at most: 4 KB
// of kernel parameters, what every driver and NVRTC accept (fuse.c keeps
// fusions within IRON_FUSE_MAX_OPERANDS, which equals it).
#define IRON_CUDA_MAX_KERNEL_PARAMS 512

// Params of a prepared kernel `fn(in0, ..., out0, ...)` (pointers).
typedef struct iron_cuda_ew_params {
  iron_cuda_function_t *fn;
  uint32_t num_inputs, num_outputs;
  int64_t count;  // elements computed: 0 launches nothing
  unsigned grid, block;
  // Fusions with dynamic_update_slice roots: output dus_out[k] is input
  // dus_in[k] (dus_bytes[k] bytes) with the update written in place; when
  // the runtime did not give the output that input's storage, run copies
  // the input over first.
  uint32_t num_dus;
  uint32_t dus_out[16], dus_in[16];
  size_t dus_bytes[16];
} iron_cuda_ew_params_t;

// Launches a prepared kernel: inputs[i]->data / outputs[j]->data are
// device pointers. Graph-capturable.
iron_status_t iron_cuda_ew_run(const iron_kernel_ctx_t *ctx, const void *params,
                               const iron_tensor_t *const *inputs,
                               iron_tensor_t *const *outputs);

// Params of an op that runs as several generated kernels in order (a
// concatenate of more operands than one kernel takes): part k reads its
// num_inputs inputs from inputs[first_input[k]] on and writes the outputs.
typedef struct iron_cuda_ew_multi_params {
  uint32_t num_parts;
  iron_cuda_ew_params_t *parts;
  uint32_t *first_input;
} iron_cuda_ew_multi_params_t;
iron_status_t iron_cuda_ew_multi_run(const iron_kernel_ctx_t *ctx,
                                     const void *params,
                                     const iron_tensor_t *const *inputs,
                                     iron_tensor_t *const *outputs);
void iron_cuda_ew_multi_destroy(void *params);

// Launch shape for `count` elements on `dev` (grid-stride: 256-thread
// blocks, at most 32 per SM).
void iron_cuda_launch_dims(const iron_device_t *dev, int64_t count,
                           unsigned *out_grid, unsigned *out_block);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_LAUNCH_H_
