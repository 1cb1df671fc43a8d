// Element-wise producer kernels merged into the kernels that read them
// (src/compiler/merge_producers.h), planned as the CUDA device plans them
// (its fusion predicates; no GPU): fewer kernels and fewer bytes moved,
// and producers whose consumers would read more left alone. Results: the
// corpus programs merge_* run through the emulated CUDA fusion in
// test_cuda_fusion_corpus.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "compiler/fuse.h"
#include "compiler/fuse_rows.h"
#include "compiler/inline.h"
#include "compiler/merge_producers.h"
#include "compiler/merge_reduces.h"
#include "compiler/recompute.h"
#include "corpus_files.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_row_fusion.h"
#include "test.h"

// The kernels of the main function's block (fusions and reduces; other ops
// that launch are counted as kernels too, constants and reshapes are not)
// and the bytes they read and write.
typedef struct {
  int kernels;
  int64_t bytes;
} traffic_t;

static int64_t bytes_of(const iron_ir_value_t *v) {
  size_t b = 0;
  return iron_ir_type_byte_size(v->type, &b) ? (int64_t)b : 0;
}

static traffic_t traffic(const iron_ir_block_t *b) {
  traffic_t t = {0, 0};
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    if (op->kind == IRON_OP_CONSTANT || op->kind == IRON_OP_RESHAPE ||
        op->kind == IRON_OP_FUNC_RETURN ||
        (op->kind == IRON_OP_BROADCAST_IN_DIM &&
         iron_ir_broadcast_is_reshape(op)) ||
        (op->kind == IRON_OP_REDUCE && iron_ir_reduce_is_reshape(op)))
      continue;
    t.kernels++;
    for (uint32_t k = 0; k < op->num_operands; ++k)
      t.bytes += bytes_of(op->operands[k]);
    for (uint32_t r = 0; r < op->num_results; ++r)
      t.bytes += bytes_of(&op->results[r]);
  }
  return t;
}

static traffic_t plan(const char *rel, bool merge, int *merged) {
  traffic_t t = {-1, -1};
  iron_ir_module_t *m = test_read_module(rel);
  CHECK(m != NULL);
  if (!m) return t;
  *merged = 0;
  CHECK_OK(iron_compiler_inline_for_compile(m, true));
  CHECK_OK(iron_compiler_fuse_rows(m, iron_cuda_fusable,
                                   iron_cuda_row_fusable, NULL));
  CHECK_OK(iron_compiler_recompute(m, iron_cuda_fusable, NULL));
  CHECK_OK(iron_compiler_fuse_pivots(m, iron_cuda_fusable,
                                     iron_cuda_pivot_fusable, NULL));
  if (merge)
    CHECK_OK(iron_compiler_merge_producers(m, iron_cuda_fusable, merged));
  CHECK_OK(iron_compiler_merge_reduces(m, iron_cuda_fusable, NULL));
  t = traffic(&iron_ir_module_main(m)->body.blocks[0]);
  iron_ir_module_destroy(m);
  return t;
}

static void check_merges(const char *name, int min_merged) {
  char rel[256];
  snprintf(rel, sizeof(rel), "corpus/%s.mlirbc", name);
  int merged = 0, none = 0;
  traffic_t with = plan(rel, true, &merged);
  traffic_t without = plan(rel, false, &none);
  if (getenv("IRON_TEST_VERBOSE"))
    printf("%s: %d merged: %d kernels, %lld bytes; without: %d, %lld\n",
           name, merged, with.kernels, (long long)with.bytes,
           without.kernels, (long long)without.bytes);
  CHECK(merged >= min_merged);
  CHECK(with.kernels < without.kernels);
  CHECK(with.bytes < without.bytes);
}

// Batch norm's ReLU gradient is read by the backward sums and the input
// gradient, which both read the activation: computed in each of them.
static void test_relu_gradient_merges(void) {
  check_merges("merge_bn_relu_grad_f32", 1);
  check_merges("merge_bn_relu_grad_bf16", 1);
  check_merges("shared_conv_bn_step", 2);
}

// A mask-selected value and its product, read by two column sums (one a
// reduce of its own) and an element-wise kernel: merged into all three,
// after which the two sums read the same arrays and become one kernel.
static void test_mask_into_reduces_and_elementwise(void) {
  check_merges("merge_mask_consumers", 1);
  check_merges("merge_int_consumers", 1);
}

// `a + b` read by kernels that read neither a nor b: computing it in each
// would read both, so it stays written once.
static void test_no_merge_that_reads_more(void) {
  int merged = -1;
  plan("corpus/shared_not_copied.mlirbc", true, &merged);
  CHECK_EQ_INT(merged, 0);
}

static const iron_test_case_t kTests[] = {
    {"relu_gradient_merges", test_relu_gradient_merges},
    {"mask_into_reduces_and_elementwise", test_mask_into_reduces_and_elementwise},
    {"no_merge_that_reads_more", test_no_merge_that_reads_more},
};
IRON_TEST_MAIN(kTests)
