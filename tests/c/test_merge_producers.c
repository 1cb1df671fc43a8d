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
#include <string.h>

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

// Whether the main block has a fusion that returns an add of two of its
// arguments (`a + b` kept as a kernel's result).
static bool add_of_args_returned(const iron_ir_block_t *b) {
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    if (op->kind != IRON_OP_FUSION) continue;
    const iron_ir_block_t *fb = &op->regions[0].blocks[0];
    const iron_ir_op_t *term = fb->ops[fb->num_ops - 1];
    for (uint32_t r = 0; r < term->num_operands; ++r) {
      const iron_ir_op_t *d = term->operands[r]->def_op;
      if (d && d->kind == IRON_OP_ADD && !d->operands[0]->def_op &&
          !d->operands[1]->def_op)
        return true;
    }
  }
  return false;
}

// The module planned, with or without the pass; *kept (may be NULL):
// add_of_args_returned after planning.
static traffic_t plan_module(iron_ir_module_t *m, bool merge, int *merged,
                             bool *kept) {
  traffic_t t = {-1, -1};
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
  if (kept) *kept = add_of_args_returned(&iron_ir_module_main(m)->body.blocks[0]);
  return t;
}

static traffic_t plan(const char *rel, bool merge, int *merged) {
  iron_ir_module_t *m = test_read_module(rel);
  CHECK(m != NULL);
  if (!m) return (traffic_t){-1, -1};
  traffic_t t = plan_module(m, merge, merged, NULL);
  iron_ir_module_destroy(m);
  return t;
}

// fewer_kernels: the producer goes away (else it keeps some results).
static void check_merges(const char *name, int min_merged, bool fewer_kernels) {
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
  CHECK(fewer_kernels ? with.kernels < without.kernels
                      : with.kernels <= without.kernels);
  CHECK(with.bytes < without.bytes);
}

// Batch norm's ReLU gradient is read by the backward sums and the input
// gradient, which both read the activation: computed in each of them.
static void test_relu_gradient_merges(void) {
  check_merges("merge_bn_relu_grad_f32", 1, true);
  check_merges("merge_bn_relu_grad_bf16", 1, true);
  check_merges("shared_conv_bn_step", 2, true);
}

// A mask-selected value and its product, read by two column sums (one a
// reduce of its own) and an element-wise kernel: merged into all three,
// after which the two sums read the same arrays and become one kernel.
static void test_mask_into_reduces_and_elementwise(void) {
  check_merges("merge_mask_consumers", 1, true);
  check_merges("merge_int_consumers", 1, true);
}

// A kernel whose results go both to a dot (kept) and to the backward
// kernel only (gelu's tanh terms, computed there from the dot's output it
// reads anyway): the latter leave the kernel.
static void test_some_results_merge(void) {
  check_merges("merge_gelu_mlp_grad", 1, false);
}

// `a + b` read by kernels that read neither a nor b: computing it in each
// would read both, so a kernel still writes it (its other results, `s*s`
// and a mask converted for a sum, go into their sums).
static void test_no_merge_that_reads_more(void) {
  iron_ir_module_t *m = test_read_module("corpus/shared_not_copied.mlirbc");
  CHECK(m != NULL);
  if (!m) return;
  int merged = -1;
  bool kept = false;
  plan_module(m, true, &merged, &kept);
  iron_ir_module_destroy(m);
  CHECK(kept);
}

// Over the program corpus and the row-fusion corpus (each with the 1 MiB
// floor and without it): the pass never makes a plan move more bytes or
// launch more kernels.
static int never_more_bytes_in(const char *sub, int *changed) {
  char dir[512];
  snprintf(dir, sizeof(dir), "%s/%s", IRON_TEST_DATA_DIR, sub);
  int n = 0;
  char **names = test_artifacts(dir, NULL, &n);
  CHECK(n >= 0);
  int files = 0;
  for (int i = 0; i < n; ++i) {
    char rel[512];
    snprintf(rel, sizeof(rel), "%s/%.400s.mlirbc", sub, names[i]);
    iron_ir_module_t *a = test_read_module(rel);
    iron_ir_module_t *b = test_read_module(rel);
    if (!a || !b) {  // the reader's own tests cover refusals
      iron_ir_module_destroy(a);
      iron_ir_module_destroy(b);
      continue;
    }
    int merged = 0, none = 0;
    traffic_t with = plan_module(a, true, &merged, NULL);
    traffic_t without = plan_module(b, false, &none, NULL);
    iron_ir_module_destroy(a);
    iron_ir_module_destroy(b);
    files++;
    *changed += merged > 0;
    if (with.bytes > without.bytes || with.kernels > without.kernels)
      printf("%s: %d kernels, %lld bytes; without the pass %d, %lld\n",
             names[i], with.kernels, (long long)with.bytes, without.kernels,
             (long long)without.bytes);
    CHECK(with.bytes <= without.bytes);
    CHECK(with.kernels <= without.kernels);
  }
  test_artifacts_free(names, n);
  return files;
}

static void test_never_more_bytes(void) {
  for (int floor = 0; floor < 2; ++floor) {
    if (!floor) setenv("IRON_FUSE_MIN_COPY_BYTES", "0", 1);
    int changed = 0;
    int files = never_more_bytes_in("corpus", &changed);
    files += never_more_bytes_in("rowfuse", &changed);
    if (getenv("IRON_TEST_VERBOSE"))
      printf("%s: %d programs, %d changed\n",
             floor ? "1 MiB floor" : "no floor", files, changed);
    CHECK(files > 500);
    if (!floor) unsetenv("IRON_FUSE_MIN_COPY_BYTES");
  }
}

static const iron_test_case_t kTests[] = {
    {"relu_gradient_merges", test_relu_gradient_merges},
    {"mask_into_reduces_and_elementwise", test_mask_into_reduces_and_elementwise},
    {"some_results_merge", test_some_results_merge},
    {"no_merge_that_reads_more", test_no_merge_that_reads_more},
    {"never_more_bytes", test_never_more_bytes},
};
IRON_TEST_MAIN(kTests)
