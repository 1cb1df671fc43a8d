// Tuple forwarding: an IR pass run before planning. stablehlo.tuple packs
// values and get_tuple_element unpacks them; when the element comes from a
// tuple built in the same function, the get_tuple_element's uses are
// rewritten to the packed value itself and both ops disappear (tuples never
// exist at run time). Tuples that cross a function, loop or return boundary
// are left in place, and the planner refuses their tuple-typed values
// ("... is not supported yet with type tuple<...>").
#ifndef IRON_COMPILER_TUPLE_FORWARD_H_
#define IRON_COMPILER_TUPLE_FORWARD_H_

#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Rewrites every function of `module` in place. Fails only when out of
// memory or on a get_tuple_element whose index is out of range.
iron_status_t iron_compiler_tuple_forward(iron_ir_module_t *module);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_TUPLE_FORWARD_H_
