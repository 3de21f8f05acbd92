//! The parsing crate's Unix calls, in one place: a path's bytes as the
//! system holds them, and reads at an offset. Each is a thin wrapper; a
//! port to another system changes this file alone.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileExt;

/// The bytes of `s`, as the system holds them.
pub fn os_bytes(s: &OsStr) -> &[u8] {
    s.as_bytes()
}

/// The name whose bytes are `b`.
pub fn os_str(b: &[u8]) -> &OsStr {
    OsStr::from_bytes(b)
}

/// The name whose bytes are `v`.
pub fn os_string(v: Vec<u8>) -> OsString {
    OsString::from_vec(v)
}

/// One read of `file` at offset `at` (`pread`): the count read.
///
/// # Errors
/// An I/O error of the file.
pub fn read_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    file.read_at(buf, at)
}

/// Reads all of `buf` from `file` at offset `at`.
///
/// # Errors
/// An I/O error of the file, or its end before `buf` is full.
pub fn read_exact_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<()> {
    file.read_exact_at(buf, at)
}

/// A thread kept on some of its CPUs ([`keep_on`]) until this is
/// dropped: then it may run again on every CPU it could run on before.
#[must_use = "the thread is kept only until this is dropped"]
pub struct Kept {
    /// The thread kept, and the CPUs it could run on before.
    #[cfg(target_os = "linux")]
    kept: Option<(libc::pid_t, libc::cpu_set_t)>,
}

impl Kept {
    /// Whether the thread is kept (else it runs where it could before).
    pub fn is_kept(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.kept.is_some();
        #[cfg(not(target_os = "linux"))]
        return false;
    }
}

/// The CPU the calling thread runs on now, if the system says.
#[allow(unsafe_code)]
pub fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: no arguments; -1 on failure.
        let c = unsafe { libc::sched_getcpu() };
        usize::try_from(c).ok()
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// The CPUs the calling thread may run on, in order (none where the
/// system does not say).
pub fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    return affinity().map_or_else(Vec::new, |(_, set)| cpus_of(&set));
    #[cfg(not(target_os = "linux"))]
    Vec::new()
}

/// The calling thread's id and the CPUs it may run on.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn affinity() -> Option<(libc::pid_t, libc::cpu_set_t)> {
    // SAFETY: gettid takes nothing; a zeroed cpu_set_t is the empty set,
    // and sched_getaffinity writes at most its size into it.
    unsafe {
        let tid = libc::gettid();
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0)
            .then_some((tid, set))
    }
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn cpus_of(set: &libc::cpu_set_t) -> Vec<usize> {
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, set) })
        .collect()
}

/// Keeps the calling thread, until the [`Kept`] is dropped, on `cpu`
/// alone (`apart: false`), or off it (`apart: true`: on every other CPU
/// it may run on, the system choosing among them). Nothing is done (a
/// `Kept` that keeps nothing) where the thread may run on one CPU only,
/// where `cpu` is not among them, or off Linux.
///
/// What for (OpenCode's reading thread and the thread counting what it
/// reads): two threads handing batches to each other wake each other at
/// every batch, and a scheduler may keep such a pair on one CPU while
/// another idles: one that packs threads onto few virtual CPUs until they
/// have run for a while did, for the first 20 to 40 ms of most runs (a
/// fifth of a read of 100 MB at half speed). Kept apart for that while,
/// they start on two.
#[allow(unsafe_code)]
pub fn keep_on(cpu: usize, apart: bool) -> Kept {
    #[cfg(target_os = "linux")]
    {
        let Some((tid, before)) = affinity() else {
            return Kept { kept: None };
        };
        let may = cpus_of(&before);
        if !may.contains(&cpu) || may.len() < 2 {
            return Kept { kept: None };
        }
        // SAFETY: a zeroed cpu_set_t is the empty set; every CPU set is
        // below CPU_SETSIZE (one of `before`'s); sched_setaffinity reads
        // the set's size from it, for the calling thread (its id).
        let set = unsafe {
            let mut on: libc::cpu_set_t = std::mem::zeroed();
            for &c in &may {
                if (c == cpu) != apart {
                    libc::CPU_SET(c, &mut on);
                }
            }
            libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &on)
        };
        Kept {
            kept: (set == 0).then_some((tid, before)),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (cpu, apart);
        Kept {}
    }
}

impl Drop for Kept {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some((tid, before)) = self.kept.take() {
            // SAFETY: as in `keep_on`: the set saved there, for the
            // thread kept (by its id: dropped on another thread, the
            // `Kept` still frees the thread it kept).
            unsafe {
                libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &before);
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// On a thread of its own (its CPUs changed here, none other's).
    fn on_a_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().expect("no panic")
    }

    #[test]
    fn a_kept_thread_runs_on_its_cpu_or_off_it_until_the_kept_is_dropped() {
        on_a_thread(|| {
            let may = allowed_cpus();
            assert!(!may.is_empty());
            let last = *may.last().expect("one");
            let kept = keep_on(last, true);
            if may.len() == 1 {
                // One CPU: nothing to keep apart from.
                assert!(!kept.is_kept());
                assert_eq!(allowed_cpus(), may);
                return;
            }
            // Off the last: on every other.
            assert!(kept.is_kept());
            assert_eq!(allowed_cpus(), may[..may.len() - 1]);
            assert_ne!(current_cpu(), Some(last));
            drop(kept);
            assert_eq!(allowed_cpus(), may);
            // On the one named.
            let kept = keep_on(last, false);
            assert!(kept.is_kept());
            assert_eq!(allowed_cpus(), vec![last]);
            assert_eq!(current_cpu(), Some(last));
            drop(kept);
            assert_eq!(allowed_cpus(), may);
        });
    }

    #[test]
    fn a_cpu_the_thread_may_not_run_on_keeps_it_nowhere() {
        on_a_thread(|| {
            let may = allowed_cpus();
            let not = (0..).find(|c| !may.contains(c)).expect("a CPU not allowed");
            let kept = keep_on(not, false);
            assert!(!kept.is_kept());
            assert_eq!(allowed_cpus(), may);
            let kept = keep_on(not, true);
            assert!(!kept.is_kept());
            assert_eq!(allowed_cpus(), may);
        });
    }

    #[test]
    fn a_kept_dropped_on_another_thread_frees_the_thread_it_kept() {
        on_a_thread(|| {
            let may = allowed_cpus();
            let kept = keep_on(may[0], false);
            if may.len() > 1 {
                assert_eq!(allowed_cpus(), vec![may[0]]);
            }
            // Dropped by another thread: this one may run everywhere again,
            // and the other's CPUs are its own.
            let theirs = std::thread::spawn(move || {
                let theirs = allowed_cpus();
                drop(kept);
                (theirs, allowed_cpus())
            })
            .join()
            .expect("no panic");
            assert_eq!(theirs.0, theirs.1);
            assert_eq!(allowed_cpus(), may);
        });
    }
}
