// Registers the CUDA op kernels that live in a file per family (the
// iron_cuda_register_* hooks of cuda_ops_internal.h) into the device's
// table; element-wise ops, fusions and data movement register themselves
// from cuda_kernel.c.
#include "device/cuda/cuda_host_staged.h"
#include "device/cuda/cuda_ops_internal.h"

void iron_cuda_register_ops(iron_cuda_kernel_table_t table) {
  iron_cuda_register_dot(table);
  iron_cuda_register_reduce(table);
  iron_cuda_register_gather(table);
  iron_cuda_register_rng(table);
  iron_cuda_register_sort(table);
  iron_cuda_register_window(table);
  iron_cuda_register_reduce_precision(table);
  iron_cuda_register_conv(table);
  iron_cuda_register_fft(table);
  iron_cuda_register_collective(table);
  iron_cuda_register_host_staged(table);
}
