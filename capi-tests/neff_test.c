/* NEFF models through the public headers only, one process per rank.
 *
 *   neff_test [--real matmul_small.neff] OP:R:COUNT:FILE... [mismatch:2:COUNT:A.neff,B.neff]
 *
 * OP:R:COUNT:FILE is a NEFF written by `opennrt neff build --op OP --ranks R --count COUNT
 * --dtype fp32 -o FILE` (OP all_reduce, all_gather or all_to_all_v; docs/neff.md §2: an input
 * var `input0`, an output var `output0`, and for all_to_all_v the table `metadata0`). For each:
 *
 *   the launcher of the aws-samples spectral-DNS driver (docs/contract/abi.md §8): the parent
 *   forks R rank processes BEFORE any nrt_init and never calls into libnrt itself; rank r sets
 *   NEURON_RT_VISIBLE_CORES=r and NEURON_RT_ROOT_COMM_ID=127.0.0.1:<port> (a port nobody uses,
 *   from mp_free_port), calls nrt_init(NO_FW, "", ""), reads the file,
 *   nrt_load_collectives(buf, size, 0, 1, r, R, &m), checks nrt_get_model_tensor_info (input0
 *   and output0: usage, size, dtype fp32, shape [elements]), the model getters and the core's
 *   memory stats, allocates device tensors on vnc 0, builds the sets named input0 / output0,
 *   and then three times: writes an input whose exact result is known (element i of rank r in
 *   run k is (r+1)*(i%7) + k, small integers in fp32, so every sum is exact), fills the output
 *   with NaN bytes, nrt_execute, reads the output and compares every byte (all-reduce: the sum
 *   over ranks; all-gather: block s is rank s's input; all-to-all-v: the C program writes its
 *   metadata0 table once — rank r sends (r + 2p + 1) mod (COUNT + 1) elements of its block p
 *   to peer p, who puts them at the start of its block r — and every output element no window
 *   covers keeps its NaN fill). Then nrt_execute_repeat(2) and one
 *   nrta_execute_schedule on the compute XU, both exact; nrt_unload; nrt_close; exit 0 iff
 *   none of its checks failed. The parent waits at most 60 s (then SIGKILLs what is left),
 *   checks every exit status, and that /dev/shm holds nothing named opennrt-<port>-*.
 *
 * mismatch:2:COUNT:A,B: two fp32 all-reduce NEFFs of COUNT elements for 2 ranks whose
 *   collective sequences differ (e.g. --ops 1 and --ops 2); rank 0 loads A, rank 1 loads B:
 *   both load, and nrt_execute fails with NRT_INVALID on both ranks (the sequence check of
 *   docs/neff.md §1.3) within 15 s, well before the execution timeout.
 *
 * --real FILE: the vendor NEFF of testdata (its README). In a child with
 *   OPENNRT_INSTANCE_TYPE=trn2.48xlarge NEURON_LOGICAL_NC_CONFIG=2: nrt_load succeeds, the
 *   tensor info is exactly x, y (input, 65536 B, float16, [128,256] / [256,128]) and output0
 *   (output, 32768 B, float16, [128,128]); nrt_execute with proper sets -> NRT_FAILURE (compute
 *   the software device does not run), with y missing or x of the wrong size -> NRT_INVALID;
 *   nrt_unload -> NRT_SUCCESS, again -> NRT_INVALID_HANDLE. In another child with
 *   NEURON_LOGICAL_NC_CONFIG=1: nrt_load -> NRT_INVALID and *model left NULL.
 *
 * Always (a child of its own, NEURON_RT_VISIBLE_CORES=0): bad input never crashes:
 * a load before nrt_init; a NEFF cut to its first 1500 bytes, to its header, garbage, a good
 * header over a garbage payload, size 0, NULL bytes, a NULL out-parameter, a bad core,
 * vnc_count 2, a collective NEFF loaded without a world or into a world too small, and NULL /
 * stale handles to the other model calls: each returns its status, writes no model, and the
 * process survives to exit 0.
 *
 * The children are forked by the multi-process harness (capi-tests/mp/mp_harness.h): it sets
 * each child's environment (NEURON_RT_EXEC_TIMEOUT=20 in every one; the simulated instance only
 * where named above, never inherited), prints each child's ok/FAIL lines after its job, prefixed
 * with its name, and its stderr too when it failed. A child exits 0 iff none of its own checks
 * failed; it ends with exit(), so that in the ASan build LeakSanitizer checks every child too.
 * The parent's closing `N passed, M failed` line counts the parent's checks: one per child's
 * exit status and one per collective job's /dev/shm; the program exits 1 if any failed.
 *
 * Built with mp_harness.c, -Wall -Wextra -Werror, and again with
 * -fsanitize=address,undefined (capi-tests/run.sh). */
#define _GNU_SOURCE
#include <nrt/nrt.h>
#include <nrt/nrt_async.h>
#include <nrt/nrt_status.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mp/mp_harness.h"

#define JOB_DEADLINE_S 60
#define MAX_JOBS 16
#define RUNS 3

/* ---------------------------------------------------------------- helpers */

static uint8_t *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  uint8_t *buf = NULL;
  long n;
  *size = 0;
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
    buf = malloc((size_t)n);
    if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) *size = (size_t)n;
    else free(buf), buf = NULL;
  }
  fclose(f);
  return buf;
}

static void put_f32(uint8_t *p, float v) { memcpy(p, &v, 4); }

/* A device tensor on vnc 0 (NULL and a failed check otherwise). */
static nrt_tensor_t *device_tensor(const char *who, size_t size, const char *name) {
  nrt_tensor_t *t = NULL;
  NRT_STATUS st = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, size, name, &t);
  mp_check(st == NRT_SUCCESS && t != NULL, "%s: nrt_tensor_allocate(DEVICE, vnc 0, %zu, \"%s\") (status %d)", who, size,
           name, st);
  return st == NRT_SUCCESS ? t : NULL;
}

/* A tensor set holding `n` (name, tensor) pairs. */
static nrt_tensor_set_t *tensor_set(const char *who, int n, const char *const *names, nrt_tensor_t *const *tensors) {
  nrt_tensor_set_t *s = NULL;
  NRT_STATUS st = nrt_allocate_tensor_set(&s);
  for (int i = 0; st == NRT_SUCCESS && i < n; i++) st = nrt_add_tensor_to_tensor_set(s, names[i], tensors[i]);
  mp_check(st == NRT_SUCCESS && s != NULL, "%s: a tensor set of %d tensor(s) (status %d)", who, n, st);
  return s;
}

/* Expected entry of nrt_get_model_tensor_info. */
typedef struct {
  const char *name;
  nrt_tensor_usage_t usage;
  size_t size;
  nrt_dtype_t dtype;
  uint32_t ndim;
  uint32_t shape[4];
} want_info;

/* nrt_get_model_tensor_info equals `want` exactly (in order), and the array frees once. */
static void check_tensor_info(const char *who, nrt_model_t *m, const want_info *want, int n) {
  nrt_tensor_info_array_t *a = NULL;
  NRT_STATUS st = nrt_get_model_tensor_info(m, &a);
  if (!mp_check(st == NRT_SUCCESS && a != NULL, "%s: nrt_get_model_tensor_info -> NRT_SUCCESS (got %d)", who, st))
    return;
  mp_check(a->tensor_count == (uint64_t)n, "%s: tensor_count %llu (expected %d)", who,
           (unsigned long long)a->tensor_count, n);
  for (int i = 0; i < n && (uint64_t)i < a->tensor_count; i++) {
    const nrt_tensor_info_t *e = &a->tensor_array[i];
    const want_info *w = &want[i];
    int shape_ok = e->ndim == w->ndim && (w->ndim == 0 || e->shape != NULL);
    for (uint32_t d = 0; shape_ok && d < w->ndim; d++) shape_ok = e->shape[d] == w->shape[d];
    mp_check(strncmp(e->name, w->name, sizeof e->name) == 0 && e->usage == w->usage && e->size == w->size &&
                 e->dtype == w->dtype && shape_ok,
             "%s: tensor %d is \"%.64s\" usage %d size %zu dtype %d ndim %u shape[0] %u "
             "(expected \"%s\" %d %zu %d %u %u)",
             who, i, e->name, (int)e->usage, e->size, (int)e->dtype, e->ndim, e->ndim && e->shape ? e->shape[0] : 0,
             w->name, (int)w->usage, w->size, (int)w->dtype, w->ndim, w->shape[0]);
  }
  st = nrt_free_model_tensor_info(a);
  mp_check(st == NRT_SUCCESS, "%s: nrt_free_model_tensor_info -> NRT_SUCCESS (got %d)", who, st);
  st = nrt_free_model_tensor_info(a); /* recorded by the library: never freed twice */
  mp_check(st == NRT_INVALID_HANDLE, "%s: a second nrt_free_model_tensor_info -> NRT_INVALID_HANDLE (got %d)", who, st);
}

/* ---------------------------------------------------------------- collective jobs */

typedef enum { OP_ALL_REDUCE, OP_ALL_GATHER, OP_ALL_TO_ALL_V } op_t;

typedef struct {
  op_t op;
  int ranks;
  size_t count;
  const char *path;
  const char *path_b; /* mismatch: rank 1's NEFF (rank 0 loads `path`) */
} job;

/* Filled by main before the first fork and never written after: a child finds its job as
 * jobs[p->arg], and the real NEFF's path (NULL: none) in real_neff. */
static job jobs[MAX_JOBS];
static int njobs;
static const char *real_neff;

static const char *op_name(op_t o) {
  return o == OP_ALL_REDUCE ? "all_reduce" : o == OP_ALL_GATHER ? "all_gather" : "all_to_all_v";
}
static size_t in_elems(const job *j) { return j->op == OP_ALL_TO_ALL_V ? j->count * (size_t)j->ranks : j->count; }
static size_t out_elems(const job *j) { return j->op == OP_ALL_REDUCE ? j->count : j->count * (size_t)j->ranks; }

/* All-to-all-v: the elements rank r sends to peer p (from the start of its block p, to the
 * start of p's block r): never above COUNT, zero for some pairs. */
static size_t a2av_send(const job *j, int r, int p) { return (size_t)(r + 2 * p + 1) % (j->count + 1); }

/* Element i of rank r's input in run k, and element i of rank r's output in run k; -1 marks
 * an element the collective does not write (it keeps the NaN fill). */
static int in_val(int k, int r, size_t i) { return (r + 1) * (int)(i % 7) + k; }
static int out_val(const job *j, int rank, int k, size_t i) {
  if (j->op == OP_ALL_GATHER) return in_val(k, (int)(i / j->count), i % j->count);
  if (j->op == OP_ALL_TO_ALL_V) {
    int q = (int)(i / j->count);
    size_t e = i % j->count;
    return e < a2av_send(j, q, rank) ? in_val(k, q, (size_t)rank * j->count + e) : -1;
  }
  return (int)(i % 7) * j->ranks * (j->ranks + 1) / 2 + k * j->ranks;
}

/* The metadata0 table of rank `rank` (4 rows of R uint32: send counts, send displacements,
 * receive counts, receive displacements, in elements). */
static void write_metadata(nrt_tensor_t *t, const job *j, int rank) {
  size_t R = (size_t)j->ranks;
  uint32_t *rows = malloc(16 * R);
  for (size_t p = 0; p < R; p++) {
    rows[p] = (uint32_t)a2av_send(j, rank, (int)p);
    rows[R + p] = (uint32_t)(p * j->count);
    rows[2 * R + p] = (uint32_t)a2av_send(j, (int)p, rank);
    rows[3 * R + p] = (uint32_t)(p * j->count);
  }
  if (nrt_tensor_write(t, rows, 0, 16 * R) != NRT_SUCCESS) mp_check(0, "nrt_tensor_write of metadata0");
  free(rows);
}

/* Rank `rank`'s output equals run k's expected result, byte for byte; names the first
 * difference. */
static int output_exact(const char *who, const char *what, const job *j, int rank, nrt_tensor_t *tout, int k) {
  size_t n = out_elems(j), i;
  uint8_t *got = malloc(n * 4), *want = malloc(n * 4);
  NRT_STATUS st;
  int ok;
  memset(got, 0xA5, n * 4);
  for (i = 0; i < n; i++) {
    int v = out_val(j, rank, k, i);
    if (v < 0) memset(want + 4 * i, 0xFF, 4); /* untouched: the fill */
    else put_f32(want + 4 * i, (float)v);
  }
  st = nrt_tensor_read(tout, got, 0, n * 4);
  ok = st == NRT_SUCCESS && memcmp(got, want, n * 4) == 0;
  if (!ok && st == NRT_SUCCESS) {
    for (i = 0; i < n && memcmp(got + 4 * i, want + 4 * i, 4) == 0; i++) {
    }
    float g;
    memcpy(&g, got + 4 * i, 4);
    printf("#   %s: %s: first difference at element %zu: got %g, expected %d (-1: untouched NaN)\n", who, what, i,
           (double)g, out_val(j, rank, k, i));
  }
  mp_check(ok, "%s: %s: all %zu output elements exact (read status %d)", who, what, n, st);
  free(got);
  free(want);
  return ok;
}

static void write_input(nrt_tensor_t *tin, const job *j, int rank, int k) {
  size_t n = in_elems(j);
  uint8_t *in = malloc(n * 4);
  for (size_t i = 0; i < n; i++) put_f32(in + 4 * i, (float)in_val(k, rank, i));
  if (nrt_tensor_write(tin, in, 0, n * 4) != NRT_SUCCESS) mp_check(0, "nrt_tensor_write of the input");
  free(in);
}

static void fill_nan(nrt_tensor_t *t, size_t bytes) {
  uint8_t *b = malloc(bytes);
  memset(b, 0xFF, bytes);
  if (nrt_tensor_write(t, b, 0, bytes) != NRT_SUCCESS) mp_check(0, "nrt_tensor_write of the NaN fill");
  free(b);
}

/* One rank of a collective job (in its own process, environment already set): rank p->gid of
 * jobs[p->arg]. */
static void rank_body(const mp_proc *p) {
  const job *j = &jobs[p->arg];
  const int rank = p->gid;
  const char *path = j->path_b && rank == 1 ? j->path_b : j->path;
  char who[64];
  size_t size = 0, in_bytes = in_elems(j) * 4, out_bytes = out_elems(j) * 4, meta_bytes = 16 * (size_t)j->ranks;
  int a2av = j->op == OP_ALL_TO_ALL_V;
  uint8_t *neff;
  nrt_model_t *m = NULL;
  nrt_tensor_t *tin = NULL, *tout = NULL, *tmeta = NULL;
  nrt_tensor_set_t *ins = NULL, *outs = NULL;
  NRT_STATUS st;
  snprintf(who, sizeof who, "%s R=%d rank %d", op_name(j->op), j->ranks, rank);
  st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (!mp_check(st == NRT_SUCCESS, "%s: nrt_init -> NRT_SUCCESS (got %d)", who, st)) return;
  neff = read_file(path, &size);
  if (!mp_check(neff != NULL, "%s: read %s (%zu bytes)", who, path, size)) goto close;
  st = nrt_load_collectives(neff, size, 0, 1, (uint32_t)rank, (uint32_t)j->ranks, &m);
  free(neff); /* the model keeps what it needs */
  if (!mp_check(st == NRT_SUCCESS && m != NULL,
                "%s: nrt_load_collectives(%zu B, vnc 0, 1, rank %d, world %d) (status %d)", who, size, rank, j->ranks,
                st))
    goto close;
  {
    /* Inputs first, then outputs (all_to_all_v's metadata0 is its second input). */
    want_info want[3] = {
        {"input0", NRT_TENSOR_USAGE_INPUT, in_bytes, NRT_DTYPE_FLOAT32, 1, {(uint32_t)in_elems(j)}},
        {"metadata0", NRT_TENSOR_USAGE_INPUT, meta_bytes, NRT_DTYPE_UINT32, 1, {4 * (uint32_t)j->ranks}},
        {"output0", NRT_TENSOR_USAGE_OUTPUT, out_bytes, NRT_DTYPE_FLOAT32, 1, {(uint32_t)out_elems(j)}},
    };
    if (!a2av) want[1] = want[2];
    uint32_t vncs = 0;
    nrt_model_info_t info = {99};
    size_t info_size = 0;
    check_tensor_info(who, m, want, a2av ? 3 : 2);
    st = nrt_get_model_vnc_count(m, &vncs);
    mp_check(st == NRT_SUCCESS && vncs == 1, "%s: nrt_get_model_vnc_count -> 1 (got %u, status %d)", who, vncs, st);
    st = nrt_get_model_info(m, &info, sizeof info, &info_size);
    mp_check(st == NRT_SUCCESS && info.vnc == 0 && info_size == sizeof info,
             "%s: nrt_get_model_info -> vnc 0, %zu bytes (got vnc %u, %zu bytes, status %d)", who, sizeof info,
             info.vnc, info_size, st);
  }
  tin = device_tensor(who, in_bytes, "input0");
  tout = device_tensor(who, out_bytes, "output0");
  if (!tin || !tout) goto unload;
  if (a2av) {
    tmeta = device_tensor(who, meta_bytes, "metadata0");
    if (!tmeta) goto unload;
    write_metadata(tmeta, j, rank);
  }
  {
    nrt_vnc_memory_stats_t ms = {0, 0};
    size_t ms_size = 0;
    st = nrt_get_vnc_memory_stats(0, &ms, sizeof ms, &ms_size);
    mp_check(st == NRT_SUCCESS && ms.bytes_used >= in_bytes + out_bytes && ms.bytes_limit > ms.bytes_used,
             "%s: nrt_get_vnc_memory_stats(0): %zu B used (>= the %zu B of the tensors), limit %zu (status %d)", who,
             ms.bytes_used, in_bytes + out_bytes, ms.bytes_limit, st);
  }
  {
    const char *in_names[2] = {"input0", "metadata0"}, *out_name = "output0";
    nrt_tensor_t *in_tensors[2] = {tin, tmeta};
    ins = tensor_set(who, a2av ? 2 : 1, in_names, in_tensors);
    outs = tensor_set(who, 1, &out_name, &tout);
  }
  if (!ins || !outs) goto unload;
  if (j->path_b) {
    /* Ranks with different collective sequences: an error on both, not a hang. */
    double t0 = mp_now();
    write_input(tin, j, rank, 0);
    st = nrt_execute(m, ins, outs);
    mp_check(st == NRT_INVALID && mp_now() - t0 < 15.0,
             "%s (%s): nrt_execute -> NRT_INVALID, the peers' NEFFs differ (got %d after %.1f s)", who,
             rank == 1 ? "NEFF B" : "NEFF A", st, mp_now() - t0);
    goto unload;
  }
  for (int k = 0; k < RUNS; k++) {
    char what[64];
    write_input(tin, j, rank, k);
    fill_nan(tout, out_bytes);
    st = nrt_execute(m, ins, outs);
    snprintf(what, sizeof what, "nrt_execute #%d", k + 1);
    if (!mp_check(st == NRT_SUCCESS, "%s: %s -> NRT_SUCCESS (got %d)", who, what, st)) goto unload;
    output_exact(who, what, j, rank, tout, k);
  }
  fill_nan(tout, out_bytes);
  st = nrt_execute_repeat(m, ins, outs, 2);
  if (mp_check(st == NRT_SUCCESS, "%s: nrt_execute_repeat(2) -> NRT_SUCCESS (got %d)", who, st))
    output_exact(who, "nrt_execute_repeat(2)", j, rank, tout, RUNS - 1);
  {
    /* The same model on the compute XU: queue, poll to completion, exact. */
    NRT_STATUS exec_ret = (NRT_STATUS)4242; /* no status: proves the runtime wrote it */
    nrta_seq_t seq = 0;
    bool done = false;
    double end = mp_now() + 30.0;
    write_input(tin, j, rank, RUNS);
    fill_nan(tout, out_bytes);
    st = nrta_execute_schedule(m, ins, outs, 0, &exec_ret, &seq);
    if (mp_check(st == NRT_SUCCESS, "%s: nrta_execute_schedule -> NRT_SUCCESS (got %d)", who, st)) {
      while ((st = nrta_is_completed(seq, &done)) == NRT_SUCCESS && !done && mp_now() < end) usleep(500);
      if (!done) {
        /* The runtime may still write exec_ret: end without freeing anything. */
        mp_check(0, "%s: seq %#llx completed within 30 s (status %d)", who, (unsigned long long)seq, st);
        mp_child_abort(who);
      }
      if (mp_check(exec_ret == NRT_SUCCESS, "%s: scheduled execution: exec_ret NRT_SUCCESS (got %d)", who, exec_ret))
        output_exact(who, "nrta_execute_schedule", j, rank, tout, RUNS);
    }
  }
unload:
  nrt_destroy_tensor_set(&ins);
  nrt_destroy_tensor_set(&outs);
  nrt_tensor_free(&tin);
  nrt_tensor_free(&tout);
  if (tmeta) nrt_tensor_free(&tmeta);
  if (m) {
    st = nrt_unload(m);
    mp_check(st == NRT_SUCCESS, "%s: nrt_unload -> NRT_SUCCESS (got %d)", who, st);
  }
close:
  nrt_close();
}

/* Job jobs[ji]: rank r in a process of its own on core r, every rank with the root on one
 * fresh port; then every exit status, and /dev/shm. */
static void run_job(int ji) {
  const job *j = &jobs[ji];
  mp_proc procs[MP_MAX_PROCS];
  char title[96], root[64];
  int port = mp_free_port();
  mp_root_id(root, sizeof root, 0, port);
  if (j->path_b) snprintf(title, sizeof title, "mismatched %s NEFFs, R=%d", op_name(j->op), j->ranks);
  else snprintf(title, sizeof title, "%s R=%d count %zu fp32", op_name(j->op), j->ranks, j->count);
  mp_say("\n== %s", title);
  for (int r = 0; r < j->ranks && r < MP_MAX_PROCS; r++) { /* parse_job's bound, restated for procs[] */
    mp_proc *p = &procs[r];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%.38s rank %d", title, r); /* fits name[48] */
    snprintf(p->cores, sizeof p->cores, "%d", r);
    snprintf(p->root, sizeof p->root, "%s", root);
    p->body = rank_body;
    p->gid = r, p->world = j->ranks, p->threads = 1;
    p->arg = ji;
  }
  mp_run(procs, j->ranks, JOB_DEADLINE_S);
  mp_check_ends(procs, j->ranks);
  mp_check_shm_clean(port, title);
  mp_cleanup_logs(procs, j->ranks);
}

/* One process on its own (no world, no root): `cores` its NEURON_RT_VISIBLE_CORES ("" =
 * unset), env0 / env1 extra settings or NULL; then its exit status. */
static void run_alone(const char *title, mp_body body, const char *cores, const char *env0, const char *env1) {
  mp_proc p;
  memset(&p, 0, sizeof p);
  snprintf(p.name, sizeof p.name, "%s", title);
  snprintf(p.cores, sizeof p.cores, "%s", cores);
  p.env[0] = env0, p.env[1] = env1;
  p.body = body;
  p.world = p.threads = 1;
  mp_say("\n== %s", title);
  mp_run(&p, 1, JOB_DEADLINE_S);
  mp_check_ends(&p, 1);
  mp_cleanup_logs(&p, 1);
}

/* ---------------------------------------------------------------- the real NEFF */

/* Environment OPENNRT_INSTANCE_TYPE=trn2.48xlarge NEURON_LOGICAL_NC_CONFIG=2 (main). */
static void real_lnc2_body(const mp_proc *p) {
  const char *path = real_neff, *who = p->name;
  size_t size = 0;
  uint8_t *neff = read_file(path, &size);
  nrt_model_t *m = NULL;
  nrt_tensor_t *x = NULL, *y = NULL, *o = NULL, *small = NULL;
  nrt_tensor_set_t *ins = NULL, *only_x = NULL, *bad_x = NULL, *outs = NULL;
  NRT_STATUS st;
  const want_info want[3] = {
      {"x", NRT_TENSOR_USAGE_INPUT, 65536, NRT_DTYPE_FLOAT16, 2, {128, 256}},
      {"y", NRT_TENSOR_USAGE_INPUT, 65536, NRT_DTYPE_FLOAT16, 2, {256, 128}},
      {"output0", NRT_TENSOR_USAGE_OUTPUT, 32768, NRT_DTYPE_FLOAT16, 2, {128, 128}},
  };
  if (!mp_check(neff != NULL && size == 62464, "%s: read %s (%zu bytes)", who, path, size)) return;
  st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (!mp_check(st == NRT_SUCCESS, "%s: nrt_init -> NRT_SUCCESS (got %d)", who, st)) goto out;
  st = nrt_load(neff, size, -1, 1, &m);
  if (!mp_check(st == NRT_SUCCESS && m != NULL, "%s: nrt_load(-1, 1) -> NRT_SUCCESS (got %d)", who, st)) goto close;
  check_tensor_info(who, m, want, 3);
  x = device_tensor(who, 65536, "x");
  y = device_tensor(who, 65536, "y");
  o = device_tensor(who, 32768, "o");
  small = device_tensor(who, 100, "small");
  if (x && y && o && small) {
    const char *xy[2] = {"x", "y"}, *out_name = "output0";
    nrt_tensor_t *txy[2] = {x, y}, *tsy[2] = {small, y};
    ins = tensor_set(who, 2, xy, txy);
    only_x = tensor_set(who, 1, xy, txy);
    bad_x = tensor_set(who, 2, xy, tsy);
    outs = tensor_set(who, 1, &out_name, &o);
    st = nrt_execute(m, ins, outs);
    mp_check(st == NRT_FAILURE, "%s: nrt_execute with x, y and output0 -> NRT_FAILURE (compute; got %d)", who, st);
    st = nrt_execute(m, only_x, outs);
    mp_check(st == NRT_INVALID, "%s: nrt_execute with y missing -> NRT_INVALID (got %d)", who, st);
    st = nrt_execute(m, bad_x, outs);
    mp_check(st == NRT_INVALID, "%s: nrt_execute with a 100-byte x -> NRT_INVALID (got %d)", who, st);
    st = nrt_execute(m, ins, NULL);
    mp_check(st == NRT_INVALID, "%s: nrt_execute with a NULL output set -> NRT_INVALID (got %d)", who, st);
  }
  nrt_destroy_tensor_set(&ins);
  nrt_destroy_tensor_set(&only_x);
  nrt_destroy_tensor_set(&bad_x);
  nrt_destroy_tensor_set(&outs);
  nrt_tensor_free(&x);
  nrt_tensor_free(&y);
  nrt_tensor_free(&o);
  nrt_tensor_free(&small);
  st = nrt_unload(m);
  mp_check(st == NRT_SUCCESS, "%s: nrt_unload -> NRT_SUCCESS (got %d)", who, st);
  st = nrt_unload(m); /* stale: the library checks it against its table, never dereferences it */
  mp_check(st == NRT_INVALID_HANDLE, "%s: a second nrt_unload -> NRT_INVALID_HANDLE (got %d)", who, st);
close:
  nrt_close();
out:
  free(neff);
}

/* Environment OPENNRT_INSTANCE_TYPE=trn2.48xlarge NEURON_LOGICAL_NC_CONFIG=1 (main). */
static void real_lnc1_body(const mp_proc *p) {
  const char *path = real_neff, *who = p->name;
  size_t size = 0;
  uint8_t *neff = read_file(path, &size);
  nrt_model_t *m = NULL;
  NRT_STATUS st;
  if (!mp_check(neff != NULL, "%s: read %s (%zu bytes)", who, path, size)) return;
  st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (mp_check(st == NRT_SUCCESS, "%s: nrt_init -> NRT_SUCCESS (got %d)", who, st)) {
    st = nrt_load(neff, size, 0, 1, &m);
    mp_check(st == NRT_INVALID && m == NULL,
             "%s: nrt_load of an lnc_size 2 NEFF -> NRT_INVALID, *model left NULL (got %d, %p)", who, st, (void *)m);
    nrt_close();
  }
  free(neff);
}

/* ---------------------------------------------------------------- bad input */

static void load_fails(const char *what, const void *bytes, size_t size, int32_t vnc, int32_t count, NRT_STATUS want) {
  nrt_model_t *m = NULL;
  NRT_STATUS st = nrt_load(bytes, size, vnc, count, &m);
  mp_check(st == want && m == NULL, "bad input: nrt_load of %s -> %d, no model written (got %d, %p)", what, (int)want,
           st, (void *)m);
  if (m) nrt_unload(m);
}

/* Cuts and garbles the collective NEFF of jobs[p->arg] (and the real NEFF, if any); one visible
 * core (main). */
static void bad_body(const mp_proc *p) {
  const job *j = &jobs[p->arg];
  size_t size = 0, real_size = 0, i;
  uint8_t *neff = read_file(j->path, &size), *real = real_neff ? read_file(real_neff, &real_size) : NULL;
  uint8_t garbage[4096], *mixed;
  uint32_t x = 0x12345678u;
  nrt_model_t *m = NULL;
  nrt_tensor_info_array_t *info = NULL;
  nrt_tensor_set_t *set = NULL;
  uint32_t n = 0;
  NRT_STATUS st;
  if (!mp_check(neff != NULL && size > 1500, "bad input: read %s (%zu bytes)", j->path, size)) return;
  for (i = 0; i < sizeof garbage; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5; /* xorshift32 */
    garbage[i] = (uint8_t)x;
  }
  mixed = malloc(size);
  memcpy(mixed, neff, 1024); /* the good header over a payload of garbage */
  for (i = 1024; i < size; i++) mixed[i] = garbage[i % sizeof garbage];

  load_fails("a good NEFF before nrt_init (NRT_UNINITIALIZED)", neff, size, 0, 1, NRT_UNINITIALIZED);
  st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (!mp_check(st == NRT_SUCCESS, "bad input: nrt_init with one visible core (got %d)", st)) goto out;
  load_fails("its first 1500 bytes", neff, 1500, 0, 1, NRT_INVALID);
  load_fails("its 1024-byte header alone", neff, 1024, 0, 1, NRT_INVALID);
  load_fails("its first 100 bytes", neff, 100, 0, 1, NRT_INVALID);
  if (real) load_fails("the real NEFF's first 1500 bytes", real, 1500, 0, 1, NRT_INVALID);
  if (real) load_fails("the real NEFF less its last byte", real, real_size - 1, 0, 1, NRT_INVALID);
  load_fails("4096 bytes of garbage", garbage, sizeof garbage, 0, 1, NRT_INVALID);
  load_fails("a good header over a garbage payload", mixed, size, 0, 1, NRT_INVALID);
  load_fails("size 0", neff, 0, 0, 1, NRT_INVALID);
  load_fails("NULL bytes", NULL, size, 0, 1, NRT_INVALID);
  load_fails("NULL bytes, size 0", NULL, 0, 0, 1, NRT_INVALID);
  st = nrt_load(neff, size, 0, 1, NULL);
  mp_check(st == NRT_INVALID, "bad input: nrt_load with a NULL model out-parameter -> NRT_INVALID (got %d)", st);
  load_fails("vnc 1 with one visible core", neff, size, 1, 1, NRT_INVALID);
  load_fails("vnc_count 2", neff, size, 0, 2, NRT_LOAD_NOT_ENOUGH_NC);
  load_fails("a collective NEFF with no global communicator", neff, size, 0, 1, NRT_INVALID);
  m = NULL;
  st = nrt_load_collectives(neff, size, 0, 1, 0, 1, &m);
  mp_check(st == NRT_INVALID && m == NULL,
           "bad input: nrt_load_collectives of an R=%d NEFF into a world of 1 -> NRT_INVALID, no model (got %d)",
           j->ranks, st);
  if (m) nrt_unload(m), m = NULL;
  st = nrt_load_collectives(neff, size, 0, 1, 5, 2, &m);
  mp_check(st == NRT_INVALID && m == NULL,
           "bad input: nrt_load_collectives with rank 5 of a world of 2 -> NRT_INVALID, no model (got %d)", st);
  if (m) nrt_unload(m), m = NULL;

  /* The other model calls with NULL handles. */
  mp_check(nrt_unload(NULL) == NRT_INVALID, "bad input: nrt_unload(NULL) -> NRT_INVALID");
  mp_check(nrt_allocate_tensor_set(&set) == NRT_SUCCESS, "bad input: an empty tensor set");
  st = nrt_execute(NULL, set, set);
  mp_check(st == NRT_INVALID || st == NRT_INVALID_HANDLE,
           "bad input: nrt_execute(NULL model) -> NRT_INVALID or NRT_INVALID_HANDLE (got %d)", st);
  st = nrt_get_model_tensor_info(NULL, &info);
  mp_check((st == NRT_INVALID || st == NRT_INVALID_HANDLE) && info == NULL,
           "bad input: nrt_get_model_tensor_info(NULL model) -> NRT_INVALID or NRT_INVALID_HANDLE, nothing written "
           "(got %d)",
           st);
  mp_check(nrt_free_model_tensor_info(NULL) == NRT_INVALID,
           "bad input: nrt_free_model_tensor_info(NULL) -> NRT_INVALID");
  mp_check(nrt_get_model_vnc_count(NULL, &n) != NRT_SUCCESS, "bad input: nrt_get_model_vnc_count(NULL) fails");
  nrt_destroy_tensor_set(&set);
  nrt_close();
  load_fails("a good NEFF after nrt_close (NRT_UNINITIALIZED)", neff, size, 0, 1, NRT_UNINITIALIZED);
  mp_check(1, "bad input: the process survived every bad load");
out:
  free(mixed);
  free(neff);
  free(real);
}

/* ---------------------------------------------------------------- main */

/* OP:R:COUNT:FILE, or mismatch:2:COUNT:A,B. The job keeps pointers into `s` (argv). */
static int parse_job(char *s, job *j) {
  char op[32], *comma;
  int ranks = 0, used = 0;
  size_t count = 0;
  memset(j, 0, sizeof *j);
  if (sscanf(s, "%31[a-z_]:%d:%zu:%n", op, &ranks, &count, &used) != 3 || used == 0) return 0;
  if (ranks < 1 || ranks > MP_MAX_PROCS || count == 0 || !s[used]) return 0;
  j->ranks = ranks, j->count = count, j->path = s + used;
  if (strcmp(op, "all_reduce") == 0) j->op = OP_ALL_REDUCE;
  else if (strcmp(op, "all_gather") == 0) j->op = OP_ALL_GATHER;
  else if (strcmp(op, "all_to_all_v") == 0) j->op = OP_ALL_TO_ALL_V;
  else if (strcmp(op, "mismatch") == 0 && ranks == 2 && (comma = strchr(s + used, ',')) != NULL) {
    *comma = 0;
    j->op = OP_ALL_REDUCE, j->path_b = comma + 1;
  } else return 0;
  return 1;
}

static int usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--real matmul_small.neff] OP:R:COUNT:FILE... [mismatch:2:COUNT:A.neff,B.neff]\n"
          "  OP all_reduce, all_gather or all_to_all_v (fp32 NEFFs of `opennrt neff build`); the first job is\n"
          "  also the NEFF the bad-input checks cut and garble\n",
          argv0);
  return 2;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--real") == 0 && i + 1 < argc) real_neff = argv[++i];
    else if (njobs < MAX_JOBS && parse_job(argv[i], &jobs[njobs])) njobs++;
    else return usage(argv[0]);
  }
  if (njobs == 0 || jobs[0].path_b) return usage(argv[0]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 0; i < njobs; i++) run_job(i);
  if (real_neff) {
    run_alone("real NEFF, LNC=2", real_lnc2_body, "", "OPENNRT_INSTANCE_TYPE=trn2.48xlarge",
              "NEURON_LOGICAL_NC_CONFIG=2");
    run_alone("real NEFF, LNC=1", real_lnc1_body, "", "OPENNRT_INSTANCE_TYPE=trn2.48xlarge",
              "NEURON_LOGICAL_NC_CONFIG=1");
  }
  run_alone("bad input", bad_body, "0", NULL, NULL); /* p->arg 0: the first job's NEFF */
  return mp_summary("neff_test");
}
