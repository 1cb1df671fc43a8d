// stablehlo.gather and stablehlo.scatter: dimension numbers, index points
// and window boxes read and validated once for every device (host
// gather.c / scatter_kernel.c, CUDA cuda_gen_gather.c), so that the devices
// accept and refuse the same programs with the same statuses and messages
// and agree on every dimension-number corner case. Also what both devices
// read the same way at run time: start indices of any integer dtype, and
// the scatter bodies with a fast path.
//
// The plan splits the index tensor into "points" (its dims other than
// index_vector_dim, which are also the dims of the small tensor that are
// not window dims) and a window box (the operand dims that are neither
// collapsed/inserted nor batching, mapped to the small tensor's window dims
// in order). "Small" is the gather result or the scatter updates; box
// stride a is the operand's (gather) or result's (scatter), b the small
// tensor's. Per point a kernel reads the start indices, clamps them
// (gather: to [0, start_max] as XLA does) or drops the point (scatter: an
// update whose window is not fully in bounds is skipped), adds the batching
// coordinates and moves the box.
#ifndef IRON_DEVICE_PLANS_GATHER_PLAN_H_
#define IRON_DEVICE_PLANS_GATHER_PLAN_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Most operands (= updates = results) of one scatter.
#define IRON_SCATTER_PLAN_MAX_OPERANDS 32

// A window box: `rank` dims (outermost first) with element strides in the
// big tensor (operand/result: `a`) and in the small one (`b`).
typedef struct iron_gather_box {
  int32_t rank;
  int64_t size[IRON_MAX_RANK];
  int64_t a_stride[IRON_MAX_RANK];
  int64_t b_stride[IRON_MAX_RANK];
  int64_t count;  // product of sizes
} iron_gather_box_t;

typedef struct iron_gather_plan {
  // Scatter: operands (= updates = results), each of dtype[i]; gather: 1.
  int32_t num;
  iron_dtype_t dtype[IRON_SCATTER_PLAN_MAX_OPERANDS];
  iron_dtype_t idx_dtype;  // iron_gather_plan_index_dtype_ok
  // Points: the index tensor's dims without index_vector_dim.
  int32_t nbatch;
  int64_t bdims[IRON_MAX_RANK];
  int64_t b_idx_stride[IRON_MAX_RANK];
  int64_t b_small_stride[IRON_MAX_RANK];
  int64_t b_op_stride[IRON_MAX_RANK];  // non-zero for batching dims
  int64_t b_op_dim[IRON_MAX_RANK];     // operand size of a batching dim
  int64_t num_points;
  // Start indices: nstart of them per point, idx_vec_stride apart.
  int32_t nstart;
  int64_t idx_vec_stride;
  int64_t start_op_stride[IRON_MAX_RANK];
  int64_t start_max[IRON_MAX_RANK];  // operand dim - window size
  // The window box, simplified (iron_gather_box_simplify).
  iron_gather_box_t box;
  int64_t op_count, small_count;  // elements of operand 0 / small tensor 0
  // Scatter: an indexed operand dim has a window wider than 1, so windows
  // of different points may partially overlap.
  bool overlap;
} iron_gather_plan_t;

// Validates a stablehlo.gather and fills *out (zeroed first): 2 operands
// and 1 result of static tensor types, equal operand/result dtypes, an
// index dtype of iron_gather_plan_index_dtype_ok and a dtype with a size
// (UNIMPLEMENTED through iron_ir_op_unimplemented otherwise), then every
// dimension number against the shapes (INVALID_ARGUMENT
// "stablehlo.gather: ...").
iron_status_t iron_gather_plan_read(const iron_ir_op_t *op,
                                    iron_gather_plan_t *out);

// Validates a stablehlo.scatter (2N+1 operands, N results, N <=
// IRON_SCATTER_PLAN_MAX_OPERANDS; equal operand shapes, equal update
// shapes, result i of operand i's type and update i of its dtype, element
// sizes of 1 to 16 bytes) likewise, and that it has one update body
// (UNIMPLEMENTED "without a compiled update body" otherwise, last).
iron_status_t iron_scatter_plan_read(const iron_ir_op_t *op,
                                     iron_gather_plan_t *out);

// The start-index dtypes: every integer dtype but pred.
bool iron_gather_plan_index_dtype_ok(iron_dtype_t dt);

// Element `i` of an index tensor as int64; u64 values above INT64_MAX
// saturate (they are out of bounds either way: gather clamps them to the
// top, scatter drops them). Sub-byte integers are stored one per byte in
// the low bits (the upper bits are not necessarily a sign extension: jax
// hands s4 -1 as 0x0F). The CUDA generator emits the same rules.
static inline int64_t iron_gather_plan_index_read(const void *data,
                                                  iron_dtype_t dt, int64_t i) {
  switch (dt) {
    case IRON_DTYPE_S2:
      return (int8_t)(uint8_t)(((const uint8_t *)data)[i] << 6) >> 6;
    case IRON_DTYPE_S4:
      return (int8_t)(uint8_t)(((const uint8_t *)data)[i] << 4) >> 4;
    case IRON_DTYPE_S8:
      return ((const int8_t *)data)[i];
    case IRON_DTYPE_S16:
      return ((const int16_t *)data)[i];
    case IRON_DTYPE_S32:
      return ((const int32_t *)data)[i];
    case IRON_DTYPE_S64:
      return ((const int64_t *)data)[i];
    case IRON_DTYPE_U2:
      return ((const uint8_t *)data)[i] & 0x3;
    case IRON_DTYPE_U4:
      return ((const uint8_t *)data)[i] & 0xF;
    case IRON_DTYPE_U8:
      return ((const uint8_t *)data)[i];
    case IRON_DTYPE_U16:
      return ((const uint16_t *)data)[i];
    case IRON_DTYPE_U32:
      return ((const uint32_t *)data)[i];
    case IRON_DTYPE_U64: {
      uint64_t u = ((const uint64_t *)data)[i];
      return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
    }
    default:
      return 0;
  }
}

// Drops size-1 dims and merges an outer dim into its inner neighbour when
// both strides compose, so a row-contiguous window becomes one run.
void iron_gather_box_simplify(iron_gather_box_t *box);

// A scatter update body that a device may run without the region: `return
// update` (SET) or one op of the two arguments, in either order; anything
// else is GENERIC.
typedef enum iron_scatter_body {
  IRON_SCATTER_BODY_GENERIC = 0,
  IRON_SCATTER_BODY_SET,
  IRON_SCATTER_BODY_ADD,
  IRON_SCATTER_BODY_MUL,
  IRON_SCATTER_BODY_MAX,
  IRON_SCATTER_BODY_MIN,
  IRON_SCATTER_BODY_OR,
  IRON_SCATTER_BODY_AND,
} iron_scatter_body_t;

// The body of a single-operand scatter's update region (NULL: GENERIC).
iron_scatter_body_t iron_scatter_plan_body(const iron_ir_region_t *region);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_PLANS_GATHER_PLAN_H_
