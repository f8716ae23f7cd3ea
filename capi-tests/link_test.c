/* A program LINKED against libnrt (-lnrt), as clients of the vendor library are: the loader
 * must find libnrt.so.1 and the version nodes NRT_2.0.0 and NRT_3.0.0 (docs/contract/abi.md §1.1:
 * a missing node aborts the process at start-up). Calls one function of each node. */
#include <string.h>

#include "check.h"
#include "nrt/nrt.h"
#include "nrt/nrt_async.h"

int main(void) {
  nrt_version_t v;
  memset(&v, 0, sizeof v);
  CHECK(nrt_get_version(&v, sizeof v) == NRT_SUCCESS && v.rt_minor == 31,
        "nrt_get_version@NRT_2.0.0 through the dynamic linker");
  nrta_seq_t seq = 0;
  CHECK(nrta_get_sequence(0, NRTA_XU_COLLECTIVES, 0, &seq) == NRT_UNINITIALIZED,
        "nrta_get_sequence@NRT_3.0.0 before nrt_init -> 13");
  return check_summary("link_test");
}
