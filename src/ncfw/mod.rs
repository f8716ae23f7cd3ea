//! libncfw's logic: OpenNRT's firmware images, the per-arch CC-context layout, and the
//! `ctx_log` JSON serializer (spec/ncfw.md). The three C entry points live in `abi::ncfw`.
