//! How a [`Dtype`] is spelled, in one table ([`DTYPE_NAMES`]). The wire name (`BFLOAT16`) is
//! the ISA table's ([`Dtype::name`]); this table holds the others:
//!
//! * OpenNRT's short name (`bf16`, `fp8_e4m3`): `opennrt … --dtype`, the case names, the `perf`
//!   tables and log lines;
//! * nccom-test's `-d` words: the vendor's (`fp8` is FP8 E4M3) and the few OpenNRT adds;
//! * the numpy / ml_dtypes name a NEFF's `tensor_map.json` carries (docs/neff.md §1.1), which the
//!   NEFF writer writes and the model loader reads.
//!
//! One table, so that the tools, the NEFF writer and the NEFF reader cannot drift apart. Each
//! vocabulary keeps its own parser, because each accepts its own words: `fp8` is nccom-test's
//! and no one else's.

use super::Dtype;

/// The spellings of one type: one row of [`DTYPE_NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DtypeNames {
    /// The type.
    pub dtype: Dtype,
    /// OpenNRT's short name, if the type has one (INVALID and FP32R do not).
    pub short: Option<&'static str>,
    /// More words `--dtype` accepts (the short FP8 names `fp8_e3`, `fp8_e4`, `fp8_e5`).
    pub short_aliases: &'static [&'static str],
    /// The vendor nccom-test's `-d` word for the type.
    pub nccom: Option<&'static str>,
    /// The `-d` word OpenNRT's nccom-test adds: the other FP8 formats, and `fp8e4` beside the
    /// vendor's `fp8`.
    pub nccom_extra: Option<&'static str>,
    /// The numpy name of `tensor_map.json` (the FP8 names are ml_dtypes', what JAX and the
    /// Neuron compiler use).
    pub numpy: Option<&'static str>,
    /// More names the NEFF reader accepts for the type (ml_dtypes' `float8_e4m3fn`, and the
    /// short FP8 names).
    pub numpy_aliases: &'static [&'static str],
}

const fn row(
    dtype: Dtype,
    short: Option<&'static str>,
    short_aliases: &'static [&'static str],
    nccom: Option<&'static str>,
    nccom_extra: Option<&'static str>,
    numpy: Option<&'static str>,
    numpy_aliases: &'static [&'static str],
) -> DtypeNames {
    DtypeNames {
        dtype,
        short,
        short_aliases,
        nccom,
        nccom_extra,
        numpy,
        numpy_aliases,
    }
}

/// Every type's spellings, in the order `--dtype` lists its names (the floats, then the
/// integers by width); the two types without a short name last.
#[rustfmt::skip]
pub const DTYPE_NAMES: [DtypeNames; 16] = {
    use Dtype as D;
    [
        row(D::Bf16, Some("bf16"), &[], Some("bf16"), None, Some("bfloat16"), &[]),
        row(D::Fp16, Some("fp16"), &[], Some("fp16"), None, Some("float16"), &[]),
        row(D::Fp32, Some("fp32"), &[], Some("fp32"), None, Some("float32"), &[]),
        row(D::Fp8E3, Some("fp8_e3m4"), &["fp8_e3"], None, Some("fp8e3"), Some("float8_e3m4"), &["fp8_e3m4"]),
        row(D::Fp8E4, Some("fp8_e4m3"), &["fp8_e4"], Some("fp8"), Some("fp8e4"), Some("float8_e4m3"), &["float8_e4m3fn", "fp8_e4m3"]),
        row(D::Fp8E5, Some("fp8_e5m2"), &["fp8_e5"], None, Some("fp8e5"), Some("float8_e5m2"), &["fp8_e5m2"]),
        row(D::Int8, Some("int8"), &[], Some("int8"), None, Some("int8"), &[]),
        row(D::Uint8, Some("uint8"), &[], Some("uint8"), None, Some("uint8"), &[]),
        row(D::Int16, Some("int16"), &[], Some("int16"), None, Some("int16"), &[]),
        row(D::Uint16, Some("uint16"), &[], Some("uint16"), None, Some("uint16"), &[]),
        row(D::Int32, Some("int32"), &[], Some("int32"), None, Some("int32"), &[]),
        row(D::Uint32, Some("uint32"), &[], Some("uint32"), None, Some("uint32"), &[]),
        row(D::Int64, Some("int64"), &[], None, None, Some("int64"), &[]),
        row(D::Uint64, Some("uint64"), &[], None, None, Some("uint64"), &[]),
        row(D::Fp32r, None, &[], None, None, None, &[]),
        row(D::Invalid, None, &[], None, None, None, &[]),
    ]
};

impl Dtype {
    /// This type's row of [`DTYPE_NAMES`].
    pub fn names(self) -> &'static DtypeNames {
        DTYPE_NAMES
            .iter()
            .find(|r| r.dtype == self)
            .expect("DTYPE_NAMES has a row for every Dtype")
    }

    /// OpenNRT's short name (`bf16`); the wire name for INVALID and FP32R, which have none.
    pub fn short_name(self) -> &'static str {
        self.names().short.unwrap_or_else(|| self.name())
    }

    /// The short names `--dtype` lists, in table order (aliases not included).
    pub fn short_names() -> impl Iterator<Item = &'static str> {
        DTYPE_NAMES.iter().filter_map(|r| r.short)
    }

    /// The type of a `--dtype` word: a short name or alias, in any case.
    pub fn from_short_name(s: &str) -> Option<Dtype> {
        find(
            |r| r.short.into_iter().chain(r.short_aliases.iter().copied()),
            |w| w.eq_ignore_ascii_case(s),
        )
    }

    /// The nccom-test word printed for the type (the type column, the JSON report): the
    /// vendor's when it has one (`fp8` for E4M3), else OpenNRT's.
    pub fn nccom_name(self) -> Option<&'static str> {
        let r = self.names();
        r.nccom.or(r.nccom_extra)
    }

    /// The type of an nccom-test `-d` word (trimmed, any case).
    pub fn from_nccom_name(s: &str) -> Option<Dtype> {
        let s = s.trim();
        find(
            |r| r.nccom.into_iter().chain(r.nccom_extra),
            |w| w.eq_ignore_ascii_case(s),
        )
    }

    /// The numpy name the NEFF writer gives the type; `None` for INVALID and FP32R.
    pub fn numpy_name(self) -> Option<&'static str> {
        self.names().numpy
    }

    /// The type of a `tensor_map.json` dtype name (exact case), as the NEFF reader takes it.
    pub fn from_numpy_name(s: &str) -> Option<Dtype> {
        find(
            |r| r.numpy.into_iter().chain(r.numpy_aliases.iter().copied()),
            |w| w == s,
        )
    }
}

/// The first type one of whose `words` (from its row) `hit` accepts.
fn find<I: Iterator<Item = &'static str>>(
    words: impl Fn(&'static DtypeNames) -> I,
    hit: impl Fn(&str) -> bool,
) -> Option<Dtype> {
    DTYPE_NAMES
        .iter()
        .find(|r| words(r).any(&hit))
        .map(|r| r.dtype)
}

#[cfg(test)]
mod tests;
