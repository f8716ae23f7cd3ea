/* A stand-in for the vendor's libnrt.so.1: the same SONAME and version nodes (docs/contract/abi.md
 * §1.1), and every symbol swap_prog needs, each of which aborts. A program linked against it
 * records DT_NEEDED libnrt.so.1 and requirements on NRT_2.0.0 / NRT_3.0.0, exactly as if it
 * had been linked against the vendor library; run directly it dies in the first call. Only
 * the symbols matter to the linker, so the functions take no parameters here.
 *
 * Built by capi-tests/swap/run.sh with stand_in_libnrt.map. */
#include <stdio.h>
#include <stdlib.h>

static void stand_in_called(const char *name) {
  fprintf(stderr, "stand-in libnrt.so.1: %s called; this is not a runtime, aborting\n", name);
  abort();
}

#define STAND_IN(name) \
  void name(void);     \
  void name(void) { stand_in_called(#name); }

/* NRT_2.0.0 */
STAND_IN(nrt_init)
STAND_IN(nrt_close)
STAND_IN(nrt_get_version)
STAND_IN(nrt_cc_global_comm_init)
STAND_IN(nrt_tensor_allocate)
STAND_IN(nrt_tensor_free)
STAND_IN(nrt_tensor_read)
STAND_IN(nrt_tensor_write)
/* NRT_3.0.0 */
STAND_IN(nrta_cc_prepare)
STAND_IN(nrta_cc_schedule)
STAND_IN(nrta_is_completed)
