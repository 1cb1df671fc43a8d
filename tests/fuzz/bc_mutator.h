// A structure-aware mutator for StableHLO portable artifacts (MLIR bytecode
// of VHLO), for the libFuzzer targets. There is no bytecode writer in
// ironjax, so this is a rewriter: it parses the container into its sections
// and the attribute/type entries, changes one entry (a tensor type's dims or
// rank, an element type, an integer/enum/bool/dense attribute, an op's
// properties, an op name), and re-serializes the sections it touched with
// their sizes and offset tables recomputed. A change to one type entry
// changes every value of that type at once, so a mutated program usually
// stays well formed (a whole element-wise chain changes shape or dtype
// together) and reaches the verifier, the planner and the kernels instead
// of stopping in the reader.
#ifndef IRON_TESTS_FUZZ_BC_MUTATOR_H_
#define IRON_TESTS_FUZZ_BC_MUTATOR_H_

#include <stddef.h>
#include <stdint.h>

// Mutates the artifact in data[0, size) in place (at most max_size bytes)
// with one structural change chosen by `seed`. Returns the new size, or 0
// when the input does not parse as a bytecode container or the chosen change
// does not apply (the caller then mutates bytes instead). Deterministic for
// a given (input, seed).
size_t iron_fuzz_bc_mutate(uint8_t *data, size_t size, size_t max_size,
                           unsigned int seed);

// Parses the artifact and writes every section it models back from the
// parse (strings, dialects, attribute/type entries and offsets,
// properties) into out[0, cap). Returns the size, 0 when it does not parse.
// A faithful rewriter gives back the input byte for byte (the unit test of
// this file checks that over the corpus).
size_t iron_fuzz_bc_rewrite(const uint8_t *data, size_t size, uint8_t *out,
                            size_t cap);

#endif  // IRON_TESTS_FUZZ_BC_MUTATOR_H_
