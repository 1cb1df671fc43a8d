// The host device's kernel table: every kernel file registers its entries
// (src/device/kernel.h has the contract). The host's table is also the
// reference table every device plans regions with
// (iron_reference_kernel_lookup).
#ifndef IRON_DEVICE_HOST_HOST_KERNEL_H_
#define IRON_DEVICE_HOST_HOST_KERNEL_H_

#include "device/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

// The kernel for an op kind, or NULL if the host has none.
const iron_kernel_t *iron_host_kernel_lookup(iron_op_kind_t kind);

// Each kernel file fills its entries of the table (indexed by op kind).
// Called once from iron_host_kernel_lookup's table initialisation.
void iron_host_register_fusion(iron_kernel_table_t table);
// The host's fusion predicate under IRON_HOST_TEST_FUSION=1 (fusion.c).
bool iron_host_fusable_for_testing(const iron_ir_op_t *op);
void iron_host_register_elementwise(iron_kernel_table_t table);
void iron_host_register_convert(iron_kernel_table_t table);
void iron_host_register_shape(iron_kernel_table_t table);
void iron_host_register_dot(iron_kernel_table_t table);
void iron_host_register_reduce(iron_kernel_table_t table);
void iron_host_register_rng(iron_kernel_table_t table);
void iron_host_register_sort(iron_kernel_table_t table);
void iron_host_register_window(iron_kernel_table_t table);
void iron_host_register_gather(iron_kernel_table_t table);
void iron_host_register_reduce_precision(iron_kernel_table_t table);
void iron_host_register_conv(iron_kernel_table_t table);
void iron_host_register_fft(iron_kernel_table_t table);
void iron_host_register_custom_call(iron_kernel_table_t table);
void iron_host_register_linalg(iron_kernel_table_t table);
void iron_host_register_collective(iron_kernel_table_t table);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_HOST_HOST_KERNEL_H_
