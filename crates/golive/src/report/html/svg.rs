//! Inline SVG primitives: axes, ticks, legend, the line chart and the bar chart.

use std::fmt::Write;

use super::esc;

/// One named, coloured series of `(x, y)` points.
pub(super) struct Series {
    pub(super) name: String,
    pub(super) color: &'static str,
    pub(super) points: Vec<(f64, f64)>,
}

const W: f64 = 560.0;
const H: f64 = 300.0;
const ML: f64 = 62.0;
const MR: f64 = 16.0;
const MT: f64 = 30.0;
const MB: f64 = 58.0;

/// A "nice" upper bound and tick step for `0..max`.
fn nice_axis(max: f64) -> (f64, f64) {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

fn fmt_tick(v: f64) -> String {
    if v.abs() >= 10000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Value printed above a bar: whole numbers from 100 up, so neighbours do not collide.
fn bar_label(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        fmt_tick(v)
    }
}

fn svg_open(out: &mut String, title: &str, y_label: &str) {
    let _ = write!(
        out,
        "<figure><figcaption>{}</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{}\" font-family=\"system-ui,sans-serif\" font-size=\"11\">\
         <rect x=\"0\" y=\"0\" width=\"{W}\" height=\"{H}\" fill=\"#fff\"/>\
         <text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\" fill=\"#57606a\">{}</text>",
        esc(title),
        esc(title),
        MT + (H - MT - MB) / 2.0,
        MT + (H - MT - MB) / 2.0,
        esc(y_label)
    );
}

fn no_data(out: &mut String) {
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#8c959f\" font-size=\"14\">no data in this report</text>",
        W / 2.0,
        H / 2.0
    );
}

/// Horizontal grid lines and y tick labels; returns the y mapping's upper bound.
fn y_axis(out: &mut String, max: f64) -> f64 {
    let (top, step) = nice_axis(max);
    let plot_h = H - MT - MB;
    let mut v = 0.0;
    while v <= top + step * 1e-6 {
        let y = MT + plot_h - v / top * plot_h;
        let _ = write!(
            out,
            "<line x1=\"{ML}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eaeef2\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#57606a\">{}</text>",
            W - MR,
            ML - 6.0,
            y + 4.0,
            fmt_tick(v)
        );
        v += step;
    }
    let _ = write!(
        out,
        "<line x1=\"{ML}\" x2=\"{ML}\" y1=\"{MT}\" y2=\"{}\" stroke=\"#57606a\"/><line x1=\"{ML}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#57606a\"/>",
        H - MB,
        W - MR,
        H - MB,
        H - MB
    );
    top
}

fn legend(out: &mut String, series: &[Series]) {
    let mut x = ML + 4.0;
    for s in series.iter().filter(|s| !s.points.is_empty()) {
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"8\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{:.1}\" y=\"18\" fill=\"#1d2329\">{}</text>",
            s.color,
            x + 16.0,
            esc(&s.name)
        );
        x += 24.0 + 7.0 * s.name.chars().count() as f64;
    }
}

pub(super) fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    ticks: Option<&[(f64, String)]>,
    series: &[Series],
) -> String {
    let mut out = String::new();
    svg_open(&mut out, title, y_label);
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    if all.is_empty() {
        no_data(&mut out);
        out.push_str("</svg></figure>");
        return out;
    }
    let y_top = y_axis(&mut out, all.iter().map(|p| p.1).fold(0.0, f64::max));
    let (mut x_min, mut x_max) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.0), b.max(p.0))
        });
    if let Some(t) = ticks {
        for (x, _) in t {
            x_min = x_min.min(*x);
            x_max = x_max.max(*x);
        }
    }
    if x_max <= x_min {
        x_min -= 0.5;
        x_max += 0.5;
    }
    let plot_w = W - ML - MR - 20.0;
    let plot_h = H - MT - MB;
    let px = |x: f64| ML + 10.0 + (x - x_min) / (x_max - x_min) * plot_w;
    let py = |y: f64| MT + plot_h - y / y_top * plot_h;
    // x ticks: the given labels, else five evenly spaced values.
    let x_ticks: Vec<(f64, String)> = match ticks {
        Some(t) => t.to_vec(),
        None => {
            // Round ticks: multiples of a nice step inside the range.
            let (_, step) = nice_axis(x_max - x_min);
            let mut x = (x_min / step).ceil() * step;
            let mut t = Vec::new();
            while x <= x_max + step * 1e-6 {
                t.push((x, fmt_tick(x)));
                x += step;
            }
            t
        }
    };
    let every = x_ticks.len().div_ceil(10).max(1);
    for (i, (x, label)) in x_ticks.iter().enumerate() {
        if i % every != 0 {
            continue;
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" fill=\"#57606a\">{}</text>",
            px(*x),
            H - MB + 16.0,
            esc(label)
        );
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" fill=\"#57606a\">{}</text>",
        ML + plot_w / 2.0,
        H - 12.0,
        esc(x_label)
    );
    for s in series {
        if s.points.is_empty() {
            continue;
        }
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1)))
            .collect();
        let _ = write!(
            out,
            "<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"3\" points=\"{}\"><title>{}</title></polyline>",
            s.color,
            pts.join(" "),
            esc(&s.name)
        );
        for p in &s.points {
            let _ = write!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{}\"><title>{}: {}</title></circle>",
                px(p.0),
                py(p.1),
                s.color,
                esc(&s.name),
                fmt_tick(p.1)
            );
        }
    }
    legend(&mut out, series);
    out.push_str("</svg></figure>");
    out
}

pub(super) fn bar_chart(
    title: &str,
    y_label: &str,
    categories: &[String],
    series: &[Series],
) -> String {
    let mut out = String::new();
    svg_open(&mut out, title, y_label);
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    if categories.is_empty() || all.is_empty() {
        no_data(&mut out);
        out.push_str("</svg></figure>");
        return out;
    }
    let y_top = y_axis(&mut out, all.iter().map(|p| p.1).fold(0.0, f64::max));
    let plot_w = W - ML - MR;
    let plot_h = H - MT - MB;
    let group_w = plot_w / categories.len() as f64;
    let bar_w = (group_w * 0.7) / series.len().max(1) as f64;
    for (ci, cat) in categories.iter().enumerate() {
        let gx = ML + group_w * ci as f64;
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" fill=\"#1d2329\">{}</text>",
            gx + group_w / 2.0,
            H - MB + 16.0,
            esc(cat)
        );
        for (si, s) in series.iter().enumerate() {
            let Some((_, v)) = s.points.iter().find(|p| p.0 as usize == ci) else {
                continue;
            };
            let bh = v / y_top * plot_h;
            let x = gx + group_w * 0.15 + bar_w * si as f64;
            let _ = write!(
                out,
                "<rect class=\"series\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{} {}: {}</title></rect>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#1d2329\" font-size=\"10\">{}</text>",
                MT + plot_h - bh,
                bar_w - 2.0,
                s.color,
                esc(cat),
                esc(&s.name),
                fmt_tick(*v),
                x + bar_w / 2.0 - 1.0,
                MT + plot_h - bh - 3.0,
                bar_label(*v)
            );
        }
    }
    legend(&mut out, series);
    out.push_str("</svg></figure>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_axis_covers_the_maximum() {
        assert_eq!(nice_axis(87.0), (100.0, 20.0));
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        let (top, step) = nice_axis(1234.0);
        assert!(top >= 1234.0 && step > 0.0);
    }
}
