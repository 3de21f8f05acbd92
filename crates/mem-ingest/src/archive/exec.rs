//! Running tasks on `--jobs` threads and handing their results over in task
//! order, with a bounded number of results in flight.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Tasks that may be started ahead of the next one to deliver: enough that
/// workers do not wait on a busy delivery thread when tasks are small (many
/// small session files), nor while one large task (a whole Codex rollout,
/// an 8 MiB part) holds the delivery up. The weight budget bounds what the
/// tasks ahead hold; this bounds only their number (files of no bytes).
/// At 64, the workers of a Claude Code archive's run waited behind large
/// files: stretches of 1.1-1.5 busy cores out of 2.
pub(super) const WINDOW: usize = 1024;

/// The delivery thread is woken when this many results are ready, the
/// next one to deliver among them, or results of this many bytes of
/// input: not for every result. Woken for each of thousands of small
/// files, it took a core from a worker as often, and the switches were a
/// few percent of a run.
const BATCH: usize = 16;
const BATCH_BYTES: u64 = 4 << 20;

/// What the workers and the delivery thread share, under one lock.
struct Shared<T> {
    /// Results not yet delivered, by task.
    ready: BTreeMap<usize, T>,
    /// A result of part of a task, handed over before its end (see
    /// [`run_ordered`]), one a task at most: delivered before the task's
    /// others.
    partial: BTreeMap<usize, T>,
    /// Weight of `ready`.
    ready_weight: u64,
    /// The next task to deliver.
    delivered: usize,
    /// Weight of the tasks started and not yet delivered.
    ahead: u64,
    /// Workers waiting for a delivery to start their next task.
    blocked: usize,
    /// Workers that have ended (returned or panicked).
    ended: usize,
    /// The delivery thread waits for results.
    sleeping: bool,
    /// Delivery stopped: no task starts.
    stop: bool,
}

impl<T> Shared<T> {
    /// Whether the sleeping delivery thread should be woken: it can
    /// deliver, and the batch is full or a worker waits for it.
    fn worth_waking(&self) -> bool {
        self.sleeping
            && (self.partial.contains_key(&self.delivered)
                || self.ready.contains_key(&self.delivered)
                    && (self.ready.len() >= BATCH
                        || self.ready_weight >= BATCH_BYTES
                        || self.blocked > 0))
    }
}

impl<T> Shared<T> {
    /// Wakes the sleeping delivery thread when it is worth waking.
    fn wake(&mut self, filled: &Condvar) {
        if self.worth_waking() {
            self.sleeping = false;
            filled.notify_one();
        }
    }
}

/// Waits, as a worker blocked on delivery, while `blocked` says so and the
/// run goes on.
fn wait_while<'g, T>(
    mut g: MutexGuard<'g, Shared<T>>,
    filled: &Condvar,
    advanced: &Condvar,
    blocked: impl Fn(&Shared<T>) -> bool,
) -> MutexGuard<'g, Shared<T>> {
    while blocked(&g) && !g.stop {
        g.blocked += 1;
        g.wake(filled);
        g = advanced.wait(g).unwrap_or_else(|e| e.into_inner());
        g.blocked -= 1;
    }
    g
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts a worker as ended when it returns or unwinds, and wakes the
/// delivery thread, which waits for every worker before it ends. A worker
/// that unwinds stops the run: its result never comes, so the delivery
/// thread would never again free room for a worker waiting for it.
struct Ending<'s, T> {
    shared: &'s Mutex<Shared<T>>,
    filled: &'s Condvar,
    advanced: &'s Condvar,
}

impl<T> Drop for Ending<'_, T> {
    fn drop(&mut self) {
        let mut g = lock(self.shared);
        g.ended += 1;
        if std::thread::panicking() {
            g.stop = true;
            self.advanced.notify_all();
        }
        g.sleeping = false;
        self.filled.notify_one();
    }
}

/// Stops the run when the delivery thread leaves, by returning or by a
/// panic in `deliver`: no worker waits for room that no delivery will
/// free (the scope joins them before it returns or resumes the panic).
struct Stopping<'s, T> {
    shared: &'s Mutex<Shared<T>>,
    advanced: &'s Condvar,
}

impl<T> Drop for Stopping<'_, T> {
    fn drop(&mut self) {
        let mut g = lock(self.shared);
        g.stop = true;
        self.advanced.notify_all();
    }
}

/// Runs `work` on every task index `0..n` and `deliver` with its result,
/// one after the other on the calling thread, until `deliver` returns
/// false: what [`run_ordered`] does with one job, less the hand-over of
/// each result to the delivering thread (its wake-ups, and the caches of
/// another core). For runs whose delivery is light (`stats`): one that
/// writes an output overlaps the writing with the next task's work on a
/// thread of its own.
pub fn run_inline<T>(
    n: usize,
    work: impl Fn(usize, &mut dyn FnMut(T) -> bool) -> T,
    mut deliver: impl FnMut(usize, T) -> bool,
) {
    for i in 0..n {
        let mut going = true;
        let r = work(i, &mut |part| {
            going = going && deliver(i, part);
            going
        });
        if !going || !deliver(i, r) {
            return;
        }
    }
}

/// Runs `work` on every task index `0..n` on `jobs` threads, and calls
/// `deliver` with each result in index order on the calling thread. A task
/// starts only while fewer than `jobs + 1024` tasks are ahead of the next one
/// to deliver, and the tasks ahead weigh (`weight`, in bytes) no more than
/// `budget`, so memory stays bounded whatever the archive. When `deliver`
/// returns false, the remaining tasks are not started.
///
/// A task may hand over results of its parts before it ends (`work`'s
/// second argument: a long stream, whose records would otherwise all wait
/// for its end): each is delivered before the task's later ones, once the
/// tasks before it are delivered; the task waits while its last one is
/// not (one at most waits), and learns whether to go on.
///
/// The worker that takes task `i` also runs the `span(i) - 1` tasks after
/// it, one after the other (`span` is read only for the first task of a
/// span, and 0 counts as 1): the parts of a file whose lines each part
/// numbers from where the part before it ended, with no count of their
/// newlines first ([`super::task::PartLines`]).
/// Each task of a span starts under the same bounds as any other, and
/// its result is delivered once the tasks before it are. The spans that
/// start at the tasks of `early` are taken first, in that order (a large
/// file near the run's end, read by one worker from the start while the
/// others read the files before it); the others in task order. An early
/// span's tasks wait for room as any other's: one that starts more than
/// the window ahead of the next to deliver waits for it.
#[allow(clippy::too_many_arguments)]
pub fn run_ordered<T: Send>(
    n: usize,
    jobs: usize,
    span: impl Fn(usize) -> usize + Sync,
    early: &[usize],
    weight: impl Fn(usize) -> u64 + Sync,
    budget: u64,
    work: impl Fn(usize, &mut dyn FnMut(T) -> bool) -> T + Sync,
    mut deliver: impl FnMut(usize, T) -> bool,
) {
    let jobs = jobs.max(1);
    let workers = jobs.min(n);
    let window = jobs + WINDOW;
    let next = AtomicUsize::new(0);
    let taken_early = AtomicUsize::new(0);
    let mut is_early = vec![false; n];
    for &i in early.iter().filter(|&&i| i < n) {
        is_early[i] = true;
    }
    // The tasks of the next span, taken whole: an early one while any is
    // left, else the next in order that is not early (taken before it);
    // none when every task is taken.
    let claim = || -> Option<std::ops::Range<usize>> {
        let end_of = |i: usize| (i + span(i).max(1)).min(n);
        if let Some(&i) = early.get(taken_early.fetch_add(1, Ordering::SeqCst)) {
            if i < n {
                return Some(i..end_of(i));
            }
        }
        let mut i = next.load(Ordering::SeqCst);
        while i < n {
            let end = end_of(i);
            match next.compare_exchange_weak(i, end, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) if is_early[i] => i = end,
                Ok(_) => return Some(i..end),
                Err(now) => i = now,
            }
        }
        None
    };
    let shared = Mutex::new(Shared {
        ready: BTreeMap::new(),
        partial: BTreeMap::new(),
        ready_weight: 0,
        delivered: 0,
        ahead: 0,
        blocked: 0,
        ended: 0,
        sleeping: false,
        stop: false,
    });
    // The delivery thread waits on `filled`, workers on `advanced`.
    let (filled, advanced) = (Condvar::new(), Condvar::new());
    std::thread::scope(|s| {
        // Before the first spawn: a spawn that fails unwinds too.
        let _stopping = Stopping {
            shared: &shared,
            advanced: &advanced,
        };
        for _ in 0..workers {
            let (shared, filled, advanced, work, weight, claim) =
                (&shared, &filled, &advanced, &work, &weight, &claim);
            s.spawn(move || {
                let _ending = Ending {
                    shared,
                    filled,
                    advanced,
                };
                let mut taken = 0..0;
                loop {
                    let Some(i) = taken.next().or_else(|| {
                        taken = claim()?;
                        taken.next()
                    }) else {
                        return;
                    };
                    let w = weight(i);
                    {
                        // The next task to deliver always starts.
                        let mut g = wait_while(lock(shared), filled, advanced, |g| {
                            i > g.delivered && (i >= g.delivered + window || g.ahead + w > budget)
                        });
                        if g.stop {
                            return;
                        }
                        g.ahead += w;
                    }
                    let r = work(i, &mut |part| {
                        // Its last part waits: so does the task.
                        let mut g = wait_while(lock(shared), filled, advanced, |g| {
                            g.partial.contains_key(&i)
                        });
                        if g.stop {
                            return false;
                        }
                        g.partial.insert(i, part);
                        g.wake(filled);
                        true
                    });
                    let mut g = lock(shared);
                    if g.stop {
                        return;
                    }
                    g.ready.insert(i, r);
                    g.ready_weight += w;
                    g.wake(filled);
                }
            });
        }
        let mut batch = Vec::new();
        loop {
            let mut g = lock(&shared);
            if g.stop {
                // A worker panicked: the scope resumes its panic.
                return;
            }
            // A part of the next task's result first, delivered without
            // the lock; the task it waits for is told.
            let first = g.delivered;
            if let Some(part) = g.partial.remove(&first) {
                advanced.notify_all();
                drop(g);
                if !deliver(first, part) {
                    let mut g = lock(&shared);
                    g.stop = true;
                    g.ready.clear();
                    g.partial.clear();
                    advanced.notify_all();
                    return;
                }
                continue;
            }
            // The results ready in order, delivered without the lock; not
            // past a task whose part waits (it goes before its end).
            while !g.partial.contains_key(&(first + batch.len())) {
                let Some(r) = g.ready.remove(&(first + batch.len())) else {
                    break;
                };
                g.ready_weight -= weight(first + batch.len());
                batch.push(r);
            }
            if batch.is_empty() {
                if g.ended == workers {
                    return;
                }
                g.sleeping = true;
                drop(filled.wait(g).unwrap_or_else(|e| e.into_inner()));
                continue;
            }
            drop(g);
            for (k, r) in batch.drain(..).enumerate() {
                let i = first + k;
                let going = deliver(i, r);
                // Each delivery frees its room at once: a worker waiting for
                // room does not wait for the rest of the batch.
                let w = weight(i);
                let mut g = lock(&shared);
                g.delivered = i + 1;
                g.ahead -= w;
                if !going {
                    // Workers end after the task they are in.
                    g.stop = true;
                    g.ready.clear();
                    g.partial.clear();
                    advanced.notify_all();
                    return;
                }
                if g.blocked > 0 {
                    advanced.notify_all();
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
                &[],
                |_| 1,
                10,
                |i, _| {
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

    /// Asserts that the tasks of `span` ran on the thread that ran its
    /// first, in order, and nothing else between them (`ran`: each task
    /// and its thread, in the order they started).
    fn assert_one_after_the_other(
        ran: &[(usize, std::thread::ThreadId)],
        span: std::ops::Range<usize>,
        why: &str,
    ) {
        let (_, thread) = ran.iter().find(|&&(i, _)| i == span.start).unwrap();
        let on_it: Vec<usize> = ran
            .iter()
            .filter(|(_, t)| t == thread)
            .map(|&(i, _)| i)
            .collect();
        let at = on_it.iter().position(|&i| i == span.start).unwrap();
        assert_eq!(
            on_it[at..at + span.len()],
            span.collect::<Vec<_>>(),
            "{why}: {on_it:?}"
        );
    }

    /// The tasks of a span run one after the other on the worker that took
    /// its first, with no task of another between them, while the other
    /// workers go on past it (the span's first task sleeps: without spans
    /// they would take the tasks after it); every result arrives once, in
    /// order, under a budget that holds fewer bytes than a span.
    #[test]
    fn a_span_runs_on_one_worker_while_the_others_go_on() {
        for jobs in [2, 3, 8] {
            let span = |i: usize| if i.is_multiple_of(10) { 5 } else { 1 };
            let seen = Mutex::new(Vec::new());
            let mut got = Vec::new();
            run_ordered(
                100,
                jobs,
                span,
                &[],
                |_| 1 << 20,
                3 << 20,
                |i, _| {
                    if i.is_multiple_of(10) {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                    lock(&seen).push((i, std::thread::current().id()));
                    i * 2
                },
                |i, r| {
                    got.push((i, r));
                    true
                },
            );
            assert_eq!(got, (0..100).map(|i| (i, i * 2)).collect::<Vec<_>>());
            let seen = seen.into_inner().unwrap();
            assert_eq!(seen.len(), 100, "jobs {jobs}");
            for first in (0..100).step_by(10) {
                assert_one_after_the_other(&seen, first..first + 5, &format!("jobs {jobs}"));
            }
            // The other workers took tasks too.
            let threads: std::collections::HashSet<_> = seen.iter().map(|(_, t)| t).collect();
            assert!(threads.len() > 1, "jobs {jobs}: one thread ran all");
        }
    }

    /// A span taken early starts before the tasks before it (among the
    /// first `jobs` tasks started), runs on one worker, part after part,
    /// and every result still arrives once, in order: under a budget that
    /// its own undelivered tasks nearly fill (they wait for room, and the
    /// tasks before them, the next to deliver, always start), and under
    /// one that holds it all.
    #[test]
    fn an_early_span_starts_first_and_arrives_in_its_place() {
        for (jobs, budget) in [(2, 3 << 20), (2, 64 << 20), (3, 3 << 20), (4, 64 << 20)] {
            let span = |i: usize| if i == 10 || i == 90 { 5 } else { 1 };
            let started = Mutex::new(Vec::new());
            let mut got = Vec::new();
            run_ordered(
                100,
                jobs,
                span,
                &[90],
                |_| 1 << 20,
                budget,
                |i, _| {
                    lock(&started).push((i, std::thread::current().id()));
                    if i.is_multiple_of(7) {
                        std::thread::sleep(std::time::Duration::from_micros(300));
                    }
                    i + 1
                },
                |i, r| {
                    got.push((i, r));
                    true
                },
            );
            let why = format!("jobs {jobs}, budget {budget}");
            assert_eq!(
                got,
                (0..100).map(|i| (i, i + 1)).collect::<Vec<_>>(),
                "{why}"
            );
            let started = started.into_inner().unwrap();
            assert_eq!(started.len(), 100, "{why}");
            let at = started.iter().position(|&(i, _)| i == 90).unwrap();
            assert!(at < jobs, "{why}: task 90 started {at}th");
            for first in [10, 90] {
                assert_one_after_the_other(&started, first..first + 5, &why);
            }
        }
    }

    /// Thousands of tasks of uneven weights under a small budget, on 1 to
    /// 4 threads: each delivered once, in order (the batched wake-ups of
    /// the delivery thread never leave it asleep with work it can do).
    #[test]
    fn uneven_tasks_under_a_small_budget_all_arrive_in_order() {
        for jobs in 1..=4 {
            let weight = |i: usize| ((i * 7919) % 13) as u64 * (1 << 20);
            let mut got = Vec::new();
            run_ordered(
                3000,
                jobs,
                |_| 1,
                &[],
                weight,
                6 << 20,
                |i, _| {
                    if i % 97 == 0 {
                        std::thread::sleep(std::time::Duration::from_micros(300));
                    }
                    i
                },
                |i, r| {
                    assert_eq!(i, r);
                    got.push(i);
                    true
                },
            );
            assert_eq!(got, (0..3000).collect::<Vec<_>>(), "jobs {jobs}");
        }
    }

    /// A task that panics ends the run with its panic, not a run that
    /// waits for its result for ever.
    #[test]
    fn a_panicking_task_ends_the_run() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(|| {
                run_ordered(
                    100,
                    2,
                    |_| 1,
                    &[],
                    |_| 1,
                    u64::MAX,
                    |i, _| {
                        assert_ne!(i, 40, "task 40 fails");
                        i
                    },
                    |_, _| true,
                )
            });
            let _ = tx.send(r.is_err());
        });
        let panicked = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the run ended");
        assert!(panicked);
    }

    /// Inline: every result in order on the calling thread, and no task
    /// started after the delivery that says stop.
    #[test]
    fn inline_delivers_in_order_and_stops_when_told() {
        let caller = std::thread::current().id();
        let started = std::cell::Cell::new(0);
        let mut got = Vec::new();
        run_inline(
            10,
            |i, _| {
                assert_eq!(std::thread::current().id(), caller);
                started.set(started.get() + 1);
                i * 3
            },
            |i, r| {
                got.push((i, r));
                i < 6
            },
        );
        assert_eq!(got, (0..7).map(|i| (i, i * 3)).collect::<Vec<_>>());
        assert_eq!(started.get(), 7);
    }

    #[test]
    fn stops_when_told() {
        let started = AtomicUsize::new(0);
        let mut got = 0;
        run_ordered(
            1000,
            2,
            |_| 1,
            &[],
            |_| 1,
            u64::MAX,
            |_, _| started.fetch_add(1, Ordering::SeqCst),
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
            |_| 1,
            &[],
            |_| 10,
            30,
            |_, _| {
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

    /// Runs `f` on a thread of its own; `None` when it did not end within
    /// `secs` (the run hangs), else whether it panicked.
    fn ends_within<F: FnOnce() + Send + 'static>(secs: u64, f: F) -> Option<bool> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = tx.send(r.is_err());
        });
        rx.recv_timeout(std::time::Duration::from_secs(secs)).ok()
    }

    /// Task `fails` of `n` panics while the other worker waits for room:
    /// the run must end with the panic, not wait for ever.
    fn panicking_task_ends_the_run(n: usize, budget: u64, fails: usize) {
        let r = ends_within(10, move || {
            run_ordered(
                n,
                2,
                |_| 1,
                &[],
                |_| 1,
                budget,
                |i, _| {
                    assert_ne!(i, fails, "task {fails} fails");
                    i
                },
                |_, _| true,
            )
        });
        assert_eq!(r, Some(true), "None: the run hung");
    }

    #[test]
    fn a_panicking_task_ends_the_run_while_a_worker_waits_for_budget() {
        panicking_task_ends_the_run(100, 10, 5);
    }

    #[test]
    fn a_panicking_task_ends_the_run_while_a_worker_waits_for_the_window() {
        panicking_task_ends_the_run(3 * WINDOW, u64::MAX, 40);
    }

    /// The delivery callback panics: the run must end with the panic.
    #[test]
    fn a_panicking_delivery_ends_the_run() {
        let r = ends_within(10, || {
            run_ordered(
                3 * WINDOW,
                2,
                |_| 1,
                &[],
                |_| 1,
                u64::MAX,
                |i, _| i,
                |i, _| {
                    assert_ne!(i, 3, "delivery 3 fails");
                    true
                },
            )
        });
        assert_eq!(r, Some(true), "None: the run hung");
    }

    /// Edge cases that must neither hang nor lose a result: no tasks, more
    /// jobs than tasks, tasks heavier than the whole budget, one job
    /// behind the window, a stop at the first delivery with workers
    /// waiting for room.
    #[test]
    fn edge_cases_end_with_every_result() {
        let r = ends_within(30, || {
            let collect = |n: usize, jobs: usize, w: u64, budget: u64| {
                let mut got = Vec::new();
                run_ordered(
                    n,
                    jobs,
                    |_| 1,
                    &[],
                    |_| w,
                    budget,
                    |i, _| i,
                    |i, r| {
                        assert_eq!(i, r);
                        got.push(i);
                        true
                    },
                );
                assert_eq!(got, (0..n).collect::<Vec<_>>(), "{n} {jobs} {w} {budget}");
            };
            collect(0, 4, 1, 10);
            collect(3, 8, 1, 10);
            collect(1, 1, 1, 10);
            collect(200, 3, 100, 10);
            collect(200, 1, 100, 10);
            collect(3 * WINDOW, 1, 0, 0);
            collect(3 * WINDOW, 2, 0, 0);
            for jobs in [1, 2, 4] {
                let mut got = 0;
                run_ordered(
                    500,
                    jobs,
                    |_| 1,
                    &[],
                    |_| 1,
                    3,
                    |i, _| i,
                    |_, _| {
                        got += 1;
                        false
                    },
                );
                assert_eq!(got, 1);
            }
        });
        assert_eq!(r, Some(false), "None: a run hung");
    }

    /// Tasks that hand over parts of their results before their end: every
    /// part delivered in order, before its task's end and after the tasks
    /// before it, whatever the jobs; a task waits while its last part is
    /// not delivered; a stop at a part ends the run.
    #[test]
    fn parts_of_a_task_arrive_in_order_before_its_end() {
        let r = ends_within(30, || {
            for jobs in [1, 2, 3] {
                let mut got = Vec::new();
                run_ordered(
                    40,
                    jobs,
                    |_| 1,
                    &[],
                    |_| 1,
                    4,
                    |i, part| {
                        // Tasks 3, 4 and 17 in five parts, then their end.
                        if matches!(i, 3 | 4 | 17) {
                            for k in 0..5 {
                                assert!(part((i, k)));
                            }
                        }
                        if i % 7 == 0 {
                            std::thread::sleep(std::time::Duration::from_micros(200));
                        }
                        (i, 99)
                    },
                    |i, r| {
                        assert_eq!(i, r.0);
                        got.push(r);
                        true
                    },
                );
                let mut want = Vec::new();
                for i in 0..40 {
                    if matches!(i, 3 | 4 | 17) {
                        want.extend((0..5).map(|k| (i, k)));
                    }
                    want.push((i, 99));
                }
                assert_eq!(got, want, "jobs {jobs}");
                let mut inline = Vec::new();
                run_inline(
                    6,
                    |i, part| {
                        if i == 2 {
                            assert!(part((i, 0)));
                            assert!(!part((i, 1)), "stopped at its second part");
                        }
                        (i, 99)
                    },
                    |i, r| {
                        inline.push(r);
                        !(i == 2 && r.1 == 1)
                    },
                );
                assert_eq!(inline, [(0, 99), (1, 99), (2, 0), (2, 1)]);
            }
            // A stop at a part: nothing after it is delivered.
            let mut got = Vec::new();
            run_ordered(
                20,
                2,
                |_| 1,
                &[],
                |_| 1,
                4,
                |i, part| {
                    if i == 5 {
                        for k in 0..3 {
                            if !part((i, k)) {
                                break;
                            }
                        }
                    }
                    (i, 99)
                },
                |_, r| {
                    got.push(r);
                    r != (5, 1)
                },
            );
            assert_eq!(
                got,
                [(0, 99), (1, 99), (2, 99), (3, 99), (4, 99), (5, 0), (5, 1)]
            );
        });
        assert_eq!(r, Some(false), "None: a run hung");
    }
}
