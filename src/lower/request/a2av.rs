//! All-to-all-v metadata (docs/contract/isa.md §9 rule 9 **\[H\]**): which rows of the src1
//! metadata tensor are inputs, which is an output, and — once the values are known — the
//! resolved per-rank table the composer works from.
//!
//! The metadata tensor holds up to 4 rows of rank_n uint32 entries: row 0 send counts, row 1
//! send displacements, row 2 receive counts, row 3 receive displacements. `src1_bitmap` bit i
//! says row i is an **input**. Bits 0 and 1 must be set. Bit 2 clear: row 2 still exists but is
//! an **output** (the runtime writes the counts actually received into it). Bit 3 clear: the
//! receive displacement from peer r is `(dst_total_elems / rank_n) · r` (row 3 is derived and
//! never read).
//!
//! The values live in device memory and are read at execution, so a request built at load time
//! carries the row roles and the metadata operand only ([`A2avMeta::table`] = `None`). Whoever
//! knows the values (a test, the CLI, the executor before composing) calls
//! [`A2avMeta::resolve`] with every rank's rows and gets an [`A2avTable`]: the full
//! rank × peer matrices, checked.

use serde::Serialize;

use super::Operand;
use crate::error::{Error, Result};

/// The role of one metadata row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum A2avRow {
    /// Read by the collective (its bitmap bit is set).
    Input,
    /// Written by the collective: row 2 with bit 2 clear (the received counts).
    Output,
    /// Not read; computed: row 3 with bit 3 clear (`(dst_total / rank_n) · r`).
    Derived,
}

/// Row names, for messages.
const ROW_NAMES: [&str; 4] = [
    "send counts (row 0)",
    "send displacements (row 1)",
    "receive counts (row 2)",
    "receive displacements (row 3)",
];

/// All-to-all-v metadata of a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct A2avMeta {
    /// The src1 metadata tensor (uint32 entries), when the word named one.
    pub metadata: Option<Operand>,
    /// `src1_bitmap` as on the wire.
    pub bitmap: u8,
    /// Role of rows 0..4.
    pub rows: [A2avRow; 4],
    /// Elements of each rank's input buffer (src0).
    pub input_elems: u64,
    /// Elements of each rank's output buffer (dst); `dst_total_elems` of rule 9.
    pub output_elems: u64,
    /// The resolved table, when the values are known.
    pub table: Option<A2avTable>,
}

/// The resolved all-to-all-v plan, every matrix indexed `[rank][peer]` in elements.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct A2avTable {
    /// `send_counts[r][p]`: elements rank r sends to peer p.
    pub send_counts: Vec<Vec<u64>>,
    /// `send_displs[r][p]`: where in rank r's input they start.
    pub send_displs: Vec<Vec<u64>>,
    /// `recv_counts[r][p]` = `send_counts[p][r]`: what rank r receives from p. When row 2 is an
    /// output, this is what the runtime writes back into it.
    pub recv_counts: Vec<Vec<u64>>,
    /// `recv_displs[r][p]`: where in rank r's output they land (given, or derived).
    pub recv_displs: Vec<Vec<u64>>,
}

impl A2avMeta {
    /// The row roles of `bitmap`; bits 0 and 1 must both be set (rule 9). Bits 4–7 are not
    /// defined by any source and must be clear.
    pub fn from_bitmap(
        bitmap: u8,
        input_elems: u64,
        output_elems: u64,
        metadata: Option<Operand>,
    ) -> Result<Self> {
        if bitmap & 0b11 != 0b11 {
            return Err(Error::invalid(format!(
                "ALL_TO_ALL_V: src1_bitmap = {bitmap:#04x}: bits 0 (send counts) and 1 (send \
                 displacements) must both be set; those rows are always inputs \
                 (docs/contract/isa.md §9 rule 9)"
            )));
        }
        if bitmap & 0xF0 != 0 {
            return Err(Error::invalid(format!(
                "ALL_TO_ALL_V: src1_bitmap = {bitmap:#04x}: only bits 0-3 name metadata rows; \
                 bits 4-7 must be clear (docs/contract/isa.md §9 rule 9)"
            )));
        }
        let rows = [
            A2avRow::Input,
            A2avRow::Input,
            if bitmap & 4 != 0 {
                A2avRow::Input
            } else {
                A2avRow::Output
            },
            if bitmap & 8 != 0 {
                A2avRow::Input
            } else {
                A2avRow::Derived
            },
        ];
        Ok(A2avMeta {
            metadata,
            bitmap,
            rows,
            input_elems,
            output_elems,
            table: None,
        })
    }

    /// Resolve the plan from every rank's metadata rows: `rows[r][i]` is row i of rank r's
    /// metadata tensor (each rank_n entries). Rows whose role is not [`A2avRow::Input`] may be
    /// omitted or hold anything; they are not read. Checks, each an error naming rank, peer and
    /// values: every input row present with rank_n entries; every send window inside the input
    /// buffer; a given receive count equal to what the peer sends; every receive window inside
    /// the output buffer; and no two receive windows of a rank overlapping (the result would
    /// depend on arrival order).
    pub fn resolve(&self, rank_n: u32, rows: &[Vec<Vec<u64>>]) -> Result<A2avTable> {
        let n = rank_n as usize;
        if rows.len() != n {
            return Err(Error::invalid(format!(
                "ALL_TO_ALL_V: metadata rows given for {} ranks; the group has rank_n = {n}",
                rows.len()
            )));
        }
        let row = |r: usize, i: usize| -> Result<&[u64]> {
            match rows[r].get(i) {
                Some(v) if v.len() == n => Ok(v),
                Some(v) => Err(Error::invalid(format!(
                    "ALL_TO_ALL_V: rank {r}'s {} has {} entries; it needs rank_n = {n}",
                    ROW_NAMES[i],
                    v.len()
                ))),
                None => Err(Error::invalid(format!(
                    "ALL_TO_ALL_V: rank {r}'s {} is missing; src1_bitmap {:#04x} marks it as an \
                     input",
                    ROW_NAMES[i], self.bitmap
                ))),
            }
        };
        let mut t = A2avTable {
            send_counts: Vec::with_capacity(n),
            send_displs: Vec::with_capacity(n),
            recv_counts: vec![vec![0; n]; n],
            recv_displs: vec![vec![0; n]; n],
        };
        for r in 0..n {
            let counts = row(r, 0)?.to_vec();
            let displs = row(r, 1)?.to_vec();
            for p in 0..n {
                let end = displs[p].checked_add(counts[p]);
                if end.is_none_or(|e| e > self.input_elems) {
                    return Err(Error::invalid(format!(
                        "ALL_TO_ALL_V: rank {r} sends {} elements to peer {p} from displacement \
                         {}, past its input of {} elements",
                        counts[p], displs[p], self.input_elems
                    )));
                }
            }
            t.send_counts.push(counts);
            t.send_displs.push(displs);
        }
        let block = self.output_elems / u64::from(rank_n.max(1));
        for r in 0..n {
            for p in 0..n {
                t.recv_counts[r][p] = t.send_counts[p][r];
            }
            if self.rows[2] == A2avRow::Input {
                let given = row(r, 2)?;
                if let Some(p) = (0..n).find(|&p| given[p] != t.recv_counts[r][p]) {
                    return Err(Error::invalid(format!(
                        "ALL_TO_ALL_V: rank {r}'s receive count from peer {p} is {} but peer {p} \
                         sends it {}",
                        given[p], t.recv_counts[r][p]
                    )));
                }
            }
            t.recv_displs[r] = match self.rows[3] {
                A2avRow::Input => row(r, 3)?.to_vec(),
                _ => (0..n as u64).map(|p| block * p).collect(),
            };
            let mut windows: Vec<(u64, u64, usize)> = Vec::with_capacity(n);
            for p in 0..n {
                let (d, c) = (t.recv_displs[r][p], t.recv_counts[r][p]);
                match d.checked_add(c) {
                    Some(e) if e <= self.output_elems => {
                        if c > 0 {
                            windows.push((d, e, p));
                        }
                    }
                    _ => {
                        return Err(Error::invalid(format!(
                            "ALL_TO_ALL_V: rank {r} receives {c} elements from peer {p} at \
                             displacement {d}, past its output of {} elements",
                            self.output_elems
                        )))
                    }
                }
            }
            windows.sort_unstable();
            for w in windows.windows(2) {
                let ((_, e0, p0), (s1, _, p1)) = (w[0], w[1]);
                if s1 < e0 {
                    return Err(Error::invalid(format!(
                        "ALL_TO_ALL_V: on rank {r} the receive windows of peers {p0} and {p1} \
                         overlap (one ends at {e0}, the other starts at {s1})"
                    )));
                }
            }
        }
        Ok(t)
    }

    /// [`resolve`](Self::resolve) and keep the table.
    pub fn with_table(mut self, rank_n: u32, rows: &[Vec<Vec<u64>>]) -> Result<Self> {
        self.table = Some(self.resolve(rank_n, rows)?);
        Ok(self)
    }
}

/// Bytes of the metadata tensor of a `rank_n`-rank group: 4 rows of `rank_n` uint32 entries
/// (docs/contract/isa.md §9 rule 9; the operand's element count is the entry count).
pub fn metadata_bytes(rank_n: u32) -> u64 {
    16 * u64::from(rank_n)
}

/// The metadata tensor of one rank: `rows` (row i at byte `4·rank_n·i`), each entry a
/// little-endian uint32, as the device reads it. Every row must hold `rank_n` entries.
///
/// # Errors
/// `NRT_INVALID` naming the row for a row of another length or an entry above `u32::MAX`.
pub fn encode_metadata(rank_n: u32, rows: &[Vec<u64>; 4]) -> Result<Vec<u8>> {
    let n = rank_n as usize;
    let mut out = Vec::with_capacity(16 * n);
    for (i, row) in rows.iter().enumerate() {
        if row.len() != n {
            return Err(Error::invalid(format!(
                "ALL_TO_ALL_V: the {} has {} entries; the group has rank_n = {n}",
                ROW_NAMES[i],
                row.len()
            )));
        }
        for (p, &v) in row.iter().enumerate() {
            let v = u32::try_from(v).map_err(|_| {
                Error::invalid(format!(
                    "ALL_TO_ALL_V: entry {p} of the {} is {v}, above the uint32 the metadata \
                     tensor holds",
                    ROW_NAMES[i]
                ))
            })?;
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    Ok(out)
}

/// The four rows of a metadata tensor of `rank_n` entries per row (the inverse of
/// [`encode_metadata`]); the input of [`A2avMeta::resolve`] for one rank.
///
/// # Errors
/// `NRT_INVALID` when `bytes` is not exactly [`metadata_bytes`]`(rank_n)` long.
pub fn decode_metadata(rank_n: u32, bytes: &[u8]) -> Result<Vec<Vec<u64>>> {
    if bytes.len() as u64 != metadata_bytes(rank_n) {
        return Err(Error::invalid(format!(
            "ALL_TO_ALL_V: the metadata tensor has {} bytes; 4 rows of rank_n = {rank_n} \
             uint32 entries are {}",
            bytes.len(),
            metadata_bytes(rank_n)
        )));
    }
    let n = rank_n as usize;
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect::<Vec<u64>>()
        .chunks(n.max(1))
        .map(<[u64]>::to_vec)
        .collect())
}

#[cfg(test)]
mod tests;
