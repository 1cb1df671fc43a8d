// CUDA kernels: shape ops (generated CUDA C; see cuda_codegen.h).
#include "device/cuda/cuda_device.h"

void iron_cuda_register_shape(iron_cuda_kernel_table_t table) { (void)table; }
