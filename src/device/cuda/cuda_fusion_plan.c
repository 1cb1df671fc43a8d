// The CUDA fusion planner (cuda_fusion_plan.h): which ops a fusion may
// hold, the shape it iterates over, and how each input and output is
// reached. Pure functions of the IR.
#include "device/cuda/cuda_fusion_plan.h"

#include "device/cuda/gen/scalar.h"

bool iron_cuda_fusion_op_supported(iron_op_kind_t kind) {
  if (iron_cuda_scalar_op_supported(kind)) return true;
  switch (kind) {
    case IRON_OP_BROADCAST_IN_DIM:
    case IRON_OP_IOTA:
    case IRON_OP_SLICE:
    case IRON_OP_TRANSPOSE:
    case IRON_OP_DYNAMIC_SLICE:
      return true;
    default:
      return false;
  }
}

bool iron_cuda_fusion_is_indexed_load(iron_op_kind_t k) {
  return k == IRON_OP_SLICE || k == IRON_OP_TRANSPOSE ||
         k == IRON_OP_DYNAMIC_SLICE;
}

bool iron_cuda_fusion_needs_coords(const iron_cuda_fusion_t *f) {
  for (uint32_t i = 0; i < f->num_ops; ++i) {
    iron_op_kind_t k = f->ops[i]->kind;
    if (k == IRON_OP_BROADCAST_IN_DIM || k == IRON_OP_IOTA ||
        iron_cuda_fusion_is_indexed_load(k) ||
        k == IRON_OP_DYNAMIC_UPDATE_SLICE)
      return true;
  }
  return false;
}

bool iron_cuda_fusion_reads_input(const iron_cuda_fusion_t *f, uint32_t i) {
  const iron_ir_value_t *v = f->inputs[i];
  for (uint32_t j = 0; j < f->num_outputs; ++j) {
    if (f->outputs[j] == v) return true;
  }
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *op = f->ops[o];
    if (op->kind == IRON_OP_BROADCAST_IN_DIM) continue;
    // The operand of an indexed load is read at its own indices (a
    // dynamic_slice's start indices are read directly).
    uint32_t first = iron_cuda_fusion_is_indexed_load(op->kind) ? 1
                     : op->kind == IRON_OP_DYNAMIC_UPDATE_SLICE ? 2
                                                                : 0;
    for (uint32_t k = first; k < op->num_operands; ++k) {
      if (op->operands[k] == v) return true;
    }
  }
  return false;
}

const iron_ir_op_t *iron_cuda_fusion_dus_root(const iron_cuda_fusion_t *f,
                                              uint32_t j) {
  const iron_ir_op_t *d = f->outputs[j]->def_op;
  return d && d->kind == IRON_OP_DYNAMIC_UPDATE_SLICE ? d : NULL;
}

static bool is_member(const iron_cuda_fusion_t *f, const iron_ir_op_t *op) {
  for (uint32_t o = 0; op && o < f->num_ops; ++o)
    if (f->ops[o] == op) return true;
  return false;
}

// Whether a and b have the same dims once their size-1 dims are dropped.
static bool same_dims_but_units(const iron_ir_type_t *a,
                                const iron_ir_type_t *b) {
  int32_t i = 0, j = 0;
  for (;;) {
    while (i < a->rank && a->dims[i] == 1) ++i;
    while (j < b->rank && b->dims[j] == 1) ++j;
    if (i == a->rank || j == b->rank) return i == a->rank && j == b->rank;
    if (a->dims[i++] != b->dims[j++]) return false;
  }
}

// A member that only adds or drops size-1 dims of a value the fusion
// computes (a reshape or an in-order broadcast_in_dim) to feed a
// dynamic_update_slice root's update: fuse.c lets such an op into a group
// of another shape.
static bool is_unit_reshape_of_member(const iron_cuda_fusion_t *f,
                                      const iron_ir_op_t *op) {
  if ((op->kind != IRON_OP_RESHAPE && op->kind != IRON_OP_BROADCAST_IN_DIM) ||
      op->num_operands != 1 || op->num_results != 1 ||
      !is_member(f, op->operands[0]->def_op))
    return false;
  bool feeds_root = false;
  for (uint32_t o = 0; o < f->num_ops && !feeds_root; ++o)
    feeds_root = f->ops[o]->kind == IRON_OP_DYNAMIC_UPDATE_SLICE &&
                 f->ops[o]->num_operands > 1 &&
                 f->ops[o]->operands[1] == &op->results[0];
  if (!feeds_root) return false;
  if (op->kind == IRON_OP_BROADCAST_IN_DIM)
    return iron_ir_broadcast_is_reshape(op);
  return same_dims_but_units(op->operands[0]->type, op->results[0].type);
}

// The shape the fusion iterates over: the group's shape (fuse.c), which
// every member's result has except dynamic_update_slice roots (the
// operand's shape), unit reshapes of member values feeding a root's update,
// indexed loads and iotas that a reshape took to the group's shape (as
// many elements) and one-element values computed for the group (start
// indices: every thread computes them). So: the first other member's
// result of more than one element (a member computed from one of the
// group's values and reshaped, which a hand-built fusion may hold, is
// read by linear index whatever its dims); failing that, a root's update
// (through such a unit reshape: the value it reshapes), a load's result, or any
// other member's (a group of one element).
// An iota whose value a reshape member takes to another shape.
static bool is_reshaped_iota(const iron_cuda_fusion_t *f,
                             const iron_ir_op_t *op) {
  if (op->kind != IRON_OP_IOTA || op->num_results != 1) return false;
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *u = f->ops[o];
    if ((u->kind == IRON_OP_RESHAPE || u->kind == IRON_OP_BROADCAST_IN_DIM) &&
        u->num_operands == 1 && u->operands[0] == &op->results[0] &&
        !iron_ir_type_equal(u->results[0].type, op->results[0].type))
      return true;
  }
  return false;
}

static bool is_space_member(const iron_cuda_fusion_t *f,
                            const iron_ir_op_t *op) {
  return op->kind != IRON_OP_DYNAMIC_UPDATE_SLICE &&
         !iron_cuda_fusion_is_indexed_load(op->kind) &&
         !is_unit_reshape_of_member(f, op) && !is_reshaped_iota(f, op) &&
         op->num_results == 1;
}

// The iteration space: the shape of the members that are not one-element
// feeds (fuse.c's scalar groups join fusions of any shape, an empty one
// too: a zero-element space computes nothing, whatever its scalars).
const iron_ir_type_t *iron_cuda_fusion_space(const iron_cuda_fusion_t *f) {
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *op = f->ops[o];
    if (is_space_member(f, op) &&
        iron_ir_type_num_elements(op->results[0].type) != 1)
      return op->results[0].type;
  }
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *d = f->ops[o];
    if (d->kind != IRON_OP_DYNAMIC_UPDATE_SLICE || d->num_operands < 2)
      continue;
    const iron_ir_value_t *u = d->operands[1];
    if (u->def_op && is_member(f, u->def_op) &&
        is_unit_reshape_of_member(f, u->def_op))
      return u->def_op->operands[0]->type;
    return u->type;
  }
  // A load of more than one element: one-element loads may belong to a
  // start index's scalar group (x[i] feeding a dynamic_slice's start),
  // which says nothing about the space.
  const iron_ir_type_t *one = NULL;
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    if (!iron_cuda_fusion_is_indexed_load(f->ops[o]->kind)) continue;
    const iron_ir_type_t *t = f->ops[o]->results[0].type;
    if (iron_ir_type_num_elements(t) != 1) return t;
    if (!one) one = t;
  }
  if (one) return one;
  for (uint32_t o = 0; o < f->num_ops; ++o)
    if (is_space_member(f, f->ops[o])) return f->ops[o]->results[0].type;
  return f->num_outputs ? f->outputs[0]->type : NULL;
}
