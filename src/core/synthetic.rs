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

    /// A vector of `dim` elements uniform in [-1, 1).
    pub fn vector(&mut self, dim: usize) -> Vec<f32> {
        (0..dim).map(|_| self.next_f32()).collect()
    }
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
}
