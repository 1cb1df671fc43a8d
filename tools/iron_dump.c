// iron-dump: prints the iron IR of a StableHLO portable artifact.
//   iron-dump [--locations] [--fuse-cuda] FILE
// --fuse-cuda prints the module as the CUDA device plans it: after tuple
// forwarding and the fusion pass with the CUDA device's predicate (each
// iron.fusion becomes one kernel), so kernel counts per loop body can be
// read without a GPU.
// Exit status 1 with the reader's error on stderr for unreadable input.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/fuse.h"
#include "compiler/fuse_rows.h"
#include "compiler/inline.h"
#include "compiler/tuple_forward.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_row_fusion.h"
#include "ir/ir.h"
#include "stablehlo/reader.h"

static int usage(void) {
  fprintf(stderr, "usage: iron-dump [--locations] [--fuse-cuda] FILE\n");
  return 2;
}

int main(int argc, char **argv) {
  iron_ir_print_options_t opts = {false};
  const char *path = NULL;
  bool fuse_cuda = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--locations") == 0)
      opts.print_locations = true;
    else if (strcmp(argv[i], "--fuse-cuda") == 0)
      fuse_cuda = true;
    else if (argv[i][0] == '-' && argv[i][1] != '\0')
      return usage();
    else if (!path)
      path = argv[i];
    else
      return usage();
  }
  if (!path) return usage();
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "iron-dump: cannot open %s\n", path);
    return 1;
  }
  size_t cap = 1 << 16, len = 0;
  unsigned char *buf = malloc(cap);
  while (buf) {
    if (len == cap) {
      unsigned char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    if (n == 0) break;
    len += n;
  }
  if (f != stdin) fclose(f);
  if (!buf) {
    fprintf(stderr, "iron-dump: out of memory reading %s\n", path);
    return 1;
  }
  iron_ir_module_t *m = NULL;
  iron_status_t st = iron_stablehlo_read(buf, len, &m);
  free(buf);
  if (st) {
    fprintf(stderr, "iron-dump: %s: %s\n", path, iron_status_message(st));
    iron_status_free(st);
    return 1;
  }
  if (fuse_cuda) {
    st = iron_compiler_tuple_forward(m);
    int n = 0;
    if (!st) st = iron_compiler_inline_for_compile(m, true);
    int nrows = 0;
    if (!st)
      st = iron_compiler_fuse_rows(m, iron_cuda_fusable, iron_cuda_row_fusable,
                                   &nrows);
    if (!st) st = iron_compiler_fuse(m, iron_cuda_fusable, &n);
    if (st) {
      fprintf(stderr, "iron-dump: %s: %s\n", path, iron_status_message(st));
      iron_status_free(st);
      iron_ir_module_destroy(m);
      return 1;
    }
    fprintf(stderr, "iron-dump: %d fusions (%d row fusions)\n", n + nrows,
            nrows);
  }
  iron_ir_module_print(m, &opts, stdout);
  iron_ir_module_destroy(m);
  return 0;
}
