// Helpers shared by the C tests that run the program corpus
// (tests/data/corpus) and other directories of artifacts: whole-file
// reads, the artifacts of a directory, synthetic inputs.
#ifndef IRON_TESTS_CORPUS_FILES_H_
#define IRON_TESTS_CORPUS_FILES_H_

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "stablehlo/reader.h"

// The whole file (malloc'ed, NULL when unreadable); *out_size its bytes.
static inline char *test_read_file(const char *path, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *out_size = (size_t)n;
  return buf;
}

// The artifact at IRON_TEST_DATA_DIR/`rel`, read into a module (NULL, with
// the reason on stderr, when unreadable or malformed).
static inline iron_ir_module_t *test_read_module(const char *rel) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", IRON_TEST_DATA_DIR, rel);
  size_t size = 0;
  char *bytes = test_read_file(path, &size);
  if (!bytes) {
    fprintf(stderr, "%s: cannot read\n", path);
    return NULL;
  }
  iron_ir_module_t *m = NULL;
  iron_status_t st = iron_stablehlo_read(bytes, size, &m);
  free(bytes);
  if (st) {
    fprintf(stderr, "%s: %s\n", path, iron_status_message(st));
    iron_status_free(st);
    return NULL;
  }
  return m;
}

// The *.mlirbc artifacts of `dir` whose file name contains `only` (NULL:
// all), sorted, as names without the extension (malloc'ed; free with
// test_artifacts_free). *out_n: how many; -1 when `dir` cannot be read.
static inline char **test_artifacts(const char *dir, const char *only,
                                    int *out_n) {
  struct dirent **ents = NULL;
  int nents = scandir(dir, &ents, NULL, alphasort);
  *out_n = nents < 0 ? -1 : 0;
  char **names = calloc((size_t)(nents > 0 ? nents : 1), sizeof(char *));
  for (int e = 0; e < nents; ++e) {
    const char *fn = ents[e]->d_name;
    size_t len = strlen(fn);
    if (names && len >= 8 && strcmp(fn + len - 7, ".mlirbc") == 0 &&
        (!only || strstr(fn, only))) {
      names[*out_n] = malloc(len - 6);
      if (names[*out_n]) {
        memcpy(names[*out_n], fn, len - 7);
        names[*out_n][len - 7] = '\0';
        (*out_n)++;
      }
    }
    free(ents[e]);
  }
  free(ents);
  return names;
}

static inline void test_artifacts_free(char **names, int n) {
  for (int i = 0; i < n; ++i) free(names[i]);
  free(names);
}

// The bytes of dir/name.mlirbc (test_read_file).
static inline char *test_artifact_read(const char *dir, const char *name,
                                       size_t *out_size) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s.mlirbc", dir, name);
  return test_read_file(path, out_size);
}

// Deterministic inputs of any dtype: small values for the common types,
// a byte pattern for the others.
static inline void test_fill_synthetic(void *data, iron_dtype_t dt,
                                       int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    switch (dt) {
      case IRON_DTYPE_F32:
        ((float *)data)[i] = 0.25f * (float)(i % 7) - 0.5f;
        break;
      case IRON_DTYPE_F64:
        ((double *)data)[i] = 0.25 * (double)(i % 7) - 0.5;
        break;
      case IRON_DTYPE_S32: ((int32_t *)data)[i] = (int32_t)(i % 5); break;
      case IRON_DTYPE_U32:
        ((uint32_t *)data)[i] = (uint32_t)(i * 2654435761u);
        break;
      case IRON_DTYPE_S64: ((int64_t *)data)[i] = i % 5; break;
      case IRON_DTYPE_U64:
        ((uint64_t *)data)[i] = (uint64_t)i * 0x9E3779B97F4A7C15ull;
        break;
      case IRON_DTYPE_PRED: ((uint8_t *)data)[i] = (uint8_t)(i & 1); break;
      default: {
        size_t es = iron_dtype_size(dt);
        memset((char *)data + (size_t)i * es, (int)(i % 3), es);
      }
    }
  }
}

#endif  // IRON_TESTS_CORPUS_FILES_H_
