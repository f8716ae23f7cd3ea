/* One rank of a job spanning hosts that uses only the host collectives of the C API:
 * nrt_barrier, then ROUNDS rounds of nrt_all_gather (host memory, no device) whose bytes change
 * every round, each checked byte for byte against what every rank must have sent.
 *
 *   host_ag <global id> <world> <rounds> <bytes per rank>
 *
 * The process owns one core (NEURON_RT_VISIBLE_CORES), so its vnc is 0, and bootstraps through
 * NEURON_RT_ROOT_COMM_ID. A rank on another host than the root's has no shared memory with it:
 * its part travels in the bootstrap's messages (src/runtime/multi_process/bootstrap.rs,
 * remote_run_inline). Exit 0 when every round was exact; 1 with a message when a byte was wrong;
 * 3 with a message naming the status when a call failed (capi-tests/hosts/chaos.sh tells a
 * failure the contract allows from a wrong result by it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nrt/nrt.h"

static uint8_t byte_of(uint32_t round, uint32_t gid, uint32_t i) {
  uint32_t x = round * 0x9E3779B1u ^ gid * 0x85EBCA77u ^ i * 0xC2B2AE3Du;
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  return (uint8_t)x;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s <global id> <world> <rounds> <bytes per rank>\n", argv[0]);
    return 2;
  }
  uint32_t gid = (uint32_t)strtoul(argv[1], NULL, 10), world = (uint32_t)strtoul(argv[2], NULL, 10);
  uint32_t rounds = (uint32_t)strtoul(argv[3], NULL, 10), size = (uint32_t)strtoul(argv[4], NULL, 10);
  uint8_t *in = malloc(size), *out = malloc((size_t)size * world);
  NRT_STATUS st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (st != NRT_SUCCESS) {
    fprintf(stderr, "host_ag: gid %u: nrt_init -> %d\n", gid, st);
    return 3;
  }
  st = nrt_barrier(0, gid, world);
  if (st != NRT_SUCCESS) {
    fprintf(stderr, "host_ag: gid %u: nrt_barrier -> %d\n", gid, st);
    return 3;
  }
  for (uint32_t r = 0; r < rounds; r++) {
    for (uint32_t i = 0; i < size; i++) in[i] = byte_of(r, gid, i);
    memset(out, 0xA5, (size_t)size * world);
    st = nrt_all_gather(0, gid, world, size, in, out);
    if (st != NRT_SUCCESS) {
      fprintf(stderr, "host_ag: gid %u: round %u: nrt_all_gather -> %d\n", gid, r, st);
      return 3;
    }
    for (uint32_t g = 0; g < world; g++)
      for (uint32_t i = 0; i < size; i++)
        if (out[(size_t)g * size + i] != byte_of(r, g, i)) {
          fprintf(stderr, "host_ag: gid %u: round %u: byte %u of rank %u is %u, not %u\n", gid, r, i, g,
                  out[(size_t)g * size + i], byte_of(r, g, i));
          return 1;
        }
  }
  st = nrt_barrier(0, gid, world);
  nrt_close();
  free(in);
  free(out);
  if (st != NRT_SUCCESS) {
    fprintf(stderr, "host_ag: gid %u: last nrt_barrier -> %d\n", gid, st);
    return 3;
  }
  printf("host_ag: gid %u: %u rounds of %u bytes per rank exact\n", gid, rounds, size);
  return 0;
}
