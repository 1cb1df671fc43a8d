// Region bodies built by hand (one block, up to BB_OPS ops, constants of up
// to 8 bytes) for kernel tests that run them on the host and on CUDA, and
// bb_interp_call: a call_region that runs each body op with its host
// kernel on whole vectors (what the runtime's call_region does for
// element-wise bodies). region_builder.h is the CUDA generator tests'
// builder (no interpreter).
#ifndef IRON_TESTS_BB_REGION_H_
#define IRON_TESTS_BB_REGION_H_

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device/host/host_kernel.h"
#include "host_test_ops.h"

#define BB_OPS 64
#define BB_ARGS 40  // block arguments, and operands of the return
typedef struct bb {
  iron_ir_region_t region;
  iron_ir_block_t block;
  iron_ir_value_t args[BB_ARGS];
  iron_ir_op_t ops[BB_OPS];
  iron_ir_op_t *op_ptrs[BB_OPS];
  iron_ir_value_t res[BB_OPS];
  iron_ir_value_t *opnds[BB_OPS][BB_ARGS];
  iron_ir_type_t types[BB_OPS + BB_ARGS];
  int ntypes;
  iron_ir_attr_t attrs[2 * BB_OPS];
  iron_ir_named_attr_t named[2 * BB_OPS];
  int nattrs;
  uint8_t cbytes[BB_OPS][8];
} bb_t;

static inline const iron_ir_type_t *bb_type(bb_t *b, iron_dtype_t dt) {
  iron_ir_type_t *t = &b->types[b->ntypes++];
  ht_type(t, dt, 0, NULL);
  return t;
}

static inline bb_t *bb_new(int nargs, const iron_dtype_t *dts) {
  bb_t *b = calloc(1, sizeof(*b));
  for (int i = 0; i < nargs; ++i) {
    b->args[i].type = bb_type(b, dts[i]);
    b->args[i].def_block = &b->block;
    b->args[i].index = (uint32_t)i;
  }
  b->block.num_args = (uint32_t)nargs;
  b->block.args = b->args;
  b->block.ops = b->op_ptrs;
  b->block.parent = &b->region;
  b->region.num_blocks = 1;
  b->region.blocks = &b->block;
  return b;
}

static inline iron_ir_value_t *bb_op(bb_t *b, iron_op_kind_t kind,
                                     iron_dtype_t rdt, int n,
                                     iron_ir_value_t *x, iron_ir_value_t *y,
                                     iron_ir_value_t *z) {
  uint32_t i = b->block.num_ops++;
  iron_ir_op_t *op = &b->ops[i];
  op->kind = kind;
  op->name = iron_op_kind_name(kind);
  op->num_operands = (uint32_t)n;
  b->opnds[i][0] = x;
  b->opnds[i][1] = y;
  b->opnds[i][2] = z;
  op->operands = b->opnds[i];
  op->parent = &b->block;
  if (kind != IRON_OP_RETURN) {
    op->num_results = 1;
    b->res[i].type = bb_type(b, rdt);
    b->res[i].def_op = op;
    op->results = &b->res[i];
  }
  b->op_ptrs[i] = op;
  return kind == IRON_OP_RETURN ? NULL : &b->res[i];
}

static inline iron_ir_attr_t *bb_attr(bb_t *b, iron_ir_op_t *op,
                                      const char *name) {
  int i = b->nattrs++;
  if (!op->num_attrs) op->attrs = &b->named[i];
  op->num_attrs++;
  b->named[i].name = name;
  b->named[i].value = &b->attrs[i];
  return &b->attrs[i];
}

static inline iron_ir_value_t *bb_cmp(bb_t *b, int dir, int ctype,
                                      iron_ir_value_t *x, iron_ir_value_t *y) {
  iron_ir_value_t *r =
      bb_op(b, IRON_OP_COMPARE, IRON_DTYPE_PRED, 2, x, y, NULL);
  iron_ir_attr_t *a = bb_attr(b, r->def_op, "comparison_direction");
  a->kind = IRON_ATTR_ENUM;
  a->enumv.kind = IRON_ENUM_COMPARISON_DIRECTION;
  a->enumv.value = dir;
  a = bb_attr(b, r->def_op, "compare_type");
  a->kind = IRON_ATTR_ENUM;
  a->enumv.kind = IRON_ENUM_COMPARISON_TYPE;
  a->enumv.value = ctype;
  return r;
}

// A rank-0 constant of a one-byte dtype.
static inline iron_ir_value_t *bb_const(bb_t *b, iron_dtype_t dt,
                                        uint8_t byte) {
  iron_ir_value_t *r = bb_op(b, IRON_OP_CONSTANT, dt, 0, NULL, NULL, NULL);
  uint32_t i = b->block.num_ops - 1;
  b->cbytes[i][0] = byte;
  iron_ir_attr_t *a = bb_attr(b, r->def_op, "value");
  a->kind = IRON_ATTR_DENSE;
  a->dense.type = r->type;
  a->dense.data = b->cbytes[i];
  a->dense.size = 1;
  a->dense.splat = true;
  return r;
}

// A rank-0 constant of dt from its little-endian bytes (at most 8).
static inline iron_ir_value_t *bb_const_bytes(bb_t *b, iron_dtype_t dt,
                                              const void *bytes, size_t n) {
  iron_ir_value_t *r = bb_const(b, dt, 0);
  uint32_t i = b->block.num_ops - 1;
  memcpy(b->cbytes[i], bytes, n);
  b->attrs[b->nattrs - 1].dense.size = n;  // bb_const's "value"
  return r;
}

static inline iron_ir_value_t *bb_arg(bb_t *b, int i) { return &b->args[i]; }

static inline void bb_ret(bb_t *b, int n, iron_ir_value_t *x,
                          iron_ir_value_t *y) {
  bb_op(b, IRON_OP_RETURN, IRON_DTYPE_INVALID, n, x, y, NULL);
}

// Returns vals[0..n-1] (n <= BB_ARGS).
static inline void bb_ret_n(bb_t *b, int n, iron_ir_value_t *const *vals) {
  bb_op(b, IRON_OP_RETURN, IRON_DTYPE_INVALID, 0, NULL, NULL, NULL);
  iron_ir_op_t *r = &b->ops[b->block.num_ops - 1];
  r->num_operands = (uint32_t)n;
  for (int i = 0; i < n; ++i) b->opnds[b->block.num_ops - 1][i] = vals[i];
}

// --- the host's call_region: each body op by its host kernel ---------------

static inline iron_tensor_t *bb_vec(iron_dtype_t dt, int64_t n) {
  return ht_tensor(dt, 1, &n);
}

static inline iron_status_t bb_interp_call(const iron_kernel_ctx_t *ctx,
                                           const iron_region_t *region,
                                           const iron_tensor_t *const *inputs,
                                           iron_tensor_t *const *outputs) {
  const iron_ir_block_t *blk = &region->ir->blocks[0];
  int64_t n = 1;
  for (uint32_t i = 0; i < blk->num_args; ++i)
    if (inputs[i]->count > n) n = inputs[i]->count;
  const iron_ir_op_t *ret = blk->ops[blk->num_ops - 1];
  for (uint32_t i = 0; i < ret->num_operands; ++i)
    if (outputs[i]->count > n) n = outputs[i]->count;
  iron_tensor_t *args[BB_ARGS] = {NULL}, *vals[BB_OPS] = {NULL};
  for (uint32_t i = 0; i < blk->num_args; ++i) {
    size_t es = iron_dtype_size(inputs[i]->dtype);
    args[i] = bb_vec(inputs[i]->dtype, n);
    for (int64_t e = 0; e < n; ++e)
      memcpy(
          (char *)args[i]->data + e * es,
          (const char *)inputs[i]->data + (inputs[i]->count == 1 ? 0 : e) * es,
          es);
  }
  iron_status_t st = IRON_OK;
#define VALUE(v)                                                      \
  ((v)->def_op ? vals[(v)->def_op - ((const bb_t *)blk->parent)->ops] \
               : args[(v)->index])
  for (uint32_t oi = 0; oi < blk->num_ops && !st; ++oi) {
    const iron_ir_op_t *op = blk->ops[oi];
    if (op->kind == IRON_OP_RETURN) {
      for (uint32_t i = 0; i < op->num_operands; ++i)
        memcpy(outputs[i]->data, VALUE(op->operands[i])->data,
               outputs[i]->nbytes);
      break;
    }
    iron_dtype_t rdt = op->results[0].type->dtype;
    vals[oi] = bb_vec(rdt, n);
    if (op->kind == IRON_OP_CONSTANT) {
      const iron_ir_attr_t *a = iron_ir_op_attr(op, "value");
      for (int64_t e = 0; e < n; ++e)
        ((uint8_t *)vals[oi]->data)[e] = *(const uint8_t *)a->dense.data;
      continue;
    }
    const iron_kernel_t *k = iron_host_kernel_lookup(op->kind);
    if (!k) {
      st = IRON_ERR(UNIMPLEMENTED, "no host kernel for %s", op->name);
      break;
    }
    void *params = NULL;
    st = k->prepare(op, NULL, &params);
    if (st) break;
    const iron_tensor_t *in[3];
    for (uint32_t i = 0; i < op->num_operands; ++i)
      in[i] = VALUE(op->operands[i]);
    iron_tensor_t *out[1] = {vals[oi]};
    st = k->run(ctx, params, in, out);
    if (k->destroy)
      k->destroy(params);
    else
      free(params);
  }
#undef VALUE
  for (uint32_t i = 0; i < blk->num_args; ++i) ht_tensor_free(args[i]);
  for (uint32_t i = 0; i < BB_OPS; ++i) ht_tensor_free(vals[i]);
  return st;
}

#endif  // IRON_TESTS_BB_REGION_H_
