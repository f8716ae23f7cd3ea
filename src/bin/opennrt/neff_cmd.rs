//! `opennrt neff build` (write the one-collective NEFF of docs/neff.md §2, which every rank of
//! a group loads) and `opennrt neff info` (what a NEFF holds, as the loader reads it:
//! docs/neff.md §1), so a NEFF can be made and inspected without the vendor's tools.

use opennrt::isa::enums::Dtype;
use opennrt::isa::instr::Instr;
use opennrt::isa::operand::Tensor2d;
use opennrt::lower::request::ReduceOp;
use opennrt::neff::build::{build, BuildOp, BuildSpec};
use opennrt::neff::{Graph, Neff, NeffHeader, ParseOptions, PkgVersion};
use serde_json::{json, Map, Value};

use crate::args::{self, fail, Opt, Spec};

const NEFF_USAGE: &str = "usage: opennrt neff <build|info> [options]

  opennrt neff build --op OP --ranks R --count N --dtype T [options] -o FILE
  opennrt neff info FILE [--json]
  (opennrt neff build --help, opennrt neff info --help for the options)";

/// The options of `opennrt neff build`: the parser and `--help` both read this table.
const BUILD: Spec = Spec {
    cmd: "neff build",
    usage: "usage: opennrt neff build --op OP --ranks R --count N --dtype T [options] -o FILE

Write the one-collective NEFF every rank of a group loads (docs/neff.md §2).",
    opts: &[
        Opt::val(
            "--op",
            "OP",
            "all_reduce (allr) | all_gather (allg) | reduce_scatter (redsct) |
             all_to_all (alltoall) | permute | send_recv (sendrecv) |
             all_to_all_v (alltoallv) | all_gather_v (all_gatherv, allgv)",
        ),
        Opt::val(
            "--ranks",
            "R",
            "ranks in the group, 1..=1024 (global device ids 0..R)",
        ),
        Opt::val(
            "--count",
            "N",
            "elements of one rank's block (accepts 1<<20): in = out = N for all_reduce,
             permute and send_recv; all_gather and all_gather_v out = N x R;
             reduce_scatter in = N x R; all_to_all and all_to_all_v in = out = N x R.
             The -v ops add an input metadata0: 4 rows of R uint32 (send counts, send
             displacements, receive counts, receive displacements, in elements)",
        ),
        Opt::val(
            "--dtype",
            "T",
            "bf16, fp16, fp32, fp8_e4m3, int8, ... (reductions need bf16, fp16, fp32, fp8)",
        ),
        Opt::val(
            "--redop",
            "R",
            "add (default), max, min (all_reduce and reduce_scatter; copies carry BYPASS)",
        ),
        Opt::val(
            "--alg",
            "A",
            "record a forced algorithm (ring, mesh, kangaring, ...) as opennrt_algorithm",
        ),
        Opt::val(
            "--lnc",
            "L",
            "logical core size 1 (default) or 2 (two identical graphs)",
        ),
        Opt::val("--ops", "K", "K identical triggers in a row (default 1)"),
        Opt::val(
            "--pairs",
            "L",
            "permute pairs in global ids, e.g. 0:1,1:0 (default r -> r+1 mod R)",
        ),
        Opt::val("--out", "FILE", "where to write the NEFF (required)").alias(&["-o", "--output"]),
    ],
    notes: "",
};

/// The options of `opennrt neff info` (besides its one FILE).
const INFO: Spec = Spec {
    cmd: "neff info",
    usage: "usage: opennrt neff info FILE [--json]

The header, the graphs, every var, the replica groups, and per engine program a census of
opcodes with every collective word decoded (tensor ids -> var names), as the loader reads
them (docs/neff.md §1).",
    opts: &[Opt::switch("--json", "print the same as one JSON object")],
    notes: "",
};

/// `opennrt neff`: exit 0 on success, 1 if the NEFF cannot be built, written, read or parsed,
/// 2 on bad arguments.
pub fn neff_cmd(a: &[String]) -> i32 {
    match a.first().map(String::as_str) {
        Some("build") => build_cmd(&a[1..]),
        Some("info") => info_cmd(&a[1..]),
        Some("-h") | Some("--help") | Some("help") => {
            println!("{NEFF_USAGE}");
            0
        }
        Some(other) => fail(
            "neff",
            &format!("unknown subcommand {other:?}\n{NEFF_USAGE}"),
        ),
        None => fail("neff", NEFF_USAGE),
    }
}

fn build_cmd(a: &[String]) -> i32 {
    let c = "neff build";
    if Spec::wants_help(a) {
        println!("{}", BUILD.help());
        return 0;
    }
    let (mut op, mut ranks, mut count, mut dtype, mut out) = (None, None, None, None, None);
    let (mut redop, mut alg, mut lnc, mut ops, mut pairs) = (ReduceOp::Add, None, 1, 1, None);
    for (k, v) in BUILD.parse(a) {
        match k {
            "--op" => {
                op = Some(BuildOp::parse(&v).unwrap_or_else(|| {
                    let names: Vec<_> = BuildOp::ALL.iter().map(|o| o.name()).collect();
                    fail(
                        c,
                        &format!("unknown --op {v:?}; use one of {}", names.join(", ")),
                    )
                }))
            }
            "--ranks" => ranks = Some(args::num::<u32>(c, k, &v)),
            "--count" => count = Some(args::num::<u64>(c, k, &v)),
            "--dtype" => dtype = Some(args::dtype(c, &v)),
            "--redop" => redop = args::redop(c, &v),
            "--alg" => alg = Some(v),
            "--lnc" => lnc = args::num::<u32>(c, k, &v),
            "--ops" => ops = args::num::<u32>(c, k, &v),
            "--pairs" => {
                let mut list = Vec::new();
                for p in v.split(',').filter(|s| !s.is_empty()) {
                    let (s, t) = p
                        .split_once(':')
                        .unwrap_or_else(|| fail(c, &format!("--pairs entry {p:?} is not src:dst")));
                    list.push((args::num(c, "--pairs", s), args::num(c, "--pairs", t)));
                }
                pairs = Some(list);
            }
            "--out" => out = Some(v),
            other => args::unhandled(c, other),
        }
    }
    let need = |what: &str| -> ! { fail(c, &format!("{what} is required\n{}", BUILD.help())) };
    let op = op.unwrap_or_else(|| need("--op"));
    let ranks = ranks.unwrap_or_else(|| need("--ranks"));
    let count = count.unwrap_or_else(|| need("--count"));
    let dtype: Dtype = dtype.unwrap_or_else(|| need("--dtype"));
    let out = out.unwrap_or_else(|| need("-o FILE"));
    let mut spec = BuildSpec::new(op, ranks, count, dtype);
    spec.redop = redop;
    spec.algorithm = alg;
    spec.lnc = lnc;
    spec.ops = ops;
    spec.pairs = pairs;
    let file = match build(&spec) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("opennrt {c}: {e}");
            return 1;
        }
    };
    if let Err(e) = std::fs::write(&out, &file) {
        eprintln!("opennrt {c}: cannot write {out}: {e}");
        return 1;
    }
    println!(
        "wrote {out}: {} bytes, {} of {count} x {} over {ranks} ranks ({} trigger{}): input {} B, \
         output {} B per rank",
        file.len(),
        op.name(),
        dtype.short_name(),
        spec.ops,
        if spec.ops == 1 { "" } else { "s" },
        spec.input_bytes(),
        spec.output_bytes()
    );
    0
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn header_json(h: &NeffHeader, hash_ok: bool) -> Value {
    json!({
        "pkg_version": match h.pkg_version { PkgVersion::RawTar => 1, PkgVersion::GzipTar => 2 },
        "packing": match h.pkg_version {
            PkgVersion::RawTar => "raw tar",
            PkgVersion::GzipTar => "gzip tar",
        },
        "header_size": h.header_size,
        "data_size": h.data_size,
        "version_major": h.version_major,
        "version_minor": h.version_minor,
        "build_version": h.build_version,
        "num_tpb": h.num_tpb,
        "hash": hex(match h.pkg_version {
            PkgVersion::RawTar => &h.hash[..],
            PkgVersion::GzipTar => &h.hash[..16],
        }),
        "hash_matches_payload": hash_ok,
        "uuid": hex(&h.uuid),
        "name": h.name,
        "requested_tpb_count": h.requested_tpb_count,
        "tpb_per_node": h.tpb_per_node,
        "feature_bits": h.feature_bits,
        "lnc_size": h.lnc_size,
    })
}

/// One tensor operand: its id and the var it names (`null` when the graph has none).
fn tensor(g: &Graph, role: &str, id: u32) -> Value {
    json!({ "role": role, "id": id, "var": g.var(id).map(|v| v.name.clone()) })
}

/// A 0xD9/0xDA operand: its var id when it is one (`None` for absent or non-var operands).
fn tensor2d(g: &Graph, role: &str, t: &Tensor2d) -> Option<Value> {
    if t.is_absent() {
        return None;
    }
    let mut v = json!({ "role": role, "elements": t.num_elements() });
    if let Some(id) = t.start.var_id() {
        v["id"] = json!(id);
        v["var"] = json!(g.var(u32::from(id)).map(|v| v.name.clone()));
    } else {
        v["address"] = json!(format!("{:#018x}", t.start.raw));
    }
    Some(v)
}

/// A typed word decoded for `info`; `None` for compute and the words kept raw.
fn collective_json(g: &Graph, offset: usize, i: &Instr) -> Option<Value> {
    let mut v = match i {
        Instr::TriggerAllReduce(w) => json!({
            "ctype": "ALL_REDUCE", "op": w.op.name(), "dtype": w.dtype.name(),
            "count": w.num_elements, "group": 0,
            "tensors": [tensor(g, "input", w.input_tensor_id),
                        tensor(g, "output", w.output_tensor_id)],
        }),
        Instr::TriggerCollective(w) => json!({
            "ctype": w.ctype.name(), "op": w.op.name(), "dtype": w.dtype.name(),
            "count": w.num_elements, "group": w.group_id,
            "src_offset_elems": w.src_offset_elems, "dst_offset_elems": w.dst_offset_elems,
            "tensors": [tensor(g, "input", w.input_tensor_id),
                        tensor(g, "output", w.output_tensor_id)],
        }),
        Instr::Collective2(c) => {
            let t = &c.trigger;
            let tensors: Vec<Value> = [("src0", &t.src0), ("src1", &t.src1), ("dst", &c.ext.dst)]
                .into_iter()
                .filter_map(|(r, x)| tensor2d(g, r, x))
                .collect();
            json!({
                "ctype": t.ctype.name(), "op": t.op.name(), "dtype": t.dtype.name(),
                "count": t.src0.num_elements(), "group": c.ext.group_id,
                "stream": c.ext.stream_id, "channel": c.ext.channel_id,
                "chaining": c.ext.instr_chaining.name(), "tensors": tensors,
            })
        }
        Instr::SendRecv(w) => json!({
            "ctype": w.enc_op().name(), "peer": w.peer_id, "size_bytes": w.size_bytes,
            "offset_bytes": w.offset_bytes, "tensors": [tensor(g, "buffer", w.tensor_id)],
        }),
        Instr::CurProcessingRankId(w) => json!({
            "ctype": "CUR_PROCESSING_RANK_ID", "group": w.group_id, "channel": w.channel_id,
            "stream": w.stream_id, "iteration": w.iteration_id, "dst_reg": w.dst_reg,
        }),
        Instr::Sb2sb(w) => json!({
            "ctype": "SB2SB_COLLECTIVE", "in_dtype": w.in_dtype.name(),
            "out_dtype": w.out_dtype.name(), "count": w.src.element_count(),
        }),
        Instr::DmaExt { .. } | Instr::Other { .. } => return None,
    };
    v["offset"] = json!(offset);
    v["opcode"] = json!(format!("{:#04x}", i.opcode()));
    if let Some(c) = i.common() {
        v["wait"] = json!(c.events.wait_mode.name());
        v["update"] = json!(c.events.update_mode.name());
        v["update_idx"] = json!(c.events.update_idx);
    }
    Some(v)
}

fn graph_json(g: &Graph) -> Value {
    let vars: Vec<Value> = g
        .vars
        .iter()
        .map(|v| {
            json!({ "name": v.name, "type": v.kind.name(), "var_id": v.var_id, "size": v.size,
                    "dtype": v.dtype, "shape": v.shape })
        })
        .collect();
    let queues: Vec<Value> = g
        .dma_queues
        .iter()
        .map(|q| {
            json!({ "name": q.name, "owner": q.owner, "type": q.kind,
                    "num_queues": q.num_queues })
        })
        .collect();
    let pairs: Vec<Value> = g
        .src_target_pairs
        .iter()
        .map(|p| {
            let l: Vec<[u32; 2]> = p.pairs.iter().map(|&(s, t)| [s, t]).collect();
            json!({ "group_id": p.group_id, "pairs": l })
        })
        .collect();
    let programs: Vec<Value> = g
        .programs
        .iter()
        .map(|p| {
            let census: Map<String, Value> = p
                .census()
                .into_iter()
                .map(|(op, n)| (format!("{op:#04x}"), json!(n)))
                .collect();
            let collectives: Vec<Value> = p
                .stream
                .words
                .iter()
                .filter_map(|w| collective_json(g, w.offset, &w.instr))
                .collect();
            json!({ "engine": p.engine.name(), "member": p.member,
                    "words": p.stream.words.len(), "census": census,
                    "collectives": collectives })
        })
        .collect();
    json!({
        "name": g.name, "def_member": g.def_member, "num_streams": g.num_streams,
        "rank_world_size": g.rank_world_size, "algorithm": g.algorithm,
        "vars": vars, "dma_queues": queues, "replica_groups": g.replica_groups,
        "src_target_pairs": pairs, "programs": programs,
    })
}

/// Everything `info` shows, as one JSON value (the text form prints the same).
fn info_json(path: &str, file: &[u8], n: &Neff) -> Value {
    let hash_ok = n.header.check_hash(file).is_ok();
    json!({
        "file": path,
        "bytes": file.len(),
        "header": header_json(&n.header, hash_ok),
        "kelf": n.kelf,
        "target": n.target,
        "graphs": n.graphs.iter().map(graph_json).collect::<Vec<_>>(),
    })
}

/// A JSON scalar or small array without quotes around strings, for the text form.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn print_text(v: &Value) {
    println!("{}: {} bytes", plain(&v["file"]), v["bytes"]);
    let h = &v["header"];
    println!(
        "header: pkg_version {} ({}), header_size {}, data_size {}, neff_version {}.{}, \
         build {:?}, num_tpb {}",
        h["pkg_version"],
        plain(&h["packing"]),
        h["header_size"],
        h["data_size"],
        h["version_major"],
        h["version_minor"],
        plain(&h["build_version"]),
        h["num_tpb"]
    );
    let tpb: Vec<u64> = h["tpb_per_node"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let last = tpb.iter().rposition(|&t| t != 0).map_or(0, |i| i + 1);
    println!(
        "        name {:?}, uuid {}, hash {} ({}), requested_tpb_count {}, tpb_per_node {:?}{}, \
         feature_bits {:#x}, lnc_size {}",
        plain(&h["name"]),
        plain(&h["uuid"]),
        plain(&h["hash"]),
        if h["hash_matches_payload"] == true {
            "matches the payload"
        } else {
            "does not match the payload"
        },
        h["requested_tpb_count"],
        &tpb[..last],
        if last < tpb.len() { " (rest 0)" } else { "" },
        h["feature_bits"].as_u64().unwrap_or(0),
        h["lnc_size"]
    );
    println!(
        "kelf: {}, target {:?}",
        plain(&v["kelf"]),
        plain(&v["target"])
    );
    for g in v["graphs"].as_array().into_iter().flatten() {
        println!(
            "graph {} ({}): num_streams {}, rank_world_size {}, algorithm {}",
            plain(&g["name"]),
            plain(&g["def_member"]),
            g["num_streams"],
            g["rank_world_size"],
            plain(&g["algorithm"])
        );
        println!("  vars:");
        for x in g["vars"].as_array().into_iter().flatten() {
            let mut line = format!(
                "    {:>3} {:<24} {:<12} {:>12} B",
                plain(&x["var_id"]),
                plain(&x["name"]),
                plain(&x["type"]),
                plain(&x["size"])
            );
            if !x["dtype"].is_null() {
                line += &format!("  {}", plain(&x["dtype"]));
            }
            if !x["shape"].is_null() {
                line += &format!(" {}", x["shape"]);
            }
            println!("{line}");
        }
        for q in g["dma_queues"].as_array().into_iter().flatten() {
            println!(
                "  dma_queue {}: owner {}, type {}, {} queues",
                plain(&q["name"]),
                plain(&q["owner"]),
                plain(&q["type"]),
                q["num_queues"]
            );
        }
        println!("  replica_groups: {}", g["replica_groups"]);
        for p in g["src_target_pairs"].as_array().into_iter().flatten() {
            let list: Vec<String> = p["pairs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| format!("{}->{}", x[0], x[1]))
                .collect();
            println!(
                "  src_target_pairs group {}: {}",
                p["group_id"],
                list.join(" ")
            );
        }
        for p in g["programs"].as_array().into_iter().flatten() {
            let census: Vec<String> = p["census"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(op, n)| format!("{op} x{n}"))
                .collect();
            println!(
                "  {} ({}): {} words: {}",
                plain(&p["engine"]),
                plain(&p["member"]),
                p["words"],
                census.join(", ")
            );
            for c in p["collectives"].as_array().into_iter().flatten() {
                let mut fields = Vec::new();
                for k in [
                    "op",
                    "dtype",
                    "count",
                    "group",
                    "stream",
                    "channel",
                    "peer",
                    "size_bytes",
                ] {
                    if let Some(x) = c.get(k) {
                        fields.push(format!("{k} {}", plain(x)));
                    }
                }
                for t in c["tensors"].as_array().into_iter().flatten() {
                    let what = match (t.get("id"), t.get("var")) {
                        (Some(id), Some(var)) => format!("{} ({})", id, plain(var)),
                        _ => plain(t.get("address").unwrap_or(&Value::Null)),
                    };
                    fields.push(format!("{} {what}", plain(&t["role"])));
                }
                println!(
                    "    @{:#06x} {} {}: {}",
                    c["offset"].as_u64().unwrap_or(0),
                    plain(&c["opcode"]),
                    plain(&c["ctype"]),
                    fields.join(", ")
                );
            }
        }
    }
}

fn info_cmd(a: &[String]) -> i32 {
    let c = "neff info";
    if Spec::wants_help(a) {
        println!("{}", INFO.help());
        return 0;
    }
    // The one positional argument is FILE; everything else is an option of the table.
    let (files, opts): (Vec<String>, Vec<String>) =
        a.iter().cloned().partition(|x| !x.starts_with('-'));
    let mut json_out = false;
    for (k, _) in INFO.parse(&opts) {
        match k {
            "--json" => json_out = true,
            other => args::unhandled(c, other),
        }
    }
    if files.len() > 1 {
        fail(
            c,
            &format!("unexpected argument {:?}: one FILE only", files[1]),
        );
    }
    let path = files
        .into_iter()
        .next()
        .unwrap_or_else(|| fail(c, &format!("FILE is required\n{}", INFO.help())));
    let file = match std::fs::read(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("opennrt {c}: cannot read {path}: {e}");
            return 1;
        }
    };
    let n = match Neff::parse(&file, &ParseOptions::default()) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("opennrt {c}: {path}: {e}");
            return 1;
        }
    };
    let v = info_json(&path, &file, &n);
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(&v).expect("a JSON value serialises")
        );
    } else {
        print_text(&v);
    }
    0
}
