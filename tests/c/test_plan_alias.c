// Steps the planner runs as aliases (src/compiler/plan.c: the result shares
// its operand's storage, no kernel): here a convert to its operand's own
// dtype, which jax emits for a weak-typed scalar constant (the -inf of a
// masked softmax; inside a decode step's scanned layer it was a kernel
// launch per layer).
#include "compiler/inline.h"
#include "compiler/plan.h"
#include "corpus_files.h"
#include "test.h"

static int count_converts(const iron_plan_block_t *b, bool alias) {
  int n = 0;
  for (uint32_t i = 0; i < b->num_steps; ++i) {
    const iron_plan_step_t *s = &b->steps[i];
    if (!s->op || s->op->kind != IRON_OP_CONVERT) continue;
    bool same = s->op->operands[0]->type->dtype == s->op->results[0].type->dtype;
    if (same && (s->kind == IRON_STEP_ALIAS) == alias) n++;
  }
  return n;
}

static void test_convert_to_own_dtype_is_alias(void) {
  iron_ir_module_t *m =
      test_read_module("rowfuse/pos_mask_softmax_f32_n33.mlirbc");
  CHECK(m != NULL);
  if (!m) return;
  // Inlined as for a fusing device: the convert is in jax's _where.
  CHECK_OK(iron_compiler_inline_for_compile(m, true));
  iron_plan_t *p = NULL;
  CHECK_OK(iron_plan_create(m, &p));
  if (p) {
    CHECK(count_converts(&p->main->body, true) >= 1);
    CHECK_EQ_INT(count_converts(&p->main->body, false), 0);
    iron_plan_destroy(p);
  }
  iron_ir_module_destroy(m);
}

static const iron_test_case_t kTests[] = {
    {"convert_to_own_dtype_is_alias", test_convert_to_own_dtype_is_alias},
};
IRON_TEST_MAIN(kTests)
