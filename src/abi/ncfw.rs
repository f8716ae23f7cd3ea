//! `ncfw/ncfw.h`: the three unversioned exports of libncfw.so (spec/ncfw.md §1.3–§1.6).
