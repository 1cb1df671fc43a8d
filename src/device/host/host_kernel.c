#include "device/host/host_kernel.h"

#include <pthread.h>

static iron_kernel_table_t g_table;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_table(void) {
  iron_host_register_fusion(g_table);
  iron_host_register_elementwise(g_table);
  iron_host_register_convert(g_table);
  iron_host_register_shape(g_table);
  iron_host_register_dot(g_table);
  iron_host_register_reduce(g_table);
  iron_host_register_rng(g_table);
  iron_host_register_sort(g_table);
  iron_host_register_window(g_table);
  iron_host_register_gather(g_table);
  iron_host_register_reduce_precision(g_table);
  iron_host_register_conv(g_table);
  iron_host_register_fft(g_table);
  iron_host_register_custom_call(g_table);
  iron_host_register_linalg(g_table);
  iron_host_register_collective(g_table);
}

const iron_kernel_t *iron_host_kernel_lookup(iron_op_kind_t kind) {
  pthread_once(&g_once, init_table);
  if ((unsigned)kind >= IRON_OP_COUNT) return NULL;
  return g_table[kind];
}

// The reference kernels of device/kernel.h are the host's.
const iron_kernel_t *iron_reference_kernel_lookup(iron_op_kind_t kind) {
  return iron_host_kernel_lookup(kind);
}
