// Element-wise producer kernels merged into their consumers; see
// merge_producers.h.
#include "compiler/merge_producers.h"

#include <stdlib.h>
#include <string.h>

#include "compiler/fuse_rows.h"
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

// Whether v is one of p's results (by address: a lone broadcast's wrapper
// shares the broadcast's results).
static bool is_result_of(const iron_ir_value_t *v, const iron_ir_op_t *p) {
  return v >= p->results && v < p->results + p->num_results;
}

// Members a producer may have: element-wise ops, broadcasts and constants
// (a plain fusion of fuse.c).
static bool producer_member(const iron_ir_op_t *op) {
  return !op->num_regions &&
         (iron_recompute_elementwise_kind(op->kind) ||
          op->kind == IRON_OP_BROADCAST_IN_DIM || op->kind == IRON_OP_CONSTANT);
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

// Whether row fusion body b (a member reduce over trailing dims) can spread
// the value `spread` (a lone broadcast) itself: a row value over the rows,
// or one element.
static bool row_spread_ok(const iron_ir_block_t *b,
                          const iron_ir_op_t *spread) {
  iron_row_shape_t rs;
  bool found = false;
  for (uint32_t i = 0; i + 1 < b->num_ops && !found; ++i)
    found = b->ops[i]->kind == IRON_OP_REDUCE &&
            iron_row_shape_of_reduce(b->ops[i], &rs);
  if (!found || iron_row_role(&rs, spread->results[0].type) != IRON_ROW_FULL)
    return false;
  return iron_ir_type_num_elements(spread->operands[0]->type) == 1 ||
         iron_row_bcast_row_to_full(&rs, spread);
}

// Whether consumer K reads w (a result of the producer) in a way the
// producer's members can be computed in (merge_producers.h). `spread`: the
// producer is this lone broadcast, which a row fusion may take too.
static bool consumer_ok(const mp_ctx_t *c, const iron_ir_op_t *k,
                        const iron_ir_value_t *w, const iron_ir_op_t *spread) {
  if (k->kind == IRON_OP_REDUCE)
    return k->num_regions == 1 && k->num_operands == 2 * k->num_results &&
           c->can_fuse(k) && reduces_only(k, w);
  const iron_ir_block_t *b = fusion_block(k);
  if (!b) return false;
  uint32_t reduces = 0;
  for (uint32_t i = 0; i + 1 < b->num_ops; ++i)
    reduces += b->ops[i]->kind == IRON_OP_REDUCE;
  bool row = reduces > 1 ||
             (reduces == 1 && b->ops[b->num_ops - 2]->kind != IRON_OP_REDUCE);
  if (row && !(spread && row_spread_ok(b, spread))) return false;
  for (uint32_t i = 0; !row && i + 1 < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    bool last = i + 2 == b->num_ops;
    if (op->kind == IRON_OP_REDUCE
            ? !last
            : op->num_regions ||
                  !(iron_recompute_elementwise_kind(op->kind) ||
                    op->kind == IRON_OP_BROADCAST_IN_DIM ||
                    op->kind == IRON_OP_CONSTANT || op->kind == IRON_OP_IOTA))
      return false;
  }
  const iron_ir_op_t *term = b->ops[b->num_ops - 1];
  for (uint32_t a = 0; a < k->num_operands; ++a) {
    if (k->operands[a] != w) continue;
    const iron_ir_value_t *arg = &b->args[a];
    for (uint32_t t = 0; t < term->num_operands; ++t)
      if (term->operands[t] == arg) return false;  // returned as is
    for (uint32_t i = 0; i + 1 < b->num_ops; ++i) {
      const iron_ir_op_t *op = b->ops[i];
      bool uses = false;
      for (uint32_t o = 0; o < op->num_operands && !uses; ++o)
        uses = op->operands[o] == arg;
      if (!uses) continue;
      if (op->kind == IRON_OP_REDUCE
              ? !reduces_only(op, arg)
              : !iron_recompute_elementwise_kind(op->kind) ||
                    op->num_results != 1 ||
                    !iron_ir_type_same_dims(op->results[0].type, arg->type))
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

// The producer being merged: its block, which results go into their
// consumers, and scratch flags per member.
typedef struct {
  iron_ir_op_t *p;
  const iron_ir_block_t *pb;
  const iron_ir_op_t *term;
  uint32_t nmem;  // members (the ops before the return)
  bool *merge;    // by result: computed in its consumers
  bool *in;       // by member: in the slice being computed (slice())
  bool *arg;      // by argument: read by that slice
  const iron_ir_op_t *spread;  // a lone broadcast that p wraps, or NULL
} producer_t;

// Marks in pr->in the members that the results flagged in want[] are
// computed from, and in pr->arg the arguments they read; returns how many
// members.
static uint32_t slice(producer_t *pr, const bool *want) {
  memset(pr->in, 0, pr->nmem * sizeof(bool));
  memset(pr->arg, 0, pr->pb->num_args * sizeof(bool));
  uint32_t n = 0;
  for (uint32_t r = 0; r < pr->term->num_operands; ++r) {
    const iron_ir_value_t *v = pr->term->operands[r];
    if (want[r] && !v->def_op) pr->arg[v->index] = true;
  }
  for (uint32_t i = pr->nmem; i-- > 0;) {
    const iron_ir_op_t *op = pr->pb->ops[i];
    bool need = false;
    for (uint32_t r = 0; r < pr->term->num_operands && !need; ++r)
      need = want[r] && pr->term->operands[r]->def_op == op;
    for (uint32_t j = i + 1; j < pr->nmem && !need; ++j) {
      if (!pr->in[j]) continue;
      const iron_ir_op_t *u = pr->pb->ops[j];
      for (uint32_t k = 0; k < u->num_operands && !need; ++k)
        need = u->operands[k]->def_op == op;
    }
    if (!need) continue;
    pr->in[i] = true;
    n++;
    for (uint32_t k = 0; k < op->num_operands; ++k)
      if (!op->operands[k]->def_op && op->operands[k]->def_block == pr->pb)
        pr->arg[op->operands[k]->index] = true;
  }
  return n;
}

// The results of the producer that consumer K reads and that are merged,
// into want[]; false when none.
static bool merged_reads(const producer_t *pr, const iron_ir_op_t *k,
                         bool *want) {
  bool any = false;
  for (uint32_t r = 0; r < pr->p->num_results; ++r) {
    want[r] = pr->merge[r] && reads_value(k, &pr->p->results[r]);
    any |= want[r];
  }
  return any;
}

// The bytes of the slice's operands (pr->arg) that K does not read (all of
// them for K = NULL).
static size_t leaf_bytes(const producer_t *pr, const iron_ir_op_t *k) {
  size_t bytes = 0;
  for (uint32_t a = 0; a < pr->pb->num_args; ++a) {
    const iron_ir_value_t *w = pr->p->operands[a];
    bool dup = false;
    for (uint32_t j = 0; j < a && !dup; ++j)
      dup = pr->arg[j] && pr->p->operands[j] == w;
    if (pr->arg[a] && !dup && !(k && reads_value(k, w)))
      bytes += value_bytes(w);
  }
  return bytes;
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

// Adds v to ins[0..*n) unless there.
static void add_input(iron_ir_value_t **ins, uint32_t *n, iron_ir_value_t *v) {
  for (uint32_t j = 0; j < *n; ++j)
    if (ins[j] == v) return;
  ins[(*n)++] = v;
}

// The fusion computing the slice of the producer's members marked in
// pr->in (reading the arguments marked in pr->arg), then K's members (K a
// fusion, a reduce of its own, or NULL: the producer's kept results
// `want[]` returned), K's reads of merged results reading the slice.
static iron_ir_op_t *rebuilt(mp_ctx_t *c, iron_ir_block_t *blk,
                             const producer_t *pr, iron_ir_op_t *k,
                             const bool *want) {
  const iron_ir_op_t *p = pr->p;
  const iron_ir_block_t *pb = pr->pb;
  uint32_t cap = (k ? k->num_operands : 0) + p->num_operands + 1;
  iron_ir_value_t **ins = calloc(cap, sizeof(*ins));
  iron_value_map_t *vm = calloc(1, sizeof(*vm));
  if (!ins || !vm) {
    free(ins);
    free(vm);
    return NULL;
  }
  uint32_t nin = 0;
  for (uint32_t i = 0; k && i < k->num_operands; ++i) {
    iron_ir_value_t *w = k->operands[i];
    if (!(is_result_of(w, p) && pr->merge[w->index])) add_input(ins, &nin, w);
  }
  for (uint32_t a = 0; a < pb->num_args; ++a)
    if (pr->arg[a]) add_input(ins, &nin, p->operands[a]);
  const iron_ir_block_t *kb =
      k && k->kind == IRON_OP_FUSION ? fusion_block(k) : NULL;
  uint32_t nres = 0;
  for (uint32_t r = 0; !k && r < p->num_results; ++r) nres += want[r];
  if (k) nres = k->num_results;
  uint32_t nops = pr->nmem + (kb ? kb->num_ops : 2) + 1;
  iron_ir_op_t *fop = iron_fusion_edit_op(&c->e, IRON_OP_FUSION, nin, nres, 1);
  iron_ir_block_t *body =
      fop ? iron_fusion_edit_block(&c->e, &fop->regions[0], nin, nops) : NULL;
  bool ok = body != NULL;
  for (uint32_t j = 0; ok && j < nin; ++j) {
    fop->operands[j] = ins[j];
    iron_ir_value_t *arg = iron_fusion_edit_arg(&c->e, body, j, ins[j]->type);
    for (uint32_t a = 0; ok && a < pb->num_args; ++a)
      if (pr->arg[a] && p->operands[a] == ins[j])
        ok = iron_value_map_add(vm, &pb->args[a], arg);
    for (uint32_t a = 0; ok && k && a < k->num_operands; ++a)
      if (k->operands[a] == ins[j])
        ok = iron_value_map_add(vm, kb ? &kb->args[a] : ins[j], arg);
  }
  if (body) body->num_ops = 0;
  for (uint32_t i = 0; ok && i < pr->nmem; ++i)
    if (pr->in[i]) ok = append_clone(c, pb->ops[i], body, vm);
  for (uint32_t a = 0; ok && k && a < k->num_operands; ++a) {
    iron_ir_value_t *w = k->operands[a];
    if (!is_result_of(w, p) || !pr->merge[w->index]) continue;
    iron_ir_value_t *pv = iron_value_map_get(vm, pr->term->operands[w->index]);
    ok = iron_value_map_add(vm, kb ? &kb->args[a] : w, pv);
  }
  if (ok && kb) {
    for (uint32_t i = 0; ok && i < kb->num_ops; ++i)
      ok = append_clone(c, kb->ops[i], body, vm);
  } else if (ok) {  // a reduce of its own, or the producer's kept results
    if (k) ok = append_clone(c, k, body, vm);
    iron_ir_op_t *ret =
        ok ? iron_fusion_edit_op(&c->e, IRON_OP_RETURN, nres, 0, 0) : NULL;
    ok = ret != NULL;
    for (uint32_t r = 0, o = 0; ok && r < (k ? k->num_results : p->num_results);
         ++r) {
      if (k)
        ret->operands[o++] = iron_value_map_get(vm, &k->results[r]);
      else if (want[r])
        ret->operands[o++] = iron_value_map_get(vm, pr->term->operands[r]);
    }
    if (ok) {
      ret->parent = body;
      ret->loc = k ? k->loc : pr->term->loc;
      body->ops[body->num_ops++] = ret;
    }
  }
  free(ins);
  free(vm);
  if (!ok) return NULL;
  const iron_ir_op_t *src = k ? k : p;
  fop->loc = src->loc;
  fop->parent = blk;
  for (uint32_t r = 0, o = 0; r < src->num_results; ++r) {
    if (!k && !want[r]) continue;
    fop->results[o] = src->results[r];
    fop->results[o].def_op = fop;
    fop->results[o].index = o;
    fop->results[o].id = c->e.f->num_values++;
    o++;
  }
  return fop;
}

// Every use of `from` (n values) in the function becomes to[].
static iron_status_t redirect(mp_ctx_t *c, const iron_ir_value_t *from,
                              const bool *which, iron_ir_value_t *to,
                              uint32_t n) {
  iron_ir_value_t **f = calloc(n + 1, sizeof(*f));
  if (!f) return oom();
  uint32_t m = 0;
  for (uint32_t r = 0; r < n; ++r)
    if (!which || which[r]) f[m++] = (iron_ir_value_t *)&from[r];
  for (uint32_t b = 0; b < c->e.f->body.num_blocks; ++b)
    iron_fusion_edit_replace_uses(&c->e.f->body.blocks[b], f, to, m);
  free(f);
  return IRON_OK;
}

// Decides which of P's results go into their consumers (pr->merge) and
// whether that moves no more bytes; true when something is merged.
static bool plan_merge(mp_ctx_t *c, const iron_ir_block_t *blk, uint32_t i,
                       producer_t *pr, bool *want) {
  const iron_ir_op_t *p = pr->p;
  size_t largest = 0;
  uint32_t nmerge = 0;
  for (uint32_t r = 0; r < p->num_results; ++r) {
    const iron_ir_value_t *v = &p->results[r];
    bool ok = static_tensor(v->type) && pr->term->operands[r]->def_op;
    bool used = false;
    for (uint32_t j = i + 1; ok && j < blk->num_ops; ++j) {
      const iron_ir_op_t *k = blk->ops[j];
      if (nested_use(k, v))
        ok = false;
      else if (reads_value(k, v))
        used = true, ok = consumer_ok(c, k, v, pr->spread);
    }
    pr->merge[r] = ok && used;
    if (!pr->merge[r]) continue;
    nmerge++;
    if (value_bytes(v) > largest) largest = value_bytes(v);
  }
  if (!nmerge || largest < c->min_bytes) return false;
  // Bytes moved now: the merged results written, and read by each
  // consumer (with P's operand reads when P goes away); after: each
  // consumer's reads of its slice's operands that it does not read.
  size_t before = 0, after = 0;
  for (uint32_t r = 0; r < p->num_results; ++r)
    if (pr->merge[r]) before += value_bytes(&p->results[r]);
  if (nmerge == p->num_results) {
    for (uint32_t a = 0; a < pr->pb->num_args; ++a) pr->arg[a] = true;
    before += leaf_bytes(pr, NULL);
  }
  for (uint32_t j = i + 1; j < blk->num_ops; ++j) {
    const iron_ir_op_t *k = blk->ops[j];
    if (!merged_reads(pr, k, want)) continue;
    if (slice(pr, want) > IRON_RECOMPUTE_MAX_OPS) return false;
    for (uint32_t m = 0; m < pr->nmem; ++m)
      if (pr->in[m] && !producer_member(pr->pb->ops[m])) return false;
    uint32_t nargs = 0;
    for (uint32_t a = 0; a < pr->pb->num_args; ++a) nargs += pr->arg[a];
    if (k->num_operands + nargs + k->num_results > IRON_FUSE_MAX_OPERANDS)
      return false;
    for (uint32_t r = 0; r < p->num_results; ++r)
      if (want[r]) before += value_bytes(&p->results[r]);
    after += leaf_bytes(pr, k);
  }
  return after <= before;
}

// A broadcast of its own that spreads a smaller value (not one that only
// adds unit dims): merged like a fusion of itself (spread_wrapper), into
// plain, reduce and row fusions.
static bool lone_spread(const iron_ir_op_t *op) {
  return op->kind == IRON_OP_BROADCAST_IN_DIM && op->num_operands == 1 &&
         op->num_results == 1 && !op->num_regions &&
         static_tensor(op->results[0].type) &&
         !iron_ir_broadcast_is_reshape(op);
}

// A fusion of broadcast `bc` alone (not placed in any block), whose result
// is bc's own result value.
static iron_ir_op_t *spread_wrapper(mp_ctx_t *c, iron_ir_op_t *bc) {
  iron_ir_op_t *w = iron_fusion_edit_op(&c->e, IRON_OP_FUSION, 1, 0, 1);
  iron_ir_block_t *b =
      w ? iron_fusion_edit_block(&c->e, &w->regions[0], 1, 2) : NULL;
  iron_ir_op_t *ret =
      b ? iron_fusion_edit_op(&c->e, IRON_OP_RETURN, 1, 0, 0) : NULL;
  iron_value_map_t *vm = calloc(1, sizeof(*vm));
  if (!ret || !vm) {
    free(vm);
    return NULL;
  }
  w->operands[0] = bc->operands[0];
  w->num_results = 1;
  w->results = bc->results;
  w->loc = bc->loc;
  w->parent = bc->parent;
  iron_ir_value_t *arg =
      iron_fusion_edit_arg(&c->e, b, 0, bc->operands[0]->type);
  iron_ir_op_t *m = iron_value_map_add(vm, bc->operands[0], arg)
                        ? iron_fusion_edit_clone(&c->e, bc, b, vm)
                        : NULL;
  free(vm);
  if (!m) return NULL;
  ret->operands[0] = &m->results[0];
  ret->parent = b;
  ret->loc = bc->loc;
  b->ops[0] = m;
  b->ops[1] = ret;
  b->num_ops = 2;
  return w;
}

// Merges blk->ops[i] into its consumers when it qualifies; *out_done when
// it did (blk->ops[i] is then replaced or gone).
static iron_status_t try_merge(mp_ctx_t *c, iron_ir_block_t *blk, uint32_t i,
                               bool *out_done) {
  *out_done = false;
  producer_t pr = {.p = blk->ops[i]};
  if (lone_spread(pr.p)) {
    pr.spread = pr.p;
    pr.p = spread_wrapper(c, pr.p);
    if (!pr.p) return oom();
  }
  pr.pb = fusion_block(pr.p);
  if (!pr.pb) return IRON_OK;
  pr.term = pr.pb->ops[pr.pb->num_ops - 1];
  pr.nmem = pr.pb->num_ops - 1;
  for (uint32_t m = 0; m < pr.nmem; ++m)
    if (!producer_member(pr.pb->ops[m]) && pr.pb->ops[m]->kind != IRON_OP_IOTA)
      return IRON_OK;  // a plain fusion only (it may be rebuilt)
  uint32_t nres = pr.p->num_results;
  pr.merge = calloc(nres + 1, sizeof(bool));
  pr.in = calloc(pr.nmem + 1, sizeof(bool));
  pr.arg = calloc(pr.pb->num_args + 1, sizeof(bool));
  bool *want = calloc(nres + 1, sizeof(bool));
  iron_status_t st = IRON_OK;
  if (!pr.merge || !pr.in || !pr.arg || !want) {
    st = oom();
    goto done;
  }
  if (!plan_merge(c, blk, i, &pr, want)) goto done;
  for (uint32_t j = i + 1; j < blk->num_ops && !st; ++j) {
    iron_ir_op_t *k = blk->ops[j];
    if (!merged_reads(&pr, k, want)) continue;
    slice(&pr, want);
    iron_ir_op_t *fop = rebuilt(c, blk, &pr, k, want);
    if (!fop) {
      st = oom();
      break;
    }
    blk->ops[j] = fop;
    st = redirect(c, k->results, NULL, fop->results, k->num_results);
  }
  if (st) goto done;
  // The producer without its merged results, or gone.
  bool keep_any = false;
  for (uint32_t r = 0; r < nres; ++r) keep_any |= (want[r] = !pr.merge[r]);
  if (keep_any) {
    slice(&pr, want);
    iron_ir_op_t *np = rebuilt(c, blk, &pr, NULL, want);
    if (!np) {
      st = oom();
      goto done;
    }
    blk->ops[i] = np;
    st = redirect(c, pr.p->results, want, np->results, nres);
  } else {
    memmove(&blk->ops[i], &blk->ops[i + 1],
            (blk->num_ops - i - 1) * sizeof(blk->ops[0]));
    blk->num_ops--;
  }
  if (!st) {
    c->merged++;
    *out_done = true;
  }
done:
  free(pr.merge);
  free(pr.in);
  free(pr.arg);
  free(want);
  return st;
}

// One block (its inner blocks are done first: iron_fuse_walk_blocks).
static iron_status_t merge_block(void *arg, iron_ir_block_t *blk) {
  mp_ctx_t *c = arg;
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
  mp_ctx_t c = {.e = {.m = m},
                .can_fuse = can_fuse,
                .min_bytes = iron_recompute_min_bytes()};
  for (uint32_t i = 0; i < m->num_funcs; ++i) {
    c.e.f = &m->funcs[i];
    for (uint32_t b = 0; b < c.e.f->body.num_blocks; ++b)
      IRON_RETURN_IF_ERROR_PLAIN(iron_fuse_walk_blocks(
          &c.e.f->body.blocks[b], can_fuse, merge_block, &c));
  }
  if (out_merged) *out_merged = c.merged;
  return IRON_OK;
}

bool iron_compiler_merge_producers_on(void) {
  const char *e = getenv("IRON_FUSE_MERGE_PRODUCERS");  // compile time only
  return !(e && strcmp(e, "0") == 0);
}
