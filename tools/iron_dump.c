// iron-dump: prints the iron IR of a StableHLO portable artifact.
//   iron-dump [--locations] [--fuse-cuda] [--cuda-kernels]
//             [--cuda-sources DIR] FILE
// --fuse-cuda prints the module as the CUDA device plans it: after tuple
// forwarding and the fusion pass with the CUDA device's predicate (each
// iron.fusion becomes one kernel), so kernel counts per loop body can be
// read without a GPU. --cuda-kernels (implies --fuse-cuda) prints, instead
// of the module, the CUDA source of every kernel the device would generate
// for it (prelude omitted; prepared on a fake sm_90a device with 132 SMs,
// nothing compiled), to read or to compile with nvcc/ptxas.
// --cuda-sources DIR (implies --cuda-kernels) also writes each kernel's
// whole source, prelude included, to DIR/kernel<N>.cu: what NVRTC would
// compile, for `nvcc -ptx` or `-cubin` by hand (a result that differs
// only on the GPU).
// --traffic (implies --fuse-cuda) prints, instead of the module, one line
// per kernel-level op of the planned main function (fusions, reduces,
// convolutions, dots ...; loop and branch bodies included, once each) with
// the bytes it reads (its operands; a fusion's sliced operands count the
// slices, an operand it updates in place nothing) and writes (its results;
// a dynamic update its update), in plan order (`sort -k3 -n -r` for the largest), then totals per kind: the plan's memory traffic outside library
// calls' internals, to compare plans without a GPU.
// Exit status 1 with the reader's error on stderr for unreadable input.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/fusion_passes.h"
#include "compiler/inline.h"
#include "compiler/scan_in_place.h"
#include "compiler/tuple_forward.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_row_fusion.h"
#include "device/cuda/gen/prelude.h"
#include "ir/ir.h"
#include "stablehlo/reader.h"

static int usage(void) {
  fprintf(stderr,
          "usage: iron-dump [--locations] [--fuse-cuda] [--cuda-kernels] "
          "[--cuda-sources DIR] [--traffic] FILE\n");
  return 2;
}

// ---- --traffic

typedef struct {
  char kind[48];
  int line;
  int64_t read, written;
} traffic_row_t;

typedef struct {
  traffic_row_t *rows;
  size_t n, cap;
} traffic_t;

static int64_t value_bytes(const iron_ir_value_t *v) {
  size_t b = 0;
  return iron_ir_type_byte_size(v->type, &b) ? (int64_t)b : 0;
}

// Ops that launch nothing (aliases, constants, structure).
static bool traffic_free(iron_op_kind_t k) {
  return k == IRON_OP_CONSTANT || k == IRON_OP_RESHAPE ||
         k == IRON_OP_RETURN || k == IRON_OP_FUNC_RETURN ||
         k == IRON_OP_GET_TUPLE_ELEMENT || k == IRON_OP_TUPLE ||
         k == IRON_OP_WHILE || k == IRON_OP_IF || k == IRON_OP_CASE ||
         k == IRON_OP_OPTIMIZATION_BARRIER;
}

// A fusion's kind from what it holds: "fusion[reduce:2]", "fusion[ew]"
// (one word, so that `sort -k3` sorts by bytes read).
static void fusion_kind(const iron_ir_op_t *op, char *out, size_t cap) {
  int reduces = 0, transposes = 0, dus = 0;
  const iron_ir_block_t *b = &op->regions[0].blocks[0];
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    iron_op_kind_t k = b->ops[i]->kind;
    reduces += k == IRON_OP_REDUCE;
    transposes += k == IRON_OP_TRANSPOSE;
    dus += k == IRON_OP_DYNAMIC_UPDATE_SLICE;
  }
  if (reduces)
    snprintf(out, cap, "fusion[reduce:%d]", reduces);
  else if (transposes)
    snprintf(out, cap, "fusion[transpose]");
  else if (dus)
    snprintf(out, cap, "fusion[dus]");
  else
    snprintf(out, cap, "fusion[ew]");
}

// The bytes a fusion kernel moves: an argument that its members only
// slice (slice, dynamic_slice) counts the slices' bytes, one that only a
// dynamic_update_slice updates in place (its operand 0) nothing; a result
// computed by a dynamic_update_slice counts the update's bytes.
static void fusion_bytes(const iron_ir_op_t *op, int64_t *read,
                         int64_t *written) {
  const iron_ir_block_t *b = &op->regions[0].blocks[0];
  for (uint32_t a = 0; a < b->num_args && a < op->num_operands; ++a) {
    const iron_ir_value_t *arg = &b->args[a];
    int64_t sliced = 0;
    bool whole = false, used = false;
    for (uint32_t i = 0; i < b->num_ops && !whole; ++i) {
      const iron_ir_op_t *m = b->ops[i];
      for (uint32_t k = 0; k < m->num_operands && !whole; ++k) {
        if (m->operands[k] != arg) continue;
        used = true;
        if (k == 0 && (m->kind == IRON_OP_SLICE ||
                       m->kind == IRON_OP_DYNAMIC_SLICE))
          sliced += value_bytes(&m->results[0]);
        else if (!(k == 0 && m->kind == IRON_OP_DYNAMIC_UPDATE_SLICE))
          whole = true;
      }
    }
    *read += whole || !used ? value_bytes(op->operands[a]) : sliced;
  }
  const iron_ir_op_t *term = b->ops[b->num_ops - 1];
  for (uint32_t r = 0; r < op->num_results; ++r) {
    const iron_ir_value_t *v =
        r < term->num_operands ? term->operands[r] : NULL;
    const iron_ir_op_t *d = v ? v->def_op : NULL;
    *written += d && d->kind == IRON_OP_DYNAMIC_UPDATE_SLICE &&
                        d->num_operands > 1
                    ? value_bytes(d->operands[1])
                    : value_bytes(&op->results[r]);
  }
}

static void traffic_walk(const iron_ir_region_t *r, traffic_t *t) {
  for (uint32_t k = 0; k < r->num_blocks; ++k) {
    const iron_ir_block_t *b = &r->blocks[k];
    for (uint32_t o = 0; o < b->num_ops; ++o) {
      const iron_ir_op_t *op = b->ops[o];
      if (op->kind == IRON_OP_WHILE || op->kind == IRON_OP_IF ||
          op->kind == IRON_OP_CASE)
        for (uint32_t q = 0; q < op->num_regions; ++q)
          traffic_walk(&op->regions[q], t);
      if (traffic_free(op->kind) ||
          (op->kind == IRON_OP_BROADCAST_IN_DIM &&
           iron_ir_broadcast_is_reshape(op)) ||
          (op->kind == IRON_OP_REDUCE && iron_ir_reduce_is_reshape(op)))
        continue;
      if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        traffic_row_t *nr = realloc(t->rows, cap * sizeof(*nr));
        if (!nr) return;
        t->rows = nr, t->cap = cap;
      }
      traffic_row_t *row = &t->rows[t->n++];
      memset(row, 0, sizeof(*row));
      if (op->kind == IRON_OP_FUSION)
        fusion_kind(op, row->kind, sizeof(row->kind));
      else
        snprintf(row->kind, sizeof(row->kind), "%s",
                 strncmp(op->name, "stablehlo.", 10) == 0 ? op->name + 10
                                                          : op->name);
      row->line = op->loc.line;
      if (op->kind == IRON_OP_FUSION) {
        fusion_bytes(op, &row->read, &row->written);
        continue;
      }
      for (uint32_t i = 0; i < op->num_operands; ++i)
        row->read += value_bytes(op->operands[i]);
      for (uint32_t i = 0; i < op->num_results; ++i)
        row->written += value_bytes(&op->results[i]);
    }
  }
}

static int by_kind(const void *a, const void *b) {
  return strcmp(((const traffic_row_t *)a)->kind,
                ((const traffic_row_t *)b)->kind);
}

static void print_traffic(const iron_ir_module_t *m) {
  traffic_t t = {0};
  const iron_ir_func_t *main_fn = iron_ir_module_main(m);  // calls inlined
  if (main_fn) traffic_walk(&main_fn->body, &t);
  int64_t rd = 0, wr = 0;
  printf("%-24s %6s %12s %12s\n", "kernel", "line", "read MB", "written MB");
  for (size_t i = 0; i < t.n; ++i) {
    const traffic_row_t *r = &t.rows[i];
    rd += r->read, wr += r->written;
    printf("%-24s %6d %12.2f %12.2f\n", r->kind, r->line, r->read / 1e6,
           r->written / 1e6);
  }
  qsort(t.rows, t.n, sizeof(*t.rows), by_kind);
  printf("\n%-24s %6s %12s %12s\n", "kind", "count", "read MB", "written MB");
  for (size_t i = 0; i < t.n;) {
    size_t j = i;
    int64_t r = 0, w = 0;
    for (; j < t.n && strcmp(t.rows[j].kind, t.rows[i].kind) == 0; ++j)
      r += t.rows[j].read, w += t.rows[j].written;
    printf("%-24s %6zu %12.2f %12.2f\n", t.rows[i].kind, j - i, r / 1e6,
           w / 1e6);
    i = j;
  }
  printf("%-24s %6zu %12.2f %12.2f\n", "total", t.n, rd / 1e6, wr / 1e6);
  free(t.rows);
}

// Prepares every op of every block (not inside fusions) with the CUDA
// device's kernel, on a fake device that only queues sources.
static void prepare_blocks(iron_cuda_device_t *d, const iron_ir_region_t *r,
                           int *refused) {
  for (uint32_t k = 0; k < r->num_blocks; ++k) {
    const iron_ir_block_t *b = &r->blocks[k];
    for (uint32_t o = 0; o < b->num_ops; ++o) {
      const iron_ir_op_t *op = b->ops[o];
      if (op->kind != IRON_OP_FUSION)
        for (uint32_t q = 0; q < op->num_regions; ++q)
          prepare_blocks(d, &op->regions[q], refused);
      const iron_kernel_t *kn = iron_cuda_kernel_lookup(op->kind);
      if (!kn || !kn->prepare_on) continue;
      iron_region_t *regions[8] = {0};
      void *params = NULL;
      iron_status_t st =
          kn->prepare_on((iron_device_t *)d, op, regions, &params);
      if (st && iron_status_code(st) == IRON_STATUS_UNAVAILABLE) {
        // Library calls (cuBLASLt, cuDNN, cuFFT) are prepared on the GPU.
        fprintf(stderr, "iron-dump: %s: not listed: %s\n", op->name,
                iron_status_message(st));
        iron_status_free(st);
        continue;
      }
      if (st) {
        fprintf(stderr, "iron-dump: %s: %s\n", op->name,
                iron_status_message(st));
        iron_status_free(st);
        (*refused)++;
        continue;
      }
      if (kn->destroy)
        kn->destroy(params);
      else
        free(params);
    }
  }
}

static int write_source(const char *dir, size_t i, const char *s) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/kernel%zu.cu", dir, i);
  FILE *f = fopen(path, "w");
  if (!f || fputs(s, f) < 0) {
    fprintf(stderr, "iron-dump: cannot write %s\n", path);
    if (f) fclose(f);
    return 1;
  }
  return fclose(f) == 0 ? 0 : 1;
}

static int print_kernels(iron_ir_module_t *m, const char *source_dir) {
  iron_cuda_device_t *d = calloc(1, sizeof(*d));
  if (!d) return 1;
  snprintf(d->arch, sizeof(d->arch), "sm_90a");
  d->num_sms = 132;
  int refused = 0;
  for (uint32_t fi = 0; fi < m->num_funcs; ++fi)
    prepare_blocks(d, &m->funcs[fi].body, &refused);
  const char *prelude = iron_cuda_prelude();
  size_t pl = strlen(prelude);
  size_t n = iron_cuda_compiler_pending_count(d);
  int rc = 0;
  for (size_t i = 0; i < n; ++i) {
    const char *s = iron_cuda_compiler_pending_source(d, i);
    if (!s) continue;
    if (source_dir && write_source(source_dir, i, s)) {
      rc = 1;
      break;
    }
    if (strncmp(s, prelude, pl) == 0) s += pl;
    printf("// ---- kernel %zu\n%s\n", i, s);
  }
  fprintf(stderr, "iron-dump: %zu kernel sources, %d ops refused\n", n,
          refused);
  iron_cuda_compiler_destroy(d->compiler);
  free(d);
  return rc;
}

int main(int argc, char **argv) {
  iron_ir_print_options_t opts = {false};
  const char *path = NULL, *source_dir = NULL;
  bool fuse_cuda = false, kernels = false, traffic = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--locations") == 0)
      opts.print_locations = true;
    else if (strcmp(argv[i], "--fuse-cuda") == 0)
      fuse_cuda = true;
    else if (strcmp(argv[i], "--cuda-kernels") == 0)
      fuse_cuda = kernels = true;
    else if (strcmp(argv[i], "--traffic") == 0)
      fuse_cuda = traffic = true;
    else if (strcmp(argv[i], "--cuda-sources") == 0 && i + 1 < argc)
      fuse_cuda = kernels = true, source_dir = argv[++i];
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
    if (!st) st = iron_compiler_inline_for_compile(m, true);
    // The passes of executable.c, with the CUDA device's predicates.
    int nscans = 0;
    if (!st) st = iron_compiler_scan_in_place(m, &nscans);
    iron_fusion_predicates_t preds = {.fusable = iron_cuda_fusable,
                                      .row_fusable = iron_cuda_row_fusable,
                                      .pivot_fusable = iron_cuda_pivot_fusable,
                                      .vector_dot = iron_cuda_vector_dot};
    iron_fusion_counts_t n;
    memset(&n, 0, sizeof(n));
    if (!st) st = iron_compiler_fusion_passes(m, &preds, &n);
    if (st) {
      fprintf(stderr, "iron-dump: %s: %s\n", path, iron_status_message(st));
      iron_status_free(st);
      iron_ir_module_destroy(m);
      return 1;
    }
    if (nscans)
      fprintf(stderr, "iron-dump: %d scanned slabs updated in place\n", nscans);
    if (n.dots) fprintf(stderr, "iron-dump: %d dots as reductions\n", n.dots);
    if (n.copies)
      fprintf(stderr, "iron-dump: %d shared values recomputed per consumer\n",
              n.copies);
    fprintf(stderr, "iron-dump: %d fusions (%d row fusions)\n",
            n.fusions + n.rows, n.rows);
    if (n.producers)
      fprintf(stderr, "iron-dump: %d producer fusions merged into consumers\n",
              n.producers);
    if (n.merged)
      fprintf(stderr, "iron-dump: %d sibling reduce fusions merged\n",
              n.merged);
  }
  if (traffic) {
    print_traffic(m);
    iron_ir_module_destroy(m);
    return 0;
  }
  if (kernels) {
    int rc = print_kernels(m, source_dir);
    iron_ir_module_destroy(m);
    return rc;
  }
  iron_ir_module_print(m, &opts, stdout);
  iron_ir_module_destroy(m);
  return 0;
}
