// stablehlo.while with scalar carried values as one CUDA kernel for one
// thread (gen/ops.h): the condition and body regions, translated by
// gen/region.c, alternate in a device loop (the glue is cuda_while.c).
#include "device/cuda/gen/ops.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/region.h"

static bool scalar_static(const iron_ir_type_t *t) {
  return t && t->kind == IRON_TYPE_TENSOR && t->rank == 0 &&
         t->dtype != IRON_DTYPE_TOKEN;
}

iron_status_t iron_cuda_gen_while(const char *name, const iron_ir_op_t *op,
                                  const iron_ir_module_t *module,
                                  char **out_src) {
  if (op->kind != IRON_OP_WHILE || op->num_regions != 2 ||
      op->num_operands != op->num_results || op->num_operands == 0)
    return IRON_ERR(UNIMPLEMENTED, "cuda device loop: not a simple while");
  uint32_t n = op->num_operands;
  iron_cuda_type_t ty[64];
  if (n > 64)
    return IRON_ERR(UNIMPLEMENTED, "cuda device loop of %u values", n);
  for (uint32_t i = 0; i < n; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (!scalar_static(t) || !iron_ir_type_equal(t, op->results[i].type))
      return IRON_ERR(UNIMPLEMENTED,
                      "cuda device loop: value %u is not a scalar", i);
    ty[i] = iron_cuda_type(t->dtype);
    if (!ty[i].store)
      return IRON_ERR(UNIMPLEMENTED, "cuda device loop of %s",
                      iron_dtype_name(t->dtype));
  }
  const iron_region_t cond_r = {.ir = &op->regions[0], .module = module};
  const iron_region_t body_r = {.ir = &op->regions[1], .module = module};
  const iron_ir_region_t *cond = cond_r.ir, *body = body_r.ir;
  if (cond->num_blocks != 1 || body->num_blocks != 1 ||
      cond->blocks[0].num_args != n || body->blocks[0].num_args != n)
    return IRON_ERR(UNIMPLEMENTED, "cuda device loop: region arguments");
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  iron_status_t st = iron_cuda_gen_region_fn(&t, "iron_cond", &cond_r);
  if (!st) st = iron_cuda_gen_region_fn(&t, "iron_body", &body_r);
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
  iron_cuda_type_t pt = iron_cuda_type_plain(IRON_DTYPE_PRED);
  iron_cuda_text_printf(&t, "for (;;) {\n%s p_;\niron_cond(", pt.comp);
  for (uint32_t i = 0; i < n; ++i) iron_cuda_text_printf(&t, "a%u, ", i);
  iron_cuda_text_printf(&t, "&p_);\nif (!p_) break;\n");
  for (uint32_t i = 0; i < n; ++i)
    iron_cuda_text_printf(&t, "%s n%u;\n", ty[i].comp, i);
  iron_cuda_text_printf(&t, "iron_body(");
  for (uint32_t i = 0; i < n; ++i) iron_cuda_text_printf(&t, "a%u, ", i);
  for (uint32_t i = 0; i < n; ++i)
    iron_cuda_text_printf(&t, "&n%u%s", i, i + 1 < n ? ", " : ");\n");
  for (uint32_t i = 0; i < n; ++i)
    iron_cuda_text_printf(&t, "a%u = n%u;\n", i, i);
  iron_cuda_text_printf(&t, "}\n");
  for (uint32_t i = 0; i < n; ++i)
    iron_cuda_text_printf(&t, "out%u[0] = %s(a%u);\n", i, ty[i].st, i);
  iron_cuda_text_printf(&t, "}\n");
  return iron_cuda_text_finish(&t, out_src);
}
