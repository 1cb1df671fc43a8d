// Counted-loop recognition in the planner (iron_plan_step_t.counted) on real
// artifacts: jax's scan and fori_loop (constant and traced bounds) are
// counted; the executor's results for them are checked by the pytest
// corpus.
#include <stdio.h>
#include <stdlib.h>

#include "compiler/plan.h"
#include "stablehlo/reader.h"
#include "test.h"

static const iron_plan_step_t *find_while(const iron_plan_block_t *b) {
  for (uint32_t i = 0; i < b->num_steps; ++i)
    if (b->steps[i].kind == IRON_STEP_WHILE) return &b->steps[i];
  return NULL;
}

static iron_plan_t *plan_file(const char *name, iron_ir_module_t **out_m) {
  char path[512];
  snprintf(path, sizeof(path), "%s/corpus/%s", IRON_TEST_DATA_DIR, name);
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n);
  CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  iron_ir_module_t *m = NULL;
  CHECK_OK(iron_stablehlo_read(buf, (size_t)n, &m));
  free(buf);
  iron_plan_t *plan = NULL;
  if (m) CHECK_OK(iron_plan_create(m, &plan));
  *out_m = m;
  return plan;
}

static void test_fori_constant_bounds(void) {
  iron_ir_module_t *m;
  iron_plan_t *p = plan_file("fori_loop.mlirbc", &m);
  if (!p) return;
  const iron_plan_step_t *w = find_while(&p->main->body);
  CHECK(w && w->counted && w->counted_step == 1 && w->counted_limit_index < 0);
  iron_plan_destroy(p);
  iron_ir_module_destroy(m);
}

static void test_fori_traced_bounds(void) {
  iron_ir_module_t *m;
  iron_plan_t *p = plan_file("fori_loop_traced_bounds.mlirbc", &m);
  if (!p) return;
  const iron_plan_step_t *w = find_while(&p->main->body);
  // Both the start and the limit are arguments: read once at run time.
  CHECK(w && w->counted && !w->counted_init_known &&
        w->counted_limit_index >= 0);
  iron_plan_destroy(p);
  iron_ir_module_destroy(m);
}

static void test_scan(void) {
  iron_ir_module_t *m;
  iron_plan_t *p = plan_file("program_gru_scan.mlirbc", &m);
  if (!p) return;
  const iron_plan_step_t *w = find_while(&p->main->body);
  CHECK(w && w->counted && w->counted_init_known);
  iron_plan_destroy(p);
  iron_ir_module_destroy(m);
}

static const iron_test_case_t kTests[] = {
    {"fori_constant_bounds", test_fori_constant_bounds},
    {"fori_traced_bounds", test_fori_traced_bounds},
    {"scan", test_scan},
};
IRON_TEST_MAIN(kTests)
