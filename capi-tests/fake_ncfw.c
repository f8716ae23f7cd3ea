/* A firmware carrier with the wrong contract version: libnrt must refuse it at nrt_init
 * (docs/contract/carrier.md §1.2: "require result == 2"). Built with -DFAKE_VERSION=<n>. */
#include <stdint.h>
#ifndef FAKE_VERSION
#define FAKE_VERSION 3
#endif
int libncfw_get_version(void) { return FAKE_VERSION; }
int libncfw_get_image(uint32_t arch_id, void *out) { (void)arch_id; (void)out; return 2; }
int libncfw_ctx_log(const void *ctx, char *buf, const char *name, uint32_t arch_id) {
  (void)ctx; (void)buf; (void)name; (void)arch_id;
  return 22;
}
