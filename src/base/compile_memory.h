// Compile-time memory accounting (issue 13). A compile opens a budget on
// its thread (iron_compile_memory_begin/end, nested opens share the
// outermost); the structures a compile builds in proportion to the
// program's declared sizes (materialized constants, kernel tables such as
// FFT twiddles and convolution index tables) reserve their bytes before
// they are built, and the compile fails with RESOURCE_EXHAUSTED naming the
// structure and the limit when the total would pass the limit:
// IRON_COMPILE_MEMORY_LIMIT bytes (a plain decimal number, read at each
// outermost begin; default 16 GiB, also for values that are not a number;
// 0 = no limit). Reservations are never returned before the
// compile ends: what a compile keeps (constants, tables) stays charged,
// and what it frees early is a small part. Everything else a compile
// allocates is proportional to the artifact's size (the IR, plan steps,
// generated sources) and is not counted.
// Thread-safety: the budget is thread-local; compiles on different threads
// have independent budgets.
#ifndef IRON_BASE_COMPILE_MEMORY_H_
#define IRON_BASE_COMPILE_MEMORY_H_

#include <stdint.h>

#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IRON_COMPILE_MEMORY_DEFAULT_LIMIT ((int64_t)16 << 30)

// Opens (or, when one is open on this thread, joins) a compile budget.
void iron_compile_memory_begin(void);
// Closes what the matching begin opened.
void iron_compile_memory_end(void);

// Charges `bytes` for `what` (e.g. "constant of 4294967296 bytes" or
// "stablehlo.fft twiddle tables") to this thread's budget. OK when no
// budget is open or the limit is 0; RESOURCE_EXHAUSTED otherwise when the
// budget's total would pass the limit (nothing is charged then).
iron_status_t iron_compile_memory_reserve(uint64_t bytes, const char *what);

// Bytes charged to this thread's open budget (0 when none is open).
int64_t iron_compile_memory_used(void);

#ifdef __cplusplus
}
#endif

#endif  // IRON_BASE_COMPILE_MEMORY_H_
