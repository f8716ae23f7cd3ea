//! The pure parts of model loading: operand contiguity and the instruction context a graph
//! gives (its groups for one device, one id space for tensors and vars, pairs in rank indices).

use super::*;
use crate::neff::{PairSet, Var};

#[test]
fn contiguous_walks() {
    assert!(contiguous([1, 0], [64, 1]), "the 1-D default");
    assert!(contiguous([1, 8], [8, 4]), "rows back to back");
    assert!(!contiguous([1, 16], [8, 4]), "a gap between rows");
    assert!(!contiguous([2, 0], [8, 1]), "a strided row");
    assert!(contiguous([5, 0], [1, 1]), "one element");
}

fn var(name: &str, kind: VarKind, id: u32, size: u64) -> Var {
    Var {
        name: name.into(),
        kind,
        var_id: id,
        size,
        dtype: None,
        shape: None,
    }
}

#[test]
fn the_context_of_a_graph_for_one_device() {
    let g = Graph {
        name: "sg00".into(),
        def_member: "sg00/def.json".into(),
        vars: vec![
            var("SB", VarKind::StateBuffer, 0, 0),
            var("input0", VarKind::Input, 1, 256),
            var("output0", VarKind::Output, 2, 512),
        ],
        dma_queues: Vec::new(),
        replica_groups: vec![vec![vec![0, 2], vec![1, 3]], vec![vec![3, 2, 1, 0]]],
        src_target_pairs: vec![PairSet {
            group_id: 1,
            pairs: vec![(3, 2), (2, 1), (1, 0), (0, 3)],
        }],
        num_streams: 1,
        rank_world_size: 4,
        algorithm: None,
        programs: Vec::new(),
    };
    let ctx = instr_context(&g, 1).unwrap();
    assert_eq!(ctx.groups[&0], [1, 3], "the sub-group holding device 1");
    assert_eq!(ctx.groups[&1], [3, 2, 1, 0]);
    // Device ids → rank indices of group 1 ([3, 2, 1, 0]): 3→2 is rank 0 → rank 1.
    assert_eq!(ctx.permute_pairs[&1], [(0, 1), (1, 2), (2, 3), (3, 0)]);
    let t = ctx.tensors.as_ref().unwrap();
    assert_eq!(t[&1].bytes, 256);
    assert_eq!(t[&0].placement, Some(Placement::Sbuf));
    assert_eq!(ctx.vars.as_ref().unwrap()[&2].bytes, 512, "one id space");
    assert_eq!(ctx.collective_streams, Some(1));
}
