#include "compiler/tuple_forward.h"

#include <stdlib.h>

typedef struct {
  uint32_t num_values;
  iron_ir_value_t **replace;  // per value id: what uses read instead, or NULL
  uint32_t *uses;             // per value id, after rewriting
  bool changed;
} tuple_ctx_t;

static iron_ir_value_t *tuple_resolve(const tuple_ctx_t *c,
                                      iron_ir_value_t *v) {
  while (v->id < c->num_values && c->replace[v->id] != NULL)
    v = c->replace[v->id];
  return v;
}

static iron_status_t tuple_rewrite_block(tuple_ctx_t *c, iron_ir_block_t *blk);

static iron_status_t tuple_rewrite_op(tuple_ctx_t *c, iron_ir_op_t *op) {
  for (uint32_t i = 0; i < op->num_operands; ++i)
    op->operands[i] = tuple_resolve(c, op->operands[i]);
  for (uint32_t r = 0; r < op->num_regions; ++r)
    for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b)
      IRON_RETURN_IF_ERROR_PLAIN(
          tuple_rewrite_block(c, &op->regions[r].blocks[b]));
  if (op->kind != IRON_OP_GET_TUPLE_ELEMENT || op->num_operands != 1 ||
      op->num_results != 1)
    return IRON_OK;
  const iron_ir_op_t *def = op->operands[0]->def_op;
  if (def == NULL || def->kind != IRON_OP_TUPLE) return IRON_OK;
  int64_t index = -1;
  if (!iron_ir_attr_as_i64(iron_ir_op_attr(op, "index"), &index) ||
      index < 0 || index >= (int64_t)def->num_operands)
    return iron_ir_op_unimplemented(op, "with index %lld of a %u-tuple",
                                    (long long)index, def->num_operands);
  if (op->results[0].id < c->num_values) {
    c->replace[op->results[0].id] = def->operands[index];
    c->changed = true;
  }
  return IRON_OK;
}

static iron_status_t tuple_rewrite_block(tuple_ctx_t *c, iron_ir_block_t *blk) {
  for (uint32_t k = 0; k < blk->num_ops; ++k)
    IRON_RETURN_IF_ERROR_PLAIN(tuple_rewrite_op(c, blk->ops[k]));
  return IRON_OK;
}

static void tuple_count_uses(tuple_ctx_t *c, const iron_ir_block_t *blk) {
  for (uint32_t k = 0; k < blk->num_ops; ++k) {
    const iron_ir_op_t *op = blk->ops[k];
    for (uint32_t i = 0; i < op->num_operands; ++i)
      if (op->operands[i]->id < c->num_values) c->uses[op->operands[i]->id]++;
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b)
        tuple_count_uses(c, &op->regions[r].blocks[b]);
  }
}

// Drops forwarded get_tuple_elements, then tuples nobody reads any more.
// Returns how many ops it removed, nested regions included.
static uint32_t tuple_remove_dead(tuple_ctx_t *c, iron_ir_block_t *blk) {
  uint32_t kept = 0, removed = 0;
  for (uint32_t k = 0; k < blk->num_ops; ++k) {
    iron_ir_op_t *op = blk->ops[k];
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b)
        removed += tuple_remove_dead(c, &op->regions[r].blocks[b]);
    bool dead = false;
    if ((op->kind == IRON_OP_GET_TUPLE_ELEMENT || op->kind == IRON_OP_TUPLE) &&
        op->num_results == 1 && op->results[0].id < c->num_values)
      dead = c->uses[op->results[0].id] == 0 &&
             (op->kind == IRON_OP_TUPLE ||
              c->replace[op->results[0].id] != NULL);
    if (dead)
      removed++;
    else
      blk->ops[kept++] = op;
  }
  blk->num_ops = kept;
  return removed;
}

iron_status_t iron_compiler_tuple_forward(iron_ir_module_t *module) {
  for (uint32_t f = 0; f < module->num_funcs; ++f) {
    iron_ir_func_t *fn = &module->funcs[f];
    tuple_ctx_t c = {.num_values = fn->num_values};
    c.replace = calloc(fn->num_values + 1, sizeof(*c.replace));
    c.uses = calloc(fn->num_values + 1, sizeof(*c.uses));
    if (c.replace == NULL || c.uses == NULL) {
      free(c.replace);
      free(c.uses);
      return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
    }
    iron_status_t st = IRON_OK;
    for (uint32_t b = 0; b < fn->body.num_blocks && st == IRON_OK; ++b)
      st = tuple_rewrite_block(&c, &fn->body.blocks[b]);
    if (st == IRON_OK && c.changed) {
      // Removing a get_tuple_element may leave its tuple unread, and that
      // tuple may be the element of an outer one: repeat until stable.
      for (;;) {
        for (uint32_t i = 0; i <= fn->num_values; ++i) c.uses[i] = 0;
        for (uint32_t b = 0; b < fn->body.num_blocks; ++b)
          tuple_count_uses(&c, &fn->body.blocks[b]);
        uint32_t removed = 0;
        for (uint32_t b = 0; b < fn->body.num_blocks; ++b)
          removed += tuple_remove_dead(&c, &fn->body.blocks[b]);
        if (removed == 0) break;
      }
    }
    free(c.replace);
    free(c.uses);
    IRON_RETURN_IF_ERROR_PLAIN(st);
  }
  return IRON_OK;
}
