/* Minimal test reporting shared by the C tests: one line per check, and a closing
 * "N passed, M failed" line that CI reads. */
#ifndef OPENNRT_CAPI_CHECK_H
#define OPENNRT_CAPI_CHECK_H
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                        \
  do {                                                          \
    if (cond) {                                                 \
      check_passed++;                                           \
      printf("ok   - ");                                        \
    } else {                                                    \
      check_failed++;                                           \
      printf("FAIL - %s:%d: ", __FILE__, __LINE__);             \
    }                                                           \
    printf(__VA_ARGS__);                                        \
    printf("\n");                                               \
  } while (0)

static int check_summary(const char *suite) {
  printf("%s: %d passed, %d failed\n", suite, check_passed, check_failed);
  return check_failed == 0 ? 0 : 1;
}
#endif
