//! No heap allocation per record in steady state (issue 4): a counting
//! global allocator shows that, after one warm-up pass over a generated
//! corpus, reading the same entries again through `PiSessionSource` over
//! memory costs fewer than a small fixed number of allocations per 10,000
//! records.
//!
//! The source reads the corpus once, then its entries (without the header)
//! several more times, all in one stream: the first pass grows every buffer
//! (line buffer, arena, simd-json's buffers and tape, the report's model
//! list) to its largest size; later passes are the steady state.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use mem_ingest::{PiSessionSource, RecordSource};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator, counting calls.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations (alloc, alloc_zeroed and realloc calls) allowed per 10,000
/// steady-state records.
const MAX_PER_10K: u64 = 10;

#[test]
fn steady_state_allocates_nothing_per_record() {
    let dir = std::env::temp_dir().join(format!("mem-ingest-alloc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("corpus.jsonl");
    // 6 MB: the debug build of simd-json is slow; the generator's first
    // image comes after 2-12 MB, so this corpus may or may not hold one.
    let status = gen_corpus::GenCorpus::new()
        .args(["--seed", "7", "--size-mb", "6"])
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
    let once = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    let header_end = once.iter().position(|&b| b == b'\n').unwrap() + 1;
    let body = &once[header_end..];
    const PASSES: usize = 20;
    let mut data = Vec::with_capacity(once.len() + body.len() * PASSES);
    data.extend_from_slice(&once);
    for _ in 0..PASSES {
        data.extend_from_slice(body);
    }

    let mut src = PiSessionSource::from_reader(&data[..], "corpus.jsonl").unwrap();
    // Warm-up: the first pass (every distinct line shape and size once).
    let warm_end = once.len() as u64;
    let mut warm = 0u64;
    while src.report().bytes < warm_end {
        assert!(src.next_record().unwrap().is_some());
        warm += 1;
    }
    let (a0, b0) = (
        ALLOCS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    let mut steady = 0u64;
    while let Some(rec) = src.next_record().unwrap() {
        std::hint::black_box(&rec);
        steady += 1;
    }
    let (allocs, bytes) = (
        ALLOCS.load(Ordering::Relaxed) - a0,
        BYTES.load(Ordering::Relaxed) - b0,
    );
    assert_eq!(src.report().skipped, 0);
    assert!(steady >= 10_000, "too few steady-state records: {steady}");
    let per_10k = allocs * 10_000 / steady;
    eprintln!(
        "warm-up {warm} records; steady state {steady} records: {allocs} allocations \
         ({bytes} bytes), {per_10k} per 10,000 records"
    );
    assert!(
        per_10k < MAX_PER_10K,
        "{allocs} allocations ({bytes} bytes) for {steady} steady-state records: \
         {per_10k} per 10,000, limit {MAX_PER_10K}"
    );
}
