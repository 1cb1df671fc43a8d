// The scan-in-place pass (src/compiler/scan_in_place.h) on a real decode
// step (tests/data/corpus/x_scan_kv_update: a scan over 3 layers writing
// this token's keys and values into each layer's slab, attention over
// them), after inlining as the CUDA device compiles it: both caches are
// rewritten, their ys carries and zeros dropped; and the guards, on copies
// of the program edited by hand into forms jax does not write: a write
// into another slab than the one read (reversed index on one side only)
// is left alone, both sides reversed is rewritten, a read of the loop's xs
// result keeps the pair as written. tests/python/test_scan_in_place.py
// checks the results of the class through jax.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/inline.h"
#include "compiler/scan_in_place.h"
#include "compiler/tuple_forward.h"
#include "ir/builder.h"
#include "stablehlo/reader.h"
#include "corpus_files.h"
#include "test.h"

static iron_ir_module_t *load(void) {
  iron_ir_module_t *m = test_read_module("corpus/x_scan_kv_update.mlirbc");
  CHECK(m != NULL);
  if (m) CHECK_OK(iron_compiler_tuple_forward(m));
  if (m) CHECK_OK(iron_compiler_inline_for_compile(m, true));
  return m;
}

static iron_ir_func_t *main_of(iron_ir_module_t *m) {
  for (uint32_t i = 0; i < m->num_funcs; ++i)
    if (strcmp(m->funcs[i].name, "main") == 0) return &m->funcs[i];
  return NULL;
}

static iron_ir_op_t *find_while(iron_ir_func_t *f) {
  iron_ir_block_t *b = &f->body.blocks[0];
  for (uint32_t i = 0; i < b->num_ops; ++i)
    if (b->ops[i]->kind == IRON_OP_WHILE) return b->ops[i];
  return NULL;
}

// The body's dynamic_update_slice ops of a stacked array (rank-3 operand
// of dims[0] = 3) and dynamic_slices of one, in block order.
static uint32_t stacked_ops(iron_ir_block_t *b, iron_op_kind_t kind,
                            iron_ir_op_t **out, uint32_t cap) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < b->num_ops && n < cap; ++i) {
    iron_ir_op_t *op = b->ops[i];
    const iron_ir_type_t *t = op->num_operands ? op->operands[0]->type : NULL;
    if (op->kind == kind && t && t->rank == 3 && t->dims[0] == 3 &&
        (kind != IRON_OP_DYNAMIC_UPDATE_SLICE || op->operands[1]->type->dims[1] == 6))
      out[n++] = op;
  }
  return n;
}

// Replaces start `which` of `op` (in body `b` of function `f`) by
// (2 - start): slab 2 - i, the reversed scan's index, computed just
// before `op`.
static void reverse_start(iron_ir_module_t *m, iron_ir_func_t *f,
                          iron_ir_block_t *b, iron_ir_op_t *op,
                          uint32_t which) {
  iron_ir_value_t *start = op->operands[which];
  iron_ir_block_t tmp = {0};
  int32_t two = 2;
  iron_ir_value_t *c =
      iron_ir_builder_constant(m, f, &tmp, start->type, &two, 4, false);
  iron_ir_value_t *ops[2] = {c, start};
  iron_ir_value_t *r = c ? iron_ir_builder_op1(m, f, &tmp, IRON_OP_SUBTRACT,
                                               2, ops, start->type)
                         : NULL;
  CHECK(r != NULL);
  if (!r) return;
  iron_ir_op_t **list =
      iron_arena_alloc_array(&m->arena, b->num_ops + 3, sizeof(*list));
  uint32_t k = 0;
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    if (b->ops[i] == op)
      for (uint32_t j = 0; j < tmp.num_ops; ++j) {
        tmp.ops[j]->parent = b;
        list[k++] = tmp.ops[j];
      }
    list[k++] = b->ops[i];
  }
  b->ops = list;
  b->num_ops = k;
  op->operands[which] = r;
}

static void test_decode_step_rewritten(void) {
  iron_ir_module_t *m = load();
  if (!m) return;
  iron_ir_op_t *w = find_while(main_of(m));
  CHECK(w != NULL);
  uint32_t carries = w ? w->num_results : 0;
  int n = 0;
  CHECK_OK(iron_compiler_scan_in_place(m, &n));
  CHECK(n == 2);
  // The two stacked ys carries are gone; no slab copy is left: the body
  // writes rows (update [1, 1, 8]) into the stacked caches.
  CHECK(w && w->num_results == carries - 2);
  if (w) {
    iron_ir_op_t *dus[4];
    iron_ir_block_t *b = &w->regions[1].blocks[0];
    CHECK(stacked_ops(b, IRON_OP_DYNAMIC_UPDATE_SLICE, dus, 4) == 0);
    uint32_t rows = 0;
    for (uint32_t i = 0; i < b->num_ops; ++i)
      if (b->ops[i]->kind == IRON_OP_DYNAMIC_UPDATE_SLICE &&
          b->ops[i]->operands[0]->type->rank == 3 &&
          iron_ir_type_num_elements(b->ops[i]->operands[1]->type) == 8)
        rows++;
    CHECK(rows == 2);
  }
  iron_ir_module_destroy(m);
}

// Reverses the slab index of the stacking writes (`write`) and/or of the
// slab reads (`read`), then runs the pass: how many pairs it rewrote.
static int rewritten_after_reversing(bool write, bool read) {
  iron_ir_module_t *m = load();
  if (!m) return -1;
  iron_ir_func_t *f = main_of(m);
  iron_ir_op_t *w = find_while(f);
  CHECK(w != NULL);
  if (!w) {
    iron_ir_module_destroy(m);
    return -1;
  }
  iron_ir_block_t *b = &w->regions[1].blocks[0];
  iron_ir_op_t *ops[8];
  uint32_t nw = stacked_ops(b, IRON_OP_DYNAMIC_UPDATE_SLICE, ops, 8);
  CHECK(nw == 2);
  for (uint32_t i = 0; write && i < nw; ++i) reverse_start(m, f, b, ops[i], 2);
  uint32_t nr = stacked_ops(b, IRON_OP_DYNAMIC_SLICE, ops, 8);
  uint32_t caches = 0;
  for (uint32_t i = 0; read && i < nr; ++i)
    if (ops[i]->results[0].type->dims[1] == 6) {  // a cache's slab
      reverse_start(m, f, b, ops[i], 1);
      caches++;
    }
  CHECK(!read || caches == 2);
  int n = -1;
  CHECK_OK(iron_compiler_scan_in_place(m, &n));
  iron_ir_module_destroy(m);
  return n;
}

static void test_other_slab_left_alone(void) {
  CHECK(rewritten_after_reversing(true, false) == 0);
  CHECK(rewritten_after_reversing(false, true) == 0);
}

static void test_both_reversed_rewritten(void) {
  CHECK(rewritten_after_reversing(true, true) == 2);
}

static void test_switch_off(void) {
  setenv("IRON_SCAN_IN_PLACE", "0", 1);
  iron_ir_module_t *m = load();
  int n = -1;
  if (m) CHECK_OK(iron_compiler_scan_in_place(m, &n));
  CHECK(n == 0);
  iron_ir_module_destroy(m);
  unsetenv("IRON_SCAN_IN_PLACE");
}

static const iron_test_case_t kTests[] = {
    {"decode_step_rewritten", test_decode_step_rewritten},
    {"other_slab_left_alone", test_other_slab_left_alone},
    {"both_reversed_rewritten", test_both_reversed_rewritten},
    {"switch_off", test_switch_off},
};
IRON_TEST_MAIN(kTests)
