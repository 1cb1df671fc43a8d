// The iron IR: a module of functions, each a region of blocks of ops, in SSA
// form. Produced by the reader (src/stablehlo) with VHLO versions normalized;
// consumed by the printer, the compiler and the devices.
//
// Ownership: everything in a module (ops, values, types, attributes, strings)
// is allocated from the module's arena and lives until iron_ir_module_destroy.
// Accessors borrow. A module is immutable after the reader returns it, except
// through the compiler passes that say so; concurrent readers are fine.
#ifndef IRON_IR_IR_H_
#define IRON_IR_IR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/dtype.h"
#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum iron_op_kind {
#define IRON_OP(e, name, vhlo, kind) IRON_OP_##e,
#include "ir/ops.def"
  IRON_OP_COUNT
} iron_op_kind_t;

typedef enum iron_op_class {
  IRON_OP_CLASS_UNARY,
  IRON_OP_CLASS_BINARY,
  IRON_OP_CLASS_OTHER,
  IRON_OP_CLASS_FUNC,
} iron_op_class_t;

// "stablehlo.add" for IRON_OP_ADD.
const char *iron_op_kind_name(iron_op_kind_t kind);
// The VHLO base name ("add"), or NULL for ops that have none.
const char *iron_op_kind_vhlo_name(iron_op_kind_t kind);
iron_op_class_t iron_op_kind_class(iron_op_kind_t kind);
// Looks up a VHLO base name (without "vhlo." and without "_vN").
// Returns IRON_OP_UNKNOWN when not found.
iron_op_kind_t iron_op_kind_from_vhlo(const char *base, size_t len);

// ---------------------------------------------------------------------------
// Types

// jax never emits ranks anywhere near this; the reader refuses larger ranks.
#define IRON_MAX_RANK 16
// A dimension whose size is not known at compile time ("?").
#define IRON_DIM_DYNAMIC INT64_MIN

typedef enum iron_type_kind {
  IRON_TYPE_TENSOR = 0,  // ranked tensor (rank 0 = scalar)
  IRON_TYPE_TOKEN,
  IRON_TYPE_TUPLE,
  IRON_TYPE_FUNCTION,  // only inside attributes (func signatures)
  IRON_TYPE_UNRANKED,  // unranked tensor (read, never executed)
  IRON_TYPE_OTHER,     // anything else the reader does not model (quantized...)
} iron_type_kind_t;

typedef struct iron_ir_type iron_ir_type_t;
struct iron_ir_type {
  iron_type_kind_t kind;
  iron_dtype_t dtype;  // TENSOR / UNRANKED: element type
  int32_t rank;        // TENSOR
  int64_t dims[IRON_MAX_RANK];
  // TUPLE: element types; FUNCTION: inputs then outputs.
  uint32_t num_elements;
  uint32_t num_func_inputs;  // FUNCTION only
  const iron_ir_type_t **elements;
  // Tensor bounds/encoding are read and dropped; OTHER keeps a description.
  const char *description;
};

// Element count of a static tensor type; -1 if dynamic or on overflow.
int64_t iron_ir_type_num_elements(const iron_ir_type_t *type);
// Bytes of a static tensor type in host storage; false on overflow/dynamic.
bool iron_ir_type_byte_size(const iron_ir_type_t *type, size_t *out_bytes);
bool iron_ir_type_equal(const iron_ir_type_t *a, const iron_ir_type_t *b);
// Whether a and b are tensors of the same dims (dtypes may differ).
bool iron_ir_type_same_dims(const iron_ir_type_t *a, const iron_ir_type_t *b);
bool iron_ir_type_is_static(const iron_ir_type_t *type);
// Prints "tensor<2x3xf32>", "tensor<f32>", "!stablehlo.token", "tuple<...>"
// into buf (always NUL-terminated); returns the length that the full text
// needs (like snprintf).
size_t iron_ir_type_format(const iron_ir_type_t *type, char *buf, size_t cap);

// ---------------------------------------------------------------------------
// Attributes

typedef enum iron_attr_kind {
  IRON_ATTR_UNIT = 0,  // present without a value
  IRON_ATTR_BOOL,
  IRON_ATTR_INT,     // .i, with .int_dtype (S64 for index)
  IRON_ATTR_FLOAT,   // .f, with .float_dtype
  IRON_ATTR_STRING,  // .str (may contain NULs; .str_len counts bytes)
  IRON_ATTR_ARRAY,   // .array
  IRON_ATTR_DICT,    // .dict
  IRON_ATTR_DENSE,   // .dense: a tensor literal (also used for i64 arrays)
  IRON_ATTR_TYPE,    // .type
  IRON_ATTR_ENUM,    // .enumv: a StableHLO enum (see iron_enum_kind_t)
  IRON_ATTR_SYMBOL,  // .str: a symbol reference (@callee)
  IRON_ATTR_OUTPUT_OPERAND_ALIAS,  // .alias
  IRON_ATTR_RESULT_ACCURACY,       // .accuracy
  IRON_ATTR_OPAQUE,  // anything not modelled (sdy attributes...): .str
                     // holds a short description for the printer
} iron_attr_kind_t;

typedef enum iron_enum_kind {
  IRON_ENUM_COMPARISON_DIRECTION,  // EQ 0, NE 1, GE 2, GT 3, LE 4, LT 5
  IRON_ENUM_COMPARISON_TYPE,       // NOTYPE 0, FLOAT 1, TOTALORDER 2,
                                   // SIGNED 3, UNSIGNED 4
  IRON_ENUM_PRECISION,             // DEFAULT 0, HIGH 1, HIGHEST 2
  IRON_ENUM_RNG_ALGORITHM,         // DEFAULT 0, THREE_FRY 1, PHILOX 2
  IRON_ENUM_RNG_DISTRIBUTION,      // UNIFORM 1, NORMAL 2
  IRON_ENUM_FFT_TYPE,              // FFT 0, IFFT 1, RFFT 2, IRFFT 3
  IRON_ENUM_TRANSPOSE,             // NO_TRANSPOSE 1, TRANSPOSE 2, ADJOINT 3
                                   // (0 TRANSPOSE_INVALID)
  IRON_ENUM_CUSTOM_CALL_API_VERSION,
  IRON_ENUM_RESULT_ACCURACY_MODE,  // DEFAULT 0, HIGHEST 1, TOLERANCE 2
} iron_enum_kind_t;

enum {
  IRON_CMP_EQ = 0, IRON_CMP_NE = 1, IRON_CMP_GE = 2,
  IRON_CMP_GT = 3, IRON_CMP_LE = 4, IRON_CMP_LT = 5,
};
enum {
  IRON_CMP_TYPE_NOTYPE = 0, IRON_CMP_TYPE_FLOAT = 1,
  IRON_CMP_TYPE_TOTALORDER = 2, IRON_CMP_TYPE_SIGNED = 3,
  IRON_CMP_TYPE_UNSIGNED = 4,
};
enum {
  IRON_RNG_DEFAULT = 0, IRON_RNG_THREE_FRY = 1, IRON_RNG_PHILOX = 2,
};

typedef struct iron_ir_attr iron_ir_attr_t;
typedef struct iron_ir_named_attr {
  const char *name;
  const iron_ir_attr_t *value;
} iron_ir_named_attr_t;

struct iron_ir_attr {
  iron_attr_kind_t kind;
  union {
    bool b;
    struct {
      int64_t i;  // sign-extended (unsigned types: zero-extended bits)
      iron_dtype_t int_dtype;
    };
    struct {
      double f;
      iron_dtype_t float_dtype;
    };
    struct {
      const char *str;
      size_t str_len;
    };
    struct {
      uint32_t count;
      const iron_ir_attr_t **items;
    } array;
    struct {
      uint32_t count;
      const iron_ir_named_attr_t *entries;
    } dict;
    struct {
      const iron_ir_type_t *type;  // tensor type of the literal
      // Row-major element bytes in host storage format (iron_dtype_size per
      // element; i1 unpacked to one byte 0/1 per element). When `splat` is
      // true, data holds exactly one element.
      const void *data;
      size_t size;
      bool splat;
    } dense;
    const iron_ir_type_t *type;
    struct {
      iron_enum_kind_t kind;
      int32_t value;
    } enumv;
    struct {
      uint32_t num_output_tuple_indices;
      const int64_t *output_tuple_indices;
      int64_t operand_index;
      uint32_t num_operand_tuple_indices;
      const int64_t *operand_tuple_indices;
    } alias;
    struct {
      double atol, rtol;
      int64_t ulps;
      int32_t mode;
    } accuracy;
  };
};

// ---------------------------------------------------------------------------
// Values, ops, blocks, regions

typedef struct iron_ir_op iron_ir_op_t;
typedef struct iron_ir_block iron_ir_block_t;
typedef struct iron_ir_region iron_ir_region_t;

typedef struct iron_ir_loc {
  const char *file;  // NULL when unknown
  int32_t line;      // 0 when unknown
  int32_t col;
  const char *name;  // NameLoc text (e.g. "jit(f)/add"), may be NULL
} iron_ir_loc_t;

typedef struct iron_ir_value {
  const iron_ir_type_t *type;
  iron_ir_op_t *def_op;       // NULL for a block argument
  iron_ir_block_t *def_block; // block of a block argument
  uint32_t index;             // result index or argument index
  // Unique per function (all nested regions included), dense from 0; the
  // compiler uses it to index value tables.
  uint32_t id;
  iron_ir_loc_t loc;  // block arguments only (NameLoc "x"), may be empty
} iron_ir_value_t;

struct iron_ir_op {
  iron_op_kind_t kind;
  // Normalized printed name ("stablehlo.add", "func.call", or for UNKNOWN the
  // full name as read, e.g. "vhlo.fancy_v3" / "mpmd.fragment").
  const char *name;
  uint32_t num_operands;
  iron_ir_value_t **operands;
  uint32_t num_results;
  iron_ir_value_t *results;  // array of num_results values
  uint32_t num_regions;
  iron_ir_region_t *regions;  // array of num_regions
  // Named attributes: VHLO properties under their StableHLO names
  // ("comparison_direction", "lhs_contracting_dimensions", "callee" ...)
  // followed by discardable attributes ("mhlo.frontend_attributes" ...).
  uint32_t num_attrs;
  const iron_ir_named_attr_t *attrs;
  iron_ir_loc_t loc;
  iron_ir_block_t *parent;
};

struct iron_ir_block {
  uint32_t num_args;
  iron_ir_value_t *args;  // array of num_args
  uint32_t num_ops;
  iron_ir_op_t **ops;
  iron_ir_region_t *parent;
};

struct iron_ir_region {
  uint32_t num_blocks;
  iron_ir_block_t *blocks;  // array; StableHLO regions have exactly one
  iron_ir_op_t *parent;
};

typedef struct iron_ir_func {
  const char *name;   // "main"
  bool is_public;
  const iron_ir_type_t *type;  // IRON_TYPE_FUNCTION
  // Per-argument / per-result attribute dictionaries (may be NULL entries):
  // "tf.aliasing_output", "jax.buffer_donor", "jax.result_info",
  // "mhlo.sharding", "mhlo.layout_mode" ...
  const iron_ir_attr_t **arg_attrs;  // num_args entries or NULL
  const iron_ir_attr_t **res_attrs;  // num_results entries or NULL
  iron_ir_region_t body;             // one block; args = function args
  iron_ir_loc_t loc;
  uint32_t num_values;  // values (ids) defined in this function
} iron_ir_func_t;

typedef struct iron_ir_module {
  iron_arena_t arena;
  const char *name;      // sym_name ("jit_f"), may be NULL
  const char *producer;  // "StableHLO_v1.16.0"
  int version_major, version_minor, version_patch;  // from the producer
  uint32_t num_funcs;
  iron_ir_func_t *funcs;  // array
  // Module attributes (mhlo.num_partitions, mhlo.num_replicas ...).
  uint32_t num_attrs;
  const iron_ir_named_attr_t *attrs;
} iron_ir_module_t;

// Frees the module and everything in it. NULL is fine.
void iron_ir_module_destroy(iron_ir_module_t *module);

// The public function named "main", else the only public function, else NULL.
const iron_ir_func_t *iron_ir_module_main(const iron_ir_module_t *module);
const iron_ir_func_t *iron_ir_module_lookup(const iron_ir_module_t *module,
                                            const char *name);

// Number of function inputs/outputs from its type.
static inline uint32_t iron_ir_func_num_args(const iron_ir_func_t *f) {
  return f->type->num_func_inputs;
}
static inline uint32_t iron_ir_func_num_results(const iron_ir_func_t *f) {
  return f->type->num_elements - f->type->num_func_inputs;
}
static inline const iron_ir_type_t *iron_ir_func_arg_type(
    const iron_ir_func_t *f, uint32_t i) {
  return f->type->elements[i];
}
static inline const iron_ir_type_t *iron_ir_func_result_type(
    const iron_ir_func_t *f, uint32_t i) {
  return f->type->elements[f->type->num_func_inputs + i];
}

// ---------------------------------------------------------------------------
// Attribute accessors (compile-time helpers; not for hot paths)

const iron_ir_attr_t *iron_ir_op_attr(const iron_ir_op_t *op,
                                      const char *name);
const iron_ir_attr_t *iron_ir_dict_get(const iron_ir_attr_t *dict,
                                       const char *name);

// Reads an integer list from a DENSE attr of integer type, an ARRAY of INTs,
// or a single INT. Returns INVALID_ARGUMENT naming `what` otherwise, or when
// more than `cap` entries. A missing attribute (NULL) gives count 0.
iron_status_t iron_ir_attr_i64_list(const iron_ir_attr_t *attr,
                                    const char *what, int64_t *out_values,
                                    uint32_t cap, uint32_t *out_count);
// Convenience: the named attribute of `op` via iron_ir_attr_i64_list.
iron_status_t iron_ir_op_i64_list(const iron_ir_op_t *op, const char *name,
                                  int64_t *out_values, uint32_t cap,
                                  uint32_t *out_count);
// True when `op` is a broadcast_in_dim that moves no element: as many
// elements in as out and the operand's dims map, in order, onto equal
// result dims (every other result dim is 1), so the row-major bytes are
// identical (a reshape that only adds size-1 dims).
bool iron_ir_broadcast_is_reshape(const iron_ir_op_t *op);
// True when `op` is a stablehlo.reduce whose every result has as many
// elements as its operand (the reduced dims have size 1): each result is
// its operand reshaped. XLA replaces such a reduce with a reshape and
// ignores the init values (measured on XLA:CPU: an add with init 5 returns
// the operand; -0 and denormals pass unchanged), and so does iron.
bool iron_ir_reduce_is_reshape(const iron_ir_op_t *op);
// True when `op` is a one-operand stablehlo.reduce_window whose windows
// each hold one element of its operand (window dims 1, no padding, no base
// dilation, as many elements out as in) and whose init is a constant
// identity of its one-op body that XLA drops (add of 0 of either sign, max
// of -inf or the lowest integer, min of +inf or the highest): XLA replaces
// it with its operand (measured on XLA:CPU: a cumsum over a length-1 axis
// keeps -0.0 and denormals, a cumprod flushes them), and so does iron.
// With another init or body XLA computes it, and so does iron.
bool iron_ir_reduce_window_is_identity(const iron_ir_op_t *op);
// Whether stablehlo.pad's attributes for one dimension are consistent: an
// operand dim of n elements with lo before, hi after and ip between each
// pair gives od result elements (computed without overflow). Refuses
// magnitudes of lo/hi/ip beyond 2^40 and od beyond 2^62 (no tensor that
// large can exist), so that kernels can do index arithmetic on them in
// int64 without overflow.
bool iron_ir_pad_dim_is_valid(int64_t n, int64_t lo, int64_t hi, int64_t ip,
                              int64_t od);
// Integer scalar: INT, BOOL, or a one-element DENSE of integer type.
bool iron_ir_attr_as_i64(const iron_ir_attr_t *attr, int64_t *out);
// Enum value of `op`'s attribute `name`, or `dflt` when absent.
int32_t iron_ir_op_enum(const iron_ir_op_t *op, const char *name,
                        int32_t dflt);
// String (STRING or SYMBOL) attribute of `op`, or NULL.
const char *iron_ir_op_string(const iron_ir_op_t *op, const char *name);

// "f.py:12" for error messages; writes "<unknown>" when there is no location.
// Returns buf.
const char *iron_ir_loc_format(const iron_ir_loc_t *loc, char *buf,
                               size_t cap);

// Standard error for an op a device cannot run:
// "UNIMPLEMENTED: stablehlo.fft is not supported yet (f.py:12)" plus an
// optional detail ("for dtype f8E5M2").
iron_status_t iron_ir_op_unimplemented(const iron_ir_op_t *op,
                                       const char *detail_fmt, ...)
    IRON_PRINTF_LIKE(2, 3);

// ---------------------------------------------------------------------------
// Printer (src/ir/printer.c)

typedef struct iron_ir_print_options {
  bool print_locations;  // append `loc("f.py":3:5)` to each op
} iron_ir_print_options_t;

// Prints the module as StableHLO-like text to `out` (a FILE*). Never fails
// on valid IR; unknown attributes print as their description.
void iron_ir_module_print(const iron_ir_module_t *module,
                          const iron_ir_print_options_t *options,
                          void *file);
// Same into a malloc'ed string (caller frees). NULL on out-of-memory.
char *iron_ir_module_print_to_string(const iron_ir_module_t *module,
                                     const iron_ir_print_options_t *options);

#ifdef __cplusplus
}
#endif

#endif  // IRON_IR_IR_H_
