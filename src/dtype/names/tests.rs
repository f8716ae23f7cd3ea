use super::*;

/// One row per type, no type twice.
#[test]
fn every_dtype_has_one_row() {
    for &d in Dtype::ALL {
        let n = DTYPE_NAMES.iter().filter(|r| r.dtype == d).count();
        assert_eq!(n, 1, "{d}");
    }
    assert_eq!(DTYPE_NAMES.len(), Dtype::ALL.len());
}

/// No word of one vocabulary names two types.
#[test]
fn words_are_unique_per_vocabulary() {
    let short = |r: &DtypeNames| {
        r.short
            .into_iter()
            .chain(r.short_aliases.iter().copied())
            .collect()
    };
    let nccom = |r: &DtypeNames| r.nccom.into_iter().chain(r.nccom_extra).collect();
    let numpy = |r: &DtypeNames| {
        r.numpy
            .into_iter()
            .chain(r.numpy_aliases.iter().copied())
            .collect()
    };
    for words in [short as fn(&DtypeNames) -> Vec<&str>, nccom, numpy] {
        let mut all: Vec<String> = DTYPE_NAMES
            .iter()
            .flat_map(words)
            .map(str::to_ascii_lowercase)
            .collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "{all:?}");
    }
}

/// What each tool printed and accepted before the table existed.
#[test]
fn spellings_are_the_tools() {
    let short: Vec<_> = Dtype::short_names().collect();
    assert_eq!(
        short.join(", "),
        "bf16, fp16, fp32, fp8_e3m4, fp8_e4m3, fp8_e5m2, int8, uint8, int16, uint16, int32, \
         uint32, int64, uint64"
    );
    assert_eq!(Dtype::Fp32r.short_name(), "FP32R");
    assert_eq!(Dtype::from_short_name("FP8_E4"), Some(Dtype::Fp8E4));
    assert_eq!(Dtype::from_short_name("fp8"), None);
    assert_eq!(Dtype::from_short_name(" bf16"), None);

    assert_eq!(Dtype::Fp8E4.nccom_name(), Some("fp8"));
    assert_eq!(Dtype::Fp8E3.nccom_name(), Some("fp8e3"));
    assert_eq!(Dtype::Int64.nccom_name(), None);
    assert_eq!(Dtype::from_nccom_name(" FP8E4 "), Some(Dtype::Fp8E4));
    assert_eq!(Dtype::from_nccom_name("fp8_e4m3"), None);

    assert_eq!(Dtype::Bf16.numpy_name(), Some("bfloat16"));
    assert_eq!(Dtype::Fp32r.numpy_name(), None);
    assert_eq!(Dtype::from_numpy_name("float8_e4m3fn"), Some(Dtype::Fp8E4));
    assert_eq!(Dtype::from_numpy_name("fp8_e5m2"), Some(Dtype::Fp8E5));
    assert_eq!(Dtype::from_numpy_name("bf16"), None);
    assert_eq!(Dtype::from_numpy_name("Float32"), None);
}

/// Every name a vocabulary prints parses back to its type.
#[test]
fn printed_names_parse_back() {
    for &d in Dtype::ALL {
        if let Some(s) = d.names().short {
            assert_eq!(Dtype::from_short_name(s), Some(d));
        }
        if let Some(s) = d.nccom_name() {
            assert_eq!(Dtype::from_nccom_name(s), Some(d));
        }
        if let Some(s) = d.numpy_name() {
            assert_eq!(Dtype::from_numpy_name(s), Some(d));
        }
    }
}

/// The model loader turns a numpy name into `nrt_dtype_t` through [`Dtype`]: the C numbering is
/// the wire numbering.
#[test]
fn nrt_dtype_codes_are_the_wire_codes() {
    use crate::abi::types::nrt_dtype_t;
    for &d in Dtype::ALL {
        assert_eq!(nrt_dtype_t::from(d) as u32, u32::from(d.as_u8()), "{d}");
    }
}
