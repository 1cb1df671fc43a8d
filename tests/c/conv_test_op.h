// A stablehlo.convolution op built in place for the C tests (host conv,
// CUDA conv, the shared plan): an ht_op_t plus room for its attributes.
#ifndef IRON_TESTS_CONV_TEST_OP_H_
#define IRON_TESTS_CONV_TEST_OP_H_

#include "host_test_ops.h"

#define CONV_TEST_MAX_ATTRS 20
typedef struct conv_op {
  ht_op_t b;
  iron_ir_attr_t attrs[CONV_TEST_MAX_ATTRS];
  iron_ir_named_attr_t named[CONV_TEST_MAX_ATTRS];
  iron_ir_type_t types[CONV_TEST_MAX_ATTRS];
  int64_t data[CONV_TEST_MAX_ATTRS][2 * IRON_MAX_RANK];
} conv_op_t;

// Appends attribute `name`: a dense i64 list of n values.
static inline void attr(conv_op_t *c, const char *name, int n,
                        const int64_t *v) {
  uint32_t i = c->b.op.num_attrs++;
  for (int k = 0; k < n; ++k) c->data[i][k] = v[k];
  int64_t dims[1] = {n};
  ht_type(&c->types[i], IRON_DTYPE_S64, 1, dims);
  c->attrs[i].kind = IRON_ATTR_DENSE;
  c->attrs[i].dense.type = &c->types[i];
  c->attrs[i].dense.data = c->data[i];
  c->attrs[i].dense.size = (size_t)n * 8;
  c->named[i].name = name;
  c->named[i].value = &c->attrs[i];
}

// Appends attribute `name`: one integer.
static inline void attr1(conv_op_t *c, const char *name, int64_t v) {
  uint32_t i = c->b.op.num_attrs++;
  c->attrs[i].kind = IRON_ATTR_INT;
  c->attrs[i].i = v;
  c->attrs[i].int_dtype = IRON_DTYPE_S64;
  c->named[i].name = name;
  c->named[i].value = &c->attrs[i];
}

#endif  // IRON_TESTS_CONV_TEST_OP_H_
