//! Deterministic synthetic vectors for tests, benchmarks and the demo.
//!
//! A xorshift generator: no dependency, the same sequence on every machine,
//! so a benchmark run and its ground truth can be reproduced from a seed.

/// A small, fast, deterministic generator (xorshift64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [-1, 1).
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }

    /// Standard normal (Box-Muller).
    pub fn next_gaussian(&mut self) -> f32 {
        let u1 = ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let u2 = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
    }

    /// A vector of `dim` elements uniform in [-1, 1).
    pub fn vector(&mut self, dim: usize) -> Vec<f32> {
        (0..dim).map(|_| self.next_f32()).collect()
    }
}

/// `n` points of a Gaussian mixture, row-major: `clusters` centres uniform
/// in [-1, 1)^dim, each point a centre plus N(0, spread²) noise per element.
/// Embeddings of real data look more like this than like uniform noise.
pub fn gaussian_mixture(n: usize, dim: usize, clusters: usize, spread: f32, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let centres: Vec<Vec<f32>> = (0..clusters.max(1)).map(|_| rng.vector(dim)).collect();
    let mut out = Vec::with_capacity(n * dim);
    for _ in 0..n {
        let c = &centres[rng.next_u64() as usize % centres.len()];
        out.extend(c.iter().map(|x| x + spread * rng.next_gaussian()));
    }
    out
}

/// `n` sparse rows shaped like SPLADE's learned term weights: `nnz`
/// distinct dimensions of `vocab` each, drawn with Zipf-like frequencies
/// (dimension r about 1/(r + 1) as often as dimension 0), each with a
/// positive weight: exponential (mean 0.5) times ln(r + 2) / ln(vocab + 1),
/// so that, as with learned weights (and IDF), the frequent dimensions
/// weigh least. Queries are the same with fewer terms.
pub fn splade_like(n: usize, vocab: usize, nnz: usize, seed: u64) -> Vec<crate::sparse::SparseVec> {
    assert!(nnz <= vocab / 2, "room for distinct terms");
    let mut rng = Rng::new(seed);
    let mut uniform = move || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    (0..n)
        .map(|_| {
            let mut terms = std::collections::BTreeMap::new();
            while terms.len() < nnz {
                let rank = ((vocab as f64).powf(uniform()) as usize - 1).min(vocab - 1);
                let rarity = ((rank + 2) as f64).ln() / ((vocab + 1) as f64).ln();
                let weight = (-(1.0 - uniform()).ln() * 0.5 * rarity).max(1e-3) as f32;
                terms.insert(rank as i32, weight);
            }
            crate::sparse::SparseVec {
                dim: vocab,
                indices: terms.keys().copied().collect(),
                values: terms.values().copied().collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let a = Rng::new(7).vector(1000);
        assert_eq!(a, Rng::new(7).vector(1000));
        assert_ne!(a, Rng::new(8).vector(1000));
        assert!(a.iter().all(|x| (-1.0..1.0).contains(x)));
    }

    #[test]
    fn gaussian_has_unit_variance() {
        let mut rng = Rng::new(1);
        let xs: Vec<f64> = (0..100_000).map(|_| rng.next_gaussian() as f64).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!(mean.abs() < 0.02 && (var - 1.0).abs() < 0.02, "mean {mean} var {var}");
        assert_eq!(gaussian_mixture(10, 3, 2, 0.1, 5).len(), 30);
    }
}
