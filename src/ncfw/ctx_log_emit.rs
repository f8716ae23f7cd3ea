//! Emission primitives of the `ctx_log` writer (docs/contract/carrier.md §4.1): the bounded
//! `snprintf`-style appends into the caller buffer with a per-call truncation flag, the
//! unaligned little-endian context reads, and the object / array / scalar / `{addr}` leaf
//! shapes with the whitespace rules of choice 2 in [`ctx_log`](super::ctx_log).

use std::fmt::{self, Display, Write as _};

/// A zeroed caller buffer with `snprintf`-style bounded appends and a per-call truncation flag.
pub(super) struct LogBuf<'a> {
    buf: &'a mut [u8],
    len: usize,
    pub(super) truncated: bool,
}

impl<'a> LogBuf<'a> {
    pub(super) fn new(buf: &'a mut [u8]) -> Self {
        buf.fill(0);
        LogBuf {
            buf,
            len: 0,
            truncated: false,
        }
    }

    pub(super) fn push(&mut self, s: &[u8]) {
        // Invariant: len <= cap - 1, so the budget is at least 1 (room for the NUL).
        let budget = self.buf.len() - self.len;
        let n = if s.len() >= budget {
            self.truncated = true;
            budget - 1
        } else {
            s.len()
        };
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }
}

impl fmt::Write for LogBuf<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

/// glibc's `%p`: `(nil)` for a null pointer, else `0x` and lowercase hex without padding.
pub fn glibc_ptr(v: u64) -> String {
    if v == 0 {
        "(nil)".to_string()
    } else {
        format!("{v:#x}")
    }
}

/// The quoted `"0x%016lX"` address string.
pub fn soc_addr(v: u64) -> String {
    format!("\"0x{v:016X}\"")
}

/// The walker: the context bytes, their address in the caller's memory, and the output.
pub(super) struct Walker<'c, 'b> {
    pub(super) ctx: &'c [u8],
    pub(super) out: LogBuf<'b>,
}

fn sep(last: bool) -> &'static str {
    if last {
        "\n"
    } else {
        ",\n"
    }
}

impl Walker<'_, '_> {
    pub(super) fn u8(&self, o: usize) -> u8 {
        self.ctx[o]
    }
    pub(super) fn u16(&self, o: usize) -> u16 {
        u16::from_le_bytes([self.ctx[o], self.ctx[o + 1]])
    }
    pub(super) fn u32(&self, o: usize) -> u32 {
        let mut b = [0; 4];
        b.copy_from_slice(&self.ctx[o..o + 4]);
        u32::from_le_bytes(b)
    }
    pub(super) fn u64(&self, o: usize) -> u64 {
        let mut b = [0; 8];
        b.copy_from_slice(&self.ctx[o..o + 8]);
        u64::from_le_bytes(b)
    }
    /// The host address of context byte `o` (what the vendor prints with `%p`).
    pub(super) fn host_addr(&self, o: usize) -> u64 {
        (self.ctx.as_ptr() as usize + o) as u64
    }

    pub(super) fn ind(&mut self, n: usize) {
        let _ = write!(self.out, "{:n$}", "");
    }
    /// `<ind>"key": {` or, for an array element (empty key), `<ind>{`.
    pub(super) fn open(&mut self, ind: usize, key: &str) {
        self.ind(ind);
        if key.is_empty() {
            let _ = self.out.write_str("{\n");
        } else {
            let _ = writeln!(self.out, "\"{key}\": {{");
        }
    }
    pub(super) fn close(&mut self, ind: usize, last: bool) {
        self.ind(ind);
        let _ = write!(self.out, "}}{}", sep(last));
    }
    pub(super) fn arr_open(&mut self, ind: usize, key: &str) {
        self.ind(ind);
        let _ = writeln!(self.out, "\"{key}\": [");
    }
    pub(super) fn arr_close(&mut self, ind: usize, last: bool) {
        self.ind(ind);
        let _ = write!(self.out, "]{}", sep(last));
    }
    pub(super) fn scalar(&mut self, ind: usize, key: &str, v: impl Display, last: bool) {
        self.ind(ind);
        let _ = write!(self.out, "\"{key}\": {v}{}", sep(last));
    }
    pub(super) fn element(&mut self, ind: usize, v: impl Display, last: bool) {
        self.ind(ind);
        let _ = write!(self.out, "{v}{}", sep(last));
    }
    /// The `{addr}` leaf body: `"addr": { "soc_addr": "0x…" }` at `ind`.
    pub(super) fn addr_body(&mut self, ind: usize, v: u64) {
        self.open(ind, "addr");
        self.scalar(ind + 2, "soc_addr", soc_addr(v), true);
        self.close(ind, true);
    }
    /// `"key": { "addr": { "soc_addr": "0x…" } }` reading the u64 at `o`.
    pub(super) fn addr(&mut self, ind: usize, key: &str, o: usize, last: bool) {
        let v = self.u64(o);
        self.open(ind, key);
        self.addr_body(ind + 2, v);
        self.close(ind, last);
    }
    /// `"key": [ n × { "addr": { … } } ]` with an 8-byte stride from `o`.
    pub(super) fn addr_array(&mut self, ind: usize, key: &str, o: usize, n: usize, last: bool) {
        self.arr_open(ind, key);
        for i in 0..n {
            let v = self.u64(o + 8 * i);
            self.open(ind + 2, "");
            self.addr_body(ind + 4, v);
            self.close(ind + 2, i + 1 == n);
        }
        self.arr_close(ind, last);
    }
}
