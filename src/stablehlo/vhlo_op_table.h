// Per-op-version schema of the VHLO dialect: the names of an op's inherent
// attributes in the order the bytecode stores its properties (sorted by
// name, as ODS writes them). Internal to the reader.
#ifndef IRON_STABLEHLO_VHLO_OP_TABLE_H_
#define IRON_STABLEHLO_VHLO_OP_TABLE_H_

#include <stddef.h>

typedef struct iron_vhlo_op_schema {
  const char *name;  // "dot_general_v2" (no "vhlo." prefix)
  unsigned num_props;
  const char *const *props;  // num_props names, sorted
} iron_vhlo_op_schema_t;

// Looks up a versioned VHLO op name without the dialect prefix
// ("add_v1"); NULL when the op/version is not known to us.
const iron_vhlo_op_schema_t *iron_vhlo_op_schema_lookup(const char *name,
                                                        size_t len);

#endif  // IRON_STABLEHLO_VHLO_OP_TABLE_H_
