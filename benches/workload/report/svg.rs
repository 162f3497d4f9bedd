//! `recall_qps.svg`: recall@10 against QPS, a line per target and phase.

use plotters::prelude::*;

use crate::progress::die;
use crate::report::Report;

/// A line of the plot: (name, [(recall, QPS, ef_search)]), of a target and phase.
pub(crate) type Series = (String, Vec<(f64, f64, usize)>);

/// Recall@10 against single-client QPS, one line per target and phase.
pub(crate) fn svg(r: &Report) -> String {
    let series: Vec<Series> = r
        .targets
        .iter()
        .flat_map(|t| {
            let mut labels: Vec<&str> =
                t.queries.iter().filter(|q| q.ef_search > 0).map(|q| q.label.as_str()).collect();
            labels.dedup();
            labels
                .into_iter()
                .map(|l| {
                    let points = t
                        .queries
                        .iter()
                        .filter(|q| q.label == l && q.clients == 1)
                        .map(|q| (q.recall_at_10, q.qps, q.ef_search))
                        .collect();
                    (format!("{} ({l})", t.target), points)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.1.iter().map(|p| (p.0, p.1))).collect();
    let x_min = (all.iter().map(|p| p.0).fold(1.0, f64::min) - 0.01).clamp(0.0, 0.9);
    let y_max = all.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let mut out = String::new();
    draw(&mut out, &series, x_min, y_max).unwrap_or_else(|e| die(&format!("cannot draw the plot: {e}")));
    out
}

/// The recall-QPS plot: a line per series, its `ef_search` points marked.
pub(crate) fn draw(
    out: &mut String,
    series: &[Series],
    x_min: f64,
    y_max: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::with_string(out, (760, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("recall@10 and QPS, 1 client, one point per ef_search", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_min..1.0, 0.0..y_max)?;
    chart.configure_mesh().x_desc("recall@10").y_desc("QPS").draw()?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(points.iter().map(|p| (p.0, p.1)), color.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(points.iter().map(|p| Circle::new((p.0, p.1), 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
