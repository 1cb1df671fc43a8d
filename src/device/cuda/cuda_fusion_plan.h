// The CUDA fusion planner: what a fusion (a group fuse.c formed, or one
// element-wise op) computes and over which shape, for its code generator
// (gen/fusion.h) and its kernel glue (cuda_fusion.c). Pure functions of the
// IR; thread-safe.
#ifndef IRON_DEVICE_CUDA_CUDA_FUSION_PLAN_H_
#define IRON_DEVICE_CUDA_CUDA_FUSION_PLAN_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// The DAG. `ops` in an order where every operand is defined earlier (or is
// one of `inputs`); `outputs` are values defined by the ops or inputs. The
// iteration space (N elements) has the shape of the group fuse.c formed
// (iron_cuda_fusion_space). Every output but roots has N elements (or
// one); values are indexed by the element's linear index, so a reshape of
// N elements is the same value. An input is read at the element's index
// when it has N elements, at 0 when it has one, and otherwise only
// through broadcast_in_dim or indexed loads (slice, transpose,
// dynamic_slice) of the list. Borrowed pointers; nothing is owned.
typedef struct iron_cuda_fusion {
  uint32_t num_ops;
  const iron_ir_op_t *const *ops;
  uint32_t num_inputs;
  const iron_ir_value_t *const *inputs;
  uint32_t num_outputs;
  const iron_ir_value_t *const *outputs;
  // Used in error messages when an op is refused (may be NULL).
  const iron_ir_op_t *owner;
  // Non-NULL: generate no kernel but `static __device__ void
  // <device_fn>(const S0 *in0, ..., long long i, C0 &r0, ...)` that
  // computes the outputs' element i in compute types (gen/types.h),
  // without the prelude (a reduce kernel reads its inputs through it; see
  // gen/reduce.c).
  const char *device_fn;
} iron_cuda_fusion_t;

// True when a fusion may hold op kind `kind` (the dtype may still be
// refused by the generator): the scalar emitter's ops (gen/scalar.h) plus
// broadcast_in_dim, iota and the indexed loads.
bool iron_cuda_fusion_op_supported(iron_op_kind_t kind);

// slice, transpose and dynamic_slice read their operand (a fusion input)
// at other coordinates: indexed loads.
bool iron_cuda_fusion_is_indexed_load(iron_op_kind_t kind);

// The shape the fusion iterates over: the group's shape (fuse.c), which
// every member's result has except dynamic_update_slice roots, unit
// reshapes of member values feeding a root's update, indexed loads and
// iotas that a reshape took to the group's shape, and one-element values
// computed for the group (start indices: every thread computes them).
// NULL for a fusion without outputs.
const iron_ir_type_t *iron_cuda_fusion_space(const iron_cuda_fusion_t *f);

// Whether the kernel needs the element's coordinates (broadcasts, iotas,
// indexed loads, dynamic_update_slice roots) rather than its index alone.
bool iron_cuda_fusion_needs_coords(const iron_cuda_fusion_t *f);

// Whether input i is read at the element's index (or at 0), not only
// through broadcast_in_dim or as an indexed load's operand.
bool iron_cuda_fusion_reads_input(const iron_cuda_fusion_t *f, uint32_t i);

// The dynamic_update_slice op whose result output j is, or NULL.
const iron_ir_op_t *iron_cuda_fusion_dus_root(const iron_cuda_fusion_t *f,
                                              uint32_t j);

// IRON_CUDA_TRANSPOSE_FUSION (default on; read at compile time): whether
// transposes pivot fusions (iron_compiler_fuse_pivots) and transposes of
// inputs that read across the contiguous dim become tiled pivots.
bool iron_cuda_transpose_fusion_enabled(void);

// A fusion's pivot transposes (src/compiler/fuse.h): every transpose of a
// member value, and (transpose fusion on) the transposes of inputs that
// read across the source's contiguous dim and transpose alike. All
// transpose `in` by `perm`. The kernel runs in two phases: phase 1
// computes the pivots' operands (and the members they need) at the
// operand's coordinates, phase 2 everything else at the fusion space's,
// reading each pivot's value where phase 1 put it (a shared-memory tile,
// or a register when each thread computes its own source element).
#define IRON_CUDA_MAX_PIVOTS 4
typedef struct iron_cuda_fusion_pivots {
  uint32_t num;  // 0: no pivot (and nothing below is set)
  uint32_t op[IRON_CUDA_MAX_PIVOTS];  // indices into fusion->ops
  const iron_ir_type_t *in;           // the pivots' operand type
  int64_t perm[IRON_MAX_RANK];
  // Per op: bit 0 computed in phase 1, bit 1 in phase 2 (both: recomputed
  // at the other coordinates; one element, or a square transpose).
  uint8_t *phase;
  uint8_t *out_phase;  // per output: the phase that stores it (1 or 2)
} iron_cuda_fusion_pivots_t;

// Fills *out (owned: iron_cuda_fusion_pivots_free); UNIMPLEMENTED naming
// the op for transposes of member values that no one kernel can pivot.
iron_status_t iron_cuda_fusion_pivots_plan(const iron_cuda_fusion_t *f,
                                           iron_cuda_fusion_pivots_t *out);
void iron_cuda_fusion_pivots_free(iron_cuda_fusion_pivots_t *p);
bool iron_cuda_fusion_is_pivot(const iron_cuda_fusion_pivots_t *p,
                               uint32_t op_index);

// The pivots' tiles: the result dims (size-1 dims dropped, dims contiguous
// in the source merged) with their source and result strides. k >= 0: the
// source-contiguous dim k and the last dim are both >= 16 and the kernel
// runs `blocks` blocks of 256 threads over 32x32 tiles of (k, last) (as
// cuda_shape.c's tiled transpose); k < 0: one thread per element, each
// computing its source element (IRON_CUDA_TILED_TRANSPOSE=0, or the
// pivots' tiles taking more shared memory than the limit).
enum { kIronCudaPivotTileMaxBytes = 40 << 10 };
// pairs (1- and 2-byte pivot elements, both tile dims even; not with
// IRON_CUDA_TRANSPOSE_PAIRS=0): 64x64 tiles, each thread moving two
// adjacent elements along each side's contiguous dim.
typedef struct iron_cuda_fusion_tile {
  int32_t rank, k;
  bool pairs;
  int64_t dims[IRON_MAX_RANK];
  int64_t src_strides[IRON_MAX_RANK], out_strides[IRON_MAX_RANK];
  int64_t blocks;
} iron_cuda_fusion_tile_t;
void iron_cuda_fusion_tile_plan(const iron_cuda_fusion_pivots_t *p,
                                iron_cuda_fusion_tile_t *out);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_FUSION_PLAN_H_
