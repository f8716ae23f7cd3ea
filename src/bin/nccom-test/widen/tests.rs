use super::*;

/// The expected values are written out by hand from the rule (exact below 2^24, nearest-even
/// above, saturation on narrowing), not computed by the functions under test.
#[test]
fn widening_is_exact_below_2_pow_24_and_rounds_to_even_above() {
    assert_eq!(widen_one(Dtype::Uint8, 255), 255.0);
    assert_eq!(widen_one(Dtype::Int8, 0x80), -128.0);
    assert_eq!(widen_one(Dtype::Int16, 0xFFFF), -1.0);
    assert_eq!(widen_one(Dtype::Uint32, 16_777_216), 16_777_216.0);
    // 2^24 + 1 is halfway between 2^24 and 2^24 + 2: ties go to the even mantissa, 2^24.
    assert_eq!(widen_one(Dtype::Int32, 16_777_217), 16_777_216.0);
    // 2^24 + 3 is halfway between 2^24 + 2 and 2^24 + 4: to 2^24 + 4.
    assert_eq!(widen_one(Dtype::Uint32, 16_777_219), 16_777_220.0);
    assert_eq!(widen_one(Dtype::Uint32, 0xFFFF_FFFF), 4_294_967_296.0);
}

#[test]
fn narrowing_saturates_to_the_types_range() {
    assert_eq!(narrow_one(Dtype::Uint8, 300.0), 255);
    assert_eq!(narrow_one(Dtype::Uint8, -3.0), 0);
    assert_eq!(narrow_one(Dtype::Int8, 200.0), 0x7F);
    assert_eq!(narrow_one(Dtype::Int8, -200.0), 0x80);
    assert_eq!(narrow_one(Dtype::Int16, -1.0), 0xFFFF);
    assert_eq!(narrow_one(Dtype::Uint16, 65_535.0), 0xFFFF);
    assert_eq!(narrow_one(Dtype::Uint32, 4_294_967_296.0), 0xFFFF_FFFF);
    assert_eq!(narrow_one(Dtype::Int32, 3e9), 0x7FFF_FFFF);
    assert_eq!(narrow_one(Dtype::Int32, -3e9), 0x8000_0000);
    assert_eq!(narrow_one(Dtype::Uint8, f32::NAN), 0);
    assert_eq!(narrow_one(Dtype::Uint8, f32::INFINITY), 255);
}

/// A whole buffer through widen → an fp32 sum (as the CCE would add two ranks) → narrow,
/// against i64 arithmetic clamped by hand.
#[test]
fn a_widened_sum_of_two_buffers_is_the_clamped_integer_sum() {
    let a: [i8; 4] = [100, -100, 27, -1];
    let b: [i8; 4] = [100, -100, 100, 1];
    let want: [i8; 4] = [127, -128, 127, 0];
    let bytes = |v: &[i8]| v.iter().map(|&x| x as u8).collect::<Vec<u8>>();
    let (wa, wb) = (
        widen(Dtype::Int8, &bytes(&a)),
        widen(Dtype::Int8, &bytes(&b)),
    );
    let sum: Vec<u8> = wa
        .chunks_exact(4)
        .zip(wb.chunks_exact(4))
        .flat_map(|(x, y)| {
            let s = f32::from_le_bytes(x.try_into().unwrap())
                + f32::from_le_bytes(y.try_into().unwrap());
            s.to_le_bytes()
        })
        .collect();
    assert_eq!(narrow(Dtype::Int8, &sum), bytes(&want));
}

#[test]
fn only_integer_reductions_widen() {
    assert!(applies(Op::AllReduce, Dtype::Uint8));
    assert!(applies(Op::ReduceScatter, Dtype::Int32));
    assert!(!applies(Op::AllGather, Dtype::Uint8));
    assert!(!applies(Op::AllReduce, Dtype::Bf16));
    assert_eq!(wire_dtype(Op::AllReduce, Dtype::Int16), Dtype::Fp32);
    assert_eq!(wire_dtype(Op::AllToAll, Dtype::Int16), Dtype::Int16);
}

#[test]
fn check_data_keeps_every_partial_sum_exact_in_fp32() {
    assert_eq!(check_limit(Dtype::Uint8, 8), 255);
    assert_eq!(check_limit(Dtype::Int16, 2), 32_768);
    assert_eq!(check_limit(Dtype::Uint32, 2), 1 << 23);
    assert_eq!(check_limit(Dtype::Int32, 8), 1 << 21);
}
