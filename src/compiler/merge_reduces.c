// Sibling reduce fusions merged into one; see merge_reduces.h.
#include "compiler/merge_reduces.h"

#include <stdlib.h>
#include <string.h>

#include "compiler/fusion_edit.h"

typedef struct {
  iron_fusion_edit_t e;  // the module and the function being edited
  iron_fuse_predicate_t can_fuse;
  int merged;
} mr_ctx_t;

static iron_status_t oom(void) {
  return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory while merging reduces");
}

static bool has_regions(const iron_ir_block_t *b, uint32_t from, uint32_t to) {
  for (uint32_t i = from; i < to; ++i)
    if (b->ops[i]->num_regions) return true;
  return false;
}

// The reduce that ends reduce fusion `op` (members, the reduce, a return
// of exactly its results; inits are block arguments), `op` itself when it
// is a reduce, or NULL.
static bool reduce_body_ok(const iron_ir_op_t *red) {
  uint32_t n = red->num_results;
  if (red->kind != IRON_OP_REDUCE || red->num_regions != 1 ||
      red->regions[0].num_blocks != 1 || red->num_operands != 2 * n)
    return false;
  const iron_ir_block_t *body = &red->regions[0].blocks[0];
  return body->num_args == 2 * n && !has_regions(body, 0, body->num_ops);
}

static iron_ir_op_t *reduce_root(iron_ir_op_t *op) {
  // A reduce of its own: the root of a fusion without members.
  if (op->kind == IRON_OP_REDUCE) return reduce_body_ok(op) ? op : NULL;
  if (op->kind != IRON_OP_FUSION || op->num_regions != 1 ||
      op->regions[0].num_blocks != 1)
    return NULL;
  const iron_ir_block_t *b = &op->regions[0].blocks[0];
  if (b->num_ops < 3) return NULL;
  iron_ir_op_t *red = b->ops[b->num_ops - 2];
  const iron_ir_op_t *term = b->ops[b->num_ops - 1];
  uint32_t n = red->num_results;
  if (red->kind != IRON_OP_REDUCE || red->num_regions != 1 ||
      red->regions[0].num_blocks != 1 || red->num_operands != 2 * n ||
      term->num_operands != n || op->num_results != n ||
      has_regions(b, 0, b->num_ops - 2))
    return NULL;
  for (uint32_t i = 0; i < n; ++i)
    if (term->operands[i] != &red->results[i]) return NULL;
  for (uint32_t i = n; i < 2 * n; ++i)
    if (red->operands[i]->def_op) return NULL;  // inits: block arguments
  const iron_ir_block_t *body = &red->regions[0].blocks[0];
  if (body->num_args != 2 * n || has_regions(body, 0, body->num_ops))
    return NULL;
  return red;
}

// Whether reduces a and b reduce inputs of the same dims over the same
// dims, and that the innermost non-unit dim is kept (a column or middle
// reduce: each thread folds its own outputs, so siblings share loads
// without changing either's order).
static bool siblings(const iron_ir_op_t *a, const iron_ir_op_t *b) {
  const iron_ir_type_t *ta = a->operands[0]->type, *tb = b->operands[0]->type;
  if (!iron_ir_type_same_dims(ta, tb) || !iron_ir_type_is_static(ta))
    return false;
  int64_t da[IRON_MAX_RANK], db[IRON_MAX_RANK];
  uint32_t na = 0, nb = 0;
  iron_status_t st = iron_ir_op_i64_list(a, "dimensions", da, IRON_MAX_RANK, &na);
  if (!st) st = iron_ir_op_i64_list(b, "dimensions", db, IRON_MAX_RANK, &nb);
  if (st) {
    iron_status_free(st);
    return false;
  }
  if (na != nb || memcmp(da, db, na * sizeof(int64_t)) != 0) return false;
  for (int32_t d = ta->rank - 1; d >= 0; --d) {
    if (ta->dims[d] == 1) continue;
    for (uint32_t k = 0; k < na; ++k)
      if (da[k] == d) return false;  // the innermost dim is reduced
    return true;
  }
  return false;
}

// Whether kernels k1 and k2 read a common operand with as many elements as
// their reduces' inputs (what merging saves: one pass over it).
static bool share_input(const iron_ir_op_t *k1, const iron_ir_op_t *k2,
                        const iron_ir_op_t *r1) {
  int64_t n = iron_ir_type_num_elements(r1->operands[0]->type);
  for (uint32_t i = 0; i < k1->num_operands; ++i) {
    const iron_ir_value_t *v = k1->operands[i];
    if (v->type->kind != IRON_TYPE_TENSOR ||
        iron_ir_type_num_elements(v->type) != n)
      continue;
    for (uint32_t j = 0; j < k2->num_operands; ++j)
      if (k2->operands[j] == v) return true;
  }
  return false;
}

static bool is_result_of(const iron_ir_value_t *v, const iron_ir_op_t *op) {
  return v->def_op == op;
}

// Whether `op` (or an op nested in its regions, fusions' aside) reads a
// result of `of`, or a value flagged in tainted[] (by id, may be NULL).
static bool reads(const iron_ir_op_t *op, const iron_ir_op_t *of,
                  const bool *tainted, uint32_t ids) {
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    const iron_ir_value_t *v = op->operands[i];
    if (is_result_of(v, of) || (tainted && v->id < ids && tainted[v->id]))
      return true;
  }
  if (op->kind == IRON_OP_FUSION) return false;
  for (uint32_t r = 0; r < op->num_regions; ++r)
    for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b) {
      const iron_ir_block_t *blk = &op->regions[r].blocks[b];
      for (uint32_t k = 0; k < blk->num_ops; ++k)
        if (reads(blk->ops[k], of, tainted, ids)) return true;
    }
  return false;
}

// Index of v's defining op in blk, or -1 when defined elsewhere (an
// argument, an outer block).
static int64_t def_index(const iron_ir_block_t *blk, const iron_ir_value_t *v) {
  if (!v->def_op || v->def_op->parent != blk) return -1;
  for (uint32_t i = 0; i < blk->num_ops; ++i)
    if (blk->ops[i] == v->def_op) return i;
  return -1;
}

// Where the merge of blk->ops[i1] and blk->ops[i2] (i1 < i2) may stand:
// i2, i1, or -1 when neither.
static int64_t meeting_place(const iron_ir_block_t *blk, uint32_t i1,
                             uint32_t i2) {
  const iron_ir_op_t *k1 = blk->ops[i1], *k2 = blk->ops[i2];
  bool used_between = false;
  for (uint32_t i = i1 + 1; i < i2 && !used_between; ++i)
    used_between = reads(blk->ops[i], k1, NULL, 0);
  if (!used_between && !reads(k2, k1, NULL, 0)) return i2;
  for (uint32_t k = 0; k < k2->num_operands; ++k)
    if (def_index(blk, k2->operands[k]) >= (int64_t)i1) return -1;
  return i1;
}

// The reduce of both: operands (in1..., in2..., init1..., init2...) and a
// body computing body1 on (acc1, x1) and body2 on (acc2, x2).
static iron_ir_op_t *merged_reduce(mr_ctx_t *c, const iron_ir_op_t *r1,
                                   const iron_ir_op_t *r2, iron_ir_block_t *into,
                                   const iron_value_map_t *outer) {
  uint32_t n1 = r1->num_results, n2 = r2->num_results, n = n1 + n2;
  iron_ir_op_t *red = iron_fusion_edit_op(&c->e, IRON_OP_REDUCE, 2 * n, n, 1);
  if (!red) return NULL;
  red->num_attrs = r1->num_attrs;
  red->attrs = r1->attrs;
  red->loc = r2->loc;
  red->parent = into;
  for (uint32_t i = 0; i < n1; ++i) {
    red->operands[i] = iron_value_map_get(outer, r1->operands[i]);
    red->operands[n + i] = iron_value_map_get(outer, r1->operands[n1 + i]);
  }
  for (uint32_t i = 0; i < n2; ++i) {
    red->operands[n1 + i] = iron_value_map_get(outer, r2->operands[i]);
    red->operands[n + n1 + i] = iron_value_map_get(outer, r2->operands[n2 + i]);
  }
  for (uint32_t i = 0; i < n; ++i) {
    const iron_ir_op_t *src = i < n1 ? r1 : r2;
    red->results[i] = src->results[i < n1 ? i : i - n1];
    red->results[i].def_op = red;
    red->results[i].index = i;
    red->results[i].id = c->e.f->num_values++;
  }
  const iron_ir_block_t *b1 = &r1->regions[0].blocks[0];
  const iron_ir_block_t *b2 = &r2->regions[0].blocks[0];
  iron_ir_block_t *body =
      iron_fusion_edit_block(&c->e, &red->regions[0], 2 * n, b1->num_ops + b2->num_ops);
  iron_value_map_t *vm = calloc(1, sizeof(*vm));
  iron_ir_op_t *ret = iron_fusion_edit_op(&c->e, IRON_OP_RETURN, n, 0, 0);
  if (!body || !vm || !ret) {
    free(vm);
    return NULL;
  }
  // Arguments: acc1, acc2, x1, x2.
  for (uint32_t i = 0; i < n1; ++i) {
    iron_value_map_add(vm, &b1->args[i], iron_fusion_edit_arg(&c->e, body, i, b1->args[i].type));
    iron_value_map_add(vm, &b1->args[n1 + i],
             iron_fusion_edit_arg(&c->e, body, n + i, b1->args[n1 + i].type));
  }
  for (uint32_t i = 0; i < n2; ++i) {
    iron_value_map_add(vm, &b2->args[i], iron_fusion_edit_arg(&c->e, body, n1 + i, b2->args[i].type));
    iron_value_map_add(vm, &b2->args[n2 + i],
             iron_fusion_edit_arg(&c->e, body, n + n1 + i, b2->args[n2 + i].type));
  }
  uint32_t nb = 0;
  for (int s = 0; s < 2; ++s) {
    const iron_ir_block_t *src = s ? b2 : b1;
    uint32_t base = s ? n1 : 0;
    for (uint32_t k = 0; k + 1 < src->num_ops; ++k) {
      iron_ir_op_t *op = iron_fusion_edit_clone(&c->e, src->ops[k], body, vm);
      if (!op) {
        free(vm);
        return NULL;
      }
      body->ops[nb++] = op;
    }
    const iron_ir_op_t *term = src->ops[src->num_ops - 1];
    for (uint32_t i = 0; i < term->num_operands; ++i)
      ret->operands[base + i] = iron_value_map_get(vm, term->operands[i]);
    ret->loc = term->loc;
  }
  free(vm);
  ret->parent = body;
  body->ops[nb++] = ret;
  body->num_ops = nb;
  return red;
}

// The fusion computing k1's and k2's members and their merged reduce.
static iron_ir_op_t *merged_fusion(mr_ctx_t *c, iron_ir_block_t *blk,
                                   iron_ir_op_t *k1, iron_ir_op_t *k2) {
  iron_ir_op_t *r1 = reduce_root(k1), *r2 = reduce_root(k2);
  uint32_t n1 = r1->num_results, n2 = r2->num_results;
  // Operands: k1's, then k2's that k1 does not read.
  uint32_t nin = k1->num_operands;
  iron_ir_value_t **ins = calloc(k1->num_operands + k2->num_operands + 1,
                                 sizeof(*ins));
  if (!ins) return NULL;
  memcpy(ins, k1->operands, k1->num_operands * sizeof(*ins));
  for (uint32_t k = 0; k < k2->num_operands; ++k) {
    bool seen = false;
    for (uint32_t j = 0; j < nin && !seen; ++j) seen = ins[j] == k2->operands[k];
    if (!seen) ins[nin++] = k2->operands[k];
  }
  // A standalone reduce has no members: its operands map to arguments.
  const iron_ir_block_t *b1 = k1 == r1 ? NULL : &k1->regions[0].blocks[0];
  const iron_ir_block_t *b2 = k2 == r2 ? NULL : &k2->regions[0].blocks[0];
  uint32_t nmem = (b1 ? b1->num_ops : 0) + (b2 ? b2->num_ops : 0) + 2;
  iron_ir_op_t *fop = iron_fusion_edit_op(&c->e, IRON_OP_FUSION, nin, n1 + n2, 1);
  iron_ir_block_t *body =
      fop ? iron_fusion_edit_block(&c->e, &fop->regions[0], nin, nmem) : NULL;
  iron_value_map_t *vm = calloc(1, sizeof(*vm));
  iron_ir_op_t *ret = iron_fusion_edit_op(&c->e, IRON_OP_RETURN, n1 + n2, 0, 0);
  if (!fop || !body || !vm || !ret) {
    free(ins);
    free(vm);
    return NULL;
  }
  fop->loc = k2->loc;
  fop->parent = blk;
  for (uint32_t j = 0; j < nin; ++j) {
    fop->operands[j] = ins[j];
    iron_ir_value_t *arg = iron_fusion_edit_arg(&c->e, body, j, ins[j]->type);
    for (uint32_t k = 0; k < k1->num_operands; ++k)
      if (k1->operands[k] == ins[j])
        iron_value_map_add(vm, b1 ? &b1->args[k] : ins[j], arg);
    for (uint32_t k = 0; k < k2->num_operands; ++k)
      if (k2->operands[k] == ins[j])
        iron_value_map_add(vm, b2 ? &b2->args[k] : ins[j], arg);
  }
  free(ins);
  uint32_t nb = 0;
  for (int s = 0; s < 2; ++s) {
    const iron_ir_block_t *src = s ? b2 : b1;
    for (uint32_t k = 0; src && k + 2 < src->num_ops; ++k) {
      iron_ir_op_t *op = iron_fusion_edit_clone(&c->e, src->ops[k], body, vm);
      if (!op) {
        free(vm);
        return NULL;
      }
      body->ops[nb++] = op;
    }
  }
  iron_ir_op_t *red = merged_reduce(c, r1, r2, body, vm);
  free(vm);
  if (!red) return NULL;
  body->ops[nb++] = red;
  for (uint32_t i = 0; i < n1 + n2; ++i) {
    ret->operands[i] = &red->results[i];
    fop->results[i] = red->results[i];
    fop->results[i].def_op = fop;
    fop->results[i].index = i;
    fop->results[i].id = c->e.f->num_values++;
  }
  ret->loc = red->loc;
  ret->parent = body;
  body->ops[nb++] = ret;
  body->num_ops = nb;
  return fop;
}

// Tries to merge blk->ops[i2] with an earlier sibling; true when it did.
static iron_status_t try_merge(mr_ctx_t *c, iron_ir_block_t *blk, uint32_t i2,
                               bool *out_done) {
  *out_done = false;
  iron_ir_op_t *k2 = blk->ops[i2];
  iron_ir_op_t *r2 = reduce_root(k2);
  if (!r2) return IRON_OK;
  for (uint32_t i1 = i2; i1-- > 0;) {
    iron_ir_op_t *k1 = blk->ops[i1];
    iron_ir_op_t *r1 = reduce_root(k1);
    if (!r1 || !siblings(r1, r2) || !share_input(k1, k2, r1) ||
        r1->num_results + r2->num_results > IRON_MERGE_REDUCES_MAX_RESULTS ||
        k1->num_operands + k2->num_operands + r1->num_results +
                r2->num_results > IRON_FUSE_MAX_OPERANDS)
      continue;
    int64_t at = meeting_place(blk, i1, i2);
    if (at < 0) continue;
    iron_ir_op_t *fop = merged_fusion(c, blk, k1, k2);
    if (!fop) return oom();
    const iron_ir_block_t *fb = &fop->regions[0].blocks[0];
    if (!c->can_fuse(fb->ops[fb->num_ops - 2])) continue;  // (arena garbage)
    iron_ir_value_t *from[2 * IRON_MERGE_REDUCES_MAX_RESULTS];
    uint32_t n = 0;
    for (uint32_t i = 0; i < k1->num_results; ++i) from[n++] = &k1->results[i];
    for (uint32_t i = 0; i < k2->num_results; ++i) from[n++] = &k2->results[i];
    for (uint32_t b = 0; b < c->e.f->body.num_blocks; ++b)
      iron_fusion_edit_replace_uses(&c->e.f->body.blocks[b], from,
                                    fop->results, n);
    // The block without k1 and k2, the merge at the meeting place.
    uint32_t w = 0;
    for (uint32_t i = 0; i < blk->num_ops; ++i) {
      if (i == (uint32_t)at) blk->ops[w++] = fop;
      else if (i != i1 && i != i2) blk->ops[w++] = blk->ops[i];
    }
    blk->num_ops = w;
    c->merged++;
    *out_done = true;
    return IRON_OK;
  }
  return IRON_OK;
}

// One block (its inner blocks are done first: iron_fuse_walk_blocks).
static iron_status_t merge_block(void *arg, iron_ir_block_t *blk) {
  mr_ctx_t *c = arg;
  for (uint32_t i = 0; i < blk->num_ops; ++i) {
    bool done = false;
    IRON_RETURN_IF_ERROR_PLAIN(try_merge(c, blk, i, &done));
    if (done) i = 0;  // the list changed: look again from the start
  }
  return IRON_OK;
}

iron_status_t iron_compiler_merge_reduces(iron_ir_module_t *m,
                                          iron_fuse_predicate_t can_fuse,
                                          int *out_merged) {
  mr_ctx_t c = {.e = {.m = m}, .can_fuse = can_fuse};
  for (uint32_t i = 0; i < m->num_funcs; ++i) {
    c.e.f = &m->funcs[i];
    for (uint32_t b = 0; b < c.e.f->body.num_blocks; ++b)
      IRON_RETURN_IF_ERROR_PLAIN(iron_fuse_walk_blocks(
          &c.e.f->body.blocks[b], can_fuse, merge_block, &c));
  }
  if (out_merged) *out_merged = c.merged;
  return IRON_OK;
}

bool iron_compiler_merge_reduces_on(void) {
  const char *e = getenv("IRON_FUSE_SIBLING_REDUCES");  // compile time only
  return !(e && strcmp(e, "0") == 0);
}
