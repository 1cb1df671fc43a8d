// Registration hooks and helpers shared by the CUDA op kernel files
// (cuda_dot.c, cuda_reduce.c, cuda_gather.c, cuda_rng.c); cuda_ops.c calls
// every hook from iron_cuda_register_ops.
#ifndef IRON_DEVICE_CUDA_CUDA_OPS_INTERNAL_H_
#define IRON_DEVICE_CUDA_CUDA_OPS_INTERNAL_H_

#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_ops_gen.h"

void iron_cuda_register_dot(iron_cuda_kernel_table_t table);
void iron_cuda_register_reduce(iron_cuda_kernel_table_t table);
void iron_cuda_register_gather(iron_cuda_kernel_table_t table);
void iron_cuda_register_rng(iron_cuda_kernel_table_t table);
void iron_cuda_register_sort(iron_cuda_kernel_table_t table);
void iron_cuda_register_window(iron_cuda_kernel_table_t table);
void iron_cuda_register_reduce_precision(iron_cuda_kernel_table_t table);
void iron_cuda_register_conv(iron_cuda_kernel_table_t table);
void iron_cuda_register_fft(iron_cuda_kernel_table_t table);
void iron_cuda_register_collective(iron_cuda_kernel_table_t table);

// The device's while_kernel entry (cuda_while.c): the one-thread loop
// kernel for a scalar while loop, or NULL. IRON_CUDA_DEVICE_LOOPS=0: NULL.
const iron_kernel_t *iron_cuda_while_kernel(const iron_ir_op_t *op);
bool iron_cuda_device_loops_enabled(void);

// Points the region generators (iron_cuda_gen_set_module) at the module of
// an op's compiled regions, for func.call in bodies; NULL clears it.
static inline void iron_cuda_ops_region_module(
    iron_region_t *const *regions) {
  iron_cuda_gen_set_module(regions && regions[0]
                               ? regions[0]->module
                               : NULL);
}

// iron_cuda_function_request of a generated source whose kernel is
// `name`, renamed `name`_<hash of the source> (unique per kernel text).
typedef struct iron_cuda_function iron_cuda_function_t;
// A generator's refusal (consumed) as UNIMPLEMENTED naming `op` and its
// source line, with the generator's reason.
iron_status_t iron_cuda_ops_refused(const iron_ir_op_t *op,
                                    iron_status_t generator_error);

iron_status_t iron_cuda_ops_request(iron_cuda_device_t *dev, const char *src,
                                    const char *name,
                                    iron_cuda_function_t **out_fn);

// A cublasStatus_t as a status naming the call (INTERNAL unless 0).
iron_status_t iron_cuda_lt_status(cublasStatus_t s, const char *what);

// Creates the device's cuBLASLt handle and workspace (dev->lt,
// dev->lt_workspace) on first use (cuda_dot.c).
iron_status_t iron_cuda_lt_ensure(iron_cuda_device_t *dev);

// Blocks of 256 threads covering `count` elements with a grid-stride loop
// (at least 1, at most 2^20 blocks).
static inline unsigned iron_cuda_ops_grid(int64_t count) {
  int64_t g = (count + 255) / 256;
  if (g < 1) g = 1;
  if (g > (1 << 20)) g = 1 << 20;
  return (unsigned)g;
}

#endif  // IRON_DEVICE_CUDA_CUDA_OPS_INTERNAL_H_
