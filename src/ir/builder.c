#include "ir/builder.h"

#include <string.h>

iron_ir_module_t *iron_ir_builder_module_create(const char *name,
                                                uint32_t max_funcs) {
  iron_arena_t a;
  iron_arena_init(&a);
  iron_ir_module_t *m = iron_arena_alloc(&a, sizeof(*m));
  if (!m) {
    iron_arena_deinit(&a);
    return NULL;
  }
  m->arena = a;  // from here on allocate from m->arena
  m->name = name ? iron_arena_strdup(&m->arena, name) : NULL;
  m->funcs = iron_arena_alloc_array(&m->arena, max_funcs ? max_funcs : 1,
                                    sizeof(iron_ir_func_t));
  m->producer = "iron builder";
  return m;
}

const iron_ir_type_t *iron_ir_builder_tensor_type(iron_ir_module_t *m,
                                                  iron_dtype_t dtype,
                                                  int32_t rank,
                                                  const int64_t *dims) {
  iron_ir_type_t *t = iron_arena_alloc(&m->arena, sizeof(*t));
  if (!t) return NULL;
  t->kind = IRON_TYPE_TENSOR;
  t->dtype = dtype;
  t->rank = rank;
  for (int32_t i = 0; i < rank; ++i) t->dims[i] = dims[i];
  return t;
}

const iron_ir_type_t *iron_ir_builder_scalar_type(iron_ir_module_t *m,
                                                  iron_dtype_t dtype) {
  return iron_ir_builder_tensor_type(m, dtype, 0, NULL);
}

const iron_ir_type_t *iron_ir_builder_token_type(iron_ir_module_t *m) {
  iron_ir_type_t *t = iron_arena_alloc(&m->arena, sizeof(*t));
  if (!t) return NULL;
  t->kind = IRON_TYPE_TOKEN;
  t->dtype = IRON_DTYPE_TOKEN;
  return t;
}

static void init_value(iron_ir_func_t *f, iron_ir_value_t *v,
                       const iron_ir_type_t *type) {
  v->type = type;
  v->id = f->num_values++;
}

iron_ir_func_t *iron_ir_builder_func(iron_ir_module_t *m, const char *name,
                                     bool is_public, uint32_t num_inputs,
                                     const iron_ir_type_t *const *inputs,
                                     uint32_t num_results,
                                     const iron_ir_type_t *const *results) {
  iron_ir_func_t *f = &m->funcs[m->num_funcs++];
  f->name = iron_arena_strdup(&m->arena, name);
  f->is_public = is_public;
  iron_ir_type_t *ft = iron_arena_alloc(&m->arena, sizeof(*ft));
  const iron_ir_type_t **elems = iron_arena_alloc_array(
      &m->arena, num_inputs + num_results + 1, sizeof(*elems));
  if (!ft || !elems) return NULL;
  for (uint32_t i = 0; i < num_inputs; ++i) elems[i] = inputs[i];
  for (uint32_t i = 0; i < num_results; ++i) elems[num_inputs + i] = results[i];
  ft->kind = IRON_TYPE_FUNCTION;
  ft->num_elements = num_inputs + num_results;
  ft->num_func_inputs = num_inputs;
  ft->elements = elems;
  f->type = ft;
  f->arg_attrs = iron_arena_alloc_array(&m->arena, num_inputs + 1,
                                        sizeof(*f->arg_attrs));
  f->body.num_blocks = 1;
  f->body.blocks = iron_arena_alloc(&m->arena, sizeof(iron_ir_block_t));
  if (!f->body.blocks) return NULL;
  iron_ir_block_t *b = &f->body.blocks[0];
  b->parent = &f->body;
  for (uint32_t i = 0; i < num_inputs; ++i)
    iron_ir_builder_block_arg(m, f, b, inputs[i]);
  return f;
}

iron_ir_block_t *iron_ir_builder_func_block(iron_ir_func_t *f) {
  return &f->body.blocks[0];
}

iron_ir_value_t *iron_ir_builder_block_arg(iron_ir_module_t *m,
                                           iron_ir_func_t *f,
                                           iron_ir_block_t *block,
                                           const iron_ir_type_t *type) {
  // Grow by copying: block args are few.
  iron_ir_value_t *args = iron_arena_alloc_array(
      &m->arena, block->num_args + 1, sizeof(iron_ir_value_t));
  if (!args) return NULL;
  if (block->num_args)
    memcpy(args, block->args, block->num_args * sizeof(iron_ir_value_t));
  block->args = args;
  iron_ir_value_t *v = &args[block->num_args];
  v->def_block = block;
  v->index = block->num_args++;
  init_value(f, v, type);
  return v;
}

iron_ir_op_t *iron_ir_builder_op(iron_ir_module_t *m, iron_ir_func_t *f,
                                 iron_ir_block_t *block, iron_op_kind_t kind,
                                 uint32_t num_operands,
                                 iron_ir_value_t *const *operands,
                                 uint32_t num_results,
                                 const iron_ir_type_t *const *result_types,
                                 uint32_t num_regions) {
  iron_ir_op_t *op = iron_arena_alloc(&m->arena, sizeof(*op));
  if (!op) return NULL;
  op->kind = kind;
  op->name = iron_op_kind_name(kind);
  op->num_operands = num_operands;
  op->operands = iron_arena_alloc_array(&m->arena, num_operands + 1,
                                        sizeof(iron_ir_value_t *));
  for (uint32_t i = 0; i < num_operands; ++i) op->operands[i] = operands[i];
  op->num_results = num_results;
  op->results = iron_arena_alloc_array(&m->arena, num_results + 1,
                                       sizeof(iron_ir_value_t));
  for (uint32_t i = 0; i < num_results; ++i) {
    op->results[i].def_op = op;
    op->results[i].index = i;
    init_value(f, &op->results[i], result_types[i]);
  }
  op->num_regions = num_regions;
  op->regions = iron_arena_alloc_array(&m->arena, num_regions + 1,
                                       sizeof(iron_ir_region_t));
  for (uint32_t i = 0; i < num_regions; ++i) {
    op->regions[i].parent = op;
    op->regions[i].num_blocks = 1;
    op->regions[i].blocks = iron_arena_alloc(&m->arena, sizeof(iron_ir_block_t));
    op->regions[i].blocks[0].parent = &op->regions[i];
  }
  op->parent = block;
  // Append (grow by doubling within the arena).
  uint32_t n = block->num_ops;
  if ((n & (n - 1)) == 0) {  // n is 0 or a power of two: full
    uint32_t cap = n ? n * 2 : 1;
    iron_ir_op_t **ops = iron_arena_alloc_array(&m->arena, cap, sizeof(*ops));
    if (!ops) return NULL;
    if (n) memcpy(ops, block->ops, n * sizeof(*ops));
    block->ops = ops;
  }
  block->ops[block->num_ops++] = op;
  return op;
}

void iron_ir_builder_attr(iron_ir_module_t *m, iron_ir_op_t *op,
                          const char *name, const iron_ir_attr_t *value) {
  iron_ir_named_attr_t *a = iron_arena_alloc_array(
      &m->arena, op->num_attrs + 1, sizeof(iron_ir_named_attr_t));
  if (!a) return;
  if (op->num_attrs)
    memcpy(a, op->attrs, op->num_attrs * sizeof(iron_ir_named_attr_t));
  a[op->num_attrs].name = iron_arena_strdup(&m->arena, name);
  a[op->num_attrs].value = value;
  op->attrs = a;
  op->num_attrs++;
}

static iron_ir_attr_t *new_attr(iron_ir_module_t *m, iron_attr_kind_t k) {
  iron_ir_attr_t *a = iron_arena_alloc(&m->arena, sizeof(*a));
  if (a) a->kind = k;
  return a;
}

const iron_ir_attr_t *iron_ir_builder_attr_int(iron_ir_module_t *m,
                                               int64_t v) {
  iron_ir_attr_t *a = new_attr(m, IRON_ATTR_INT);
  if (a) {
    a->i = v;
    a->int_dtype = IRON_DTYPE_S64;
  }
  return a;
}

const iron_ir_attr_t *iron_ir_builder_attr_bool(iron_ir_module_t *m, bool v) {
  iron_ir_attr_t *a = new_attr(m, IRON_ATTR_BOOL);
  if (a) a->b = v;
  return a;
}

static const iron_ir_attr_t *str_attr(iron_ir_module_t *m, iron_attr_kind_t k,
                                      const char *s) {
  iron_ir_attr_t *a = new_attr(m, k);
  if (a) {
    a->str = iron_arena_strdup(&m->arena, s);
    a->str_len = strlen(s);
  }
  return a;
}

const iron_ir_attr_t *iron_ir_builder_attr_string(iron_ir_module_t *m,
                                                  const char *s) {
  return str_attr(m, IRON_ATTR_STRING, s);
}

const iron_ir_attr_t *iron_ir_builder_attr_symbol(iron_ir_module_t *m,
                                                  const char *s) {
  return str_attr(m, IRON_ATTR_SYMBOL, s);
}

const iron_ir_attr_t *iron_ir_builder_attr_enum(iron_ir_module_t *m,
                                                iron_enum_kind_t kind,
                                                int32_t v) {
  iron_ir_attr_t *a = new_attr(m, IRON_ATTR_ENUM);
  if (a) {
    a->enumv.kind = kind;
    a->enumv.value = v;
  }
  return a;
}

const iron_ir_attr_t *iron_ir_builder_attr_i64s(iron_ir_module_t *m,
                                                uint32_t n, const int64_t *v) {
  int64_t dims[1] = {n};
  const iron_ir_type_t *t =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_S64, 1, dims);
  return iron_ir_builder_attr_dense(m, t, v, n * sizeof(int64_t), false);
}

const iron_ir_attr_t *iron_ir_builder_attr_dense(iron_ir_module_t *m,
                                                 const iron_ir_type_t *type,
                                                 const void *data,
                                                 size_t size, bool splat) {
  iron_ir_attr_t *a = new_attr(m, IRON_ATTR_DENSE);
  if (!a) return NULL;
  a->dense.type = type;
  a->dense.data = size ? iron_arena_memdup(&m->arena, data, size) : NULL;
  a->dense.size = size;
  a->dense.splat = splat;
  return a;
}

const iron_ir_attr_t *iron_ir_builder_attr_dict1(iron_ir_module_t *m,
                                                 const char *name,
                                                 const iron_ir_attr_t *value) {
  iron_ir_attr_t *a = new_attr(m, IRON_ATTR_DICT);
  iron_ir_named_attr_t *e = iron_arena_alloc(&m->arena, sizeof(*e));
  if (!a || !e) return NULL;
  e->name = iron_arena_strdup(&m->arena, name);
  e->value = value;
  a->dict.count = 1;
  a->dict.entries = e;
  return a;
}

iron_ir_value_t *iron_ir_builder_constant(iron_ir_module_t *m,
                                          iron_ir_func_t *f,
                                          iron_ir_block_t *block,
                                          const iron_ir_type_t *type,
                                          const void *data, size_t size,
                                          bool splat) {
  iron_ir_op_t *op =
      iron_ir_builder_op(m, f, block, IRON_OP_CONSTANT, 0, NULL, 1, &type, 0);
  if (!op) return NULL;
  iron_ir_builder_attr(m, op, "value",
                       iron_ir_builder_attr_dense(m, type, data, size, splat));
  return &op->results[0];
}

iron_ir_value_t *iron_ir_builder_op1(iron_ir_module_t *m, iron_ir_func_t *f,
                                     iron_ir_block_t *block,
                                     iron_op_kind_t kind,
                                     uint32_t num_operands,
                                     iron_ir_value_t *const *operands,
                                     const iron_ir_type_t *type) {
  iron_ir_op_t *op = iron_ir_builder_op(m, f, block, kind, num_operands,
                                        operands, 1, &type, 0);
  return op ? &op->results[0] : NULL;
}

iron_ir_op_t *iron_ir_builder_return(iron_ir_module_t *m, iron_ir_func_t *f,
                                     iron_ir_block_t *block,
                                     iron_op_kind_t kind, uint32_t n,
                                     iron_ir_value_t *const *values) {
  return iron_ir_builder_op(m, f, block, kind, n, values, 0, NULL, 0);
}

void iron_ir_builder_set_loc(iron_ir_module_t *m, iron_ir_op_t *op,
                             const char *file, int32_t line) {
  op->loc.file = iron_arena_strdup(&m->arena, file);
  op->loc.line = line;
  op->loc.col = 1;
}
