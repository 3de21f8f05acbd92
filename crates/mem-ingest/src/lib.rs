#![doc = include_str!("../../../docs/library.md")]
//!
//! # Text rules
//!
//! A record's text is pinned: blocks in order, joined with `"\n"`; string
//! content as is; null, missing or wrongly typed content is empty text;
//! `text` as its text; `thinking` as its text (nothing when redacted);
//! `toolCall` as `<name> <arguments as compact JSON>`; `image` as
//! `[image <mime type>, <decoded size> bytes]`; bash as `$ <command>`, `"\n"`,
//! then the output; compaction and branch summaries as their summary; a
//! turn that ended in an error adds its error message after the content's
//! text (alone when that is empty), and the kind `error`.
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod archive;
mod atomic;
pub mod checkpoint;
mod error;
pub mod sink;
mod sys;

// The parsing layer (`mem-ingest-parse`): the modules a library user names
// are re-exported as this crate's own; the others are imported under their
// old names for the engine's `crate::` paths.
use mem_ingest_parse::{counts, json, line, ndjson, record, report, seal, source, time, usage};
pub use mem_ingest_parse::{
    document, format, formats, line_reader, path_text, prices, redact, rows,
};
// Where the unit tests find the shared folder: the integration tests' own
// helper, one file for both.
#[cfg(test)]
#[path = "../tests/common/shared.rs"]
mod test_shared;

pub use counts::LineCounts;
pub use error::{Error, ErrorKind, SinkFailure};
pub use formats::pi::{MmapSessionSource, PiSessionSource, SliceSessionSource};
#[doc(hidden)]
pub use json::lean::agrees_with_simd_json;
pub use json::{LineHash, ParsedLine};
pub use line::{Entry, Header, Parent};
#[doc(hidden)]
pub use mem_ingest_parse::write_json_string;
/// A file's reading error: what a format's sources return (the parsing
/// crate's); the engine's [`Error`] wraps it.
pub use mem_ingest_parse::{Error as SourceError, ErrorKind as SourceErrorKind};
#[doc(hidden)]
pub use ndjson::raw_text_agrees;
pub use record::{OwnedRecord, Record, Role, RoleFilter, Usage};
pub use report::{
    EntryCounts, ModelUsage, Report, Skip, SkipReason, UsageAt, UsageRow, DEFAULT_MAX_SKIPS,
};
pub use source::{Position, RecordSource, SourceOptions};
pub use time::{format_iso_millis, parse_iso_millis};
