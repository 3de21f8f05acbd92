//! The seam: [`Sink`], the [`Encoder`] it brings, and a record's [`Place`].

use std::path::Path;

use crate::checkpoint::CheckpointStore;
use crate::checkpoint::Mark;
use crate::error::Error;
use crate::json::ParsedLine;
use crate::record::Record;

/// Where a record was read, and what the engine did to it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Place<'p> {
    /// The file's path as found (lossily UTF-8).
    pub file: &'p str,
    /// When `max_text` cut the record's text: its full length in bytes.
    pub text_bytes: Option<u64>,
    /// The fingerprint of the record's entry (what deduplication compares:
    /// a copy of an entry has the same).
    pub fingerprint: u64,
    /// The name of the file's format (`pi`).
    pub format: &'p str,
    /// The session the record's session was forked from, when it names one.
    pub parent_session: Option<&'p str>,
    /// The line the record was parsed from, when the source has it: its
    /// strings may be copied from it ([`ParsedLine::escaped`]).
    pub line: Option<ParsedLine<'p>>,
    /// The record revises one written before under the same key (see
    /// [`crate::line::Entry::revision`]): only for an encoder that
    /// [`Encoder::takes_revisions`].
    pub revision: bool,
    /// The rule ids of the secrets redaction replaced in the record's
    /// text and command, one per secret (empty: none, or redaction off).
    pub redactions: &'p [&'static str],
}

/// Encodes records on the worker threads into batches.
pub trait Encoder: Sync {
    /// The records of one task, encoded.
    type Batch: Send;

    /// An empty batch for a task of about `bytes` bytes of input.
    fn batch(&self, bytes: u64) -> Self::Batch;

    /// Adds one record to the batch. Records get consecutive indices from
    /// 0 in the order they are encoded.
    fn encode(&self, batch: &mut Self::Batch, record: &Record<'_>, place: Place<'_>);

    /// Whether revisions of records written before (a message edited
    /// after it was emitted: [`crate::line::Entry::revision`]) are encoded,
    /// with [`Place::revision`] (a store updates its row by key). Default
    /// false: the engine counts them (the run's `updated`) and does not
    /// encode them (NDJSON and Parquet append, and never write a record
    /// twice).
    fn takes_revisions(&self) -> bool {
        false
    }

    /// Whether records are wanted at all (default true). When false, the
    /// engine builds none and calls neither `encode` nor the filters.
    fn wants_records(&self) -> bool {
        true
    }

    /// Whether `encode` reads a pi record's text only through
    /// [`Place::line`] (the crate's NDJSON encoder), so that the engine may
    /// build the text escaped, as that encoder writes it, from its line's
    /// raw strings. Not for other encoders: its argument cannot be named
    /// outside the crate.
    #[doc(hidden)]
    fn takes_raw_text(&self, _: crate::seal::Crate) -> bool {
        false
    }
}

/// A destination for records, written in archive order.
pub trait Sink {
    /// Encodes this sink's records on the workers.
    type Encoder: Encoder;

    /// The encoder the workers share for one run.
    fn encoder(&self) -> Self::Encoder;

    /// Writes one batch, in archive order. `dropped` holds the indices,
    /// ascending, of the batch's records that are copies of records written
    /// before (deduplication): they must not be written. Ok(false) when the
    /// destination is gone for good (a closed pipe): the run stops there.
    ///
    /// # Errors
    /// The destination failed: the run stops with this error.
    fn write(
        &mut self,
        batch: <Self::Encoder as Encoder>::Batch,
        dropped: &[usize],
    ) -> Result<bool, Error>;

    /// Makes everything written so far durable, before a checkpoint that
    /// covers it is saved; returns the mark the checkpoint records (None
    /// when the destination cannot be resumed, as stdout).
    ///
    /// # Errors
    /// The destination failed: no checkpoint is saved.
    fn sync(&mut self) -> Result<Option<Mark>, Error> {
        Ok(None)
    }

    /// Called once, before anything is written, when the run has a
    /// checkpoint: `mark` is what the last checkpoint covers of this sink
    /// (None: nothing; `checkpoint_exists` tells a new checkpoint from one
    /// saved with another sink). A sink cuts back what a killed run wrote
    /// past the mark, and refuses output it does not own.
    ///
    /// # Errors
    /// The sink cannot be resumed from there.
    fn resume_at(&mut self, mark: Option<&Mark>, checkpoint_exists: bool) -> Result<(), Error> {
        let _ = (mark, checkpoint_exists);
        Ok(())
    }

    /// Whether the mark this sink syncs to must be saved with a checkpoint
    /// before the first byte is written (an output a checkpoint pairs
    /// with).
    fn pairs_with_checkpoint(&self) -> bool {
        false
    }

    /// After [`Sink::resume_at`]: an output the checkpoint does not cover
    /// yet although it covers the sink's (a second file new to it): the
    /// engine saves a checkpoint covering it before anything is written,
    /// as for a first run.
    fn unpaired(&self) -> bool {
        false
    }

    /// A sink that keeps its own checkpoint returns its store: the engine
    /// then saves checkpoints there (right after [`Sink::sync`]) instead of
    /// in a state file.
    fn checkpoints(&mut self) -> Option<&mut dyn CheckpointStore> {
        None
    }

    /// The run ended well: complete the output (rename a temporary file).
    ///
    /// # Errors
    /// Completing failed.
    fn finish(&mut self) -> Result<(), Error> {
        Ok(())
    }

    /// The run failed: remove what this run created and wrote nothing to.
    fn abandon(&mut self) {}

    /// The destination's reader went away (a closed pipe): the run ends
    /// quietly.
    fn closed(&self) -> bool {
        false
    }

    /// The file this sink writes, if any: a run refuses one that is among
    /// its input files.
    fn output_file(&self) -> Option<&Path> {
        None
    }

    /// Whether the sink takes usage rows ([`Sink::write_usage`]; default
    /// false: the engine keeps none).
    fn wants_usage(&self) -> bool {
        false
    }

    /// Writes usage rows, one per response counted (exactly the responses
    /// `stats` counts, each once its response is final), in archive order,
    /// after the batch of the part they were read in; a sink that keeps
    /// its own checkpoint gets Claude Code's, counted once across the
    /// archive, from [`crate::checkpoint::Checkpoint::changed_response_usage`]
    /// instead. A row's `file` and `line` (or, for those, its response's
    /// index) identify it: a row read again after a kill is the same row.
    ///
    /// # Errors
    /// The destination failed: the run stops with this error.
    fn write_usage(&mut self, rows: &[crate::archive::counted::CountedUsage]) -> Result<(), Error> {
        let _ = rows;
        Ok(())
    }

    /// Claude Code's usage rows (counted once across the archive, a
    /// response's row replaced when a larger copy is found: see
    /// [`crate::usage`]) for a sink that wants usage and keeps no
    /// checkpoint of its own, which never rewrites a row: the responses
    /// added or replaced since the last call, in the order first seen.
    /// Called before each [`Sink::sync`] that a checkpoint follows (so
    /// that the rows are in what it covers), and, without a checkpoint,
    /// once before the last sync. Each comes with what was handed over of
    /// it before, when it was ([`ResponseUsage::written`]): the sink writes
    /// the difference, so that its rows sum to the table's.
    ///
    /// # Errors
    /// The destination failed: the run stops with this error.
    fn write_response_usage(&mut self, rows: &[ResponseUsage]) -> Result<(), Error> {
        let _ = rows;
        Ok(())
    }

    /// The usage rows of a document read whole (an Amp thread, a Cline
    /// transcript, a Gemini CLI legacy session: see
    /// [`crate::document`]), in place of [`Sink::write_usage`], also when
    /// it has none: what it holds now replaces what was handed over of it
    /// before, which a rewind or an edit may have dropped or changed. A
    /// sink that rewrites rows (a store) keeps exactly
    /// [`DocumentUsage::rows`] for the file; one that never rewrites
    /// writes [`DocumentUsage::fresh`] and the
    /// [`DocumentUsage::corrections`], so that its sums are `stats'`.
    /// Default: [`Sink::write_usage`] of the fresh rows.
    ///
    /// # Errors
    /// The destination failed: the run stops with this error.
    fn write_document_usage(&mut self, doc: &DocumentUsage<'_>) -> Result<(), Error> {
        if doc.fresh.is_empty() {
            return Ok(());
        }
        self.write_usage(doc.fresh)
    }
}

/// A document's usage rows, for [`Sink::write_document_usage`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct DocumentUsage<'a> {
    /// The document (its rows' `file`).
    pub file: &'a str,
    /// Every usage row of the document now, in the run's
    /// `--since/--until`: what a sink that rewrites rows keeps of the
    /// file, every other row of it dropped.
    pub rows: &'a [crate::archive::counted::CountedUsage],
    /// Of those, the rows not handed over before: the messages emitted by
    /// this read (every row at a document's first read).
    pub fresh: &'a [crate::archive::counted::CountedUsage],
    /// For a sink that never rewrites a row: per provider and model, the
    /// document's usage now against what was handed over of it before and
    /// `fresh` (a rewound message's usage, an edited message's change):
    /// the sink writes the difference, `correction` true. Empty at a
    /// document's first read, and in a run with `--since/--until` (the
    /// checkpoint keeps a document's counts, not which of its rows were in
    /// bounds).
    pub corrections: &'a [UsageCorrection],
}

/// What the rows of one provider and model of a document written before
/// need to sum to what the document holds now: the sink writes `now`
/// less `before` (field by field, possibly negative; nothing when all
/// are 0).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct UsageCorrection {
    /// The document's usage of this provider and model now (`line` 0; the
    /// time of its latest row now, if any).
    pub now: crate::archive::counted::CountedUsage,
    /// What was handed over of it: the rows written before and the fresh
    /// ones.
    pub before: crate::archive::counted::CountedUsage,
}

/// A Claude Code response's usage, for [`Sink::write_response_usage`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ResponseUsage {
    /// The response's index in the table (from 0, in the order responses
    /// were first seen; a replaced one keeps it).
    pub index: u32,
    /// Its usage now; None when it is outside the run's `--since/--until`
    /// now (by its time) while its earlier copy was not.
    pub row: Option<crate::archive::counted::CountedUsage>,
    /// The copy handed over before (at an earlier checkpoint, of this run
    /// or an earlier one), when the response has been replaced since: its
    /// row was written and is not to be counted twice. A copy read back
    /// from a checkpoint has no time and no one-hour cache writes (a
    /// checkpoint keeps neither).
    pub written: Option<crate::archive::counted::CountedUsage>,
}

impl ResponseUsage {
    /// Response `index`, with neither row yet.
    pub fn new(index: u32) -> ResponseUsage {
        ResponseUsage {
            index,
            row: None,
            written: None,
        }
    }
}
