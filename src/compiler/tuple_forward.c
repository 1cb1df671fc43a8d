#include "compiler/tuple_forward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint32_t num_values;
  iron_ir_value_t **replace;  // per value id: what uses read instead, or NULL
  uint32_t *uses;             // per value id, after rewriting
  bool changed;
} tuple_ctx_t;

static iron_ir_value_t *tuple_resolve(const tuple_ctx_t *c,
                                      iron_ir_value_t *v) {
  while (v->id < c->num_values && c->replace[v->id] != NULL)
    v = c->replace[v->id];
  return v;
}

static iron_status_t tuple_rewrite_block(tuple_ctx_t *c, iron_ir_block_t *blk);

static iron_status_t tuple_rewrite_op(tuple_ctx_t *c, iron_ir_op_t *op) {
  for (uint32_t i = 0; i < op->num_operands; ++i)
    op->operands[i] = tuple_resolve(c, op->operands[i]);
  for (uint32_t r = 0; r < op->num_regions; ++r)
    for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b)
      IRON_RETURN_IF_ERROR_PLAIN(
          tuple_rewrite_block(c, &op->regions[r].blocks[b]));
  if (op->kind != IRON_OP_GET_TUPLE_ELEMENT || op->num_operands != 1 ||
      op->num_results != 1)
    return IRON_OK;
  const iron_ir_op_t *def = op->operands[0]->def_op;
  if (def == NULL || def->kind != IRON_OP_TUPLE) return IRON_OK;
  int64_t index = -1;
  if (!iron_ir_attr_as_i64(iron_ir_op_attr(op, "index"), &index) ||
      index < 0 || index >= (int64_t)def->num_operands)
    return iron_ir_op_unimplemented(op, "with index %lld of a %u-tuple",
                                    (long long)index, def->num_operands);
  if (op->results[0].id < c->num_values) {
    c->replace[op->results[0].id] = def->operands[index];
    c->changed = true;
  }
  return IRON_OK;
}

static iron_status_t tuple_rewrite_block(tuple_ctx_t *c, iron_ir_block_t *blk) {
  for (uint32_t k = 0; k < blk->num_ops; ++k)
    IRON_RETURN_IF_ERROR_PLAIN(tuple_rewrite_op(c, blk->ops[k]));
  return IRON_OK;
}

static void tuple_count_uses(tuple_ctx_t *c, const iron_ir_block_t *blk) {
  for (uint32_t k = 0; k < blk->num_ops; ++k) {
    const iron_ir_op_t *op = blk->ops[k];
    for (uint32_t i = 0; i < op->num_operands; ++i)
      if (op->operands[i]->id < c->num_values) c->uses[op->operands[i]->id]++;
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b)
        tuple_count_uses(c, &op->regions[r].blocks[b]);
  }
}

// Drops forwarded get_tuple_elements, then tuples nobody reads any more.
// Returns how many ops it removed, nested regions included.
static uint32_t tuple_remove_dead(tuple_ctx_t *c, iron_ir_block_t *blk) {
  uint32_t kept = 0, removed = 0;
  for (uint32_t k = 0; k < blk->num_ops; ++k) {
    iron_ir_op_t *op = blk->ops[k];
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b)
        removed += tuple_remove_dead(c, &op->regions[r].blocks[b]);
    bool dead = false;
    if ((op->kind == IRON_OP_GET_TUPLE_ELEMENT || op->kind == IRON_OP_TUPLE) &&
        op->num_results == 1 && op->results[0].id < c->num_values)
      dead = c->uses[op->results[0].id] == 0 &&
             (op->kind == IRON_OP_TUPLE ||
              c->replace[op->results[0].id] != NULL);
    if (dead)
      removed++;
    else
      blk->ops[kept++] = op;
  }
  blk->num_ops = kept;
  return removed;
}

// async_start/async_done (jax's *_start().done() collectives): on one
// device the asynchronous computation is just its region, run in place.
// async_start's region ops move in front of it with their block arguments
// bound to its operands, async_start becomes a tuple of the region's
// results (the future), and async_done's result reads that tuple or its
// only element. The tuple pass below then removes both.
static bool is_named(const iron_ir_op_t *op, const char *name) {
  return op->kind == IRON_OP_UNKNOWN && op->name && strcmp(op->name, name) == 0;
}

// jax 0.11.2 hands its asynchronous collectives to the plugin as custom
// calls: @"all-gather-start"(x) {mhlo.frontend_attributes =
// {async_collective_config = "<JSON>"}} and @"all-gather-done"(start), and
// likewise all-reduce, reduce-scatter, all-to-all and collective-permute.
// On one device each of them hands its operand on unchanged when the
// configuration names this device alone: every replica group is [0], or
// there are none (one group of all devices: all_gather/psum/psum_scatter/
// all_to_all of one participant), and
// collective-permute's pairs are all [0, 0]. Anything else (a group of
// several devices, a permutation that leaves this device without a source:
// XLA gives it zeros) is refused by name.
static const char *const kAsyncCollectives[] = {
    "all-gather", "all-reduce", "reduce-scatter", "all-to-all",
    "collective-permute"};

// Which async collective custom call `op` is (index into kAsyncCollectives),
// *out_done for its "-done" half; -1 when it is none.
static int async_collective(const iron_ir_op_t *op, bool *out_done) {
  if (op->kind != IRON_OP_CUSTOM_CALL) return -1;
  const char *t = iron_ir_op_string(op, "call_target_name");
  if (t == NULL) return -1;
  size_t n = strlen(t);
  for (int k = 0; k < (int)(sizeof(kAsyncCollectives) / sizeof(char *));
       ++k) {
    size_t m = strlen(kAsyncCollectives[k]);
    if (n <= m || strncmp(t, kAsyncCollectives[k], m) != 0) continue;
    if (strcmp(t + m, "-start") == 0 || strcmp(t + m, "-done") == 0) {
      *out_done = t[m + 1] == 'd';
      return k;
    }
  }
  return -1;
}

// The integer lists of `key`'s value in the JSON text (a list of lists of
// integers, e.g. "replica_groups": [[0]]): true when it is there, parses,
// and every inner list holds only the device's index 0 and has `width`
// entries (0: any number of them, at least one); no list at all is
// accepted when `empty_ok` (replica_groups: [] is one group of every
// device, here the one).
static bool json_lists_only_zero(const char *json, size_t len,
                                 const char *key, size_t width,
                                 bool empty_ok) {
  char quoted[48];
  snprintf(quoted, sizeof(quoted), "\"%s\"", key);
  size_t kl = strlen(quoted);
  const char *p = NULL;
  for (size_t i = 0; i + kl <= len; ++i)
    if (memcmp(json + i, quoted, kl) == 0) {
      p = json + i + kl;
      break;
    }
  if (p == NULL) return false;
  const char *end = json + len;
  while (p < end && (*p == ' ' || *p == ':')) ++p;
  if (p >= end || *p++ != '[') return false;
  size_t lists = 0;
  for (;;) {
    while (p < end && (*p == ' ' || *p == ',')) ++p;
    if (p >= end) return false;
    if (*p == ']') break;
    if (*p++ != '[') return false;
    size_t items = 0;
    for (;;) {
      while (p < end && (*p == ' ' || *p == ',')) ++p;
      if (p >= end) return false;
      if (*p == ']') {
        ++p;
        break;
      }
      if (*p != '0') return false;  // another device's index
      ++p;
      if (p < end && *p >= '0' && *p <= '9') return false;  // "01", "05"
      ++items;
    }
    if (items == 0 || (width && items != width)) return false;
    ++lists;
  }
  return lists > 0 || empty_ok;
}

// Checks an async collective's start on one device; the result then reads
// its operand.
static iron_status_t async_collective_check(const iron_ir_op_t *op, int k) {
  const char *target = iron_ir_op_string(op, "call_target_name");
  if (op->num_operands != 1 || op->num_results != 1 ||
      !iron_ir_type_equal(op->operands[0]->type, op->results[0].type))
    return iron_ir_op_unimplemented(
        op, "for target \"%s\" with %u operands and %u results of other "
            "types (one device: the operand's type is the result's)",
        target, op->num_operands, op->num_results);
  const iron_ir_attr_t *fa = iron_ir_op_attr(op, "mhlo.frontend_attributes");
  const iron_ir_attr_t *cfg =
      fa ? iron_ir_dict_get(fa, "async_collective_config") : NULL;
  if (cfg == NULL || cfg->kind != IRON_ATTR_STRING)
    return iron_ir_op_unimplemented(
        op, "for target \"%s\" without its async_collective_config", target);
  bool permute = strcmp(kAsyncCollectives[k], "collective-permute") == 0;
  bool ok = permute ? json_lists_only_zero(cfg->str, cfg->str_len,
                                           "permutation", 2, false)
                    : json_lists_only_zero(cfg->str, cfg->str_len,
                                           "replica_groups", 1, true);
  if (!ok)
    return iron_ir_op_unimplemented(
        op, "for target \"%s\" with %s %.*s (one device: only groups of "
            "device 0%s)",
        target, permute ? "the permutation of" : "the replica groups of",
        (int)(cfg->str_len > 160 ? 160 : cfg->str_len), cfg->str,
        permute ? ", pairs [0, 0]" : "");
  return IRON_OK;
}

static iron_status_t async_inline_block(tuple_ctx_t *c, iron_arena_t *arena,
                                        iron_ir_block_t *blk) {
  uint32_t extra = 0;
  bool collectives = false;
  for (uint32_t k = 0; k < blk->num_ops; ++k) {
    iron_ir_op_t *op = blk->ops[k];
    bool done;
    collectives = collectives || async_collective(op, &done) >= 0;
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b)
        IRON_RETURN_IF_ERROR_PLAIN(
            async_inline_block(c, arena, &op->regions[r].blocks[b]));
    if (is_named(op, "vhlo.async_start_v1") && op->num_regions == 1 &&
        op->regions[0].num_blocks == 1)
      extra += op->regions[0].blocks[0].num_ops;
  }
  if (extra == 0 && !collectives) return IRON_OK;
  iron_ir_op_t **ops =
      iron_arena_alloc_array(arena, (size_t)blk->num_ops + extra, sizeof(*ops));
  if (ops == NULL) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  uint32_t n = 0;
  for (uint32_t k = 0; k < blk->num_ops; ++k) {
    iron_ir_op_t *op = blk->ops[k];
    bool done = false;
    int coll = async_collective(op, &done);
    if (coll >= 0) {
      // The start hands its operand on (checked); the done its start's.
      if (!done) {
        IRON_RETURN_IF_ERROR_PLAIN(async_collective_check(op, coll));
      } else if (op->num_operands != 1 || op->num_results != 1 ||
                 !iron_ir_type_equal(op->operands[0]->type,
                                     op->results[0].type)) {
        return iron_ir_op_unimplemented(
            op, "for target \"%s\" of another form than its start",
            iron_ir_op_string(op, "call_target_name"));
      }
      if (op->results[0].id < c->num_values) {
        c->replace[op->results[0].id] = tuple_resolve(c, op->operands[0]);
        c->changed = true;
      }
      continue;  // the op goes: its only result is forwarded
    }
    if (is_named(op, "vhlo.async_start_v1") && op->num_regions == 1 &&
        op->regions[0].num_blocks == 1 && op->num_results == 1) {
      iron_ir_block_t *body = &op->regions[0].blocks[0];
      const iron_ir_op_t *term =
          body->num_ops ? body->ops[body->num_ops - 1] : NULL;
      if (term == NULL || term->kind != IRON_OP_RETURN ||
          body->num_args != op->num_operands)
        return iron_ir_op_unimplemented(op, "with this region");
      for (uint32_t a = 0; a < body->num_args; ++a)
        if (body->args[a].id < c->num_values)
          c->replace[body->args[a].id] = op->operands[a];
      for (uint32_t j = 0; j + 1 < body->num_ops; ++j) {
        body->ops[j]->parent = blk;
        ops[n++] = body->ops[j];
      }
      op->kind = IRON_OP_TUPLE;
      op->name = "stablehlo.tuple";
      op->operands = term->operands;
      op->num_operands = term->num_operands;
      op->num_regions = 0;
      op->regions = NULL;
      c->changed = true;
    } else if (is_named(op, "vhlo.async_done_v1") && op->num_operands == 1 &&
               op->num_results == 1 && op->operands[0]->def_op != NULL &&
               op->operands[0]->def_op->kind == IRON_OP_TUPLE &&
               op->results[0].id < c->num_values) {
      const iron_ir_op_t *fut = op->operands[0]->def_op;
      iron_ir_value_t *to = NULL;
      if (op->results[0].type->kind == IRON_TYPE_TUPLE)
        to = op->operands[0];
      else if (fut->num_operands == 1)
        to = fut->operands[0];
      if (to != NULL) {
        c->replace[op->results[0].id] = to;
        c->changed = true;
        continue;  // the op goes: its only result is forwarded
      }
    }
    ops[n++] = op;
  }
  blk->ops = ops;
  blk->num_ops = n;
  return IRON_OK;
}

iron_status_t iron_compiler_tuple_forward(iron_ir_module_t *module) {
  for (uint32_t f = 0; f < module->num_funcs; ++f) {
    iron_ir_func_t *fn = &module->funcs[f];
    tuple_ctx_t c = {.num_values = fn->num_values};
    c.replace = calloc(fn->num_values + 1, sizeof(*c.replace));
    c.uses = calloc(fn->num_values + 1, sizeof(*c.uses));
    if (c.replace == NULL || c.uses == NULL) {
      free(c.replace);
      free(c.uses);
      return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
    }
    iron_status_t st = IRON_OK;
    for (uint32_t b = 0; b < fn->body.num_blocks && st == IRON_OK; ++b)
      st = async_inline_block(&c, &module->arena, &fn->body.blocks[b]);
    for (uint32_t b = 0; b < fn->body.num_blocks && st == IRON_OK; ++b)
      st = tuple_rewrite_block(&c, &fn->body.blocks[b]);
    if (st == IRON_OK && c.changed) {
      // Removing a get_tuple_element may leave its tuple unread, and that
      // tuple may be the element of an outer one: repeat until stable.
      for (;;) {
        for (uint32_t i = 0; i <= fn->num_values; ++i) c.uses[i] = 0;
        for (uint32_t b = 0; b < fn->body.num_blocks; ++b)
          tuple_count_uses(&c, &fn->body.blocks[b]);
        uint32_t removed = 0;
        for (uint32_t b = 0; b < fn->body.num_blocks; ++b)
          removed += tuple_remove_dead(&c, &fn->body.blocks[b]);
        if (removed == 0) break;
      }
    }
    free(c.replace);
    free(c.uses);
    IRON_RETURN_IF_ERROR_PLAIN(st);
  }
  return IRON_OK;
}
