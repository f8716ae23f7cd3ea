//! Tests of the instruction path (placeholder while the suite is written).
