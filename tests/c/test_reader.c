// Tests of the StableHLO portable-artifact reader and the printer: every
// artifact of tests/data/corpus reads and satisfies the IR invariants;
// specific programs read into the expected ops and attributes; corrupt
// input (every truncation, deterministic byte flips, hand-made headers) is
// refused with an error naming a byte offset, never a crash.
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/ir.h"
#include "stablehlo/reader.h"
#include "test.h"

#define CORPUS_DIR IRON_TEST_DATA_DIR "/corpus"

static unsigned char *read_file(const char *path, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *out_size = n > 0 ? (size_t)n : 0;
  return buf;
}

static unsigned char *read_corpus(const char *name, size_t *out_size) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", CORPUS_DIR, name);
  unsigned char *b = read_file(path, out_size);
  if (!b) fprintf(stderr, "cannot read %s\n", path);
  return b;
}

// ---------------------------------------------------------------------------
// Invariants

typedef struct {
  const iron_ir_func_t *func;
  unsigned char *seen;  // per value id: defined before this point
  unsigned char *defined;
  int errors;
  const char *file;
} walk_t;

static void walk_error(walk_t *w, const char *what, const iron_ir_op_t *op) {
  if (w->errors++ < 5)
    fprintf(stderr, "%s: @%s: %s (%s)\n", w->file ? w->file : "?",
            w->func->name ? w->func->name : "?", what ? what : "?",
            op && op->name ? op->name : "-");
}

static void define(walk_t *w, const iron_ir_value_t *v,
                   const iron_ir_op_t *op) {
  if (!v->type) walk_error(w, "value without a type", op);
  if (v->id >= w->func->num_values) {
    walk_error(w, "value id out of range", op);
    return;
  }
  if (w->defined[v->id]) walk_error(w, "value id used twice", op);
  w->defined[v->id] = 1;
  w->seen[v->id] = 1;
  if (v->type && v->type->kind != IRON_TYPE_OTHER &&
      !iron_ir_type_is_static(v->type))
    walk_error(w, "dynamic type", op);
}

static void walk_region(walk_t *w, const iron_ir_region_t *r,
                        const iron_ir_op_t *owner) {
  for (uint32_t b = 0; b < r->num_blocks; ++b) {
    const iron_ir_block_t *blk = &r->blocks[b];
    if (blk->parent != r) walk_error(w, "block parent", owner);
    for (uint32_t i = 0; i < blk->num_args; ++i) {
      if (blk->args[i].def_block != blk || blk->args[i].index != i)
        walk_error(w, "block argument links", owner);
      define(w, &blk->args[i], owner);
    }
    for (uint32_t o = 0; o < blk->num_ops; ++o) {
      const iron_ir_op_t *op = blk->ops[o];
      if (!op->name) walk_error(w, "op without a name", op);
      if (op->parent != blk) walk_error(w, "op parent", op);
      for (uint32_t i = 0; i < op->num_operands; ++i) {
        const iron_ir_value_t *v = op->operands[i];
        if (!v) {
          walk_error(w, "NULL operand", op);
        } else if (v->id >= w->func->num_values || !w->seen[v->id]) {
          walk_error(w, "operand used before its definition", op);
        }
      }
      for (uint32_t i = 0; i < op->num_attrs; ++i)
        if (!op->attrs[i].name || !op->attrs[i].value)
          walk_error(w, "attribute without name or value", op);
      for (uint32_t g = 0; g < op->num_regions; ++g) {
        if (op->regions[g].parent != op) walk_error(w, "region parent", op);
        walk_region(w, &op->regions[g], op);
      }
      for (uint32_t i = 0; i < op->num_results; ++i) {
        if (op->results[i].def_op != op || op->results[i].index != i)
          walk_error(w, "result links", op);
        define(w, &op->results[i], op);
      }
    }
    // The last op of a function body returns.
    if (!owner && blk->num_ops &&
        blk->ops[blk->num_ops - 1]->kind != IRON_OP_FUNC_RETURN)
      walk_error(w, "function body does not end in func.return", NULL);
  }
}

// Returns the number of invariant violations.
static int check_module(const iron_ir_module_t *m, const char *file) {
  int errors = 0;
  if (!iron_ir_module_main(m)) {
    fprintf(stderr, "%s: no main function\n", file);
    errors++;
  }
  for (uint32_t f = 0; f < m->num_funcs; ++f) {
    const iron_ir_func_t *fn = &m->funcs[f];
    walk_t w = {fn, calloc(fn->num_values + 1, 1),
                calloc(fn->num_values + 1, 1), 0, file};
    if (!fn->name || !fn->type || fn->type->kind != IRON_TYPE_FUNCTION) {
      fprintf(stderr, "%s: bad function header\n", file);
      errors++;
    } else {
      if (fn->body.num_blocks != 1 ||
          fn->body.blocks[0].num_args != iron_ir_func_num_args(fn))
        walk_error(&w, "function body/argument count", NULL);
      for (uint32_t i = 0; i < iron_ir_func_num_args(fn); ++i)
        if (!iron_ir_type_equal(iron_ir_func_arg_type(fn, i),
                                fn->body.blocks[0].args[i].type))
          walk_error(&w, "argument type differs from the signature", NULL);
      walk_region(&w, &fn->body, NULL);
      for (uint32_t i = 0; i < fn->num_values; ++i)
        if (!w.defined[i]) {
          walk_error(&w, "value ids not dense", NULL);
          break;
        }
    }
    errors += w.errors;
    free(w.seen);
    free(w.defined);
  }
  return errors;
}

// ---------------------------------------------------------------------------
// The whole corpus

static int has_suffix(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void test_corpus_reads(void) {
  DIR *d = opendir(CORPUS_DIR);
  CHECK(d != NULL);
  if (!d) return;
  int files = 0, versions_seen[3] = {0, 0, 0};
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!has_suffix(e->d_name, ".mlirbc")) continue;
    size_t size;
    unsigned char *buf = read_corpus(e->d_name, &size);
    CHECK(buf != NULL);
    if (!buf) continue;
    files++;
    iron_ir_module_t *m = NULL;
    iron_status_t st = iron_stablehlo_read(buf, size, &m);
    if (st) {
      fprintf(stderr, "%s: %s\n", e->d_name, iron_status_message(st));
      iron_status_free(st);
      CHECK(!"corpus artifact failed to read");
    } else {
      CHECK_EQ_INT(check_module(m, e->d_name), 0);
      CHECK(m->producer && strncmp(m->producer, "StableHLO_v", 11) == 0);
      CHECK(m->version_major == 1 || (m->version_major == 0 &&
                                      m->version_minor >= 9));
      if (m->version_minor == 0) versions_seen[0]++;
      if (m->version_minor == 16) versions_seen[1]++;
      if (m->version_minor > 16) versions_seen[2]++;
      char *text = iron_ir_module_print_to_string(m, NULL);
      CHECK(text != NULL && strstr(text, "func.func public @main") != NULL);
      free(text);
      iron_ir_print_options_t po = {true};
      text = iron_ir_module_print_to_string(m, &po);
      CHECK(text != NULL && strstr(text, " loc(") != NULL);
      free(text);
      iron_ir_module_destroy(m);
    }
    free(buf);
  }
  closedir(d);
  // The generator writes hundreds; a handful means the data is missing.
  CHECK(files >= 50);
  CHECK(versions_seen[0] > 0);  // target 1.0.0 artifacts
  CHECK(versions_seen[1] > 0);  // the plugin's 1.16.0
  CHECK(versions_seen[2] > 0);  // jaxlib's current
}

// ---------------------------------------------------------------------------
// Specific programs

static const iron_ir_op_t *find_op(const iron_ir_block_t *b,
                                   iron_op_kind_t kind, int nth) {
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    if (b->ops[i]->kind == kind && nth-- == 0) return b->ops[i];
    for (uint32_t g = 0; g < b->ops[i]->num_regions; ++g)
      for (uint32_t k = 0; k < b->ops[i]->regions[g].num_blocks; ++k) {
        const iron_ir_op_t *r =
            find_op(&b->ops[i]->regions[g].blocks[k], kind, 0);
        if (r && nth == 0) return r;
      }
  }
  return NULL;
}

static iron_ir_module_t *load(const char *name) {
  size_t size;
  unsigned char *buf = read_corpus(name, &size);
  if (!buf) return NULL;
  iron_ir_module_t *m = NULL;
  iron_status_t st = iron_stablehlo_read(buf, size, &m);
  free(buf);
  if (st) {
    fprintf(stderr, "%s: %s\n", name, iron_status_message(st));
    iron_status_free(st);
    return NULL;
  }
  return m;
}

static void test_add_mul_scalar(void) {
  iron_ir_module_t *m = load("add_mul_scalar.mlirbc");
  CHECK(m != NULL);
  if (!m) return;
  CHECK(m->name && strncmp(m->name, "jit", 3) == 0);
  CHECK(strcmp(m->producer, "StableHLO_v1.16.0") == 0);
  CHECK_EQ_INT(m->version_minor, 16);
  const iron_ir_attr_t *np = NULL;
  for (uint32_t i = 0; i < m->num_attrs; ++i)
    if (strcmp(m->attrs[i].name, "mhlo.num_partitions") == 0)
      np = m->attrs[i].value;
  CHECK(np && np->kind == IRON_ATTR_INT && np->i == 1);
  const iron_ir_func_t *f = iron_ir_module_main(m);
  CHECK(f && f->is_public && strcmp(f->name, "main") == 0);
  CHECK_EQ_INT(iron_ir_func_num_args(f), 1);
  CHECK_EQ_INT(iron_ir_func_num_results(f), 1);
  const iron_ir_type_t *t = iron_ir_func_arg_type(f, 0);
  CHECK(t->kind == IRON_TYPE_TENSOR && t->dtype == IRON_DTYPE_F32 &&
        t->rank == 2 && t->dims[0] == 4 && t->dims[1] == 3);
  CHECK(f->res_attrs && f->res_attrs[0] &&
        iron_ir_dict_get(f->res_attrs[0], "jax.result_info") != NULL);
  const iron_ir_block_t *b = &f->body.blocks[0];
  // Block-argument NameLocs name the jax parameters.
  CHECK(b->args[0].loc.name && strcmp(b->args[0].loc.name, "x") == 0);
  CHECK(f->num_values == 7);  // %arg0 + 2 constants + 4 ops
  // Two scalar constants 2.0 and 1.0 (order not fixed by serialization).
  int found2 = 0, found1 = 0;
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    if (op->kind != IRON_OP_CONSTANT) continue;
    const iron_ir_attr_t *v = iron_ir_op_attr(op, "value");
    CHECK(v && v->kind == IRON_ATTR_DENSE);
    if (!v || v->kind != IRON_ATTR_DENSE) continue;
    CHECK(v->dense.type->dtype == IRON_DTYPE_F32 && v->dense.size == 4);
    float x;
    memcpy(&x, v->dense.data, 4);
    found2 += x == 2.0f;
    found1 += x == 1.0f;
  }
  CHECK_EQ_INT(found2, 1);
  CHECK_EQ_INT(found1, 1);
  const iron_ir_op_t *mul = find_op(b, IRON_OP_MULTIPLY, 0);
  const iron_ir_op_t *add = find_op(b, IRON_OP_ADD, 0);
  CHECK(mul && add);
  if (mul && add) {
    CHECK(strcmp(mul->name, "stablehlo.multiply") == 0);
    CHECK(mul->operands[0] == &b->args[0]);
    CHECK(add->operands[0] == &mul->results[0]);
    // Locations: the innermost user frame and the NameLoc text.
    CHECK(add->loc.file && strstr(add->loc.file, ".py") && add->loc.line > 0);
    CHECK(add->loc.name && strstr(add->loc.name, "add"));
    char buf[256];
    iron_ir_loc_format(&add->loc, buf, sizeof(buf));
    CHECK(strstr(buf, ".py:") != NULL);
  }
  const iron_ir_op_t *bc = find_op(b, IRON_OP_BROADCAST_IN_DIM, 0);
  CHECK(bc != NULL);
  if (bc) {
    int64_t dims[4];
    uint32_t n = 99;
    CHECK_OK(iron_ir_op_i64_list(bc, "broadcast_dimensions", dims, 4, &n));
    CHECK_EQ_INT(n, 0);
  }
  const iron_ir_op_t *ret = b->ops[b->num_ops - 1];
  CHECK(ret->kind == IRON_OP_FUNC_RETURN && ret->num_operands == 1);
  char *text = iron_ir_module_print_to_string(m, NULL);
  CHECK(text && strstr(text, "\"stablehlo.add\"") &&
        strstr(text, "dense<2.0> : tensor<f32>"));
  free(text);
  iron_ir_module_destroy(m);
}

static void test_control_flow_and_attrs(void) {
  iron_ir_module_t *m = load("x_while_loop.mlirbc");
  CHECK(m != NULL);
  if (m) {
    const iron_ir_func_t *f = iron_ir_module_main(m);
    const iron_ir_op_t *w = find_op(&f->body.blocks[0], IRON_OP_WHILE, 0);
    CHECK(w && w->num_regions == 2);
    if (w && w->num_regions == 2) {
      const iron_ir_block_t *cond = &w->regions[0].blocks[0];
      CHECK_EQ_INT(cond->num_args, w->num_operands);
      const iron_ir_op_t *last = cond->ops[cond->num_ops - 1];
      CHECK(last->kind == IRON_OP_RETURN);
      const iron_ir_op_t *cmp = find_op(cond, IRON_OP_COMPARE, 0);
      CHECK(cmp && iron_ir_op_enum(cmp, "comparison_direction", -1) ==
                       IRON_CMP_LT);
    }
    iron_ir_module_destroy(m);
  }
  m = load("x_fori_capture.mlirbc");
  CHECK(m != NULL);
  if (m) {
    // The body uses a constant defined outside the loop (captured value).
    const iron_ir_func_t *f = iron_ir_module_main(m);
    const iron_ir_op_t *w = find_op(&f->body.blocks[0], IRON_OP_WHILE, 0);
    CHECK(w != NULL);
    int outer_use = 0;
    if (w && w->num_regions == 2) {
      const iron_ir_block_t *body = &w->regions[1].blocks[0];
      for (uint32_t i = 0; i < body->num_ops; ++i)
        for (uint32_t k = 0; k < body->ops[i]->num_operands; ++k) {
          const iron_ir_value_t *v = body->ops[i]->operands[k];
          if (v->def_op && v->def_op->parent == &f->body.blocks[0])
            outer_use = 1;
        }
    }
    CHECK(outer_use);
    CHECK_EQ_INT(check_module(m, "x_fori_capture"), 0);
    iron_ir_module_destroy(m);
  }
  m = load("x_top_k.mlirbc");
  CHECK(m != NULL);
  if (m) {
    const iron_ir_func_t *f = iron_ir_module_main(m);
    const iron_ir_op_t *c = find_op(&f->body.blocks[0], IRON_OP_COMPOSITE, 0);
    CHECK(c != NULL);
    if (c) {
      const char *dec = iron_ir_op_string(c, "decomposition");
      CHECK(dec && iron_ir_op_attr(c, "decomposition")->kind ==
                       IRON_ATTR_SYMBOL);
      CHECK(dec && iron_ir_module_lookup(m, dec) != NULL);
      CHECK(iron_ir_op_string(c, "name") &&
            strcmp(iron_ir_op_string(c, "name"), "chlo.top_k") == 0);
      const iron_ir_attr_t *ca = iron_ir_op_attr(c, "composite_attributes");
      CHECK(ca && iron_ir_dict_get(ca, "k") &&
            iron_ir_dict_get(ca, "k")->i == 3);
    }
    iron_ir_module_destroy(m);
  }
  m = load("x_argmax_cumsum.mlirbc");
  CHECK(m != NULL);
  if (m) {
    const iron_ir_func_t *f = iron_ir_module_main(m);
    const iron_ir_op_t *call = find_op(&f->body.blocks[0], IRON_OP_FUNC_CALL, 0);
    const iron_ir_op_t *red = NULL;
    for (uint32_t i = 0; i < m->num_funcs && !red; ++i)
      red = find_op(&m->funcs[i].body.blocks[0], IRON_OP_REDUCE, 0);
    CHECK(red != NULL);
    if (call) {
      const iron_ir_attr_t *cal = iron_ir_op_attr(call, "callee");
      CHECK(cal && cal->kind == IRON_ATTR_SYMBOL);
      CHECK(iron_ir_module_lookup(m, cal->str) != NULL);
    }
    iron_ir_module_destroy(m);
  }
  m = load("x_dot_general_precision.mlirbc");
  CHECK(m != NULL);
  if (m) {
    const iron_ir_func_t *f = iron_ir_module_main(m);
    const iron_ir_op_t *d = find_op(&f->body.blocks[0], IRON_OP_DOT_GENERAL, 0);
    CHECK(d != NULL);
    if (d) {
      int64_t v[4];
      uint32_t n;
      CHECK_OK(iron_ir_op_i64_list(d, "lhs_batching_dimensions", v, 4, &n));
      CHECK(n == 1 && v[0] == 0);
      CHECK_OK(iron_ir_op_i64_list(d, "lhs_contracting_dimensions", v, 4, &n));
      CHECK(n == 1 && v[0] == 2);
      CHECK_OK(iron_ir_op_i64_list(d, "rhs_contracting_dimensions", v, 4, &n));
      CHECK(n == 1 && v[0] == 1);
      const iron_ir_attr_t *p = iron_ir_op_attr(d, "precision_config");
      CHECK(p && p->kind == IRON_ATTR_ARRAY && p->array.count == 2 &&
            p->array.items[0]->kind == IRON_ATTR_ENUM &&
            p->array.items[0]->enumv.value == 2);
    }
    iron_ir_module_destroy(m);
  }
}

static void test_types_and_literals(void) {
  iron_ir_module_t *m = load("x_float8_int4_consts.mlirbc");
  CHECK(m != NULL);
  if (m) {
    const iron_ir_func_t *f = iron_ir_module_main(m);
    const iron_ir_block_t *b = &f->body.blocks[0];
    int seen_s4 = 0, seen_f8 = 0;
    for (uint32_t i = 0; i < b->num_ops; ++i) {
      const iron_ir_attr_t *v = iron_ir_op_attr(b->ops[i], "value");
      if (!v || v->kind != IRON_ATTR_DENSE) continue;
      if (v->dense.type->dtype == IRON_DTYPE_S4) {
        const int8_t *d = v->dense.data;
        CHECK(v->dense.size == 3 && d[0] == 1 && d[1] == -2 && d[2] == 7);
        seen_s4 = 1;
      }
      if (v->dense.type->dtype == IRON_DTYPE_F8E4M3FN) {
        const uint8_t *d = v->dense.data;
        CHECK(v->dense.size == 3 && d[0] == 0x38);  // 1.0
        seen_f8 = 1;
      }
    }
    CHECK(seen_s4 && seen_f8);
    CHECK(iron_ir_func_result_type(f, 1)->dtype == IRON_DTYPE_F8E4M3FN);
    iron_ir_module_destroy(m);
  }
  m = load("x_bool_consts.mlirbc");
  CHECK(m != NULL);
  if (m) {
    // i1 literals are bit-packed in the artifact, unpacked in the IR.
    const iron_ir_func_t *f = iron_ir_module_main(m);
    const iron_ir_block_t *b = &f->body.blocks[0];
    int seen = 0;
    for (uint32_t i = 0; i < b->num_ops; ++i) {
      const iron_ir_attr_t *v = iron_ir_op_attr(b->ops[i], "value");
      if (!v || v->kind != IRON_ATTR_DENSE ||
          v->dense.type->dtype != IRON_DTYPE_PRED || v->dense.type->rank != 1)
        continue;
      static const uint8_t kWant[9] = {1, 1, 0, 0, 1, 0, 1, 1, 0};
      CHECK(v->dense.size == 9 && memcmp(v->dense.data, kWant, 9) == 0);
      seen = 1;
    }
    CHECK(seen);
    iron_ir_module_destroy(m);
  }
  m = load("x_complex_consts.mlirbc");
  CHECK(m != NULL);
  if (m) {
    const iron_ir_func_t *f = iron_ir_module_main(m);
    CHECK(iron_ir_func_arg_type(f, 0)->dtype == IRON_DTYPE_F32);
    const iron_ir_block_t *b = &f->body.blocks[0];
    int seen = 0;
    for (uint32_t i = 0; i < b->num_ops; ++i) {
      const iron_ir_attr_t *v = iron_ir_op_attr(b->ops[i], "value");
      if (v && v->kind == IRON_ATTR_DENSE &&
          v->dense.type->dtype == IRON_DTYPE_C64 && v->dense.type->rank == 1) {
        float d[4];
        memcpy(d, v->dense.data, 16);
        CHECK(d[0] == 1.0f && d[1] == 2.0f && d[2] == -3.5f && d[3] == 0.5f);
        seen = 1;
      }
    }
    CHECK(seen);
    iron_ir_module_destroy(m);
  }
  m = load("x_sharding_constraint.mlirbc");
  CHECK(m != NULL);
  if (m) {
    const iron_ir_func_t *f = iron_ir_module_main(m);
    const iron_ir_block_t *b = &f->body.blocks[0];
    CHECK(find_op(b, IRON_OP_SDY_SHARDING_CONSTRAINT, 0) != NULL);
    CHECK(find_op(b, IRON_OP_UNREALIZED_CAST, 0) != NULL);
    iron_ir_module_destroy(m);
  }
}

static void test_old_bytecode_versions(void) {
  // Targets before StableHLO 0.15 are written as MLIR bytecode 0, 1, 3 and
  // 4 (no properties section; inherent attributes in the dictionary). They
  // must read into exactly the IR of the bytecode-6 artifact.
  iron_ir_module_t *m6 = load("x_old_bytecode.mlirbc");
  CHECK(m6 != NULL);
  if (!m6) return;
  char *want = iron_ir_module_print_to_string(m6, NULL);
  static const char *const kOld[] = {
      "x_old_bytecode.t0_9_0.mlirbc", "x_old_bytecode.t0_10_0.mlirbc",
      "x_old_bytecode.t0_12_0.mlirbc", "x_old_bytecode.t0_14_0.mlirbc"};
  for (size_t i = 0; i < sizeof(kOld) / sizeof(kOld[0]); ++i) {
    iron_ir_module_t *m = load(kOld[i]);
    CHECK(m != NULL);
    if (!m) continue;
    CHECK_EQ_INT(m->version_major, 0);
    char *got = iron_ir_module_print_to_string(m, NULL);
    CHECK(want && got && strcmp(want, got) == 0);
    free(got);
    iron_ir_module_destroy(m);
  }
  free(want);
  iron_ir_module_destroy(m6);
}

// ---------------------------------------------------------------------------
// Corrupt input

static int check_rejected_or_valid(const unsigned char *buf, size_t size,
                                   const char *what) {
  iron_ir_module_t *m = NULL;
  iron_status_t st = iron_stablehlo_read(buf, size, &m);
  if (st) {
    int ok = iron_status_code(st) == IRON_STATUS_INVALID_ARGUMENT ||
             iron_status_code(st) == IRON_STATUS_RESOURCE_EXHAUSTED;
    if (!ok)
      fprintf(stderr, "%s: unexpected code: %s\n", what,
              iron_status_message(st));
    iron_status_free(st);
    CHECK(m == NULL);
    return ok;
  }
  // Accepted: it must still be a well-formed module that prints.
  char *text = iron_ir_module_print_to_string(m, NULL);
  int ok = text != NULL;
  free(text);
  iron_ir_module_destroy(m);
  return ok;
}

static void test_truncations(void) {
  size_t size;
  unsigned char *buf = read_corpus("x_while_loop.mlirbc", &size);
  CHECK(buf != NULL);
  if (!buf) return;
  int bad = 0, offsets_named = 0;
  for (size_t n = 0; n < size; ++n) {
    // A fresh allocation of exactly n bytes so that ASan/valgrind see any
    // read past the end.
    unsigned char *t = malloc(n ? n : 1);
    memcpy(t, buf, n);
    iron_ir_module_t *m = NULL;
    iron_status_t st = iron_stablehlo_read(t, n, &m);
    if (!st) {
      bad++;  // a truncated artifact must never read as complete
      iron_ir_module_destroy(m);
    } else {
      if (strstr(iron_status_message(st), "bytecode offset ")) offsets_named++;
      if (iron_status_code(st) != IRON_STATUS_INVALID_ARGUMENT) bad++;
      iron_status_free(st);
    }
    free(t);
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(offsets_named, (long long)size);
  free(buf);
}

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void test_byte_flips(void) {
  static const char *const kFiles[] = {
      "add_mul_scalar.mlirbc", "x_while_loop.mlirbc", "x_top_k.mlirbc",
      "x_sharding_constraint.mlirbc", "x_float8_int4_consts.mlirbc",
      "x_scan.v1_0_0.mlirbc", "x_erf_tanh_exp.export.mlirbc",
      "x_old_bytecode.t0_9_0.mlirbc", "x_old_bytecode.t0_12_0.mlirbc"};
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  int bad = 0, runs = 0;
  for (size_t fi = 0; fi < sizeof(kFiles) / sizeof(kFiles[0]); ++fi) {
    size_t size;
    unsigned char *buf = read_corpus(kFiles[fi], &size);
    CHECK(buf != NULL);
    if (!buf || size == 0) continue;
    unsigned char *t = malloc(size);
    for (int iter = 0; iter < 400; ++iter) {
      memcpy(t, buf, size);
      int flips = 1 + (int)(rng_next(&seed) % 4);
      for (int k = 0; k < flips; ++k) {
        size_t pos = (size_t)(rng_next(&seed) % size);
        uint64_t how = rng_next(&seed);
        if (how & 1)
          t[pos] ^= (unsigned char)(1u << ((how >> 1) % 8));
        else
          t[pos] = (unsigned char)(how >> 8);
      }
      runs++;
      if (!check_rejected_or_valid(t, size, kFiles[fi])) bad++;
    }
    free(t);
    free(buf);
  }
  CHECK(runs > 0);
  CHECK_EQ_INT(bad, 0);
}

static void expect_error(const unsigned char *buf, size_t size,
                         const char *needle) {
  iron_ir_module_t *m = NULL;
  iron_status_t st = iron_stablehlo_read(buf, size, &m);
  CHECK(st != NULL);
  CHECK(m == NULL);
  if (st) {
    const char *msg = iron_status_message(st);
    if (!strstr(msg, needle))
      fprintf(stderr, "message '%s' lacks '%s'\n", msg, needle);
    CHECK(strstr(msg, needle) != NULL);
    CHECK(strstr(msg, "bytecode offset ") != NULL);
    CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INVALID_ARGUMENT);
    iron_status_free(st);
  }
}

static void test_bad_headers(void) {
  expect_error((const unsigned char *)"", 0, "magic");
  expect_error((const unsigned char *)"MLIR", 4, "magic");
  static const unsigned char kV7[] = {'M', 'L', 0xEF, 'R', 7 << 1 | 1, 'x', 0};
  expect_error(kV7, sizeof(kV7), "bytecode version <= 6");
  static const unsigned char kNoProducer[] = {'M', 'L', 0xEF, 'R', 0x0D, 'S'};
  expect_error(kNoProducer, sizeof(kNoProducer), "producer");
  static const unsigned char kNoSections[] = {'M', 'L', 0xEF, 'R', 0x0D, 0};
  expect_error(kNoSections, sizeof(kNoSections), "section 0");
  // A section claiming more bytes than there are.
  static const unsigned char kLong[] = {'M', 'L', 0xEF, 'R', 0x0D, 0,
                                        0x00, 0x7F, 1, 2};
  expect_error(kLong, sizeof(kLong), "section 0 data");
  // Bad alignment padding.
  static const unsigned char kPad[] = {'M', 'L', 0xEF, 'R', 0x0D, 0,
                                       0x80, 0x03, 0x11, 0x00};
  expect_error(kPad, sizeof(kPad), "0xCB");
}

static void test_speed(void) {
  // The largest artifact of the corpus, read repeatedly: milliseconds each.
  DIR *d = opendir(CORPUS_DIR);
  if (!d) return;
  char best[512] = "";
  size_t best_size = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!has_suffix(e->d_name, ".mlirbc")) continue;
    size_t size;
    unsigned char *buf = read_corpus(e->d_name, &size);
    if (buf && size > best_size) {
      best_size = size;
      snprintf(best, sizeof(best), "%s", e->d_name);
    }
    free(buf);
  }
  closedir(d);
  size_t size;
  unsigned char *buf = read_corpus(best, &size);
  CHECK(buf != NULL);
  if (!buf) return;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int iters = 20;
  for (int i = 0; i < iters; ++i) {
    iron_ir_module_t *m = NULL;
    CHECK_OK(iron_stablehlo_read(buf, size, &m));
    iron_ir_module_destroy(m);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ms = ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6) /
              iters;
  fprintf(stderr, "read %s (%zu bytes): %.3f ms\n", best, size, ms);
  // Generous bound (sanitizer/valgrind builds are slow); a quadratic scan
  // would blow far past it.
  CHECK(ms < 200.0);
  free(buf);
}

static const iron_test_case_t kTests[] = {
    {"corpus_reads", test_corpus_reads},
    {"add_mul_scalar", test_add_mul_scalar},
    {"control_flow_and_attrs", test_control_flow_and_attrs},
    {"types_and_literals", test_types_and_literals},
    {"old_bytecode_versions", test_old_bytecode_versions},
    {"truncations", test_truncations},
    {"byte_flips", test_byte_flips},
    {"bad_headers", test_bad_headers},
    {"speed", test_speed},
};

IRON_TEST_MAIN(kTests)
