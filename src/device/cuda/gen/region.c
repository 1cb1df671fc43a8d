// A region (reduce/scatter/window body, sort comparator, while condition
// and body) as a CUDA __device__ function over scalars in compute types
// (gen/region.h). CUDA kernels never call back into the runtime: the
// body's ops are translated one by one by the scalar emitter (scalar.h),
// in its region mode.
#include "device/cuda/gen/region.h"

#include <stdio.h>
#include <string.h>

#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/scalar.h"
#include "device/cuda/gen/types.h"

typedef struct region_gen {
  iron_cuda_scalar_t sc;
  // The module whose functions func.call ops name (NULL: calls refused).
  const iron_ir_module_t *module;
} region_gen_t;

// The C name of a value used inside `blk`: block arguments are a<i>, op
// results t<op>_<result>.
static bool value_name(const iron_ir_block_t *blk, const iron_ir_value_t *v,
                       char *buf, size_t cap) {
  if (!v->def_op) {
    if (v->def_block != blk && v->def_block) return false;
    snprintf(buf, cap, "a%u", v->index);
    return true;
  }
  for (uint32_t i = 0; i < blk->num_ops; ++i)
    if (blk->ops[i] == v->def_op) {
      snprintf(buf, cap, "t%u_%u", i, v->index);
      return true;
    }
  return false;
}

static bool scalar_type(const iron_ir_type_t *t) {
  return t && t->kind == IRON_TYPE_TENSOR && t->rank == 0;
}

// A rank-0 constant defined outside the region (jax's lowering shares one
// constant between a comparator's uses and the enclosing function):
// generated in place.
static bool outer_constant(const iron_ir_value_t *v) {
  return v->def_op && v->def_op->kind == IRON_OP_CONSTANT &&
         scalar_type(v->type);
}

// The name of operand/return value `v` of an op in `blk` in `buf`; outer
// constants are generated in place as k<tag>.
static iron_status_t operand_text(region_gen_t *g, const iron_ir_block_t *blk,
                                  const iron_ir_op_t *op,
                                  const iron_ir_value_t *v, const char *tag,
                                  char *buf, size_t cap) {
  if (value_name(blk, v, buf, cap)) return IRON_OK;
  if (!outer_constant(v))
    return iron_ir_op_unimplemented(op, "in a cuda region (outer value)");
  snprintf(buf, cap, "k%s", tag);
  return iron_cuda_scalar_emit(&g->sc, v->def_op, NULL, buf);
}

static iron_status_t emit_ops(region_gen_t *g, const iron_ir_block_t *blk,
                              int depth);

// func.call inside a region (jnp.where in a reduce body lowers to one):
// the callee's body is inlined in a scope of its own. Arguments and results
// pass through ci<depth>_<op>_<i> / cr<depth>_<op>_<i>, names no IR value
// gets, so the callee's names may shadow the caller's freely.
static iron_status_t emit_call(region_gen_t *g, const iron_ir_block_t *blk,
                               const iron_ir_op_t *op, uint32_t oi, int depth) {
  iron_cuda_text_t *t = g->sc.t;
  if (!g->module)
    return iron_ir_op_unimplemented(op, "in a cuda region (no module)");
  if (depth >= 8)
    return iron_ir_op_unimplemented(op,
                                    "in a cuda region (calls nested "
                                    "deeper than 8)");
  const char *name = iron_ir_op_string(op, "callee");
  if (name && name[0] == '@') name++;
  const iron_ir_func_t *f =
      name ? iron_ir_module_lookup(g->module, name) : NULL;
  if (!f || f->body.num_blocks != 1)
    return iron_ir_op_unimplemented(op, "in a cuda region (callee @%s)",
                                    name ? name : "?");
  const iron_ir_block_t *cb = &f->body.blocks[0];
  const iron_ir_op_t *ret = cb->num_ops ? cb->ops[cb->num_ops - 1] : NULL;
  if (cb->num_args != op->num_operands || !ret ||
      (ret->kind != IRON_OP_FUNC_RETURN && ret->kind != IRON_OP_RETURN) ||
      ret->num_operands != op->num_results)
    return IRON_ERR(INVALID_ARGUMENT, "%s: call of @%s does not match it",
                    op->name, name);
  char nm[48], tag[32];
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    const iron_ir_type_t *ty = op->operands[i]->type;
    iron_cuda_type_t ct = iron_cuda_type(ty ? ty->dtype : 0);
    if (!scalar_type(ty) || !ct.store)
      return iron_ir_op_unimplemented(op, "in a cuda region (non-scalar)");
    snprintf(tag, sizeof(tag), "%u_%u", oi, i);
    IRON_RETURN_IF_ERROR_PLAIN(
        operand_text(g, blk, op, op->operands[i], tag, nm, sizeof(nm)));
    iron_cuda_text_printf(t, "const %s ci%d_%u_%u = %s;\n", ct.comp, depth, oi,
                          i, nm);
  }
  for (uint32_t i = 0; i < op->num_results; ++i) {
    const iron_ir_type_t *ty = op->results[i].type;
    iron_cuda_type_t ct = iron_cuda_type(ty ? ty->dtype : 0);
    if (!scalar_type(ty) || !ct.store)
      return iron_ir_op_unimplemented(op, "in a cuda region (non-scalar)");
    iron_cuda_text_printf(t, "%s cr%d_%u_%u;\n", ct.comp, depth, oi, i);
  }
  iron_cuda_text_printf(t, "{\n");
  for (uint32_t i = 0; i < cb->num_args; ++i) {
    iron_cuda_type_t ct = iron_cuda_type(op->operands[i]->type->dtype);
    if (!cb->args[i].type ||
        cb->args[i].type->dtype != op->operands[i]->type->dtype)
      return IRON_ERR(INVALID_ARGUMENT,
                      "%s: argument %u of @%s has another "
                      "type",
                      op->name, i, name);
    iron_cuda_text_printf(t, "const %s a%u = ci%d_%u_%u;\n", ct.comp, i, depth,
                          oi, i);
  }
  IRON_RETURN_IF_ERROR_PLAIN(emit_ops(g, cb, depth + 1));
  for (uint32_t i = 0; i < ret->num_operands; ++i) {
    snprintf(tag, sizeof(tag), "r%u", i);
    IRON_RETURN_IF_ERROR_PLAIN(
        operand_text(g, cb, ret, ret->operands[i], tag, nm, sizeof(nm)));
    iron_cuda_text_printf(t, "cr%d_%u_%u = %s;\n", depth, oi, i, nm);
  }
  iron_cuda_text_printf(t, "}\n");
  for (uint32_t i = 0; i < op->num_results; ++i) {
    iron_cuda_type_t ct = iron_cuda_type(op->results[i].type->dtype);
    iron_cuda_text_printf(t, "const %s t%u_%u = cr%d_%u_%u;\n", ct.comp, oi, i,
                          depth, oi, i);
  }
  return IRON_OK;
}

// Emits every op of `blk` but its terminator; `depth` counts the calls
// being inlined (emit_call).
static iron_status_t emit_ops(region_gen_t *g, const iron_ir_block_t *blk,
                              int depth) {
  char names[3][40], dst[32];
  for (uint32_t oi = 0; oi + 1 < blk->num_ops; ++oi) {
    const iron_ir_op_t *op = blk->ops[oi];
    if (op->kind == IRON_OP_FUNC_CALL) {
      IRON_RETURN_IF_ERROR_PLAIN(emit_call(g, blk, op, oi, depth));
      continue;
    }
    if (op->num_results != 1 || !scalar_type(op->results[0].type) ||
        op->num_operands > 3)
      return iron_ir_op_unimplemented(op, "in a cuda region (non-scalar)");
    const char *args[3] = {NULL, NULL, NULL};
    for (uint32_t k = 0; k < op->num_operands; ++k) {
      char tag[24];
      snprintf(tag, sizeof(tag), "%u_%u", oi, k);
      IRON_RETURN_IF_ERROR_PLAIN(operand_text(g, blk, op, op->operands[k], tag,
                                              names[k], sizeof(names[k])));
      args[k] = names[k];
    }
    snprintf(dst, sizeof(dst), "t%u_0", oi);
    IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_scalar_emit(&g->sc, op, args, dst));
  }
  return IRON_OK;
}

iron_status_t iron_cuda_gen_region_fn(iron_cuda_text_t *t, const char *fname,
                                      const iron_region_t *body) {
  const iron_ir_region_t *region = body ? body->ir : NULL;
  if (!region || region->num_blocks != 1)
    return IRON_ERR(UNIMPLEMENTED, "cuda region: expected one block");
  const iron_ir_block_t *blk = &region->blocks[0];
  if (blk->num_ops == 0 || blk->ops[blk->num_ops - 1]->kind != IRON_OP_RETURN)
    return IRON_ERR(UNIMPLEMENTED, "cuda region: no return");
  const iron_ir_op_t *ret = blk->ops[blk->num_ops - 1];
  region_gen_t g = {
      .sc = {.t = t,
             .indent = "",
             .mode = IRON_CUDA_SCALAR_BODY,
             .flush = iron_cuda_flush_denormals()},
      .module = body->module,
  };
  // Signature.
  iron_cuda_text_printf(t, "__device__ __forceinline__ void %s(", fname);
  for (uint32_t i = 0; i < blk->num_args; ++i) {
    const iron_ir_type_t *ty = blk->args[i].type;
    iron_cuda_type_t ct = iron_cuda_type(ty ? ty->dtype : 0);
    if (!scalar_type(ty) || !ct.store)
      return IRON_ERR(UNIMPLEMENTED, "cuda region: argument %u is not a scalar",
                      i);
    iron_cuda_text_printf(t, "%sconst %s a%u", i ? ", " : "", ct.comp, i);
  }
  for (uint32_t i = 0; i < ret->num_operands; ++i) {
    iron_cuda_type_t ct = iron_cuda_type(ret->operands[i]->type->dtype);
    if (!ct.store)
      return IRON_ERR(UNIMPLEMENTED, "cuda region: result %u unsupported", i);
    iron_cuda_text_printf(t, "%s%s *r%u", (i || blk->num_args) ? ", " : "",
                          ct.comp, i);
  }
  iron_cuda_text_printf(t, ") {\n");
  IRON_RETURN_IF_ERROR_PLAIN(emit_ops(&g, blk, 0));
  char a[40];
  for (uint32_t i = 0; i < ret->num_operands; ++i) {
    char tag[24];
    snprintf(tag, sizeof(tag), "r%u", i);
    IRON_RETURN_IF_ERROR_PLAIN(
        operand_text(&g, blk, ret, ret->operands[i], tag, a, sizeof(a)));
    iron_cuda_text_printf(t, "*r%u = %s;\n", i, a);
  }
  iron_cuda_text_printf(t, "}\n");
  return IRON_OK;
}
