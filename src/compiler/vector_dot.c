// Dots with a vector side as fused reductions; see vector_dot.h.
#include "compiler/vector_dot.h"

#include <stdlib.h>
#include <string.h>

#include "ir/builder.h"

static iron_status_t oom(void) {
  return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory rewriting a dot");
}

static bool float_dtype(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16 ||
         dt == IRON_DTYPE_F32 || dt == IRON_DTYPE_F64;
}

// The dims of one dot: batch and contracting lists of both sides, read and
// checked (in range, each dim once, equal sizes); false for anything else
// (the dot's kernel then reports it).
typedef struct dims {
  const iron_ir_type_t *side[2], *out;
  int64_t b[2][IRON_MAX_RANK], c[2][IRON_MAX_RANK];
  uint32_t nb, nc;
  int role[2][IRON_MAX_RANK];  // per dim: 0 free, 1 batch, 2 contracting
} dims_t;

static bool read_list(const iron_ir_op_t *op, const char *name, int64_t *out,
                      uint32_t *n) {
  iron_status_t st = iron_ir_op_i64_list(op, name, out, IRON_MAX_RANK, n);
  bool ok = st == IRON_OK;
  iron_status_free(st);
  return ok;
}

static bool read_dims(const iron_ir_op_t *op, dims_t *d) {
  memset(d, 0, sizeof(*d));
  if (op->kind != IRON_OP_DOT_GENERAL || op->num_operands != 2 ||
      op->num_results != 1 || iron_ir_op_attr(op, "algorithm"))
    return false;
  for (int s = 0; s < 2; ++s) {
    d->side[s] = op->operands[s]->type;
    if (d->side[s]->kind != IRON_TYPE_TENSOR ||
        !iron_ir_type_is_static(d->side[s]) || !float_dtype(d->side[s]->dtype))
      return false;
  }
  d->out = op->results[0].type;
  if (d->out->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(d->out) ||
      !float_dtype(d->out->dtype))
    return false;
  uint32_t nb[2], nc[2];
  if (!read_list(op, "lhs_batching_dimensions", d->b[0], &nb[0]) ||
      !read_list(op, "rhs_batching_dimensions", d->b[1], &nb[1]) ||
      !read_list(op, "lhs_contracting_dimensions", d->c[0], &nc[0]) ||
      !read_list(op, "rhs_contracting_dimensions", d->c[1], &nc[1]) ||
      nb[0] != nb[1] || nc[0] != nc[1] || nc[0] == 0)
    return false;
  d->nb = nb[0];
  d->nc = nc[0];
  for (int s = 0; s < 2; ++s) {
    const iron_ir_type_t *t = d->side[s];
    for (int r = 1; r <= 2; ++r) {
      const int64_t *l = r == 1 ? d->b[s] : d->c[s];
      uint32_t n = r == 1 ? d->nb : d->nc;
      for (uint32_t i = 0; i < n; ++i) {
        if (l[i] < 0 || l[i] >= t->rank || d->role[s][l[i]]) return false;
        d->role[s][l[i]] = r;
      }
    }
  }
  for (uint32_t i = 0; i < d->nb; ++i)
    if (d->side[0]->dims[d->b[0][i]] != d->side[1]->dims[d->b[1][i]])
      return false;
  for (uint32_t i = 0; i < d->nc; ++i)
    if (d->side[0]->dims[d->c[0][i]] != d->side[1]->dims[d->c[1][i]])
      return false;
  // The result: [batch, lhs free, rhs free].
  int32_t rank = (int32_t)d->nb;
  for (int s = 0; s < 2; ++s)
    for (int32_t i = 0; i < d->side[s]->rank; ++i)
      if (!d->role[s][i]) rank++;
  return rank == d->out->rank;
}

// Product of side s's free dims.
static int64_t free_size(const dims_t *d, int s) {
  int64_t n = 1;
  for (int32_t i = 0; i < d->side[s]->rank; ++i)
    if (!d->role[s][i]) n *= d->side[s]->dims[i];
  return n;
}

typedef struct builder {
  iron_ir_module_t *m;
  iron_ir_func_t *f;
  iron_ir_block_t tmp;  // the new ops, in order
  iron_ir_loc_t loc;
} builder_t;

static const iron_ir_type_t *tensor(builder_t *b, iron_dtype_t dt,
                                    int32_t rank, const int64_t *dims) {
  return iron_ir_builder_tensor_type(b->m, dt, rank, dims);
}

static iron_ir_value_t *op1(builder_t *b, iron_op_kind_t kind, uint32_t n,
                            iron_ir_value_t *const *operands,
                            const iron_ir_type_t *type) {
  if (!type) return NULL;
  iron_ir_value_t *v =
      iron_ir_builder_op1(b->m, b->f, &b->tmp, kind, n, operands, type);
  if (v) v->def_op->loc = b->loc;
  return v;
}

static iron_ir_value_t *with_i64s(builder_t *b, iron_ir_value_t *v,
                                  const char *name, uint32_t n,
                                  const int64_t *list) {
  if (!v) return NULL;
  const iron_ir_attr_t *a = iron_ir_builder_attr_i64s(b->m, n, list);
  if (!a) return NULL;
  iron_ir_builder_attr(b->m, v->def_op, name, a);
  return v;
}

static iron_ir_value_t *convert(builder_t *b, iron_ir_value_t *v,
                                iron_dtype_t dt) {
  if (!v || v->type->dtype == dt) return v;
  return op1(b, IRON_OP_CONVERT, 1, &v,
             tensor(b, dt, v->type->rank, v->type->dims));
}

// v transposed by perm (nothing when perm is the identity).
static iron_ir_value_t *transpose(builder_t *b, iron_ir_value_t *v,
                                  const int64_t *perm) {
  if (!v) return NULL;
  int32_t r = v->type->rank;
  bool id = true;
  int64_t dims[IRON_MAX_RANK];
  for (int32_t i = 0; i < r; ++i) {
    id = id && perm[i] == i;
    dims[i] = v->type->dims[perm[i]];
  }
  if (id) return v;
  v = op1(b, IRON_OP_TRANSPOSE, 1, &v, tensor(b, v->type->dtype, r, dims));
  return with_i64s(b, v, "permutation", (uint32_t)r, perm);
}

static iron_ir_value_t *reshape(builder_t *b, iron_ir_value_t *v,
                                int32_t rank, const int64_t *dims) {
  if (!v) return NULL;
  if (v->type->rank == rank &&
      memcmp(v->type->dims, dims, (size_t)rank * sizeof(int64_t)) == 0)
    return v;
  return op1(b, IRON_OP_RESHAPE, 1, &v,
             tensor(b, v->type->dtype, rank, dims));
}

// sum of v over `dims` (sorted), with an add body.
static iron_ir_value_t *reduce_sum(builder_t *b, iron_ir_value_t *v,
                                   uint32_t n, const int64_t *dims) {
  if (!v) return NULL;
  iron_dtype_t dt = v->type->dtype;
  const iron_ir_type_t *scalar = iron_ir_builder_scalar_type(b->m, dt);
  double zero64 = 0.0;
  float zero32 = 0.0f;
  iron_ir_value_t *init = iron_ir_builder_constant(
      b->m, b->f, &b->tmp, scalar, dt == IRON_DTYPE_F64 ? (void *)&zero64
                                                         : (void *)&zero32,
      iron_dtype_size(dt), true);
  if (!init) return NULL;
  init->def_op->loc = b->loc;
  int64_t out[IRON_MAX_RANK];
  int32_t r = 0;
  for (int32_t i = 0; i < v->type->rank; ++i) {
    bool red = false;
    for (uint32_t j = 0; j < n; ++j) red = red || dims[j] == i;
    if (!red) out[r++] = v->type->dims[i];
  }
  const iron_ir_type_t *ot = tensor(b, dt, r, out);
  iron_ir_value_t *ops[2] = {v, init};
  if (!ot) return NULL;
  iron_ir_op_t *red =
      iron_ir_builder_op(b->m, b->f, &b->tmp, IRON_OP_REDUCE, 2, ops, 1, &ot, 1);
  if (!red) return NULL;
  red->loc = b->loc;
  iron_ir_block_t *body = iron_ir_builder_region_block(red, 0);
  iron_ir_value_t *args[2] = {
      iron_ir_builder_block_arg(b->m, b->f, body, scalar),
      iron_ir_builder_block_arg(b->m, b->f, body, scalar)};
  if (!args[0] || !args[1]) return NULL;
  iron_ir_value_t *sum =
      iron_ir_builder_op1(b->m, b->f, body, IRON_OP_ADD, 2, args, scalar);
  if (!sum) return NULL;
  sum->def_op->loc = b->loc;
  iron_ir_op_t *ret =
      iron_ir_builder_return(b->m, b->f, body, IRON_OP_RETURN, 1, &sum);
  if (!ret) return NULL;
  ret->loc = b->loc;
  return with_i64s(b, &red->results[0], "dimensions", n, dims);
}

// Builds the replacement of dot `op` (vector side v = 1 - mi) into b->tmp;
// its value in *out.
static iron_status_t build(builder_t *b, const iron_ir_op_t *op,
                           const dims_t *d, int mi, iron_ir_value_t **out) {
  int vi = 1 - mi;
  const iron_ir_type_t *M = d->side[mi], *V = d->side[vi];
  iron_dtype_t acc = IRON_DTYPE_F32;
  if (M->dtype == IRON_DTYPE_F64 || V->dtype == IRON_DTYPE_F64 ||
      d->out->dtype == IRON_DTYPE_F64)
    acc = IRON_DTYPE_F64;
  // Each kept vector dim (batch or contracting) and the matrix dim it
  // pairs with; sorted by the latter, they are the broadcast's dims.
  int64_t vdim[IRON_MAX_RANK], mdim[IRON_MAX_RANK];
  uint32_t nk = 0;
  for (uint32_t i = 0; i < d->nb; ++i) {
    vdim[nk] = d->b[vi][i];
    mdim[nk++] = d->b[mi][i];
  }
  for (uint32_t i = 0; i < d->nc; ++i) {
    vdim[nk] = d->c[vi][i];
    mdim[nk++] = d->c[mi][i];
  }
  for (uint32_t i = 1; i < nk; ++i)  // insertion sort by mdim
    for (uint32_t j = i; j > 0 && mdim[j - 1] > mdim[j]; --j) {
      int64_t t = mdim[j]; mdim[j] = mdim[j - 1]; mdim[j - 1] = t;
      t = vdim[j]; vdim[j] = vdim[j - 1]; vdim[j - 1] = t;
    }
  // The vector: its kept dims in the matrix's order, then its free (unit)
  // dims, which the reshape drops.
  int64_t perm[IRON_MAX_RANK], kd[IRON_MAX_RANK];
  uint32_t np = 0;
  for (uint32_t i = 0; i < nk; ++i) {
    perm[np++] = vdim[i];
    kd[i] = V->dims[vdim[i]];
  }
  for (int32_t i = 0; i < V->rank; ++i)
    if (!d->role[vi][i]) perm[np++] = i;
  iron_ir_value_t *v = convert(b, op->operands[vi], acc);
  const iron_ir_type_t *mt = tensor(b, acc, M->rank, M->dims);
  if ((int32_t)nk == V->rank) {
    // Every vector dim kept (no unit free dims): one broadcast maps them
    // onto the matrix's dims in any order, where a transpose would be a
    // kernel of its own (p . V of attention: p[h, t] onto [t, h, d]).
    int64_t bd[IRON_MAX_RANK];
    for (uint32_t i = 0; i < nk; ++i) bd[vdim[i]] = mdim[i];
    v = v ? op1(b, IRON_OP_BROADCAST_IN_DIM, 1, &v, mt) : NULL;
    v = with_i64s(b, v, "broadcast_dimensions", nk, bd);
  } else {
    v = transpose(b, v, perm);
    v = reshape(b, v, (int32_t)nk, kd);
    v = v ? op1(b, IRON_OP_BROADCAST_IN_DIM, 1, &v, mt) : NULL;
    v = with_i64s(b, v, "broadcast_dimensions", nk, mdim);
  }
  iron_ir_value_t *m = convert(b, op->operands[mi], acc);
  iron_ir_value_t *pair[2] = {mi == 0 ? m : v, mi == 0 ? v : m};
  iron_ir_value_t *p = v && m ? op1(b, IRON_OP_MULTIPLY, 2, pair, mt) : NULL;
  // Sum over the matrix's contracting dims (sorted).
  int64_t cd[IRON_MAX_RANK];
  for (uint32_t i = 0; i < d->nc; ++i) cd[i] = d->c[mi][i];
  for (uint32_t i = 1; i < d->nc; ++i)
    for (uint32_t j = i; j > 0 && cd[j - 1] > cd[j]; --j) {
      int64_t t = cd[j]; cd[j] = cd[j - 1]; cd[j - 1] = t;
    }
  iron_ir_value_t *s = reduce_sum(b, p, d->nc, cd);
  // s has the matrix's batch and free dims in the matrix's order; the dot
  // gives batch dims (in the lists' order), then the lhs's free dims, then
  // the rhs's: the vector's free dims are units, so order the matrix's
  // dims and reshape the units in.
  int64_t pos[IRON_MAX_RANK];  // matrix dim -> position in s
  int32_t k = 0;
  for (int32_t i = 0; i < M->rank; ++i)
    pos[i] = d->role[mi][i] == 2 ? -1 : k++;
  int64_t tp[IRON_MAX_RANK];
  uint32_t nt = 0;
  for (uint32_t i = 0; i < d->nb; ++i) tp[nt++] = pos[d->b[mi][i]];
  for (int32_t i = 0; i < M->rank; ++i)
    if (!d->role[mi][i]) tp[nt++] = pos[i];
  s = transpose(b, s, tp);
  s = reshape(b, s, d->out->rank, d->out->dims);
  s = convert(b, s, d->out->dtype);
  if (!s) return oom();
  *out = s;
  return IRON_OK;
}

typedef struct walk {
  iron_ir_module_t *m;
  iron_ir_func_t *f;
  iron_vector_dot_predicate_t want;
  int count;
  // By value id (ids before the rewrite): the value that replaces a
  // rewritten dot's result. Applied once per function, after the walk.
  iron_ir_value_t **remap;
  uint32_t nremap;
} walk_t;

static void apply_remap(const walk_t *w, iron_ir_block_t *blk) {
  for (uint32_t i = 0; i < blk->num_ops; ++i) {
    iron_ir_op_t *op = blk->ops[i];
    for (uint32_t k = 0; k < op->num_operands; ++k) {
      uint32_t id = op->operands[k]->id;
      if (id < w->nremap && w->remap[id]) op->operands[k] = w->remap[id];
    }
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t q = 0; q < op->regions[r].num_blocks; ++q)
        apply_remap(w, &op->regions[r].blocks[q]);
  }
}

// The matrix side of dot `op` (0 or 1), or -1 when neither side is a
// vector: the larger side when both are.
static int matrix_side(const dims_t *d) {
  bool v0 = free_size(d, 0) == 1, v1 = free_size(d, 1) == 1;
  if (!v0 && !v1) return -1;
  if (v0 && v1)
    return iron_ir_type_num_elements(d->side[0]) >=
                   iron_ir_type_num_elements(d->side[1])
               ? 0
               : 1;
  return v0 ? 1 : 0;
}

static iron_status_t walk_block(walk_t *w, iron_ir_block_t *blk) {
  for (uint32_t i = 0; i < blk->num_ops; ++i) {
    iron_ir_op_t *op = blk->ops[i];
    if (op->kind != IRON_OP_DOT_GENERAL) {
      // Control flow's regions are computation blocks; kernel ops'
      // regions (reduce bodies, comparators) are not rewritten.
      bool flow = op->kind == IRON_OP_WHILE || op->kind == IRON_OP_IF ||
                  op->kind == IRON_OP_CASE;
      for (uint32_t r = 0; flow && r < op->num_regions; ++r)
        for (uint32_t q = 0; q < op->regions[r].num_blocks; ++q)
          IRON_RETURN_IF_ERROR_PLAIN(
              walk_block(w, &op->regions[r].blocks[q]));
      continue;
    }
    dims_t d;
    int mi;
    if (!read_dims(op, &d) || (mi = matrix_side(&d)) < 0 ||
        !w->want(op, (uint32_t)mi))
      continue;
    builder_t b = {.m = w->m, .f = w->f, .loc = op->loc};
    iron_ir_value_t *nv = NULL;
    IRON_RETURN_IF_ERROR_PLAIN(build(&b, op, &d, mi, &nv));
    // The new ops take the dot's place.
    uint32_t n = b.tmp.num_ops, total = blk->num_ops - 1 + n;
    iron_ir_op_t **ops =
        iron_arena_alloc_array(&w->m->arena, total + 1, sizeof(*ops));
    if (!ops) return oom();
    memcpy(ops, blk->ops, i * sizeof(*ops));
    for (uint32_t j = 0; j < n; ++j) {
      b.tmp.ops[j]->parent = blk;
      ops[i + j] = b.tmp.ops[j];
    }
    memcpy(ops + i + n, blk->ops + i + 1,
           (blk->num_ops - i - 1) * sizeof(*ops));
    blk->ops = ops;
    blk->num_ops = total;
    if (op->results[0].id < w->nremap) w->remap[op->results[0].id] = nv;
    w->count++;
    i += n - 1;
  }
  return IRON_OK;
}

iron_status_t iron_compiler_vector_dots(iron_ir_module_t *m,
                                        iron_vector_dot_predicate_t want,
                                        int *out_count) {
  walk_t w = {.m = m, .want = want};
  for (uint32_t i = 0; i < m->num_funcs; ++i) {
    w.f = &m->funcs[i];
    w.nremap = w.f->num_values;
    w.remap = calloc(w.nremap + 1, sizeof(*w.remap));
    if (!w.remap) return oom();
    iron_status_t st = IRON_OK;
    for (uint32_t q = 0; q < w.f->body.num_blocks && !st; ++q)
      st = walk_block(&w, &w.f->body.blocks[q]);
    for (uint32_t q = 0; q < w.f->body.num_blocks && !st; ++q)
      apply_remap(&w, &w.f->body.blocks[q]);
    free(w.remap);
    IRON_RETURN_IF_ERROR_PLAIN(st);
  }
  if (out_count) *out_count = w.count;
  return IRON_OK;
}
