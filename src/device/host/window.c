// Placeholder: filled in by the kernel work for this file.
#include "device/host/host_kernel.h"

void iron_host_register_window(iron_host_kernel_table_t table) { (void)table; }
