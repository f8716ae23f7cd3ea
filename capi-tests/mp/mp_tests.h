/* The test groups of mp_driver that live in mp_faults.c, mp_groups.c, mp_tensors.c and mp_chaos.c. Apart from mp_harness.h because the
 * harness is shared with capi-tests/neff_test.c, which links none of them. */
#ifndef OPENNRT_MP_TESTS_H
#define OPENNRT_MP_TESTS_H

void mp_test_kill(void);
void mp_test_errors(void);
void mp_test_groups(void);
void mp_test_tensors(void);
void mp_test_chaos(void);

#endif
