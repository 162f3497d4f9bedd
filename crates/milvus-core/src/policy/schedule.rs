//! Which databases the launcher sends a worker to, and in what order.
//!
//! Autovacuum's rule: the database that has waited longest goes first. Each
//! full round (every `milvus.naptime`) queues every database due a visit
//! that is not queued or being visited already, least recently visited
//! first; a backend's request (`milvus_flush(wait => false)`) jumps the
//! queue. Whenever a worker slot is free, the launcher starts the head of
//! the queue. So with more databases than `milvus.max_workers`, every one is
//! visited in turn, none starved by those that come first in `pg_database`.

use std::collections::VecDeque;

/// The databases waiting for a worker, in the order they get one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VisitQueue {
    queue: VecDeque<u32>,
    /// The head of `queue` asked for by backends, ahead of the rest.
    urgent: usize,
}

impl VisitQueue {
    /// A full round: `due` holds (database, the number of its last visit,
    /// counted by the launcher, 0 for never) for every database due a visit.
    /// Those not being visited (`running`) wait behind the requests, least
    /// recently visited first, those already waiting included.
    pub fn add_round(&mut self, due: &[(u32, u64)], running: &[u32]) {
        let urgent: Vec<u32> = self.queue.iter().take(self.urgent).copied().collect();
        let mut rest: Vec<(u32, u64)> =
            due.iter().copied().filter(|(d, _)| !urgent.contains(d) && !running.contains(d)).collect();
        rest.sort_by_key(|&(d, last)| (last, d));
        self.queue = urgent.into_iter().chain(rest.into_iter().map(|(d, _)| d)).collect();
    }

    /// A visit asked for now: first in line (once).
    pub fn add_urgent(&mut self, database: u32) {
        if let Some(at) = self.queue.iter().position(|d| *d == database) {
            self.queue.remove(at);
            self.urgent -= usize::from(at < self.urgent);
        }
        self.queue.push_front(database);
        self.urgent += 1;
    }

    /// Up to `free` databases to start now, in queue order, skipping those
    /// being visited (they stay queued for when their visit ends).
    pub fn take(&mut self, free: usize, running: &[u32]) -> Vec<u32> {
        let mut out = Vec::new();
        let mut kept = VecDeque::new();
        let mut urgent = 0;
        for (i, d) in std::mem::take(&mut self.queue).into_iter().enumerate() {
            if out.len() < free && !running.contains(&d) {
                out.push(d);
            } else {
                urgent += usize::from(i < self.urgent);
                kept.push_back(d);
            }
        }
        self.queue = kept;
        self.urgent = urgent;
        out
    }

    /// Databases taken but not started (no free process slot): first again
    /// next time, in the order they were taken.
    pub fn put_back(&mut self, databases: &[u32]) {
        for d in databases.iter().rev() {
            self.queue.push_front(*d);
        }
        self.urgent += databases.len();
    }

    /// Forgets databases that no longer exist.
    pub fn retain(&mut self, exists: impl Fn(u32) -> bool) {
        let urgent = self.queue.iter().take(self.urgent).filter(|d| exists(**d)).count();
        self.queue.retain(|d| exists(*d));
        self.urgent = urgent;
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Rounds of a launcher with `slots` workers over `databases`, each
    /// visit lasting `visit_rounds` rounds: how many visits each got.
    fn simulate(databases: &[u32], slots: usize, rounds: u64, visit_rounds: u64) -> HashMap<u32, u32> {
        let mut queue = VisitQueue::default();
        let mut last: HashMap<u32, u64> = HashMap::new();
        let mut running: Vec<(u32, u64)> = Vec::new();
        let mut visits: HashMap<u32, u32> = HashMap::new();
        let mut started = 0;
        for now in 1..=rounds {
            running.retain(|(_, until)| *until > now);
            let busy: Vec<u32> = running.iter().map(|(d, _)| *d).collect();
            let due: Vec<(u32, u64)> = databases.iter().map(|d| (*d, last.get(d).copied().unwrap_or(0))).collect();
            queue.add_round(&due, &busy);
            for d in queue.take(slots - running.len(), &busy) {
                started += 1;
                last.insert(d, started);
                running.push((d, now + visit_rounds));
                *visits.entry(d).or_default() += 1;
            }
        }
        visits
    }

    #[test]
    fn more_databases_than_workers_are_all_served() {
        // The bug this fixes: with 3 databases and 2 workers, the third
        // was never visited.
        let visits = simulate(&[1, 2, 3], 2, 30, 1);
        assert_eq!(visits.len(), 3, "{visits:?}");
        let (min, max) = (visits.values().min().unwrap(), visits.values().max().unwrap());
        assert!(max - min <= 1, "fair: {visits:?}");
        // Long visits too.
        let visits = simulate(&[5, 6, 7, 8, 9], 2, 40, 3);
        assert_eq!(visits.len(), 5, "{visits:?}");
    }

    #[test]
    fn the_longest_waiting_goes_first() {
        let mut q = VisitQueue::default();
        q.add_round(&[(1, 50), (2, 0), (3, 10)], &[]);
        assert_eq!(q.take(3, &[]), vec![2, 3, 1]);
    }

    #[test]
    fn queued_or_running_databases_are_not_queued_twice() {
        let mut q = VisitQueue::default();
        q.add_round(&[(1, 0), (2, 0)], &[2]);
        q.add_round(&[(1, 0), (2, 0)], &[2]);
        assert_eq!(q.len(), 1);
        q.add_urgent(1);
        q.add_round(&[(1, 0), (2, 0)], &[]);
        assert_eq!(q.len(), 2);
        assert_eq!(q.take(5, &[]), vec![1, 2]);
    }

    #[test]
    fn a_request_jumps_the_queue_and_waits_for_a_running_visit() {
        let mut q = VisitQueue::default();
        q.add_round(&[(1, 0), (2, 0), (3, 0)], &[]);
        q.add_urgent(3);
        assert_eq!(q.take(1, &[]), vec![3]);
        // Asked for while its visit runs: it waits in line, ahead.
        q.add_urgent(4);
        assert_eq!(q.take(2, &[4]), vec![1, 2]);
        assert_eq!(q.take(2, &[]), vec![4]);
    }

    #[test]
    fn put_back_and_retain() {
        let mut q = VisitQueue::default();
        q.add_round(&[(1, 0), (2, 0)], &[]);
        let d = q.take(1, &[])[0];
        q.put_back(&[d]);
        assert_eq!(q.take(1, &[]), vec![d]);
        q.retain(|d| d != 2);
        assert!(q.is_empty());
        // Several taken, none started: all back, in their order, ahead.
        q.add_round(&[(3, 0), (4, 0), (5, 0)], &[]);
        let taken = q.take(2, &[]);
        q.put_back(&taken);
        q.add_round(&[(3, 0), (4, 0), (5, 0)], &[]);
        assert_eq!(q.take(3, &[]), vec![3, 4, 5]);
    }
}
