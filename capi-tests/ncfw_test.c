/* ncfw_test.c: checks OpenNRT's libncfw.so through dlopen, against docs/contract/carrier.md.
 *
 *   gcc -std=c11 -Wall -Wextra -Werror ncfw_test.c -o ncfw_test -ldl
 *   ./ncfw_test path/to/libncfw.so [golden-dir]
 *
 * The golden directory defaults to capi-tests/golden (run from the repository root) or golden
 * (run from capi-tests/). The context
 * dumped by libncfw_ctx_log is built HERE, byte by byte, at the offsets of docs/contract/carrier.md §3,
 * independently of the Rust builder. Golden files hold ordered excerpts: "//" lines are
 * comments, "..." separates blocks, each block must match consecutive output lines in order. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The image structs and the status names (NCFW_OK, NCFW_ENOENT, NCFW_EINVAL, NCFW_ENOSPC); the
 * functions themselves are reached through dlopen. */
#include "ncfw/ncfw.h"
_Static_assert(sizeof(ncfw_ram_image_t) == 16, "ncfw_ram_image_t is 16 bytes (docs/contract/carrier.md 1.3)");
_Static_assert(sizeof(ncfw_image_t) == 32, "ncfw_image_t is 32 bytes");
_Static_assert(offsetof(ncfw_image_t, dram) == 0x10, "dram at +0x10");
_Static_assert(offsetof(ncfw_ram_image_t, ram_image_size) == 8, "size at +8");

typedef int (*get_version_fn)(void);
typedef int (*get_image_fn)(uint32_t, ncfw_image_t *);
typedef int (*ctx_log_fn)(const void *, char *, const char *, uint32_t);

#define LOG_BUF 0x100000u
static int passed, failed;

static void check(int ok, const char *what) {
    printf("%s: %s\n", ok ? "PASS" : "FAIL", what);
    if (ok) passed++; else failed++;
}

/* ---- the CC context, written at the spec's byte offsets ---------------------------------- */
static void p8(uint8_t *b, size_t o, uint8_t v) { b[o] = v; }
static void p16(uint8_t *b, size_t o, uint16_t v) { for (int i = 0; i < 2; i++) b[o + i] = (uint8_t)(v >> (8 * i)); }
static void p32(uint8_t *b, size_t o, uint32_t v) { for (int i = 0; i < 4; i++) b[o + i] = (uint8_t)(v >> (8 * i)); }
static void p64(uint8_t *b, size_t o, uint64_t v) { for (int i = 0; i < 8; i++) b[o + i] = (uint8_t)(v >> (8 * i)); }

struct layout { size_t mesh_n, mesh, hier, nc, dev, neff, algo, min; };
static struct layout layout_for(uint32_t arch) {
    struct layout l;
    l.mesh_n = arch == 5 ? 50 : 108;          /* 3.2.6 */
    l.mesh = 32 * 148;                        /* 3.2.1: ring_channels[32] first */
    l.hier = l.mesh + l.mesh_n * 80;
    l.nc = l.hier + 8;                        /* 3.2: neff_configs after algo_configs */
    l.dev = l.nc + 0xE08;
    l.neff = l.dev + 0x30;                    /* 3.1: 0x3060 / 0x4280 */
    l.algo = l.neff + 0x60;                   /* 3.1: 0x30C0 / 0x42E0 */
    l.min = l.algo + 0x206;                   /* 0x32C6 / 0x44E6 */
    return l;
}

/* Known values: see capi-tests/golden/ctx_log_arch12.txt for what each must print as. */
static void build_ctx(uint8_t *c, struct layout l) {
    /* 3.2.2 ring channel 0 (channel 1..31 stay zero) */
    for (int i = 0; i < 3; i++) p64(c, 0 + 8 * i, 0x1111000000000001ull + (uint64_t)i); /* next.net_idx_addrs */
    p8(c, 24, 2); p8(c, 25, 1);                                  /* next.fold_n, type */
    for (int i = 0; i < 3; i++) p64(c, 28 + 8 * i, 0x2222000000000001ull + (uint64_t)i); /* prev */
    p8(c, 28 + 24, 7); p8(c, 28 + 25, 2);                        /* prev.fold_n 7 (clamped to 3) */
    p64(c, 56, 0x00000082800010A0ull); p64(c, 64, 0x00000082800010A4ull);
    p64(c, 72, 0x00000082800010A8ull); p64(c, 80, 0x00000082800010ACull);
    p64(c, 88, 0x000000828000B000ull);                           /* kring mine */
    for (int i = 0; i < 3; i++) p64(c, 96 + 8 * i, 0x000000828000B008ull + 8u * (uint64_t)i);
    p64(c, 120, 0x00000000FD000100ull); p64(c, 128, 0x00000000FD000200ull); p32(c, 136, 0xDEADBEEFu);
    p8(c, 140, 99); p8(c, 141, 5); p8(c, 142, 2); p8(c, 143, 1); p8(c, 144, 3);
    /* 3.2.6 mesh event 0 */
    size_t m = l.mesh;
    p64(c, m + 0x00, 0x00000000C0000000ull); p64(c, m + 0x08, 0x00000000C0000008ull); p32(c, m + 0x10, 17);
    p64(c, m + 0x14, 0x00000000C1000000ull); p64(c, m + 0x1C, 0x00000000C1000008ull); p32(c, m + 0x24, 18);
    p64(c, m + 0x28, 0x00000082800E0000ull); p64(c, m + 0x30, 0x00000082800E0004ull);
    p64(c, m + 0x38, 0x00000082800E0008ull); p64(c, m + 0x40, 0x00000082800E000Cull);
    p32(c, m + 0x48, 123456); p8(c, m + 0x4C, 2); p8(c, m + 0x4D, 1); p8(c, m + 0x4E, 0); p8(c, m + 0x4F, 1);
    p32(c, m + 49 * 80 + 0x48, 4949);                            /* event 49: present on every arch */
    p64(c, l.hier, 0x00000000DEADBEEFull);                       /* 3.2.1 hierarchical */
    /* 3.2.7 neff_configs */
    size_t n = l.nc;
    p32(c, n + 0, 3); p32(c, n + 4, 0xF0);                       /* dma_alloc_bitmap[0] */
    p32(c, n + 56, 9); p32(c, n + 60, 0x80000000u);              /* dma_alloc_bitmap[7] */
    for (int i = 0; i < 6; i++) p64(c, n + 0x860 + 8 * i, 0x0000008280000000ull + 0x1000ull * (uint64_t)i);
    p64(c, n + 0x890, 0x00000082800F0000ull);
    /* 3.2.8-3.2.10 barrier: union at +0x898; host view first 16 bytes */
    size_t bc = n + 0x898;
    p64(c, bc + 0x00, 0x1122334455667788ull);                    /* host barrier_start */
    p64(c, bc + 0x08, 0x99AABBCCDDEEFF00ull);                    /* host barrier_done */
    size_t s3 = bc + 3 * 0x34;                                   /* device step 3 */
    p16(c, s3 + 0, 7); p16(c, s3 + 2, 8);
    for (int i = 0; i < 4; i++) p64(c, s3 + 4 + 8 * i, 0x0000008280003000ull + (uint64_t)i);
    for (int i = 0; i < 4; i++) p32(c, s3 + 0x24 + 4 * i, (uint32_t)(i + 1));
    for (int i = 0; i < 4; i++) p64(c, bc + 0xD0 + 8 * i, 0x0000008280004000ull + 4u * (uint64_t)i);
    p64(c, bc + 0xF0, 0x00000000FE000100ull); p64(c, bc + 0xF8, 0x00000000FE000200ull); p32(c, bc + 0x100, 9);
    p64(c, bc + 0x104, 0x0000008280005000ull);                   /* unaligned u64 */
    p32(c, bc + 0x10C, 65); p32(c, bc + 0x110, 0x1000); p32(c, bc + 0x114, 2); p32(c, bc + 0x118, 48);
    p32(c, bc + 0x11C, 99999);                                   /* total_desc_n: hidden */
    p16(c, bc + 0x120, 0x8001); p8(c, bc + 0x122, 200);
    p8(c, bc + 0x124, 0xFF);                                     /* gate: only bit 0 counts */
    /* 3.2.11 basic_block_configs at +0x9C0 */
    size_t bb = n + 0x9C0;
    for (int i = 0; i < 3; i++) { p16(c, bb + 4 * i, (uint16_t)(10 * (i + 1))); p8(c, bb + 4 * i + 2, (uint8_t)(i + 1)); p8(c, bb + 4 * i + 3, 0x77); }
    p16(c, bb + 16, 55);                                         /* after the terminator: not dumped */
    p64(c, bb + 0x400, 0x000000828000505Cull);
    p64(c, bb + 0x408, 0x1234); p32(c, bb + 0x410, 77);         /* printed as field addresses */
    p64(c, n + 0xDD8, 0x0000008280001000ull); p64(c, n + 0xDE0, 0x0000008280001004ull);
    p64(c, n + 0xDE8, 0x0000008280001008ull); p64(c, n + 0xDF0, 0x000000828000100Cull);
    p64(c, n + 0xDF8, 0x0000008280001010ull);
    p32(c, n + 0xE00, 12); p16(c, n + 0xE04, 0xFFFF); p8(c, n + 0xE06, 4); p8(c, n + 0xE07, 0x07);
    /* 3.2.12 dev_configs */
    size_t d = l.dev;
    p64(c, d + 0x00, 0x00000000AB000000ull); p64(c, d + 0x08, 0x00000000AB000008ull);
    p64(c, d + 0x10, 0x00000000AB000010ull); p64(c, d + 0x18, 0x00000000AB000018ull);
    p32(c, d + 0x20, 42); p64(c, d + 0x24, 0x0102030405060708ull);
    p8(c, d + 0x2C, 0xA7); p8(c, d + 0x2D, 0xF2);
    /* 3.3-3.6 runtime neff */
    size_t r = l.neff;
    const uint8_t slot[8] = {0x03, 0xB0, 0x1E, 0x99, 0x21, 0x00, 0x00, 0x80};
    memcpy(c + r, slot, 8);
    p64(c, r + 0x08, 0x0000008280006000ull); p64(c, r + 0x10, 0x0000008280006008ull);
    p32(c, r + 0x18, 0xCAFE); p8(c, r + 0x1C, 1);
    for (int i = 0; i < 6; i++) p64(c, r + 0x20 + 8 * i, 0x0000008290000000ull + 0x100ull * (uint64_t)i);
    p64(c, r + 0x50, 0x00000082900F0000ull); p32(c, r + 0x58, 9); p8(c, r + 0x5C, 1);
    /* 3.7 runtime algo */
    size_t a = l.algo;
    p16(c, a + 0, 1); p16(c, a + 2, 2); p16(c, a + 4, 3); p16(c, a + 6, 4); p16(c, a + 8, 5);
    p32(c, a + 0xA, 0xEEEEEEEEu); p8(c, a + 0xE, 6); p8(c, a + 0xF, 7);
    p16(c, a + 31 * 16, 31);
    p8(c, a + 0x200, 3); p8(c, a + 0x201, 0xEE); p16(c, a + 0x204, 0x0102);
}

/* ---- golden excerpts ---------------------------------------------------------------------- */
static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* Split text in place into lines (without '\n'); returns the count. */
static size_t split_lines(char *text, char ***out) {
    size_t cap = 1024, n = 0;
    char **v = malloc(cap * sizeof *v);
    for (char *p = text; p && *p;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        if (n == cap) { cap *= 2; v = realloc(v, cap * sizeof *v); }
        v[n++] = p;
        p = nl ? nl + 1 : NULL;
    }
    *out = v;
    return n;
}

/* Replace the placeholders of a golden line; returns a static buffer. */
static const char *subst(const char *g, const char *pbase, const char *ptotal) {
    static char buf[512];
    const char *ph[2] = {"@PRING_BASE_ADDR@", "@PRING_TOTAL_DESC_NUM@"};
    const char *val[2] = {pbase, ptotal};
    snprintf(buf, sizeof buf, "%s", g);
    for (int k = 0; k < 2; k++) {
        char *at = strstr(buf, ph[k]);
        if (at) {
            char tail[512];
            snprintf(tail, sizeof tail, "%s", at + strlen(ph[k]));
            snprintf(at, sizeof buf - (size_t)(at - buf), "%s%s", val[k], tail);
        }
    }
    return buf;
}

/* Blocks are runs of non-comment lines separated by a line "..."; each block must match
 * consecutive output lines, after the previous block's match. */
static void check_golden(const char *path, char *output, const char *pbase, const char *ptotal) {
    char *g = read_file(path);
    char msg[600];
    if (!g) { snprintf(msg, sizeof msg, "golden file %s is readable", path); check(0, msg); return; }
    char **gl, **ol;
    size_t gn = split_lines(g, &gl), on = split_lines(output, &ol);
    size_t pos = 0, gi = 0, blockno = 0;
    while (gi < gn) {
        const char *blk[400];
        size_t bn = 0;
        size_t first_line = gi + 1;
        for (; gi < gn && strcmp(gl[gi], "...") != 0; gi++)
            if (strncmp(gl[gi], "//", 2) != 0 && bn < 400) blk[bn++] = gl[gi];
        gi++; /* skip "..." */
        if (bn == 0) continue;
        blockno++;
        size_t found = (size_t)-1;
        for (size_t s = pos; s + bn <= on && found == (size_t)-1; s++) {
            size_t k = 0;
            while (k < bn && strcmp(ol[s + k], subst(blk[k], pbase, ptotal)) == 0) k++;
            if (k == bn) found = s;
        }
        snprintf(msg, sizeof msg, "%s block %zu (golden line %zu, %zu lines) found in order: %.60s", path, blockno, first_line, bn, blk[0]);
        check(found != (size_t)-1, msg);
        if (found != (size_t)-1) pos = found + bn;
    }
    free(gl); free(ol); free(g);
}

static size_t count_str(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s path/to/libncfw.so [golden-dir]\n", argv[0]); return 2; }
    const char *gdir = argv[2];
    if (argc <= 2) {
        FILE *probe = fopen("capi-tests/golden/ctx_log_arch12.txt", "rb");
        gdir = probe ? "capi-tests/golden" : "golden";
        if (probe) fclose(probe);
    }
    char msg[512];
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    check(h != NULL, "dlopen(libncfw.so) by path");
    if (!h) { fprintf(stderr, "%s\n", dlerror()); printf("%d passed, %d failed\n", passed, failed); return 1; }
    get_version_fn get_version; get_image_fn get_image; ctx_log_fn ctx_log;
    *(void **)&get_version = dlsym(h, "libncfw_get_version");
    *(void **)&get_image = dlsym(h, "libncfw_get_image");
    *(void **)&ctx_log = dlsym(h, "libncfw_ctx_log");
    check(get_version && get_image && ctx_log, "dlsym of the three exports");
    if (!(get_version && get_image && ctx_log)) { printf("%d passed, %d failed\n", passed, failed); return 1; }

    /* 1.4 */
    check(get_version() == 2, "libncfw_get_version() == 2");

    /* 1.5 / 2.3 */
    const uint32_t keys[4] = {5, 12, 20, 28};
    const uint64_t dram_sz[4] = {0x36C0, 0x4E00, 0x4E00, 0x4E00};
    for (int i = 0; i < 4; i++) {
        ncfw_image_t img;
        memset(&img, 0xCC, sizeof img);
        int rc = get_image(keys[i], &img);
        snprintf(msg, sizeof msg, "get_image(%u) == NCFW_OK", keys[i]); check(rc == NCFW_OK, msg);
        snprintf(msg, sizeof msg, "get_image(%u): non-NULL pointers", keys[i]);
        check(img.iram.ram_image != NULL && img.dram.ram_image != NULL, msg);
        snprintf(msg, sizeof msg, "get_image(%u): non-zero sizes, upper 32 bits zero", keys[i]);
        check(img.iram.ram_image_size && img.dram.ram_image_size && !(img.iram.ram_image_size >> 32) && !(img.dram.ram_image_size >> 32), msg);
        snprintf(msg, sizeof msg, "get_image(%u): DRAM size 0x%llX", keys[i], (unsigned long long)dram_sz[i]);
        check(img.dram.ram_image_size == dram_sz[i], msg);
        snprintf(msg, sizeof msg, "get_image(%u): OpenNRT IRAM magic", keys[i]);
        check(memcmp(img.iram.ram_image, "ONRTIRAM", 8) == 0, msg);
    }
    check(get_image(12, NULL) == NCFW_EINVAL, "get_image(12, NULL) == NCFW_EINVAL");
    check(get_image(36, NULL) == NCFW_EINVAL, "get_image(36, NULL) == NCFW_EINVAL (NULL checked before the key)");
    const uint32_t bad[5] = {0, 4, 6, 36, 0xFFFFFFFFu};
    for (int i = 0; i < 5; i++) {
        ncfw_image_t img, before;
        memset(&img, 0x5A, sizeof img);
        memcpy(&before, &img, sizeof img);
        int rc = get_image(bad[i], &img);
        snprintf(msg, sizeof msg, "get_image(0x%X) == NCFW_ENOENT and out untouched", bad[i]);
        check(rc == NCFW_ENOENT && memcmp(&img, &before, sizeof img) == 0, msg);
    }

    /* 1.6 error paths */
    char *buf = malloc(LOG_BUF + 1);
    uint8_t *ctx = calloc(1, 0x44E6);
    const char *model = "golden-model";
    memset(buf, 0x55, LOG_BUF);
    check(ctx_log(ctx, buf, model, 36) == NCFW_EINVAL, "ctx_log(arch 36) == NCFW_EINVAL");
    check(ctx_log(ctx, buf, model, 0) == NCFW_EINVAL, "ctx_log(arch 0) == NCFW_EINVAL");
    check(ctx_log(NULL, NULL, NULL, 6) == NCFW_EINVAL, "ctx_log(unknown arch, all NULL) == NCFW_EINVAL");
    size_t untouched = 0;
    for (size_t i = 0; i < LOG_BUF; i++) untouched += (unsigned char)buf[i] == 0x55;
    check(untouched == LOG_BUF, "ctx_log(unknown arch) leaves the buffer untouched");
    check(ctx_log(NULL, buf, model, 12) == NCFW_EINVAL, "ctx_log(NULL ctx) == NCFW_EINVAL");
    check(ctx_log(ctx, NULL, model, 12) == NCFW_EINVAL, "ctx_log(NULL out_buf) == NCFW_EINVAL");
    check(ctx_log(ctx, buf, NULL, 12) == NCFW_EINVAL, "ctx_log(NULL model_name) == NCFW_EINVAL");

    /* 1.6 / 4: dumps of contexts built here */
    const uint32_t gold_arch[2] = {12, 5};
    for (int ai = 0; ai < 2; ai++) {
        uint32_t arch = gold_arch[ai];
        struct layout l = layout_for(arch);
        memset(ctx, 0, 0x44E6);
        build_ctx(ctx, l);
        memset(buf, 0x55, LOG_BUF);
        int rc = ctx_log(ctx, buf, model, arch);
        snprintf(msg, sizeof msg, "ctx_log(arch %u) == NCFW_OK", arch); check(rc == NCFW_OK, msg);
        snprintf(msg, sizeof msg, "ctx_log(arch %u): buffer zeroed to 1 MiB", arch);
        check(buf[LOG_BUF - 1] == 0 && memchr(buf, 0, LOG_BUF) != NULL, msg);
        snprintf(msg, sizeof msg, "ctx_log(arch %u): %zu mesh events", arch, l.mesh_n);
        check(count_str(buf, "\"wait_event\": ") == l.mesh_n, msg);
        snprintf(msg, sizeof msg, "ctx_log(arch %u): 64 channel rows (32 static + 32 runtime)", arch);
        check(count_str(buf, "\"channel_id\": ") == 64, msg);
        snprintf(msg, sizeof msg, "ctx_log(arch %u): hidden fields not dumped", arch);
        check(!strstr(buf, "safe_mode") && !strstr(buf, "\"total_desc_n\"") && !strstr(buf, "function_n") && !strstr(buf, ": 99999"), msg);
        char pbase[64], ptotal[64];
        snprintf(pbase, sizeof pbase, "%p", (void *)(ctx + l.nc + 0x9C0 + 0x408));
        snprintf(ptotal, sizeof ptotal, "%p", (void *)(ctx + l.nc + 0x9C0 + 0x410));
        char path[1024];
        snprintf(path, sizeof path, "%s/ctx_log_arch%u.txt", gdir, arch);
        check_golden(path, buf, pbase, ptotal);
    }

    /* 1.6: truncation with a model name longer than 1 MiB → 28; per-call flag */
    char *longname = malloc(LOG_BUF + 16);
    memset(longname, 'x', LOG_BUF + 15);
    longname[LOG_BUF + 15] = 0;
    check(ctx_log(ctx, buf, longname, 5) == NCFW_ENOSPC, "ctx_log(model name > 1 MiB) == NCFW_ENOSPC");
    check(buf[LOG_BUF - 1] == 0 && buf[LOG_BUF - 2] == 'x', "truncated output is NUL-terminated at 1 MiB");
    check(ctx_log(ctx, buf, model, 5) == NCFW_OK, "next call returns NCFW_OK (per-call truncation flag)");

    free(longname); free(ctx); free(buf);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
