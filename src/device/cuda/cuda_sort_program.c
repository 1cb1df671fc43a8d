// stablehlo.sort on CUDA as a program of launches (cuda_sort_program.h):
// validation, the choice of algorithm, kernel naming and program assembly.
#include "device/cuda/cuda_sort_program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"

void iron_cuda_sort_options_from_env(iron_cuda_sort_options_t *out) {
  memset(out, 0, sizeof(*out));
  out->block_max = IRON_CUDA_SORT_MAX_ROW;
  const char *e = getenv("IRON_CUDA_SORT_BLOCK_MAX");
  if (e && e[0]) {
    long long v = strtoll(e, NULL, 10);
    if (v >= 0) out->block_max = v;
  }
  if (out->block_max > IRON_CUDA_SORT_MAX_ROW)
    out->block_max = IRON_CUDA_SORT_MAX_ROW;
  e = getenv("IRON_CUDA_SORT_RADIX");
  out->radix = !(e && e[0] == '0');
  e = getenv("IRON_SORT_GENERIC");
  out->generic = e && e[0] && e[0] != '0';
  out->daz = iron_cuda_flush_denormals();
}

// --- program assembly -------------------------------------------------------

static bool grow(void **arr, uint32_t *cap, uint32_t need, size_t elem) {
  if (need <= *cap) return true;
  uint32_t c = *cap ? *cap * 2 : 16;
  while (c < need) c *= 2;
  void *p = realloc(*arr, (size_t)c * elem);
  if (!p) return false;
  *arr = p;
  *cap = c;
  return true;
}

uint32_t iron_cuda_sort_kernel(iron_cuda_sort_builder_t *b,
                               const char *suffix) {
  iron_cuda_sort_program_t *p = b->prog;
  char name[160];
  snprintf(name, sizeof(name), "%s_%s", b->prefix, suffix);
  for (uint32_t i = 0; i < p->num_kernels; ++i)
    if (strcmp(p->kernels[i], name) == 0) return i;
  if (!grow((void **)&p->kernels, &b->cap_kernels, p->num_kernels + 1,
            sizeof(char *))) {
    b->oom = true;
    return 0;
  }
  char *copy = strdup(name);
  if (!copy) {
    b->oom = true;
    return 0;
  }
  p->kernels[p->num_kernels] = copy;
  return p->num_kernels++;
}

void iron_cuda_sort_launch(iron_cuda_sort_builder_t *b, uint32_t kernel,
                           int64_t grid, unsigned block) {
  iron_cuda_sort_program_t *p = b->prog;
  if (b->oom || !grow((void **)&p->launches, &b->cap_launches,
                      p->num_launches + 1, sizeof(*p->launches))) {
    b->oom = true;
    return;
  }
  iron_cuda_sort_launch_t *l = &p->launches[p->num_launches++];
  // Kernels loop over their work (grid-stride), so a large grid may be
  // cut; 2^31 - 1 is CUDA's limit on x.
  l->kernel = kernel;
  l->grid = (unsigned)(grid < 1 ? 1 : grid > 0x7fffffff ? 0x7fffffff : grid);
  l->block = block;
  l->first_arg = p->num_args;
  l->num_args = 0;
}

void iron_cuda_sort_arg(iron_cuda_sort_builder_t *b,
                        iron_cuda_sort_arg_kind_t kind, uint32_t index,
                        int64_t value) {
  iron_cuda_sort_program_t *p = b->prog;
  if (b->oom || p->num_launches == 0 ||
      !grow((void **)&p->args, &b->cap_args, p->num_args + 1,
            sizeof(*p->args))) {
    b->oom = true;
    return;
  }
  p->args[p->num_args++] =
      (iron_cuda_sort_arg_t){.kind = kind, .index = index, .value = value};
  p->launches[p->num_launches - 1].num_args++;
}

int64_t iron_cuda_sort_scratch(iron_cuda_sort_builder_t *b, int64_t bytes) {
  iron_cuda_sort_program_t *p = b->prog;
  size_t at = (p->scratch_bytes + 255) & ~(size_t)255;
  p->scratch_bytes = at + (size_t)bytes;
  return (int64_t)at;
}

void iron_cuda_sort_geometry(iron_cuda_sort_builder_t *b,
                             const iron_cuda_sort_shape_t *s) {
  iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, s->n);
  iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, s->rows);
  iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, s->inner);
}

void iron_cuda_sort_program_destroy(iron_cuda_sort_program_t *p) {
  if (!p) return;
  free(p->source);
  for (uint32_t i = 0; i < p->num_kernels; ++i) free(p->kernels[i]);
  free(p->kernels);
  free(p->launches);
  free(p->args);
  free(p);
}

static void program_reset(iron_cuda_sort_program_t *p) {
  iron_cuda_sort_algorithm_t a = p->algorithm;
  int64_t rows = p->rows, n = p->n, inner = p->inner;
  free(p->source);
  for (uint32_t i = 0; i < p->num_kernels; ++i) free(p->kernels[i]);
  free(p->kernels);
  free(p->launches);
  free(p->args);
  memset(p, 0, sizeof(*p));
  p->algorithm = a;
  p->rows = rows;
  p->n = n;
  p->inner = inner;
}

// --- operands ------------------------------------------------------------

static bool iota_fits(iron_dtype_t dt, int64_t n) {
  int bits = iron_dtype_bits(dt);
  switch (iron_dtype_class(dt)) {
    case IRON_DTYPE_CLASS_SINT:
      return bits >= 8 && bits % 8 == 0 &&
             (bits >= 64 || n - 1 <= (int64_t)((1ull << (bits - 1)) - 1));
    case IRON_DTYPE_CLASS_UINT:
      return bits >= 8 && bits % 8 == 0 &&
             (bits >= 64 || n - 1 <= (int64_t)((1ull << bits) - 1));
    default:
      return false;
  }
}

bool iron_cuda_sort_operand_is_iota(const iron_ir_op_t *op, uint32_t i,
                                    int64_t dim, int64_t n) {
  const iron_ir_value_t *v = op->operands[i];
  const iron_ir_type_t *t = v->type;
  const iron_ir_op_t *d = v->def_op;
  if (!t || t->rank == 0 || !iota_fits(t->dtype, n)) return false;
  // A fusion's result: the value its region returns there.
  if (d && d->kind == IRON_OP_FUSION && d->num_regions == 1 &&
      d->regions[0].num_blocks == 1) {
    const iron_ir_block_t *b = &d->regions[0].blocks[0];
    const iron_ir_op_t *ret = b->num_ops ? b->ops[b->num_ops - 1] : NULL;
    if (!ret || v->index >= ret->num_operands) return false;
    v = ret->operands[v->index];
    d = v->def_op;
  }
  if (!d || d->kind != IRON_OP_IOTA || d->num_results != 1) return false;
  const iron_ir_type_t *it = d->results[0].type;
  if (!it || it->dtype != t->dtype || it->rank != t->rank ||
      memcmp(it->dims, t->dims, sizeof(int64_t) * (size_t)t->rank))
    return false;
  int64_t idim = -1;
  uint32_t cnt = 0;
  iron_status_t st = iron_ir_op_i64_list(d, "iota_dimension", &idim, 1, &cnt);
  if (st) {
    iron_status_free(st);
    return false;
  }
  return cnt == 1 && idim == dim;
}

// --- generation ---------------------------------------------------------------

static iron_status_t generate(const iron_cuda_sort_shape_t *s,
                              iron_cuda_sort_program_t *p,
                              const char *prefix) {
  iron_cuda_sort_builder_t b = {.prog = p, .prefix = prefix};
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  iron_cuda_text_printf(
      &t,
      "// Generated by ironjax (src/device/cuda/cuda_sort_program.c): "
      "stablehlo.sort, %s, %u operand(s); lengths are arguments.\n",
      p->algorithm == IRON_CUDA_SORT_BLOCK   ? "one block per row"
      : p->algorithm == IRON_CUDA_SORT_RADIX ? "LSD radix sort"
                                             : "merge sort",
      s->num);
  iron_status_t st = iron_cuda_sort_gen_compare(&t, prefix, s);
  if (!st) {
    switch (p->algorithm) {
      case IRON_CUDA_SORT_BLOCK: {
        unsigned block = 0;
        st = iron_cuda_sort_gen_block(&t, prefix, s, &block);
        if (st) break;
        uint32_t k = iron_cuda_sort_kernel(&b, "block");
        iron_cuda_sort_launch(&b, k, s->rows > (1 << 20) ? (1 << 20) : s->rows,
                              block);
        for (uint32_t i = 0; i < s->num; ++i)
          iron_cuda_sort_arg(&b, IRON_CUDA_SORT_ARG_INPUT, i, 0);
        for (uint32_t i = 0; i < s->num; ++i)
          iron_cuda_sort_arg(&b, IRON_CUDA_SORT_ARG_OUTPUT, i, 0);
        iron_cuda_sort_arg(&b, IRON_CUDA_SORT_ARG_I64, 0, s->inner);
        iron_cuda_sort_geometry(&b, s);
        break;
      }
      case IRON_CUDA_SORT_RADIX:
        st = iron_cuda_sort_gen_radix(&t, &b, s);
        break;
      default:
        st = iron_cuda_sort_gen_merge(&t, &b, s);
        break;
    }
  }
  if (st) {
    iron_cuda_text_free(&t);
    return st;
  }
  if (b.oom) {
    iron_cuda_text_free(&t);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory planning a cuda sort");
  }
  return iron_cuda_text_finish(&t, &p->source);
}

iron_status_t iron_cuda_sort_program_create(
    const iron_ir_op_t *op, const iron_region_t *comparator,
    const iron_cuda_sort_options_t *options,
    iron_cuda_sort_program_t **out_program) {
  uint32_t num = op->num_operands;
  if (num == 0 || op->num_results != num || op->num_regions != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad operand/result counts",
                    op->name);
  if (num > IRON_CUDA_SORT_MAX_OPERANDS)
    return IRON_ERR(UNIMPLEMENTED, "cuda sort of %u operands (at most %d)",
                    num, IRON_CUDA_SORT_MAX_OPERANDS);
  IRON_RETURN_IF_ERROR_PLAIN(iron_sort_check_comparator(op));
  const iron_ir_type_t *t0 = op->operands[0]->type;
  iron_cuda_sort_shape_t s;
  memset(&s, 0, sizeof(s));
  s.num = num;
  for (uint32_t i = 0; i < num; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (t->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t) ||
        t->rank != t0->rank ||
        memcmp(t->dims, t0->dims, sizeof(int64_t) * (size_t)t->rank))
      return IRON_ERR(UNIMPLEMENTED, "cuda sort of these operand types");
    s.dtypes[i] = t->dtype;
    s.ty[i] = iron_cuda_type(t->dtype);
    if (!s.ty[i].store)
      return IRON_ERR(UNIMPLEMENTED, "cuda sort for dtype %s",
                      iron_dtype_name(t->dtype));
  }
  int64_t dim = 0;
  const iron_ir_attr_t *da = iron_ir_op_attr(op, "dimension");
  if (da && !iron_ir_attr_as_i64(da, &dim))
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad dimension", op->name);
  if (dim < 0) dim += t0->rank;
  if (t0->rank > 0 && (dim < 0 || dim >= t0->rank))
    return IRON_ERR(INVALID_ARGUMENT, "%s: dimension %lld out of range",
                    op->name, (long long)dim);
  int64_t outer = 1;
  s.n = 1;
  s.inner = 1;
  for (int32_t d = 0; d < t0->rank; ++d) {
    if (d < dim) outer *= t0->dims[d];
    else if (d == dim) s.n = t0->dims[d];
    else s.inner *= t0->dims[d];
  }
  s.rows = outer * s.inner;
  s.comparator = comparator;
  for (uint32_t i = 0; i < num && t0->rank > 0; ++i)
    s.iota[i] = iron_cuda_sort_operand_is_iota(op, i, dim, s.n);
  s.daz = options->daz;
  iron_cuda_sort_program_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->rows = s.rows;
  p->n = s.n;
  p->inner = s.inner;
  if (s.rows == 0 || s.n == 0) {
    *out_program = p;  // nothing to sort
    return IRON_OK;
  }
  if (s.n > (int64_t)UINT32_MAX) {
    free(p);
    return IRON_ERR(UNIMPLEMENTED, "cuda sort of rows of 2^32 or more "
                    "elements (%lld)", (long long)s.n);
  }
  iron_sort_keys_t keys;
  bool matched = !options->generic && iron_sort_keys_match(op, &keys);
  if (matched) {
    for (int32_t k = 0; k < keys.num_keys; ++k) keys.keys[k].daz = s.daz;
    s.keys = &keys;
  }
  if (s.n <= options->block_max && s.n <= IRON_CUDA_SORT_MAX_ROW)
    p->algorithm = IRON_CUDA_SORT_BLOCK;
  else if (matched && options->radix &&
           iron_sort_keys_integer_ordered(&keys))
    p->algorithm = IRON_CUDA_SORT_RADIX;
  else
    p->algorithm = IRON_CUDA_SORT_MERGE;
  // Kernel names carry a hash of the text generated under a fixed prefix,
  // so different sorts never share an extern "C" name in one module batch
  // while identical sorts keep identical sources (the disk cache hits).
  iron_status_t st = generate(&s, p, "iron_sort");
  if (!st) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (const unsigned char *c = (const unsigned char *)p->source; *c; ++c) {
      h ^= *c;
      h *= 1099511628211ull;
    }
    char prefix[48];
    snprintf(prefix, sizeof(prefix), "iron_sort_%016llx",
             (unsigned long long)h);
    program_reset(p);
    st = generate(&s, p, prefix);
  }
  if (st) {
    iron_cuda_sort_program_destroy(p);
    return st;
  }
  *out_program = p;
  return IRON_OK;
}
