/* The library swap for a client that opens the runtime by absolute path, as some frameworks do
 * (dlopen("/opt/aws/neuron/lib/libnrt.so.1")): argv[1] is that path (here, the aborting
 * stand-in's). It resolves nrt_get_version and prints rt_detail. Run directly it reaches the
 * stand-in, which aborts; under shim/opennrt-run --preload the dlopen interposer
 * (cdylib/preload) hands it OpenNRT's libnrt.so.1, which names itself in rt_detail. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "nrt/nrt.h"
#include "nrt/nrt_version.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: swap_dlopen /abs/path/libnrt.so.1\n");
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "swap_dlopen: dlopen(%s): %s\n", argv[1], dlerror());
    return 1;
  }
  NRT_STATUS (*get_version)(nrt_version_t *, size_t) =
      (NRT_STATUS(*)(nrt_version_t *, size_t))dlsym(h, "nrt_get_version");
  NRT_STATUS (*init)(nrt_framework_type_t, const char *, const char *) =
      (NRT_STATUS(*)(nrt_framework_type_t, const char *, const char *))dlsym(h, "nrt_init");
  if (!get_version || !init) {
    fprintf(stderr, "swap_dlopen: missing symbols\n");
    return 1;
  }
  /* The stand-in aborts in nrt_init, which tells the two libraries apart. */
  if (init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") != NRT_SUCCESS) {
    fprintf(stderr, "swap_dlopen: nrt_init failed\n");
    return 1;
  }
  nrt_version_t v;
  memset(&v, 0, sizeof v);
  if (get_version(&v, sizeof v) != NRT_SUCCESS) return 1;
  printf("runtime: %s\n", v.rt_detail);
  return 0;
}
