// Every artifact of tests/data/corpus through compile and one execution on
// synthetic inputs, with the real host kernels. Compile may only fail with
// UNIMPLEMENTED naming an op; execution must not fail. Prints a tally of the
// unsupported ops (numeric results are compared with jax by the pytest
// suite; this test guards the runtime against crashes and bad plans).
#include <dirent.h>
#include <stdlib.h>

#include "iron/iron.h"
#include "runtime/runtime_internal.h"
#include "corpus_files.h"
#include "device_fence.h"
#include "test.h"

typedef struct {
  char name[96];
  int count;
} tally_t;

static void tally_add(tally_t *t, int *n, const char *msg) {
  // "... stablehlo.fft is not supported yet ..." -> "stablehlo.fft"
  const char *p = strstr(msg, " is not supported yet");
  char name[96] = "other";
  if (p) {
    const char *b = p;
    while (b > msg && b[-1] != ' ') --b;
    size_t len = (size_t)(p - b) < sizeof(name) - 1 ? (size_t)(p - b)
                                                    : sizeof(name) - 1;
    memcpy(name, b, len);
    name[len] = '\0';
  }
  for (int i = 0; i < *n; ++i)
    if (strcmp(t[i].name, name) == 0) {
      t[i].count++;
      return;
    }
  if (*n < 128) {
    snprintf(t[*n].name, sizeof(t[*n].name), "%s", name);
    t[(*n)++].count = 1;
  }
}

static void test_corpus(void) {
  const char *dir = IRON_TEST_DATA_DIR "/corpus";
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  if (!d) return;
  // Synthetic inputs can make data-dependent loops run forever.
  setenv("IRON_MAX_WHILE_ITERATIONS", "100000", 1);
  bool verbose = getenv("IRON_TEST_VERBOSE") != NULL;
  iron_runtime_t *rt;
  CHECK_OK(iron_runtime_create(NULL, &rt));
  iron_device_t *dev = iron_runtime_device(rt, 0);
  static tally_t tally[128];
  int ntally = 0, total = 0, compiled = 0, ran = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 8 || strcmp(e->d_name + len - 7, ".mlirbc") != 0) continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    size_t size;
    char *bytes = test_read_file(path, &size);
    CHECK(bytes != NULL);
    if (!bytes) continue;
    total++;
    if (verbose) fprintf(stderr, "%s\n", e->d_name);
    iron_executable_t *exe = NULL;
    iron_status_t st = iron_executable_compile(rt, bytes, size, NULL, &exe);
    free(bytes);
    if (st) {
      if (iron_status_code(st) != IRON_STATUS_UNIMPLEMENTED) {
        fprintf(stderr, "%s: compile: %s: %s\n", e->d_name,
                iron_status_code_name(iron_status_code(st)),
                iron_status_message(st));
        CHECK(iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED);
      }
      tally_add(tally, &ntally, iron_status_message(st));
      iron_status_free(st);
      continue;
    }
    compiled++;
    uint32_t ni = iron_executable_num_inputs(exe);
    uint32_t no = iron_executable_num_outputs(exe);
    iron_buffer_t **args = calloc(ni + 1, sizeof(*args));
    iron_buffer_t **outs = calloc(no + 1, sizeof(*outs));
    bool ok = true;
    for (uint32_t i = 0; i < ni && ok; ++i) {
      iron_dtype_t dt;
      int32_t rank;
      const int64_t *dims;
      iron_executable_input_type(exe, i, &dt, &rank, &dims);
      int64_t count = 1;
      for (int32_t k = 0; k < rank; ++k) count *= dims[k];
      size_t es = iron_dtype_size(dt);
      void *data = calloc((size_t)count + 1, es ? es : 1);
      test_fill_synthetic(data, dt, count);
      st = iron_buffer_create_from_host(dev, dt, rank, dims, data, NULL,
                                        &args[i]);
      free(data);
      if (st) {
        CHECK_OK(st);
        ok = false;
      }
    }
    if (ok) {
      iron_event_t *done = NULL;
      st = iron_executable_execute(exe, args, ni, NULL, outs, &done);
      if (!st) {
        st = iron_event_wait(done);
        iron_event_release(done);
      }
      if (st) {
        fprintf(stderr, "%s: run: %s: %s\n", e->d_name,
                iron_status_code_name(iron_status_code(st)),
                iron_status_message(st));
        CHECK(iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED ||
              iron_status_code(st) == IRON_STATUS_ABORTED);
        iron_status_free(st);
      } else {
        ran++;
      }
      for (uint32_t i = 0; i < no; ++i) iron_buffer_release(outs[i]);
    }
    for (uint32_t i = 0; i < ni; ++i) iron_buffer_release(args[i]);
    free(args);
    free(outs);
    iron_executable_release(exe);
  }
  closedir(d);
  fprintf(stderr, "corpus: %d artifacts, %d compiled, %d ran\n", total,
          compiled, ran);
  for (int i = 0; i < ntally; ++i)
    fprintf(stderr, "  unsupported: %-40s %d\n", tally[i].name,
            tally[i].count);
  CHECK(total > 0);
  CHECK_EQ_INT(test_settled_bytes(dev), 0);
  iron_runtime_release(rt);
}

static const iron_test_case_t kTests[] = {
    {"corpus", test_corpus},
};
IRON_TEST_MAIN(kTests)
