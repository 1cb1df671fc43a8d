// The corpus sweep of the CUDA fusion pass and code generators, GPU-free:
// every program of tests/data/corpus is compiled twice, on a plain host
// runtime and on one that plans as the CUDA device does (cuda_emu_exec.h:
// CUDA fusion, the CUDA device's generated element-wise, data-movement and
// fused kernels run on the CPU), and both run on the same inputs (three
// seeds: small synthetic values, then random values with start indices
// far out of range); every result must be the same bit for bit (NaNs
// aside).
//
// Compile on the CUDA side may fail only with UNIMPLEMENTED naming an op
// that the CUDA device does not support; a fusion that fuse.c formed and
// the generator refuses for its shape ("in this CUDA fusion", "of another
// shape", "fusion of N elements") is a failure: the fusion predicate and
// the generator must agree.
//
// IRON_TEST_VERBOSE=1 prints every program; IRON_TEST_ONLY=SUBSTRING runs
// the programs whose file name contains it; IRON_TEST_CORPUS_DIR=DIR runs
// the artifacts of DIR instead (e.g. an IRON_DUMP_DIR).
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus_files.h"
#include "cuda_emu_exec.h"
#include "test.h"

typedef struct prog {
  char name[160];
  iron_executable_t *ref, *emu;
  bool split_sums;  // a fused float sum split over blocks (cuda_emu_exec.h)
} prog_t;

// Split float sums against the host's order: max |CUDA - host| over the
// output's largest |host| (sums of up to millions of terms in f32).
static const double kReorderTol = 1e-4;

// Refusals that mean fuse.c formed a group the generator cannot generate.
static bool fusion_shape_refusal(const char *msg) {
  static const char *const kPhrases[] = {
      "in this CUDA fusion",     "in a CUDA fusion of another shape",
      "in a CUDA fusion of a computed", "elements in a fusion of",
      "CUDA fusion:",            "fusion block",
      "operands and results on the CUDA device",
  };
  for (size_t i = 0; i < sizeof(kPhrases) / sizeof(kPhrases[0]); ++i)
    if (strstr(msg, kPhrases[i])) return true;
  return false;
}

static void test_corpus_emulated(void) {
  setenv("IRON_DEVICE", "host", 1);
  // Synthetic inputs can make data-dependent loops run forever.
  setenv("IRON_MAX_WHILE_ITERATIONS", "20000", 1);
  // The emulation calls libm's expf, as the host does with this switch
  // (its default is a vectorized polynomial; results differ in the ulp).
  setenv("IRON_HOST_LIBM_EXP", "1", 1);
  // Row kernels sum a row in the host's order (gen/row.h) as long as the
  // host runs one thread: with more it splits long rows of few-row reduces
  // over its threads (haiku's layer_stack scan, found by a dump of its
  // tests: 97 % of elements a few ulp apart with 2 threads, none with 1).
  setenv("IRON_NUM_THREADS", "1", 1);
  CHECK(cuda_emu_have_cxx());
  if (!cuda_emu_have_cxx()) return;
  bool verbose = getenv("IRON_TEST_VERBOSE") != NULL;
  const char *only = getenv("IRON_TEST_ONLY");
  iron_runtime_t *rt_ref = NULL, *rt_emu = NULL;
  CHECK_OK(iron_runtime_create(NULL, &rt_ref));
  CHECK_OK(cuda_emu_exec_runtime(&rt_emu));
  // Tiled transposes run their own kernels on their grid (multi-thread
  // shim) instead of the host's.
  g_cuda_emu.multi_thread = true;
  if (!rt_ref || !rt_emu) return;
  iron_device_t *dev_ref = iron_runtime_device(rt_ref, 0);
  iron_device_t *dev_emu = iron_runtime_device(rt_emu, 0);

  struct dirent **ents = NULL;
  const char *dir = getenv("IRON_TEST_CORPUS_DIR");
  if (!dir) dir = IRON_TEST_DATA_DIR "/corpus";
  int nents = scandir(dir, &ents, NULL, alphasort);
  CHECK(nents > 0);
  prog_t *progs = calloc((size_t)(nents > 0 ? nents : 1), sizeof(*progs));
  int nprogs = 0, host_refused = 0, cuda_refused = 0, not_emulable = 0;
  for (int e = 0; e < nents; ++e) {
    const char *fn = ents[e]->d_name;
    size_t len = strlen(fn);
    if (len < 8 || strcmp(fn + len - 7, ".mlirbc") != 0) continue;
    if (only && !strstr(fn, only)) continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, fn);
    size_t size;
    char *bytes = test_read_file(path, &size);
    CHECK(bytes != NULL);
    if (!bytes) continue;
    prog_t *p = &progs[nprogs];
    snprintf(p->name, sizeof(p->name), "%.*s", (int)(len - 7), fn);
    iron_status_t st = iron_executable_compile(rt_ref, bytes, size, NULL,
                                               &p->ref);
    if (st) {  // the host refuses it: nothing to compare with
      host_refused++;
      if (verbose)
        printf("  refused by the host: %s\n", iron_status_message(st));
      iron_status_free(st);
      free(bytes);
      continue;
    }
    int64_t split_before = g_cuda_emu.split_sums;
    st = iron_executable_compile(rt_emu, bytes, size, NULL, &p->emu);
    p->split_sums = g_cuda_emu.split_sums != split_before;
    free(bytes);
    if (st) {
      const char *msg = iron_status_message(st);
      iron_status_code_t code = iron_status_code(st);
      if (code == IRON_STATUS_FAILED_PRECONDITION && strstr(msg, "cuda_emu")) {
        not_emulable++;
        if (verbose) fprintf(stderr, "%s: not emulable: %s\n", p->name, msg);
      } else if (code == IRON_STATUS_UNIMPLEMENTED &&
                 !fusion_shape_refusal(msg)) {
        cuda_refused++;
        if (verbose) fprintf(stderr, "%s: CUDA refuses: %s\n", p->name, msg);
      } else {
        fprintf(stderr, "%s: CUDA compile: %s: %s\n", p->name,
                iron_status_code_name(code), msg);
        CHECK(!"the CUDA fusion refused or failed a program the host runs");
      }
      iron_status_free(st);
      iron_executable_release(p->ref);
      p->ref = NULL;
      continue;
    }
    nprogs++;
  }
  for (int e = 0; e < nents; ++e) free(ents[e]);
  free(ents);
  bool built = cuda_emu_exec_build();
  CHECK(built);
  int ran = 0, differ = 0, failed = 0, reordered = 0;
  for (int i = 0; i < nprogs && built; ++i) {
    prog_t *p = &progs[i];
    if (verbose) fprintf(stderr, "%s\n", p->name);
    for (uint64_t seed = 0; seed < 3; ++seed) {
      uint8_t **want = NULL, **got = NULL;
      iron_status_t sr = cuda_emu_run_program(p->ref, dev_ref, seed,
                                              test_fill_synthetic, &want);
      iron_status_t se = cuda_emu_run_program(p->emu, dev_emu, seed,
                                              test_fill_synthetic, &got);
      uint32_t no = iron_executable_num_outputs(p->ref);
      if (sr || se) {
        // Both may fail alike (a loop bound hit by synthetic inputs).
        bool same = sr && se && iron_status_code(sr) == iron_status_code(se);
        if (!same) {
          fprintf(stderr, "%s (seed %llu): host: %s; CUDA emulation: %s\n",
                  p->name, (unsigned long long)seed,
                  sr ? iron_status_message(sr) : "ok",
                  se ? iron_status_message(se) : "ok");
          failed++;
        }
        iron_status_free(sr);
        iron_status_free(se);
      } else {
        char what[200];
        snprintf(what, sizeof(what), "%s (seed %llu)", p->name,
                 (unsigned long long)seed);
        // Float sums split over blocks add in their own order: within
        // kReorderTol of the output's largest magnitude (docs/ARCHITECTURE.md,
        // reductions), the rest exactly.
        if (cuda_emu_compare_within(p->ref, want, got, what,
                                    p->split_sums ? kReorderTol : -1))
          differ++;
        ran++;
        reordered += p->split_sums;
      }
      cuda_emu_free_results(want, no);
      cuda_emu_free_results(got, no);
    }
  }
  fprintf(stderr,
          "corpus through the CUDA fusion, emulated: %d programs (%d refused "
          "by the host, %d by CUDA, %d not emulable), %d runs (%d with split "
          "float sums, compared within %g), %d differ, "
          "%d failed; %zu kernels, %lld launches (%lld fused, %lld on a "
          "grid, %lld row fusions), %lld ops on the host's kernel instead\n",
          nprogs, host_refused, cuda_refused, not_emulable, ran, reordered,
          kReorderTol, differ,
          failed, g_cuda_emu.num_k, (long long)g_cuda_emu.launches,
          (long long)g_cuda_emu.fused_launches,
          (long long)g_cuda_emu.mt_launches,
          (long long)g_cuda_emu.row_launches,
          (long long)g_cuda_emu.host_fallbacks);
  CHECK_EQ_INT(differ, 0);
  CHECK_EQ_INT(failed, 0);
  bool whole = !only && !getenv("IRON_TEST_CORPUS_DIR");
  CHECK(!whole || nprogs > 100);
  CHECK(!whole || g_cuda_emu.fused_launches > 0);
  for (int i = 0; i < nprogs; ++i) {
    iron_executable_release(progs[i].ref);
    iron_executable_release(progs[i].emu);
  }
  free(progs);
  iron_runtime_release(rt_ref);
  iron_runtime_release(rt_emu);
  cuda_emu_exec_shutdown();
}

static const iron_test_case_t kTests[] = {
    {"corpus_emulated", test_corpus_emulated},
};
IRON_TEST_MAIN(kTests)
