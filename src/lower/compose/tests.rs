use super::*;

#[test]
fn channel_windows_partition_the_block() {
    for (block, ch) in [(0u64, 4u8), (1, 4), (7, 3), (4099, 32), (1 << 20, 8)] {
        let p = ChunkPlan::new(block, ch, 64).unwrap();
        let mut next = 0;
        for c in 0..p.channels {
            let (s, e) = p.channel_window(c);
            assert_eq!(s, next);
            next = e;
            let covered: u64 = p.pieces(c).iter().map(|&(_, l)| l).sum();
            assert_eq!(covered, e - s);
        }
        assert_eq!(next, block);
    }
}

#[test]
fn split_even_covers_everything() {
    assert_eq!(split_even(7, 4), vec![(0, 2), (2, 2), (4, 2), (6, 1)]);
    assert_eq!(split_even(0, 3), vec![(0, 0), (0, 0), (0, 0)]);
    assert_eq!(split_even(8, 2), vec![(0, 4), (4, 4)]);
}

#[test]
fn chunk_alignment() {
    assert_eq!(default_chunk_elems(2), 1 << 20);
    assert_eq!(default_chunk_elems(4) % 32, 0);
    assert!(ChunkPlan::new(10, 0, 64).is_err());
    assert!(ChunkPlan::new(10, 33, 64).is_err());
    assert!(ChunkPlan::new(10, 1, 3).is_err());
}
