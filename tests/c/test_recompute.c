// Shared cheap values recomputed per consumer (src/compiler/recompute.h),
// planned as the CUDA device plans them (its fusion predicates; no GPU):
// the copies made, and the bytes of full-size arrays the fused program
// writes, with the pass and without. Results stay those of the host: the
// corpus programs shared_* run through the emulated CUDA fusion in
// test_cuda_fusion_corpus.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "compiler/fuse.h"
#include "compiler/fuse_rows.h"
#include "compiler/inline.h"
#include "compiler/recompute.h"
#include "corpus_files.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_row_fusion.h"
#include "test.h"

// Bytes of the values the top-level ops of `blk` define (a fusion's
// results, other ops' results) with at least `min_elems` elements: what
// the program writes to memory, the big arrays only.
static int64_t written_bytes(const iron_ir_block_t *blk, int64_t min_elems) {
  int64_t total = 0;
  for (uint32_t i = 0; i < blk->num_ops; ++i) {
    const iron_ir_op_t *op = blk->ops[i];
    for (uint32_t r = 0; r < op->num_results; ++r) {
      const iron_ir_type_t *t = op->results[r].type;
      size_t b = 0;
      if (t->kind == IRON_TYPE_TENSOR &&
          iron_ir_type_num_elements(t) >= min_elems &&
          iron_ir_type_byte_size(t, &b))
        total += (int64_t)b;
    }
  }
  return total;
}

// Fuses corpus program `name` as the CUDA device does, with or without
// the pass; *copies: the expressions copied; returns the written bytes
// (-1: the program did not read or fuse).
static int64_t plan_bytes(const char *name, bool recompute, int *copies) {
  char rel[256];
  snprintf(rel, sizeof(rel), "corpus/%s.mlirbc", name);
  iron_ir_module_t *m = test_read_module(rel);
  CHECK(m != NULL);
  if (!m) return -1;
  *copies = 0;
  int64_t bytes = -1;
  iron_status_t st = iron_compiler_inline_for_compile(m, true);
  if (!st)
    st = iron_compiler_fuse_rows(m, iron_cuda_fusable, iron_cuda_row_fusable,
                                 NULL);
  if (!st && recompute)
    st = iron_compiler_recompute(m, iron_cuda_fusable, copies);
  if (!st)
    st = iron_compiler_fuse_pivots(m, iron_cuda_fusable,
                                   iron_cuda_pivot_fusable, NULL);
  CHECK_OK(st);
  if (!st) {
    const iron_ir_func_t *f = iron_ir_module_main(m);
    bytes = written_bytes(&f->body.blocks[0], 1024);
  }
  iron_ir_module_destroy(m);
  return bytes;
}

static void test_copies_cut_writes(void) {
  static const char *const kNames[] = {
      "shared_conv_bn_step", "shared_bf16_convert", "shared_int_select_chain"};
  for (size_t k = 0; k < sizeof(kNames) / sizeof(kNames[0]); ++k) {
    int copies = 0, none = 0;
    int64_t with = plan_bytes(kNames[k], true, &copies);
    int64_t without = plan_bytes(kNames[k], false, &none);
    if (getenv("IRON_TEST_VERBOSE"))
      printf("%s: %d copies, %lld bytes written (%lld without)\n", kNames[k],
             copies, (long long)with, (long long)without);
    CHECK(copies > 0);
    CHECK(with >= 0 && with < without);
  }
}

// a + b (two full-size leaves) and a pred mask of an f32 array would read
// more than they save: neither is copied, the plan is unchanged. Nor are
// values under IRON_RECOMPUTE_MIN_BYTES (batch norm over 1,920 elements).
static void test_costly_values_stay(void) {
  static const char *const kNames[] = {"shared_not_copied",
                                       "shared_bn_relu_grad"};
  for (size_t k = 0; k < sizeof(kNames) / sizeof(kNames[0]); ++k) {
    int copies = -1, none = 0;
    int64_t with = plan_bytes(kNames[k], true, &copies);
    int64_t without = plan_bytes(kNames[k], false, &none);
    CHECK_EQ_INT(copies, 0);
    CHECK(with == without);
  }
}

// Fused reduces (ones the device gives producers) that read a fusion's
// result of at least 1024 elements instead of computing it.
static int reduces_of_fusions(const iron_ir_block_t *b) {
  int n = 0;
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    if (op->kind != IRON_OP_REDUCE) continue;
    const iron_ir_op_t *d = op->operands[0]->def_op;
    n += d && d->kind == IRON_OP_FUSION && iron_cuda_fusable(op) &&
         iron_ir_type_num_elements(op->operands[0]->type) >= 1024;
  }
  return n;
}

// A small CNN step (bench/kernels.py's cnn, batch 32, 32x32, 16
// channels): its batch norms' `x - mean` and the gradients built on it are
// recomputed by the reduces that read them. What is left reads a ReLU's
// pred mask, which is not recomputed from its f32 input (4 bytes read per
// element for 1): its kernel writes the mask and the value the reduce
// reads.
static void test_bn_reduces_take_their_producers(void) {
  int counts[2] = {0, 0};
  for (int on = 0; on < 2; ++on) {
    iron_ir_module_t *m =
        test_read_module("corpus/shared_conv_bn_step.mlirbc");
    CHECK(m != NULL);
    if (!m) return;
    CHECK_OK(iron_compiler_inline_for_compile(m, true));
    CHECK_OK(iron_compiler_fuse_rows(m, iron_cuda_fusable,
                                     iron_cuda_row_fusable, NULL));
    if (on) CHECK_OK(iron_compiler_recompute(m, iron_cuda_fusable, NULL));
    CHECK_OK(iron_compiler_fuse_pivots(m, iron_cuda_fusable,
                                       iron_cuda_pivot_fusable, NULL));
    counts[on] = reduces_of_fusions(&iron_ir_module_main(m)->body.blocks[0]);
    iron_ir_module_destroy(m);
  }
  if (getenv("IRON_TEST_VERBOSE"))
    printf("reduces reading a fusion's result: %d with the pass, %d without\n",
           counts[1], counts[0]);
  CHECK(counts[0] >= 6);
  CHECK(counts[1] <= 2);
}

static const iron_test_case_t kTests[] = {
    {"copies_cut_writes", test_copies_cut_writes},
    {"costly_values_stay", test_costly_values_stay},
    {"bn_reduces_take_their_producers", test_bn_reduces_take_their_producers},
};
IRON_TEST_MAIN(kTests)
