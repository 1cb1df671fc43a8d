// Cheap element-wise values recomputed per consumer; see recompute.h.
#include "compiler/recompute.h"

#include <stdlib.h>
#include <string.h>

static iron_status_t oom(void) {
  return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory while recomputing");
}

bool iron_recompute_cheap_kind(iron_op_kind_t k) {
  switch (k) {
    case IRON_OP_ADD: case IRON_OP_SUBTRACT: case IRON_OP_MULTIPLY:
    case IRON_OP_DIVIDE: case IRON_OP_NEGATE: case IRON_OP_ABS:
    case IRON_OP_MAXIMUM: case IRON_OP_MINIMUM: case IRON_OP_SELECT:
    case IRON_OP_COMPARE: case IRON_OP_CONVERT: case IRON_OP_CLAMP:
    case IRON_OP_AND: case IRON_OP_OR: case IRON_OP_XOR: case IRON_OP_NOT:
    case IRON_OP_BROADCAST_IN_DIM:
      return true;
    default:
      return false;
  }
}

bool iron_recompute_elementwise_kind(iron_op_kind_t k) {
  iron_op_class_t c = iron_op_kind_class(k);
  return c == IRON_OP_CLASS_UNARY || c == IRON_OP_CLASS_BINARY ||
         k == IRON_OP_SELECT || k == IRON_OP_CLAMP || k == IRON_OP_COMPARE ||
         k == IRON_OP_CONVERT;
}

static bool static_tensor(const iron_ir_type_t *t) {
  return t->kind == IRON_TYPE_TENSOR && iron_ir_type_is_static(t);
}

typedef struct {
  iron_ir_module_t *m;
  iron_ir_func_t *f;
  iron_fuse_predicate_t can_fuse;
  uint32_t ids;        // values of the function before the pass
  uint32_t *uses;      // by id: operand slots naming the value, anywhere
  uint32_t *users;     // by id: ops of the value's block using it directly
  uint32_t *slots;     // by id: those ops' operand slots naming it
  bool *bad_user;      // by id: a direct user that is not a fused consumer
  int8_t *expr;        // by id: 0 unknown, 1 cheap expression, -1 not
  bool *seen;          // by id: the first user was passed (walk state)
  // By id - ids: the value each copy was made from.
  iron_ir_value_t **origin;
  uint32_t norigin, origin_cap;
  int copies;
  size_t min_bytes;    // iron_recompute_min_bytes()
} rc_ctx_t;

// Counts every operand slot of `op` and of the ops nested in its regions.
static void count_uses(rc_ctx_t *c, const iron_ir_op_t *op) {
  for (uint32_t i = 0; i < op->num_operands; ++i)
    if (op->operands[i]->id < c->ids) c->uses[op->operands[i]->id]++;
  for (uint32_t r = 0; r < op->num_regions; ++r)
    for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b) {
      const iron_ir_block_t *blk = &op->regions[r].blocks[b];
      for (uint32_t k = 0; k < blk->num_ops; ++k) count_uses(c, blk->ops[k]);
    }
}

// Whether `op` reading operand slot k is a consumer the fusion pass puts
// a copy of the operand into: an element-wise op, or a reduce reading it
// as a reduced operand, that the device fuses.
static bool fused_consumer(const rc_ctx_t *c, const iron_ir_op_t *op,
                           uint32_t k) {
  if (op->num_regions && op->kind != IRON_OP_REDUCE) return false;
  if (op->kind == IRON_OP_REDUCE)
    return k < op->num_operands / 2 && c->can_fuse(op);
  return iron_recompute_elementwise_kind(op->kind) && op->num_results == 1 &&
         c->can_fuse(op);
}

// Whether w is the result of a cheap op of `blk` that the device fuses.
static bool cheap_value(const rc_ctx_t *c, const iron_ir_block_t *blk,
                        const iron_ir_value_t *w) {
  const iron_ir_op_t *d = w->def_op;
  return d && d->parent == blk && d->num_results == 1 && !d->num_regions &&
         iron_recompute_cheap_kind(d->kind) && static_tensor(d->results[0].type) &&
         c->can_fuse(d);
}

// The value a copy was made from (itself for the function's own values).
static iron_ir_value_t *origin_of(const rc_ctx_t *c, iron_ir_value_t *v) {
  if (v->id < c->ids) return v;
  uint32_t k = v->id - c->ids;
  return k < c->norigin ? c->origin[k] : NULL;
}

static bool copyable(rc_ctx_t *c, const iron_ir_block_t *blk,
                     iron_ir_value_t *v);

// Whether operand w is computed inside an expression that reads it: a
// cheap value, not needed in memory anyway (no user but fused consumers)
// and copyable itself. Else the expression reads w as a leaf.
static bool inlined(rc_ctx_t *c, const iron_ir_block_t *blk,
                    iron_ir_value_t *w) {
  iron_ir_value_t *o = origin_of(c, w);
  return o && cheap_value(c, blk, w) && !c->bad_user[o->id] &&
         copyable(c, blk, o);
}

// The ops of v's expression (v's op first, then the expressions of its
// inlined operands of its size or scalars; each op once) into ops[], at most
// IRON_RECOMPUTE_MAX_OPS; false when it is larger or v is not cheap.
static bool collect(rc_ctx_t *c, const iron_ir_block_t *blk,
                    iron_ir_value_t *v, iron_ir_op_t **ops, uint32_t *n) {
  if (!cheap_value(c, blk, v)) return false;
  iron_ir_op_t *op = v->def_op;
  for (uint32_t i = 0; i < *n; ++i)
    if (ops[i] == op) return true;
  if (*n == IRON_RECOMPUTE_MAX_OPS) return false;
  ops[(*n)++] = op;
  const int64_t count = iron_ir_type_num_elements(op->results[0].type);
  for (uint32_t k = 0; k < op->num_operands; ++k) {
    iron_ir_value_t *w = op->operands[k];
    // A broadcast's smaller operand is computed once (per channel, per
    // row ...) and read as a leaf; scalars are recomputed (fuse.c's
    // scalar feeds join the consumer's kernel when only it reads them).
    int64_t wc = w->type->kind == IRON_TYPE_TENSOR
                     ? iron_ir_type_num_elements(w->type) : -1;
    if ((wc == count || wc == 1) && inlined(c, blk, w) &&
        !collect(c, blk, w, ops, n))
      return false;
  }
  return true;
}

static bool in_ops(iron_ir_op_t *const *ops, uint32_t n,
                   const iron_ir_op_t *op) {
  for (uint32_t i = 0; i < n; ++i)
    if (ops[i] == op) return true;
  return false;
}

// Whether v's expression may be copied (recompute.h): small enough, and
// its leaves of v's size no more bytes than v. Memoized by value.
static bool copyable(rc_ctx_t *c, const iron_ir_block_t *blk,
                     iron_ir_value_t *v) {
  iron_ir_value_t *o = origin_of(c, v);
  if (!o) return false;
  if (c->expr[o->id]) return c->expr[o->id] > 0;
  c->expr[o->id] = -1;  // (an operand never reaches back to v)
  iron_ir_op_t *ops[IRON_RECOMPUTE_MAX_OPS];
  uint32_t n = 0;
  bool ok = collect(c, blk, o, ops, &n);
  size_t vbytes = 0, leaf_bytes = 0;
  ok = ok && iron_ir_type_byte_size(o->type, &vbytes);
  int64_t count = ok ? iron_ir_type_num_elements(o->type) : 0;
  const iron_ir_value_t *leaves[4 * IRON_RECOMPUTE_MAX_OPS];
  uint32_t nl = 0;
  for (uint32_t i = 0; ok && i < n; ++i)
    for (uint32_t k = 0; ok && k < ops[i]->num_operands; ++k) {
      const iron_ir_value_t *w = ops[i]->operands[k];
      if (w->def_op && in_ops(ops, n, w->def_op)) continue;
      bool dup = false;
      for (uint32_t j = 0; j < nl && !dup; ++j) dup = leaves[j] == w;
      if (dup) continue;
      if (nl < 4 * IRON_RECOMPUTE_MAX_OPS) leaves[nl++] = w;
      size_t b = 0;
      if (w->type->kind != IRON_TYPE_TENSOR ||
          iron_ir_type_num_elements(w->type) != count)
        continue;  // a broadcast's (smaller) operand
      ok = iron_ir_type_byte_size(w->type, &b);
      leaf_bytes += b;
    }
  ok = ok && leaf_bytes <= vbytes;
  c->expr[o->id] = ok ? 1 : -1;
  return ok;
}

typedef struct {
  iron_ir_value_t *from[IRON_RECOMPUTE_MAX_OPS], *to[IRON_RECOMPUTE_MAX_OPS];
  uint32_t n;
} copy_map_t;

// Appends to out[] a copy of v's expression (ops[0..n), collected by
// `collect`), operands before users; returns the copy of v.
static iron_ir_value_t *copy_value(rc_ctx_t *c, iron_ir_value_t *v,
                                   iron_ir_op_t *const *ops, uint32_t n,
                                   copy_map_t *map, iron_ir_block_t *into,
                                   iron_ir_op_t **out, uint32_t *nout) {
  if (!v->def_op || !in_ops(ops, n, v->def_op)) return v;  // a leaf
  for (uint32_t i = 0; i < map->n; ++i)
    if (map->from[i] == v) return map->to[i];
  const iron_ir_op_t *src = v->def_op;
  iron_arena_t *a = &c->m->arena;
  iron_ir_op_t *op = iron_arena_alloc(a, sizeof(*op));
  iron_ir_value_t **operands = iron_arena_alloc_array(
      a, src->num_operands + 1, sizeof(iron_ir_value_t *));
  iron_ir_value_t *res = iron_arena_alloc(a, sizeof(iron_ir_value_t));
  if (!op || !operands || !res || map->n == IRON_RECOMPUTE_MAX_OPS)
    return NULL;
  for (uint32_t k = 0; k < src->num_operands; ++k) {
    operands[k] = copy_value(c, src->operands[k], ops, n, map, into, out, nout);
    if (!operands[k]) return NULL;
  }
  *op = *src;
  op->parent = into;
  op->operands = operands;
  op->results = res;
  *res = src->results[0];
  res->def_op = op;
  res->id = c->f->num_values++;
  if (res->id - c->ids >= c->origin_cap) {
    uint32_t cap = c->origin_cap ? 2 * c->origin_cap : 64;
    while (res->id - c->ids >= cap) cap *= 2;
    iron_ir_value_t **o = realloc(c->origin, cap * sizeof(*o));
    if (!o) return NULL;
    memset(o + c->origin_cap, 0, (cap - c->origin_cap) * sizeof(*o));
    c->origin = o;
    c->origin_cap = cap;
  }
  c->origin[res->id - c->ids] = origin_of(c, v);
  if (res->id - c->ids >= c->norigin) c->norigin = res->id - c->ids + 1;
  map->from[map->n] = v;
  map->to[map->n++] = res;
  out[(*nout)++] = op;
  return res;
}

// Appends a copy of v's expression to out[]; returns the copy of v (NULL:
// out of memory).
static iron_ir_value_t *copy_expr(rc_ctx_t *c, const iron_ir_block_t *blk,
                                  iron_ir_value_t *v, iron_ir_block_t *into,
                                  iron_ir_op_t **out, uint32_t *nout) {
  iron_ir_op_t *ops[IRON_RECOMPUTE_MAX_OPS];
  uint32_t n = 0;
  if (!collect(c, blk, v, ops, &n)) return NULL;
  copy_map_t map = {.n = 0};
  return copy_value(c, v, ops, n, &map, into, out, nout);
}


// One block (its inner blocks are done first: iron_fuse_walk_blocks).
static iron_status_t rewrite_block(void *arg, iron_ir_block_t *blk) {
  rc_ctx_t *c = arg;
  // Direct users in this block, and whether each is a fused consumer.
  for (uint32_t i = 0; i < blk->num_ops; ++i) {
    const iron_ir_op_t *op = blk->ops[i];
    for (uint32_t k = 0; k < op->num_operands; ++k) {
      const iron_ir_value_t *v = op->operands[k];
      uint32_t id = v->id;
      if (id >= c->ids || !v->def_op || v->def_op->parent != blk) continue;
      bool first = true;
      for (uint32_t j = 0; j < k && first; ++j)
        first = op->operands[j] != v;
      if (first) c->users[id]++;
      c->slots[id]++;
      if (!fused_consumer(c, op, k)) c->bad_user[id] = true;
    }
  }
  // Upper bound of the new list: every user may take a copy of each of its
  // operands' expressions.
  size_t cap = blk->num_ops;
  for (uint32_t i = 0; i < blk->num_ops; ++i)
    cap += (size_t)blk->ops[i]->num_operands * IRON_RECOMPUTE_MAX_OPS;
  iron_ir_op_t **out = calloc(cap + 1, sizeof(*out));
  if (!out) return oom();
  uint32_t nout = 0;
  int before = c->copies;
  for (uint32_t i = 0; i < blk->num_ops; ++i) {
    iron_ir_op_t *op = blk->ops[i];
    for (uint32_t k = 0; k < op->num_operands; ++k) {
      iron_ir_value_t *v = op->operands[k];
      uint32_t id = v->id;
      if (id >= c->ids || !v->def_op || v->def_op->parent != blk) continue;
      bool first = true;  // each distinct operand once
      for (uint32_t j = 0; j < k && first; ++j)
        first = op->operands[j] != v;
      if (!first) continue;
      size_t vbytes = 0;
      if (c->users[id] < 2 || c->bad_user[id] ||
          c->slots[id] != c->uses[id] ||
          !iron_ir_type_byte_size(v->type, &vbytes) ||
          vbytes < c->min_bytes)
        continue;
      if (!c->seen[id]) {
        c->seen[id] = true;  // the first user keeps v
        continue;
      }
      if (!copyable(c, blk, v)) continue;
      iron_ir_value_t *cv = copy_expr(c, blk, v, blk, out, &nout);
      if (!cv) {
        free(out);
        return oom();
      }
      for (uint32_t j = k; j < op->num_operands; ++j)
        if (op->operands[j] == v) op->operands[j] = cv;
      c->copies++;
    }
    out[nout++] = op;
  }
  if (c->copies != before) {
    iron_ir_op_t **ops =
        iron_arena_alloc_array(&c->m->arena, nout + 1, sizeof(*ops));
    if (!ops) {
      free(out);
      return oom();
    }
    memcpy(ops, out, nout * sizeof(*ops));
    blk->ops = ops;
    blk->num_ops = nout;
  }
  free(out);
  return IRON_OK;
}

iron_status_t iron_compiler_recompute(iron_ir_module_t *m,
                                      iron_fuse_predicate_t can_fuse,
                                      int *out_copies) {
  rc_ctx_t c = {.m = m, .can_fuse = can_fuse,
               .min_bytes = iron_recompute_min_bytes()};
  iron_status_t st = IRON_OK;
  for (uint32_t i = 0; i < m->num_funcs && !st; ++i) {
    c.f = &m->funcs[i];
    c.ids = c.f->num_values;
    c.uses = calloc(c.ids + 1, sizeof(*c.uses));
    c.users = calloc(c.ids + 1, sizeof(*c.users));
    c.slots = calloc(c.ids + 1, sizeof(*c.slots));
    c.bad_user = calloc(c.ids + 1, sizeof(*c.bad_user));
    c.expr = calloc(c.ids + 1, sizeof(*c.expr));
    c.seen = calloc(c.ids + 1, sizeof(*c.seen));
    if (!c.uses || !c.users || !c.slots || !c.bad_user || !c.expr || !c.seen)
      st = oom();
    for (uint32_t b = 0; !st && b < c.f->body.num_blocks; ++b)
      for (uint32_t k = 0; k < c.f->body.blocks[b].num_ops; ++k)
        count_uses(&c, c.f->body.blocks[b].ops[k]);
    for (uint32_t b = 0; !st && b < c.f->body.num_blocks; ++b)
      st = iron_fuse_walk_blocks(&c.f->body.blocks[b], can_fuse, rewrite_block,
                                 &c);
    free(c.uses);
    free(c.users);
    free(c.slots);
    free(c.bad_user);
    free(c.expr);
    free(c.seen);
    free(c.origin);
    c.origin = NULL;
    c.norigin = c.origin_cap = 0;
  }
  if (!st && out_copies) *out_copies = c.copies;
  return st;
}

size_t iron_recompute_min_bytes(void) {
  const char *e = getenv("IRON_FUSE_MIN_COPY_BYTES");  // compile time only
  if (!e || !*e) return IRON_RECOMPUTE_MIN_BYTES;
  char *end = NULL;
  unsigned long long v = strtoull(e, &end, 10);
  return end && *end == '\0' ? (size_t)v : IRON_RECOMPUTE_MIN_BYTES;
}

bool iron_compiler_recompute_on(void) {
  const char *e = getenv("IRON_FUSE_RECOMPUTE");  // compile time only
  return !(e && strcmp(e, "0") == 0);
}
