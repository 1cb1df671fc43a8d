// Internal state shared by the pieces of the portable-artifact reader
// (reader.c: container + IR; attr_type.c: attribute, type and location
// entries). Not an interface for other layers.
#ifndef IRON_STABLEHLO_READER_INTERNAL_H_
#define IRON_STABLEHLO_READER_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/status.h"
#include "ir/ir.h"

// A bounds-checked view of part of the input. `base` is the start of the
// whole artifact so that errors can name absolute byte offsets.
typedef struct iron_bc_cursor {
  const uint8_t *base;
  const uint8_t *p;
  const uint8_t *end;
  const char *context;  // "section 4 (IR)", "attribute 12" ...
} iron_bc_cursor_t;

// "bytecode offset N: expected <what> (<context>)".
iron_status_t iron_bc_error(const iron_bc_cursor_t *c, const char *what);
iron_status_t iron_bc_error_at(const iron_bc_cursor_t *c, const uint8_t *at,
                               const char *fmt, ...) IRON_PRINTF_LIKE(3, 4);

static inline size_t iron_bc_remaining(const iron_bc_cursor_t *c) {
  return (size_t)(c->end - c->p);
}

iron_status_t iron_bc_read_byte(iron_bc_cursor_t *c, const char *what,
                                uint8_t *out);
// PrefixVarInt: trailing zero bits of the first byte give the number of
// extra bytes.
iron_status_t iron_bc_read_varint(iron_bc_cursor_t *c, const char *what,
                                  uint64_t *out);
// Zigzag-decoded signed varint.
iron_status_t iron_bc_read_svarint(iron_bc_cursor_t *c, const char *what,
                                   int64_t *out);
// (value << 1) | flag.
iron_status_t iron_bc_read_varint_flag(iron_bc_cursor_t *c, const char *what,
                                       uint64_t *out, bool *out_flag);
iron_status_t iron_bc_read_bytes(iron_bc_cursor_t *c, size_t n,
                                 const char *what, const uint8_t **out);
// A count that must be plausible: each element needs at least
// `min_bytes_each` more bytes of this cursor.
iron_status_t iron_bc_read_count(iron_bc_cursor_t *c, const char *what,
                                 size_t min_bytes_each, uint64_t *out);

typedef enum iron_bc_dialect_kind {
  IRON_BC_DIALECT_OTHER = 0,
  IRON_BC_DIALECT_BUILTIN,
  IRON_BC_DIALECT_VHLO,
  IRON_BC_DIALECT_SDY,
  IRON_BC_DIALECT_FUNC,
} iron_bc_dialect_kind_t;

typedef struct iron_bc_entry {
  const uint8_t *data;
  size_t size;
  uint32_t dialect;
  bool custom;
  uint8_t state;      // 0 not decoded, 1 decoding (cycle check), 2 done
  uint8_t loc_state;  // same, for the location view of an attribute
} iron_bc_entry_t;

typedef struct iron_bc_reader {
  const uint8_t *base;
  size_t size;
  uint64_t version;
  iron_ir_module_t *module;
  iron_arena_t *arena;  // the module's arena

  uint64_t num_strings;
  const char **strings;  // point into the input, NUL-terminated there
  size_t *string_lens;
  const char **string_copies;  // arena copies, made on first use

  uint64_t num_dialects;
  const char **dialect_names;
  uint8_t *dialect_kinds;

  uint64_t num_attrs, num_types;
  iron_bc_entry_t *attrs;
  iron_bc_entry_t *types;
  const iron_ir_attr_t **attr_cache;
  const iron_ir_type_t **type_cache;
  iron_ir_loc_t **loc_cache;

  uint64_t num_props;
  const uint8_t **prop_data;
  size_t *prop_sizes;

  int attr_depth;  // recursion guard for nested attribute decoding
  int loc_depth;   // the same for locations (call-site chains nest deeply)
} iron_bc_reader_t;

// String table access: *out points into the module arena.
iron_status_t iron_bc_string(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                             uint64_t index, const char **out,
                             size_t *out_len);

iron_status_t iron_bc_attr(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                           uint64_t index, const iron_ir_attr_t **out);
iron_status_t iron_bc_type(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                           uint64_t index, const iron_ir_type_t **out);
// Decodes a location attribute into file/line/col/name (innermost user
// frame, outermost name). Never returns NULL on success.
iron_status_t iron_bc_loc(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                          uint64_t index, const iron_ir_loc_t **out);
// The text of a builtin or VHLO string attribute (names in dictionaries).
iron_status_t iron_bc_attr_string(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                  uint64_t index, const char **out);

// Reads a varint attribute/type index and resolves it.
iron_status_t iron_bc_read_attr_ref(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                    const char *what,
                                    const iron_ir_attr_t **out);
iron_status_t iron_bc_read_type_ref(iron_bc_reader_t *r, iron_bc_cursor_t *c,
                                    const char *what,
                                    const iron_ir_type_t **out);

#define IRON_BC_MAX_ATTR_DEPTH 64
// A call-site chain has a level per Python frame: jax keeps 10 by default,
// every one with JAX_TRACEBACK_IN_LOCATIONS_LIMIT=-1 (up to Python's
// recursion limit). Deeper than this, the rest of the chain reads as an
// unknown location: locations only name source lines in messages.
#define IRON_BC_MAX_LOC_DEPTH 1024

#endif  // IRON_STABLEHLO_READER_INTERNAL_H_
