// Collective validation shared by the devices (collective_plan.h).
#include "device/plans/collective_plan.h"

#include <stdlib.h>
#include <string.h>

enum { IRON_COLLECTIVE_MAX_IDS = 4096 };

static bool is_collective(iron_op_kind_t k) {
  switch (k) {
    case IRON_OP_ALL_REDUCE:
    case IRON_OP_CROSS_REPLICA_SUM:
    case IRON_OP_ALL_GATHER:
    case IRON_OP_REDUCE_SCATTER:
    case IRON_OP_ALL_TO_ALL:
    case IRON_OP_COLLECTIVE_BROADCAST:
    case IRON_OP_COLLECTIVE_PERMUTE:
      return true;
    default:
      return false;
  }
}

// Every id in the dense attribute `name` is 0 (or -1, XLA's padding of
// ragged groups); *out_has_self (may be NULL) tells whether 0 appears.
static iron_status_t check_ids(const iron_ir_op_t *op, const char *name,
                               bool *out_has_self) {
  const iron_ir_attr_t *attr = iron_ir_op_attr(op, name);
  if (out_has_self) *out_has_self = false;
  if (attr == NULL) return IRON_OK;
  int64_t *ids = malloc(sizeof(int64_t) * IRON_COLLECTIVE_MAX_IDS);
  if (ids == NULL) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  uint32_t count = 0;
  iron_status_t st =
      iron_ir_attr_i64_list(attr, name, ids, IRON_COLLECTIVE_MAX_IDS, &count);
  if (st == IRON_OK) {
    for (uint32_t i = 0; i < count; ++i) {
      if (ids[i] == 0) {
        if (out_has_self) *out_has_self = true;
      } else if (ids[i] != -1) {
        st = iron_ir_op_unimplemented(
            op,
            "across devices (%s names device %lld; iron runs programs "
            "of one replica and one partition)",
            name, (long long)ids[i]);
        break;
      }
    }
  }
  free(ids);
  return st;
}

static bool same_static_type(const iron_ir_type_t *a, const iron_ir_type_t *b) {
  return a->kind == IRON_TYPE_TENSOR && iron_ir_type_is_static(a) &&
         iron_ir_type_equal(a, b);
}

iron_status_t iron_collective_plan_read(const iron_ir_op_t *op,
                                        iron_collective_plan_t *out) {
  memset(out, 0, sizeof(*out));
  if (!is_collective(op->kind))
    return IRON_ERR(INVALID_ARGUMENT, "%s is not a collective", op->name);
  if (op->num_operands != op->num_results || op->num_operands == 0 ||
      op->num_operands > IRON_COLLECTIVE_PLAN_MAX)
    return iron_ir_op_unimplemented(op, "with %u operands and %u results",
                                    op->num_operands, op->num_results);
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    if (!same_static_type(op->operands[i]->type, op->results[i].type)) {
      char in[128], res[128];
      iron_ir_type_format(op->operands[i]->type, in, sizeof(in));
      iron_ir_type_format(op->results[i].type, res, sizeof(res));
      return iron_ir_op_unimplemented(
          op, "from %s to %s (more than one participant)", in, res);
    }
  }
  int64_t split_count = 1;
  if (op->kind == IRON_OP_ALL_TO_ALL &&
      iron_ir_attr_as_i64(iron_ir_op_attr(op, "split_count"), &split_count) &&
      split_count != 1)
    return iron_ir_op_unimplemented(op, "with split_count %lld",
                                    (long long)split_count);
  bool has_self = false;
  IRON_RETURN_IF_ERROR_PLAIN(check_ids(op, "replica_groups", NULL));
  IRON_RETURN_IF_ERROR_PLAIN(check_ids(op, "source_target_pairs", &has_self));
  out->count = op->num_operands;
  out->zeros = op->kind == IRON_OP_COLLECTIVE_PERMUTE && !has_self;
  return IRON_OK;
}

int32_t iron_collective_plan_clobbered_input(const void *const *in_data,
                                             uint32_t count,
                                             const void *out_data, uint32_t o) {
  for (uint32_t j = 0; j < o && j < count; ++j)
    if (in_data[j] == out_data) return (int32_t)j;
  return -1;
}
