// The kernel of a row fusion (src/compiler/fuse_rows.h) as CUDA C,
// GPU-free: cuda_row_fusion.c analyses the fusion's region into the plan
// below (which values are read how, which per-row values are kept, the
// reduces and their passes) and generates the element-wise pieces as
// __device__ functions with the fusion generator (cuda_fusion.h,
// device_fn); this file writes the kernel that calls them.
//
// The kernel: threads_per_row threads per row (a power of two; rows of up
// to 256 elements share warps, longer rows take a block each), every
// thread owns fixed elements of its row. For each level of reduces (pass
// k), every thread computes the reduce operands of its elements (device
// function E_k) and folds them; the row's partials then combine in a fixed
// tree and every thread of the row holds the result. Per-row values that
// depend on the results (device functions R_k) are computed once per
// thread, and the last pass (F) computes and writes the fusion's
// per-element results. A row's inputs are read from memory once when
// they fit in registers (then every pass reads the registers), else again
// by each pass (the row is still in L1/L2).
//
// Summation order: the host device's (src/device/host/reduce_fast.c, a
// row of a reduce over the minor dims): rows of fewer than 16 elements
// fold in order; longer rows split in halves (the first half n / 2
// elements) until at most 256 remain; each such leaf folds 8 lanes (lane k
// takes the elements k, k + 8, ... in order), combined as ((l0 + l1) +
// (l2 + l3)) + ((l4 + l5) + (l6 + l7)); the halves combine as (first +
// second); the init value comes first: init + row. So a row fusion gives
// the host's bits for every element-wise op the fusion generator matches
// (with one host thread: the host splits rows of >= 16384 elements over
// its threads when it has fewer rows than twice its threads). Reduces of
// max/min are the same in any order.
#ifndef IRON_DEVICE_CUDA_GEN_ROW_H_
#define IRON_DEVICE_CUDA_GEN_ROW_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "compiler/fuse_rows.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// How a kernel input is read at (row, element e of the row).
typedef enum iron_cuda_row_view_kind {
  IRON_CUDA_ROW_VIEW_FULL,     // in[row * n + e]
  IRON_CUDA_ROW_VIEW_ROW,      // in[row]
  IRON_CUDA_ROW_VIEW_ONE,      // in[0]
  IRON_CUDA_ROW_VIEW_STRIDED,  // in[sum over S's dims of coord * stride]
} iron_cuda_row_view_kind_t;

typedef struct iron_cuda_row_view {
  uint32_t input;  // kernel input
  iron_dtype_t dtype;
  iron_cuda_row_view_kind_t kind;
  int64_t strides[IRON_MAX_RANK];  // STRIDED: per dim of S (0: broadcast)
  bool elem;  // depends on the element (FULL, or STRIDED along reduced dims)
} iron_cuda_row_view_t;

// A per-row value kept in every thread of the row (a reduce's result, or
// a value that element-wise work or the results need).
typedef struct iron_cuda_row_slot {
  iron_dtype_t dtype;
  uint32_t level;  // computed after pass level - 1 (0: at the row's start)
  int32_t reduce;  // the reduce whose result it is, or -1 (computed by R)
  int32_t output;  // kernel output written with it, or -1
} iron_cuda_row_slot_t;

// An element value computed by pass `pass` and kept for the later passes
// and the results (softmax's exp(x - max)): in shared memory, at the
// element's place, so that later passes read it instead of computing it
// again.
typedef struct iron_cuda_row_keep {
  iron_dtype_t dtype;
  uint32_t pass;       // E_pass computes it ...
  uint32_t fn_output;  // ... as this output
} iron_cuda_row_keep_t;

typedef struct iron_cuda_row_reduce {
  uint32_t pass;          // the level of its operand
  uint32_t fn_output;     // output of E_pass giving its operand, or
  int32_t operand_view;   // >= 0: the view that is its operand (an input)
  iron_op_kind_t body;    // ADD, MULTIPLY, MAXIMUM, MINIMUM
  iron_dtype_t dtype;     // operand and result dtype (f16, bf16, f32, f64)
  uint32_t init_view;     // a ONE view
  uint32_t slot;          // where its result goes
} iron_cuda_row_reduce_t;

// A generated device function: `static __device__ void name(const S *v0,
// ..., const S *p0, ..., const S *k0, ..., long long i, C &o0, ...)`
// taking a pointer to every view's value, then to every slot, then to
// every kept element value, then the element index.
typedef struct iron_cuda_row_fn {
  const char *name;  // NULL: no function (nothing to compute)
  uint32_t num_outputs;
  const iron_dtype_t *out_dtypes;
  // R: the slot of each output; E: unused (reduces name their output);
  // F: the kernel output of each output.
  const uint32_t *dest;
  // Per view: whether the function reads it (NULL: every view).
  const bool *uses;
  // Per kept value: whether the function reads it (NULL: none).
  const bool *uses_keep;
} iron_cuda_row_fn_t;

typedef struct iron_cuda_row_plan {
  iron_row_shape_t rs;
  uint32_t num_inputs, num_outputs;
  const iron_dtype_t *input_dtypes, *output_dtypes;
  uint32_t num_views;
  const iron_cuda_row_view_t *views;
  uint32_t num_slots;
  const iron_cuda_row_slot_t *slots;
  uint32_t num_reduces;
  const iron_cuda_row_reduce_t *reduces;
  uint32_t num_keeps;
  const iron_cuda_row_keep_t *keeps;
  uint32_t passes;  // levels of reduces
  const iron_cuda_row_fn_t *row_fns;   // passes + 1: R_0 .. R_passes
  const iron_cuda_row_fn_t *elem_fns;  // passes: E_0 ..
  iron_cuda_row_fn_t final_fn;         // F
  const char *fn_text;  // the device functions' definitions
  // Launch: 0 picks (threads per row from the row length, <= 1024).
  unsigned max_threads_per_row;
  int num_sms;  // for the grid (0: 132)
} iron_cuda_row_plan_t;

// The kernel's shape for a row length: threads per row, slots (lanes of
// the summation tree) per thread, elements per slot at most.
typedef struct iron_cuda_row_layout {
  bool sequential;  // n < 16: one slot of n elements in order
  int depth;        // levels of halving (virtual tree, see gen/row.c)
  int64_t slots;    // 8 << depth, or 1
  unsigned tpr;     // threads per row
  unsigned per_thread;  // slots per thread
  unsigned per_slot;    // elements per slot, at most
  unsigned block, rows_per_block;
} iron_cuda_row_layout_t;
void iron_cuda_row_layout(int64_t n, unsigned max_tpr,
                          iron_cuda_row_layout_t *out);

// The complete translation unit (prelude, device functions, kernel named
// by iron_cuda_source_make, prefix "iron_row") and its launch shape. The
// kernel takes the inputs then the outputs, as iron_cuda_ew_run passes
// them. RESOURCE_EXHAUSTED when the kept values do not fit in shared
// memory (the caller plans again without them).
iron_status_t iron_cuda_gen_row(const iron_cuda_row_plan_t *plan,
                                char **out_source, char **out_name,
                                unsigned *out_grid, unsigned *out_block);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_GEN_ROW_H_
