// A one-block region (reduce body, comparator) built by hand for the CUDA
// generator tests: arguments, scalar ops, constants, return.
#ifndef IRON_TESTS_REGION_BUILDER_H_
#define IRON_TESTS_REGION_BUILDER_H_

#include <stdlib.h>
#include <string.h>

#include "host_test_ops.h"

// A one-block region built by hand: arguments, scalar ops, return.
#define RB_MAX 48
#define RB_MAX_ARGS 64
typedef struct rb {
  iron_ir_region_t region;
  iron_ir_block_t block;
  iron_ir_value_t args[RB_MAX_ARGS];
  iron_ir_type_t types[RB_MAX + 8];
  int ntypes;
  iron_ir_op_t ops[RB_MAX];
  iron_ir_op_t *op_ptrs[RB_MAX];
  iron_ir_value_t results[RB_MAX];
  iron_ir_value_t *operands[RB_MAX][RB_MAX_ARGS / 2];
  iron_ir_attr_t attrs[RB_MAX][2];
  iron_ir_named_attr_t named[RB_MAX][2];
  iron_ir_type_t attr_types[RB_MAX];
  int64_t consts[RB_MAX];
} rb_t;

static inline rb_t *rb_new(void) {
  rb_t *b = calloc(1, sizeof(*b));
  b->block.args = b->args;
  b->block.ops = b->op_ptrs;
  b->block.parent = &b->region;
  b->region.num_blocks = 1;
  b->region.blocks = &b->block;
  return b;
}

static inline const iron_ir_type_t *rb_type(rb_t *b, iron_dtype_t dt) {
  iron_ir_type_t *t = &b->types[b->ntypes++];
  ht_type(t, dt, 0, NULL);
  return t;
}

static inline iron_ir_value_t *rb_arg(rb_t *b, iron_dtype_t dt) {
  uint32_t i = b->block.num_args++;
  b->args[i].type = rb_type(b, dt);
  b->args[i].def_block = &b->block;
  b->args[i].index = i;
  return &b->args[i];
}

static inline iron_ir_op_t *rb_op_n(rb_t *b, iron_op_kind_t kind, iron_dtype_t rdt,
                             int n, iron_ir_value_t *const *vals) {
  uint32_t i = b->block.num_ops++;
  iron_ir_op_t *op = &b->ops[i];
  op->kind = kind;
  op->name = iron_op_kind_name(kind);
  op->num_operands = (uint32_t)n;
  op->operands = b->operands[i];
  for (int k = 0; k < n; ++k) b->operands[i][k] = vals[k];
  if (kind != IRON_OP_RETURN) {
    op->num_results = 1;
    op->results = &b->results[i];
    b->results[i].type = rb_type(b, rdt);
    b->results[i].def_op = op;
  }
  op->attrs = b->named[i];
  op->parent = &b->block;
  b->op_ptrs[i] = op;
  return op;
}

static inline iron_ir_value_t *rb_op(rb_t *b, iron_op_kind_t kind, iron_dtype_t rdt,
                              iron_ir_value_t *x, iron_ir_value_t *y,
                              iron_ir_value_t *z) {
  iron_ir_value_t *v[3] = {x, y, z};
  int n = z ? 3 : y ? 2 : 1;
  return rb_op_n(b, kind, rdt, n, v)->results;
}

static inline iron_ir_value_t *rb_cmp(rb_t *b, int32_t dir, int32_t type,
                               iron_ir_value_t *x, iron_ir_value_t *y) {
  iron_ir_value_t *v[2] = {x, y};
  iron_ir_op_t *op = rb_op_n(b, IRON_OP_COMPARE, IRON_DTYPE_PRED, 2, v);
  uint32_t i = b->block.num_ops - 1;
  b->attrs[i][0].kind = IRON_ATTR_ENUM;
  b->attrs[i][0].enumv.kind = IRON_ENUM_COMPARISON_DIRECTION;
  b->attrs[i][0].enumv.value = dir;
  b->attrs[i][1].kind = IRON_ATTR_ENUM;
  b->attrs[i][1].enumv.kind = IRON_ENUM_COMPARISON_TYPE;
  b->attrs[i][1].enumv.value = type;
  b->named[i][0].name = "comparison_direction";
  b->named[i][0].value = &b->attrs[i][0];
  b->named[i][1].name = "compare_type";
  b->named[i][1].value = &b->attrs[i][1];
  op->num_attrs = 2;
  return op->results;
}

static inline iron_ir_value_t *rb_const_i64(rb_t *b, iron_dtype_t dt, int64_t v) {
  iron_ir_op_t *op = rb_op_n(b, IRON_OP_CONSTANT, dt, 0, NULL);
  uint32_t i = b->block.num_ops - 1;
  b->consts[i] = v;
  ht_type(&b->attr_types[i], dt, 0, NULL);
  b->attrs[i][0].kind = IRON_ATTR_DENSE;
  b->attrs[i][0].dense.type = &b->attr_types[i];
  b->attrs[i][0].dense.data = &b->consts[i];
  b->attrs[i][0].dense.size = iron_dtype_size(dt);
  b->named[i][0].name = "value";
  b->named[i][0].value = &b->attrs[i][0];
  op->num_attrs = 1;
  return op->results;
}

static inline void rb_return(rb_t *b, int n, iron_ir_value_t *const *vals) {
  rb_op_n(b, IRON_OP_RETURN, IRON_DTYPE_INVALID, n, vals);
}

// A rank-0 constant defined outside the region (jax shares one constant
// between a comparator's uses and the enclosing function).
typedef struct outer_const {
  iron_ir_op_t op;
  iron_ir_value_t v;
  iron_ir_type_t t, at;
  iron_ir_attr_t a;
  iron_ir_named_attr_t na;
  unsigned char data[16];
} outer_const_t;

static inline iron_ir_value_t *outer_const(outer_const_t *c, iron_dtype_t dt,
                                    const void *bytes) {
  memset(c, 0, sizeof(*c));
  memcpy(c->data, bytes, iron_dtype_size(dt));
  ht_type(&c->t, dt, 0, NULL);
  ht_type(&c->at, dt, 0, NULL);
  c->a.kind = IRON_ATTR_DENSE;
  c->a.dense.type = &c->at;
  c->a.dense.data = c->data;
  c->a.dense.size = iron_dtype_size(dt);
  c->na.name = "value";
  c->na.value = &c->a;
  c->op.kind = IRON_OP_CONSTANT;
  c->op.name = iron_op_kind_name(IRON_OP_CONSTANT);
  c->op.num_results = 1;
  c->op.results = &c->v;
  c->op.num_attrs = 1;
  c->op.attrs = &c->na;
  c->v.type = &c->t;
  c->v.def_op = &c->op;
  return &c->v;
}

// return op(a0, a1)
static inline rb_t *rb_binary(iron_op_kind_t kind, iron_dtype_t dt) {
  rb_t *b = rb_new();
  iron_ir_value_t *x = rb_arg(b, dt), *y = rb_arg(b, dt);
  iron_ir_value_t *r = rb_op(b, kind, dt, x, y, NULL);
  rb_return(b, 1, &r);
  return b;
}

// jnp.argmax's body: (value, index) pairs; NaN wins, ties take the lower
// index.
static inline rb_t *rb_argmax(iron_dtype_t vdt, iron_dtype_t idt) {
  rb_t *b = rb_new();
  iron_ir_value_t *av = rb_arg(b, vdt), *ai = rb_arg(b, idt);
  iron_ir_value_t *bv = rb_arg(b, vdt), *bi = rb_arg(b, idt);
  iron_ir_value_t *gt = rb_cmp(b, IRON_CMP_GT, IRON_CMP_TYPE_FLOAT, av, bv);
  iron_ir_value_t *nan = rb_cmp(b, IRON_CMP_NE, IRON_CMP_TYPE_FLOAT, av, av);
  iron_ir_value_t *pick = rb_op(b, IRON_OP_OR, IRON_DTYPE_PRED, gt, nan, NULL);
  iron_ir_value_t *eq = rb_cmp(b, IRON_CMP_EQ, IRON_CMP_TYPE_FLOAT, av, bv);
  iron_ir_value_t *lt = rb_cmp(b, IRON_CMP_LT, IRON_CMP_TYPE_SIGNED, ai, bi);
  iron_ir_value_t *tie = rb_op(b, IRON_OP_AND, IRON_DTYPE_PRED, eq, lt, NULL);
  iron_ir_value_t *v = rb_op(b, IRON_OP_SELECT, vdt, pick, av, bv);
  iron_ir_value_t *pi = rb_op(b, IRON_OP_OR, IRON_DTYPE_PRED, pick, tie, NULL);
  iron_ir_value_t *i = rb_op(b, IRON_OP_SELECT, idt, pi, ai, bi);
  iron_ir_value_t *one = rb_const_i64(b, idt, 1);
  iron_ir_value_t *unused = rb_op(b, IRON_OP_ADD, idt, i, one, NULL);
  (void)unused;
  iron_ir_value_t *rets[2] = {v, i};
  rb_return(b, 2, rets);
  return b;
}

#endif  // IRON_TESTS_REGION_BUILDER_H_
