// A minimal test harness for C unit tests: CHECK macros that record
// failures and a main that prints "N passed, N failed".
#ifndef IRON_TESTS_TEST_H_
#define IRON_TESTS_TEST_H_

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

static int iron_test_failures_ = 0;
static int iron_test_checks_ = 0;
static const char *iron_test_current_ = "";

#define CHECK(cond)                                                        \
  do {                                                                     \
    iron_test_checks_++;                                                   \
    if (!(cond)) {                                                         \
      iron_test_failures_++;                                               \
      fprintf(stderr, "%s:%d: [%s] CHECK failed: %s\n", __FILE__,          \
              __LINE__, iron_test_current_, #cond);                        \
    }                                                                      \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                 \
  do {                                                                     \
    long long a_ = (long long)(a), b_ = (long long)(b);                    \
    iron_test_checks_++;                                                   \
    if (a_ != b_) {                                                        \
      iron_test_failures_++;                                               \
      fprintf(stderr, "%s:%d: [%s] %s == %s failed: %lld vs %lld\n",       \
              __FILE__, __LINE__, iron_test_current_, #a, #b, a_, b_);     \
    }                                                                      \
  } while (0)

#define CHECK_OK(expr)                                                     \
  do {                                                                     \
    iron_status_t s_ = (expr);                                             \
    iron_test_checks_++;                                                   \
    if (s_) {                                                              \
      iron_test_failures_++;                                               \
      fprintf(stderr, "%s:%d: [%s] %s failed: %s: %s\n", __FILE__,         \
              __LINE__, iron_test_current_, #expr,                         \
              iron_status_code_name(iron_status_code(s_)),                 \
              iron_status_message(s_));                                    \
      iron_status_free(s_);                                                \
    }                                                                      \
  } while (0)

typedef struct {
  const char *name;
  void (*fn)(void);
} iron_test_case_t;

// Usage: static const iron_test_case_t kTests[] = {{"name", fn}, ...};
//        IRON_TEST_MAIN(kTests)
#define IRON_TEST_MAIN(cases)                                              \
  int main(void) {                                                         \
    int passed = 0, failed = 0;                                            \
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {        \
      int before = iron_test_failures_;                                    \
      iron_test_current_ = cases[i].name;                                  \
      cases[i].fn();                                                       \
      if (iron_test_failures_ == before) {                                 \
        passed++;                                                          \
      } else {                                                             \
        failed++;                                                          \
        fprintf(stderr, "FAILED: %s\n", cases[i].name);                    \
      }                                                                    \
    }                                                                      \
    printf("%d passed, %d failed\n", passed, failed);                      \
    return failed ? 1 : 0;                                                 \
  }

#endif  // IRON_TESTS_TEST_H_
