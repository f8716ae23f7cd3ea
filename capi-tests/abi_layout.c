/* Compile-time checks of the generated headers against the vendor's numbers.
 * Sizes and offsets: docs/contract/abi.md §2.4 (compiled from the public headers); enum values:
 * §2.1–§2.2 and design.md §2.4 (async 3.0 nrta_xu_t); libncfw: docs/contract/carrier.md §1.3.
 * Built as C11 and as C++ (the headers carry extern "C" guards). */
#include <stddef.h>
#include <stdint.h>

#include "ncfw/ncfw.h"
#include "nrt/nec.h"
#include "nrt/nrt.h"
#include "nrt/nrt_async.h"
#include "nrt/nrt_async_sendrecv.h"
#include "nrt/nrt_experimental.h"
#include "nrt/nrt_profile.h"
#include "nrt/nrt_status.h"
#include "nrt/nrt_sys_trace.h"
#include "nrt/nrt_version.h"

#ifdef __cplusplus
#define SA(c, m) static_assert(c, m)
#else
#define SA(c, m) _Static_assert(c, m)
#endif

/* §2.4 struct sizes */
SA(sizeof(nrt_version_t) == 224, "nrt_version_t 224");
SA(offsetof(nrt_version_t, rt_detail) == 32 && offsetof(nrt_version_t, git_hash) == 160, "nrt_version_t offsets");
SA(sizeof(nrt_instance_info_t) == 32, "nrt_instance_info_t 32");
SA(offsetof(nrt_instance_info_t, arch_name) == 8 && offsetof(nrt_instance_info_t, device_revision) == 24, "instance info offsets");
SA(sizeof(nrt_cc_comm_t) == 32, "nrt_cc_comm_t 32");
SA(offsetof(nrt_cc_comm_t, rank) == 8 && offsetof(nrt_cc_comm_t, rank_n) == 12 && offsetof(nrt_cc_comm_t, ctx_device_id) == 16 &&
       offsetof(nrt_cc_comm_t, ctx_device_count) == 20 && offsetof(nrt_cc_comm_t, vnc) == 24, "nrt_cc_comm_t offsets");
SA(sizeof(nrt_tensor_list_t) == 16, "nrt_tensor_list_t 16");
SA(sizeof(nrta_error_t) == 16, "nrta_error_t 16");
SA(sizeof(nrt_tensor_info_t) == 296, "nrt_tensor_info_t 296");
SA(offsetof(nrt_tensor_info_t, usage) == 256 && offsetof(nrt_tensor_info_t, size) == 264 && offsetof(nrt_tensor_info_t, dtype) == 272 &&
       offsetof(nrt_tensor_info_t, shape) == 280 && offsetof(nrt_tensor_info_t, ndim) == 288, "nrt_tensor_info_t offsets");
SA(sizeof(nrt_tensor_info_array_t) == 8, "nrt_tensor_info_array_t header 8");
SA(sizeof(nrt_tensor_batch_op_t) == 24, "nrt_tensor_batch_op_t 24");
SA(sizeof(nrt_tensor_batch_t) == 24, "nrt_tensor_batch_t 24");
SA(sizeof(nrt_tensor_device_allocation_info_t) == 24, "device allocation info 24");
SA(sizeof(nrt_vnc_memory_stats_t) == 16, "nrt_vnc_memory_stats_t 16");
SA(sizeof(nrt_model_info_t) == 4, "nrt_model_info_t 4");
SA(sizeof(nrt_ucode_img) == 16 && sizeof(nrt_ucode_info) == 32, "ucode structs 16 / 32");
SA(sizeof(nec_version_info_t) == 56 && offsetof(nec_version_info_t, compatibility_version) == 48, "nec_version_info_t");
SA(sizeof(enc_host_mem_t) == 32, "enc_host_mem_t 32");
SA(sizeof(nrta_seq_t) == 8 && sizeof(nrta_xu_id_t) == 2, "sequence types");
/* docs/contract/carrier.md §1.3 */
SA(sizeof(ncfw_ram_image_t) == 16 && sizeof(ncfw_image_t) == 32, "ncfw image descriptor 16 / 32");
SA(offsetof(ncfw_image_t, dram) == 16, "ncfw_image_t.dram at +0x10");
/* all enums are 4 bytes */
SA(sizeof(NRT_STATUS) == 4 && sizeof(nrt_dtype_t) == 4 && sizeof(nrta_xu_t) == 4 && sizeof(nrt_op_type_t) == 4, "enum sizes");

/* §2.1 status values (8 and 12 unused) */
SA(NRT_SUCCESS == 0 && NRT_FAILURE == 1 && NRT_INVALID == 2 && NRT_INVALID_HANDLE == 3 && NRT_RESOURCE == 4 &&
       NRT_TIMEOUT == 5 && NRT_HW_ERROR == 6 && NRT_QUEUE_FULL == 7 && NRT_LOAD_NOT_ENOUGH_NC == 9 &&
       NRT_UNSUPPORTED_NEFF_VERSION == 10 && NRT_FAIL_HOST_MEM_ALLOC == 11 && NRT_UNINITIALIZED == 13 &&
       NRT_CLOSED == 14 && NRT_QUEUE_EMPTY == 15, "status band A");
SA(NRT_EXEC_UNIT_UNRECOVERABLE == 101 && NRT_EXEC_BAD_INPUT == 1002 && NRT_EXEC_COMPLETED_WITH_NUM_ERR == 1003 &&
       NRT_EXEC_COMPLETED_WITH_ERR == 1004 && NRT_EXEC_NC_BUSY == 1005 && NRT_EXEC_OOB == 1006 && NRT_COLL_PENDING == 1100,
   "status band B");
SA(NRT_EXEC_HW_ERR_COLLECTIVES == 1200 && NRT_EXEC_HW_ERR_HBM_UE == 1201 && NRT_EXEC_HW_ERR_NC_UE == 1202 &&
       NRT_EXEC_HW_ERR_DMA_ABORT == 1203 && NRT_EXEC_SW_NQ_OVERFLOW == 1204 && NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE == 1205 &&
       NRT_NETWORK_PROXY_FAILURE == 1206, "status band C");
/* §2.2 other enums */
SA(NRT_DTYPE_UNKNOWN == 0 && NRT_DTYPE_UINT64 == 1 && NRT_DTYPE_INT8 == 2 && NRT_DTYPE_UINT8 == 3 && NRT_DTYPE_INT16 == 4 &&
       NRT_DTYPE_UINT16 == 5 && NRT_DTYPE_BFLOAT16 == 6 && NRT_DTYPE_FLOAT16 == 7 && NRT_DTYPE_INT32 == 8 &&
       NRT_DTYPE_UINT32 == 9 && NRT_DTYPE_FLOAT32 == 10 && NRT_DTYPE_FP32R == 11 && NRT_DTYPE_INT64 == 12 &&
       NRT_DTYPE_FP8_E3 == 13 && NRT_DTYPE_FP8_E4 == 14 && NRT_DTYPE_FP8_E5 == 15, "nrt_dtype_t");
SA(NRT_OP_ADD == 0 && NRT_OP_FMA == 1 && NRT_OP_MAX == 2 && NRT_OP_MIN == 3 && NRT_OP_INVALID == 0xF, "nrt_op_type_t");
SA(NRT_CC_ALLGATHER == 0 && NRT_CC_ALLREDUCE == 1 && NRT_CC_REDUCESCATTER == 2, "nrt_cc_op_type_t");
SA(NRTA_XU_TENSOR_OP == 0 && NRTA_XU_COMPUTE == 1 && NRTA_XU_COLLECTIVES == 2 && NRTA_XU_TYPE_NUM == 3, "nrta_xu_t (async 3.0)");
SA(NRT_TENSOR_PLACEMENT_DEVICE == 0 && NRT_TENSOR_PLACEMENT_HOST == 1 && NRT_TENSOR_PLACEMENT_VIRTUAL == 2, "placement");
SA(NRT_FRAMEWORK_TYPE_INVALID == 0 && NRT_FRAMEWORK_TYPE_NO_FW == 1 && NRT_FRAMEWORK_TYPE_TENSORFLOW == 2 &&
       NRT_FRAMEWORK_TYPE_PYTORCH == 3 && NRT_FRAMEWORK_TYPE_MXNET == 4 && NRT_FRAMEWORK_TYPE_PRECHECK == 5, "framework");
SA(NRT_TENSOR_USAGE_INPUT == 0 && NRT_TENSOR_USAGE_OUTPUT == 1, "usage");
SA(NRT_INSTANCE_TRN1 == 2 && NRT_INSTANCE_TRN2 == 5 && NRT_INSTANCE_TRN2U == 9 && NRT_INSTANCE_TRN3PDS98 == 15, "instance family");
SA(NRT_INSTANCE_SIZE_32XL == 6 && NRT_INSTANCE_SIZE_48XL == 7 && NRT_INSTANCE_SIZE_3XL == 8 && NRT_INSTANCE_SIZE_UNKNOWN == 9,
   "instance size");
SA(NEC_POD_TYPE_NONE == 0 && NEC_POD_TYPE_P2P == 1 && NEC_POD_TYPE_SWITCH == 2 && NEC_POD_TYPE_INVALID == 3, "nec_pod_type_t");
/* §2.3 macros */
SA(NRT_MAJOR_VERSION == 2 && NRT_MINOR_VERSION == 0 && RT_VERSION_DETAIL_LEN == 128 && GIT_HASH_LEN == 64 &&
       NRT_TENSOR_NAME_MAX == 256, "macros");
SA(NRTA_SEQ_NUM_MAX == ((1ull << 48) - 1) && NRTA_SEQ_NUM_MASK == NRTA_SEQ_NUM_MAX, "sequence masks");

int main(void) { return 0; }
