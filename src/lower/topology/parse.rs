//! Parsing `OPENNRT_TOPOLOGY` (grammar in [`crate::lower::topology`]) and resolving the
//! topology from the variables `runtime::config` read. Parsing is pure (it takes the value
//! string); nothing here reads the process environment.

use crate::error::{Error, Result};
use crate::lower::topology::{
    Fabric, Generation, InstanceType, Topology, TOPOLOGY_ENV, TOPOLOGY_FORMS, ULTRASERVER_NODES,
};

/// Options after the head of an `OPENNRT_TOPOLOGY` value.
#[derive(Default)]
struct Opts {
    nodes: Option<u32>,
    lnc: Option<u32>,
    gen: Option<Generation>,
    fabric: Option<Fabric>,
}

fn bad(value: &str, why: impl std::fmt::Display) -> Error {
    Error::bad_variable(
        TOPOLOGY_ENV,
        value,
        format_args!("{why}; accepted forms: {TOPOLOGY_FORMS}"),
    )
}

fn parse_num(value: &str, what: &str, s: &str) -> Result<u32> {
    s.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| bad(value, format!("{what} {s:?} is not a positive number")))
}

fn parse_opts<'a>(value: &str, parts: impl Iterator<Item = &'a str>) -> Result<Opts> {
    let mut o = Opts::default();
    for part in parts {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| bad(value, format!("option {part:?} is not key=value")))?;
        let dup = || bad(value, format!("option {k:?} given twice"));
        match k.trim() {
            "nodes" => {
                if o.nodes.replace(parse_num(value, "nodes", v)?).is_some() {
                    return Err(dup());
                }
            }
            "lnc" => {
                let l = match v.trim() {
                    "1" => 1,
                    "2" => 2,
                    _ => return Err(bad(value, format!("lnc {v:?} must be 1 or 2"))),
                };
                if o.lnc.replace(l).is_some() {
                    return Err(dup());
                }
            }
            "gen" => {
                let g = Generation::parse(v)
                    .ok_or_else(|| bad(value, format!("gen {v:?} must be v2, v3 or v4")))?;
                if o.gen.replace(g).is_some() {
                    return Err(dup());
                }
            }
            "fabric" => {
                let f = Fabric::parse(v).ok_or_else(|| {
                    bad(value, format!("fabric {v:?} must be none, pod or switch"))
                })?;
                if o.fabric.replace(f).is_some() {
                    return Err(dup());
                }
            }
            other => return Err(bad(value, format!("unknown option {other:?}"))),
        }
    }
    Ok(o)
}

impl Topology {
    /// Parse an `OPENNRT_TOPOLOGY` value (grammar in the module doc) for a world of `world`
    /// ranks. Pure: the caller supplies the string.
    pub fn parse(value: &str, world: u32) -> Result<Topology> {
        let mut parts = value.trim().split(':');
        let head = parts.next().unwrap_or("").trim();
        match head {
            "custom" => {
                let shape = parts
                    .next()
                    .ok_or_else(|| bad(value, "custom needs <nodes>x<devices>x<cores>"))?;
                let dims: Vec<&str> = shape.split(['x', 'X']).collect();
                if dims.len() != 3 {
                    return Err(bad(
                        value,
                        format!("custom shape {shape:?} is not <nodes>x<devices>x<cores>"),
                    ));
                }
                let nodes = parse_num(value, "nodes", dims[0])?;
                let devices = parse_num(value, "devices", dims[1])?;
                let cores = parse_num(value, "cores", dims[2])?;
                let o = parse_opts(value, parts)?;
                if o.nodes.is_some() {
                    return Err(bad(value, "custom takes its node count from the shape"));
                }
                let t = Topology::custom(
                    nodes,
                    devices,
                    cores,
                    o.lnc.unwrap_or(1),
                    o.gen.unwrap_or(Generation::V3),
                    o.fabric.unwrap_or(Fabric::None),
                )
                .map_err(|e| bad(value, e.message()))?;
                t.check_world(world).map_err(|e| bad(value, e.message()))?;
                Ok(t)
            }
            "trn2-ultraserver" => {
                let o = parse_opts(value, parts)?;
                if o.nodes.is_some() || o.gen.is_some() || o.fabric.is_some() {
                    return Err(bad(value, "trn2-ultraserver takes only lnc"));
                }
                let t = Topology::instance("trn2u.48xlarge", Some(ULTRASERVER_NODES), o.lnc, 1)?;
                t.check_world(world).map_err(|e| bad(value, e.message()))?;
                Ok(t)
            }
            name => {
                if InstanceType::by_name(name).is_none() {
                    return Err(bad(value, format!("unknown topology {name:?}")));
                }
                let o = parse_opts(value, parts)?;
                if o.gen.is_some() || o.fabric.is_some() {
                    return Err(bad(value, "gen and fabric apply only to custom shapes"));
                }
                Topology::instance(name, o.nodes, o.lnc, world).map_err(|e| bad(value, e.message()))
            }
        }
    }

    /// Resolve from a variable lookup (see the module doc for the order).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>, world: u32) -> Result<Topology> {
        if let Some(v) =
            get(TOPOLOGY_ENV).filter(|v| !v.trim().is_empty() && v.trim() != super::JOB_TOPOLOGY)
        {
            return Topology::parse(&v, world);
        }
        let inst = get("OPENNRT_INSTANCE_TYPE").or_else(|| get("NEURON_RT_FAKE_INSTANCE_TYPE"));
        let Some(inst) = inst else {
            return Topology::for_world(world);
        };
        let lnc_var =
            get("NEURON_LOGICAL_NC_CONFIG").or_else(|| get("NEURON_RT_VIRTUAL_CORE_SIZE"));
        let lnc = match lnc_var.as_deref().map(str::trim) {
            None => None,
            Some("1") => Some(1),
            Some("2") => Some(2),
            Some(other) => {
                return Err(Error::bad_variable(
                    "NEURON_LOGICAL_NC_CONFIG",
                    other,
                    "the logical core size must be 1 or 2",
                ))
            }
        };
        Topology::instance(&inst, None, lnc, world)
    }
}

#[cfg(test)]
mod tests;
