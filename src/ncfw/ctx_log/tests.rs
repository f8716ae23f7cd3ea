//! Golden tests of the `ctx_log` writer (docs/contract/carrier.md §4) on the sample context of
//! [`sample`](crate::ncfw::sample), whose fields all have distinctive values.

use super::*;
use crate::error::ErrorKind;
use crate::ncfw::ctx_builder::CcContextBuilder;
use crate::ncfw::sample::{sample_addr, sample_context, SAMPLE_BASIC_BLOCKS};

fn dump(arch: Arch, ctx: &[u8], name: &[u8]) -> String {
    let (s, st) = ctx_log_string(ctx, arch, name).unwrap();
    assert_eq!(st, LogStatus::Complete);
    s
}

/// Each block must appear, contiguously, after the end of the previous one.
fn assert_in_order(out: &str, blocks: &[&str]) {
    let mut pos = 0;
    for b in blocks {
        match out[pos..].find(b) {
            Some(i) => pos += i + b.len(),
            None => panic!(
                "block not found after byte {pos}:\n{b}\n--- output near there:\n{}",
                &out[pos..(pos + 600).min(out.len())]
            ),
        }
    }
}

fn count(out: &str, needle: &str) -> usize {
    out.matches(needle).count()
}

/// Quote the unquoted `%p` values so the text parses as JSON.
fn jsonable(out: &str) -> String {
    let mut s = String::new();
    for line in out.lines() {
        let fixed = match line.split_once("\": ") {
            Some((k, v)) if v.starts_with("0x") || v.starts_with("(nil)") => {
                let (val, comma) = v.strip_suffix(',').map_or((v, ""), |x| (x, ","));
                format!("{k}\": \"{val}\"{comma}")
            }
            _ => line.to_string(),
        };
        s.push_str(&fixed);
        s.push('\n');
    }
    s
}

/// docs/contract/carrier.md §4.2 top-level order: configs {algo, neff, dev}, runtime neff, runtime
/// algo; Q-B placement.
#[test]
fn skeleton_and_model_name_placement() {
    for arch in Arch::ALL {
        let out = dump(arch, &sample_context(arch), b"my-model");
        let skeleton: Vec<&str> = out
            .lines()
            .filter(|l| l.len() - l.trim_start().len() <= 6 && !l.starts_with("        "))
            .collect();
        let want = [
            "{",
            "  \"model_name\": \"my-model\",",
            "  \"ncfw_ctx_top_sp\": {",
            "    \"configs\": {",
            "      \"algo\": {",
            "      },",
            "      \"neff\": {",
            "      },",
            "      \"dev\": {",
            "      }",
            "    },",
            "    \"neff\": {",
            "      \"barrier_completed\": 1,",
            "      \"op\": {",
            "      },",
            "      \"basic_block\": {",
            "      }",
            "    },",
            "    \"algo\": {",
            "      \"ring\": {",
            "      },",
            "      \"hierarchical\": {",
            "      },",
            "      \"mesh\": {",
            "      }",
            "    }",
            "  }",
            "}",
        ];
        assert_eq!(skeleton, want, "{arch:?}");
        assert!(out.ends_with("}\n"));
    }
}

/// Counts: 32 channels (static and runtime), 50/108 mesh events, 4 barrier steps, 8 alloc
/// entries, 5 basic blocks; the text is JSON once the `%p` values are quoted.
#[test]
fn per_arch_counts_and_json_shape() {
    for arch in Arch::ALL {
        let out = dump(arch, &sample_context(arch), b"m");
        let n = arch.mesh_events();
        assert_eq!(count(&out, "\"next_neigh\": {"), 32);
        assert_eq!(count(&out, "\"channel_id\": "), 64);
        assert_eq!(count(&out, "\"wait_event\": "), n);
        assert_eq!(count(&out, "\"target_sema_val\": ["), 4);
        assert_eq!(
            count(&out, "\"reset_section_desc_count\": "),
            SAMPLE_BASIC_BLOCKS
        );
        let v: serde_json::Value =
            serde_json::from_str(&jsonable(&out)).expect("JSON once %p is quoted");
        let top = &v["ncfw_ctx_top_sp"];
        assert_eq!(
            top["configs"]["algo"]["ring"]["channels"]
                .as_array()
                .unwrap()
                .len(),
            32
        );
        assert_eq!(
            top["configs"]["algo"]["mesh"]["events"]
                .as_array()
                .unwrap()
                .len(),
            n
        );
        let db = &top["configs"]["neff"]["barrier_configs"]["device_barrier"];
        assert_eq!(db["barrier_step_config"].as_array().unwrap().len(), 4);
        assert_eq!(db["dma_sync_sema"].as_array().unwrap().len(), 4);
        assert_eq!(
            top["configs"]["neff"]["dma_alloc_bitmap"]
                .as_array()
                .unwrap()
                .len(),
            8
        );
        assert_eq!(
            top["algo"]["ring"]["channels"].as_array().unwrap().len(),
            32
        );
        assert_eq!(top["algo"]["mesh"]["event_index"], 77);
        // The last mesh event is the one at the per-arch count.
        let last = &top["configs"]["algo"]["mesh"]["events"][n - 1];
        assert_eq!(last["wait_val"], 5000 + n as u64 - 1);
    }
}

/// One ring channel in full: loop-index `channel_id` (the stored 0xEE is not read), `peer_id`
/// indices, the `{addr}` leaf, uppercase 16-digit addresses; `fold_n` = 4 clamped to 3 addresses.
#[test]
fn ring_channel_golden_and_fold_n_clamp() {
    let out = dump(Arch::V3, &sample_context(Arch::V3), b"m");
    let a = |i: u16, f: u32| format!("0x{:016X}", sample_addr(1, i, f));
    assert_eq!(a(4, 0x38), "0x8001000400000038");
    let ch4 = format!(
        r#"            {{
              "next_neigh": {{
                "fold_n": 4,
                "type": 1,
                "net_idx_addrs": [
                  "{}",
                  "{}",
                  "{}"
                ]
              }},
              "prev_neigh": {{
                "fold_n": 1,
                "type": 2,
                "net_idx_addrs": [
                  "{}"
                ]
              }},
              "recv_sema": {{
                "addr": {{
                  "soc_addr": "{}"
                }}
              }},
"#,
        a(4, 0),
        a(4, 8),
        a(4, 16),
        a(4, 0x1C),
        a(4, 0x38)
    );
    let tail4 = format!(
        r#"                "peers": [
                  {{
                    "peer_id": 0,
                    "addr": {{
                      "soc_addr": "{}"
                    }}
                  }},
"#,
        a(4, 0x60)
    );
    let end4 = r#"                "mask": 4100
              },
              "channel_id": 4,
              "spad_slot_idx": 104,
              "fold_n": 2,
              "kangaring_is_primary": 0,
              "kangaring_num_peers": 1
            },
"#;
    let end31 = "              \"channel_id\": 31,\n              \"spad_slot_idx\": 131,\n              \"fold_n\": 2,\n              \"kangaring_is_primary\": 1,\n              \"kangaring_num_peers\": 1\n            }\n          ]\n        },\n        \"mesh\": {\n          \"events\": [\n            {\n              \"dma_apb_bcast_0\": {\n";
    assert_in_order(&out, &[&ch4, &tail4, end4, end31]);
    assert!(!out.contains("\"channel_id\": 238"));
    // fold_n 0: an empty array.
    assert!(out.contains("\"fold_n\": 0,\n                \"type\": 0,\n                \"net_idx_addrs\": [\n                ]\n"));
}

/// One mesh event in full, `__stub`, and the end of the static algo object.
#[test]
fn mesh_event_and_hierarchical_golden() {
    for arch in [Arch::V2, Arch::V4Plus] {
        let out = dump(arch, &sample_context(arch), b"m");
        let a = |i: u16, f: u32| format!("0x{:016X}", sample_addr(2, i, f));
        let mut ev = String::from("            {\n");
        for (k, o, mask) in [
            ("dma_apb_bcast_0", 0u32, 0x2006u32),
            ("dma_apb_bcast_1", 0x14, 0x2007),
        ] {
            ev += &format!("              \"{k}\": {{\n                \"m2s_tail_ptr\": {{\n                  \"addr\": {{\n                    \"soc_addr\": \"{}\"\n                  }}\n                }},\n                \"s2m_tail_ptr\": {{\n                  \"addr\": {{\n                    \"soc_addr\": \"{}\"\n                  }}\n                }},\n                \"mask\": {}\n              }},\n", a(3, o), a(3, o + 8), mask);
        }
        for (k, o) in [
            ("direct_trigger_sema_0", 0x28),
            ("direct_trigger_sema_1", 0x30),
            ("direct_trigger_sema_2", 0x38),
            ("event_wait_sema", 0x40),
        ] {
            ev += &format!("              \"{k}\": {{\n                \"addr\": {{\n                  \"soc_addr\": \"{}\"\n                }}\n              }},\n", a(3, o));
        }
        ev += "              \"wait_val\": 5003,\n              \"event_type\": 3,\n              \"dma_trigger\": 1,\n              \"direct_trigger\": 0,\n              \"wait_event\": 1\n            },\n";
        let hier = "            }\n          ]\n        },\n        \"hierarchical\": {\n          \"__stub\": \"0x0123456789ABCDEF\"\n        }\n      },\n      \"neff\": {\n        \"dma_alloc_bitmap\": [\n          {\n            \"queue_id\": 100,\n            \"dma_engines_bitmap\": 65536\n          },\n";
        assert_in_order(&out, &["\"events\": [\n", &ev, hier]);
    }
}

/// Barrier union (both views, host bytes overlaying device step 0), `%p` gate, device order.
#[test]
fn barrier_golden() {
    let out = dump(Arch::V3, &sample_context(Arch::V3), b"m");
    let a = |i: u16, f: u32| format!("0x{:016X}", sample_addr(4, i, f));
    let host = format!("        \"barrier_configs\": {{\n          \"execute_device_barrier\": 0x1,\n          \"host_barrier\": {{\n            \"barrier_start\": {{\n              \"addr\": {{\n                \"soc_addr\": \"{}\"\n", a(0xB, 0));
    let dev = "            \"mask\": 61680\n            },\n            \"dma_sync_sema\": [\n              {\n                \"addr\": {\n";
    let scal = format!("            \"dma_sync_sema_value\": 777,\n            \"start_network_proxy\": {{\n              \"addr\": {{\n                \"soc_addr\": \"{}\"\n              }}\n            }},\n            \"tdrbp_low\": 2309737967,\n            \"tdrbp_high\": 66,\n            \"desc_count\": 96,\n            \"dma_engines_bitmap\": 42405,\n            \"queue_id\": 7,\n            \"barrier_step_config\": [\n              {{\n", a(9, 0x104));
    // Step 0's first 16 bytes are the host view: m2s_val/s2m_val are the low bytes of barrier_start.
    let step0 = "                \"m2s_val\": 0,\n                \"s2m_val\": 0,\n                \"barrier_sema\": [\n";
    let step1 = format!("                \"m2s_val\": 11,\n                \"s2m_val\": 21,\n                \"barrier_sema\": [\n                  {{\n                    \"addr\": {{\n                      \"soc_addr\": \"{}\"\n", a(1, 0x100));
    let step3 = "                \"target_sema_val\": [\n                  160,\n                  161,\n                  162,\n                  163\n                ]\n              }\n            ]\n          }\n        },\n        \"basic_block_configs\": {\n";
    assert_in_order(&out, &[&host, dev, &scal, step0, &step1, step3]);
    assert!(!out.contains("\"total_desc_n\"") && !out.contains(": 57005"));
}

/// Basic blocks stop at the first zero desc_count; the pring fields print field addresses
/// with glibc `%p`; spad bases, semaphores, op_num, leader, dev, tsync.
#[test]
fn neff_configs_and_dev_golden() {
    let ctx = sample_context(Arch::V2);
    let out = dump(Arch::V2, &ctx, b"m");
    let bb = Arch::V2.layout().neff_configs_off + 0x9C0;
    let p = |o: usize| format!("{:#x}", ctx.as_ptr() as usize + bb + o);
    let table_end = format!("            {{\n              \"desc_count\": 304,\n              \"reset_section_desc_count\": 14\n            }}\n          ],\n          \"switch_completed\": {{\n            \"addr\": {{\n              \"soc_addr\": \"0x8003000000000DC0\"\n            }}\n          }},\n          \"pring_base_addr\": {},\n          \"pring_total_desc_num\": {}\n        }},\n        \"slot_spad_base_0\": {{\n", p(0x408), p(0x410));
    let tail = "        \"op_num\": 7,\n        \"leader\": 1,\n        \"tpb_compl_addr_num\": 2\n      },\n      \"dev\": {\n        \"tsync\": {\n          \"dma_apb_rsvd_addr\": {\n";
    let dev = "          \"timestamp_tpb_val\": 195948557\n        },\n        \"tpb_id\": 0x5,\n        \"seng_id\": 10,\n        \"dev_id\": 3,\n        \"tpb_ctrl_ack\": 1234605616436508552\n      }\n    },\n";
    assert_in_order(
        &out,
        &[
            "\"desc_count\": 300,",
            &table_end,
            "\"slot_spad_base_5\": {",
            "\"ctrl_spad_base\": {",
            "\"trigger\": {",
            "\"trigger_next\": {",
            "\"complete\": {",
            "\"complete_prev\": {",
            "\"tpb_stop_sema\": {",
            tail,
            dev,
        ],
    );
    assert!(!out.contains("\"desc_count\": 999"));
    for hidden in [
        "function_n",
        "dbg_cc_nop",
        "host_cc",
        "safe_mode",
        "unique_tensors",
    ] {
        assert!(!out.contains(hidden), "{hidden} must not be dumped");
    }
}

/// The runtime cc_op decode of the packed sample slot (both union views) and the runtime algo.
#[test]
fn runtime_golden() {
    let out = dump(Arch::V4, &sample_context(Arch::V4), b"m");
    let cc = "          \"cc_op\": {\n            \"algo_type\": 1,\n            \"algo_sub_type\": 3,\n            \"trigger_next\": 1,\n            \"reporter\": 1,\n            \"ring_wait_complete\": 0,\n            \"ring_send_complete\": 1,\n            \"ring\": {\n              \"channel_list\": 3203338804\n            },\n            \"mesh\": {\n              \"sema_shift_offset\": 4660,\n              \"sema_mask\": 48879\n            }\n          }\n        },\n        \"tpb_compl\": [\n";
    let op = "        \"id\": 4242,\n        \"reporter\": 1\n      },\n      \"basic_block\": {\n        \"curr_id\": 31337,\n        \"ctrl_spad_addr\": {\n          \"addr\": {\n            \"soc_addr\": \"0x8006000100000050\"\n";
    let row = "          {\n            \"channel_id\": 31,\n            \"recv_cnt\": 1031,\n            \"send_credit\": 2031,\n            \"repeat_cnt\": 3031,\n            \"m2s_val\": 4031,\n            \"s2m_val\": 5031,\n            \"slot_idx\": 31,\n            \"run_state\": 203\n          }\n        ]\n      },\n      \"hierarchical\": {\n        \"run_state\": 2\n      },\n      \"mesh\": {\n        \"event_index\": 77\n      }\n    }\n  }\n}\n";
    assert_in_order(&out, &["    \"neff\": {\n      \"barrier_completed\": 1,\n      \"op\": {\n        \"ctrl_entry\": {\n          \"header\": {\n            \"cc_op\": 1\n          },\n", cc, op, row]);
    assert_eq!(0xBEEF_1234u32, 3203338804);
}

/// A zero context: `%p` zero renders `(nil)`, the table is empty, addresses are all zeros.
#[test]
fn zero_context_renders_nil() {
    let ctx = CcContextBuilder::new(Arch::V3).build();
    let out = dump(Arch::V3, &ctx, b"");
    assert!(out.contains("\"execute_device_barrier\": (nil),\n"));
    assert!(out.contains("\"tpb_id\": (nil),\n"));
    assert!(out.contains("\"table\": [\n          ],\n"));
    assert!(out.contains("\"soc_addr\": \"0x0000000000000000\"\n"));
    assert!(out.contains("\"model_name\": \"\",\n"));
}

/// The model name is inserted raw (quotes and backslashes unescaped, bytes verbatim).
#[test]
fn model_name_is_raw() {
    let out = dump(Arch::V2, &sample_context(Arch::V2), br#"a"b\c"#);
    assert!(out.starts_with("{\n  \"model_name\": \"a\"b\\c\",\n  \"ncfw_ctx_top_sp\": {\n"));
}

/// Truncation: the prefix that fits, a NUL at the end, `Truncated`; the flag is per call.
#[test]
fn truncation_keeps_the_prefix() {
    let ctx = sample_context(Arch::V3);
    let full = dump(Arch::V3, &ctx, b"m");
    let mut small = vec![0xFFu8; 100];
    assert_eq!(
        ctx_log(&ctx, Arch::V3, b"m", &mut small).unwrap(),
        LogStatus::Truncated
    );
    assert_eq!(&small[..99], &full.as_bytes()[..99]);
    assert_eq!(small[99], 0);
    // Exactly fitting (length + NUL) is complete; one byte less is truncated.
    let mut exact = vec![0u8; full.len() + 1];
    assert_eq!(
        ctx_log(&ctx, Arch::V3, b"m", &mut exact).unwrap(),
        LogStatus::Complete
    );
    let mut short = vec![0u8; full.len()];
    assert_eq!(
        ctx_log(&ctx, Arch::V3, b"m", &mut short).unwrap(),
        LogStatus::Truncated
    );
    let long = vec![b'n'; LOG_BUF_SIZE];
    let (s, st) = ctx_log_string(&ctx, Arch::V3, &long).unwrap();
    assert_eq!(st, LogStatus::Truncated);
    assert_eq!(s.len(), LOG_BUF_SIZE - 1);
    assert_eq!(
        ctx_log_string(&ctx, Arch::V3, b"m").unwrap().1,
        LogStatus::Complete
    );
}

#[test]
fn short_context_is_rejected() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let ctx = vec![0u8; Arch::V3.layout().min_size - 1];
    let e = ctx_log(&ctx, Arch::V3, b"m", &mut [0u8; 16]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.message().contains("0x44e6"), "{e}");
    // A v2-sized context is enough for v2.
    assert!(ctx_log(
        &vec![0u8; 0x32C6],
        Arch::V2,
        b"m",
        &mut vec![0u8; LOG_BUF_SIZE]
    )
    .is_ok());
}
