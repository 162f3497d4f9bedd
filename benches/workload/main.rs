//! The workload driver: one run of the life of a collection against a
//! running cluster, over libpq, for pg_milvus beside pgvector's HNSW (when
//! the `vector` extension is installed) and a plain table, so that every
//! ratio is measured on the same machine in the same minutes.
//!
//! Phases, each timed: bulk load (COPY); the text output of every row
//! (`embedding::text`, what psql and text-protocol clients pay); INSERT
//! with the index present, in
//! statements of 1,000 rows and of one row; time from the last insert until
//! every row is in an indexed segment (pgvector: its CREATE INDEX); recall@10,
//! QPS and latency at several `ef_search`, one client and several; filtered
//! queries keeping 1%, 10% and 50% of the rows, with the plan the planner
//! picks (pgvector with its `relaxed_order` iterative scan); the same
//! with 10% of the rows still growing; DELETE 10% + VACUUM, compaction, and
//! queries again; bytes on local disk and in object storage; streaming
//! (half the rows loaded and indexed, the other half inserted at 1,000 rows
//! a second while one client searches: QPS, latency, recall against the
//! rows committed at each query's start, and the lag until all is indexed);
//! then the crowd sweep: 1, 4, 16, 64 and 100 connections searching for
//! 10 s, alone and while one session streams rows in at 100 a second, a
//! rate both extensions hold (QPS, latency, errors, memory per backend).
//! With `--recall-only`, only the load, the text output, CREATE INDEX on the
//! loaded table and recall and QPS at each `--ef` (`make bench-ip`). With
//! `--sparse`, the sparse workload instead (`sparse.rs`, `make bench-sparse`).
//!
//! `milvus-workload --help` lists its options (host and port of the
//! cluster, rows, dimensions, dataset, metric, clients, repeats, HNSW
//! parameters).
//!
//! Writes `report.json` (every figure and the machine), `report.md` and
//! `recall_qps.svg` into `--out`. `scripts/bench.sh` starts a cluster and
//! runs it (`make bench`, `make bench-quick`).
//!
//! The files: `args.rs` (the options), `data.rs` (rows, queries, exact
//! top-k), `wire.rs` (vectors as parameters and as text), `progress.rs`
//! (the terminal), `bench.rs` (targets, connections, tables, indexes,
//! waits), a file per group of phases, each an `impl Bench` block
//! (`load.rs`, `query.rs`, `filter.rs`, `stream.rs`, `crowds.rs`,
//! `deletes.rs`), `runs.rs` (which phases each target runs, in order), and
//! `report/` (the figures as JSON, `markdown.rs`, `svg.rs`). A new phase is
//! a method in its group's file and a line in `runs.rs`.

mod args;
mod bench;
mod crowds;
mod data;
mod deletes;
mod filter;
mod load;
mod progress;
mod query;
mod report;
mod runs;
mod sparse;
mod stream;
mod wire;

use clap::Parser;

use crate::args::Args;
use crate::bench::{Bench, Kind, fresh_database};
use crate::data::{K, dataset, ground_truth};
use crate::filter::FILTERS;
use crate::progress::{die, done, step};
use crate::report::markdown::markdown;
use crate::report::svg::svg;
use crate::report::{Report, TargetReport, machine, merge_report};

fn main() {
    let a = Args::parse();
    std::fs::create_dir_all(&a.out).unwrap_or_else(|e| die(&format!("{}: {e}", a.out.display())));
    let write = |name: &str, body: String| {
        let p = a.out.join(name);
        std::fs::write(&p, body).unwrap_or_else(|e| die(&format!("{}: {e}", p.display())));
        eprintln!("wrote {}", p.display());
    };
    if a.sparse {
        let (mut c, pgvector) = fresh_database(&a);
        let report = sparse::run(&a, machine(&mut c), pgvector);
        write("report.json", serde_json::to_string_pretty(&report).unwrap());
        write("report.md", sparse::markdown(&report));
        return;
    }
    eprintln!("data");
    let d = dataset(&a);
    step(&format!("exact top-{K} of {} queries over {} rows", d.query_count(), d.rows()));
    let cache_name = format!(
        "truth-{}-{}-{}-{}-{}-{}{}{}-{}.bin",
        d.rows(),
        d.dim,
        a.clusters,
        a.seed,
        d.query_count(),
        a.uniform as u8,
        a.gaussian as u8,
        a.normalise as u8,
        a.metric().code()
    );
    let cache = if a.file.is_none() { Some(a.out.join(cache_name)) } else { None };
    let truth = ground_truth(&d, a.metric(), &|_| true, cache.as_deref());
    let filtered_truth: Vec<Vec<Vec<u32>>> = if a.recall_only || a.stream_only {
        Vec::new()
    } else {
        FILTERS.iter().map(|(_, t)| ground_truth(&d, a.metric(), &|i| i % 1000 < *t, None)).collect()
    };
    done("done");

    let bench = Bench { a: &a, d: &d, truth, filtered_truth };
    let (mut c, pgvector) = fresh_database(&a);
    let machine = machine(&mut c);

    let mut targets = Vec::new();
    let run = |kind| {
        if a.recall_only {
            bench.run_recall_only(kind)
        } else if a.filters_only {
            bench.run_filters_only(kind)
        } else if a.stream_only {
            bench.run_stream_only(kind)
        } else if kind == Kind::Milvus {
            bench.run_milvus()
        } else {
            bench.run_pgvector()
        }
    };
    if !a.recall_only && !a.stream_only && !a.filters_only {
        eprintln!("{}", Kind::Plain.name());
        targets.push(bench.run_plain());
    }
    eprintln!("{}", Kind::Milvus.name());
    targets.push(run(Kind::Milvus));
    match pgvector {
        Ok(()) => {
            // pg_milvus' workers first finish what its phases left them
            // (flushes, merges): their CPU and their WAL, which carries an
            // embedded index's objects, would count against pgvector (its
            // CREATE INDEX's WAL is the server's WAL meanwhile).
            bench.wait_indexed(&mut c);
            bench.wait_settled(&mut c);
            eprintln!("{}", Kind::Pgvector.name());
            targets.push(run(Kind::Pgvector));
        }
        Err(e) => {
            let note = format!("skipped: the vector extension is not installed in this cluster ({e})");
            eprintln!("pgvector {note}");
            targets.push(TargetReport {
                target: Kind::Pgvector.name().into(),
                notes: vec![note],
                ..Default::default()
            });
        }
    }
    let report = Report {
        machine,
        dataset: d.description.clone(),
        metric: format!("{:?} ({}), {} columns", a.metric(), a.metric().operator(), a.column_type.name()),
        rows: d.rows(),
        dim: d.dim,
        queries: d.query_count(),
        m: a.m,
        ef_construction: a.ef_construction,
        quantization: a.quantization.clone(),
        clients: a.clients,
        repeats: a.repeats,
        merges: merge_report(),
        targets,
    };
    write("report.json", serde_json::to_string_pretty(&report).unwrap());
    write("report.md", markdown(&report));
    write("recall_qps.svg", svg(&report));
}
