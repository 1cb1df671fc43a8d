// The CUDA sort's merge sort (cuda_sort_program.h, "merge"): for any
// comparator. Records (every operand's element) move through the passes:
//  - `tiles`: the bitonic network (cuda_gen_sort.c) sorts each 2048-element
//    tile of a row, ties by position;
//  - `merge` (width w = 2048, 4096, ... < n): each pair of sorted runs
//    [a0, a0 + w) and [a0 + w, a0 + 2w) of a row is merged; a thread makes
//    8 consecutive outputs, finding where they start by a binary search on
//    its diagonal of the merge path (an element of the right run goes first
//    only when it is less than the left one's: stable), then merging.
// Buffers: the last stage writes the results (through their layout when
// the sorted dim is not the innermost); earlier stages alternate between
// scratch and, when the results are laid out as rows, the results
// themselves, so only one scratch copy of the records is needed then.
#include <stdio.h>
#include <string.h>

#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_sort_program.h"

#define T IRON_CUDA_SORT_TILE
#define B IRON_CUDA_SORT_THREADS
#define ITEMS IRON_CUDA_SORT_MERGE_ITEMS

static void gen_load(iron_cuda_text_t *t, const iron_cuda_sort_shape_t *s,
                     const char *rec, const char *at) {
  for (uint32_t i = 0; i < s->num; ++i)
    iron_cuda_text_printf(t, "%s.v%u = src%u[%s];\n", rec, i, i, at);
}

static void gen_store(iron_cuda_text_t *t, const iron_cuda_sort_shape_t *s,
                      const char *rec, const char *at) {
  for (uint32_t i = 0; i < s->num; ++i)
    iron_cuda_text_printf(t, "dst%u[%s] = %s.v%u;\n", i, at, rec, i);
}

static void gen_merge(iron_cuda_text_t *t, const char *p,
                      const iron_cuda_sort_shape_t *s) {
  iron_cuda_text_printf(t,
                        "extern \"C\" __global__ void __launch_bounds__(%d) "
                        "%s_merge(",
                        B, p);
  iron_cuda_sort_gen_params(t, s, "const %s *__restrict__ src%u");
  iron_cuda_text_printf(t, ", ");
  iron_cuda_sort_gen_params(t, s, "%s *__restrict__ dst%u");
  iron_cuda_text_printf(
      t,
      ", int64_t w, int64_t dinner, int64_t n, int64_t rows) {\n"
      "const int64_t tpr = (n + %d) / %d;\n"
      "const int64_t g = (int64_t)blockIdx.x * %d + threadIdx.x;\n"
      "if (g >= rows * tpr) return;\n"
      "const int64_t row = g / tpr, pos = (g - row * tpr) * %d;\n"
      "const int64_t base = row * n;\n"
      "const int64_t a0 = pos / (2 * w) * (2 * w);\n"
      "const int64_t a1 = a0 + w < n ? a0 + w : n;\n"
      "const int64_t b1 = a0 + 2 * w < n ? a0 + 2 * w : n;\n"
      "const int64_t diag = pos - a0;\n"
      "int64_t lo = diag - (b1 - a1) > 0 ? diag - (b1 - a1) : 0;\n"
      "int64_t hi = diag < a1 - a0 ? diag : a1 - a0;\n"
      "%s_rec x, y;\n"
      "while (lo < hi) {\n"
      "const int64_t mid = (lo + hi) >> 1;\n"
      "const int64_t ia = base + a0 + mid, ib = base + a1 + diag - 1 - mid;\n",
      ITEMS - 1, ITEMS, B, ITEMS, p);
  gen_load(t, s, "x", "ia");
  gen_load(t, s, "y", "ib");
  iron_cuda_text_printf(
      t,
      "if (!%s_lt(y, x)) lo = mid + 1; else hi = mid;\n"
      "}\n"
      "int64_t i = a0 + lo, j = a1 + diag - lo;\n"
      "const int64_t end = pos + %d < b1 ? pos + %d : b1;\n"
      "const int64_t db = (row / dinner) * (n * dinner) + row %% dinner;\n"
      "bool ha = i < a1, hb = j < b1;\n"
      "if (ha) {\nconst int64_t e = base + i;\n",
      p, ITEMS, ITEMS);
  gen_load(t, s, "x", "e");
  iron_cuda_text_printf(t, "}\nif (hb) {\nconst int64_t e = base + j;\n");
  gen_load(t, s, "y", "e");
  iron_cuda_text_printf(t,
                        "}\n"
                        "for (int64_t o = pos; o < end; ++o) {\n"
                        "const int64_t d = db + o * dinner;\n"
                        "if (!ha || (hb && %s_lt(y, x))) {\n",
                        p);
  gen_store(t, s, "y", "d");
  iron_cuda_text_printf(t, "++j;\nhb = j < b1;\nif (hb) {\nconst int64_t e = "
                        "base + j;\n");
  gen_load(t, s, "y", "e");
  iron_cuda_text_printf(t, "}\n} else {\n");
  gen_store(t, s, "x", "d");
  iron_cuda_text_printf(t, "++i;\nha = i < a1;\nif (ha) {\nconst int64_t e = "
                        "base + i;\n");
  gen_load(t, s, "x", "e");
  iron_cuda_text_printf(t, "}\n}\n}\n}\n");
}

// Where stage `st` (0: tiles, 1..passes: merges) writes.
typedef enum { BUF_OUT, BUF_A, BUF_B } buf_t;
static buf_t stage_dst(int st, int passes, bool rows_layout) {
  if (st == passes) return BUF_OUT;
  if (rows_layout) return (passes - st) % 2 == 0 ? BUF_OUT : BUF_A;
  return (passes - 1 - st) % 2 == 0 ? BUF_A : BUF_B;
}

static void buffer_args(iron_cuda_sort_builder_t *b,
                        const iron_cuda_sort_shape_t *s, buf_t buf,
                        const int64_t *offs_a, const int64_t *offs_b) {
  for (uint32_t i = 0; i < s->num; ++i) {
    if (buf == BUF_OUT)
      iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_OUTPUT, i, 0);
    else
      iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_SCRATCH, 0,
                         buf == BUF_A ? offs_a[i] : offs_b[i]);
  }
}

iron_status_t iron_cuda_sort_gen_merge(iron_cuda_text_t *t,
                                       iron_cuda_sort_builder_t *b,
                                       const iron_cuda_sort_shape_t *s) {
  const char *p = b->prefix;
  int64_t n = s->n, rows = s->rows, total = rows * n;
  char kname[160];
  snprintf(kname, sizeof(kname), "%s_tiles", p);
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_sort_gen_bitonic(t, kname, p, s, T, B));
  int passes = 0;
  for (int64_t w = T; w < n; w *= 2) passes++;
  if (passes) gen_merge(t, p, s);
  bool rows_layout = s->inner == 1;
  int64_t offs_a[IRON_CUDA_SORT_MAX_OPERANDS] = {0};
  int64_t offs_b[IRON_CUDA_SORT_MAX_OPERANDS] = {0};
  if (passes) {
    for (uint32_t i = 0; i < s->num; ++i)
      offs_a[i] = iron_cuda_sort_scratch(
          b, total * (int64_t)iron_dtype_size(s->dtypes[i]));
    if (!rows_layout && passes >= 2)
      for (uint32_t i = 0; i < s->num; ++i)
        offs_b[i] = iron_cuda_sort_scratch(
            b, total * (int64_t)iron_dtype_size(s->dtypes[i]));
  }
  int64_t tiles = rows * ((n + T - 1) / T);
  buf_t dst = stage_dst(0, passes, rows_layout);
  iron_cuda_sort_launch(b, iron_cuda_sort_kernel(b, "tiles"),
                        tiles > (1 << 20) ? (1 << 20) : tiles, B);
  for (uint32_t i = 0; i < s->num; ++i)
    iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_INPUT, i, 0);
  buffer_args(b, s, dst, offs_a, offs_b);
  iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0,
                     dst == BUF_OUT ? s->inner : 1);
  iron_cuda_sort_geometry(b, s);
  int64_t threads = rows * ((n + ITEMS - 1) / ITEMS);
  int64_t w = T;
  for (int st = 1; st <= passes; ++st, w *= 2) {
    buf_t src = dst;
    dst = stage_dst(st, passes, rows_layout);
    iron_cuda_sort_launch(b, iron_cuda_sort_kernel(b, "merge"),
                          (threads + B - 1) / B, B);
    buffer_args(b, s, src, offs_a, offs_b);
    buffer_args(b, s, dst, offs_a, offs_b);
    iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, w);
    iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0,
                       dst == BUF_OUT ? s->inner : 1);
    iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, n);
    iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, rows);
  }
  return IRON_OK;
}
