// CUDA kernels: dot_general (cuBLASLt), reductions, gather/scatter, rng.
// Each family lives in its own file; this registers them all.
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
