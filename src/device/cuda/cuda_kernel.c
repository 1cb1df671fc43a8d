// The CUDA device's kernel table: each kernel file registers its op kinds.
#include <pthread.h>

#include "device/cuda/cuda_device.h"

static iron_cuda_kernel_table_t g_table;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void table_init(void) {
  iron_cuda_register_elementwise(g_table);
  iron_cuda_register_shape(g_table);
  iron_cuda_register_ops(g_table);
}

const iron_host_kernel_t *iron_cuda_kernel_lookup(iron_op_kind_t kind) {
  pthread_once(&g_once, table_init);
  if ((int)kind < 0 || kind >= IRON_OP_COUNT) return NULL;
  return g_table[kind];
}
