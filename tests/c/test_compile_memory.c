// The compile-memory budget (src/base/compile_memory.h): reservations
// outside a compile are free, inside one they add up to the limit from
// IRON_COMPILE_MEMORY_LIMIT (read when the outermost budget opens), nested
// opens share the outermost budget, and a refusal charges nothing.
#include <stdlib.h>
#include <string.h>

#include "base/compile_memory.h"
#include "test.h"

static void test_outside_a_compile(void) {
  CHECK_OK(iron_compile_memory_reserve((uint64_t)1 << 62, "anything"));
  CHECK(iron_compile_memory_used() == 0);
}

static void test_limit(void) {
  setenv("IRON_COMPILE_MEMORY_LIMIT", "1000", 1);
  iron_compile_memory_begin();
  CHECK_OK(iron_compile_memory_reserve(600, "a"));
  iron_status_t st = iron_compile_memory_reserve(500, "the table of b");
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_RESOURCE_EXHAUSTED);
  CHECK(st && strstr(iron_status_message(st),
                     "compile memory limit exceeded: the table of b needs "
                     "500 bytes, 600 of IRON_COMPILE_MEMORY_LIMIT=1000 are "
                     "in use") != NULL);
  iron_status_free(st);
  CHECK(iron_compile_memory_used() == 600);  // the refusal charged nothing
  // A nested compile (a callback compiling) joins the outer budget.
  setenv("IRON_COMPILE_MEMORY_LIMIT", "1000000", 1);
  iron_compile_memory_begin();
  CHECK_OK(iron_compile_memory_reserve(400, "c"));
  st = iron_compile_memory_reserve(1, "d");
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_RESOURCE_EXHAUSTED);
  iron_status_free(st);
  iron_compile_memory_end();
  CHECK(iron_compile_memory_used() == 1000);
  st = iron_compile_memory_reserve(UINT64_MAX, "e");  // no overflow
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_RESOURCE_EXHAUSTED);
  iron_status_free(st);
  iron_compile_memory_end();
  CHECK(iron_compile_memory_used() == 0);
  // The next compile reads the limit again and starts from zero.
  iron_compile_memory_begin();
  CHECK_OK(iron_compile_memory_reserve(999999, "f"));
  iron_compile_memory_end();
}

static void test_no_limit_and_default(void) {
  setenv("IRON_COMPILE_MEMORY_LIMIT", "0", 1);
  iron_compile_memory_begin();
  CHECK_OK(iron_compile_memory_reserve((uint64_t)1 << 62, "huge"));
  CHECK_OK(iron_compile_memory_reserve((uint64_t)1 << 62, "huge again"));
  iron_compile_memory_end();
  setenv("IRON_COMPILE_MEMORY_LIMIT", "4GiB", 1);  // not a number: default
  iron_compile_memory_begin();
  CHECK_OK(iron_compile_memory_reserve(IRON_COMPILE_MEMORY_DEFAULT_LIMIT, "x"));
  iron_status_t st = iron_compile_memory_reserve(1, "y");
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_RESOURCE_EXHAUSTED);
  iron_status_free(st);
  iron_compile_memory_end();
}

static const iron_test_case_t kTests[] = {
    {"outside_a_compile", test_outside_a_compile},
    {"limit", test_limit},
    {"no_limit_and_default", test_no_limit_and_default},
};

IRON_TEST_MAIN(kTests)
