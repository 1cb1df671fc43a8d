// Registration hooks and helpers shared by the CUDA op kernel files (one
// per op family: cuda_<family>.c); cuda_ops.c calls every hook from
// iron_cuda_register_ops.
#ifndef IRON_DEVICE_CUDA_CUDA_OPS_INTERNAL_H_
#define IRON_DEVICE_CUDA_CUDA_OPS_INTERNAL_H_

#include "device/cuda/cuda_device.h"
#include "device/cuda/gen/ops.h"

typedef struct iron_cuda_function iron_cuda_function_t;

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

// The one launch of an op whose kernel is generated whole (reduce, gather,
// scatter): the first member of their params, so that the CUDA emulation
// of the tests (tests/c/cuda_emu_exec.h) runs the same kernel on its grid.
// Arguments: the op's inputs then its results (reduce, gather); scatter
// passes its results, then its indices and updates, after copying each
// operand into its result.
typedef struct iron_cuda_op_launch {
  iron_cuda_function_t *fn;
  unsigned grid, block;
  bool skip;  // nothing to launch (no elements)
} iron_cuda_op_launch_t;

// The device's while_kernel entry (cuda_while.c): the one-thread loop
// kernel for a scalar while loop, or NULL. IRON_CUDA_DEVICE_LOOPS=0: NULL.
const iron_kernel_t *iron_cuda_while_kernel(const iron_ir_op_t *op);
bool iron_cuda_device_loops_enabled(void);

// Region i of `op` as the generators read it (gen/ops.h): the compiled
// region's IR and module, or the op's own IR without a module (func.call
// ops in it are then refused).
static inline iron_region_t iron_cuda_op_region(const iron_ir_op_t *op,
                                                iron_region_t *const *regions,
                                                uint32_t i) {
  iron_region_t r = {.ir = &op->regions[i], .module = NULL,
                     .elementwise = false};
  if (regions && regions[i]) r = *regions[i];
  return r;
}

// A generator's refusal (consumed) as UNIMPLEMENTED naming `op` and its
// source line, with the generator's reason.
iron_status_t iron_cuda_ops_refused(const iron_ir_op_t *op,
                                    iron_status_t generator_error);

// iron_cuda_function_request of a generated source whose kernel is
// `name`, renamed `name`_<hash of the source> (unique per kernel text).
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
