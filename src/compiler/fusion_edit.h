// Building and copying fusion ops after fusion (merge_reduces.h,
// merge_producers.h): new ops, one-block regions and their arguments from
// the module's arena, region-free ops cloned through a value map, and uses
// redirected. New values take the next ids of the function being edited.
#ifndef IRON_COMPILER_FUSION_EDIT_H_
#define IRON_COMPILER_FUSION_EDIT_H_

#include <stdbool.h>

#include "compiler/fuse.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Where the edit happens: the module (its arena) and the function whose
// value ids the new values continue.
typedef struct iron_fusion_edit {
  iron_ir_module_t *m;
  iron_ir_func_t *f;
} iron_fusion_edit_t;

// Old value -> new value, the latest entry first. Allocate with calloc.
typedef struct iron_value_map {
  const iron_ir_value_t *from[4 * IRON_FUSE_MAX_OPERANDS];
  iron_ir_value_t *to[4 * IRON_FUSE_MAX_OPERANDS];
  uint32_t n;
} iron_value_map_t;

// v's image (v itself when unmapped).
iron_ir_value_t *iron_value_map_get(const iron_value_map_t *vm,
                                    iron_ir_value_t *v);
// false when the map is full.
bool iron_value_map_add(iron_value_map_t *vm, const iron_ir_value_t *from,
                        iron_ir_value_t *to);

// An op of `kind` with room for its operands, results and regions (each
// region empty, its parent set); NULL when out of memory.
iron_ir_op_t *iron_fusion_edit_op(iron_fusion_edit_t *e, iron_op_kind_t kind,
                                  uint32_t num_operands, uint32_t num_results,
                                  uint32_t num_regions);
// Region r's one block, with `nargs` arguments (filled by
// iron_fusion_edit_arg) and room for `nops` ops; NULL when out of memory.
iron_ir_block_t *iron_fusion_edit_block(iron_fusion_edit_t *e,
                                        iron_ir_region_t *r, uint32_t nargs,
                                        uint32_t nops);
// Block argument i of b, of `type`, with a new id.
iron_ir_value_t *iron_fusion_edit_arg(iron_fusion_edit_t *e, iron_ir_block_t *b,
                                      uint32_t i, const iron_ir_type_t *type);
// A copy of region-free op `src` in block `into` (not appended): operands
// mapped through vm, results new values that vm maps src's results to.
// NULL when out of memory or vm is full.
iron_ir_op_t *iron_fusion_edit_clone(iron_fusion_edit_t *e,
                                     const iron_ir_op_t *src,
                                     iron_ir_block_t *into,
                                     iron_value_map_t *vm);
// Every use of from[j] in blk (nested regions included) becomes &to[j].
void iron_fusion_edit_replace_uses(iron_ir_block_t *blk,
                                   iron_ir_value_t *const *from,
                                   iron_ir_value_t *to, uint32_t n);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_FUSION_EDIT_H_
