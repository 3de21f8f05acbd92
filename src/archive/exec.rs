//! Running tasks on `--jobs` threads and handing their results over in task
//! order, with a bounded number of results in flight.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};

/// Tasks that may be started ahead of the next one to deliver: enough that
/// workers do not wait on a busy delivery thread when tasks are small (many
/// small session files), nor while one large task (a whole Codex rollout,
/// an 8 MiB part) holds the delivery up. The weight budget bounds what the
/// tasks ahead hold; this bounds only their number (files of no bytes).
/// At 64, the workers of a Claude Code archive's run waited behind large
/// files: stretches of 1.1-1.5 busy cores out of 2.
const WINDOW: usize = 1024;

/// Runs `work` on every task index `0..n` on `jobs` threads, and calls
/// `deliver` with each result in index order on the calling thread. A task
/// starts only while fewer than `jobs + 1024` tasks are ahead of the next one
/// to deliver, and the tasks ahead weigh (`weight`, in bytes) no more than
/// `budget`, so memory stays bounded whatever the archive. When `deliver`
/// returns false, the remaining tasks are not started.
pub fn run_ordered<T: Send>(
    n: usize,
    jobs: usize,
    weight: impl Fn(usize) -> u64 + Sync,
    budget: u64,
    work: impl Fn(usize) -> T + Sync,
    mut deliver: impl FnMut(usize, T) -> bool,
) {
    let jobs = jobs.max(1);
    let window = jobs + WINDOW;
    // Weight of the tasks started and not yet delivered.
    let ahead = std::sync::atomic::AtomicU64::new(0);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // Index of the next result to deliver, and its condition.
    let delivered = Mutex::new(0usize);
    let advanced = Condvar::new();
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<(usize, T)>();
        for _ in 0..jobs.min(n) {
            let tx = tx.clone();
            let (next, stop, delivered, advanced, work, weight, ahead) =
                (&next, &stop, &delivered, &advanced, &work, &weight, &ahead);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    return;
                }
                {
                    let w = weight(i);
                    let mut d = delivered.lock().unwrap_or_else(|e| e.into_inner());
                    // The next task to deliver always starts.
                    while i > *d
                        && (i >= *d + window || ahead.load(Ordering::SeqCst) + w > budget)
                        && !stop.load(Ordering::SeqCst)
                    {
                        d = advanced.wait(d).unwrap_or_else(|e| e.into_inner());
                    }
                    ahead.fetch_add(w, Ordering::SeqCst);
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
                ahead.fetch_sub(weight(want), Ordering::SeqCst);
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
                |_| 1,
                10,
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
            |_| 1,
            u64::MAX,
            |_| started.fetch_add(1, Ordering::SeqCst),
            |_, _| {
                got += 1;
                got < 3
            },
        );
        assert_eq!(got, 3);
        assert!(
            started.load(Ordering::SeqCst) <= 3 + 2 + WINDOW + 2,
            "bounded window"
        );
    }

    #[test]
    fn budget_bounds_the_weight_ahead() {
        let started = AtomicUsize::new(0);
        let delivered = AtomicUsize::new(0);
        let most_ahead = AtomicUsize::new(0);
        run_ordered(
            40,
            4,
            |_| 10,
            30,
            |_| {
                let ahead =
                    started.fetch_add(1, Ordering::SeqCst) + 1 - delivered.load(Ordering::SeqCst);
                most_ahead.fetch_max(ahead, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(2));
            },
            |_, ()| {
                delivered.fetch_add(1, Ordering::SeqCst);
                true
            },
        );
        assert_eq!(delivered.load(Ordering::SeqCst), 40);
        // Three tasks of weight 10 fit in 30; a fourth only when it is the
        // next to deliver.
        assert!(
            most_ahead.load(Ordering::SeqCst) <= 4,
            "{}",
            most_ahead.load(Ordering::SeqCst)
        );
    }
}
