//! Word builders and a context shared by the instruction-path and stream-path tests.

use std::collections::BTreeMap;

use super::{InstrContext, TensorInfo};
use crate::error::{ErrorKind, Result};
use crate::isa::enums::{AluOp, CcDim, CollectiveType, Dtype, Flag, InstrChaining};
use crate::isa::instr::trigger::{
    Collective2, Collective2Ext, DmaConfigs, TriggerCollective, TriggerCollective2,
};
use crate::isa::instr::{Common, Instr};
use crate::isa::operand::{Addr4, PseudoAddr8, Tensor2d};
use crate::lower::request::{CollectiveRequest, Placement};

/// Groups 0 = devices 10..14, 1 = devices 20, 12; this device is 12 (rank 2 of group 0).
pub(crate) fn ctx() -> InstrContext {
    let groups = BTreeMap::from([(0, vec![10, 11, 12, 13]), (1, vec![20, 12])]);
    InstrContext::new(12, groups)
}

pub(crate) fn tensors(sizes: &[(u32, u64)]) -> Option<BTreeMap<u32, TensorInfo>> {
    Some(
        sizes
            .iter()
            .map(|&(id, bytes)| {
                (
                    id,
                    TensorInfo {
                        bytes,
                        placement: Some(Placement::Hbm),
                    },
                )
            })
            .collect(),
    )
}

pub(crate) fn c8(ctype: CollectiveType, op: AluOp, dtype: Dtype, n: u64) -> TriggerCollective {
    TriggerCollective {
        common: Common::default(),
        op,
        dtype,
        group_id: 0,
        input_tensor_id: 3,
        output_tensor_id: 4,
        num_elements: n,
        ctype,
        reserved: [0; 15],
        src_offset_elems: 0,
        dst_offset_elems: 0,
    }
}

pub(crate) fn var(v: u16, n: u32) -> Tensor2d {
    Tensor2d::contiguous(PseudoAddr8::var(v, 0).unwrap(), n)
}

pub(crate) fn c2(ctype: CollectiveType, op: AluOp, src0: Tensor2d, dst: Tensor2d) -> Collective2 {
    Collective2 {
        trigger: TriggerCollective2 {
            common: Common::default(),
            op,
            dtype: Dtype::Bf16,
            ctype,
            cc_dim: CcDim::Dim0,
            src0,
            src1: Tensor2d::default(),
        },
        ext: Collective2Ext {
            instr_chaining: InstrChaining::None,
            group_id: 0,
            channel_id: 0,
            stream_id: 0,
            dst,
            cc_buf_start_addr: Addr4::default(),
            cc_buf_size: 0,
            unique_tensors: Flag::Off,
            dma_configs: DmaConfigs::default(),
            src1_bitmap: 0,
            permute_chain: 0,
            cross_sb_out: Flag::Off,
            tail_reserved: [0; 32],
        },
    }
}

pub(crate) fn ar2(src: u16, dst: u16) -> Collective2 {
    c2(
        CollectiveType::AllReduce,
        AluOp::Add,
        var(src, 32),
        var(dst, 32),
    )
}

pub(crate) fn lower(i: Instr) -> Result<CollectiveRequest> {
    CollectiveRequest::from_instr(&i, &ctx())
}

pub(crate) fn err(i: Instr, c: &InstrContext) -> String {
    let e = CollectiveRequest::from_instr(&i, c).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    e.message().to_string()
}
