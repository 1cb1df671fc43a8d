// Dots with a vector side as fused reductions (src/compiler/vector_dot.h,
// IRON_CUDA_VECTOR_DOTS), GPU-free: every artifact of tests/data/vecdot
// (tests/gen_vecdot_corpus.py: vector x matrix and matrix x vector over
// f32/bf16/f16/f64, [1, K] rows, attention's q . k and p . v over a cache,
// mixed operand dtypes, several contracting dims, unit free dims, one
// layer of stacked weights at a traced index, a decode scan over layers)
// is compiled on a plain host runtime and on one that plans as the CUDA
// device does with IRON_CUDA_VECTOR_DOTS=all, where its dots become
// multiply + reduce fusions run by the multi-thread CPU emulation of the
// generated kernels (cuda_emu_exec.h). Each program must rewrite at least
// one dot, and its results must equal the host's dot within a tolerance on
// three inputs (the reduction sums in another order than the host's dot:
// f32/f64 within 1e-5 relative to the sum of magnitudes, f16/bf16 within
// 2 ulp of the result's dtype). The kernels also compile with NVRTC where
// it is installed.
//
// IRON_TEST_ONLY=SUBSTRING runs the matching programs; IRON_TEST_VERBOSE=1
// prints each program; IRON_TEST_CORPUS_DIR=DIR runs the artifacts of DIR.
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus_files.h"
#include "cuda_emu_exec.h"
#include "cuda_test_nvrtc.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_device.h"
#include "test.h"

static int g_rewrites;

static bool counting_vector_dot(const iron_ir_op_t *op, uint32_t matrix) {
  bool r = iron_cuda_vector_dot(op, matrix);
  g_rewrites += r;
  return r;
}

// Elements of output j outside the tolerance (printed, the first few).
static int64_t compare_close(const iron_executable_t *exe, uint32_t j,
                             const uint8_t *want, const uint8_t *got,
                             const char *what) {
  iron_dtype_t dt;
  int32_t rank;
  const int64_t *dims;
  iron_executable_output_type(exe, j, &dt, &rank, &dims);
  int64_t count = 1;
  for (int32_t k = 0; k < rank; ++k) count *= dims[k];
  bool half = dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16;
  double ulp = dt == IRON_DTYPE_F16 ? 1.0 / 1024 : 1.0 / 128;
  int64_t bad = 0;
  for (int64_t i = 0; i < count; ++i) {
    size_t es = iron_dtype_size(dt);
    double w = NAN, g = NAN;
    cuda_emu_elem_float(dt, want + (size_t)i * es, &w);
    cuda_emu_elem_float(dt, got + (size_t)i * es, &g);
    if ((isnan(w) && isnan(g)) || w == g) continue;  // NaNs, infinities
    double tol = half ? 2 * ulp * fmax(fabs(w), 1.0 / 64) : 1e-5 * fmax(fabs(w), 1.0);
    if (!(fabs(w - g) <= tol)) {
      if (bad < 3)
        fprintf(stderr, "%s: output %u element %lld: host %.9g, CUDA %.9g\n",
                what, j, (long long)i, w, g);
      bad++;
    }
  }
  return bad;
}

typedef struct prog {
  char name[160];
  iron_executable_t *ref, *emu;
} prog_t;

static void test_vector_dots_emulated(void) {
  setenv("IRON_DEVICE", "host", 1);
  setenv("IRON_CUDA_VECTOR_DOTS", "all", 1);
  CHECK(cuda_emu_have_cxx());
  if (!cuda_emu_have_cxx()) return;
  bool verbose = getenv("IRON_TEST_VERBOSE") != NULL;
  const char *only = getenv("IRON_TEST_ONLY");
  iron_runtime_t *rt_ref = NULL, *rt_emu = NULL;
  CHECK_OK(iron_runtime_create(NULL, &rt_ref));
  CHECK_OK(cuda_emu_exec_runtime(&rt_emu));
  if (!rt_ref || !rt_emu) return;
  g_cuda_emu.vtable.vector_dot = counting_vector_dot;
  g_cuda_emu.multi_thread = true;  // the reduce fusions' real grids
  iron_device_t *dev_ref = iron_runtime_device(rt_ref, 0);
  iron_device_t *dev_emu = iron_runtime_device(rt_emu, 0);
  // IRON_TEST_CORPUS_DIR: another directory of artifacts (e.g. an
  // IRON_DUMP_DIR of real models); there a program may have no vector dot.
  const char *dir = getenv("IRON_TEST_CORPUS_DIR");
  bool own_corpus = dir == NULL;
  if (!dir) dir = IRON_TEST_DATA_DIR "/vecdot";
  int nnames = 0;
  char **names = test_artifacts(dir, only, &nnames);
  CHECK(nnames > 0);
  prog_t *progs = calloc((size_t)(nnames > 0 ? nnames : 1), sizeof(*progs));
  int nprogs = 0, unrewritten = 0;
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
    int before = g_rewrites;
    if (!st) st = iron_executable_compile(rt_emu, bytes, size, NULL, &p->emu);
    free(bytes);
    if (st) {
      fprintf(stderr, "%s: %s\n", p->name, iron_status_message(st));
      CHECK(!"a vector-dot program failed to compile as the CUDA device "
             "plans it");
      iron_status_free(st);
      if (p->ref) iron_executable_release(p->ref);
      continue;
    }
    if (g_rewrites == before && own_corpus) {
      fprintf(stderr, "%s: no dot became a reduction\n", p->name);
      unrewritten++;
    }
    nprogs++;
  }
  test_artifacts_free(names, nnames);
  bool built = cuda_emu_exec_build();
  CHECK(built);
  int ran = 0, differ = 0, failed = 0;
  for (int i = 0; i < nprogs && built; ++i) {
    prog_t *p = &progs[i];
    if (verbose) fprintf(stderr, "%s\n", p->name);
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      uint8_t **want = NULL, **got = NULL;
      iron_status_t sr = cuda_emu_run_program(p->ref, dev_ref, seed, NULL, &want);
      iron_status_t se = cuda_emu_run_program(p->emu, dev_emu, seed, NULL, &got);
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
        int64_t bad = 0;
        for (uint32_t j = 0; j < no; ++j)
          bad += compare_close(p->ref, j, want[j], got[j], what);
        if (bad) differ++;
        ran++;
      }
      cuda_emu_free_results(want, no);
      cuda_emu_free_results(got, no);
    }
  }
  fprintf(stderr,
          "vector dots as fused reductions, emulated: %d programs, %d dots "
          "rewritten, %d runs, %d differ, %d failed, %d not rewritten\n",
          nprogs, g_rewrites, ran, differ, failed, unrewritten);
  CHECK_EQ_INT(differ, 0);
  CHECK_EQ_INT(failed, 0);
  CHECK_EQ_INT(unrewritten, 0);
  if (!only && own_corpus) CHECK(nprogs >= 60);
  // The kernels compile with NVRTC too (host C++ accepts things NVRTC
  // does not), where NVRTC is installed.
  iron_cuda_api_t api;
  memset(&api, 0, sizeof(api));
  if (cuda_test_load_nvrtc(&api)) {
    int compiled = 0;
    for (size_t k = 0; k < g_cuda_emu.num_k && compiled < 32; ++k) {
      void *cubin = NULL;
      size_t cubin_size = 0;
      iron_status_t st = iron_cuda_nvrtc_compile(
          &api, g_cuda_emu.k[k].source, "sm_90a", &cubin, &cubin_size);
      if (st) {
        fprintf(stderr, "NVRTC: %s: %s\n", g_cuda_emu.k[k].name,
                iron_status_message(st));
        CHECK(!"a kernel does not compile with NVRTC");
        iron_status_free(st);
      }
      free(cubin);
      compiled++;
    }
    fprintf(stderr, "%d kernels compiled with NVRTC\n", compiled);
  } else {
    fprintf(stderr, "NVRTC not found: kernels not compiled\n");
  }
  for (int i = 0; i < nprogs; ++i) {
    iron_executable_release(progs[i].ref);
    iron_executable_release(progs[i].emu);
  }
  free(progs);
  iron_runtime_release(rt_ref);
  iron_runtime_release(rt_emu);
}

static const iron_test_case_t kTests[] = {
    {"vector_dots_emulated", test_vector_dots_emulated},
};
IRON_TEST_MAIN(kTests)
