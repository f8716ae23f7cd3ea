/* A stand-in firmware carrier (tests only): proves that the runtime uses the carrier it loads,
 * not built-in copies (docs/contract/carrier.md §1.2, §1.5, §1.6).
 *
 * It forwards to OpenNRT's own libncfw.so (path in STANDIN_NCFW_REAL, opened RTLD_LOCAL) and
 * changes two things:
 *  - libncfw_get_image: with STANDIN_NCFW_NO_RING=1 the IRAM image's dispatch entry
 *    (class 1 AlgoType, key 0 RING) names handler 0x00FF Fault instead of Ring, checksum
 *    recomputed (image format: src/ncfw/image.rs). A device that runs this carrier's image
 *    must refuse every ring cc_op at load.
 *  - libncfw_ctx_log: the real dump, with the key "stand_in_carrier": 1 inserted after the
 *    opening brace, so a hang dump written through this carrier is recognisable.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ncfw/ncfw.h"

#define IRAM_MAX (1u << 20)
#define CHECKSUM_OFF 0x3C
#define HEADER_SIZE 0x40

static void *real(const char *sym) {
  static void *h;
  if (!h) {
    const char *p = getenv("STANDIN_NCFW_REAL");
    h = p ? dlopen(p, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
      fprintf(stderr, "standin_ncfw: cannot open STANDIN_NCFW_REAL=%s\n", p ? p : "(unset)");
      return NULL;
    }
  }
  return dlsym(h, sym);
}

int libncfw_get_version(void) { return NCFW_VERSION; }

static uint32_t rd32(const uint8_t *b) { return b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24; }

static uint32_t fnv1a(const uint8_t *b, size_t n) {
  uint32_t h = 0x811C9DC5u;
  for (size_t i = 0; i < n; i++) {
    uint8_t c = (i >= CHECKSUM_OFF && i < CHECKSUM_OFF + 4) ? 0 : b[i];
    h ^= c;
    h *= 0x01000193u;
  }
  return h;
}

/* One patched IRAM copy per arch key (0..31), kept for the life of the process. */
static uint8_t *patched[32];

int libncfw_get_image(uint32_t arch_id, struct ncfw_image_t *out) {
  int (*f)(uint32_t, struct ncfw_image_t *) = (int (*)(uint32_t, struct ncfw_image_t *))real("libncfw_get_image");
  if (!f) return NCFW_EINVAL;
  int rc = f(arch_id, out);
  const char *no_ring = getenv("STANDIN_NCFW_NO_RING");
  if (rc != NCFW_OK || !no_ring || strcmp(no_ring, "1") != 0 || arch_id >= 32) return rc;
  size_t n = (size_t)out->iram.ram_image_size;
  if (n < HEADER_SIZE || n > IRAM_MAX) return NCFW_EINVAL;
  if (!patched[arch_id]) {
    uint8_t *b = malloc(n);
    if (!b) return NCFW_EINVAL;
    memcpy(b, out->iram.ram_image, n);
    uint32_t off = rd32(b + 0x24), count = rd32(b + 0x28), size = rd32(b + 0x2C);
    for (uint32_t i = 0; i < count && off + (i + 1) * size <= n; i++) {
      uint8_t *e = b + off + i * size;
      if (e[0] == 1 && e[1] == 0) { /* AlgoType RING -> Fault */
        e[2] = 0xFF;
        e[3] = 0x00;
      }
    }
    uint32_t sum = fnv1a(b, n);
    memcpy(b + CHECKSUM_OFF, &sum, 4); /* little-endian host */
    patched[arch_id] = b;
  }
  out->iram.ram_image = patched[arch_id];
  return rc;
}

int libncfw_ctx_log(const void *ctx, char *out_buf, const char *model_name, uint32_t arch_id) {
  int (*f)(const void *, char *, const char *, uint32_t) =
      (int (*)(const void *, char *, const char *, uint32_t))real("libncfw_ctx_log");
  if (!f) return NCFW_EINVAL;
  int rc = f(ctx, out_buf, model_name, arch_id);
  if (rc != NCFW_OK || !out_buf) return rc;
  const char *mark = "\"stand_in_carrier\": 1, ";
  char *brace = strchr(out_buf, '{');
  size_t len = strlen(out_buf), m = strlen(mark);
  if (brace && len + m + 1 <= (1u << 20)) {
    memmove(brace + 1 + m, brace + 1, len - (size_t)(brace + 1 - out_buf) + 1);
    memcpy(brace + 1, mark, m);
  }
  return rc;
}
