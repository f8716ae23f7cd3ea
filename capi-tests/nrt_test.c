/* libnrt.so.1 loaded by path with dlopen: version, status strings, core counts, the
 * lifecycle guard of docs/contract/abi.md §5.1 (13 before init and after close, re-init allowed,
 * 1 in a child forked after init), the libncfw gate of docs/contract/carrier.md §1.2.
 *
 * usage: nrt_test <path/to/libnrt.so.1> <path/to/fake_ncfw_v3.so>
 * The real libncfw.so must sit next to libnrt.so.1 (found through RUNPATH=$ORIGIN). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "nrt/nrt.h"
#include "nrt/nrt_async.h"

#define SYM(h, name) ((__typeof__(&name))dlsym(h, #name))

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s <libnrt.so.1> <fake_ncfw_v3.so>\n", argv[0]);
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  CHECK(h != NULL, "dlopen %s (%s)", argv[1], h ? "" : dlerror());
  if (!h) return check_summary("nrt_test");

  __typeof__(&nrt_init) init = SYM(h, nrt_init);
  __typeof__(&nrt_close) close_ = SYM(h, nrt_close);
  __typeof__(&nrt_get_version) get_version = SYM(h, nrt_get_version);
  __typeof__(&nrt_get_status_as_str) status_str = SYM(h, nrt_get_status_as_str);
  __typeof__(&nrt_get_total_nc_count) total_nc = SYM(h, nrt_get_total_nc_count);
  __typeof__(&nrt_get_total_vnc_count) total_vnc = SYM(h, nrt_get_total_vnc_count);
  __typeof__(&nrt_get_visible_nc_count) visible_nc = SYM(h, nrt_get_visible_nc_count);
  __typeof__(&nrt_get_visible_vnc_count) visible_vnc = SYM(h, nrt_get_visible_vnc_count);
  __typeof__(&nrt_get_instance_info) instance_info = SYM(h, nrt_get_instance_info);
  __typeof__(&nrt_tensor_allocate) tensor_allocate = SYM(h, nrt_tensor_allocate);
  __typeof__(&nrta_get_sequence) get_sequence = SYM(h, nrta_get_sequence);
  __typeof__(&nrt_barrier) barrier = SYM(h, nrt_barrier);
  CHECK(init && close_ && get_version && status_str && total_nc && total_vnc && visible_nc &&
            visible_vnc && instance_info && tensor_allocate && get_sequence && barrier,
        "every symbol used here resolves with dlsym");
  if (check_failed) return check_summary("nrt_test");

  /* §3.1 nrt_get_version: no guard; < 160 -> 1; NULL -> 2; git_hash only when size > 200. */
  nrt_version_t v;
  memset(&v, 0x5a, sizeof v);
  CHECK(get_version(&v, 159) == NRT_FAILURE, "nrt_get_version(size 159) == NRT_FAILURE");
  CHECK(get_version(NULL, sizeof v) == NRT_INVALID, "nrt_get_version(NULL) == NRT_INVALID");
  CHECK(get_version(&v, sizeof v) == NRT_SUCCESS, "nrt_get_version before nrt_init succeeds");
  CHECK(v.rt_major == 2 && v.rt_minor == 31 && v.rt_patch == 24 && v.rt_maintenance == 0,
        "version numbers 2.31.24.0 (got %llu.%llu.%llu.%llu)", (unsigned long long)v.rt_major,
        (unsigned long long)v.rt_minor, (unsigned long long)v.rt_patch,
        (unsigned long long)v.rt_maintenance);
  CHECK(strncmp(v.rt_detail, "libnrt version 2.31.24.0", 24) == 0, "rt_detail = \"%s\"", v.rt_detail);
  CHECK(strlen(v.git_hash) == 40, "git_hash has 40 characters (%s)", v.git_hash);

  /* §2.1 status strings (exported as a recommended extra, never NULL). */
  static const struct { int code; const char *name; } statuses[] = {
      {0, "NRT_SUCCESS"}, {1, "NRT_FAILURE"}, {2, "NRT_INVALID"}, {3, "NRT_INVALID_HANDLE"},
      {4, "NRT_RESOURCE"}, {5, "NRT_TIMEOUT"}, {6, "NRT_HW_ERROR"}, {7, "NRT_QUEUE_FULL"},
      {9, "NRT_LOAD_NOT_ENOUGH_NC"}, {10, "NRT_UNSUPPORTED_NEFF_VERSION"},
      {11, "NRT_FAIL_HOST_MEM_ALLOC"}, {13, "NRT_UNINITIALIZED"}, {14, "NRT_CLOSED"},
      {15, "NRT_QUEUE_EMPTY"}, {101, "NRT_EXEC_UNIT_UNRECOVERABLE"}, {1002, "NRT_EXEC_BAD_INPUT"},
      {1003, "NRT_EXEC_COMPLETED_WITH_NUM_ERR"}, {1004, "NRT_EXEC_COMPLETED_WITH_ERR"},
      {1005, "NRT_EXEC_NC_BUSY"}, {1006, "NRT_EXEC_OOB"}, {1100, "NRT_COLL_PENDING"},
      {1200, "NRT_EXEC_HW_ERR_COLLECTIVES"}, {1201, "NRT_EXEC_HW_ERR_HBM_UE"},
      {1202, "NRT_EXEC_HW_ERR_NC_UE"}, {1203, "NRT_EXEC_HW_ERR_DMA_ABORT"},
      {1204, "NRT_EXEC_SW_NQ_OVERFLOW"}, {1205, "NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE"},
      {1206, "NRT_NETWORK_PROXY_FAILURE"},
  };
  int all_match = 1;
  for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
    const char *s = status_str((NRT_STATUS)statuses[i].code);
    if (!s || strcmp(s, statuses[i].name) != 0) {
      all_match = 0;
      printf("# status %d -> %s, expected %s\n", statuses[i].code, s ? s : "(null)", statuses[i].name);
    }
  }
  CHECK(all_match, "nrt_get_status_as_str names all 28 statuses");
  CHECK(status_str((NRT_STATUS)8) != NULL && status_str((NRT_STATUS)-1) != NULL,
        "unknown statuses give a non-NULL string");

  /* §3.2 count getters are legal before nrt_init; default instance trn1.32xlarge = 32 cores. */
  uint32_t n = 0, m = 0;
  CHECK(total_nc(&n) == NRT_SUCCESS && n == 32, "nrt_get_total_nc_count before init = %u", n);
  CHECK(total_vnc(&m) == NRT_SUCCESS && m == n, "nrt_get_total_vnc_count is the same count");
  CHECK(total_nc(NULL) == NRT_INVALID, "NULL count pointer -> NRT_INVALID");
  setenv("NEURON_RT_VISIBLE_CORES", "2-3", 1);
  CHECK(visible_nc(&n) == NRT_SUCCESS && n == 2, "visible count from NEURON_RT_VISIBLE_CORES=2-3 = %u", n);
  CHECK(visible_vnc(&m) == NRT_SUCCESS && m == 2, "nrt_get_visible_vnc_count agrees");
  nrt_instance_info_t info;
  memset(&info, 0, sizeof info);
  CHECK(instance_info(&info, sizeof info) == NRT_SUCCESS && info.family == NRT_INSTANCE_TRN1 &&
            info.size == NRT_INSTANCE_SIZE_32XL,
        "nrt_get_instance_info: family %u size %u arch %s", info.family, info.size, info.arch_name);

  /* §5.1 guard before nrt_init: 13. */
  nrt_tensor_t *t = NULL;
  nrta_seq_t seq = 0;
  CHECK(tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", &t) == NRT_UNINITIALIZED,
        "nrt_tensor_allocate before nrt_init -> NRT_UNINITIALIZED (13)");
  CHECK(get_sequence(0, NRTA_XU_COLLECTIVES, 0, &seq) == NRT_UNINITIALIZED,
        "nrta_get_sequence before nrt_init -> 13");

  /* §5.2: a bad environment fails nrt_init with NRT_INVALID and leaves START. */
  setenv("NEURON_RT_VISIBLE_CORES", "0,2", 1);
  CHECK(init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") == NRT_INVALID,
        "nrt_init with non-contiguous NEURON_RT_VISIBLE_CORES -> NRT_INVALID");
  setenv("NEURON_RT_VISIBLE_CORES", "2-3", 1);

  /* docs/contract/carrier.md §1.2: a carrier that is missing or not version 2 fails nrt_init. */
  setenv("OPENNRT_NCFW_PATH", "/nonexistent/libncfw.so", 1);
  CHECK(init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") == NRT_FAILURE, "missing libncfw.so -> nrt_init fails (1)");
  setenv("OPENNRT_NCFW_PATH", argv[2], 1);
  CHECK(init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") == NRT_FAILURE, "libncfw version 3 is refused -> 1");
  unsetenv("OPENNRT_NCFW_PATH");
  CHECK(tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", &t) == NRT_UNINITIALIZED,
        "a failed nrt_init leaves the runtime uninitialized (13)");

  /* Init, idempotent re-init, guarded calls proceed (not-yet-implemented ones say 1). */
  CHECK(init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") == NRT_SUCCESS, "nrt_init(NO_FW, \"\", \"\") succeeds");
  CHECK(init(NRT_FRAMEWORK_TYPE_PYTORCH, "2.0", "1.0") == NRT_SUCCESS, "nrt_init again is a no-op success");
  CHECK(init(NRT_FRAMEWORK_TYPE_NO_FW, NULL, NULL) == NRT_SUCCESS, "NULL version strings are accepted");
  CHECK(visible_nc(&n) == NRT_SUCCESS && n == 2, "visible count after init = %u", n);
  CHECK(get_sequence(0, NRTA_XU_COLLECTIVES, 0, &seq) != NRT_UNINITIALIZED,
        "nrta_get_sequence after nrt_init passes the guard");

  /* §5.1: a child forked after nrt_init gets NRT_FAILURE from every call, and cannot re-init. */
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int bad = 0;
    if (tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", &t) != NRT_FAILURE) bad |= 1;
    if (init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") != NRT_FAILURE) bad |= 2;
    _exit(bad);
  }
  int wst = 0;
  waitpid(pid, &wst, 0);
  CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
        "forked child: guarded call -> 1 and nrt_init -> 1 (child exit %d)", WEXITSTATUS(wst));

  /* Close returns to START: 13 again, and nrt_init is allowed again. */
  close_();
  CHECK(tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", &t) == NRT_UNINITIALIZED,
        "after nrt_close -> NRT_UNINITIALIZED (13, spec §5.1 / §10 item 7)");
  /* docs/contract/carrier.md §1.2 "lifetime": the carrier is never closed, so its image pointers stay
   * valid; RTLD_NOLOAD finds it still mapped after nrt_close. */
  {
    void *ncfw = dlopen("libncfw.so", RTLD_NOW | RTLD_NOLOAD);
    CHECK(ncfw != NULL, "libncfw.so stays loaded after nrt_close (docs/contract/carrier.md §1.2)");
    if (ncfw) dlclose(ncfw);
  }
  close_();
  CHECK(1, "nrt_close when not initialized does nothing");
  CHECK(init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") == NRT_SUCCESS, "re-init after close succeeds");
  close_();

  dlclose(h);
  return check_summary("nrt_test");
}
