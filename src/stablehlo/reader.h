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

// On success *out_module owns a new module (free with
// iron_ir_module_destroy).
iron_status_t iron_stablehlo_read(const void *bytes, size_t size,
                                  iron_ir_module_t **out_module);

#endif  // IRON_STABLEHLO_READER_H_
