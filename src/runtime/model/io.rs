//! A model's tensors as the data of one device collective ([`RankIo`]): the input is the
//! operand windows of the word read one after the other (one for most ops; src0 then src1 for
//! the implicit permute-reduce, whose input buffer is `[src0 | src1]`,
//! `lower::request::CollectiveRequest::input_elems`), the output one window.
//!
//! An all-to-all-v writes only its receive windows, and a permute nothing on a rank that is
//! no pair's target: the output bytes no transfer covers keep what the tensor held, as the
//! device's DMA leaves them. The staged result of the software
//! device covers the whole buffer, so [`NeffIo::dst_windows`] says which of its bytes to
//! store.

use crate::error::{Error, Result};
use crate::lower::program::Buf;
use crate::runtime::collective::RankIo;
use crate::runtime::tensor::{Placement, Tensor};

/// One operand window: `len` bytes of `tensor` from `offset`.
#[derive(Debug)]
pub(super) struct Part {
    pub(super) tensor: Tensor,
    pub(super) offset: u64,
    pub(super) len: u64,
}

/// A rank's windows of one collective.
#[derive(Debug)]
pub(super) struct NeffIo {
    pub(super) src: Vec<Part>,
    pub(super) dst: Option<Part>,
    /// Byte ranges `(offset, len)` of the output the collective writes; `None` = all of it.
    pub(super) dst_windows: Option<Vec<(u64, u64)>>,
}

impl NeffIo {
    /// The one tensor whose bytes are exactly `p` (a device tensor, the whole of it).
    fn whole(p: &Part) -> Option<&Tensor> {
        (p.offset == 0 && p.len == p.tensor.size() && p.tensor.placement() == Placement::Device)
            .then_some(&p.tensor)
    }
}

impl RankIo for NeffIo {
    fn input_into(&self, v: &mut [u8]) -> Result<()> {
        let total: u64 = self.src.iter().map(|p| p.len).sum();
        if total != v.len() as u64 {
            return Err(Error::failure(format!(
                "the program reads {} input bytes, the operands hold {total} (an OpenNRT bug)",
                v.len()
            )));
        }
        let mut at = 0usize;
        for p in &self.src {
            let n = p.len as usize;
            p.tensor.read(p.offset, &mut v[at..at + n])?;
            at += n;
        }
        Ok(())
    }

    fn output(&self, data: &[u8]) -> Result<()> {
        match &self.dst {
            Some(p) => {
                if data.len() as u64 != p.len {
                    return Err(Error::failure(format!(
                        "the program produced {} output bytes, the operand holds {} (an \
                         OpenNRT bug)",
                        data.len(),
                        p.len
                    )));
                }
                match &self.dst_windows {
                    None => p.tensor.write(p.offset, data),
                    Some(w) => {
                        for &(at, len) in w {
                            let (a, n) = (at as usize, len as usize);
                            let bytes = data.get(a..a + n).ok_or_else(|| {
                                Error::failure(format!(
                                    "a receive window [{a}, {}) outside the {} output bytes \
                                     (an OpenNRT bug)",
                                    a + n,
                                    data.len()
                                ))
                            })?;
                            p.tensor.write(p.offset + at, bytes)?;
                        }
                        Ok(())
                    }
                }
            }
            None if data.is_empty() => Ok(()),
            None => Err(Error::failure(
                "an output without an operand (an OpenNRT bug)",
            )),
        }
    }

    fn device_tensor(&self, buf: Buf) -> Option<&Tensor> {
        let in_place = match (self.src.first(), &self.dst) {
            (Some(s), Some(d)) => s.tensor.storage_key() == d.tensor.storage_key(),
            _ => false,
        };
        match buf {
            Buf::Input if self.src.len() == 1 => NeffIo::whole(&self.src[0]),
            Buf::Output if !in_place => self.dst.as_ref().and_then(NeffIo::whole),
            _ => None,
        }
    }
}
