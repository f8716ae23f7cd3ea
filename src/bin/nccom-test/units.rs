//! Units: byte counts as nccom-test's users type them, and bandwidth as its current examples
//! compute it.
//!
//! * Sizes (`-b`, `-e`, `-i`): a number with an optional binary suffix, case-insensitive:
//!   `b` (bytes), `k`/`kb`/`kib` (2^10), `m`/`mb`/`mib` (2^20), `g`/`gb`/`gib` (2^30), so `2kb` =
//!   2048, `1MB` = 1048576, `32M` = 33554432. A fractional number (`1.5kb`) is accepted and
//!   rounded down to whole bytes (OpenNRT's choice; the vendor's docs only show integers).
//! * Bandwidth: GB/s with 1e9, as every vendor example since 2.24 computes it (524288 B in
//!   14.83 µs is 35.35 GB/s), although the column headers say GB/s and older docs said GiB/s.

/// Bytes of a size word, or why not.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let unit: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "{s:?} is not a size: use a number with an optional unit b, kb, mb or gb \
                 (e.g. 2kb, 32M)"
            ))
        }
    };
    if num.is_empty() || num.matches('.').count() > 1 {
        return Err(format!("{s:?} is not a size: it has no number"));
    }
    if !num.contains('.') {
        return num
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(unit))
            .ok_or_else(|| format!("{s:?} is too large a size"));
    }
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size: {num:?} is not a number"))?;
    let b = v * unit as f64;
    if b >= 1.8e19 {
        return Err(format!("{s:?} is too large a size"));
    }
    Ok(b as u64)
}

/// GB/s (1e9 bytes per second) of `bytes` moved in `time_us` microseconds; 0 for no time.
pub fn gbps(bytes: u64, time_us: f64) -> f64 {
    if time_us > 0.0 {
        bytes as f64 / (time_us * 1e3)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests;
