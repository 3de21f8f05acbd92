//! mem-ingest's parsing layer, below the engine (`mem-ingest`) and every
//! sink: the chunked line reader and the mmap source, the JSON layer (the
//! escaper below the lean parse, tape access, repair, hashing), the record
//! model (records, roles, skips, responses, time), the source seam, the
//! [`format::Format`] trait and every agent format, each a folder of
//! [`formats`], with the registry the command line and the checkpoint read.
//!
//! Its dependencies are the parser's alone: no SQLite, Parquet, command
//! line, thread pool, file notifications or state encoding (CI checks it).
//! The engine re-exports what a library user needs; the modules that only
//! the workspace's crates use are public but hidden from the docs.
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

#[doc(hidden)]
pub mod counts;
pub mod document;
#[doc(hidden)]
pub mod error;
pub mod format;
pub mod formats;
#[doc(hidden)]
pub mod json;
#[doc(hidden)]
pub mod line;
pub mod line_reader;
#[doc(hidden)]
pub mod ndjson;
pub mod path_text;
pub mod prices;
#[doc(hidden)]
pub mod record;
pub mod redact;
#[doc(hidden)]
pub mod report;
pub mod rows;
#[doc(hidden)]
pub mod seal;
#[doc(hidden)]
pub mod source;
#[doc(hidden)]
pub mod sys;
// Where the unit tests find the shared folder: the integration tests' own
// helper, one file for both.
#[cfg(test)]
#[path = "../../mem-ingest/tests/common/shared.rs"]
mod test_shared;
#[doc(hidden)]
pub mod time;
#[doc(hidden)]
pub mod usage;

pub use counts::LineCounts;
pub use error::{Error, ErrorKind};
pub use formats::pi::{MmapSessionSource, PiSessionSource, SliceSessionSource};
#[doc(hidden)]
pub use json::lean::agrees_with_simd_json;
pub use json::{LineHash, ParsedLine};
pub use line::{Entry, Header, Parent};
#[doc(hidden)]
pub use ndjson::raw_text_agrees;
pub use record::{OwnedRecord, Record, Role, RoleFilter, Usage};
pub use report::{
    EntryCounts, ModelUsage, Report, Skip, SkipReason, UsageAt, UsageRow, DEFAULT_MAX_SKIPS,
};
pub use source::{Position, RecordSource, SourceOptions};
pub use time::{format_iso_millis, parse_iso_millis};

/// Appends `s` as a JSON string (quoted, escaped as serde_json escapes):
/// the workspace's one escaper, for its sinks.
#[doc(hidden)]
pub fn write_json_string(out: &mut Vec<u8>, s: &str) {
    json::escape(out, s);
}
