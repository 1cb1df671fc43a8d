// Generators of CUDA C text for the CUDA device's kernels other than the
// element-wise ones (dot packing, reductions, gather/scatter, rng, sort,
// windows, device loops). Pure functions of shapes, dtypes and region IR:
// they never touch a GPU, so GPU-free tests (tests/c/test_cuda_ops_codegen.c
// and the emulation tests) compile every generated source with NVRTC and
// as host C++. The kernel glue (cuda_dot.c, cuda_reduce.c, ...) requests
// the text with iron_cuda_function_request at prepare time and launches at
// run time.
//
// Every generated translation unit starts with iron_cuda_prelude() (the
// one prelude of every generated kernel, gen/prelude.h); values are held as
// gen/types.h says and region bodies are translated by gen/region.c through
// the scalar emitter (gen/scalar.h), the same one fusions use.
#ifndef IRON_DEVICE_CUDA_GEN_OPS_H_
#define IRON_DEVICE_CUDA_GEN_OPS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/region.h"
#include "device/cuda/gen/text.h"
#include "device/cuda/gen/types.h"
#include "device/kernel.h"
#include "device/plans/gather_plan.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Regions (bodies, comparators, selects) are passed as iron_region_t
// (device/kernel.h): `ir` is translated, `module` holds the functions its
// func.call ops name (NULL: calls are refused); `elementwise` is unused.

// --- while -------------------------------------------------------------------

// A stablehlo.while whose carried values are all scalars as one kernel
// `name(const S0 *in0, ..., S0 *out0, ...)` for one thread: the condition
// and body regions (iron_cuda_gen_region_fn) alternate in a device loop.
// UNIMPLEMENTED when a value is not a scalar or a region holds an op the
// region generator does not translate.
// `module` holds the functions the regions' func.call ops name (may be
// NULL: calls are refused).
iron_status_t iron_cuda_gen_while(const char *name, const iron_ir_op_t *op,
                                  const iron_ir_module_t *module,
                                  char **out_src);

// --- convert ------------------------------------------------------------------

// A stablehlo.convert whose operand or result is a narrow dtype (f8 family,
// f4E2M1FN, f6E2M3FN/f6E3M2FN, s4/u4/s2/u2, one element per byte) as
// kernel `<name>(const S *in0, D *out0)` over the result's elements (a
// one-element operand is broadcast), with the host's semantics
// (ew_narrow.c); source = prelude + body, both malloc'ed. UNIMPLEMENTED
// for f8E8M0FNU (the fusion generator converts it).
iron_status_t iron_cuda_gen_convert_narrow(const iron_ir_op_t *op,
                                           char **out_source,
                                           char **out_name);
// The dtypes that take that kernel: the narrow floats but f8E8M0FNU (f6
// included), and s4/u4/s2/u2.
bool iron_cuda_dtype_is_narrow(iron_dtype_t dt);

// --- dot_general ------------------------------------------------------------

// Packs a strided view into a dense row-major array, converting the dtype:
// dst[i] (row-major over dims[0..rank)) = convert(src[sum idx_d *
// src_strides[d]]). Kernel `name(const S *src, D *dst)`, 1-D grid of
// 256-thread blocks, grid-stride loop over the product of dims.
// real -> complex conversions set the imaginary part to 0; complex -> real
// is refused.
iron_status_t iron_cuda_gen_pack(const char *name, iron_dtype_t src_dt,
                                 iron_dtype_t dst_dt, int32_t rank,
                                 const int64_t *dims,
                                 const int64_t *src_strides, char **out_src);

// Integer (and pred) batched matmul: out[b,m,n] = sum_k lhs[b,m,k] *
// rhs[b,k,n] computed in wrapping 64-bit arithmetic, stored as the low bits
// of out_dt (pred: != 0). Operands are read through strides (bs, rs, cs),
// the output is dense. Kernel `name(const L *lhs, const R *rhs, O *out)`,
// 16x16 shared-memory tiles visited in grid-stride loops, so any grid of
// 256-thread blocks computes every size (iron_cuda_dot_int_grid picks it).
iron_status_t iron_cuda_gen_dot_int(const char *name, iron_dtype_t lhs_dt,
                                    iron_dtype_t rhs_dt, iron_dtype_t out_dt,
                                    int64_t batch, int64_t m, int64_t n,
                                    int64_t k, const int64_t lhs_strides[3],
                                    const int64_t rhs_strides[3],
                                    char **out_src);

// The integer dot's grid: one block per 16x16 tile (x: n, y: m, z: batch)
// up to `limit` per dimension (the device's: 2^31-1, 65535, 65535); the
// kernel's loops take the tiles past it.
void iron_cuda_dot_int_grid(int64_t batch, int64_t m, int64_t n,
                            const unsigned limit[3], unsigned out_grid[3]);

// --- reduce -----------------------------------------------------------------

// Reduction of `num` operands of the same dims (each with its init value,
// a rank-0 device tensor) over the dims flagged in `reduced`; results are
// the kept dims in order, row-major. Kernel `name(const S0 *in0, ...,
// const S0 *init0, ..., S0 *out0, ...)`: the body is generated from the
// region (iron_cuda_gen_region_fn) and folded as XLA does (init first).
// Shapes, chosen from the layout: one warp or one block per output
// (shuffle trees) when the innermost dim is reduced; otherwise tiles of 32
// consecutive outputs x 8 slices of the reduced elements (coalesced), one
// block per output for a few huge outputs, or one thread per output.
// Bodies other than one commutative op see elements in XLA's sequential
// order (chunks merged left to right). Launch: *out_grid blocks
// of *out_block threads, no dynamic shared memory.
iron_status_t iron_cuda_gen_reduce(const char *name, int32_t rank,
                                   const int64_t *dims, const bool *reduced,
                                   uint32_t num, const iron_dtype_t *dtypes,
                                   const iron_region_t *body,
                                   char **out_src, unsigned *out_grid,
                                   unsigned *out_block);

// The reduce op's "dimensions" as flags over the operand's `rank` dims
// (iron_reduce_plan_dims); INVALID_ARGUMENT naming the op when one is out
// of range or repeated.
iron_status_t iron_cuda_reduce_dims(const iron_ir_op_t *op, int32_t rank,
                                    bool *out_reduced);

// The checks every CUDA reduce kernel makes of a stablehlo.reduce: the
// shared plan's (iron_reduce_plan_read: the host's statuses, up to
// IRON_REDUCE_PLAN_MAX_INPUTS inputs); fills the inputs' dtypes (out_dtypes
// holds IRON_REDUCE_PLAN_MAX_INPUTS) and the reduced-dims flags.
iron_status_t iron_cuda_reduce_check(const iron_ir_op_t *op,
                                     iron_dtype_t *out_dtypes,
                                     bool *out_reduced);

// How many threads iron_cuda_gen_reduce's kernel for this reduce runs
// (its parallelism: the fusion pass fuses producers only into wide ones).
int64_t iron_cuda_reduce_threads(int32_t rank, const int64_t *dims,
                                 const bool *reduced);

// The reduce with its operands computed by fused producers instead of
// loaded: `fn_text` defines `fn_name(const I0 *in0, ..., long long i,
// V0 &v0, ...)` (iron_cuda_fusion_t.device_fn) giving the reduce operands'
// element i (row-major over `dims`) as values of `value_ctypes`. The kernel
// is `name(const I0 *fin0, ..., S0 *out0, ...)` (input_ctypes: the
// fusion inputs' storage types); init value i is fusion input
// init_inputs[i]. The source starts with both preludes.
typedef struct iron_cuda_reduce_fused {
  const char *fn_text, *fn_name;
  uint32_t num_inputs;
  const char *const *input_ctypes;
  const char *const *value_ctypes;  // per reduce operand
  const uint32_t *init_inputs;      // per reduce operand
} iron_cuda_reduce_fused_t;
iron_status_t iron_cuda_gen_reduce_fused(
    const char *name, int32_t rank, const int64_t *dims, const bool *reduced,
    uint32_t num, const iron_dtype_t *dtypes, const iron_region_t *body,
    const iron_cuda_reduce_fused_t *fused, char **out_src, unsigned *out_grid,
    unsigned *out_block);

// --- gather / scatter -------------------------------------------------------

// Index points (the index tensor's dims without index_vector_dim) and the
// window box of the shared plan (src/device/plans/gather_plan.h: "small" is
// the gather result or the scatter updates; box a = operand, b = small), in
// the generator's form.
typedef struct iron_cuda_gs_plan {
  iron_dtype_t dtype, idx_dtype;  // dtype: operand 0's (= dtypes[0])
  // Scatter: operands (= updates = results) and their dtypes; gather: 1.
  int32_t num;
  iron_dtype_t dtypes[IRON_SCATTER_PLAN_MAX_OPERANDS];
  int32_t nbatch;
  int64_t bdims[IRON_MAX_RANK];
  int64_t b_idx_stride[IRON_MAX_RANK];
  int64_t b_small_stride[IRON_MAX_RANK];
  int64_t b_op_stride[IRON_MAX_RANK];  // non-zero for batching dims
  int64_t b_op_dim[IRON_MAX_RANK];     // operand size of a batching dim
  int64_t num_points;
  int32_t nstart;
  int64_t idx_vec_stride;
  int64_t start_op_stride[IRON_MAX_RANK];
  int64_t start_max[IRON_MAX_RANK];
  int32_t box_rank;
  int64_t box_size[IRON_MAX_RANK];
  int64_t box_a_stride[IRON_MAX_RANK];
  int64_t box_b_stride[IRON_MAX_RANK];
  int64_t box_count;
  int64_t op_count, small_count;
  // Scatter: an indexed operand dim has a window wider than 1, so windows
  // of different points may partially overlap.
  bool overlap;
} iron_cuda_gs_plan_t;

// Plans a stablehlo.gather / stablehlo.scatter (any number of operands):
// the shared plan (iron_gather_plan_read / iron_scatter_plan_read: the
// host's statuses), then CUDA's refusal of elements of other than 1, 2, 4,
// 8 or 16 bytes.
iron_status_t iron_cuda_gather_plan(const iron_ir_op_t *op,
                                    iron_cuda_gs_plan_t *out_plan);
iron_status_t iron_cuda_scatter_plan(const iron_ir_op_t *op,
                                     iron_cuda_gs_plan_t *out_plan);

// Gather with XLA's start index clamping. Kernel `name(const T *operand,
// const I *indices, T *out)`, one thread per output element, 1-D grid of
// 256-thread blocks (grid-stride; iron_cuda_ops_grid of the output count).
iron_status_t iron_cuda_gen_gather(const char *name,
                                   const iron_cuda_gs_plan_t *g,
                                   char **out_src);

// The update body of a scatter (iron_scatter_plan_body): `return update`
// (SET), a single-op body of the two arguments, or anything else (GENERIC,
// from the region IR).
typedef enum iron_cuda_scatter_op {
  IRON_CUDA_SCATTER_GENERIC = IRON_SCATTER_BODY_GENERIC,
  IRON_CUDA_SCATTER_SET = IRON_SCATTER_BODY_SET,
  IRON_CUDA_SCATTER_ADD = IRON_SCATTER_BODY_ADD,
  IRON_CUDA_SCATTER_MUL = IRON_SCATTER_BODY_MUL,
  IRON_CUDA_SCATTER_MAX = IRON_SCATTER_BODY_MAX,
  IRON_CUDA_SCATTER_MIN = IRON_SCATTER_BODY_MIN,
  IRON_CUDA_SCATTER_OR = IRON_SCATTER_BODY_OR,
  IRON_CUDA_SCATTER_AND = IRON_SCATTER_BODY_AND,
} iron_cuda_scatter_op_t;
iron_cuda_scatter_op_t iron_cuda_scatter_classify(const iron_ir_region_t *b);

// Scatter into `result` (already a copy of the operand). Windows not fully
// in bounds are skipped (XLA). Commutative single-op bodies of one operand
// run one thread per update element with atomics (CAS loops where no
// native atomic exists); SET and GENERIC bodies, and every scatter of
// several operands (s->num > 1: `op` is ignored, the body combines all of
// them at once), keep XLA:CPU's order (points in order, the last duplicate
// wins) by giving each thread one window element and looping over the
// points, unless `unique_indices` makes them parallel. Kernel `name(T0
// *result0, ..., const I *indices, const T0 *updates0, ...)` (one result
// and one update per operand); launch *out_grid blocks of 256 threads.
iron_status_t iron_cuda_gen_scatter(const char *name,
                                    const iron_cuda_gs_plan_t *s,
                                    iron_cuda_scatter_op_t op,
                                    const iron_region_t *body,
                                    bool unique_indices, char **out_src,
                                    unsigned *out_grid);

// --- rng_bit_generator ------------------------------------------------------

// Bit-exact with src/device/host/rng.c (XLA:CPU's expansion). `algorithm`
// IRON_RNG_THREE_FRY or IRON_RNG_PHILOX (DEFAULT resolved by the caller);
// `state_words` 2 (or 3 with PHILOX); `out_bytes` 1, 2, 4 or 8; the output
// dims matter for THREE_FRY's split shape. Kernel `name(const uint64_t
// *state, uint64_t *new_state, T *out)`; state and new_state must not alias.
// *out_grid blocks of 256 threads.
iron_status_t iron_cuda_gen_rng(const char *name, int32_t algorithm,
                                int32_t state_words, int32_t out_bytes,
                                int32_t rank, const int64_t *dims,
                                char **out_src, unsigned *out_grid);

// --- sort ---------------------------------------------------------------------

// The longest row the one-block sort kernel takes (a row's index
// permutation lives in shared memory). Longer rows take the device-wide
// sorts of cuda_sort_program.h, which plans every CUDA sort.
#define IRON_CUDA_SORT_MAX_ROW 16384

// The one-block kernel alone (cuda_sort_program.h's "block" algorithm with
// the comparator region): a stable sort of `num` operands of the same dims
// along `dimension`, rows up to IRON_CUDA_SORT_MAX_ROW (longer: refused).
// Kernel `name(const S0 *in0, ..., S0 *out0, ..., int64_t dinner, int64_t
// n, int64_t rows, int64_t inner)` (dinner = inner: the results' layout);
// outputs must not alias inputs. Launch *out_grid blocks of *out_block
// threads.
iron_status_t iron_cuda_gen_sort(const char *name, int32_t rank,
                                 const int64_t *dims, int32_t dimension,
                                 uint32_t num, const iron_dtype_t *dtypes,
                                 const iron_region_t *comparator,
                                 char **out_src, unsigned *out_grid,
                                 unsigned *out_block);

// --- reduce_window -------------------------------------------------------------

typedef struct iron_cuda_window {
  int32_t rank;
  int64_t in_dims[IRON_MAX_RANK], out_dims[IRON_MAX_RANK];
  int64_t wdims[IRON_MAX_RANK], strides[IRON_MAX_RANK];
  int64_t base_dil[IRON_MAX_RANK], win_dil[IRON_MAX_RANK];
  int64_t pad_lo[IRON_MAX_RANK];
} iron_cuda_window_t;

// Most operands of one reduce_window kernel: 3 pointers each within
// IRON_CUDA_MAX_KERNEL_PARAMS (cuda_launch.h: 512), far past the host's 16.
#define IRON_CUDA_WINDOW_MAX_OPERANDS 170

// reduce_window with the host's semantics (window.c): padding and base
// dilation holes are skipped; each result folds init then the real window
// elements in row-major window order through the body. One thread per
// output element. Kernel `name(const S0 *in0, ..., const S0 *init0, ...,
// S0 *out0, ...)`; *out_grid blocks of 256 threads.
iron_status_t iron_cuda_gen_reduce_window(const char *name,
                                          const iron_cuda_window_t *w,
                                          uint32_t num,
                                          const iron_dtype_t *dtypes,
                                          const iron_region_t *body,
                                          char **out_src, unsigned *out_grid);

// Cumulative windows (jnp.cumsum & co.: window = the whole dim n, stride
// 1, padding n-1 (or n: the exclusive form, n+1 results) on one side, every
// other dim trivial) with a single-op body, computed in the host's order
// (window.c's two-level scan, which is XLA:CPU's ReduceWindowRewriter), so
// float results are bit-exact with XLA:CPU. Lines are `outer` x `inner`
// (the scanned dim has stride `inner`). One thread per line. Kernel
// `name(const S *in0, const S *init0, S *out0)`; *out_grid blocks of 256
// threads.
typedef struct iron_cuda_scan {
  iron_op_kind_t kind;  // ADD, MULTIPLY, MAXIMUM, MINIMUM
  int64_t n, outer, inner;
  bool rev;   // padding on the high side (reverse cumulative)
  bool excl;  // padding n: init then the scan (reverse: the scan then init)
} iron_cuda_scan_t;
// The (op, dtype) pairs iron_cuda_gen_scan handles (the host's scan set).
bool iron_cuda_scan_supported(iron_op_kind_t kind, iron_dtype_t dt);
iron_status_t iron_cuda_gen_scan(const char *name, const iron_cuda_scan_t *s,
                                 iron_dtype_t dt, char **out_src,
                                 unsigned *out_grid);

// select_and_scatter (host semantics, window.c): per source element, the
// window's selected operand element is the first e with select(e, c) for
// every later candidate c (the running choice is replaced when select(cur,
// cand) is false); the source value is combined into the result there with
// the scatter body. `w` describes the window (no dilations; out_dims are
// the source dims). The result must already hold the init value everywhere.
// Commutative single-op scatter bodies run one thread per source element
// with atomics; others run in source order on one thread. Kernel
// `name(const S *operand, const S *source, S *out)`; *out_grid blocks of
// 256 threads.
iron_status_t iron_cuda_gen_select_and_scatter(
    const char *name, const iron_cuda_window_t *w, iron_dtype_t dt,
    const iron_region_t *select, const iron_region_t *scatter,
    char **out_src, unsigned *out_grid);

// --- reduce_precision --------------------------------------------------------

// Rounds `count` floats of dtype `dt` (f16, bf16, f32, f64) to
// exponent_bits/mantissa_bits on the storage bits, bit-exact with the host's
// reduce_precision.c (XLA's elemental emitter). Kernel `name(const U *in,
// U *out)` over the unsigned storage type; may run in place. 1-D grid of
// 256-thread blocks (iron_cuda_ops_grid(count)).
iron_status_t iron_cuda_gen_reduce_precision(const char *name, iron_dtype_t dt,
                                             int64_t exponent_bits,
                                             int64_t mantissa_bits,
                                             int64_t count, char **out_src);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_GEN_OPS_H_
