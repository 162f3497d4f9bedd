//! The data: a generated Gaussian mixture (or uniform, Gaussian or
//! normalised rows) or the user's own `.fvecs`/`.npy` file, held-out
//! queries, and their exact top-`K` (cached on disk between runs).

use std::path::Path;

use milvus_core::Metric;
use milvus_core::synthetic::{Rng, gaussian_mixture};
use rayon::prelude::*;

use crate::args::Args;
use crate::progress::die;

pub(crate) const K: usize = 10;

pub(crate) struct Dataset {
    pub(crate) dim: usize,
    pub(crate) base: Vec<f32>,
    pub(crate) queries: Vec<f32>,
    pub(crate) description: String,
}

impl Dataset {
    pub(crate) fn rows(&self) -> usize {
        self.base.len() / self.dim
    }
    pub(crate) fn row(&self, i: usize) -> &[f32] {
        &self.base[i * self.dim..(i + 1) * self.dim]
    }
    pub(crate) fn query(&self, i: usize) -> &[f32] {
        &self.queries[i * self.dim..(i + 1) * self.dim]
    }
    pub(crate) fn query_count(&self) -> usize {
        self.queries.len() / self.dim
    }
}

pub(crate) fn dataset(a: &Args) -> Dataset {
    let (dim, all, description) = if let Some(path) = &a.file {
        let (dim, v) = read_vectors(path).unwrap_or_else(|e| die(&format!("{}: {e}", path.display())));
        (dim, v, format!("{} ({} rows held out as queries)", path.display(), a.queries))
    } else if a.uniform {
        let mut rng = Rng::new(a.seed);
        (a.dim, rng.vector((a.n + a.queries) * a.dim), format!("uniform in [-1, 1), seed {}", a.seed))
    } else if a.gaussian {
        let mut rng = Rng::new(a.seed);
        let v = (0..(a.n + a.queries) * a.dim).map(|_| rng.next_gaussian()).collect();
        (a.dim, v, format!("standard Gaussian, seed {}", a.seed))
    } else {
        let v = gaussian_mixture(a.n + a.queries, a.dim, a.clusters, 0.1, a.seed);
        (
            a.dim,
            v,
            format!(
                "Gaussian mixture: {} clusters, sigma 0.1, centres uniform in [-1, 1), seed {}",
                a.clusters, a.seed
            ),
        )
    };
    let (all, description) = if a.normalise {
        let normalised = all.chunks_exact(dim).flat_map(milvus_core::vector::l2_normalize).collect();
        (normalised, format!("{description}, normalised"))
    } else {
        (all, description)
    };
    let rows = all.len() / dim;
    if rows <= a.queries {
        die("fewer rows than queries");
    }
    let base_rows = (rows - a.queries).min(if a.file.is_some() { usize::MAX } else { a.n });
    let (base, queries) = all.split_at(base_rows * dim);
    Dataset { dim, base: base.to_vec(), queries: queries[..a.queries * dim].to_vec(), description }
}

/// `.fvecs` (per vector: int32 dimensions, then float32s) or `.npy` (a 2-D
/// little-endian float32 array in C order).
pub(crate) fn read_vectors(path: &Path) -> Result<(usize, Vec<f32>), String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let f32s = |b: &[u8]| b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect::<Vec<f32>>();
    if path.extension().is_some_and(|e| e == "npy") {
        if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
            return Err("not a .npy file".into());
        }
        let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        let header = std::str::from_utf8(&bytes[10..10 + header_len]).map_err(|e| e.to_string())?;
        if !header.contains("'descr': '<f4'") || header.contains("'fortran_order': True") {
            return Err(format!("only little-endian float32 in C order is read, not {header}"));
        }
        let shape = header.split("'shape': (").nth(1).and_then(|s| s.split(')').next()).ok_or("no shape")?;
        let dims: Vec<usize> = shape.split(',').filter_map(|s| s.trim().parse().ok()).collect();
        let [_, dim] = dims[..] else { return Err(format!("expected a 2-D array, got shape ({shape})")) };
        Ok((dim, f32s(&bytes[10 + header_len..])))
    } else {
        let dim = u32::from_le_bytes(bytes.get(..4).ok_or("empty file")?.try_into().unwrap()) as usize;
        let record = 4 + dim * 4;
        if dim == 0 || bytes.len() % record != 0 {
            return Err("not an .fvecs file".into());
        }
        Ok((dim, bytes.chunks_exact(record).flat_map(|r| f32s(&r[4..])).collect()))
    }
}

/// Exact top-K row numbers of each query among the rows `keep` accepts,
/// cached under `out` for the unfiltered case.
pub(crate) fn ground_truth(
    d: &Dataset,
    metric: Metric,
    keep: &(dyn Fn(usize) -> bool + Sync),
    cache: Option<&Path>,
) -> Vec<Vec<u32>> {
    if let Some(bytes) = cache.and_then(|p| std::fs::read(p).ok()).filter(|b| b.len() == d.query_count() * K * 4) {
        return bytes
            .chunks_exact(K * 4)
            .map(|q| q.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect())
            .collect();
    }
    let truth: Vec<Vec<u32>> = (0..d.query_count())
        .into_par_iter()
        .map(|q| {
            let query = d.query(q);
            let mut best: Vec<(f32, u32)> =
                (0..d.rows()).filter(|&i| keep(i)).map(|i| (metric.distance(query, d.row(i)), i as u32)).collect();
            let nth = K.min(best.len() - 1);
            best.select_nth_unstable_by(nth, |a, b| a.0.total_cmp(&b.0));
            best.truncate(K);
            best.sort_by(|a, b| a.0.total_cmp(&b.0));
            best.into_iter().map(|e| e.1).collect()
        })
        .collect();
    if let Some(p) = cache {
        let bytes: Vec<u8> = truth.iter().flatten().flat_map(|i| i.to_le_bytes()).collect();
        let _ = std::fs::write(p, bytes);
    }
    truth
}
