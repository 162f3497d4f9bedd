//! What the driver tells the terminal while it runs: each step, a bar for
//! long ones, and the figure it measured; and how it stops on an error.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

pub(crate) fn die(message: &str) -> ! {
    eprintln!("milvus-workload: {message}");
    std::process::exit(2)
}

/// The phase running now, on stderr: a spinner with the time it has taken,
/// a bar with its ETA once it counts rows or queries ([`counting`]), and a
/// line with its figure when it ends. Not on a terminal (a log), only the
/// lines.
pub(crate) static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

pub(crate) fn step(what: &str) {
    let style = ProgressStyle::with_template("  {spinner} {msg} {elapsed}").expect("a template");
    let bar = ProgressBar::new_spinner().with_style(style).with_message(what.to_owned());
    bar.enable_steady_tick(Duration::from_millis(200));
    *BAR.lock().expect("not poisoned") = Some(bar);
}

/// The running phase's bar, now counting to `total` (rows, queries).
pub(crate) fn counting(total: usize) -> ProgressBar {
    let bar = BAR.lock().expect("not poisoned").clone().unwrap_or_else(ProgressBar::hidden);
    let template = "  {msg} [{bar:30}] {human_pos}/{human_len} {elapsed} (eta {eta})";
    bar.set_style(ProgressStyle::with_template(template).expect("a template").progress_chars("=> "));
    bar.set_length(total as u64);
    bar.set_position(0);
    bar
}

pub(crate) fn done(figure: &str) {
    let Some(bar) = BAR.lock().expect("not poisoned").take() else { return };
    let line = format!("{} ... {figure}", bar.message());
    if bar.is_hidden() {
        eprintln!("  {line}");
    } else {
        bar.set_style(ProgressStyle::with_template("  {msg}").expect("a template"));
        bar.finish_with_message(line);
    }
}

/// A phase measured in rows per second, with its progress line.
pub(crate) fn rate(what: &str, f: impl FnOnce() -> f64) -> Option<f64> {
    step(what);
    let rows_per_s = f();
    done(&format!("{rows_per_s:.0} rows/s"));
    Some(rows_per_s)
}

pub(crate) fn seconds(what: &str, f: impl FnOnce()) -> Option<f64> {
    step(what);
    let start = Instant::now();
    f();
    let secs = start.elapsed().as_secs_f64();
    done(&format!("{secs:.2} s"));
    Some(secs)
}

// ---------------------------------------------------------------- data
