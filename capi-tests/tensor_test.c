/* Tensors and tensor sets through the C ABI of libnrt.so.1, linked with -lnrt as clients are
 * (docs/contract/abi.md §3.3; the guard of §5.1). Runs with NEURON_RT_VISIBLE_CORES=0-1, so the
 * process owns two logical cores. Every error status of the family is checked. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nrt/nrt.h"

static nrt_tensor_t *alloc(nrt_tensor_placement_t p, int vnc, size_t size, const char *name) {
  nrt_tensor_t *t = NULL;
  NRT_STATUS s = nrt_tensor_allocate(p, vnc, size, name, &t);
  CHECK(s == NRT_SUCCESS && t != NULL, "nrt_tensor_allocate(%d, vnc %d, %zu, %s)", (int)p, vnc, size,
        name);
  return t;
}

static int all_bytes(const uint8_t *p, size_t n, uint8_t v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return 0;
  return 1;
}

static void allocation_and_free(void) {
  nrt_tensor_t *t = NULL;
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 2, 64, "t", &t) == NRT_INVALID && t == NULL,
        "device vnc 2 with 2 visible cores -> NRT_INVALID, *tensor untouched");
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, -1, 64, "t", &t) == NRT_INVALID,
        "device vnc -1 -> NRT_INVALID");
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_VIRTUAL, 0, 64, "t", &t) == NRT_INVALID,
        "VIRTUAL placement (removed in 2.32) -> NRT_INVALID");
  CHECK(nrt_tensor_allocate((nrt_tensor_placement_t)9, 0, 64, "t", &t) == NRT_INVALID,
        "unknown placement -> NRT_INVALID");
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", NULL) == NRT_INVALID,
        "NULL out-parameter -> NRT_INVALID");
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, (size_t)1 << 62, "big", &t) == NRT_RESOURCE,
        "4 EiB device tensor -> NRT_RESOURCE (no abort)");
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, -1, (size_t)1 << 62, "big", &t) ==
            NRT_FAIL_HOST_MEM_ALLOC,
        "4 EiB host tensor -> NRT_FAIL_HOST_MEM_ALLOC");

  t = alloc(NRT_TENSOR_PLACEMENT_DEVICE, 1, 100, NULL);
  uint8_t buf[100];
  memset(buf, 0xee, sizeof buf);
  CHECK(nrt_tensor_get_size(t) == 100, "nrt_tensor_get_size = 100");
  CHECK(nrt_tensor_read(t, buf, 0, 100) == NRT_SUCCESS && all_bytes(buf, 100, 0),
        "a new device tensor reads as zeros");
  CHECK(((uintptr_t)nrt_tensor_get_va(t) % 64) == 0, "the VA is 64-byte aligned");
  nrt_tensor_t *stale = t;
  nrt_tensor_free(&t);
  CHECK(t == NULL, "nrt_tensor_free sets *tensor = NULL");
  nrt_tensor_free(&t);
  nrt_tensor_free(NULL);
  CHECK(1, "free of NULL and of *NULL are no-ops");
  nrt_tensor_free(&stale);
  CHECK(stale != NULL, "double free: detected, logged, no crash, slot untouched");
  CHECK(nrt_tensor_read(stale, buf, 0, 1) == NRT_INVALID_HANDLE, "read of a freed tensor -> NRT_INVALID_HANDLE");
  CHECK(nrt_tensor_get_size(stale) == 0 && nrt_tensor_get_va(stale) == NULL,
        "get_size 0 and get_va NULL for a freed tensor");
  CHECK(nrt_tensor_read(NULL, buf, 0, 1) == NRT_INVALID, "read of NULL -> NRT_INVALID");
}

static void read_write_copy_memset(void) {
  nrt_tensor_t *a = alloc(NRT_TENSOR_PLACEMENT_DEVICE, 0, 16, "a");
  nrt_tensor_t *b = alloc(NRT_TENSOR_PLACEMENT_DEVICE, 0, 16, "b");
  nrt_tensor_t *c = alloc(NRT_TENSOR_PLACEMENT_DEVICE, 1, 16, "c");
  nrt_tensor_t *h = alloc(NRT_TENSOR_PLACEMENT_HOST, -1, 16, "h");
  uint8_t in[16], out[16];
  for (int i = 0; i < 16; i++) in[i] = (uint8_t)(i + 1);
  CHECK(nrt_tensor_write(a, in, 0, 16) == NRT_SUCCESS, "write 16 bytes");
  CHECK(nrt_tensor_read(a, out, 0, 16) == NRT_SUCCESS && memcmp(in, out, 16) == 0, "read them back");
  CHECK(nrt_tensor_write(a, in, 8, 9) == NRT_INVALID, "offset + size > size -> NRT_INVALID");
  CHECK(nrt_tensor_read(a, out, SIZE_MAX, 2) == NRT_INVALID, "offset + size overflows -> NRT_INVALID");
  CHECK(nrt_tensor_read(a, NULL, 0, 4) == NRT_INVALID, "NULL buffer -> NRT_INVALID");
  CHECK(nrt_tensor_read(a, out, 16, 0) == NRT_SUCCESS, "zero bytes at the end -> success");

  CHECK(nrt_tensor_copy(a, 4, b, 0, 12) == NRT_SUCCESS, "copy between tensors on one core");
  CHECK(nrt_tensor_read(b, out, 0, 12) == NRT_SUCCESS && memcmp(out, in + 4, 12) == 0, "copied bytes");
  CHECK(nrt_tensor_copy(a, 0, c, 0, 16) == NRT_INVALID, "copy between device tensors on cores 0 and 1 -> NRT_INVALID");
  CHECK(nrt_tensor_copy(a, 0, h, 0, 16) == NRT_SUCCESS && nrt_tensor_copy(h, 0, c, 0, 16) == NRT_SUCCESS,
        "device -> host -> device on another core");
  CHECK(nrt_tensor_read(c, out, 0, 16) == NRT_SUCCESS && memcmp(out, in, 16) == 0, "bytes arrived on core 1");
  CHECK(nrt_tensor_copy(a, 8, b, 0, 9) == NRT_INVALID, "copy source out of range -> NRT_INVALID");

  CHECK(nrt_tensor_memset(h, 4, 0x1ab, 8) == NRT_SUCCESS, "memset 8 bytes (value converted to 0xab)");
  CHECK(nrt_tensor_read(h, out, 0, 16) == NRT_SUCCESS && all_bytes(out + 4, 8, 0xab) && out[3] == 4 &&
            out[12] == 13,
        "memset touched exactly its range");
  CHECK(nrt_tensor_memset(h, 9, 0, 8) == NRT_INVALID, "memset out of range -> NRT_INVALID");

  nrt_tensor_free(&a);
  nrt_tensor_free(&b);
  nrt_tensor_free(&c);
  nrt_tensor_free(&h);
}

static void slices(void) {
  nrt_tensor_t *t = alloc(NRT_TENSOR_PLACEMENT_DEVICE, 0, 32, "parent");
  nrt_tensor_t *s = NULL, *bad = NULL;
  CHECK(nrt_tensor_allocate_slice(t, 8, 16, "slice", &s) == NRT_SUCCESS, "slice [8, 24)");
  CHECK((char *)nrt_tensor_get_va(s) == (char *)nrt_tensor_get_va(t) + 8 && nrt_tensor_get_size(s) == 16,
        "the slice aliases the parent's memory at +8");
  CHECK(nrt_tensor_allocate_slice(t, 17, 16, "x", &bad) == NRT_INVALID && bad == NULL,
        "slice out of range -> NRT_INVALID");
  uint8_t seven[4] = {7, 7, 7, 7}, out[4];
  CHECK(nrt_tensor_write(s, seven, 0, 4) == NRT_SUCCESS && nrt_tensor_read(t, out, 8, 4) == NRT_SUCCESS &&
            memcmp(out, seven, 4) == 0,
        "a write through the slice is seen by the parent");
  nrt_tensor_free(&t);
  CHECK(nrt_tensor_read(s, out, 0, 4) == NRT_SUCCESS && memcmp(out, seven, 4) == 0,
        "the slice still works after its parent was freed");
  nrt_tensor_free(&s);
}

static void va_memcpy_to_device_and_info(void) {
  nrt_tensor_t *t = alloc(NRT_TENSOR_PLACEMENT_DEVICE, 1, 64, "dev");
  nrt_tensor_t *h = alloc(NRT_TENSOR_PLACEMENT_HOST, -1, 64, "host");
  char *va = nrt_tensor_get_va(t);
  uint8_t data[16], out[64], local[16];
  memset(data, 0x5a, sizeof data);
  CHECK(va != NULL, "device tensor has a VA");
  CHECK(nrt_memcpy_to_device(va + 8, data, 16) == NRT_SUCCESS, "memcpy_to_device at VA + 8");
  CHECK(nrt_memcpy_to_device(va + 48, data, 16) == NRT_SUCCESS, "memcpy_to_device ending at the last byte");
  CHECK(nrt_memcpy_to_device(va + 49, data, 16) == NRT_INVALID, "one byte past the end -> NRT_INVALID");
  CHECK(nrt_memcpy_to_device(nrt_tensor_get_va(h), data, 16) == NRT_INVALID, "a host tensor -> NRT_INVALID");
  CHECK(nrt_memcpy_to_device(local, data, 16) == NRT_INVALID, "plain host memory -> NRT_INVALID");
  CHECK(nrt_memcpy_to_device(NULL, data, 0) == NRT_INVALID, "NULL dest -> NRT_INVALID");
  CHECK(nrt_tensor_read(t, out, 0, 64) == NRT_SUCCESS && all_bytes(out, 8, 0) && all_bytes(out + 8, 16, 0x5a) &&
            all_bytes(out + 24, 24, 0) && all_bytes(out + 48, 16, 0x5a),
        "nrt_tensor_read sees exactly what memcpy_to_device wrote");

  nrt_tensor_device_allocation_info_t info;
  memset(&info, 0, sizeof info);
  CHECK(nrt_tensor_get_device_allocation_info(t, &info) == NRT_SUCCESS && info.physical_address == (uintptr_t)va &&
            info.size == 64 && info.hbm_index == 0,
        "device allocation info: address = VA, size 64, HBM 0");
  CHECK(nrt_tensor_get_device_allocation_info(h, &info) == NRT_INVALID, "allocation info of a host tensor -> NRT_INVALID");
  CHECK(nrt_tensor_get_device_allocation_info(t, NULL) == NRT_INVALID, "NULL alloc_info -> NRT_INVALID");

  CHECK(nrt_tensor_check_output_completion(t, 0, 0) == NRT_SUCCESS, "completion count 0 is reached at once");
  CHECK(nrt_tensor_check_output_completion(t, 1000, 1) == NRT_TIMEOUT,
        "no execution wrote the tensor: count 1 -> NRT_TIMEOUT after 1 ms");
  CHECK(nrt_tensor_reset_output_completion(t) == NRT_SUCCESS, "reset_output_completion");
  CHECK(nrt_tensor_check_output_completion(NULL, 0, 0) == NRT_INVALID, "check of NULL -> NRT_INVALID");

  nrt_tensor_free(&t);
  CHECK(nrt_memcpy_to_device(va, data, 1) == NRT_INVALID, "after free the range is no longer device memory");
  nrt_tensor_free(&h);
}

static void attach_and_batches(void) {
  nrt_tensor_t *e = NULL;
  CHECK(nrt_tensor_allocate_empty("empty", &e) == NRT_SUCCESS, "allocate_empty");
  CHECK(nrt_tensor_get_va(e) == NULL && nrt_tensor_get_size(e) == 0, "no storage: VA NULL, size 0");
  uint8_t *mem = calloc(32, 1);
  CHECK(nrt_tensor_attach_buffer(e, NULL, 32) == NRT_INVALID, "attach NULL -> NRT_INVALID");
  CHECK(nrt_tensor_attach_buffer(e, mem, 32) == NRT_SUCCESS, "attach 32 caller bytes");
  CHECK(nrt_tensor_get_va(e) == mem && nrt_tensor_get_size(e) == 32, "zero-copy: VA is the caller's buffer");
  uint8_t x[2] = {1, 2}, y[3] = {3, 4, 5}, r[5];
  CHECK(nrt_tensor_write(e, x, 30, 2) == NRT_SUCCESS && mem[30] == 1 && mem[31] == 2,
        "a tensor write lands in the caller's buffer");

  nrt_tensor_t *d = alloc(NRT_TENSOR_PLACEMENT_DEVICE, 0, 8, "d");
  nrt_tensor_batch_op_t wops[2] = {{0, 2, x}, {5, 3, y}};
  nrt_tensor_batch_t wb[1] = {{d, wops, 2}};
  CHECK(nrt_tensor_write_batch(wb, 1, false) == NRT_SUCCESS, "write_batch of two ops");
  nrt_tensor_batch_op_t rops[2] = {{3, 5, r}, {4, 5, r}};
  nrt_tensor_batch_t rb[1] = {{d, rops, 2}};
  memset(r, 0xee, sizeof r);
  CHECK(nrt_tensor_read_batch(rb, 1, true) == NRT_INVALID && all_bytes(r, 5, 0xee),
        "read_batch with one op out of range -> NRT_INVALID, nothing read (unsafe=true still checks)");
  rb[0].num_ops = 1;
  CHECK(nrt_tensor_read_batch(rb, 1, false) == NRT_SUCCESS && r[0] == 0 && r[1] == 0 && r[2] == 3 && r[3] == 4 &&
            r[4] == 5,
        "read_batch reads what write_batch wrote");
  CHECK(nrt_tensor_read_batch(NULL, 1, false) == NRT_INVALID, "NULL batches -> NRT_INVALID");

  nrt_tensor_free(&e);
  nrt_tensor_free(&d);
  CHECK(mem[31] == 2, "freeing the tensor leaves the caller's buffer alone");
  free(mem);
}

static void tensor_sets(void) {
  nrt_tensor_t *a = alloc(NRT_TENSOR_PLACEMENT_DEVICE, 0, 4, "a");
  nrt_tensor_t *b = alloc(NRT_TENSOR_PLACEMENT_HOST, -1, 4, "b");
  nrt_tensor_set_t *set = NULL;
  nrt_tensor_t *got = NULL;
  CHECK(nrt_allocate_tensor_set(NULL) == NRT_INVALID, "allocate_tensor_set(NULL) -> NRT_INVALID");
  CHECK(nrt_allocate_tensor_set(&set) == NRT_SUCCESS && set != NULL, "allocate_tensor_set");
  CHECK(nrt_add_tensor_to_tensor_set(set, "output_0", a) == NRT_SUCCESS, "add output_0");
  CHECK(nrt_get_tensor_from_tensor_set(set, "output_0", &got) == NRT_SUCCESS && got == a, "get returns the added handle");
  CHECK(nrt_add_tensor_to_tensor_set(set, "output_0", b) == NRT_SUCCESS &&
            nrt_get_tensor_from_tensor_set(set, "output_0", &got) == NRT_SUCCESS && got == b,
        "adding an existing name replaces the entry");
  CHECK(nrt_get_tensor_from_tensor_set(set, "missing", &got) == NRT_INVALID, "unknown name -> NRT_INVALID");
  CHECK(nrt_add_tensor_to_tensor_set(set, NULL, a) == NRT_INVALID, "NULL name -> NRT_INVALID");
  CHECK(nrt_add_tensor_to_tensor_set((nrt_tensor_set_t *)a, "x", a) == NRT_INVALID_HANDLE,
        "a tensor passed as a set -> NRT_INVALID_HANDLE");
  /* The developer-guide order: free the members first, then destroy the set. */
  nrt_tensor_free(&a);
  nrt_tensor_free(&b);
  CHECK(nrt_get_tensor_from_tensor_set(set, "output_0", &got) == NRT_INVALID_HANDLE,
        "a member freed since it was added -> NRT_INVALID_HANDLE");
  nrt_tensor_set_t *stale = set;
  nrt_destroy_tensor_set(&set);
  CHECK(set == NULL, "destroy_tensor_set with freed members sets *tensor_set = NULL");
  nrt_destroy_tensor_set(&stale);
  nrt_destroy_tensor_set(NULL);
  CHECK(nrt_add_tensor_to_tensor_set(stale, "x", NULL) == NRT_INVALID_HANDLE,
        "double destroy is detected; the stale set -> NRT_INVALID_HANDLE");
}

int main(void) {
  setenv("NEURON_RT_VISIBLE_CORES", "0-1", 1);
  nrt_tensor_t *t = NULL;
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 8, "t", &t) == NRT_UNINITIALIZED && t == NULL,
        "nrt_tensor_allocate before nrt_init -> NRT_UNINITIALIZED (13)");
  CHECK(nrt_memcpy_to_device(NULL, NULL, 0) == NRT_UNINITIALIZED, "nrt_memcpy_to_device before nrt_init -> 13");
  CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") == NRT_SUCCESS, "nrt_init");

  allocation_and_free();
  read_write_copy_memset();
  slices();
  va_memcpy_to_device_and_info();
  attach_and_batches();
  tensor_sets();

  nrt_close();
  CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, -1, 8, "t", &t) == NRT_UNINITIALIZED,
        "after nrt_close -> NRT_UNINITIALIZED (13)");
  return check_summary("tensor_test");
}
