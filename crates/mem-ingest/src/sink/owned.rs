//! Sinks without an output of their own: [`Discard`] (counts only) and
//! [`ForEach`] (owned records to a closure).

use super::seam::{Encoder, Place, Sink};
use crate::error::Error;
use crate::record::{OwnedRecord, Record};

/// No output: counts only (`stats`). Records are never built.
#[derive(Debug, Default, Clone, Copy)]
pub struct Discard;

/// The encoder of [`Discard`]: wants no records.
#[derive(Debug, Default, Clone, Copy)]
pub struct DiscardEncoder;

impl Encoder for DiscardEncoder {
    type Batch = ();

    fn batch(&self, _bytes: u64) {}

    fn encode(&self, _batch: &mut (), _record: &Record<'_>, _place: Place<'_>) {}

    fn wants_records(&self) -> bool {
        false
    }
}

impl Sink for Discard {
    type Encoder = DiscardEncoder;

    fn encoder(&self) -> DiscardEncoder {
        DiscardEncoder
    }

    fn write(&mut self, _batch: (), _dropped: &[usize]) -> Result<bool, Error> {
        Ok(true)
    }
}

/// A sink in one line: owned records, in archive order, to a closure.
/// Records are copied on the workers; the closure runs on one thread.
///
/// ```
/// use mem_ingest::archive::Archive;
/// use mem_ingest::sink::ForEach;
///
/// let mut keys = Vec::new();
/// Archive::builder()
///     .path("fixtures/hand-built.jsonl")
///     .build()
///     .backfill(&mut ForEach(|r: mem_ingest::OwnedRecord| keys.push(r.key)))?;
/// assert_eq!(keys.len(), 22);
/// # Ok::<(), mem_ingest::Error>(())
/// ```
pub struct ForEach<F>(pub F);

/// The encoder of [`ForEach`]: owned copies.
#[derive(Debug, Default, Clone, Copy)]
pub struct OwnedEncoder;

impl Encoder for OwnedEncoder {
    type Batch = Vec<OwnedRecord>;

    fn batch(&self, _bytes: u64) -> Vec<OwnedRecord> {
        Vec::new()
    }

    fn encode(&self, batch: &mut Vec<OwnedRecord>, record: &Record<'_>, _place: Place<'_>) {
        batch.push(record.to_owned_record());
    }
}

impl<F: FnMut(OwnedRecord)> Sink for ForEach<F> {
    type Encoder = OwnedEncoder;

    fn encoder(&self) -> OwnedEncoder {
        OwnedEncoder
    }

    fn write(&mut self, batch: Vec<OwnedRecord>, dropped: &[usize]) -> Result<bool, Error> {
        let mut dropped = dropped.iter().peekable();
        for (i, r) in batch.into_iter().enumerate() {
            if dropped.peek() == Some(&&i) {
                dropped.next();
                continue;
            }
            (self.0)(r);
        }
        Ok(true)
    }
}
