// stablehlo.sort on the CUDA device as a program: one generated translation
// unit holding every kernel the sort needs, and the list of launches that
// runs it (grid, block, arguments naming the sort's operands, results, a
// scratch buffer or integers). GPU-free: cuda_sort.c requests the kernels
// and replays the launches on the stream; tests/c/test_cuda_sort_emu.c runs
// the same launches on the CPU (cuda_emu.h) and compares with the host
// device's sort.
//
// Algorithms (rows are the 1-D slices along `dimension`, n elements each):
//  - block: rows of at most `block_max` (<= 16384) elements, one block per
//    row sorts an index permutation in shared memory with a bitonic network
//    whose comparisons break ties by position (so its order is the stable
//    order); one launch.
//  - radix: longer rows whose comparator sort_keys.h recognizes with only
//    integer-ordered keys (jnp.sort / argsort / lexsort / top_k of ints,
//    bools and floats under TOTALORDER, complex parts): each key becomes an
//    order-preserving unsigned integer (canonicalisation, sign flips,
//    descending as complement), then an LSD radix sort, 8 bits per pass,
//    least significant key first, moves (key, row-local index) pairs: per
//    pass a digit histogram per chunk of a row, a per-row exclusive scan of
//    the histograms ([digit][chunk] order), and a scatter that ranks each
//    2048-element tile stably (warp match + per-warp counters) and writes
//    through shared memory. The last pass gathers every operand through the
//    index into the results (an iota operand, argsort's, is the index
//    itself); a single-operand sort (jnp.sort) moves the values instead of
//    indices and gathers nothing. Stable by construction.
//  - merge: any other comparator (generated from the region, or from the
//    recognized keys when one compares as FLOAT): 2048-element tiles sorted
//    by the bitonic network (ties by position), then merge passes of runs
//    of doubling width, each thread finding its 8 outputs' start by a
//    merge-path binary search (ties taken from the left run: stable).
//    Records (all operands) move through every pass.
// Every algorithm gives the stable order of the comparator, which for a
// strict weak order (every comparator jax emits) is unique: the host's
// order, and XLA:CPU's for is_stable = true.
#ifndef IRON_DEVICE_CUDA_CUDA_SORT_PROGRAM_H_
#define IRON_DEVICE_CUDA_CUDA_SORT_PROGRAM_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "device/cuda/gen/ops.h"
#include "device/plans/sort_keys.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Sort operands the CUDA device takes (as many as the host).
#define IRON_CUDA_SORT_MAX_OPERANDS 64

typedef enum iron_cuda_sort_algorithm {
  IRON_CUDA_SORT_NONE = 0,  // nothing to sort (no elements)
  IRON_CUDA_SORT_BLOCK,
  IRON_CUDA_SORT_RADIX,
  IRON_CUDA_SORT_MERGE,
} iron_cuda_sort_algorithm_t;

typedef struct iron_cuda_sort_options {
  // Rows up to this many elements take the one-block path (at most
  // IRON_CUDA_SORT_MAX_ROW); longer rows the device-wide ones.
  int64_t block_max;
  bool radix;    // false: the merge sort even for integer-ordered keys
  bool generic;  // true: the comparator region even where keys match
  bool daz;      // canonicalisation's x == 0 holds for denormals
} iron_cuda_sort_options_t;

// The defaults, from IRON_CUDA_SORT_BLOCK_MAX, IRON_CUDA_SORT_RADIX,
// IRON_SORT_GENERIC and IRON_CUDA_DENORMALS.
void iron_cuda_sort_options_from_env(iron_cuda_sort_options_t *out);

typedef enum iron_cuda_sort_arg_kind {
  IRON_CUDA_SORT_ARG_INPUT,    // device pointer of sort operand `index`
  IRON_CUDA_SORT_ARG_OUTPUT,   // device pointer of result `index`
  IRON_CUDA_SORT_ARG_SCRATCH,  // scratch base + `value` bytes
  IRON_CUDA_SORT_ARG_I64,      // the integer `value` (a long long param)
} iron_cuda_sort_arg_kind_t;

typedef struct iron_cuda_sort_arg {
  iron_cuda_sort_arg_kind_t kind;
  uint32_t index;
  int64_t value;
} iron_cuda_sort_arg_t;

typedef struct iron_cuda_sort_launch {
  uint32_t kernel;  // index into kernels
  unsigned grid, block;
  uint32_t first_arg, num_args;  // into args
} iron_cuda_sort_launch_t;

typedef struct iron_cuda_sort_program {
  iron_cuda_sort_algorithm_t algorithm;
  char *source;  // every kernel; NULL when there is nothing to launch
  uint32_t num_kernels;
  char **kernels;  // extern "C" names, unique per source text
  uint32_t num_launches;
  iron_cuda_sort_launch_t *launches;
  uint32_t num_args;
  iron_cuda_sort_arg_t *args;
  size_t scratch_bytes;  // device memory the launches share (0: none)
  int64_t rows, n, inner;
  // Bit i: the launches never read operand i's contents (an iota the
  // radix sort writes from the index).
  uint64_t unread_inputs;
} iron_cuda_sort_program_t;

// The program for stablehlo.sort `op` with comparator region `comparator`
// (its IR; `op->regions[0]` or the compiled region's). Refusals are
// UNIMPLEMENTED/INVALID_ARGUMENT statuses with the reason (the caller
// names the op). *out_program is owned by the caller.
iron_status_t iron_cuda_sort_program_create(
    const iron_ir_op_t *op, const iron_region_t *comparator,
    const iron_cuda_sort_options_t *options,
    iron_cuda_sort_program_t **out_program);
void iron_cuda_sort_program_destroy(iron_cuda_sort_program_t *p);

// --- internals shared by the sort generators (cuda_gen_sort*.c) ----------

// What a sort's kernels are specialized on.
typedef struct iron_cuda_sort_shape {
  uint32_t num;
  iron_dtype_t dtypes[IRON_CUDA_SORT_MAX_OPERANDS];
  iron_cuda_type_t ty[IRON_CUDA_SORT_MAX_OPERANDS];
  int64_t rows, n, inner;  // rows = outer * inner
  const iron_sort_keys_t *keys;  // recognized keys, or NULL: the region
  const iron_region_t *comparator;
  bool daz;
  // Operand i is an integer iota along the sorted dim (jax's argsort
  // payload) whose dtype holds every position: its sorted values are the
  // sorted positions, written without reading it.
  bool iota[IRON_CUDA_SORT_MAX_OPERANDS];
} iron_cuda_sort_shape_t;

// Whether operand `i` of sort `op` (sorted along `dim`, n per row) is such
// an iota: defined by stablehlo.iota, or returned by a fusion from one.
bool iron_cuda_sort_operand_is_iota(const iron_ir_op_t *op, uint32_t i,
                                    int64_t dim, int64_t n);

// Appends `struct <p>_rec` (one field v<i> per operand, storage types) and
// `bool <p>_lt(const <p>_rec &a, const <p>_rec &b)`: the comparator (from
// the keys when s->keys, else from the region).
iron_status_t iron_cuda_sort_gen_compare(iron_cuda_text_t *t, const char *p,
                                         const iron_cuda_sort_shape_t *s);
// Per recognized key k: `<p>_key<k>(const S &v)`, the key of an operand
// value v as an unsigned integer of the key's width whose order is the
// comparator's (integer-ordered keys only).
void iron_cuda_sort_gen_key_fns(iron_cuda_text_t *t, const char *p,
                                const iron_cuda_sort_shape_t *s);
// The unsigned type of a key's radix value ("uint8_t" .. "uint64_t").
const char *iron_cuda_sort_key_type(const iron_sort_key_t *k);

// Comma-separated parameter list of the operands: `fmt` gets (store type,
// index), e.g. "const %s *__restrict__ in%u".
void iron_cuda_sort_gen_params(iron_cuda_text_t *t,
                               const iron_cuda_sort_shape_t *s,
                               const char *fmt);

// The bitonic kernel `kname(const S0 *in0, ..., S0 *out0, ..., int64_t
// dinner, int64_t n, int64_t rows, int64_t inner)`: every `tile` (a power of two, <= IRON_CUDA_SORT_MAX_ROW)
// consecutive elements of every row are sorted by one block of `block`
// threads (grid-stride over rows x tiles) and written to the results at
// row base + position * dinner (row base as for a tensor whose sorted dim
// has stride dinner). Needs `<p>_rec`/`<p>_lt`.
iron_status_t iron_cuda_sort_gen_bitonic(iron_cuda_text_t *t,
                                         const char *kname, const char *p,
                                         const iron_cuda_sort_shape_t *s,
                                         int64_t tile, unsigned block);
// Threads of the one-block kernel for rows of n elements.
unsigned iron_cuda_sort_block_threads(int64_t n);

// The one-block bitonic kernel `<p>_block(const S0 *in0, ..., S0 *out0,
// ...)`: one block of *out_block threads per row (grid-stride over rows).
iron_status_t iron_cuda_sort_gen_block(iron_cuda_text_t *t, const char *p,
                                       const iron_cuda_sort_shape_t *s,
                                       unsigned *out_block);

// Program assembly (cuda_sort_program.c) for the generators: kernels are
// named <prefix>_<suffix>; launches take arguments in order.
typedef struct iron_cuda_sort_builder {
  iron_cuda_sort_program_t *prog;
  const char *prefix;
  uint32_t cap_kernels, cap_launches, cap_args;
  bool oom;
} iron_cuda_sort_builder_t;
// Index of kernel <prefix>_<suffix> (added once).
uint32_t iron_cuda_sort_kernel(iron_cuda_sort_builder_t *b,
                               const char *suffix);
void iron_cuda_sort_launch(iron_cuda_sort_builder_t *b, uint32_t kernel,
                           int64_t grid, unsigned block);
// Appends an argument to the last launch.
void iron_cuda_sort_arg(iron_cuda_sort_builder_t *b,
                        iron_cuda_sort_arg_kind_t kind, uint32_t index,
                        int64_t value);
// Appends n, rows and inner (the kernels' runtime geometry: one source
// serves every length).
void iron_cuda_sort_geometry(iron_cuda_sort_builder_t *b,
                             const iron_cuda_sort_shape_t *s);
// Reserves `bytes` of scratch (256-byte aligned); returns its offset.
int64_t iron_cuda_sort_scratch(iron_cuda_sort_builder_t *b, int64_t bytes);

// The device-wide algorithms: kernels appended to `t`, launches to `b`.
iron_status_t iron_cuda_sort_gen_radix(iron_cuda_text_t *t,
                                       iron_cuda_sort_builder_t *b,
                                       const iron_cuda_sort_shape_t *s);
iron_status_t iron_cuda_sort_gen_merge(iron_cuda_text_t *t,
                                       iron_cuda_sort_builder_t *b,
                                       const iron_cuda_sort_shape_t *s);

// Tiles, chunks and threads of the device-wide kernels (the tests sweep
// lengths around them).
#define IRON_CUDA_SORT_TILE 2048     // radix scatter tile, merge first tile
#define IRON_CUDA_SORT_THREADS 256   // threads of every device-wide kernel
#define IRON_CUDA_SORT_MERGE_ITEMS 8 // outputs per thread in a merge pass
// Elements of one radix chunk (a row is split into chunks of this many
// tiles; one histogram and one scatter block per chunk).
int64_t iron_cuda_sort_radix_chunk(int64_t rows, int64_t n);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_SORT_PROGRAM_H_
