//! Where a backfill's records go: the [`Sink`] seam.
//!
//! The engine reads the archive in tasks on every core. Each task's records
//! are *encoded* on the worker that read them ([`Encoder::encode`], into a
//! batch of the sink's choosing), and the batches are *written* in archive
//! order on one thread ([`Sink::write`]), with the indices of the records
//! that deduplication dropped: encoding stays parallel, the order stays the
//! archive's whatever the jobs.
//!
//! Checkpoints: before the engine saves a checkpoint it asks the sink to
//! make everything written durable ([`Sink::sync`]), and stores the mark the
//! sink returns (an output length) with the checkpoint; at the start of a
//! run it hands the sink the mark of the last checkpoint
//! ([`Sink::resume_at`]). A sink that keeps the checkpoint itself (a
//! database, in the same transaction as its rows) returns its store from
//! [`Sink::checkpoints`].
//!
//! Shipped sinks: [`NdjsonFile`] and [`NdjsonStdout`] (the command line's
//! bytes), [`Discard`] (no output: `stats`), and [`ForEach`], a sink in one
//! line for library users who want owned records in order. The store
//! (`mem_ingest_store::SqliteStore`) and the dataset
//! (`mem_ingest_dataset::ParquetDataset`) are crates of their own.

mod ndjson;
mod owned;
mod seam;

pub use crate::checkpoint::Mark;
pub use ndjson::{NdjsonBatch, NdjsonEncoder, NdjsonFile, NdjsonStdout};
pub use owned::{Discard, DiscardEncoder, ForEach, OwnedEncoder};
pub use seam::{DocumentUsage, Encoder, Place, ResponseUsage, Sink, UsageCorrection};
