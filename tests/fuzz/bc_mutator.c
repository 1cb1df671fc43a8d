// Structure-aware mutation of StableHLO bytecode (see bc_mutator.h).
// Format facts as in src/stablehlo/reader.c: mlir/docs/BytecodeFormat.md and
// stablehlo/dialect/VhloBytecode.cpp (VHLO type codes: 20 ranked tensor,
// scalars 0-19/27-40; attribute codes: 1 array, 2 bool, 3-5/7/11-13/16/19
// enums, 9 integer, 15 tensor literal).
#include "bc_mutator.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum {
  kSecString = 0,
  kSecDialect = 1,
  kSecAttrType = 2,
  kSecAttrTypeOffset = 3,
  kSecProperties = 8,
  kMaxSections = 16,
};

// ---------------------------------------------------------------------------
// Reading

typedef struct {
  const uint8_t *p, *end;
  bool ok;
} cur_t;

static uint64_t rd_varint(cur_t *c) {
  if (!c->ok || c->p >= c->end) {
    c->ok = false;
    return 0;
  }
  uint8_t first = c->p[0];
  if (first & 1) {
    c->p++;
    return first >> 1;
  }
  unsigned extra = first == 0 ? 8 : (unsigned)__builtin_ctz(first);
  if ((size_t)(c->end - c->p) < 1 + (size_t)extra) {
    c->ok = false;
    return 0;
  }
  uint64_t v = 0;
  if (first == 0) {
    for (unsigned i = 0; i < 8; ++i) v |= (uint64_t)c->p[1 + i] << (8 * i);
  } else {
    v = first;
    for (unsigned i = 0; i < extra; ++i)
      v |= (uint64_t)c->p[1 + i] << (8 * (i + 1));
    v >>= extra + 1;
  }
  c->p += 1 + extra;
  return v;
}

static int64_t rd_svarint(cur_t *c) {
  uint64_t v = rd_varint(c);
  return (int64_t)((v >> 1) ^ (~(v & 1) + 1));
}

// ---------------------------------------------------------------------------
// Writing

typedef struct {
  uint8_t *buf;
  size_t pos, cap;
  bool ok;
} out_t;

static void w_bytes(out_t *o, const void *p, size_t n) {
  if (!o->ok || n > o->cap - o->pos) {
    o->ok = false;
    return;
  }
  if (n) memcpy(o->buf + o->pos, p, n);
  o->pos += n;
}

static void w_byte(out_t *o, uint8_t b) { w_bytes(o, &b, 1); }

static void w_varint(out_t *o, uint64_t v) {
  uint8_t b[9];
  unsigned n = 1;
  while (n < 9 && (n == 8 ? v >> 56 : v >> (7 * n))) ++n;
  if (n == 9) {
    b[0] = 0;
    for (unsigned i = 0; i < 8; ++i) b[1 + i] = (uint8_t)(v >> (8 * i));
  } else {
    uint64_t e = (v << n) | (1ull << (n - 1));
    for (unsigned i = 0; i < n; ++i) b[i] = (uint8_t)(e >> (8 * i));
  }
  w_bytes(o, b, n);
}

static void w_svarint(out_t *o, int64_t v) {
  w_varint(o, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

// ---------------------------------------------------------------------------
// The parsed container

typedef struct {
  const uint8_t *p;
  size_t n;
} span_t;

typedef struct {
  uint8_t id_byte;  // section id with the 0x80 alignment flag
  uint64_t align;
  span_t data;
} section_t;

typedef struct {
  uint32_t dialect;
  bool custom;
  span_t data;
} entry_t;

typedef struct {
  uint64_t dialect, sidx;
  bool reg;
} opname_t;

typedef struct {
  span_t header;  // magic, version, producer (with its NUL)
  uint64_t version;
  section_t sec[kMaxSections];
  int nsec;
  int where[9];  // section id -> index in sec, or -1
  // Strings (each span without its NUL).
  uint64_t nstr;
  span_t *str;
  // Dialects: names (string indices), the raw bytes before the op names,
  // and the op names.
  uint64_t ndialects;
  uint64_t *dialect_str;
  span_t dialect_prefix;
  opname_t *ops;
  size_t nops;
  // Attributes then types.
  uint64_t na, nt;
  entry_t *ent;
  // Properties.
  uint64_t nprops;
  span_t *props;
  bool has_props;
  // What a mutation changed (re-serialized sections).
  bool dirty_strings, dirty_dialect, dirty_entries, dirty_props;
  span_t new_string;   // appended to the string table when set
  uint8_t scratch[4096];  // bytes of the one rewritten entry/property
  // PRNG.
  uint64_t rng;
} bc_t;

static void bc_free(bc_t *b) {
  free(b->str);
  free(b->dialect_str);
  free(b->ops);
  free(b->ent);
  free(b->props);
}

static uint64_t rnd(bc_t *b) {
  b->rng ^= b->rng << 13;
  b->rng ^= b->rng >> 7;
  b->rng ^= b->rng << 17;
  return b->rng;
}
static uint64_t rnd_below(bc_t *b, uint64_t n) { return n ? rnd(b) % n : 0; }

static bool parse_sections(bc_t *b, const uint8_t *data, size_t size) {
  static const uint8_t kMagic[4] = {'M', 'L', 0xEF, 'R'};
  if (size < 6 || memcmp(data, kMagic, 4) != 0) return false;
  cur_t c = {data + 4, data + size, true};
  b->version = rd_varint(&c);
  const uint8_t *nul = c.ok ? memchr(c.p, 0, (size_t)(c.end - c.p)) : NULL;
  if (!nul) return false;
  c.p = nul + 1;
  b->header.p = data;
  b->header.n = (size_t)(c.p - data);
  for (int i = 0; i < 9; ++i) b->where[i] = -1;
  while (c.ok && c.p < c.end) {
    if (b->nsec == kMaxSections) return false;
    section_t *s = &b->sec[b->nsec];
    s->id_byte = *c.p++;
    uint8_t id = s->id_byte & 0x7f;
    uint64_t len = rd_varint(&c);
    s->align = 0;
    if (s->id_byte & 0x80) {
      s->align = rd_varint(&c);
      if (!c.ok || s->align == 0 || (s->align & (s->align - 1)) ||
          s->align > 4096)
        return false;
      while (c.p < c.end && ((size_t)(c.p - data) & (s->align - 1)) &&
             *c.p == 0xCB)
        c.p++;
    }
    if (!c.ok || id > 8 || len > (size_t)(c.end - c.p) || b->where[id] >= 0)
      return false;
    s->data.p = c.p;
    s->data.n = (size_t)len;
    c.p += len;
    b->where[id] = b->nsec++;
  }
  return c.ok;
}

static bool parse_strings(bc_t *b) {
  if (b->where[kSecString] < 0) return false;
  span_t d = b->sec[b->where[kSecString]].data;
  cur_t c = {d.p, d.p + d.n, true};
  uint64_t n = rd_varint(&c);
  if (!c.ok || n > d.n) return false;
  b->nstr = n;
  b->str = calloc(n + 1, sizeof(*b->str));
  if (!b->str) return false;
  size_t end_off = d.n;
  for (uint64_t i = n; i-- > 0;) {
    uint64_t len = rd_varint(&c);
    if (!c.ok || len == 0 || len > end_off) return false;
    end_off -= (size_t)len;
    b->str[i].p = d.p + end_off;
    b->str[i].n = (size_t)len - 1;
  }
  return (size_t)(c.p - d.p) == end_off;
}

static bool parse_dialects(bc_t *b) {
  if (b->where[kSecDialect] < 0) return false;
  span_t d = b->sec[b->where[kSecDialect]].data;
  cur_t c = {d.p, d.p + d.n, true};
  uint64_t n = rd_varint(&c);
  if (!c.ok || n > d.n) return false;
  b->ndialects = n;
  b->dialect_str = calloc(n + 1, sizeof(*b->dialect_str));
  if (!b->dialect_str) return false;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t v = rd_varint(&c);
    bool has_version = false;
    if (b->version >= 1) {
      has_version = v & 1;
      v >>= 1;
    }
    b->dialect_str[i] = v;
    if (has_version) {  // a nested dialect-version section: skipped whole
      if (c.p >= c.end) return false;
      uint8_t idb = *c.p++;
      uint64_t len = rd_varint(&c);
      if (idb & 0x80) {
        uint64_t align = rd_varint(&c);
        if (!c.ok || align == 0 || align > 4096) return false;
        while (c.p < c.end && *c.p == 0xCB) c.p++;
      }
      if (!c.ok || len > (size_t)(c.end - c.p)) return false;
      c.p += len;
    }
  }
  if (b->version >= 4) rd_varint(&c);  // op name count hint
  if (!c.ok) return false;
  b->dialect_prefix.p = d.p;
  b->dialect_prefix.n = (size_t)(c.p - d.p);
  size_t cap = 0;
  while (c.ok && c.p < c.end) {
    uint64_t dia = rd_varint(&c), cnt = rd_varint(&c);
    if (!c.ok || cnt > (size_t)(c.end - c.p)) return false;
    for (uint64_t j = 0; j < cnt; ++j) {
      if (b->nops == cap) {
        cap = cap ? cap * 2 : 32;
        opname_t *nn = realloc(b->ops, cap * sizeof(*nn));
        if (!nn) return false;
        b->ops = nn;
      }
      opname_t *o = &b->ops[b->nops++];
      o->dialect = dia;
      uint64_t v = rd_varint(&c);
      o->reg = true;
      if (b->version >= 5) {
        o->reg = v & 1;
        v >>= 1;
      }
      o->sidx = v;
    }
  }
  return c.ok;
}

static bool parse_entries(bc_t *b) {
  if (b->where[kSecAttrType] < 0 || b->where[kSecAttrTypeOffset] < 0)
    return false;
  span_t data = b->sec[b->where[kSecAttrType]].data;
  span_t d = b->sec[b->where[kSecAttrTypeOffset]].data;
  cur_t c = {d.p, d.p + d.n, true};
  b->na = rd_varint(&c);
  b->nt = rd_varint(&c);
  if (!c.ok || b->na > d.n || b->nt > d.n) return false;
  b->ent = calloc(b->na + b->nt + 1, sizeof(*b->ent));
  if (!b->ent) return false;
  size_t off = 0;
  for (int pass = 0; pass < 2; ++pass) {
    uint64_t total = pass ? b->nt : b->na, filled = 0;
    entry_t *ents = pass ? b->ent + b->na : b->ent;
    while (filled < total) {
      uint64_t dia = rd_varint(&c), cnt = rd_varint(&c);
      if (!c.ok || cnt > total - filled) return false;
      for (uint64_t j = 0; j < cnt; ++j) {
        uint64_t v = rd_varint(&c);
        uint64_t sz = v >> 1;
        if (!c.ok || sz > data.n - off) return false;
        entry_t *e = &ents[filled++];
        e->dialect = (uint32_t)dia;
        e->custom = v & 1;
        e->data.p = data.p + off;
        e->data.n = (size_t)sz;
        off += (size_t)sz;
      }
    }
  }
  return c.ok && c.p == c.end;
}

static bool parse_props(bc_t *b) {
  if (b->where[kSecProperties] < 0) return true;
  span_t d = b->sec[b->where[kSecProperties]].data;
  if (d.n == 0) return true;
  cur_t c = {d.p, d.p + d.n, true};
  uint64_t n = rd_varint(&c);
  if (!c.ok || n > d.n) return false;
  b->nprops = n;
  b->props = calloc(n + 1, sizeof(*b->props));
  if (!b->props) return false;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t sz = rd_varint(&c);
    if (!c.ok || sz > (size_t)(c.end - c.p)) return false;
    b->props[i].p = c.p;
    b->props[i].n = (size_t)sz;
    c.p += sz;
  }
  b->has_props = true;
  return c.p == c.end;
}

static bool bc_parse(bc_t *b, const uint8_t *data, size_t size) {
  return parse_sections(b, data, size) && parse_strings(b) &&
         parse_dialects(b) && parse_entries(b) && parse_props(b);
}

// ---------------------------------------------------------------------------
// Serializing (sections in their original order; untouched ones verbatim)

static void write_strings(const bc_t *b, out_t *o) {
  uint64_t n = b->nstr + (b->new_string.p ? 1 : 0);
  w_varint(o, n);
  if (b->new_string.p) w_varint(o, b->new_string.n + 1);
  for (uint64_t i = b->nstr; i-- > 0;) w_varint(o, b->str[i].n + 1);
  for (uint64_t i = 0; i < b->nstr; ++i) {
    w_bytes(o, b->str[i].p, b->str[i].n);
    w_byte(o, 0);
  }
  if (b->new_string.p) {
    w_bytes(o, b->new_string.p, b->new_string.n);
    w_byte(o, 0);
  }
}

static void write_dialects(const bc_t *b, out_t *o) {
  w_bytes(o, b->dialect_prefix.p, b->dialect_prefix.n);
  for (size_t i = 0; i < b->nops;) {
    size_t j = i;
    while (j < b->nops && b->ops[j].dialect == b->ops[i].dialect) ++j;
    w_varint(o, b->ops[i].dialect);
    w_varint(o, j - i);
    for (size_t k = i; k < j; ++k)
      w_varint(o, b->version >= 5 ? (b->ops[k].sidx << 1) | b->ops[k].reg
                                  : b->ops[k].sidx);
    i = j;
  }
}

static void write_entry_data(const bc_t *b, out_t *o) {
  for (uint64_t i = 0; i < b->na + b->nt; ++i)
    w_bytes(o, b->ent[i].data.p, b->ent[i].data.n);
}

static void write_entry_offsets(const bc_t *b, out_t *o) {
  w_varint(o, b->na);
  w_varint(o, b->nt);
  for (int pass = 0; pass < 2; ++pass) {
    const entry_t *ents = pass ? b->ent + b->na : b->ent;
    uint64_t total = pass ? b->nt : b->na;
    for (uint64_t i = 0; i < total;) {
      uint64_t j = i;
      while (j < total && ents[j].dialect == ents[i].dialect) ++j;
      w_varint(o, ents[i].dialect);
      w_varint(o, j - i);
      for (uint64_t k = i; k < j; ++k)
        w_varint(o, ((uint64_t)ents[k].data.n << 1) | ents[k].custom);
      i = j;
    }
  }
}

static void write_props(const bc_t *b, out_t *o) {
  w_varint(o, b->nprops);
  for (uint64_t i = 0; i < b->nprops; ++i) {
    w_varint(o, b->props[i].n);
    w_bytes(o, b->props[i].p, b->props[i].n);
  }
}

static size_t bc_write(const bc_t *b, uint8_t *dst, size_t cap) {
  // Written to a temporary: the spans point into dst.
  uint8_t *tmp = malloc(cap);
  uint8_t *body = malloc(cap);
  if (!tmp || !body) {
    free(tmp);
    free(body);
    return 0;
  }
  out_t o = {tmp, 0, cap, true};
  w_bytes(&o, b->header.p, b->header.n);
  for (int i = 0; i < b->nsec && o.ok; ++i) {
    const section_t *s = &b->sec[i];
    uint8_t id = s->id_byte & 0x7f;
    out_t so = {body, 0, cap, true};
    if (id == kSecString && b->dirty_strings)
      write_strings(b, &so);
    else if (id == kSecDialect && b->dirty_dialect)
      write_dialects(b, &so);
    else if (id == kSecAttrType && b->dirty_entries)
      write_entry_data(b, &so);
    else if (id == kSecAttrTypeOffset && b->dirty_entries)
      write_entry_offsets(b, &so);
    else if (id == kSecProperties && b->dirty_props)
      write_props(b, &so);
    else
      w_bytes(&so, s->data.p, s->data.n);
    if (!so.ok) o.ok = false;
    w_byte(&o, s->id_byte);
    w_varint(&o, so.pos);
    if (s->id_byte & 0x80) {
      w_varint(&o, s->align);
      while (o.ok && (o.pos & (s->align - 1))) w_byte(&o, 0xCB);
    }
    w_bytes(&o, body, so.pos);
  }
  size_t n = o.ok ? o.pos : 0;
  if (n) memcpy(dst, tmp, n);
  free(tmp);
  free(body);
  return n;
}

// ---------------------------------------------------------------------------
// Entry helpers

static bool dialect_is(const bc_t *b, uint32_t d, const char *name) {
  if (d >= b->ndialects || b->dialect_str[d] >= b->nstr) return false;
  span_t s = b->str[b->dialect_str[d]];
  return s.n == strlen(name) && memcmp(s.p, name, s.n) == 0;
}

// The VHLO code of entry i (attributes: i < na; types: na + j), or -1.
static int64_t vhlo_code(const bc_t *b, uint64_t i) {
  const entry_t *e = &b->ent[i];
  if (!e->custom || !dialect_is(b, e->dialect, "vhlo")) return -1;
  cur_t c = {e->data.p, e->data.p + e->data.n, true};
  uint64_t code = rd_varint(&c);
  return c.ok ? (int64_t)code : -1;
}

// Scalar VHLO type codes (complex, code 1, takes an operand: left out) and
// their integer bit widths (0: a float).
static const struct {
  uint8_t code, int_bits;
} kScalars[] = {
    {0, 1},   {2, 0},   {3, 0},   {4, 0},   {5, 0},   {6, 0},   {7, 0},
    {9, 64},  {10, 4},  {11, 8},  {12, 16}, {13, 32}, {14, 64}, {15, 4},
    {16, 8},  {17, 16}, {18, 32}, {19, 64}, {27, 0},  {28, 0},  {29, 0},
    {31, 2},  {32, 2},  {34, 0},  {35, 0},  {36, 0},  {37, 0},  {38, 0},
    {39, 0},  {40, 0},
};
// The common ones, drawn more often.
static const uint8_t kCommonScalars[] = {0, 2, 3, 4, 5, 11, 13, 14, 16, 18, 19};

static int scalar_index(int64_t code) {
  for (size_t i = 0; i < sizeof(kScalars) / sizeof(kScalars[0]); ++i)
    if (kScalars[i].code == code) return (int)i;
  return -1;
}

// Index into kScalars of type entry t (a type index), or -1.
static int type_scalar(const bc_t *b, uint64_t t) {
  if (t >= b->nt) return -1;
  const entry_t *e = &b->ent[b->na + t];
  int64_t code = vhlo_code(b, b->na + t);
  if (code < 0 || e->data.n != 1) return -1;
  return scalar_index(code);
}

// Element scalar (kScalars index) of a ranked tensor type entry, or -1.
static int tensor_elem_scalar(const bc_t *b, uint64_t t) {
  if (t >= b->nt) return -1;
  int64_t code = vhlo_code(b, b->na + t);
  if (code != 20 && code != 21) return -1;
  const entry_t *e = &b->ent[b->na + t];
  cur_t c = {e->data.p, e->data.p + e->data.n, true};
  rd_varint(&c);
  if (code == 21) rd_varint(&c);
  uint64_t rank = rd_varint(&c);
  if (!c.ok || rank > 16) return -1;
  for (uint64_t i = 0; i < rank; ++i) rd_svarint(&c);
  uint64_t elem = rd_varint(&c);
  return c.ok ? type_scalar(b, elem) : -1;
}

// Picks an entry index in [lo, hi) whose VHLO code is in `codes`; -1 if none.
static int64_t pick_entry(bc_t *b, uint64_t lo, uint64_t hi,
                          const int *codes, int ncodes) {
  uint64_t n = hi - lo, count = 0;
  for (uint64_t i = lo; i < hi; ++i) {
    int64_t code = vhlo_code(b, i);
    for (int k = 0; k < ncodes; ++k)
      if (code == codes[k]) {
        count++;
        break;
      }
  }
  if (!count || !n) return -1;
  uint64_t want = rnd_below(b, count);
  for (uint64_t i = lo; i < hi; ++i) {
    int64_t code = vhlo_code(b, i);
    for (int k = 0; k < ncodes; ++k)
      if (code == codes[k]) {
        if (want-- == 0) return (int64_t)i;
        break;
      }
  }
  return -1;
}

static void set_entry(bc_t *b, uint64_t i, const out_t *o) {
  b->ent[i].data.p = o->buf;
  b->ent[i].data.n = o->pos;
  b->dirty_entries = true;
}

static int64_t interesting_dim(bc_t *b, int64_t old) {
  static const int64_t kDims[] = {0,   1,   2,   3,    4,     5,    7,
                                  8,   9,   15,  16,   17,    31,   32,
                                  33,  63,  64,  65,   127,   128,  129,
                                  255, 256, 257, 1000, 1024,  4096, 65536,
                                  1 << 20, 1ll << 31, 1ll << 40};
  switch (rnd_below(b, 4)) {
    case 0: return (int64_t)((uint64_t)old + 1);
    case 1: return old > 0 ? old - 1 : 1;
    case 2: return (int64_t)((uint64_t)old * 2);
    default: return kDims[rnd_below(b, sizeof(kDims) / sizeof(kDims[0]))];
  }
}

static int64_t interesting_int(bc_t *b, int64_t old) {
  static const int64_t kInts[] = {0,      1,         -1,       2,
                                  3,      4,         7,        8,
                                  16,     31,        32,       63,
                                  64,     127,       128,      255,
                                  256,    1023,      1024,     65535,
                                  65536,  INT32_MAX, INT32_MIN, INT64_MAX,
                                  INT64_MIN, -2,     UINT32_MAX, 1ll << 40};
  switch (rnd_below(b, 5)) {
    case 0: return (int64_t)((uint64_t)old + 1);
    case 1: return (int64_t)((uint64_t)old - 1);
    case 2: return (int64_t)(0 - (uint64_t)old);
    default: return kInts[rnd_below(b, sizeof(kInts) / sizeof(kInts[0]))];
  }
}

// ---------------------------------------------------------------------------
// Mutations. Each returns true when it changed something.

// A ranked tensor type: one dim changed, added or removed, or its element
// type replaced by another scalar type of the artifact.
static bool mutate_tensor_type(bc_t *b) {
  static const int kCodes[] = {20, 21};
  int64_t i = pick_entry(b, b->na, b->na + b->nt, kCodes, 2);
  if (i < 0) return false;
  const entry_t *e = &b->ent[i];
  cur_t c = {e->data.p, e->data.p + e->data.n, true};
  uint64_t code = rd_varint(&c), enc = code == 21 ? rd_varint(&c) : 0;
  uint64_t rank = rd_varint(&c);
  if (!c.ok || rank > 16) return false;
  int64_t dims[17];
  for (uint64_t k = 0; k < rank; ++k) dims[k] = rd_svarint(&c);
  uint64_t elem = rd_varint(&c);
  if (!c.ok) return false;
  switch (rnd_below(b, 6)) {
    case 0:
    case 1:
    case 2:
      if (!rank) return false;
      {
        uint64_t k = rnd_below(b, rank);
        dims[k] = rnd_below(b, 32) ? interesting_dim(b, dims[k])
                                   : INT64_MIN;  // dynamic
      }
      break;
    case 3:
      if (rank >= 16) return false;
      {
        uint64_t k = rnd_below(b, rank + 1);
        memmove(&dims[k + 1], &dims[k], (rank - k) * sizeof(dims[0]));
        dims[k] = rnd_below(b, 2) ? 1 : interesting_dim(b, 1);
        rank++;
      }
      break;
    case 4:
      if (!rank) return false;
      {
        uint64_t k = rnd_below(b, rank);
        memmove(&dims[k], &dims[k + 1], (rank - k - 1) * sizeof(dims[0]));
        rank--;
      }
      break;
    default: {
      uint64_t count = 0;
      for (uint64_t t = 0; t < b->nt; ++t) count += type_scalar(b, t) >= 0;
      if (!count) return false;
      uint64_t want = rnd_below(b, count);
      for (uint64_t t = 0; t < b->nt; ++t)
        if (type_scalar(b, t) >= 0 && want-- == 0) {
          elem = t;
          break;
        }
    }
  }
  out_t o = {b->scratch, 0, sizeof(b->scratch), true};
  w_varint(&o, code);
  if (code == 21) w_varint(&o, enc);
  w_varint(&o, rank);
  for (uint64_t k = 0; k < rank; ++k) w_svarint(&o, dims[k]);
  w_varint(&o, elem);
  if (!o.ok) return false;
  set_entry(b, (uint64_t)i, &o);
  return true;
}

// A scalar type: every tensor of that element type changes dtype at once.
static bool mutate_scalar_type(bc_t *b) {
  uint64_t count = 0;
  for (uint64_t t = 0; t < b->nt; ++t) count += type_scalar(b, t) >= 0;
  if (!count) return false;
  uint64_t want = rnd_below(b, count), t = 0;
  for (; t < b->nt; ++t)
    if (type_scalar(b, t) >= 0 && want-- == 0) break;
  uint8_t code = rnd_below(b, 3)
                     ? kCommonScalars[rnd_below(b, sizeof(kCommonScalars))]
                     : kScalars[rnd_below(b, sizeof(kScalars) /
                                                 sizeof(kScalars[0]))]
                           .code;
  out_t o = {b->scratch, 0, sizeof(b->scratch), true};
  w_varint(&o, code);
  set_entry(b, b->na + t, &o);
  return true;
}

// An integer attribute (#vhlo.integer_v1: type, APInt).
static bool mutate_int_attr(bc_t *b) {
  static const int kCodes[] = {9};
  int64_t i = pick_entry(b, 0, b->na, kCodes, 1);
  if (i < 0) return false;
  const entry_t *e = &b->ent[i];
  cur_t c = {e->data.p, e->data.p + e->data.n, true};
  rd_varint(&c);
  uint64_t type = rd_varint(&c);
  int s = c.ok ? type_scalar(b, type) : -1;
  if (s < 0 || kScalars[s].int_bits == 0) return false;
  int bits = kScalars[s].int_bits;
  int64_t old = bits <= 8 ? (c.p < c.end ? *c.p : 0) : rd_svarint(&c);
  int64_t v = interesting_int(b, old);
  out_t o = {b->scratch, 0, sizeof(b->scratch), true};
  w_varint(&o, 9);
  w_varint(&o, type);
  if (bits <= 8)
    w_byte(&o, (uint8_t)v);
  else
    w_svarint(&o, bits < 64 ? (int64_t)((uint64_t)v &
                                        ((1ull << bits) - 1))
                            : v);
  set_entry(b, (uint64_t)i, &o);
  return true;
}

// A tensor literal (#vhlo.tensor_v1: type, blob): one element set to an
// interesting value of its dtype (dims of transposes, gathers, pads... are
// i64 literals; constants too).
static bool mutate_dense_attr(bc_t *b) {
  static const int kCodes[] = {15};
  int64_t i = pick_entry(b, 0, b->na, kCodes, 1);
  if (i < 0) return false;
  const entry_t *e = &b->ent[i];
  cur_t c = {e->data.p, e->data.p + e->data.n, true};
  rd_varint(&c);
  uint64_t type = rd_varint(&c);
  const uint8_t *size_at = c.p;
  uint64_t n = rd_varint(&c);
  if (!c.ok || n > (size_t)(c.end - c.p) || n == 0 ||
      e->data.n > sizeof(b->scratch))
    return false;
  size_t blob_off = (size_t)(c.p - e->data.p);
  (void)size_at;
  memcpy(b->scratch, e->data.p, e->data.n);
  uint8_t *blob = b->scratch + blob_off;
  int s = tensor_elem_scalar(b, type);
  uint8_t code = s >= 0 ? kScalars[s].code : 255;
  unsigned es = code == 14 || code == 19 || code == 5 || code == 9 ? 8
                : code == 13 || code == 18 || code == 4           ? 4
                : code == 2 || code == 3 || code == 12 || code == 17 ? 2
                                                                    : 1;
  if (n % es) es = 1;
  size_t k = rnd_below(b, n / es) * es;
  uint64_t bitsv;
  if (code == 4 || code == 5) {
    static const double kF[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e30, -1e30,
                                __builtin_inf(), -__builtin_inf(),
                                __builtin_nan(""), 1e-40, 3.0, 65504.0};
    double d = kF[rnd_below(b, sizeof(kF) / sizeof(kF[0]))];
    if (es == 8) {
      memcpy(&bitsv, &d, 8);
    } else {
      float f = (float)d;
      uint32_t u;
      memcpy(&u, &f, 4);
      bitsv = u;
    }
  } else if (rnd_below(b, 8) == 0) {
    bitsv = rnd(b);
  } else {
    int64_t old = 0;
    for (unsigned j = 0; j < es; ++j)
      old = (int64_t)((uint64_t)old | (uint64_t)blob[k + j] << (8 * j));
    bitsv = (uint64_t)interesting_int(b, old);
  }
  for (unsigned j = 0; j < es; ++j) blob[k + j] = (uint8_t)(bitsv >> (8 * j));
  out_t o = {b->scratch, e->data.n, sizeof(b->scratch), true};
  set_entry(b, (uint64_t)i, &o);
  return true;
}

// Enumerations (comparison direction/type, precision, rng, fft type,
// transpose, accuracy mode): another value, sometimes one past the range.
static bool mutate_enum_or_bool(bc_t *b) {
  static const int kCodes[] = {2, 3, 4, 5, 7, 11, 12, 13, 16, 19};
  static const uint8_t kMax[20] = {[2] = 1,  [3] = 5,  [4] = 4,  [5] = 4,
                                   [7] = 3,  [11] = 2, [12] = 2, [13] = 2,
                                   [16] = 3, [19] = 2};
  int64_t i = pick_entry(b, 0, b->na, kCodes, 10);
  if (i < 0) return false;
  int64_t code = vhlo_code(b, (uint64_t)i);
  out_t o = {b->scratch, 0, sizeof(b->scratch), true};
  w_varint(&o, (uint64_t)code);
  w_varint(&o, rnd_below(b, (uint64_t)kMax[code] + (rnd_below(b, 8) ? 1 : 3)));
  set_entry(b, (uint64_t)i, &o);
  return true;
}

// An array attribute (#vhlo.array_v1: count, attribute refs): one element
// replaced, dropped or repeated.
static bool mutate_array_attr(bc_t *b) {
  static const int kCodes[] = {1};
  int64_t i = pick_entry(b, 0, b->na, kCodes, 1);
  if (i < 0) return false;
  const entry_t *e = &b->ent[i];
  cur_t c = {e->data.p, e->data.p + e->data.n, true};
  rd_varint(&c);
  uint64_t n = rd_varint(&c);
  if (!c.ok || n > 256) return false;
  uint64_t refs[258];
  for (uint64_t k = 0; k < n; ++k) refs[k] = rd_varint(&c);
  if (!c.ok) return false;
  uint64_t k = rnd_below(b, n ? n : 1);
  switch (rnd_below(b, 3)) {
    case 0:
      if (!n) return false;
      refs[k] = rnd_below(b, b->na);
      break;
    case 1:
      if (!n) return false;
      memmove(&refs[k], &refs[k + 1], (n - k - 1) * sizeof(refs[0]));
      n--;
      break;
    default:
      if (!n) return false;
      memmove(&refs[k + 1], &refs[k], (n - k) * sizeof(refs[0]));
      n++;
  }
  out_t o = {b->scratch, 0, sizeof(b->scratch), true};
  w_varint(&o, 1);
  w_varint(&o, n);
  for (uint64_t j = 0; j < n; ++j) w_varint(&o, refs[j]);
  if (!o.ok) return false;
  set_entry(b, (uint64_t)i, &o);
  return true;
}

// One op's properties (a list of attribute refs in schema order): one
// attribute replaced by another of the artifact, preferably of the same
// VHLO kind (another op's dims, another comparison...).
static bool mutate_props(bc_t *b) {
  if (!b->nprops || !b->na) return false;
  uint64_t p = rnd_below(b, b->nprops);
  span_t s = b->props[p];
  cur_t c = {s.p, s.p + s.n, true};
  uint64_t refs[64];
  size_t n = 0;
  while (c.ok && c.p < c.end && n < 64) refs[n++] = rd_varint(&c);
  if (!c.ok || c.p != c.end || n == 0) return false;
  size_t k = rnd_below(b, n);
  if (refs[k] >= b->na) return false;
  int64_t code = vhlo_code(b, refs[k]);
  uint64_t pick = rnd_below(b, b->na);
  if (rnd_below(b, 4) && code >= 0) {
    for (int tries = 0; tries < 64; ++tries) {
      uint64_t cand = rnd_below(b, b->na);
      if (cand != refs[k] && vhlo_code(b, cand) == code) {
        pick = cand;
        break;
      }
    }
  }
  refs[k] = pick;
  out_t o = {b->scratch, 0, sizeof(b->scratch), true};
  for (size_t j = 0; j < n; ++j) w_varint(&o, refs[j]);
  if (!o.ok) return false;
  b->props[p].p = b->scratch;
  b->props[p].n = o.pos;
  b->dirty_props = true;
  return true;
}

// Op kinds that share a property layout, so an op of one can be read as
// another: each NULL-terminated list is one class.
static const char *const kOpClasses[] = {
    // Element-wise unary and other one-operand ops without properties.
    "abs_v1", "negate_v1", "not_v1", "sign_v1", "floor_v1", "ceil_v1",
    "round_nearest_afz_v1", "round_nearest_even_v1", "is_finite_v1",
    "popcnt_v1", "count_leading_zeros_v1", "real_v1", "imag_v1",
    "convert_v1", "bitcast_convert_v1", "reshape_v1", "cbrt_v1", "cosine_v1",
    "exponential_v1", "exponential_minus_one_v1", "log_v1",
    "log_plus_one_v1", "logistic_v1", "rsqrt_v1", "sine_v1", "sqrt_v1",
    "tan_v1", "tanh_v1", NULL,
    // With result_accuracy.
    "cbrt_v2", "cosine_v2", "exponential_v2", "exponential_minus_one_v2",
    "log_v2", "log_plus_one_v2", "logistic_v2", "rsqrt_v2", "sine_v2",
    "sqrt_v2", "tan_v2", "tanh_v2", NULL,
    // Binary.
    "add_v1", "subtract_v1", "multiply_v1", "divide_v1", "remainder_v1",
    "power_v1", "maximum_v1", "minimum_v1", "atan2_v1", "and_v1", "or_v1",
    "xor_v1", "shift_left_v1", "shift_right_arithmetic_v1",
    "shift_right_logical_v1", "complex_v1", NULL,
    // Ternary.
    "select_v1", "clamp_v1", NULL,
    // One operand and one integer list.
    "reverse_v1", "transpose_v1", "broadcast_in_dim_v1", "broadcast_v1",
    NULL,
    // One integer.
    "concatenate_v1", "get_dimension_size_v1", "iota_v1", NULL,
    // Token and tuple plumbing.
    "after_all_v1", "tuple_v1", "optimization_barrier_v1", NULL,
    NULL};

static bool span_is(span_t s, const char *name) {
  return s.n == strlen(name) && memcmp(s.p, name, s.n) == 0;
}

static bool mutate_op_name(bc_t *b) {
  // Candidates: VHLO op names that belong to a class.
  size_t count = 0;
  for (size_t i = 0; i < b->nops; ++i) {
    if (!dialect_is(b, (uint32_t)b->ops[i].dialect, "vhlo") ||
        b->ops[i].sidx >= b->nstr)
      continue;
    for (size_t k = 0; kOpClasses[k] || kOpClasses[k + 1]; ++k)
      if (kOpClasses[k] && span_is(b->str[b->ops[i].sidx], kOpClasses[k])) {
        count++;
        break;
      }
  }
  if (!count) return false;
  size_t want = rnd_below(b, count), op = 0, cls_start = 0, cls_len = 0;
  for (size_t i = 0; i < b->nops; ++i) {
    if (!dialect_is(b, (uint32_t)b->ops[i].dialect, "vhlo") ||
        b->ops[i].sidx >= b->nstr)
      continue;
    size_t start = 0;
    bool found = false;
    for (size_t k = 0; kOpClasses[k] || kOpClasses[k + 1]; ++k) {
      if (!kOpClasses[k]) {
        start = k + 1;
        continue;
      }
      if (span_is(b->str[b->ops[i].sidx], kOpClasses[k])) {
        found = true;
        break;
      }
    }
    if (found && want-- == 0) {
      op = i;
      cls_start = start;
      while (kOpClasses[cls_start + cls_len]) cls_len++;
      break;
    }
  }
  if (cls_len < 2) return false;
  const char *name = kOpClasses[cls_start + rnd_below(b, cls_len)];
  for (uint64_t s = 0; s < b->nstr; ++s)
    if (span_is(b->str[s], name)) {
      b->ops[op].sidx = s;
      b->dirty_dialect = true;
      return true;
    }
  b->new_string.p = (const uint8_t *)name;
  b->new_string.n = strlen(name);
  b->ops[op].sidx = b->nstr;
  b->dirty_strings = true;
  b->dirty_dialect = true;
  return true;
}

// One structural change of data into out (0: none applied).
static size_t mutate_once(const uint8_t *data, size_t size, uint8_t *out,
                          size_t cap, uint64_t rng) {
  bc_t b;
  memset(&b, 0, sizeof(b));
  b.rng = rng ? rng : 1;
  size_t result = 0;
  if (bc_parse(&b, data, size)) {
    bool changed = false;
    for (int tries = 0; tries < 8 && !changed; ++tries) {
      switch (rnd_below(&b, 10)) {
        case 0:
        case 1: changed = mutate_tensor_type(&b); break;
        case 2: changed = mutate_scalar_type(&b); break;
        case 3: changed = mutate_int_attr(&b); break;
        case 4:
        case 5: changed = mutate_dense_attr(&b); break;
        case 6: changed = mutate_enum_or_bool(&b); break;
        case 7: changed = mutate_array_attr(&b); break;
        case 8: changed = mutate_props(&b); break;
        default: changed = mutate_op_name(&b); break;
      }
    }
    if (changed) result = bc_write(&b, out, cap);
  }
  bc_free(&b);
  return result;
}

size_t iron_fuzz_bc_mutate(uint8_t *data, size_t size, size_t max_size,
                           unsigned int seed) {
  uint8_t *out = malloc(max_size ? max_size : 1);
  if (!out) return 0;
  uint64_t rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed * 0xD1B54A32D192ED03ull);
  size_t result = 0;
  // A change may give the same bytes (a dim set to its own value, an op
  // renamed to itself): draw again.
  for (int attempt = 0; attempt < 4 && !result; ++attempt) {
    size_t n = mutate_once(data, size, out, max_size, rng + (uint64_t)attempt);
    if (n && (n != size || memcmp(out, data, n) != 0)) result = n;
  }
  if (result) memcpy(data, out, result);
  free(out);
  return result;
}

size_t iron_fuzz_bc_rewrite(const uint8_t *data, size_t size, uint8_t *out,
                            size_t cap) {
  bc_t b;
  memset(&b, 0, sizeof(b));
  size_t result = 0;
  if (bc_parse(&b, data, size)) {
    b.dirty_strings = b.dirty_dialect = b.dirty_entries = true;
    b.dirty_props = b.has_props;
    result = bc_write(&b, out, cap);
  }
  bc_free(&b);
  return result;
}
