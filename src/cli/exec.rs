//! Running tasks on `--jobs` threads and handing their results over in task
//! order, with a bounded number of results in flight.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};

/// Runs `work` on every task index `0..n` on `jobs` threads, and calls
/// `deliver` with each result in index order on the calling thread. At most
/// `jobs + 2` results wait to be delivered. When `deliver` returns false,
/// the remaining tasks are not started.
pub fn run_ordered<T: Send>(
    n: usize,
    jobs: usize,
    work: impl Fn(usize) -> T + Sync,
    mut deliver: impl FnMut(usize, T) -> bool,
) {
    let jobs = jobs.max(1);
    let window = jobs + 2;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // Index of the next result to deliver, and its condition.
    let delivered = Mutex::new(0usize);
    let advanced = Condvar::new();
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<(usize, T)>();
        for _ in 0..jobs.min(n) {
            let tx = tx.clone();
            let (next, stop, delivered, advanced, work) =
                (&next, &stop, &delivered, &advanced, &work);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    return;
                }
                {
                    let mut d = delivered.lock().unwrap_or_else(|e| e.into_inner());
                    while i >= *d + window && !stop.load(Ordering::SeqCst) {
                        d = advanced.wait(d).unwrap_or_else(|e| e.into_inner());
                    }
                }
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                if tx.send((i, work(i))).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        let mut pending = BTreeMap::new();
        let mut want = 0;
        let mut going = true;
        for (i, r) in rx.iter() {
            if !going {
                continue;
            }
            pending.insert(i, r);
            while let Some(r) = pending.remove(&want) {
                going = deliver(want, r);
                want += 1;
                *delivered.lock().unwrap_or_else(|e| e.into_inner()) = want;
                advanced.notify_all();
                if !going {
                    stop.store(true, Ordering::SeqCst);
                    advanced.notify_all();
                    pending.clear();
                    break;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivers_in_order_whatever_the_jobs() {
        for jobs in [1, 2, 3, 8] {
            let mut got = Vec::new();
            run_ordered(
                50,
                jobs,
                |i| {
                    std::thread::sleep(std::time::Duration::from_micros((50 - i as u64) * 20));
                    i * 10
                },
                |i, r| {
                    got.push((i, r));
                    true
                },
            );
            assert_eq!(
                got,
                (0..50).map(|i| (i, i * 10)).collect::<Vec<_>>(),
                "jobs {jobs}"
            );
        }
    }

    #[test]
    fn stops_when_told() {
        let started = AtomicUsize::new(0);
        let mut got = 0;
        run_ordered(
            1000,
            2,
            |_| started.fetch_add(1, Ordering::SeqCst),
            |_, _| {
                got += 1;
                got < 3
            },
        );
        assert_eq!(got, 3);
        assert!(
            started.load(Ordering::SeqCst) <= 3 + 4 + 2,
            "bounded window"
        );
    }
}
