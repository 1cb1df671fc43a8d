// In-place results (src/compiler/plan.c): a kernel marked `inplace_ok`
// may get the storage of a dying input of the same byte size for a result.
// A scatter (and a dynamic_update_slice) writes into its operand: result o
// may take operand o only. The CUDA scatter copies its operand into the
// result before it reads the updates, so a result that took the updates'
// storage combined the operand with itself (fuzz_programs on the H100:
// scatter max/set of int32[3] with int32[3] updates). The host's scatter
// is not `inplace_ok`, so the host runtime never showed it.
//
// Here a host runtime's scatter kernel is the host's, marked `inplace_ok`
// as the CUDA one is, and checks at run time that its result shares no
// storage with the indices or updates. The corpus' x_scatter_inplace_*
// programs (tests/gen_corpus.py: operand and updates are intermediates of
// one byte size that die at the scatter) must pass that check and give
// the plain host runtime's results.
#include <stdlib.h>
#include <string.h>

#include "corpus_files.h"
#include "cuda_emu_exec.h"
#include "test.h"

static iron_device_vtable_t g_vtable;
static iron_kernel_t g_scatter;
static int g_illegal, g_runs;

static iron_status_t checked_scatter_run(const iron_kernel_ctx_t *ctx,
                                         const void *params,
                                         const iron_tensor_t *const *inputs,
                                         iron_tensor_t *const *outputs) {
  // One operand: (operand, indices, updates) -> result.
  g_runs++;
  for (int k = 1; k <= 2; ++k)
    if (outputs[0]->data == inputs[k]->data) g_illegal++;
  const iron_kernel_t *host = iron_reference_kernel_lookup(IRON_OP_SCATTER);
  // The host kernel wants a result of its own; the result may share the
  // operand's storage (legal): compute aside, then move.
  iron_tensor_t tmp = *outputs[0];
  tmp.data = malloc(tmp.nbytes ? tmp.nbytes : 1);
  if (!tmp.data) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  iron_tensor_t *outs[1] = {&tmp};
  iron_status_t st = host->run(ctx, params, inputs, outs);
  if (!st) memmove(outputs[0]->data, tmp.data, tmp.nbytes);
  free(tmp.data);
  return st;
}

static const iron_kernel_t *lookup(iron_op_kind_t kind) {
  if (kind == IRON_OP_SCATTER) return &g_scatter;
  return iron_reference_kernel_lookup(kind);
}

static void test_scatter_result_takes_operand_only(void) {
  setenv("IRON_DEVICE", "host", 1);
  g_scatter = *iron_reference_kernel_lookup(IRON_OP_SCATTER);
  g_scatter.inplace_ok = true;
  g_scatter.run = checked_scatter_run;
  iron_runtime_t *rt_ref = NULL, *rt = NULL;
  CHECK_OK(iron_runtime_create(NULL, &rt_ref));
  CHECK_OK(iron_runtime_create(NULL, &rt));
  if (!rt_ref || !rt) return;
  iron_device_t *dev_ref = iron_runtime_device(rt_ref, 0);
  iron_device_t *dev = iron_runtime_device(rt, 0);
  g_vtable = *dev->vtable;
  g_vtable.kernel_lookup = lookup;
  dev->vtable = &g_vtable;
  static const char *const kNames[] = {"x_scatter_inplace_max",
                                       "x_scatter_inplace_set",
                                       "x_scatter_inplace_add"};
  for (size_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/corpus/%s.mlirbc", IRON_TEST_DATA_DIR,
             kNames[i]);
    size_t size;
    char *bytes = test_read_file(path, &size);
    CHECK(bytes != NULL);
    if (!bytes) continue;
    iron_executable_t *ref = NULL, *exe = NULL;
    CHECK_OK(iron_executable_compile(rt_ref, bytes, size, NULL, &ref));
    CHECK_OK(iron_executable_compile(rt, bytes, size, NULL, &exe));
    free(bytes);
    if (!ref || !exe) continue;
    for (uint64_t seed = 1; seed <= 2; ++seed) {
      uint8_t **want = NULL, **got = NULL;
      CHECK_OK(cuda_emu_run_program(ref, dev_ref, seed, NULL, &want));
      CHECK_OK(cuda_emu_run_program(exe, dev, seed, NULL, &got));
      if (want && got) CHECK_EQ_INT(cuda_emu_compare(ref, want, got, kNames[i]), 0);
      uint32_t no = iron_executable_num_outputs(ref);
      cuda_emu_free_results(want, no);
      cuda_emu_free_results(got, no);
    }
    iron_executable_release(ref);
    iron_executable_release(exe);
  }
  CHECK(g_runs >= 6);
  CHECK_EQ_INT(g_illegal, 0);
  iron_runtime_release(rt_ref);
  iron_runtime_release(rt);
}

static const iron_test_case_t kTests[] = {
    {"scatter_result_takes_operand_only",
     test_scatter_result_takes_operand_only},
};
IRON_TEST_MAIN(kTests)
