// Collectives (all_reduce, cross-replica-sum, all_gather, reduce_scatter,
// all_to_all, collective_broadcast, collective_permute) read and validated
// once for every device (host collective.c, CUDA cuda_collective.c), so
// that the devices accept and refuse the same programs with the same
// statuses and messages.
//
// iron compiles programs of one replica and one partition only (src/pjrt
// checks num_replicas x num_partitions == 1); jax emits collectives for
// shard_map/pmap over a one-device mesh. With one participant in every
// group:
//   all_reduce, cross-replica-sum: the result is the operand (the reduction
//     body is never applied: there is nothing to combine with);
//   all_gather, reduce_scatter, all_to_all: concatenating / splitting over
//     one participant keeps the operand as it is;
//   collective_broadcast: the group's only member is its source;
//   collective_permute: the operand if the pair 0 -> 0 is listed, else
//     zeros (XLA: a device that no pair targets gets zeros).
// Replica groups or source-target pairs naming any device other than 0 mean
// the program was written for more devices: refused at compile time.
#ifndef IRON_DEVICE_PLANS_COLLECTIVE_PLAN_H_
#define IRON_DEVICE_PLANS_COLLECTIVE_PLAN_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Most operands (= results) of one collective.
#define IRON_COLLECTIVE_PLAN_MAX 256

typedef struct iron_collective_plan {
  uint32_t count;  // operands = results, each result of its operand's type
  bool zeros;      // every result is zeros (collective_permute without 0->0)
} iron_collective_plan_t;

// Validates a collective op of a one-participant program and fills *out:
// as many operands as results (1 to IRON_COLLECTIVE_PLAN_MAX), result i of
// operand i's
// static tensor type, all_to_all's split_count 1, every id in
// replica_groups and source_target_pairs 0 (or -1, XLA's padding of ragged
// groups). UNIMPLEMENTED naming the op (iron_ir_op_unimplemented) for
// anything else, INVALID_ARGUMENT for an op kind that is not a collective.
iron_status_t iron_collective_plan_read(const iron_ir_op_t *op,
                                        iron_collective_plan_t *out);

// Kernels write the results from the last to the first. An in-place plan
// (kernel inplace_ok) may give result o the storage of a dying input of
// equal size, and plan.c takes the first untaken one, which is always an
// input k >= o; so writing result o after results o+1.. reads every input
// before its storage is overwritten. Returns the input j < o whose storage
// `out_data` (result o's) is, which the write would clobber before result j
// reads it (then the kernel fails instead of computing a wrong answer), or
// -1 when writing result o is safe.
int32_t iron_collective_plan_clobbered_input(const void *const *in_data,
                                             uint32_t count,
                                             const void *out_data, uint32_t o);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_PLANS_COLLECTIVE_PLAN_H_
