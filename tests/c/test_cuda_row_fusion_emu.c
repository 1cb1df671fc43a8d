// Row fusions (src/compiler/fuse_rows.h, cuda_row_fusion.c), GPU-free:
// every artifact of tests/data/rowfuse (tests/gen_rowfuse_corpus.py:
// softmax, log_softmax, logsumexp, layer norm, RMS norm and their
// gradients over row lengths 1 to 100000, batch shapes, f32/bf16/f16,
// other axes, zero-size arrays) is compiled on a plain host runtime and on
// one that plans as the CUDA device does with IRON_CUDA_ROW_FUSION=all;
// the row kernels run on the CPU through the multi-thread emulation
// (cuda_emu_exec.h: real blocks of up to 1024 threads, shuffles,
// barriers), the other fusions through the one-thread emulation. Results
// must equal the host's bit for bit (NaNs aside) on three inputs: the row
// kernels sum in the host's order (gen/row.h), and the host runs one
// thread (IRON_NUM_THREADS=1: with more it splits long rows of few-row
// reduces over its threads). Also: the programs meant to become row
// fusions do, as one kernel (names without axis0/axis1/empty/_n1_; a
// gradient's column sums move after its row kernel), the others do not;
// IRON_CUDA_ROW_FUSION=0 makes none; and every row kernel compiles with
// NVRTC for sm_90a where NVRTC is installed.
//
// IRON_TEST_ONLY=SUBSTRING runs the matching programs; IRON_TEST_CORPUS_DIR
// another directory of artifacts; IRON_TEST_VERBOSE=1 prints each program.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus_files.h"
#include "cuda_emu_exec.h"
#include "compiler/fuse_rows.h"
#include "compiler/fusion_passes.h"
#include "compiler/inline.h"
#include "cuda_test_nvrtc.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_row_fusion.h"
#include "stablehlo/reader.h"
#include "test.h"

typedef struct prog {
  char name[160];
  iron_executable_t *ref, *emu;
  int64_t rows_before, rows_after;  // row kernels prepared by its compile
} prog_t;

// Whether the generator is meant to make a row fusion of this program.
static bool expect_row(const char *name) {
  return !strstr(name, "axis0") && !strstr(name, "axis1") &&
         !strstr(name, "empty") && !strstr(name, "_n1_") &&
         !(strlen(name) > 3 && strcmp(name + strlen(name) - 3, "_n1") == 0);
}

static int64_t row_kernels(void) {
  int64_t n = 0;
  for (size_t i = 0; i < g_cuda_emu.num_k; ++i) n += g_cuda_emu.k[i].mt;
  return n;
}

static void test_rowfuse_emulated(void) {
  setenv("IRON_DEVICE", "host", 1);
  setenv("IRON_NUM_THREADS", "1", 1);
  setenv("IRON_HOST_LIBM_EXP", "1", 1);
  setenv("IRON_CUDA_ROW_FUSION", "all", 1);
  CHECK(cuda_emu_have_cxx());
  if (!cuda_emu_have_cxx()) return;
  bool verbose = getenv("IRON_TEST_VERBOSE") != NULL;
  const char *only = getenv("IRON_TEST_ONLY");
  iron_runtime_t *rt_ref = NULL, *rt_emu = NULL;
  CHECK_OK(iron_runtime_create(NULL, &rt_ref));
  CHECK_OK(cuda_emu_exec_runtime(&rt_emu));
  if (!rt_ref || !rt_emu) return;
  iron_device_t *dev_ref = iron_runtime_device(rt_ref, 0);
  iron_device_t *dev_emu = iron_runtime_device(rt_emu, 0);
  const char *dir = getenv("IRON_TEST_CORPUS_DIR");
  if (!dir) dir = IRON_TEST_DATA_DIR "/rowfuse";
  int nnames = 0;
  char **names = test_artifacts(dir, only, &nnames);
  CHECK(nnames > 0);
  prog_t *progs = calloc((size_t)(nnames > 0 ? nnames : 1), sizeof(*progs));
  int nprogs = 0, wrong_plan = 0;
  for (int e = 0; e < nnames; ++e) {
    size_t size;
    char *bytes = test_artifact_read(dir, names[e], &size);
    CHECK(bytes != NULL);
    if (!bytes) continue;
    prog_t *p = &progs[nprogs];
    snprintf(p->name, sizeof(p->name), "%s", names[e]);
    iron_status_t st =
        iron_executable_compile(rt_ref, bytes, size, NULL, &p->ref);
    CHECK_OK(st);
    p->rows_before = row_kernels();
    if (!st) st = iron_executable_compile(rt_emu, bytes, size, NULL, &p->emu);
    free(bytes);
    if (st) {
      fprintf(stderr, "%s: %s\n", p->name, iron_status_message(st));
      CHECK(!"a row program failed to compile as the CUDA device plans it");
      iron_status_free(st);
      if (p->ref) iron_executable_release(p->ref);
      continue;
    }
    p->rows_after = row_kernels();
    // Kernels are shared by name: a program identical to an earlier one
    // adds none; count the launches instead when running.
    nprogs++;
  }
  test_artifacts_free(names, nnames);
  bool built = cuda_emu_exec_build();
  CHECK(built);
  int ran = 0, differ = 0, failed = 0;
  for (int i = 0; i < nprogs && built; ++i) {
    prog_t *p = &progs[i];
    if (verbose) fprintf(stderr, "%s\n", p->name);
    int64_t launches0 = g_cuda_emu.row_launches;
    for (uint64_t seed = 0; seed < 3; ++seed) {
      uint8_t **want = NULL, **got = NULL;
      iron_status_t sr = cuda_emu_run_program(p->ref, dev_ref, seed,
                                              test_fill_synthetic, &want);
      iron_status_t se = cuda_emu_run_program(p->emu, dev_emu, seed,
                                              test_fill_synthetic, &got);
      uint32_t no = iron_executable_num_outputs(p->ref);
      if (sr || se) {
        fprintf(stderr, "%s (seed %llu): host: %s; CUDA emulation: %s\n",
                p->name, (unsigned long long)seed,
                sr ? iron_status_message(sr) : "ok",
                se ? iron_status_message(se) : "ok");
        failed++;
        iron_status_free(sr);
        iron_status_free(se);
      } else {
        char what[200];
        snprintf(what, sizeof(what), "%s (seed %llu)", p->name,
                 (unsigned long long)seed);
        if (cuda_emu_compare(p->ref, want, got, what)) differ++;
        ran++;
      }
      cuda_emu_free_results(want, no);
      cuda_emu_free_results(got, no);
    }
    // Row kernels per run: one per program (a gradient's row work is one
    // kernel, its column sums moved after it); two for two softmaxes, and
    // for a softmax whose value a loop reads before the rest of the row
    // work (the loop stays after the first fusion, which cannot grow past
    // it); one per step of a 3-step scan; 58 for the six-layer
    // transformer's gradient (its norms and softmaxes, forward and back).
    int64_t per_run = (g_cuda_emu.row_launches - launches0) / 3;
    int64_t want = !expect_row(p->name)             ? 0
                   : strstr(p->name, "two_softmax")    ? 2
                   : strstr(p->name, "loop_reads_row") ? 2
                   : strstr(p->name, "scan_")          ? 3
                   : strstr(p->name, "deep_transformer") ? 58
                                                       : 1;
    // Rows of one element are no row fusion, but their gradients' column
    // sums may be (one row of the batch).
    bool n1 = strstr(p->name, "_n1_") ||
              (strlen(p->name) > 3 &&
               strcmp(p->name + strlen(p->name) - 3, "_n1") == 0);
    if (per_run != want && !n1) {
      fprintf(stderr, "%s: %lld row kernels per run, expected %lld\n",
              p->name, (long long)per_run, (long long)want);
      wrong_plan++;
    }
  }
  fprintf(stderr,
          "row programs through the CUDA row fusion, emulated: %d programs, "
          "%d runs, %d differ, %d failed, %d planned otherwise than "
          "expected; %lld row kernel launches, %lld launches in all\n",
          nprogs, ran, differ, failed, wrong_plan,
          (long long)g_cuda_emu.row_launches, (long long)g_cuda_emu.launches);
  CHECK_EQ_INT(differ, 0);
  CHECK_EQ_INT(failed, 0);
  CHECK_EQ_INT(wrong_plan, 0);
  if (!only && !getenv("IRON_TEST_CORPUS_DIR")) CHECK(nprogs > 100);

  // Every row kernel compiles with NVRTC (the emulation compiles them as
  // host C++, which accepts things NVRTC does not).
  iron_cuda_api_t api;
  memset(&api, 0, sizeof(api));
  if (cuda_test_load_nvrtc(&api)) {
    int compiled = 0;
    for (size_t k = 0; k < g_cuda_emu.num_k; ++k) {
      if (!g_cuda_emu.k[k].mt) continue;
      void *cubin = NULL;
      size_t cubin_size = 0;
      iron_status_t st = iron_cuda_nvrtc_compile(
          &api, g_cuda_emu.k[k].source, "sm_90a", &cubin, &cubin_size);
      if (st) {
        fprintf(stderr, "NVRTC: %s: %s\n", g_cuda_emu.k[k].name,
                iron_status_message(st));
        CHECK(!"a row kernel does not compile with NVRTC");
        iron_status_free(st);
      }
      free(cubin);
      compiled++;
      // Enough to catch what NVRTC refuses; all of them take minutes.
      if (compiled >= 24 && !getenv("IRON_TEST_NVRTC_ALL")) break;
    }
    fprintf(stderr, "%d row kernels compiled with NVRTC\n", compiled);
  } else {
    fprintf(stderr, "NVRTC not found: row kernels not compiled\n");
  }
  for (int i = 0; i < nprogs; ++i) {
    iron_executable_release(progs[i].ref);
    iron_executable_release(progs[i].emu);
  }
  free(progs);
  iron_runtime_release(rt_ref);
  iron_runtime_release(rt_emu);
  cuda_emu_exec_shutdown();
}

// IRON_CUDA_ROW_FUSION=0: the same programs plan without row fusions (and
// still run as before: the corpus test covers that path).
static void test_switch_off(void) {
  setenv("IRON_DEVICE", "host", 1);
  setenv("IRON_CUDA_ROW_FUSION", "0", 1);
  iron_runtime_t *rt = NULL;
  CHECK_OK(cuda_emu_exec_runtime(&rt));
  if (!rt) return;
  static const char *const kNames[] = {"softmax_f32_n1000",
                                       "layer_norm_grad_f32_n4097"};
  for (size_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/rowfuse/%s.mlirbc", IRON_TEST_DATA_DIR,
             kNames[i]);
    size_t size;
    char *bytes = test_read_file(path, &size);
    CHECK(bytes != NULL);
    if (!bytes) continue;
    int64_t before = row_kernels();
    iron_executable_t *exe = NULL;
    CHECK_OK(iron_executable_compile(rt, bytes, size, NULL, &exe));
    free(bytes);
    CHECK(row_kernels() == before);
    if (exe) iron_executable_release(exe);
  }
  unsetenv("IRON_CUDA_ROW_FUSION");
  iron_runtime_release(rt);
  cuda_emu_exec_shutdown();
}

// The decode layer's softmax is one row fusion: no max-reduce is left
// outside a fusion in main after the row pass (its dependency sets once
// overflowed at 8 groups, and the softmax's max then ran as a kernel of
// its own, x - max as another).
static bool reduces_with(const iron_ir_op_t *op, iron_op_kind_t body) {
  if (op->kind != IRON_OP_REDUCE || op->num_regions < 1) return false;
  const iron_ir_block_t *b = &op->regions[0].blocks[0];
  for (uint32_t i = 0; i < b->num_ops; ++i)
    if (b->ops[i]->kind == body) return true;
  return false;
}

static void test_whole_softmax_plan(void) {
  iron_ir_module_t *m =
      test_read_module("rowfuse/whole_softmax_decode_layer_f32.mlirbc");
  CHECK(m != NULL);
  if (!m) return;
  int rows = 0;
  CHECK_OK(iron_compiler_inline_for_compile(m, true));
  CHECK_OK(iron_compiler_fuse_rows(m, iron_cuda_fusable, iron_cuda_row_fusable,
                                   &rows));
  CHECK(rows >= 1);
  const iron_ir_func_t *f = NULL;
  for (uint32_t i = 0; i < m->num_funcs; ++i)
    if (m->funcs[i].is_public) f = &m->funcs[i];
  CHECK(f != NULL);
  int stray_max = 0;
  if (f) {
    const iron_ir_block_t *b = &f->body.blocks[0];
    for (uint32_t i = 0; i < b->num_ops; ++i)
      stray_max += reduces_with(b->ops[i], IRON_OP_MAXIMUM);
  }
  CHECK_EQ_INT(stray_max, 0);
  iron_ir_module_destroy(m);
}

// A mask computed beside the scores (iota <= position, a causal iota
// compare) joins the softmax's row fusion: no pred broadcast to the
// scores' shape is left outside a fusion after the row pass (it was a
// kernel of its own writing the mask at the scores' shape when the row
// pass's plain groups had to share a dtype).
static int stray_pred_broadcasts(const iron_ir_block_t *b) {
  int n = 0;
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    if (op->kind == IRON_OP_BROADCAST_IN_DIM && op->num_results == 1 &&
        op->results[0].type->dtype == IRON_DTYPE_PRED &&
        iron_ir_type_num_elements(op->results[0].type) >
            iron_ir_type_num_elements(op->operands[0]->type))
      n++;
  }
  return n;
}

static void test_mask_in_row_fusion(void) {
  static const char *const kNames[] = {
      "pos_mask_softmax_f32_n2048", "pos_mask_softmax_bf16_n300",
      "causal_mask_softmax_f32_t100", "causal_mask_softmax_bf16_t64"};
  for (size_t k = 0; k < sizeof(kNames) / sizeof(kNames[0]); ++k) {
    char rel[256];
    snprintf(rel, sizeof(rel), "rowfuse/%s.mlirbc", kNames[k]);
    iron_ir_module_t *m = test_read_module(rel);
    CHECK(m != NULL);
    if (!m) continue;
    int rows = 0;
    CHECK_OK(iron_compiler_inline_for_compile(m, true));
    CHECK_OK(iron_compiler_fuse_rows(m, iron_cuda_fusable,
                                     iron_cuda_row_fusable, &rows));
    CHECK_EQ_INT(rows, 1);
    int stray = 0;
    for (uint32_t i = 0; i < m->num_funcs; ++i)
      if (m->funcs[i].is_public)
        stray += stray_pred_broadcasts(&m->funcs[i].body.blocks[0]);
    if (stray) fprintf(stderr, "%s: %d pred broadcasts outside\n", kNames[k], stray);
    CHECK_EQ_INT(stray, 0);
    iron_ir_module_destroy(m);
  }
}

// A deep transformer's gradient, planned by every fusion pass: each
// layer norm and softmax is a row fusion although the residual stream
// depends on more groups than the row pass's dependency sets list, and no
// value is spread to a larger shape by a kernel of its own (a row sum
// spread over the rows for the backward pass leaves its row fusion as the
// row values; the consumers, row fusions too, spread it:
// merge_producers.h).
static void test_deep_transformer_plan(void) {
  // Its arrays are small: the producer merges' 1 MiB floor off.
  setenv("IRON_FUSE_MIN_COPY_BYTES", "0", 1);
  iron_ir_module_t *m =
      test_read_module("rowfuse/whole_deep_transformer_grad_f32.mlirbc");
  CHECK(m != NULL);
  if (!m) return;
  CHECK_OK(iron_compiler_inline_for_compile(m, true));
  iron_fusion_predicates_t preds = {.fusable = iron_cuda_fusable,
                                    .row_fusable = iron_cuda_row_fusable,
                                    .pivot_fusable = iron_cuda_pivot_fusable,
                                    .vector_dot = iron_cuda_vector_dot};
  iron_fusion_counts_t n;
  CHECK_OK(iron_compiler_fusion_passes(m, &preds, &n));
  const iron_ir_block_t *b = &iron_ir_module_main(m)->body.blocks[0];
  int spreads = 0, row_reduces = 0;
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    iron_row_shape_t rs;
    if (op->kind == IRON_OP_BROADCAST_IN_DIM &&
        !iron_ir_broadcast_is_reshape(op) &&
        iron_ir_type_num_elements(op->operands[0]->type) > 1)
      spreads++;
    if (op->kind == IRON_OP_REDUCE && iron_row_shape_of_reduce(op, &rs))
      row_reduces++;
  }
  if (getenv("IRON_TEST_VERBOSE"))
    printf("%d row fusions, %d fusions; %d spreads, %d row reduces alone\n",
           n.rows, n.fusions, spreads, row_reduces);
  // 13 norms and 6 softmaxes forward, their gradients backward.
  CHECK(n.rows >= 38);
  CHECK_EQ_INT(spreads, 0);
  CHECK_EQ_INT(row_reduces, 0);
  iron_ir_module_destroy(m);
  unsetenv("IRON_FUSE_MIN_COPY_BYTES");
}

static const iron_test_case_t kTests[] = {
    {"rowfuse_emulated", test_rowfuse_emulated},
    {"switch_off", test_switch_off},
    {"whole_softmax_plan", test_whole_softmax_plan},
    {"mask_in_row_fusion", test_mask_in_row_fusion},
    {"deep_transformer_plan", test_deep_transformer_plan},
};
IRON_TEST_MAIN(kTests)
