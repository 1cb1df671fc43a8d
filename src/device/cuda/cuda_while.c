// stablehlo.while as one CUDA kernel: a loop whose carried values are all
// scalars and whose condition and body the region generator translates
// (element-wise ops, compares, selects, converts, constants) runs in one
// GPU thread, condition and body alternating with no host round trip per
// iteration (a scalar while_loop of 10,000 iterations costs one launch).
// Loops over arrays keep running step by step (the planner's WHILE step).
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_ops_gen.h"
#include "device/cuda/cuda_ops_internal.h"

bool iron_cuda_device_loops_enabled(void) {
  const char *e = getenv("IRON_CUDA_DEVICE_LOOPS");  // compile time only
  return !(e && strcmp(e, "0") == 0);
}

static bool scalar_static(const iron_ir_type_t *t) {
  return t && t->kind == IRON_TYPE_TENSOR && t->rank == 0 &&
         t->dtype != IRON_DTYPE_TOKEN;
}

iron_status_t iron_cuda_gen_while(const char *name, const iron_ir_op_t *op,
                                  char **out_src) {
  if (op->kind != IRON_OP_WHILE || op->num_regions != 2 ||
      op->num_operands != op->num_results || op->num_operands == 0)
    return IRON_ERR(UNIMPLEMENTED, "cuda device loop: not a simple while");
  uint32_t n = op->num_operands;
  iron_cuda_gen_type_t ty[64];
  if (n > 64)
    return IRON_ERR(UNIMPLEMENTED, "cuda device loop of %u values", n);
  for (uint32_t i = 0; i < n; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (!scalar_static(t) || !iron_ir_type_equal(t, op->results[i].type))
      return IRON_ERR(UNIMPLEMENTED,
                      "cuda device loop: value %u is not a scalar", i);
    ty[i] = iron_cuda_gen_type_narrow(t->dtype);
    if (!ty[i].store)
      return IRON_ERR(UNIMPLEMENTED, "cuda device loop of %s",
                      iron_dtype_name(t->dtype));
  }
  const iron_ir_region_t *cond = &op->regions[0], *body = &op->regions[1];
  if (cond->num_blocks != 1 || body->num_blocks != 1 ||
      cond->blocks[0].num_args != n || body->blocks[0].num_args != n)
    return IRON_ERR(UNIMPLEMENTED, "cuda device loop: region arguments");
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_ops_prelude());
  iron_status_t st = iron_cuda_gen_region_fn(&t, "iop_cond", cond);
  if (!st) st = iron_cuda_gen_region_fn(&t, "iop_body", body);
  if (st) {
    iron_cuda_text_free(&t);
    return st;
  }
  iron_cuda_text_printf(&t, "extern \"C\" __global__ void %s(", name);
  for (uint32_t i = 0; i < n; ++i)
    iron_cuda_text_printf(&t, "const %s *__restrict__ in%u, ", ty[i].store, i);
  for (uint32_t i = 0; i < n; ++i)
    iron_cuda_text_printf(&t, "%s *__restrict__ out%u%s", ty[i].store, i,
                          i + 1 < n ? ", " : ") {\n");
  for (uint32_t i = 0; i < n; ++i)
    iron_cuda_text_printf(&t, "%s a%u = %s(in%u[0]);\n", ty[i].comp, i,
                          ty[i].ld, i);
  // The condition returns one i1 (the planner checked the region shapes
  // of every while; the generator checks the rest).
  iron_cuda_gen_type_t pt = iron_cuda_gen_type(IRON_DTYPE_PRED);
  iron_cuda_text_printf(&t, "for (;;) {\n%s p_;\niop_cond(", pt.comp);
  for (uint32_t i = 0; i < n; ++i) iron_cuda_text_printf(&t, "a%u, ", i);
  iron_cuda_text_printf(&t, "&p_);\nif (!p_) break;\n");
  for (uint32_t i = 0; i < n; ++i)
    iron_cuda_text_printf(&t, "%s n%u;\n", ty[i].comp, i);
  iron_cuda_text_printf(&t, "iop_body(");
  for (uint32_t i = 0; i < n; ++i) iron_cuda_text_printf(&t, "a%u, ", i);
  for (uint32_t i = 0; i < n; ++i)
    iron_cuda_text_printf(&t, "&n%u%s", i, i + 1 < n ? ", " : ");\n");
  for (uint32_t i = 0; i < n; ++i) iron_cuda_text_printf(&t, "a%u = n%u;\n", i, i);
  iron_cuda_text_printf(&t, "}\n");
  for (uint32_t i = 0; i < n; ++i)
    iron_cuda_text_printf(&t, "out%u[0] = %s(a%u);\n", i, ty[i].st, i);
  iron_cuda_text_printf(&t, "}\n");
  return iron_cuda_text_finish(&t, out_src);
}

typedef struct while_params {
  uint32_t n;
  iron_cuda_function_t *fn;
} while_params_t;

static iron_status_t while_prepare_on(iron_device_t *base,
                                      const iron_ir_op_t *op,
                                      iron_region_t *const *regions,
                                      void **out_params) {
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  char *src = NULL;
  iron_cuda_ops_region_module(regions);
  iron_status_t st = iron_cuda_gen_while("iron_while", op, &src);
  iron_cuda_ops_region_module(NULL);
  if (st) return iron_cuda_ops_refused(op, st);
  while_params_t *p = calloc(1, sizeof(*p));
  if (!p) {
    free(src);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  }
  p->n = op->num_operands;
  st = iron_cuda_ops_request(dev, src, "iron_while", &p->fn);
  free(src);
  if (st) {
    free(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t while_run(const iron_kernel_ctx_t *ctx,
                               const void *params,
                               const iron_tensor_t *const *inputs,
                               iron_tensor_t *const *outputs) {
  const while_params_t *p = params;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  void *ptrs[128];
  void *args[128];
  for (uint32_t i = 0; i < p->n; ++i) {
    ptrs[i] = inputs[i]->data;
    ptrs[p->n + i] = outputs[i]->data;
  }
  for (uint32_t i = 0; i < 2 * p->n; ++i) args[i] = &ptrs[i];
  return iron_cuda_launch(dev, p->fn, 1, 1, 1, 1, 0, args);
}

// Each thread reads its carried values before the loop and writes them
// after it: in place is fine.
static const iron_kernel_t kWhile = {.name = "cuda_while",
                                     .run = while_run,
                                     .inplace_ok = true,
                                     .prepare_on = while_prepare_on,
                                     .graph_capturable = true};

const iron_kernel_t *iron_cuda_while_kernel(const iron_ir_op_t *op) {
  if (!iron_cuda_device_loops_enabled()) return NULL;
  // Accept exactly what the generator translates (without the module: a
  // loop calling functions keeps running step by step).
  char *src = NULL;
  iron_status_t st = iron_cuda_gen_while("iron_while", op, &src);
  free(src);
  if (st) {
    iron_status_free(st);
    return NULL;
  }
  return &kWhile;
}
