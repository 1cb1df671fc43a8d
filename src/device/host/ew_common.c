// Run driver shared by the element-wise kernels (see ew_common.h).
#include "device/host/ew_common.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "base/dtype.h"

#include "base/fpenv.h"

// XLA:CPU runs its kernels with denormals flushed to zero (inputs read as
// zero, results flushed): sign(3e-39f) == 0, log(denormal) == -inf, f64
// 3e-39 -> f32 gives 0. We match it by setting the FTZ/DAZ bits for the
// duration of each run (on every thread that computes a chunk); the host
// device also sets them for whole jobs (device.h: flush_denormals), so
// reductions, dots and windows flush as well. IRON_HOST_DENORMALS=keep
// turns this off (IEEE gradual underflow).
static atomic_int g_flush = -1;

bool iron_ew_flush_enabled(void) {
  int f = atomic_load_explicit(&g_flush, memory_order_relaxed);
  if (f < 0) {
    const char *e = getenv("IRON_HOST_DENORMALS");
    f = !(e && strcmp(e, "keep") == 0);
    atomic_store_explicit(&g_flush, f, memory_order_relaxed);
  }
  return f != 0;
}

uint64_t iron_ew_fpenv_enter(void) {
  if (!iron_ew_flush_enabled()) return 0;
  return iron_fpenv_flush_enter() | (1ull << 32);
}

void iron_ew_fpenv_leave(uint64_t saved) {
  if (saved >> 32) iron_fpenv_restore(saved & 0xffffffffull);
}

// Below this many elements a loop runs inline; above it chunks of at least
// this size go to the pool (an f32 add of 16K elements takes a few us, so a
// smaller grain would cost more in hand-off than it saves).
#define IRON_EW_GRAIN 16384

typedef struct iron_ew_task {
  iron_ew_loop_fn_t fn;
  void *out;
  const void *in[IRON_EW_MAX_INPUTS];
} iron_ew_task_t;

static void iron_ew_task_chunk(void *arg, int64_t begin, int64_t end) {
  const iron_ew_task_t *t = arg;
  uint64_t env = iron_ew_fpenv_enter();
  t->fn(t->out, t->in, begin, end);
  iron_ew_fpenv_leave(env);
}

iron_status_t iron_ew_run(const iron_kernel_ctx_t *ctx, const void *params,
                          const iron_tensor_t *const *inputs,
                          iron_tensor_t *const *outputs) {
  const iron_ew_params_t *p = params;
  iron_tensor_t *out = outputs[0];
  int64_t n = out->count;
  if (n <= 0) return IRON_OK;
  iron_ew_task_t task = {0};
  task.out = out->data;
  unsigned mask = 0;
  for (int i = 0; i < p->num_inputs; ++i) {
    int64_t c = inputs[i]->count;
    task.in[i] = inputs[i]->data;
    if (c == n) continue;
    if (c != 1) {
      return IRON_ERR(INVALID_ARGUMENT,
                      "element-wise input %d has %lld elements, output %lld",
                      i, (long long)c, (long long)n);
    }
    mask |= 1u << i;
  }
  unsigned all = (1u << p->num_inputs) - 1;
  if (mask == all && n > 1) {
    // Every input is one element: compute it once and replicate.
    uint64_t env = iron_ew_fpenv_enter();
    p->fn[0](task.out, task.in, 0, 1);
    iron_ew_fpenv_leave(env);
    char *o = task.out;
    for (int64_t i = 1; i < n; ++i) {
      memcpy(o + (size_t)i * p->out_elem_size, o, p->out_elem_size);
    }
    return IRON_OK;
  }
  task.fn = p->fn[mask];
  if (!task.fn) {
    return IRON_ERR(INTERNAL, "element-wise kernel has no variant %u", mask);
  }
  if (!ctx || !ctx->pool || n < 2 * IRON_EW_GRAIN) {
    uint64_t env = iron_ew_fpenv_enter();
    task.fn(task.out, task.in, 0, n);
    iron_ew_fpenv_leave(env);
  } else {
    iron_threadpool_parallel_for(ctx->pool, n, IRON_EW_GRAIN,
                                 iron_ew_task_chunk, &task);
  }
  return IRON_OK;
}

iron_status_t iron_ew_check_shapes(const iron_ir_op_t *op,
                                   uint32_t num_operands) {
  if (op->num_operands != num_operands || op->num_results != 1) {
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected %u operands and 1 result",
                    op->name, num_operands);
  }
  const iron_ir_type_t *rt = op->results[0].type;
  if (!rt || rt->kind != IRON_TYPE_TENSOR) {
    return IRON_ERR(INVALID_ARGUMENT, "%s: result is not a tensor", op->name);
  }
  int64_t n = iron_ir_type_num_elements(rt);
  for (uint32_t i = 0; i < num_operands; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (!t || t->kind != IRON_TYPE_TENSOR) {
      return IRON_ERR(INVALID_ARGUMENT, "%s: operand %u is not a tensor",
                      op->name, i);
    }
    int64_t c = iron_ir_type_num_elements(t);
    // Dynamic shapes are checked at run time by count.
    if (n >= 0 && c >= 0 && c != n && c != 1) {
      return IRON_ERR(INVALID_ARGUMENT,
                      "%s: operand %u has %lld elements, result %lld",
                      op->name, i, (long long)c, (long long)n);
    }
  }
  return IRON_OK;
}

iron_status_t iron_ew_params_create(int num_inputs, iron_dtype_t out_dtype,
                                    const iron_ew_loop_fn_t *fns, int num_fns,
                                    void **out_params) {
  iron_ew_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->num_inputs = num_inputs;
  p->out_elem_size = iron_dtype_size(out_dtype);
  for (int i = 0; i < num_fns && i < IRON_EW_VARIANTS; ++i) p->fn[i] = fns[i];
  *out_params = p;
  return IRON_OK;
}
