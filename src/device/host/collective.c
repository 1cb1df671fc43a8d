// Collectives on the host, for programs of one replica and one partition
// (the only ones iron compiles: src/pjrt checks num_replicas x
// num_partitions == 1). jax emits them for shard_map/pmap over a one-device
// mesh. With one participant in every group:
//   all_reduce, cross-replica-sum: the result is the operand (the reduction
//     body is never applied: there is nothing to combine with);
//   all_gather, reduce_scatter, all_to_all: concatenating / splitting over
//     one participant keeps the operand as it is;
//   collective_broadcast: the group's only member is its source;
//   collective_permute: the operand if the pair 0 -> 0 is listed, else
//     zeros (XLA: a device that no pair targets gets zeros).
// Replica groups or source-target pairs naming any device other than 0 mean
// the program was written for more devices: refused at compile time.
#include <stdlib.h>
#include <string.h>

#include "device/host/host_kernel.h"

enum { IRON_COLLECTIVE_MAX_IDS = 4096 };

typedef struct {
  uint32_t count;  // operands = results
  bool zeros;      // collective_permute without a 0 -> 0 pair
} collective_params_t;

// Every id in the dense attribute `name` is 0 (or -1, XLA's padding of
// ragged groups).
static iron_status_t collective_check_ids(const iron_ir_op_t *op,
                                          const char *name,
                                          bool *out_has_self) {
  const iron_ir_attr_t *attr = iron_ir_op_attr(op, name);
  if (out_has_self) *out_has_self = false;
  if (attr == NULL) return IRON_OK;
  int64_t *ids = malloc(sizeof(int64_t) * IRON_COLLECTIVE_MAX_IDS);
  if (ids == NULL) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  uint32_t count = 0;
  iron_status_t st = iron_ir_attr_i64_list(attr, name, ids,
                                           IRON_COLLECTIVE_MAX_IDS, &count);
  if (st == IRON_OK) {
    for (uint32_t i = 0; i < count; ++i) {
      if (ids[i] == 0) {
        if (out_has_self) *out_has_self = true;
      } else if (ids[i] != -1) {
        st = iron_ir_op_unimplemented(
            op, "across devices (%s names device %lld; iron runs programs "
                "of one replica and one partition)",
            name, (long long)ids[i]);
        break;
      }
    }
  }
  free(ids);
  return st;
}

static bool collective_same_type(const iron_ir_type_t *a,
                                 const iron_ir_type_t *b) {
  return a->kind == IRON_TYPE_TENSOR && iron_ir_type_is_static(a) &&
         iron_ir_type_equal(a, b);
}

static iron_status_t collective_prepare(const iron_ir_op_t *op,
                                        iron_region_t *const *regions,
                                        void **out_params) {
  (void)regions;
  if (op->num_operands != op->num_results || op->num_operands == 0)
    return iron_ir_op_unimplemented(op, "with %u operands and %u results",
                                    op->num_operands, op->num_results);
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    if (!collective_same_type(op->operands[i]->type, op->results[i].type)) {
      char in[128], out[128];
      iron_ir_type_format(op->operands[i]->type, in, sizeof(in));
      iron_ir_type_format(op->results[i].type, out, sizeof(out));
      return iron_ir_op_unimplemented(
          op, "from %s to %s (more than one participant)", in, out);
    }
  }
  int64_t split_count = 1;
  if (op->kind == IRON_OP_ALL_TO_ALL &&
      iron_ir_attr_as_i64(iron_ir_op_attr(op, "split_count"), &split_count) &&
      split_count != 1)
    return iron_ir_op_unimplemented(op, "with split_count %lld",
                                    (long long)split_count);
  bool has_self = false;
  IRON_RETURN_IF_ERROR_PLAIN(
      collective_check_ids(op, "replica_groups", NULL));
  IRON_RETURN_IF_ERROR_PLAIN(
      collective_check_ids(op, "source_target_pairs", &has_self));
  collective_params_t *params = calloc(1, sizeof(*params));
  if (params == NULL) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  params->count = op->num_operands;
  params->zeros = op->kind == IRON_OP_COLLECTIVE_PERMUTE && !has_self;
  *out_params = params;
  return IRON_OK;
}

static iron_status_t collective_run(const iron_kernel_ctx_t *ctx,
                                    const void *params_v,
                                    const iron_tensor_t *const *inputs,
                                    iron_tensor_t *const *outputs) {
  (void)ctx;
  const collective_params_t *params = params_v;
  for (uint32_t i = 0; i < params->count; ++i) {
    iron_tensor_t *out = outputs[i];
    if (params->zeros) {
      if (out->nbytes) memset(out->data, 0, out->nbytes);
    } else if (out->data != inputs[i]->data && out->nbytes) {
      memcpy(out->data, inputs[i]->data, out->nbytes);
    }
  }
  return IRON_OK;
}

static const iron_kernel_t kCollectiveKernel = {
    .name = "collective",
    .prepare = collective_prepare,
    .run = collective_run,
    .destroy = NULL,
    .inplace_ok = true,
    .elementwise = false,
};

void iron_host_register_collective(iron_kernel_table_t table) {
  table[IRON_OP_ALL_REDUCE] = &kCollectiveKernel;
  table[IRON_OP_CROSS_REPLICA_SUM] = &kCollectiveKernel;
  table[IRON_OP_ALL_GATHER] = &kCollectiveKernel;
  table[IRON_OP_REDUCE_SCATTER] = &kCollectiveKernel;
  table[IRON_OP_ALL_TO_ALL] = &kCollectiveKernel;
  table[IRON_OP_COLLECTIVE_BROADCAST] = &kCollectiveKernel;
  table[IRON_OP_COLLECTIVE_PERMUTE] = &kCollectiveKernel;
}
