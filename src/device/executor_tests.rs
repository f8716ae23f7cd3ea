//! Tests of the executor (hand-built programs).
