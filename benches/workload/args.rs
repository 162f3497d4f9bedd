//! The driver's arguments: the cluster, the data, the indexes' parameters,
//! which phases run, where the report goes (`milvus-workload --help`).

use std::path::PathBuf;

use clap::builder::RangedU64ValueParser;
use clap::{Parser, ValueEnum};
use milvus_core::Metric;

use crate::query::EF_VALUES;

/// One run of the life of a collection: pg_milvus beside pgvector's HNSW
/// and a plain table, on a running cluster (`scripts/bench.sh` starts one).
#[derive(Parser)]
#[command(name = "milvus-workload", version)]
pub(crate) struct Args {
    /// Host or socket directory of the cluster.
    #[arg(long, default_value = "/tmp")]
    pub(crate) host: String,
    #[arg(long, default_value_t = 5432)]
    pub(crate) port: u16,
    /// Rows of the collection.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) n: usize,
    /// Dimensions of a row.
    #[arg(long, default_value_t = 128)]
    pub(crate) dim: usize,
    /// Clusters of the Gaussian mixture.
    #[arg(long, default_value_t = 1000)]
    pub(crate) clusters: usize,
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Held-out queries, recall@10 against exact search.
    #[arg(long, default_value_t = 500)]
    pub(crate) queries: usize,
    /// Uniform rows instead of the mixture.
    #[arg(long, conflicts_with_all = ["file", "gaussian"])]
    pub(crate) uniform: bool,
    /// Standard Gaussian rows instead of the mixture: norms spread around
    /// sqrt(dim), the distribution on which inner product differs most
    /// from cosine.
    #[arg(long, conflicts_with = "file")]
    pub(crate) gaussian: bool,
    /// Every row and query divided by its norm (after it is generated or read).
    #[arg(long)]
    pub(crate) normalise: bool,
    /// Only the index build on the loaded table and the single-client
    /// recall and QPS at each `--ef` (both indexes built by CREATE INDEX,
    /// one graph each): no inserts, deletes, memory or streaming phases.
    #[arg(long)]
    pub(crate) recall_only: bool,
    /// Only the streaming and crowd phases (half the rows loaded and
    /// indexed, the rest streamed in while clients search): no plain
    /// table, bulk load, deletes or memory phases.
    #[arg(long, conflicts_with = "recall_only")]
    pub(crate) stream_only: bool,
    /// Only the index build on the loaded table and the filter phases
    /// (the index as it is, then each extension's index for filters):
    /// no inserts, deletes, memory, streaming or sweeps.
    #[arg(long, conflicts_with_all = ["recall_only", "stream_only"])]
    pub(crate) filters_only: bool,
    /// The ef_search values of the query sweeps.
    #[arg(long, value_delimiter = ',', default_values_t = EF_VALUES, value_parser = at_least_one())]
    pub(crate) ef: Vec<usize>,
    /// Rows from a file (.fvecs or .npy of float32) instead of generated ones.
    #[arg(long)]
    pub(crate) file: Option<PathBuf>,
    /// Clients of the multi-client query phases.
    #[arg(long, default_value_t = 4, value_parser = at_least_one())]
    pub(crate) clients: usize,
    /// Repeats of each query phase (QPS: their median).
    #[arg(long, default_value_t = 3, value_parser = at_least_one())]
    pub(crate) repeats: usize,
    /// Where report.json, report.md and recall_qps.svg go.
    #[arg(long, default_value = "bench-results")]
    pub(crate) out: PathBuf,
    /// HNSW m (both indexes).
    #[arg(long, default_value_t = 16)]
    pub(crate) m: usize,
    /// HNSW ef_construction (both indexes).
    #[arg(long, default_value_t = 64)]
    pub(crate) ef_construction: usize,
    /// The milvus index's `quantization` option: `rabitq`, `sq8` or
    /// `none` (graphs walked on the rows); unset by default (RaBitQ codes
    /// from 256 dimensions, sq8 below).
    #[arg(long)]
    pub(crate) quantization: Option<String>,
    #[arg(long, value_enum, default_value_t = MetricArg::L2)]
    pub(crate) metric: MetricArg,
    /// The column type (both indexes): `vector` (4-byte elements) or
    /// `halfvec` (2-byte; recall is still against exact search over the
    /// f32 rows).
    #[arg(long = "type", value_enum, default_value_t = ColumnType::Vector)]
    pub(crate) column_type: ColumnType,
    /// The sparse workload instead: SPLADE-like `sparsevec` rows under
    /// inner product (`sparse.rs`); `--n`, `--queries`, `--ef`, `--repeats`
    /// and `--seed` apply.
    #[arg(long, conflicts_with_all = ["recall_only", "stream_only", "file"])]
    pub(crate) sparse: bool,
    /// Sparse rows: dimensions of the vocabulary.
    #[arg(long, default_value_t = 30_000)]
    pub(crate) vocab: usize,
    /// Sparse rows: non-zero entries of a row.
    #[arg(long, default_value_t = 120)]
    pub(crate) sparse_nnz: usize,
    /// Sparse rows: non-zero entries of a query.
    #[arg(long, default_value_t = 20)]
    pub(crate) sparse_query_nnz: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ColumnType {
    Vector,
    Halfvec,
}

impl ColumnType {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ColumnType::Vector => "vector",
            ColumnType::Halfvec => "halfvec",
        }
    }
}

pub(crate) fn at_least_one() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..)
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum MetricArg {
    L2,
    Ip,
    Cosine,
    L1,
}

impl Args {
    pub(crate) fn metric(&self) -> Metric {
        match self.metric {
            MetricArg::L2 => Metric::L2,
            MetricArg::Ip => Metric::InnerProduct,
            MetricArg::Cosine => Metric::Cosine,
            MetricArg::L1 => Metric::L1,
        }
    }
}
