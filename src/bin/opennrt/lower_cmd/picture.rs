//! `opennrt lower … --svg FILE`: a picture of the lowered program as the device will run it.
//!
//! Rows are ranks, columns are steps. Every arrow is one cross-rank data movement of a step, read
//! back from the **emitted** bytes, not from the composer's IR: the step's S2M descriptors are
//! decoded and their destination addresses resolved through the [`AddressMap`] (a write into
//! another rank's input, output or scratch is a send to that rank), and its M2S sources likewise
//! (a read of another rank's buffer is a pull from it). A step is a reduce when its M2S range holds
//! a CCE compute descriptor. A semaphore wait is the wait of the step's first SLOT record, as the
//! TOP_SP sequencer reads it. Only the column a step sits in and its chunk label come from the
//! step ranges the emitter recorded (`TopspImage::steps` → the IR step's `chunk`): the bytes do not
//! carry the block a chunk belongs to.
//!
//! Drawn with `plotters` (SVG backend only): text is emitted as SVG `<text>`, so no font files
//! are read.

use std::collections::BTreeSet;

use opennrt::isa::slot::{record_offset, SlotRecord, RECORD_BYTES};
use opennrt::isa::udma::{Descriptor, Direction};
use opennrt::lower::addrmap::{AddressMap, Region};
use opennrt::lower::emit::EmittedProgram;
use opennrt::lower::program::Program;
use plotters::prelude::*;

/// One cross-rank data movement of one step.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Arrow {
    /// Column (global step index).
    pub col: u32,
    /// Ring channel (a small offset inside the column, so channels do not overlap).
    pub channel: u8,
    /// Where the data comes from.
    pub from: u32,
    /// Where it lands.
    pub to: u32,
    /// The chunk (block id) of the step.
    pub chunk: u32,
    /// A CCE reduce step.
    pub reduce: bool,
}

/// A semaphore wait before a step.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct WaitMark {
    /// Column.
    pub col: u32,
    /// Channel.
    pub channel: u8,
    /// The waiting rank.
    pub rank: u32,
    /// Semaphore id and threshold.
    pub sem: u8,
    /// Threshold.
    pub target: u32,
}

/// What the picture shows.
#[derive(Debug, Clone, Default)]
pub struct Picture {
    /// Rank ids, one row each, in order.
    pub ranks: Vec<u32>,
    /// Columns.
    pub cols: u32,
    /// Channels seen.
    pub channels: u8,
    /// The arrows.
    pub arrows: Vec<Arrow>,
    /// The waits.
    pub waits: Vec<WaitMark>,
}

/// Read the picture from the emitted program (module doc).
pub fn read(e: &EmittedProgram, p: &Program, map: &AddressMap) -> Result<Picture, String> {
    // Column of entry k's first step: the entries before it, each as wide as its longest tape.
    let entries = p.ranks.iter().map(|r| r.entries.len()).max().unwrap_or(0);
    let mut first_col = vec![0u32; entries + 1];
    for k in 0..entries {
        let width = p
            .ranks
            .iter()
            .filter_map(|r| r.entries.get(k))
            .flat_map(|en| en.tapes.iter().map(|t| t.steps.len() as u32))
            .max()
            .unwrap_or(0);
        first_col[k + 1] = first_col[k] + width;
    }
    let mut pic = Picture {
        ranks: e.ranks.iter().map(|r| r.rank).collect(),
        cols: first_col[entries],
        ..Picture::default()
    };
    let data = |r: &Region| matches!(r, Region::Input | Region::Output | Region::Scratch);
    for (er, rp) in e.ranks.iter().zip(&p.ranks) {
        let me = er.rank;
        for img in &er.topsps {
            let decode = |raw: &[[u8; 16]], i: u32, dir| {
                Descriptor::decode(&raw[i as usize], dir)
                    .map_err(|x| format!("rank {me} TOP_SP {}: {}", img.topsp, x.message()))
            };
            for sr in &img.steps {
                let col = first_col[sr.entry as usize] + sr.step;
                pic.channels = pic.channels.max(sr.channel + 1);
                let chunk = rp.entries[sr.entry as usize]
                    .tapes
                    .iter()
                    .find(|t| t.channel == sr.channel)
                    .and_then(|t| t.steps.get(sr.step as usize))
                    .map_or(0, |s| s.chunk);
                let (mut to, mut from, mut reduce) = (BTreeSet::new(), BTreeSet::new(), false);
                for i in sr.s2m.clone() {
                    if let Descriptor::RxData { addr, .. } = decode(&img.s2m, i, Direction::S2M)? {
                        let (r, region, _) = map.resolve(me, addr).map_err(|x| x.to_string())?;
                        if r != me && data(&region) {
                            to.insert(r);
                        }
                    }
                }
                for i in sr.m2s.clone() {
                    match decode(&img.m2s, i, Direction::M2S)? {
                        Descriptor::Cce(_) => reduce = true,
                        Descriptor::TxData { addr, .. } => {
                            let (r, region, _) =
                                map.resolve(me, addr).map_err(|x| x.to_string())?;
                            if r != me && data(&region) {
                                from.insert(r);
                            }
                        }
                        _ => {}
                    }
                }
                let arrow = |from, to| Arrow {
                    col,
                    channel: sr.channel,
                    from,
                    to,
                    chunk,
                    reduce,
                };
                pic.arrows.extend(to.into_iter().map(|t| arrow(me, t)));
                pic.arrows.extend(from.into_iter().map(|f| arrow(f, me)));
                let pos = sr.records.start;
                let off = record_offset(pos);
                let bytes: &[u8; RECORD_BYTES] = img
                    .slot_spad
                    .get(off..off + RECORD_BYTES)
                    .and_then(|b| b.try_into().ok())
                    .ok_or_else(|| format!("rank {me}: SLOT record {pos} is outside the SPAD"))?;
                let rec = SlotRecord::decode(bytes).map_err(|x| x.to_string())?;
                if let Some(w) = rec.wait {
                    pic.waits.push(WaitMark {
                        col,
                        channel: sr.channel,
                        rank: me,
                        sem: w.sem,
                        target: w.target,
                    });
                }
            }
        }
    }
    Ok(pic)
}

const LEFT: i32 = 90;
const TOP: i32 = 50;
const COL_W: i32 = 120;
const ROW_H: i32 = 90;
/// How far below (or above) the sender's row an arrow's label sits.
const LABEL_DY: i32 = 24;
/// Stroke colours: copies and reduces (the test tells arrows apart by them).
pub const COPY: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
/// Reduce arrows.
pub const REDUCE: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const WAIT: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);

/// Draw `pic` into `path` as SVG; `title` is printed on top.
pub fn draw(pic: &Picture, title: &str, path: &str) -> Result<(), String> {
    let rows = pic.ranks.len().max(1) as i32;
    let w = (LEFT + COL_W * pic.cols.max(1) as i32 + 40) as u32;
    let h = (TOP + ROW_H * rows + 40) as u32;
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| format!("{path}: {e}");
    root.fill(&WHITE).map_err(err)?;
    let font = ("sans-serif", 13).into_font();
    let small = ("sans-serif", 11).into_font();
    root.draw(&Text::new(title.to_string(), (10, 8), font.clone()))
        .map_err(err)?;
    let row_y = |rank: u32| {
        let i = pic.ranks.iter().position(|&r| r == rank).unwrap_or(0) as i32;
        TOP + ROW_H * i + ROW_H / 2
    };
    let lane = COL_W / (i32::from(pic.channels).max(1) + 1);
    let x_of = |col: u32, ch: u8| LEFT + COL_W * col as i32 + lane * (i32::from(ch) + 1) - 20;
    for (i, &r) in pic.ranks.iter().enumerate() {
        let y = TOP + ROW_H * i as i32 + ROW_H / 2;
        root.draw(&Text::new(format!("rank {r}"), (10, y - 7), font.clone()))
            .map_err(err)?;
        let line = ShapeStyle::from(&RGBColor(0xcc, 0xcc, 0xcc)).stroke_width(1);
        root.draw(&PathElement::new(vec![(LEFT, y), (w as i32 - 20, y)], line))
            .map_err(err)?;
    }
    for c in 0..pic.cols {
        let x = LEFT + COL_W * c as i32 + 4;
        root.draw(&Text::new(
            format!("step {c}"),
            (x, TOP - 18),
            small.clone(),
        ))
        .map_err(err)?;
    }
    for a in &pic.arrows {
        let colour = if a.reduce { REDUCE } else { COPY };
        let (x0, y0) = (x_of(a.col, a.channel), row_y(a.from));
        let (x1, y1) = (x0 + lane / 2 + 10, row_y(a.to));
        let style = ShapeStyle::from(&colour).stroke_width(2);
        root.draw(&PathElement::new(vec![(x0, y0), (x1, y1)], style))
            .map_err(err)?;
        // The head: a small triangle pointing along the shaft.
        let (dx, dy) = (f64::from(x1 - x0), f64::from(y1 - y0));
        let len = (dx * dx + dy * dy).sqrt().max(1.0);
        let (ux, uy) = (dx / len, dy / len);
        let p = |along: f64, side: f64| {
            (
                (f64::from(x1) - ux * along - uy * side) as i32,
                (f64::from(y1) - uy * along + ux * side) as i32,
            )
        };
        root.draw(&Polygon::new(
            vec![(x1, y1), p(9.0, 4.0), p(9.0, -4.0)],
            colour.filled(),
        ))
        .map_err(err)?;
        let label = format!("c{}{}", a.chunk, if a.reduce { " +" } else { "" });
        // Near the tail, a fixed distance from the sender's row: a long arrow (the ring's
        // wrap-around) then never puts its label where a short arrow's is.
        let t = (f64::from(LABEL_DY) / dy.abs().max(1.0)).min(0.5);
        let (mx, my) = (
            (f64::from(x0) + dx * t) as i32 + 4,
            (f64::from(y0) + dy * t) as i32 - 6,
        );
        root.draw(&Text::new(label, (mx, my), small.color(&colour)))
            .map_err(err)?;
    }
    for wm in &pic.waits {
        let (x, y) = (x_of(wm.col, wm.channel), row_y(wm.rank));
        root.draw(&Circle::new((x, y), 4, WAIT.filled()))
            .map_err(err)?;
    }
    let legend_y = h as i32 - 24;
    let legend = [
        (COPY, "copy (chunk c)"),
        (REDUCE, "reduce (c +)"),
        (WAIT, "semaphore wait"),
    ];
    for (i, (colour, text)) in legend.iter().enumerate() {
        let x = LEFT + 150 * i as i32;
        root.draw(&Rectangle::new(
            [(x, legend_y), (x + 10, legend_y + 10)],
            colour.filled(),
        ))
        .map_err(err)?;
        root.draw(&Text::new(
            text.to_string(),
            (x + 14, legend_y - 1),
            small.clone(),
        ))
        .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}
