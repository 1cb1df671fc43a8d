// Element-wise producer kernels merged into their consumers; see
// merge_producers.h.
#include "compiler/merge_producers.h"

#include <stdlib.h>
#include <string.h>


#include "compiler/fusion_edit.h"
#include "compiler/recompute.h"

typedef struct {
  iron_fusion_edit_t e;  // the module and the function being edited
  iron_fuse_predicate_t can_fuse;
  int merged;
  size_t min_bytes;  // iron_recompute_min_bytes()
} mp_ctx_t;

static iron_status_t oom(void) {
  return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory while merging producers");
}

static const iron_ir_block_t *fusion_block(const iron_ir_op_t *op) {
  if (op->kind != IRON_OP_FUSION || op->num_regions != 1 ||
      op->regions[0].num_blocks != 1)
    return NULL;
  const iron_ir_block_t *b = &op->regions[0].blocks[0];
  if (b->num_ops == 0 || b->num_args != op->num_operands) return NULL;
  const iron_ir_op_t *term = b->ops[b->num_ops - 1];
  if (term->kind != IRON_OP_RETURN || term->num_operands != op->num_results)
    return NULL;
  return b;
}

static bool static_tensor(const iron_ir_type_t *t) {
  return t->kind == IRON_TYPE_TENSOR && iron_ir_type_is_static(t);
}

static size_t value_bytes(const iron_ir_value_t *v) {
  size_t b = 0;
  return iron_ir_type_byte_size(v->type, &b) ? b : 0;
}

// Whether P may be merged into its consumers: a fusion of cheap members
// with a result of at least `min_bytes`.
static bool producer_ok(const iron_ir_op_t *p, size_t min_bytes) {
  const iron_ir_block_t *b = fusion_block(p);
  if (!b || b->num_ops - 1 > IRON_RECOMPUTE_MAX_OPS) return false;
  size_t largest = 0;
  for (uint32_t r = 0; r < p->num_results; ++r) {
    if (!static_tensor(p->results[r].type)) return false;
    size_t bytes = value_bytes(&p->results[r]);
    if (bytes > largest) largest = bytes;
  }
  if (largest < min_bytes) return false;
  for (uint32_t i = 0; i + 1 < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    if (op->num_regions ||
        !(iron_recompute_cheap_kind(op->kind) || op->kind == IRON_OP_CONSTANT))
      return false;
  }
  return true;
}

static bool is_result_of(const iron_ir_value_t *v, const iron_ir_op_t *p) {
  return v->def_op == p;
}

static bool elementwise_kind(iron_op_kind_t k) {
  iron_op_class_t c = iron_op_kind_class(k);
  return c == IRON_OP_CLASS_UNARY || c == IRON_OP_CLASS_BINARY ||
         k == IRON_OP_SELECT || k == IRON_OP_CLAMP || k == IRON_OP_COMPARE ||
         k == IRON_OP_CONVERT;
}

// Whether red reads w only as reduced operands of w's dims.
static bool reduces_only(const iron_ir_op_t *red, const iron_ir_value_t *w) {
  uint32_t n = red->num_operands / 2;
  for (uint32_t k = 0; k < red->num_operands; ++k)
    if (red->operands[k] == w &&
        (k >= n || !iron_ir_type_same_dims(red->operands[k]->type, w->type)))
      return false;
  return true;
}

// Whether consumer K reads P's results in a way P's members can be
// computed in (merge_producers.h).
static bool consumer_ok(const mp_ctx_t *c, const iron_ir_op_t *k,
                        const iron_ir_op_t *p) {
  if (k->kind == IRON_OP_REDUCE) {
    if (k->num_regions != 1 || k->num_operands != 2 * k->num_results ||
        !c->can_fuse(k))
      return false;
    for (uint32_t r = 0; r < p->num_results; ++r)
      if (!reduces_only(k, &p->results[r])) return false;
    return true;
  }
  const iron_ir_block_t *b = fusion_block(k);
  if (!b) return false;
  for (uint32_t i = 0; i + 1 < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    bool last = i + 2 == b->num_ops;
    if (op->kind == IRON_OP_REDUCE ? !last
        : op->num_regions || !(elementwise_kind(op->kind) ||
                               op->kind == IRON_OP_BROADCAST_IN_DIM ||
                               op->kind == IRON_OP_CONSTANT ||
                               op->kind == IRON_OP_IOTA))
      return false;
  }
  const iron_ir_op_t *term = b->ops[b->num_ops - 1];
  for (uint32_t a = 0; a < k->num_operands; ++a) {
    if (!is_result_of(k->operands[a], p)) continue;
    const iron_ir_value_t *w = &b->args[a];
    for (uint32_t t = 0; t < term->num_operands; ++t)
      if (term->operands[t] == w) return false;  // V returned as is
    for (uint32_t i = 0; i + 1 < b->num_ops; ++i) {
      const iron_ir_op_t *op = b->ops[i];
      bool uses = false;
      for (uint32_t o = 0; o < op->num_operands && !uses; ++o)
        uses = op->operands[o] == w;
      if (!uses) continue;
      if (op->kind == IRON_OP_REDUCE ? !reduces_only(op, w)
          : !elementwise_kind(op->kind) || op->num_results != 1 ||
                !iron_ir_type_same_dims(op->results[0].type, w->type))
        return false;
    }
  }
  return true;
}

static bool reads_value(const iron_ir_op_t *op, const iron_ir_value_t *v) {
  for (uint32_t k = 0; k < op->num_operands; ++k)
    if (op->operands[k] == v) return true;
  return false;
}

// Whether an op nested in op's regions reads v.
static bool nested_use(const iron_ir_op_t *op, const iron_ir_value_t *v) {
  for (uint32_t r = 0; r < op->num_regions; ++r)
    for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b) {
      const iron_ir_block_t *blk = &op->regions[r].blocks[b];
      for (uint32_t i = 0; i < blk->num_ops; ++i)
        if (reads_value(blk->ops[i], v) || nested_use(blk->ops[i], v))
          return true;
    }
  return false;
}

// The bytes consumer K would read for P's members: P's operands that K
// does not read (all of them for K = NULL).
static size_t extra_bytes(const iron_ir_op_t *p, const iron_ir_op_t *k) {
  size_t extra = 0;
  for (uint32_t i = 0; i < p->num_operands; ++i) {
    const iron_ir_value_t *w = p->operands[i];
    bool dup = false;
    for (uint32_t j = 0; j < i && !dup; ++j) dup = p->operands[j] == w;
    if (!dup && !(k && reads_value(k, w))) extra += value_bytes(w);
  }
  return extra;
}

// The bytes of P's results that K reads.
static size_t saved_bytes(const iron_ir_op_t *p, const iron_ir_op_t *k) {
  size_t saved = 0;
  for (uint32_t r = 0; r < p->num_results; ++r)
    if (reads_value(k, &p->results[r])) saved += value_bytes(&p->results[r]);
  return saved;
}

// Operands of K and P merged: K's but P's results, then P's that K does
// not read.
static uint32_t merged_inputs(const iron_ir_op_t *p, const iron_ir_op_t *k,
                              iron_ir_value_t **ins) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < k->num_operands; ++i)
    if (!is_result_of(k->operands[i], p)) ins[n++] = k->operands[i];
  for (uint32_t i = 0; i < p->num_operands; ++i) {
    bool seen = false;
    for (uint32_t j = 0; j < n && !seen; ++j) seen = ins[j] == p->operands[i];
    if (!seen) ins[n++] = p->operands[i];
  }
  return n;
}

// Appends a clone of `src` (regions shared with src, which is dropped) to
// body; false when out of memory.
static bool append_clone(mp_ctx_t *c, const iron_ir_op_t *src,
                         iron_ir_block_t *body, iron_value_map_t *vm) {
  iron_ir_op_t *op = iron_fusion_edit_clone(&c->e, src, body, vm);
  if (!op) return false;
  for (uint32_t r = 0; r < op->num_regions; ++r) op->regions[r].parent = op;
  body->ops[body->num_ops++] = op;
  return true;
}

// The fusion computing P's members, then K's (K a fusion or a reduce of
// its own), K's uses of P's results reading P's members.
static iron_ir_op_t *merged(mp_ctx_t *c, iron_ir_block_t *blk,
                            const iron_ir_op_t *p, iron_ir_op_t *k) {
  uint32_t cap = k->num_operands + p->num_operands + 1;
  iron_ir_value_t **ins = calloc(cap, sizeof(*ins));
  iron_value_map_t *vm = calloc(1, sizeof(*vm));
  if (!ins || !vm) {
    free(ins);
    free(vm);
    return NULL;
  }
  uint32_t nin = merged_inputs(p, k, ins);
  const iron_ir_block_t *pb = fusion_block(p);
  const iron_ir_block_t *kb = k->kind == IRON_OP_FUSION ? fusion_block(k) : NULL;
  uint32_t nops = pb->num_ops + (kb ? kb->num_ops : 2);
  iron_ir_op_t *fop =
      iron_fusion_edit_op(&c->e, IRON_OP_FUSION, nin, k->num_results, 1);
  iron_ir_block_t *body =
      fop ? iron_fusion_edit_block(&c->e, &fop->regions[0], nin, nops) : NULL;
  bool ok = body != NULL;
  for (uint32_t j = 0; ok && j < nin; ++j) {
    fop->operands[j] = ins[j];
    iron_ir_value_t *arg = iron_fusion_edit_arg(&c->e, body, j, ins[j]->type);
    for (uint32_t a = 0; ok && a < p->num_operands; ++a)
      if (p->operands[a] == ins[j])
        ok = iron_value_map_add(vm, &pb->args[a], arg);
    for (uint32_t a = 0; ok && a < k->num_operands; ++a)
      if (k->operands[a] == ins[j])
        ok = iron_value_map_add(vm, kb ? &kb->args[a] : ins[j], arg);
  }
  body->num_ops = 0;
  for (uint32_t i = 0; ok && i + 1 < pb->num_ops; ++i)
    ok = append_clone(c, pb->ops[i], body, vm);
  const iron_ir_op_t *pterm = pb->ops[pb->num_ops - 1];
  for (uint32_t a = 0; ok && a < k->num_operands; ++a) {
    iron_ir_value_t *w = k->operands[a];
    if (!is_result_of(w, p)) continue;
    iron_ir_value_t *pv = iron_value_map_get(vm, pterm->operands[w->index]);
    ok = iron_value_map_add(vm, kb ? &kb->args[a] : w, pv);
  }
  if (kb) {
    for (uint32_t i = 0; ok && i < kb->num_ops; ++i)
      ok = append_clone(c, kb->ops[i], body, vm);
  } else if (ok) {  // a reduce of its own, then the return of its results
    ok = append_clone(c, k, body, vm);
    iron_ir_op_t *ret =
        ok ? iron_fusion_edit_op(&c->e, IRON_OP_RETURN, k->num_results, 0, 0)
           : NULL;
    ok = ret != NULL;
    for (uint32_t r = 0; ok && r < k->num_results; ++r)
      ret->operands[r] = iron_value_map_get(vm, &k->results[r]);
    if (ok) {
      ret->parent = body;
      ret->loc = k->loc;
      body->ops[body->num_ops++] = ret;
    }
  }
  free(ins);
  free(vm);
  if (!ok) return NULL;
  fop->loc = k->loc;
  fop->parent = blk;
  for (uint32_t r = 0; r < k->num_results; ++r) {
    fop->results[r] = k->results[r];
    fop->results[r].def_op = fop;
    fop->results[r].id = c->e.f->num_values++;
  }
  return fop;
}

// Whether op reads a result of p, directly or in its regions.
static bool reads_result(const iron_ir_op_t *op, const iron_ir_op_t *p,
                         bool nested) {
  for (uint32_t r = 0; r < p->num_results; ++r)
    if (nested ? nested_use(op, &p->results[r])
               : reads_value(op, &p->results[r]))
      return true;
  return false;
}

// Merges blk->ops[i] into its consumers when it qualifies; *out_done when
// it did (blk->ops[i] is then gone).
static iron_status_t try_merge(mp_ctx_t *c, iron_ir_block_t *blk, uint32_t i,
                               bool *out_done) {
  *out_done = false;
  iron_ir_op_t *p = blk->ops[i];
  if (!producer_ok(p, c->min_bytes)) return IRON_OK;
  // Bytes moved for P now: its kernel's reads and writes, and its
  // consumers' reads of its results; after: the consumers' reads of P's
  // operands they do not read already.
  size_t before = extra_bytes(p, NULL), after = 0;
  for (uint32_t r = 0; r < p->num_results; ++r)
    before += value_bytes(&p->results[r]);
  uint32_t users = 0;
  for (uint32_t j = i + 1; j < blk->num_ops; ++j) {
    const iron_ir_op_t *k = blk->ops[j];
    if (reads_result(k, p, true)) return IRON_OK;
    if (!reads_result(k, p, false)) continue;
    if (!consumer_ok(c, k, p) ||
        k->num_operands + p->num_operands + k->num_results >
            IRON_FUSE_MAX_OPERANDS)
      return IRON_OK;
    before += saved_bytes(p, k);
    after += extra_bytes(p, k);
    users++;
  }
  if (!users || after > before) return IRON_OK;
  for (uint32_t j = i + 1; j < blk->num_ops; ++j) {
    iron_ir_op_t *k = blk->ops[j];
    if (!reads_result(k, p, false)) continue;
    iron_ir_op_t *fop = merged(c, blk, p, k);
    if (!fop) return oom();
    blk->ops[j] = fop;
    iron_ir_value_t **from = calloc(k->num_results + 1, sizeof(*from));
    if (!from) return oom();
    for (uint32_t r = 0; r < k->num_results; ++r) from[r] = &k->results[r];
    for (uint32_t b = 0; b < c->e.f->body.num_blocks; ++b)
      iron_fusion_edit_replace_uses(&c->e.f->body.blocks[b], from,
                                    fop->results, k->num_results);
    free(from);
  }
  memmove(&blk->ops[i], &blk->ops[i + 1],
          (blk->num_ops - i - 1) * sizeof(blk->ops[0]));
  blk->num_ops--;
  c->merged++;
  *out_done = true;
  return IRON_OK;
}

static iron_status_t walk_block(mp_ctx_t *c, iron_ir_block_t *blk) {
  for (uint32_t i = 0; i < blk->num_ops; ++i) {
    iron_ir_op_t *op = blk->ops[i];
    if (!iron_fuse_enters_regions(op, c->can_fuse)) continue;
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b)
        IRON_RETURN_IF_ERROR_PLAIN(walk_block(c, &op->regions[r].blocks[b]));
  }
  // Sweeps until one merges nothing: a merge can make an earlier
  // producer's consumers mergeable.
  for (bool again = true; again;) {
    again = false;
    for (uint32_t i = 0; i < blk->num_ops;) {
      bool done = false;
      IRON_RETURN_IF_ERROR_PLAIN(try_merge(c, blk, i, &done));
      again |= done;
      if (!done) ++i;  // else blk->ops[i] is the next op
    }
  }
  return IRON_OK;
}

iron_status_t iron_compiler_merge_producers(iron_ir_module_t *m,
                                            iron_fuse_predicate_t can_fuse,
                                            int *out_merged) {
  mp_ctx_t c = {.e = {.m = m}, .can_fuse = can_fuse,
                .min_bytes = iron_recompute_min_bytes()};
  for (uint32_t i = 0; i < m->num_funcs; ++i) {
    c.e.f = &m->funcs[i];
    for (uint32_t b = 0; b < c.e.f->body.num_blocks; ++b)
      IRON_RETURN_IF_ERROR_PLAIN(walk_block(&c, &c.e.f->body.blocks[b]));
  }
  if (out_merged) *out_merged = c.merged;
  return IRON_OK;
}

bool iron_compiler_merge_producers_on(void) {
  const char *e = getenv("IRON_FUSE_MERGE_PRODUCERS");  // compile time only
  return !(e && strcmp(e, "0") == 0);
}
