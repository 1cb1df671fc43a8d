// A small IR builder for tests and tools: makes modules, functions, ops and
// attributes by hand (the reader is the production path). Everything is
// allocated from the module's arena. Functions return NULL only when out of
// memory; tests treat that as a failure.
#ifndef IRON_IR_BUILDER_H_
#define IRON_IR_BUILDER_H_

#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// A new empty module (free with iron_ir_module_destroy). Room for up to
// `max_funcs` functions.
iron_ir_module_t *iron_ir_builder_module_create(const char *name,
                                                uint32_t max_funcs);

const iron_ir_type_t *iron_ir_builder_tensor_type(iron_ir_module_t *m,
                                                  iron_dtype_t dtype,
                                                  int32_t rank,
                                                  const int64_t *dims);
const iron_ir_type_t *iron_ir_builder_scalar_type(iron_ir_module_t *m,
                                                  iron_dtype_t dtype);
const iron_ir_type_t *iron_ir_builder_token_type(iron_ir_module_t *m);

// Adds a public (or private) function; its body block has one argument per
// input type. The body must be filled and end with a func.return.
iron_ir_func_t *iron_ir_builder_func(iron_ir_module_t *m, const char *name,
                                     bool is_public, uint32_t num_inputs,
                                     const iron_ir_type_t *const *inputs,
                                     uint32_t num_results,
                                     const iron_ir_type_t *const *results);
// The function's entry block.
iron_ir_block_t *iron_ir_builder_func_block(iron_ir_func_t *f);

// Appends an op to `block` (in function `f`, which numbers the values).
// Its regions (num_regions) start with one empty block without arguments.
iron_ir_op_t *iron_ir_builder_op(iron_ir_module_t *m, iron_ir_func_t *f,
                                 iron_ir_block_t *block, iron_op_kind_t kind,
                                 uint32_t num_operands,
                                 iron_ir_value_t *const *operands,
                                 uint32_t num_results,
                                 const iron_ir_type_t *const *result_types,
                                 uint32_t num_regions);
// Result i of op (shorthand).
static inline iron_ir_value_t *iron_ir_builder_result(iron_ir_op_t *op,
                                                      uint32_t i) {
  return &op->results[i];
}
// Adds an argument to a block (of an op region).
iron_ir_value_t *iron_ir_builder_block_arg(iron_ir_module_t *m,
                                           iron_ir_func_t *f,
                                           iron_ir_block_t *block,
                                           const iron_ir_type_t *type);
// Entry block of region i of op.
static inline iron_ir_block_t *iron_ir_builder_region_block(iron_ir_op_t *op,
                                                            uint32_t i) {
  return &op->regions[i].blocks[0];
}

// Attributes (appended to op->attrs).
void iron_ir_builder_attr(iron_ir_module_t *m, iron_ir_op_t *op,
                          const char *name, const iron_ir_attr_t *value);
const iron_ir_attr_t *iron_ir_builder_attr_int(iron_ir_module_t *m,
                                               int64_t v);
const iron_ir_attr_t *iron_ir_builder_attr_bool(iron_ir_module_t *m, bool v);
const iron_ir_attr_t *iron_ir_builder_attr_string(iron_ir_module_t *m,
                                                  const char *s);
const iron_ir_attr_t *iron_ir_builder_attr_symbol(iron_ir_module_t *m,
                                                  const char *s);
const iron_ir_attr_t *iron_ir_builder_attr_enum(iron_ir_module_t *m,
                                                iron_enum_kind_t kind,
                                                int32_t v);
// A dense i64 array (as used for dimensions).
const iron_ir_attr_t *iron_ir_builder_attr_i64s(iron_ir_module_t *m,
                                                uint32_t n, const int64_t *v);
// A dense tensor literal (data is copied; `splat` gives one element).
const iron_ir_attr_t *iron_ir_builder_attr_dense(iron_ir_module_t *m,
                                                 const iron_ir_type_t *type,
                                                 const void *data,
                                                 size_t size, bool splat);
// A dictionary with one entry (for arg attributes).
const iron_ir_attr_t *iron_ir_builder_attr_dict1(iron_ir_module_t *m,
                                                 const char *name,
                                                 const iron_ir_attr_t *value);

// Convenience: a stablehlo.constant of `type` from host bytes.
iron_ir_value_t *iron_ir_builder_constant(iron_ir_module_t *m,
                                          iron_ir_func_t *f,
                                          iron_ir_block_t *block,
                                          const iron_ir_type_t *type,
                                          const void *data, size_t size,
                                          bool splat);
// Convenience: an op with one result of `type` (element-wise ops).
iron_ir_value_t *iron_ir_builder_op1(iron_ir_module_t *m, iron_ir_func_t *f,
                                     iron_ir_block_t *block,
                                     iron_op_kind_t kind,
                                     uint32_t num_operands,
                                     iron_ir_value_t *const *operands,
                                     const iron_ir_type_t *type);
// A terminator (func.return or stablehlo.return).
iron_ir_op_t *iron_ir_builder_return(iron_ir_module_t *m, iron_ir_func_t *f,
                                     iron_ir_block_t *block,
                                     iron_op_kind_t kind, uint32_t n,
                                     iron_ir_value_t *const *values);
// Sets op->loc (file copied).
void iron_ir_builder_set_loc(iron_ir_module_t *m, iron_ir_op_t *op,
                             const char *file, int32_t line);

#ifdef __cplusplus
}
#endif

#endif  // IRON_IR_BUILDER_H_
