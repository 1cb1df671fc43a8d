// Internal entry points of executables (tests and tools build IR by hand).
#ifndef IRON_RUNTIME_EXECUTABLE_H_
#define IRON_RUNTIME_EXECUTABLE_H_

#include "iron/iron.h"
#include "ir/ir.h"

// Like iron_executable_compile for an IR module built in memory. Takes
// ownership of `module` (destroyed on error too). `fingerprint_bytes` (may
// be NULL) are hashed for the fingerprint.
iron_status_t iron_executable_compile_module(
    iron_runtime_t *rt, iron_ir_module_t *module, const void *bytes,
    size_t size, const iron_compile_options_t *options,
    iron_executable_t **out_executable);

#endif  // IRON_RUNTIME_EXECUTABLE_H_
