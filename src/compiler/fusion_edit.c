// Building and copying fusion ops; see fusion_edit.h.
#include "compiler/fusion_edit.h"

#include <string.h>

iron_ir_value_t *iron_value_map_get(const iron_value_map_t *vm,
                                    iron_ir_value_t *v) {
  for (uint32_t i = vm->n; i-- > 0;)
    if (vm->from[i] == v) return vm->to[i];
  return v;
}

bool iron_value_map_add(iron_value_map_t *vm, const iron_ir_value_t *from,
                        iron_ir_value_t *to) {
  if (vm->n == sizeof(vm->from) / sizeof(vm->from[0])) return false;
  vm->from[vm->n] = from;
  vm->to[vm->n++] = to;
  return true;
}

iron_ir_op_t *iron_fusion_edit_op(iron_fusion_edit_t *e, iron_op_kind_t kind,
                                  uint32_t nops, uint32_t nres,
                                  uint32_t nregions) {
  iron_arena_t *a = &e->m->arena;
  iron_ir_op_t *op = iron_arena_alloc(a, sizeof(*op));
  if (!op) return NULL;
  memset(op, 0, sizeof(*op));
  op->kind = kind;
  op->name = iron_op_kind_name(kind);
  op->num_operands = nops;
  op->operands = iron_arena_alloc_array(a, nops + 1, sizeof(iron_ir_value_t *));
  op->num_results = nres;
  op->results = iron_arena_alloc_array(a, nres + 1, sizeof(iron_ir_value_t));
  op->num_regions = nregions;
  op->regions =
      iron_arena_alloc_array(a, nregions + 1, sizeof(iron_ir_region_t));
  if (!op->operands || !op->results || !op->regions) return NULL;
  for (uint32_t r = 0; r < nregions; ++r) {
    memset(&op->regions[r], 0, sizeof(op->regions[r]));
    op->regions[r].parent = op;
  }
  return op;
}

iron_ir_block_t *iron_fusion_edit_block(iron_fusion_edit_t *e,
                                        iron_ir_region_t *r, uint32_t nargs,
                                        uint32_t nops) {
  iron_arena_t *a = &e->m->arena;
  iron_ir_block_t *b = iron_arena_alloc(a, sizeof(*b));
  if (!b) return NULL;
  memset(b, 0, sizeof(*b));
  b->parent = r;
  b->args = iron_arena_alloc_array(a, nargs + 1, sizeof(iron_ir_value_t));
  b->ops = iron_arena_alloc_array(a, nops + 1, sizeof(iron_ir_op_t *));
  if (!b->args || !b->ops) return NULL;
  b->num_args = nargs;
  r->num_blocks = 1;
  r->blocks = b;
  return b;
}

iron_ir_value_t *iron_fusion_edit_arg(iron_fusion_edit_t *e, iron_ir_block_t *b,
                                      uint32_t i, const iron_ir_type_t *type) {
  iron_ir_value_t *v = &b->args[i];
  memset(v, 0, sizeof(*v));
  v->type = type;
  v->def_block = b;
  v->index = i;
  v->id = e->f->num_values++;
  return v;
}

iron_ir_op_t *iron_fusion_edit_clone(iron_fusion_edit_t *e,
                                     const iron_ir_op_t *src,
                                     iron_ir_block_t *into,
                                     iron_value_map_t *vm) {
  iron_arena_t *a = &e->m->arena;
  iron_ir_op_t *op = iron_arena_alloc(a, sizeof(*op));
  iron_ir_value_t **operands = iron_arena_alloc_array(
      a, src->num_operands + 1, sizeof(iron_ir_value_t *));
  iron_ir_value_t *results =
      iron_arena_alloc_array(a, src->num_results + 1, sizeof(iron_ir_value_t));
  if (!op || !operands || !results) return NULL;
  *op = *src;
  op->parent = into;
  op->operands = operands;
  op->results = results;
  for (uint32_t k = 0; k < src->num_operands; ++k)
    operands[k] = iron_value_map_get(vm, src->operands[k]);
  for (uint32_t r = 0; r < src->num_results; ++r) {
    results[r] = src->results[r];
    results[r].def_op = op;
    results[r].def_block = NULL;
    results[r].id = e->f->num_values++;
    if (!iron_value_map_add(vm, &src->results[r], &results[r])) return NULL;
  }
  return op;
}

void iron_fusion_edit_replace_uses(iron_ir_block_t *blk,
                                   iron_ir_value_t *const *from,
                                   iron_ir_value_t *to, uint32_t n) {
  for (uint32_t i = 0; i < blk->num_ops; ++i) {
    iron_ir_op_t *op = blk->ops[i];
    for (uint32_t k = 0; k < op->num_operands; ++k)
      for (uint32_t j = 0; j < n; ++j)
        if (op->operands[k] == from[j]) op->operands[k] = &to[j];
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b)
        iron_fusion_edit_replace_uses(&op->regions[r].blocks[b], from, to, n);
  }
}
