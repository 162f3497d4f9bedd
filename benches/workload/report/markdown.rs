//! `report.md`: the report's tables.

use std::fmt::Write as _;

use crate::report::Report;
use crate::stream::STREAM_RATE;

pub(crate) fn opt(v: Option<f64>) -> String {
    v.map(|v| if v >= 100.0 { format!("{v:.0}") } else { format!("{v:.2}") }).unwrap_or_default()
}

pub(crate) fn mb(v: Option<i64>) -> String {
    v.map(|v| format!("{:.1}", v as f64 / 1048576.0)).unwrap_or_default()
}

pub(crate) fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let m = &r.machine;
    writeln!(
        s,
        "Machine: {} ({} cores, {:.1} GB), {}; {}.\n",
        m.cpu,
        m.cores,
        m.memory_gb,
        m.postgres.split(" on ").next().unwrap_or(""),
        m.date
    )
    .unwrap();
    writeln!(
        s,
        "Data: {} rows x {} dimensions, {}; metric {}; {} held-out queries, recall@10 against exact search. HNSW m = \
            {}, ef_construction = {}; pg_milvus' quantization {}. QPS: median of {} runs (range in brackets).\n",
        r.rows,
        r.dim,
        r.dataset,
        r.metric,
        r.queries,
        r.m,
        r.ef_construction,
        r.quantization.as_deref().unwrap_or("unset (rabitq from 256 dimensions, sq8 below)"),
        r.repeats
    )
    .unwrap();
    let w = &r.merges;
    writeln!(
        s,
        "Merge policy (simulated steady ingest of {} segments' worth): growing_max_rows {}, segment_max_rows {}, \
            fan-in {}: each row rewritten {:.2} times by merges after its flush (bound 1 + log_{}({} / {}) = {:.2}).\n",
        50,
        w.growing_max_rows,
        w.segment_max_rows,
        w.fan_in,
        w.rewrites_per_row,
        w.fan_in,
        w.segment_max_rows,
        w.growing_max_rows,
        w.bound
    )
    .unwrap();
    writeln!(
        s,
        "| | COPY rows/s | INSERT rows/s (1000/stmt) | INSERT rows/s (1/stmt) | time to indexed (s) | CREATE INDEX \
        WAL (kB) | merges done (s) | first query of a connection (ms) | DELETE 10% + VACUUM (s) | compaction (s) | text output rows/s \
        | table MB | index MB (pages) | object store MB | cache MB |"
    )
    .unwrap();
    writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|").unwrap();
    for t in &r.targets {
        writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            t.target,
            opt(t.copy_rows_per_s),
            opt(t.insert_batch_rows_per_s),
            opt(t.insert_single_rows_per_s),
            opt(t.time_to_indexed_s),
            t.create_index_wal_bytes.map(|b| format!("{:.1}", b as f64 / 1024.0)).unwrap_or_default(),
            opt(t.merges_settled_s),
            opt(t.cold_query_ms),
            opt(t.delete_vacuum_s),
            opt(t.compaction_s),
            opt(t.text_output_rows_per_s),
            mb(t.table_bytes),
            mb(t.index_bytes),
            mb(t.object_store_bytes),
            mb(t.cache_bytes)
        )
        .unwrap();
    }
    writeln!(s, "\n| | phase | ef_search | clients | recall@10 | QPS | p50 (ms) | p99 (ms) |").unwrap();
    writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|").unwrap();
    for t in &r.targets {
        for q in &t.queries {
            writeln!(
                s,
                "| {} | {} | {} | {} | {:.3} | {:.0} ({:.0}–{:.0}) | {:.2} | {:.2} |",
                t.target,
                q.label,
                q.ef_search,
                q.clients,
                q.recall_at_10,
                q.qps,
                q.qps_min,
                q.qps_max,
                q.p50_ms,
                q.p99_ms
            )
            .unwrap();
        }
    }
    if r.targets.iter().any(|t| t.stream.is_some()) {
        writeln!(
            s,
            "\n| streaming | rows before | rows inserted | insert rows/s (target {STREAM_RATE}) | queries | QPS | p50 \
                (ms) | p99 (ms) | recall@10 | indexed after the last insert (s) |"
        )
        .unwrap();
        writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|").unwrap();
        for t in &r.targets {
            if let Some(m) = &t.stream {
                writeln!(
                    s,
                    "| {} | {} | {} | {:.0} | {} | {:.0} | {:.2} | {:.2} | {:.3} | {:.2} |",
                    t.target,
                    m.rows_before,
                    m.rows_streamed,
                    m.insert_rows_per_s,
                    m.queries,
                    m.qps,
                    m.p50_ms,
                    m.p99_ms,
                    m.recall_at_10,
                    m.lag_s
                )
                .unwrap();
            }
        }
    }
    if r.targets.iter().any(|t| !t.crowds.is_empty()) {
        writeln!(
            s,
            "\n| crowd sweep | connections | rows/s streaming in (asked) | (done) | queries | QPS | p50 (ms) | p99 \
                (ms) | errors | private MB per backend | PSS MB |"
        )
        .unwrap();
        writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|").unwrap();
        let megabytes = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.1}"));
        for t in &r.targets {
            for m in &t.crowds {
                writeln!(
                    s,
                    "| {} | {} | {:.0} | {:.0} | {} | {:.0} | {:.2} | {:.2} | {} | {} | {} |",
                    t.target,
                    m.connections,
                    m.target_rows_per_s,
                    m.insert_rows_per_s,
                    m.queries,
                    m.qps,
                    m.p50_ms,
                    m.p99_ms,
                    m.errors,
                    megabytes(m.private_mb),
                    megabytes(m.pss_mb)
                )
                .unwrap();
            }
        }
    }
    if r.targets.iter().any(|t| !t.memory.is_empty()) {
        writeln!(s, "\n| | connections | private MB per backend | of which anonymous | PSS MB | RSS MB |").unwrap();
        writeln!(s, "|---|---:|---:|---:|---:|---:|").unwrap();
        for t in &r.targets {
            for m in &t.memory {
                writeln!(
                    s,
                    "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
                    t.target, m.connections, m.private_mb, m.anonymous_mb, m.pss_mb, m.rss_mb
                )
                .unwrap();
            }
        }
    }
    for t in &r.targets {
        for n in &t.notes {
            writeln!(s, "\n{}: {n}", t.target).unwrap();
        }
    }
    s
}
