// Reads a StableHLO portable artifact (MLIR bytecode, format versions 0..6,
// of the VHLO dialect with builtin/sdy/func pieces) into the iron IR, with
// every versioned VHLO op upgraded to its current form.
//
// Errors: corrupt or truncated input gives INVALID_ARGUMENT naming the byte
// offset and what was expected, e.g.
// "bytecode offset 1234: expected a varint (section 4 (IR))". Never reads out
// of bounds, never aborts (it is fuzzed). Thread-safe (no global state).
#ifndef IRON_STABLEHLO_READER_H_
#define IRON_STABLEHLO_READER_H_

#include <stddef.h>

#include "base/status.h"
#include "ir/ir.h"

// The normalized form (the same for every op version and bytecode 0..6):
// - op->attrs: the op's VHLO properties under their names, sorted by name
//   (lhs_contracting_dimensions, comparison_direction, ...; dot_general,
//   gather, scatter and convolution dimension numbers are separate
//   attributes, as in VHLO), then the discardable attributes
//   (mhlo.frontend_attributes, mhlo.backend_config ...). Fields an older op
//   version lacks are simply absent (dot_general_v1 has no algorithm
//   fields; exponential_v1 has no result_accuracy).
// - Integer lists and literals: IRON_ATTR_DENSE (i64 tensors for
//   dimensions; read them with iron_ir_op_i64_list). Splats keep one
//   element with splat = true; i1 is unpacked to one byte per element;
//   s2/s4 sign-extended, u2/u4 zero-extended to a byte.
// - Enums: IRON_ATTR_ENUM. precision_config: ARRAY of ENUM. Absent optional
//   types (dot_general accumulation_type ...): IRON_ATTR_TYPE of an
//   IRON_TYPE_OTHER "none".
// - callee (func.call) and decomposition (stablehlo.composite): SYMBOL;
//   called_computations: ARRAY of STRING.
// - vhlo.return_v1 ends a function body as IRON_OP_FUNC_RETURN, an op region
//   as IRON_OP_RETURN. vhlo.func_v1 becomes module->funcs (the module's
//   other top-level ops, e.g. sdy.mesh, are not kept).
// - sdy attributes and VHLO mesh attributes: IRON_ATTR_OPAQUE.
//   unrealized_conversion_cast / sdy ops keep their operands and results.
// - Element types are rank-0 IRON_TYPE_TENSOR types; quantized types are
//   IRON_TYPE_OTHER with a description; tensor encodings (bounds) dropped.
// - op->loc: innermost file frame (CallSiteLoc callee first, FusedLoc's
//   first file location), loc.name the outermost NameLoc text.
//
// On success *out_module owns a new module (free with
// iron_ir_module_destroy).
iron_status_t iron_stablehlo_read(const void *bytes, size_t size,
                                  iron_ir_module_t **out_module);

#endif  // IRON_STABLEHLO_READER_H_
