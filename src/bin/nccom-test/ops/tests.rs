use super::*;

#[test]
fn words_parse_both_spellings() {
    let parse = Op::from_nccom_word;
    assert_eq!(parse("allr"), Some(Op::AllReduce));
    assert_eq!(parse("all_reduce"), Some(Op::AllReduce));
    assert_eq!(parse("ALLG"), Some(Op::AllGather));
    assert_eq!(parse("redsct"), Some(Op::ReduceScatter));
    assert_eq!(parse("alltoallv"), Some(Op::AllToAllV));
    assert_eq!(parse("allgv"), Some(Op::AllGatherV));
    assert_eq!(parse("broadcast"), None);
    // The builder's canonical names are not nccom-test words.
    assert_eq!(parse("all_to_all"), None);
    assert_eq!(parse("send_recv"), None);
    assert_eq!(Op::ReduceScatter.nccom_name(), "reduce_scatter");
    assert_eq!(Op::AllToAll.nccom_name(), "alltoall");
    for r in opennrt::neff::build::BUILD_OP_NAMES {
        for w in r.nccom {
            assert_eq!(parse(w), Some(r.op));
        }
    }
}

/// The vendor's factors: allr 2(r−1)/r; allg, redsct, alltoall (r−1)/r; sendrecv, permute 1.
#[test]
fn bus_factors_are_the_vendors() {
    assert_eq!(Op::AllReduce.busbw_factor(2), 1.0);
    assert_eq!(Op::AllReduce.busbw_factor(16), 2.0 * 15.0 / 16.0);
    assert_eq!(Op::AllGather.busbw_factor(32), 31.0 / 32.0);
    assert_eq!(Op::ReduceScatter.busbw_factor(4), 0.75);
    assert_eq!(Op::AllToAll.busbw_factor(8), 7.0 / 8.0);
    assert_eq!(Op::SendRecv.busbw_factor(8), 1.0);
    assert_eq!(Op::Permute.busbw_factor(8), 1.0);
}

/// all-reduce: one rank's buffer; all-gather: the total output; the rest per the module doc.
#[test]
fn sizes_round_down_to_whole_blocks() {
    let s = size_for(Op::AllReduce, 8, 4, 1023);
    assert_eq!((s.count, s.bytes, s.elems), (255, 1020, 255));
    assert_eq!((s.in_bytes, s.out_bytes), (1020, 1020));
    let s = size_for(Op::AllGather, 8, 4, 1023);
    assert_eq!((s.count, s.bytes, s.elems), (31, 992, 248));
    assert_eq!((s.in_bytes, s.out_bytes), (124, 992));
    let s = size_for(Op::ReduceScatter, 2, 4, 1024);
    assert_eq!((s.count, s.in_bytes, s.out_bytes), (128, 1024, 512));
    let s = size_for(Op::AllToAll, 4, 2, 1024);
    assert_eq!((s.count, s.in_bytes, s.out_bytes), (128, 1024, 1024));
    let s = size_for(Op::Permute, 4, 1, 100);
    assert_eq!((s.count, s.in_bytes, s.out_bytes), (100, 100, 100));
    assert_eq!(size_for(Op::AllGather, 16, 4, 4).count, 0);
}

/// The variable-size ops' sizes: alltoallv as alltoall (one rank's buffer, g blocks in and
/// out), allgv as allg (the total output).
#[test]
fn variable_size_ops_size_like_their_fixed_twins() {
    assert!(Op::AllToAllV.is_variable() && Op::AllGatherV.is_variable());
    assert!(!Op::AllToAll.is_variable());
    let s = size_for(Op::AllToAllV, 4, 4, 1000);
    assert_eq!(
        (s.count, s.bytes, s.in_bytes, s.out_bytes),
        (62, 992, 992, 992)
    );
    let s = size_for(Op::AllGatherV, 4, 4, 1000);
    assert_eq!(
        (s.count, s.bytes, s.in_bytes, s.out_bytes),
        (62, 992, 248, 992)
    );
    assert!(Op::AllReduce.is_reducing() && !Op::AllGather.is_reducing());
}
