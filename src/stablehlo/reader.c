// The StableHLO portable-artifact reader: the MLIR bytecode container
// (header, sections, string/dialect/op-name tables, attribute/type offset
// table, properties) and the IR section, built into the iron IR with every
// versioned VHLO op normalized to one form. Attribute/type/location entries
// are decoded lazily by attr_type.c.
//
// Facts used (public): mlir/docs/BytecodeFormat.md and
// mlir/lib/Bytecode/Reader/BytecodeReader.cpp in llvm/llvm-project;
// stablehlo/dialect/VhloBytecode.cpp and VhloOps.td in openxla/stablehlo.
#include "stablehlo/reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stablehlo/reader_internal.h"
#include "stablehlo/vhlo_op_table.h"

// Bytecode versions we understand (MLIR's kMinSupportedVersion..kVersion).
#define IRON_BC_MAX_VERSION 6
// jax never nests regions anywhere near this deep; corrupt input might.
#define IRON_BC_MAX_REGION_DEPTH 256

enum {
  kSectionString = 0,
  kSectionDialect = 1,
  kSectionAttrType = 2,
  kSectionAttrTypeOffset = 3,
  kSectionIR = 4,
  kSectionResource = 5,
  kSectionResourceOffset = 6,
  kSectionDialectVersions = 7,
  kSectionProperties = 8,
  kNumSections = 9,
};

enum {
  kOpHasAttrs = 0x01,
  kOpHasResults = 0x02,
  kOpHasOperands = 0x04,
  kOpHasSuccessors = 0x08,
  kOpHasRegions = 0x10,
  kOpHasUseListOrders = 0x20,
  kOpHasProperties = 0x40,
};

typedef enum {
  kPropsNone = 0,    // skip the property blob
  kPropsSchema,      // required attributes in schema order (VHLO, sdy)
  kPropsModule,      // builtin.module: optional sym_name, sym_visibility
} props_mode_t;

typedef struct op_name {
  uint32_t dialect;
  const char *name;  // without the dialect prefix, points into the input
  size_t len;
  bool registered;
  bool resolved;
  iron_op_kind_t kind;
  const char *full_name;  // arena: "vhlo.add_v1"
  const char *printed;    // "stablehlo.add" or the full name
  const char *props_context;  // "properties of vhlo.add_v1" for errors
  props_mode_t props_mode;
  unsigned num_props;
  const char *const *props;
} op_name_t;

typedef struct fixup {
  iron_ir_value_t **where;
  struct fixup *next;
} fixup_t;

typedef struct slot {
  iron_ir_value_t *value;
  fixup_t *pending;
} slot_t;

typedef struct scope {
  slot_t *slots;
  size_t size, cap;
} scope_t;

typedef struct ir_state {
  iron_bc_reader_t *r;
  iron_arena_t scratch;  // fixups; freed at the end
  op_name_t *op_names;
  uint64_t num_op_names;
  scope_t *scopes;
  int num_scopes, cap_scopes;
  uint32_t *id_counter;
  uint32_t module_ids;
  int depth;
  // Claims made by counts, summed over the whole artifact. Every real op,
  // region and value occupies its own bytes of the input, so in a valid
  // artifact these sums are bounded by its size; corrupt counts in nested
  // regions cannot multiply into huge allocations.
  uint64_t ops_claimed, regions_claimed, values_claimed;
} ir_state_t;

static iron_status_t oom(void) {
  return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory reading bytecode");
}

// ---------------------------------------------------------------------------
// Sections

static iron_status_t read_section(iron_bc_cursor_t *c, uint8_t *out_id,
                                  iron_bc_cursor_t *out_data) {
  const uint8_t *at = c->p;
  uint8_t idb;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_byte(c, "a section id", &idb));
  uint8_t id = idb & 0x7f;
  if (id >= kNumSections)
    return iron_bc_error_at(c, at, "expected a section id < %d (got %u)",
                            kNumSections, id);
  uint64_t len;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "a section length", &len));
  if (idb & 0x80) {
    uint64_t align;
    const uint8_t *aat = c->p;
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_varint(c, "a section alignment", &align));
    if (align == 0 || (align & (align - 1)) || align > 4096)
      return iron_bc_error_at(c, aat,
                              "expected a power-of-two section alignment "
                              "<= 4096 (got %llu)",
                              (unsigned long long)align);
    // Padding is relative to the start of the artifact (the writer assumes
    // an aligned buffer).
    while (((size_t)(c->p - c->base)) & (align - 1)) {
      uint8_t pad;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_byte(c, "an alignment byte (0xCB)", &pad));
      if (pad != 0xCB)
        return iron_bc_error_at(c, c->p - 1,
                                "expected an alignment byte (0xCB)");
    }
  }
  if (len > iron_bc_remaining(c))
    return iron_bc_error_at(c, at,
                            "expected %llu bytes of section %u data (%zu left)",
                            (unsigned long long)len, id, iron_bc_remaining(c));
  out_data->base = c->base;
  out_data->p = c->p;
  out_data->end = c->p + len;
  c->p += len;
  *out_id = id;
  return IRON_OK;
}

static iron_status_t read_strings(iron_bc_reader_t *r, iron_bc_cursor_t *c) {
  uint64_t n;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_count(c, "a string count", 2, &n));
  r->num_strings = n;
  r->strings = calloc(n ? n : 1, sizeof(*r->strings));
  r->string_lens = calloc(n ? n : 1, sizeof(*r->string_lens));
  r->string_copies = calloc(n ? n : 1, sizeof(*r->string_copies));
  if (!r->strings || !r->string_lens || !r->string_copies) return oom();
  // Sizes are stored in reverse order; the data is packed at the end of the
  // section, each string with its NUL.
  size_t data_end = (size_t)(c->end - c->p);  // relative to c->p at start
  const uint8_t *start = c->p;
  size_t end_off = (size_t)(c->end - start);
  for (uint64_t i = n; i-- > 0;) {
    uint64_t len;
    const uint8_t *at = c->p;
    IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "a string size", &len));
    if (len == 0 || len > end_off)
      return iron_bc_error_at(c, at, "expected a string size within the "
                                     "section");
    end_off -= (size_t)len;
    const uint8_t *s = start + end_off;
    if (s[len - 1] != 0)
      return iron_bc_error_at(c, s + len - 1,
                              "expected a NUL-terminated string");
    r->strings[i] = (const char *)s;
    r->string_lens[i] = (size_t)len - 1;
  }
  (void)data_end;
  if ((size_t)(c->p - start) != end_off)
    return iron_bc_error_at(c, c->p,
                            "expected string data right after the sizes");
  return IRON_OK;
}

static uint8_t dialect_kind_of(const char *name) {
  if (strcmp(name, "builtin") == 0) return IRON_BC_DIALECT_BUILTIN;
  if (strcmp(name, "vhlo") == 0) return IRON_BC_DIALECT_VHLO;
  if (strcmp(name, "sdy") == 0) return IRON_BC_DIALECT_SDY;
  if (strcmp(name, "func") == 0) return IRON_BC_DIALECT_FUNC;
  return IRON_BC_DIALECT_OTHER;
}

static iron_status_t read_dialects(iron_bc_reader_t *r, ir_state_t *s,
                                   iron_bc_cursor_t *c) {
  uint64_t n;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_count(c, "a dialect count", 1, &n));
  r->num_dialects = n;
  r->dialect_names = calloc(n ? n : 1, sizeof(*r->dialect_names));
  r->dialect_kinds = calloc(n ? n : 1, sizeof(*r->dialect_kinds));
  if (!r->dialect_names || !r->dialect_kinds) return oom();
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t idx;
    bool has_version = false;
    if (r->version >= 1) {
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint_flag(c, "a dialect name", &idx, &has_version));
    } else {
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint(c, "a dialect name", &idx));
    }
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_string(r, c, idx, &r->dialect_names[i], NULL));
    r->dialect_kinds[i] = dialect_kind_of(r->dialect_names[i]);
    if (has_version) {
      uint8_t id;
      iron_bc_cursor_t vs;
      const uint8_t *at = c->p;
      IRON_RETURN_IF_ERROR_PLAIN(read_section(c, &id, &vs));
      if (id != kSectionDialectVersions)
        return iron_bc_error_at(c, at, "expected a dialect version section");
    }
  }
  if (r->version >= 4) {
    uint64_t hint;
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_count(c, "an op name count", 1, &hint));
  }
  size_t cap = 0;
  while (c->p < c->end) {
    uint64_t d, cnt;
    const uint8_t *at = c->p;
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_varint(c, "an op name dialect", &d));
    if (d >= r->num_dialects)
      return iron_bc_error_at(c, at, "expected a dialect index < %llu",
                              (unsigned long long)r->num_dialects);
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_count(c, "an op name group size", 1, &cnt));
    for (uint64_t j = 0; j < cnt; ++j) {
      if (s->num_op_names == cap) {
        size_t ncap = cap ? cap * 2 : 32;
        op_name_t *nn = realloc(s->op_names, ncap * sizeof(*nn));
        if (!nn) return oom();
        s->op_names = nn;
        cap = ncap;
      }
      op_name_t *on = &s->op_names[s->num_op_names];
      memset(on, 0, sizeof(*on));
      uint64_t sidx;
      bool reg = true;
      if (r->version >= 5) {
        IRON_RETURN_IF_ERROR_PLAIN(
            iron_bc_read_varint_flag(c, "an op name", &sidx, &reg));
      } else {
        IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "an op name", &sidx));
      }
      if (sidx >= r->num_strings)
        return iron_bc_error_at(c, c->p, "expected an op name string index");
      on->dialect = (uint32_t)d;
      on->name = r->strings[sidx];
      on->len = r->string_lens[sidx];
      on->registered = reg;
      s->num_op_names++;
    }
  }
  return IRON_OK;
}

static iron_status_t read_attr_type_offsets(iron_bc_reader_t *r,
                                            iron_bc_cursor_t *c,
                                            iron_bc_cursor_t *data) {
  uint64_t na, nt;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_bc_read_count(c, "an attribute count", 1, &na));
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_count(c, "a type count", 1, &nt));
  if (na + nt > iron_bc_remaining(c) + 0)
    return iron_bc_error(c, "an entry size for every attribute and type");
  r->num_attrs = na;
  r->num_types = nt;
  r->attrs = calloc(na ? na : 1, sizeof(*r->attrs));
  r->types = calloc(nt ? nt : 1, sizeof(*r->types));
  r->attr_cache = calloc(na ? na : 1, sizeof(*r->attr_cache));
  r->type_cache = calloc(nt ? nt : 1, sizeof(*r->type_cache));
  r->loc_cache = calloc(na ? na : 1, sizeof(*r->loc_cache));
  if (!r->attrs || !r->types || !r->attr_cache || !r->type_cache ||
      !r->loc_cache)
    return oom();
  size_t offset = 0, data_size = (size_t)(data->end - data->p);
  for (int pass = 0; pass < 2; ++pass) {
    iron_bc_entry_t *entries = pass ? r->types : r->attrs;
    uint64_t total = pass ? nt : na, filled = 0;
    while (filled < total) {
      uint64_t d, cnt;
      const uint8_t *at = c->p;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint(c, "an entry group dialect", &d));
      if (d >= r->num_dialects)
        return iron_bc_error_at(c, at, "expected a dialect index < %llu",
                                (unsigned long long)r->num_dialects);
      at = c->p;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint(c, "an entry group size", &cnt));
      if (cnt > total - filled)
        return iron_bc_error_at(c, at,
                                "expected an entry group size <= %llu",
                                (unsigned long long)(total - filled));
      for (uint64_t j = 0; j < cnt; ++j) {
        uint64_t size;
        bool custom;
        at = c->p;
        IRON_RETURN_IF_ERROR_PLAIN(
            iron_bc_read_varint_flag(c, "an entry size", &size, &custom));
        if (size > data_size - offset)
          return iron_bc_error_at(c, at,
                                  "expected an entry within the attribute/type "
                                  "data section");
        iron_bc_entry_t *e = &entries[filled++];
        e->data = data->p + offset;
        e->size = (size_t)size;
        e->dialect = (uint32_t)d;
        e->custom = custom;
        offset += (size_t)size;
      }
    }
  }
  if (c->p != c->end)
    return iron_bc_error(c, "the end of the attribute/type offset section");
  return IRON_OK;
}

static iron_status_t read_properties(iron_bc_reader_t *r,
                                     iron_bc_cursor_t *c) {
  if (c->p == c->end) return IRON_OK;
  uint64_t n;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_bc_read_count(c, "a properties count", 1, &n));
  r->num_props = n;
  r->prop_data = calloc(n ? n : 1, sizeof(*r->prop_data));
  r->prop_sizes = calloc(n ? n : 1, sizeof(*r->prop_sizes));
  if (!r->prop_data || !r->prop_sizes) return oom();
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t size;
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_varint(c, "a properties size", &size));
    if (size > iron_bc_remaining(c))
      return iron_bc_error(c, "properties data");
    r->prop_data[i] = c->p;
    r->prop_sizes[i] = (size_t)size;
    c->p += size;
  }
  if (c->p != c->end)
    return iron_bc_error(c, "the end of the properties section");
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// Op names

static const char *const kSdyMeshProps[] = {"mesh", "sym_name"};
static const char *const kSdyShardingProps[] = {"sharding"};
static const char *const kSdyGroupProps[] = {"group_id"};

static iron_status_t resolve_op_name(iron_bc_reader_t *r, op_name_t *on) {
  if (on->resolved) return IRON_OK;
  const char *dname = r->dialect_names[on->dialect];
  size_t dlen = strlen(dname);
  char *full = iron_arena_alloc(r->arena, dlen + 1 + on->len + 1);
  if (!full) return oom();
  memcpy(full, dname, dlen);
  full[dlen] = '.';
  memcpy(full + dlen + 1, on->name, on->len);
  full[dlen + 1 + on->len] = '\0';
  on->full_name = full;
  on->kind = IRON_OP_UNKNOWN;
  on->props_mode = kPropsNone;
  uint8_t dk = r->dialect_kinds[on->dialect];
  if (dk == IRON_BC_DIALECT_VHLO) {
    const iron_vhlo_op_schema_t *schema =
        iron_vhlo_op_schema_lookup(on->name, on->len);
    // Base name: strip the "_vN" version suffix.
    size_t base_len = on->len;
    while (base_len > 0 && on->name[base_len - 1] >= '0' &&
           on->name[base_len - 1] <= '9')
      base_len--;
    if (schema && base_len >= 2 && base_len < on->len &&
        on->name[base_len - 1] == 'v' && on->name[base_len - 2] == '_') {
      iron_op_kind_t k = iron_op_kind_from_vhlo(on->name, base_len - 2);
      if (k != IRON_OP_UNKNOWN) {
        on->kind = k;
        on->props_mode = kPropsSchema;
        on->num_props = schema->num_props;
        on->props = schema->props;
      }
    }
  } else if (dk == IRON_BC_DIALECT_BUILTIN) {
    if (on->len == 6 && memcmp(on->name, "module", 6) == 0) {
      on->kind = IRON_OP_MODULE;
      on->props_mode = kPropsModule;
    } else if (on->len == 26 &&
               memcmp(on->name, "unrealized_conversion_cast", 26) == 0) {
      on->kind = IRON_OP_UNREALIZED_CAST;
    }
  } else if (dk == IRON_BC_DIALECT_SDY) {
    static const struct {
      const char *name;
      iron_op_kind_t kind;
      unsigned n;
      const char *const *props;
    } kSdy[] = {
        {"mesh", IRON_OP_SDY_MESH, 2, kSdyMeshProps},
        {"sharding_constraint", IRON_OP_SDY_SHARDING_CONSTRAINT, 1,
         kSdyShardingProps},
        {"reshard", IRON_OP_SDY_RESHARD, 1, kSdyShardingProps},
        {"manual_computation", IRON_OP_SDY_MANUAL_COMPUTATION, 0, NULL},
        {"return", IRON_OP_SDY_RETURN, 0, NULL},
        {"sharding_group", IRON_OP_SDY_SHARDING_GROUP, 1, kSdyGroupProps},
    };
    for (size_t i = 0; i < sizeof(kSdy) / sizeof(kSdy[0]); ++i) {
      if (strlen(kSdy[i].name) == on->len &&
          memcmp(kSdy[i].name, on->name, on->len) == 0) {
        on->kind = kSdy[i].kind;
        if (kSdy[i].n) {
          on->props_mode = kPropsSchema;
          on->num_props = kSdy[i].n;
          on->props = kSdy[i].props;
        }
      }
    }
  }
  on->printed = on->kind == IRON_OP_UNKNOWN ? on->full_name
                                            : iron_op_kind_name(on->kind);
  char *ctx = iron_arena_alloc(r->arena, dlen + on->len + 32);
  if (!ctx) return oom();
  snprintf(ctx, dlen + on->len + 32, "properties of %s", full);
  on->props_context = ctx;
  on->resolved = true;
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// Values

static iron_status_t scope_push(ir_state_t *s) {
  if (s->num_scopes == s->cap_scopes) {
    int ncap = s->cap_scopes ? s->cap_scopes * 2 : 8;
    scope_t *ns = realloc(s->scopes, (size_t)ncap * sizeof(*ns));
    if (!ns) return oom();
    s->scopes = ns;
    s->cap_scopes = ncap;
  }
  memset(&s->scopes[s->num_scopes], 0, sizeof(scope_t));
  s->num_scopes++;
  return IRON_OK;
}

static void scope_pop(ir_state_t *s) {
  s->num_scopes--;
  free(s->scopes[s->num_scopes].slots);
}

static iron_status_t scope_reserve(scope_t *sc, uint64_t n, size_t *out_base) {
  size_t need = sc->size + (size_t)n;
  if (need > sc->cap) {
    size_t ncap = sc->cap ? sc->cap : 64;
    while (ncap < need) ncap *= 2;
    slot_t *ns = realloc(sc->slots, ncap * sizeof(*ns));
    if (!ns) return oom();
    sc->slots = ns;
    sc->cap = ncap;
  }
  if (n) memset(sc->slots + sc->size, 0, (size_t)n * sizeof(slot_t));
  *out_base = sc->size;
  sc->size = need;
  return IRON_OK;
}

typedef struct region_ctx {
  size_t base;     // first slot of this region
  size_t limit;    // base + numValues
  size_t next_id;  // next slot to define
} region_ctx_t;

static iron_status_t define_value(ir_state_t *s, iron_bc_cursor_t *c,
                                  region_ctx_t *rc, iron_ir_value_t *v) {
  v->id = (*s->id_counter)++;
  if (rc->limit == rc->base) return IRON_OK;  // region defines no values
  if (rc->next_id >= rc->limit)
    return iron_bc_error_at(c, c->p,
                            "expected at most %zu values in this region",
                            rc->limit - rc->base);
  slot_t *slot = &s->scopes[s->num_scopes - 1].slots[rc->next_id++];
  if (slot->value)
    return iron_bc_error_at(c, c->p, "value defined twice");
  slot->value = v;
  for (fixup_t *f = slot->pending; f; f = f->next) *f->where = v;
  slot->pending = NULL;
  return IRON_OK;
}

static iron_status_t read_operand(ir_state_t *s, iron_bc_cursor_t *c,
                                  iron_ir_value_t **where) {
  uint64_t idx;
  const uint8_t *at = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "an operand", &idx));
  scope_t *sc = &s->scopes[s->num_scopes - 1];
  if (idx >= sc->size)
    return iron_bc_error_at(c, at, "expected a value index < %zu (got %llu)",
                            sc->size, (unsigned long long)idx);
  slot_t *slot = &sc->slots[idx];
  if (slot->value) {
    *where = slot->value;
    return IRON_OK;
  }
  // Forward reference (graph regions): patched when the value is defined.
  fixup_t *f = iron_arena_alloc(&s->scratch, sizeof(*f));
  if (!f) return oom();
  f->where = where;
  f->next = slot->pending;
  slot->pending = f;
  *where = NULL;
  return IRON_OK;
}

static iron_status_t skip_use_list(iron_bc_cursor_t *c, uint64_t num_values) {
  uint64_t n = 1;
  if (num_values > 1)
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_count(c, "a use-list count", 1, &n));
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t idx, cnt;
    bool pairs;
    if (num_values > 1)
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint(c, "a use-list value index", &idx));
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_varint_flag(c, "a use-list size", &cnt, &pairs));
    if (cnt > iron_bc_remaining(c)) return iron_bc_error(c, "use-list data");
    for (uint64_t j = 0; j < cnt; ++j)
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint(c, "a use-list entry", &idx));
  }
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// Ops

static iron_status_t parse_region(ir_state_t *s, iron_bc_cursor_t *c,
                                  iron_ir_op_t *owner,
                                  iron_ir_region_t *region);

static iron_status_t append_props(ir_state_t *s, iron_bc_cursor_t *c,
                                  const op_name_t *on, uint64_t pidx,
                                  iron_ir_named_attr_t *out, uint32_t *n) {
  iron_bc_reader_t *r = s->r;
  if (pidx >= r->num_props)
    return iron_bc_error_at(c, c->p, "expected a properties index < %llu",
                            (unsigned long long)r->num_props);
  iron_bc_cursor_t pc = {r->base, r->prop_data[pidx],
                         r->prop_data[pidx] + r->prop_sizes[pidx],
                         on->props_context};
  if (on->props_mode == kPropsSchema) {
    for (unsigned i = 0; i < on->num_props; ++i) {
      const iron_ir_attr_t *a;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_attr_ref(r, &pc, on->props[i], &a));
      out[*n].name = on->props[i];
      out[*n].value = a;
      (*n)++;
    }
  } else if (on->props_mode == kPropsModule) {
    static const char *const kNames[] = {"sym_name", "sym_visibility"};
    for (unsigned i = 0; i < 2; ++i) {
      uint64_t idx;
      bool present;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint_flag(&pc, kNames[i], &idx, &present));
      if (!present) continue;
      const iron_ir_attr_t *a;
      IRON_RETURN_IF_ERROR_PLAIN(iron_bc_attr(r, &pc, idx, &a));
      out[*n].name = kNames[i];
      out[*n].value = a;
      (*n)++;
    }
  } else {
    return IRON_OK;  // not modelled: skipped as a whole
  }
  if (pc.p != pc.end)
    return iron_bc_error(&pc, "the end of the properties");
  return IRON_OK;
}

// Returns a copy of `a` with kind SYMBOL (callee / decomposition names).
static const iron_ir_attr_t *as_symbol(iron_bc_reader_t *r,
                                       const iron_ir_attr_t *a) {
  if (!a || a->kind != IRON_ATTR_STRING) return a;
  iron_ir_attr_t *b = iron_arena_alloc(r->arena, sizeof(*b));
  if (!b) return NULL;
  *b = *a;
  b->kind = IRON_ATTR_SYMBOL;
  return b;
}

static iron_status_t parse_op(ir_state_t *s, iron_bc_cursor_t *c,
                              iron_ir_block_t *block, region_ctx_t *rc,
                              iron_ir_op_t **out_op) {
  iron_bc_reader_t *r = s->r;
  const uint8_t *at = c->p;
  uint64_t name_idx;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "an op name", &name_idx));
  if (name_idx >= s->num_op_names)
    return iron_bc_error_at(c, at, "expected an op name index < %llu (got "
                                   "%llu)",
                            (unsigned long long)s->num_op_names,
                            (unsigned long long)name_idx);
  op_name_t *on = &s->op_names[name_idx];
  IRON_RETURN_IF_ERROR_PLAIN(resolve_op_name(r, on));
  uint8_t mask;
  const uint8_t *mat = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_byte(c, "an op mask", &mask));
  if (mask & 0x80)
    return iron_bc_error_at(c, mat, "expected an op mask (got 0x%02x)", mask);

  iron_ir_op_t *op = iron_arena_alloc(r->arena, sizeof(*op));
  if (!op) return oom();
  op->kind = on->kind;
  op->name = on->printed;
  op->parent = block;

  uint64_t loc_idx;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "an op location", &loc_idx));
  const iron_ir_loc_t *loc;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bc_loc(r, c, loc_idx, &loc));
  op->loc = *loc;

  const iron_ir_attr_t *dict = NULL;
  if (mask & kOpHasAttrs) {
    const uint8_t *dat = c->p;
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_attr_ref(r, c, "an op attribute dictionary", &dict));
    if (dict->kind != IRON_ATTR_DICT)
      return iron_bc_error_at(c, dat, "expected a dictionary of op attributes");
  }
  const iron_ir_attr_t *prop_dict = NULL;
  uint64_t prop_idx = 0;
  bool has_props = false;
  if (mask & kOpHasProperties) {
    if (r->version < 5)
      return iron_bc_error_at(c, mat, "expected no properties before bytecode "
                                      "version 5");
    if (on->registered) {
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_varint(c, "a properties index", &prop_idx));
      has_props = true;
    } else {
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_attr_ref(r, c, "op properties", &prop_dict));
    }
  }
  // Attributes: properties first (StableHLO names), then discardable ones.
  uint32_t max_attrs = (has_props ? on->num_props + 2 : 0) +
                       (dict ? dict->dict.count : 0) +
                       (prop_dict && prop_dict->kind == IRON_ATTR_DICT
                            ? prop_dict->dict.count
                            : 0);
  iron_ir_named_attr_t *attrs =
      max_attrs ? iron_arena_alloc_array(r->arena, max_attrs, sizeof(*attrs))
                : NULL;
  if (max_attrs && !attrs) return oom();
  uint32_t nattrs = 0;
  if (has_props) {
    iron_status_t pst = append_props(s, c, on, prop_idx, attrs, &nattrs);
    if (pst && r->dialect_kinds[on->dialect] == IRON_BC_DIALECT_SDY) {
      // Sharding properties are informative for one device; a layout we do
      // not know (a newer shardy) must not make the program unreadable.
      iron_status_free(pst);
      nattrs = 0;
    } else if (pst) {
      return pst;
    }
  }
  if (prop_dict && prop_dict->kind == IRON_ATTR_DICT)
    for (uint32_t i = 0; i < prop_dict->dict.count; ++i)
      attrs[nattrs++] = prop_dict->dict.entries[i];
  if (dict)
    for (uint32_t i = 0; i < dict->dict.count; ++i)
      attrs[nattrs++] = dict->dict.entries[i];
  // One form for every version: symbol references as symbols.
  for (uint32_t i = 0; i < nattrs; ++i) {
    if ((op->kind == IRON_OP_FUNC_CALL &&
         strcmp(attrs[i].name, "callee") == 0) ||
        (op->kind == IRON_OP_COMPOSITE &&
         strcmp(attrs[i].name, "decomposition") == 0)) {
      attrs[i].value = as_symbol(r, attrs[i].value);
      if (!attrs[i].value) return oom();
    }
  }
  op->attrs = attrs;
  op->num_attrs = nattrs;

  if (mask & kOpHasResults) {
    uint64_t n;
    IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_count(c, "a result count", 1, &n));
    op->results = iron_arena_alloc_array(r->arena, n ? n : 1,
                                         sizeof(*op->results));
    if (!op->results) return oom();
    op->num_results = (uint32_t)n;
    for (uint64_t i = 0; i < n; ++i) {
      iron_ir_value_t *v = &op->results[i];
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_type_ref(r, c, "a result type", &v->type));
      v->def_op = op;
      v->index = (uint32_t)i;
    }
  }
  if (mask & kOpHasOperands) {
    uint64_t n;
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_count(c, "an operand count", 1, &n));
    op->operands = iron_arena_alloc_array(r->arena, n ? n : 1,
                                          sizeof(*op->operands));
    if (!op->operands) return oom();
    op->num_operands = (uint32_t)n;
    for (uint64_t i = 0; i < n; ++i)
      IRON_RETURN_IF_ERROR_PLAIN(read_operand(s, c, &op->operands[i]));
  }
  if (mask & kOpHasSuccessors) {
    uint64_t n;
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_count(c, "a successor count", 1, &n));
    iron_ir_region_t *pr = block->parent;
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t b;
      const uint8_t *bat = c->p;
      IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint(c, "a successor", &b));
      if (!pr || b >= pr->num_blocks)
        return iron_bc_error_at(c, bat, "expected a successor block index");
    }
  }
  if ((mask & kOpHasUseListOrders) && r->version >= 3)
    IRON_RETURN_IF_ERROR_PLAIN(skip_use_list(c, op->num_results));
  uint64_t num_regions = 0;
  bool isolated = false;
  if (mask & kOpHasRegions) {
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_varint_flag(c, "a region count", &num_regions, &isolated));
    s->regions_claimed += num_regions;
    if (num_regions > iron_bc_remaining(c) + 1 ||
        s->regions_claimed > r->size)
      return iron_bc_error(c, "region data");
  }

  for (uint32_t i = 0; i < op->num_results; ++i)
    IRON_RETURN_IF_ERROR_PLAIN(define_value(s, c, rc, &op->results[i]));

  if (num_regions) {
    if (s->depth >= IRON_BC_MAX_REGION_DEPTH)
      return iron_bc_error_at(c, c->p, "expected regions nested at most %d "
                                       "deep",
                              IRON_BC_MAX_REGION_DEPTH);
    op->regions = iron_arena_alloc_array(r->arena, num_regions,
                                         sizeof(*op->regions));
    if (!op->regions) return oom();
    op->num_regions = (uint32_t)num_regions;
    uint32_t *saved_counter = s->id_counter;
    uint32_t func_ids = 0;
    if (op->kind == IRON_OP_FUNC_FUNC) s->id_counter = &func_ids;
    iron_bc_cursor_t sub;
    iron_bc_cursor_t *rcur = c;
    bool new_scope = isolated;
    if (isolated && r->version >= 2) {
      uint8_t id;
      const uint8_t *sat = c->p;
      IRON_RETURN_IF_ERROR_PLAIN(read_section(c, &id, &sub));
      if (id != kSectionIR)
        return iron_bc_error_at(c, sat, "expected an IR section for the "
                                        "regions of %s",
                                on->full_name);
      sub.context = c->context;
      rcur = &sub;
    }
    if (new_scope) IRON_RETURN_IF_ERROR_PLAIN(scope_push(s));
    s->depth++;
    iron_status_t st = IRON_OK;
    for (uint64_t i = 0; i < num_regions && !st; ++i)
      st = parse_region(s, rcur, op, &op->regions[i]);
    s->depth--;
    if (new_scope) scope_pop(s);
    if (st) return st;
    if (rcur == &sub && sub.p != sub.end)
      return iron_bc_error(&sub, "the end of the region section");
    s->id_counter = saved_counter;
  }
  *out_op = op;
  return IRON_OK;
}

static iron_status_t parse_block(ir_state_t *s, iron_bc_cursor_t *c,
                                 iron_ir_op_t *owner, iron_ir_block_t *block,
                                 region_ctx_t *rc) {
  iron_bc_reader_t *r = s->r;
  uint64_t num_ops;
  bool has_args;
  const uint8_t *at = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_bc_read_varint_flag(c, "a block header", &num_ops, &has_args));
  s->ops_claimed += num_ops;
  if (num_ops > iron_bc_remaining(c) / 3 || s->ops_claimed > r->size / 3)
    return iron_bc_error_at(c, at, "expected a block op count that fits the "
                                   "data (got %llu)",
                            (unsigned long long)num_ops);
  if (has_args) {
    uint64_t n;
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_bc_read_count(c, "a block argument count", 1, &n));
    block->args = iron_arena_alloc_array(r->arena, n ? n : 1,
                                         sizeof(*block->args));
    if (!block->args) return oom();
    block->num_args = (uint32_t)n;
    for (uint64_t i = 0; i < n; ++i) {
      iron_ir_value_t *v = &block->args[i];
      v->def_block = block;
      v->index = (uint32_t)i;
      uint64_t tidx;
      bool has_loc = true;
      if (r->version >= 4) {
        IRON_RETURN_IF_ERROR_PLAIN(iron_bc_read_varint_flag(
            c, "a block argument type", &tidx, &has_loc));
      } else {
        IRON_RETURN_IF_ERROR_PLAIN(
            iron_bc_read_varint(c, "a block argument type", &tidx));
      }
      IRON_RETURN_IF_ERROR_PLAIN(iron_bc_type(r, c, tidx, &v->type));
      if (has_loc) {
        uint64_t lidx;
        IRON_RETURN_IF_ERROR_PLAIN(
            iron_bc_read_varint(c, "a block argument location", &lidx));
        const iron_ir_loc_t *loc;
        IRON_RETURN_IF_ERROR_PLAIN(iron_bc_loc(r, c, lidx, &loc));
        v->loc = *loc;
      }
    }
    for (uint64_t i = 0; i < n; ++i)
      IRON_RETURN_IF_ERROR_PLAIN(define_value(s, c, rc, &block->args[i]));
    if (r->version >= 3) {
      uint8_t has_orders;
      IRON_RETURN_IF_ERROR_PLAIN(
          iron_bc_read_byte(c, "a use-list flag", &has_orders));
      if (has_orders)
        IRON_RETURN_IF_ERROR_PLAIN(skip_use_list(c, block->num_args));
    }
  }
  block->ops = iron_arena_alloc_array(r->arena, num_ops ? num_ops : 1,
                                      sizeof(*block->ops));
  if (!block->ops) return oom();
  for (uint64_t i = 0; i < num_ops; ++i) {
    iron_ir_op_t *op = NULL;
    IRON_RETURN_IF_ERROR_PLAIN(parse_op(s, c, block, rc, &op));
    if (op->kind == IRON_OP_RETURN && owner &&
        owner->kind == IRON_OP_FUNC_FUNC) {
      op->kind = IRON_OP_FUNC_RETURN;
      op->name = iron_op_kind_name(IRON_OP_FUNC_RETURN);
    }
    block->ops[i] = op;
    block->num_ops = (uint32_t)(i + 1);
  }
  return IRON_OK;
}

static iron_status_t parse_region(ir_state_t *s, iron_bc_cursor_t *c,
                                  iron_ir_op_t *owner,
                                  iron_ir_region_t *region) {
  iron_bc_reader_t *r = s->r;
  region->parent = owner;
  uint64_t num_blocks;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_bc_read_count(c, "a region block count", 1, &num_blocks));
  if (num_blocks == 0) return IRON_OK;
  uint64_t num_values;
  const uint8_t *vat = c->p;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_bc_read_count(c, "a region value count", 1, &num_values));
  s->values_claimed += num_values;
  if (s->values_claimed > r->size)
    return iron_bc_error_at(c, vat, "expected a region value count that fits "
                                    "the data (got %llu)",
                            (unsigned long long)num_values);
  region->blocks = iron_arena_alloc_array(r->arena, num_blocks,
                                          sizeof(*region->blocks));
  if (!region->blocks) return oom();
  region->num_blocks = (uint32_t)num_blocks;
  scope_t *sc = &s->scopes[s->num_scopes - 1];
  region_ctx_t rc;
  IRON_RETURN_IF_ERROR_PLAIN(scope_reserve(sc, num_values, &rc.base));
  rc.limit = rc.base + (size_t)num_values;
  rc.next_id = rc.base;
  iron_status_t st = IRON_OK;
  for (uint64_t b = 0; b < num_blocks && !st; ++b) {
    region->blocks[b].parent = region;
    st = parse_block(s, c, owner, &region->blocks[b], &rc);
  }
  // `sc` may have moved if nested scopes reallocated the scope stack.
  sc = &s->scopes[s->num_scopes - 1];
  if (!st) {
    for (size_t i = rc.base; i < rc.limit; ++i) {
      if (sc->slots[i].pending) {
        st = iron_bc_error_at(c, c->p,
                              "expected a definition for forward-referenced "
                              "value %zu",
                              i);
        break;
      }
    }
  }
  sc->size = rc.base;
  return st;
}

// ---------------------------------------------------------------------------
// Module

static void max_id_walk(const iron_ir_region_t *region, uint32_t *max_plus1) {
  for (uint32_t b = 0; b < region->num_blocks; ++b) {
    const iron_ir_block_t *blk = &region->blocks[b];
    for (uint32_t i = 0; i < blk->num_args; ++i)
      if (blk->args[i].id + 1 > *max_plus1) *max_plus1 = blk->args[i].id + 1;
    for (uint32_t o = 0; o < blk->num_ops; ++o) {
      const iron_ir_op_t *op = blk->ops[o];
      for (uint32_t i = 0; i < op->num_results; ++i)
        if (op->results[i].id + 1 > *max_plus1)
          *max_plus1 = op->results[i].id + 1;
      for (uint32_t g = 0; g < op->num_regions; ++g)
        max_id_walk(&op->regions[g], max_plus1);
    }
  }
}

static void fill_value_table(const iron_ir_region_t *region,
                             const iron_ir_value_t **table, uint32_t n) {
  for (uint32_t b = 0; b < region->num_blocks; ++b) {
    const iron_ir_block_t *blk = &region->blocks[b];
    for (uint32_t i = 0; i < blk->num_args; ++i)
      if (blk->args[i].id < n) table[blk->args[i].id] = &blk->args[i];
    for (uint32_t o = 0; o < blk->num_ops; ++o) {
      const iron_ir_op_t *op = blk->ops[o];
      for (uint32_t i = 0; i < op->num_results; ++i)
        if (op->results[i].id < n) table[op->results[i].id] = &op->results[i];
      for (uint32_t g = 0; g < op->num_regions; ++g)
        fill_value_table(&op->regions[g], table, n);
    }
  }
}

static const iron_ir_op_t *find_foreign_operand(
    const iron_ir_region_t *region, const iron_ir_value_t **table,
    uint32_t n) {
  for (uint32_t b = 0; b < region->num_blocks; ++b) {
    const iron_ir_block_t *blk = &region->blocks[b];
    for (uint32_t o = 0; o < blk->num_ops; ++o) {
      const iron_ir_op_t *op = blk->ops[o];
      for (uint32_t i = 0; i < op->num_operands; ++i) {
        const iron_ir_value_t *v = op->operands[i];
        if (!v || v->id >= n || table[v->id] != v) return op;
      }
      for (uint32_t g = 0; g < op->num_regions; ++g) {
        const iron_ir_op_t *bad = find_foreign_operand(&op->regions[g], table, n);
        if (bad) return bad;
      }
    }
  }
  return NULL;
}

// Value ids index per-function tables downstream: every operand must be a
// value of this function (a corrupt artifact could mark a function body
// non-isolated and reach values of the enclosing module).
static iron_status_t check_func_values(const iron_ir_func_t *f) {
  const iron_ir_value_t **table =
      calloc(f->num_values ? f->num_values : 1, sizeof(*table));
  if (!table) return oom();
  fill_value_table(&f->body, table, f->num_values);
  const iron_ir_op_t *bad = find_foreign_operand(&f->body, table,
                                                 f->num_values);
  free(table);
  if (bad)
    return IRON_ERR(INVALID_ARGUMENT,
                    "function @%s: an operand of %s is not a value of the "
                    "function",
                    f->name, bad->name);
  return IRON_OK;
}

static iron_status_t func_type_mismatch(const iron_ir_func_t *f,
                                        const char *what, uint32_t i,
                                        const iron_ir_type_t *have,
                                        const iron_ir_type_t *want) {
  char hb[128], wb[128];
  iron_ir_type_format(have, hb, sizeof(hb));
  iron_ir_type_format(want, wb, sizeof(wb));
  return IRON_ERR(INVALID_ARGUMENT,
                  "function @%s: %s %u has type %s, its function type says %s",
                  f->name, what, i, hb, wb);
}

static iron_status_t build_func(iron_bc_reader_t *r, iron_ir_op_t *op,
                                iron_ir_func_t *f) {
  char where[64];
  iron_ir_loc_format(&op->loc, where, sizeof(where));
  f->name = iron_ir_op_string(op, "sym_name");
  if (!f->name)
    return IRON_ERR(INVALID_ARGUMENT, "function without sym_name (%s)", where);
  const char *vis = iron_ir_op_string(op, "sym_visibility");
  f->is_public = !(vis && strcmp(vis, "private") == 0);
  const iron_ir_attr_t *ft = iron_ir_op_attr(op, "function_type");
  if (!ft || ft->kind != IRON_ATTR_TYPE || ft->type->kind != IRON_TYPE_FUNCTION)
    return IRON_ERR(INVALID_ARGUMENT, "function @%s has no function_type",
                    f->name);
  f->type = ft->type;
  f->loc = op->loc;
  if (op->num_regions != 1 || op->regions[0].num_blocks != 1)
    return IRON_ERR(INVALID_ARGUMENT,
                    "function @%s: expected a body of one block", f->name);
  f->body = op->regions[0];
  f->body.parent = NULL;
  for (uint32_t b = 0; b < f->body.num_blocks; ++b)
    f->body.blocks[b].parent = &f->body;
  const iron_ir_block_t *entry = &f->body.blocks[0];
  if (entry->num_args != iron_ir_func_num_args(f))
    return IRON_ERR(INVALID_ARGUMENT,
                    "function @%s: %u block arguments for %u inputs", f->name,
                    entry->num_args, iron_ir_func_num_args(f));
  // The body must agree with the signature that callers and the runtime
  // size their buffers by.
  for (uint32_t i = 0; i < entry->num_args; ++i)
    if (!iron_ir_type_equal(entry->args[i].type, iron_ir_func_arg_type(f, i)))
      return func_type_mismatch(f, "argument", i, entry->args[i].type,
                                iron_ir_func_arg_type(f, i));
  const iron_ir_op_t *ret =
      entry->num_ops ? entry->ops[entry->num_ops - 1] : NULL;
  if (ret && (ret->kind == IRON_OP_FUNC_RETURN || ret->kind == IRON_OP_RETURN)) {
    if (ret->num_operands != iron_ir_func_num_results(f))
      return IRON_ERR(INVALID_ARGUMENT,
                      "function @%s returns %u values, its type says %u",
                      f->name, ret->num_operands, iron_ir_func_num_results(f));
    for (uint32_t i = 0; i < ret->num_operands; ++i)
      if (!iron_ir_type_equal(ret->operands[i]->type,
                              iron_ir_func_result_type(f, i)))
        return func_type_mismatch(f, "result", i, ret->operands[i]->type,
                                  iron_ir_func_result_type(f, i));
  }
  for (int which = 0; which < 2; ++which) {
    const iron_ir_attr_t *a =
        iron_ir_op_attr(op, which ? "res_attrs" : "arg_attrs");
    uint32_t n = which ? iron_ir_func_num_results(f) : iron_ir_func_num_args(f);
    if (!a || a->kind != IRON_ATTR_ARRAY || a->array.count != n) continue;
    const iron_ir_attr_t **v =
        iron_arena_alloc_array(r->arena, n ? n : 1, sizeof(*v));
    if (!v) return oom();
    for (uint32_t i = 0; i < n; ++i) {
      const iron_ir_attr_t *d = a->array.items[i];
      v[i] = d && d->kind == IRON_ATTR_DICT && d->dict.count ? d : NULL;
    }
    if (which)
      f->res_attrs = v;
    else
      f->arg_attrs = v;
  }
  uint32_t n = 0;
  max_id_walk(&f->body, &n);
  f->num_values = n;
  return check_func_values(f);
}

static iron_status_t build_module(iron_bc_reader_t *r, iron_ir_block_t *top) {
  iron_ir_module_t *m = r->module;
  const iron_ir_block_t *body = top;
  if (top->num_ops == 1 && top->ops[0]->kind == IRON_OP_MODULE) {
    iron_ir_op_t *mod = top->ops[0];
    if (mod->num_regions != 1 || mod->regions[0].num_blocks != 1)
      return IRON_ERR(INVALID_ARGUMENT,
                      "builtin.module: expected one region of one block");
    body = &mod->regions[0].blocks[0];
    m->name = iron_ir_op_string(mod, "sym_name");
    uint32_t n = 0;
    for (uint32_t i = 0; i < mod->num_attrs; ++i)
      if (strcmp(mod->attrs[i].name, "sym_name") != 0 &&
          strcmp(mod->attrs[i].name, "sym_visibility") != 0)
        n++;
    iron_ir_named_attr_t *attrs =
        iron_arena_alloc_array(r->arena, n ? n : 1, sizeof(*attrs));
    if (!attrs) return oom();
    n = 0;
    for (uint32_t i = 0; i < mod->num_attrs; ++i)
      if (strcmp(mod->attrs[i].name, "sym_name") != 0 &&
          strcmp(mod->attrs[i].name, "sym_visibility") != 0)
        attrs[n++] = mod->attrs[i];
    m->attrs = attrs;
    m->num_attrs = n;
  }
  uint32_t nf = 0;
  for (uint32_t i = 0; i < body->num_ops; ++i)
    if (body->ops[i]->kind == IRON_OP_FUNC_FUNC) nf++;
  m->funcs = iron_arena_alloc_array(r->arena, nf ? nf : 1, sizeof(*m->funcs));
  if (!m->funcs) return oom();
  for (uint32_t i = 0; i < body->num_ops; ++i) {
    if (body->ops[i]->kind != IRON_OP_FUNC_FUNC) continue;
    IRON_RETURN_IF_ERROR_PLAIN(
        build_func(r, body->ops[i], &m->funcs[m->num_funcs]));
    m->num_funcs++;
  }
  if (m->num_funcs == 0)
    return IRON_ERR(INVALID_ARGUMENT, "the artifact holds no functions");
  return IRON_OK;
}

static void parse_producer_version(iron_ir_module_t *m) {
  const char *p = m->producer ? strstr(m->producer, "_v") : NULL;
  if (!p) return;
  p += 2;
  int v[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    if (*p < '0' || *p > '9') return;
    long x = 0;
    while (*p >= '0' && *p <= '9' && x < 1000000) x = x * 10 + (*p++ - '0');
    v[i] = (int)x;
    if (i < 2) {
      if (*p != '.') break;
      p++;
    }
  }
  m->version_major = v[0];
  m->version_minor = v[1];
  m->version_patch = v[2];
}

static iron_status_t read_all(iron_bc_reader_t *r, ir_state_t *s) {
  iron_bc_cursor_t c = {r->base, r->base, r->base + r->size, "header"};
  static const uint8_t kMagic[4] = {'M', 'L', 0xEF, 'R'};
  if (r->size < 4 || memcmp(r->base, kMagic, 4) != 0)
    return iron_bc_error(&c, "the MLIR bytecode magic 'ML\\xefR'");
  c.p += 4;
  const uint8_t *vat = c.p;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_bc_read_varint(&c, "a bytecode version", &r->version));
  if (r->version > IRON_BC_MAX_VERSION)
    return iron_bc_error_at(&c, vat,
                            "expected bytecode version <= %d (got %llu; the "
                            "artifact is newer than this reader)",
                            IRON_BC_MAX_VERSION,
                            (unsigned long long)r->version);
  const uint8_t *nul = memchr(c.p, 0, iron_bc_remaining(&c));
  if (!nul) return iron_bc_error(&c, "a NUL-terminated producer string");
  r->module->producer =
      iron_arena_strndup(r->arena, (const char *)c.p, (size_t)(nul - c.p));
  if (!r->module->producer) return oom();
  c.p = nul + 1;
  parse_producer_version(r->module);

  iron_bc_cursor_t sections[kNumSections];
  bool present[kNumSections] = {false};
  static const char *const kNames[kNumSections] = {
      "section 0 (strings)",         "section 1 (dialects)",
      "section 2 (attributes/types)", "section 3 (attribute/type offsets)",
      "section 4 (IR)",              "section 5 (resources)",
      "section 6 (resource offsets)", "section 7 (dialect versions)",
      "section 8 (properties)"};
  c.context = "section header";
  while (c.p < c.end) {
    uint8_t id;
    iron_bc_cursor_t data;
    const uint8_t *at = c.p;
    IRON_RETURN_IF_ERROR_PLAIN(read_section(&c, &id, &data));
    if (present[id])
      return iron_bc_error_at(&c, at, "expected one %s (found a second one)",
                              kNames[id]);
    data.context = kNames[id];
    sections[id] = data;
    present[id] = true;
  }
  for (int i = 0; i <= kSectionIR; ++i)
    if (!present[i]) return iron_bc_error_at(&c, c.p, "expected %s", kNames[i]);
  if (r->version >= 5 && !present[kSectionProperties])
    return iron_bc_error_at(&c, c.p, "expected %s",
                            kNames[kSectionProperties]);

  IRON_RETURN_IF_ERROR_PLAIN(read_strings(r, &sections[kSectionString]));
  if (present[kSectionProperties])
    IRON_RETURN_IF_ERROR_PLAIN(
        read_properties(r, &sections[kSectionProperties]));
  IRON_RETURN_IF_ERROR_PLAIN(read_dialects(r, s, &sections[kSectionDialect]));
  IRON_RETURN_IF_ERROR_PLAIN(read_attr_type_offsets(
      r, &sections[kSectionAttrTypeOffset], &sections[kSectionAttrType]));

  // The top level is one block (holding builtin.module), parsed like the
  // body of an isolated region that defines no values.
  iron_bc_cursor_t *ir = &sections[kSectionIR];
  IRON_RETURN_IF_ERROR_PLAIN(scope_push(s));
  iron_ir_block_t *top = iron_arena_alloc(r->arena, sizeof(*top));
  if (!top) return oom();
  region_ctx_t rc = {0, 0, 0};
  s->id_counter = &s->module_ids;
  IRON_RETURN_IF_ERROR_PLAIN(parse_block(s, ir, NULL, top, &rc));
  if (ir->p != ir->end) return iron_bc_error(ir, "the end of the IR section");
  return build_module(r, top);
}

static void reader_free(iron_bc_reader_t *r, ir_state_t *s) {
  free(r->strings);
  free(r->string_lens);
  free(r->string_copies);
  free(r->dialect_names);
  free(r->dialect_kinds);
  free(r->attrs);
  free(r->types);
  free(r->attr_cache);
  free(r->type_cache);
  free(r->loc_cache);
  free(r->prop_data);
  free(r->prop_sizes);
  free(s->op_names);
  while (s->num_scopes > 0) scope_pop(s);
  free(s->scopes);
  iron_arena_deinit(&s->scratch);
}

iron_status_t iron_stablehlo_read(const void *bytes, size_t size,
                                  iron_ir_module_t **out_module) {
  *out_module = NULL;
  if (!bytes && size)
    return IRON_ERR(INVALID_ARGUMENT, "NULL artifact with non-zero size");
  iron_arena_t arena;
  iron_arena_init(&arena);
  iron_ir_module_t *m = iron_arena_alloc(&arena, sizeof(*m));
  if (!m) {
    iron_arena_deinit(&arena);
    return oom();
  }
  iron_bc_reader_t r;
  memset(&r, 0, sizeof(r));
  r.base = (const uint8_t *)(bytes ? bytes : "");
  r.size = size;
  r.module = m;
  // The arena lives in the module; allocations go through m->arena, which
  // starts as a copy of the local one (holding the module itself).
  m->arena = arena;
  r.arena = &m->arena;
  ir_state_t s;
  memset(&s, 0, sizeof(s));
  s.r = &r;
  iron_arena_init(&s.scratch);
  iron_status_t st = read_all(&r, &s);
  reader_free(&r, &s);
  if (st) {
    iron_ir_module_destroy(m);
    return iron_status_annotate(st, "reading StableHLO artifact");
  }
  *out_module = m;
  return IRON_OK;
}
