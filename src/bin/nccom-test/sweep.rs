//! The sizes of a run: from `-b/--minbytes` to `-e/--maxbytes` (both default 32M), either
//! multiplying by `-f/--stepfactor` or adding `-i/--stepbytes` (default (max − min)/10).
//!
//! As in nccl-tests, a step factor wins over step bytes when both are given, and the sweep
//! stops at the last size not above the maximum (OpenNRT's reading: the vendor's docs give
//! the flags, not the loop). The default step of a range narrower than 10 bytes is 1 byte.

/// How a sweep advances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Add this many bytes.
    Bytes(u64),
    /// Multiply by this factor.
    Factor(u64),
}

/// The step when neither `-i` nor `-f` is given: (max − min)/10, at least 1.
pub fn default_step(min: u64, max: u64) -> Step {
    Step::Bytes((max.saturating_sub(min) / 10).max(1))
}

/// The requested sizes, or why the range cannot be swept.
pub fn sizes(min: u64, max: u64, step: Step) -> Result<Vec<u64>, String> {
    if min > max {
        return Err(format!(
            "--minbytes ({min}) is larger than --maxbytes ({max})"
        ));
    }
    let mut v = vec![min];
    if min == max {
        return Ok(v);
    }
    let mut s = min;
    loop {
        let next = match step {
            Step::Bytes(0) => return Err("--stepbytes must be at least 1".into()),
            Step::Bytes(b) => s.checked_add(b),
            Step::Factor(f) if f < 2 => {
                return Err(format!(
                    "--stepfactor {f} would not grow the size (use 2 or more)"
                ))
            }
            Step::Factor(_) if s == 0 => {
                return Err("--minbytes 0 with --stepfactor would never grow".into())
            }
            Step::Factor(f) => s.checked_mul(f),
        };
        match next {
            Some(n) if n <= max => {
                v.push(n);
                s = n;
            }
            _ => return Ok(v),
        }
    }
}

#[cfg(test)]
mod tests;
