// Sibling reduce fusions merged into one (src/compiler/merge_reduces.h),
// planned as the CUDA device plans them (its fusion predicates; no GPU).
// Results: the corpus program shared_conv_bn_step runs through the
// emulated CUDA fusion in test_cuda_fusion_corpus.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "compiler/fuse.h"
#include "compiler/fuse_rows.h"
#include "compiler/inline.h"
#include "compiler/merge_reduces.h"
#include "compiler/recompute.h"
#include "corpus_files.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_row_fusion.h"
#include "test.h"

// Reduce kernels of the main function's block (reduce fusions, and
// reduces of their own over at least 1024 elements), how many return
// several results, and the bytes of full-size (>= 1024 elements) operands
// they read in all.
typedef struct {
  int fusions, multi;
  int64_t read;
} reduce_kernels_t;

static reduce_kernels_t count(const iron_ir_block_t *b) {
  reduce_kernels_t r = {0, 0, 0};
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    if (op->kind == IRON_OP_REDUCE) {
      if (iron_ir_type_num_elements(op->operands[0]->type) < 1024) continue;
    } else if (op->kind == IRON_OP_FUSION) {
      const iron_ir_block_t *fb = &op->regions[0].blocks[0];
      if (fb->num_ops < 2 || fb->ops[fb->num_ops - 2]->kind != IRON_OP_REDUCE)
        continue;
    } else {
      continue;
    }
    r.fusions++;
    r.multi += op->num_results > 1;
    for (uint32_t k = 0; k < op->num_operands; ++k) {
      size_t bytes = 0;
      const iron_ir_type_t *t = op->operands[k]->type;
      if (iron_ir_type_num_elements(t) >= 1024 &&
          iron_ir_type_byte_size(t, &bytes))
        r.read += (int64_t)bytes;
    }
  }
  return r;
}

static reduce_kernels_t plan(const char *rel, bool merge, int *merged) {
  reduce_kernels_t r = {-1, -1, -1};
  iron_ir_module_t *m = test_read_module(rel);
  CHECK(m != NULL);
  if (!m) return r;
  *merged = 0;
  CHECK_OK(iron_compiler_inline_for_compile(m, true));
  CHECK_OK(iron_compiler_fuse_rows(m, iron_cuda_fusable,
                                   iron_cuda_row_fusable, NULL));
  CHECK_OK(iron_compiler_recompute(m, iron_cuda_fusable, NULL));
  CHECK_OK(iron_compiler_fuse_pivots(m, iron_cuda_fusable,
                                     iron_cuda_pivot_fusable, NULL));
  if (merge) CHECK_OK(iron_compiler_merge_reduces(m, iron_cuda_fusable, merged));
  r = count(&iron_ir_module_main(m)->body.blocks[0]);
  iron_ir_module_destroy(m);
  return r;
}

// Batch norm's backward sums over the same arrays (a small CNN step with
// learned scale and shift): merged, fewer reduce kernels read fewer bytes.
static void test_batch_norm_sums_merge(void) {
  int merged = 0, none = 0;
  reduce_kernels_t with = plan("corpus/shared_conv_bn_step.mlirbc", true, &merged);
  reduce_kernels_t without =
      plan("corpus/shared_conv_bn_step.mlirbc", false, &none);
  if (getenv("IRON_TEST_VERBOSE"))
    printf("%d merges: %d reduce fusions (%d multi-output) reading %lld "
           "bytes; without: %d reading %lld\n",
           merged, with.fusions, with.multi, (long long)with.read,
           without.fusions, (long long)without.read);
  CHECK(merged > 0);
  CHECK_EQ_INT(with.fusions, without.fusions - merged);
  CHECK(with.multi > 0);
  CHECK(with.read < without.read);
}

// Reduces of their own and reduce fusions over the same two arrays (sums,
// a max, sums over two axes' worth of rows): the ones over the same dims
// become one kernel each.
static void test_standalone_reduces_merge(void) {
  int merged = 0, none = 0;
  reduce_kernels_t with =
      plan("corpus/shared_sibling_reduces.mlirbc", true, &merged);
  reduce_kernels_t without =
      plan("corpus/shared_sibling_reduces.mlirbc", false, &none);
  if (getenv("IRON_TEST_VERBOSE"))
    printf("%d merges: %d reduce kernels, %d without\n", merged,
           with.fusions, without.fusions);
  CHECK(merged >= 3);
  CHECK_EQ_INT(with.fusions, without.fusions - merged);
  CHECK(with.read < without.read);
}

// Row reduces (the innermost dim reduced) are not merged: their kernels
// fold single-op bodies with vector loads that a variadic body loses.
static void test_row_reduces_stay(void) {
  int merged = -1;
  plan("corpus/shared_int_select_chain.mlirbc", true, &merged);
  CHECK_EQ_INT(merged, 0);
}

static const iron_test_case_t kTests[] = {
    {"batch_norm_sums_merge", test_batch_norm_sums_merge},
    {"standalone_reduces_merge", test_standalone_reduces_merge},
    {"row_reduces_stay", test_row_reduces_stay},
};
IRON_TEST_MAIN(kTests)
