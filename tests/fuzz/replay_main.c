// Runs a fuzz target's LLVMFuzzerTestOneInput once on each file given (or
// each file of each directory given), without libFuzzer: the regression
// inputs of tests/data/fuzz-regressions replay in every build (gcc, the
// sanitizer build), not only where clang's libFuzzer exists. A finding that
// comes back crashes or traps, which fails the ctest.
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

// The custom mutators call libFuzzer's; replays never mutate.
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size) {
  (void)data;
  (void)max_size;
  return size;
}

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc((size_t)n + 1);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    fclose(f);
    free(buf);
    return 1;
  }
  fclose(f);
  fprintf(stderr, "replay: %s (%ld bytes)\n", path, n);
  LLVMFuzzerTestOneInput(buf, (size_t)n);
  free(buf);
  return 0;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int failures = 0, count = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: no such path %s\n", argv[i]);
      failures++;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      failures += replay_file(argv[i]);
      count++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) {
      failures++;
      continue;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      if (n == cap) {
        cap = cap ? cap * 2 : 64;
        names = realloc(names, cap * sizeof(*names));
        if (!names) return 1;
      }
      names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof(*names), cmp_names);
    for (size_t k = 0; k < n; ++k) {
      char path[4096];
      snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]);
      struct stat fst;
      if (stat(path, &fst) == 0 && S_ISREG(fst.st_mode)) {
        failures += replay_file(path);
        count++;
      }
      free(names[k]);
    }
    free(names);
  }
  fprintf(stderr, "replay: %d inputs, %d unreadable\n", count, failures);
  return failures ? 1 : 0;
}
