#![doc = include_str!("../../../README.md")]
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
mod counts;
mod error;
pub mod format;
pub mod formats;
mod json;
mod line;
pub mod line_reader;
mod ndjson;
pub mod path_text;
mod record;
mod report;
mod seal;
pub mod sink;
mod source;
// Where the unit tests find the shared folder: the integration tests' own
// helper, one file for both.
#[cfg(test)]
#[path = "../tests/common/shared.rs"]
mod test_shared;
mod time;
mod usage;

pub use counts::LineCounts;
pub use error::{Error, ErrorKind};
pub use formats::pi::{MmapSessionSource, PiSessionSource, SliceSessionSource};
#[doc(hidden)]
pub use json::lean::agrees_with_simd_json;
pub use json::{LineHash, ParsedLine};
pub use line::{Entry, Header};
#[doc(hidden)]
pub use ndjson::raw_text_agrees;
pub use record::{OwnedRecord, Record, Role, RoleFilter, Usage};
pub use report::{EntryCounts, ModelUsage, Report, Skip, SkipReason, DEFAULT_MAX_SKIPS};
pub use source::{Position, RecordSource, SourceOptions};
pub use time::{format_iso_millis, parse_iso_millis};

/// Appends `s` as a JSON string (quoted, escaped as serde_json escapes):
/// the crate's one escaper, for the workspace's sinks.
#[doc(hidden)]
pub fn write_json_string(out: &mut Vec<u8>, s: &str) {
    json::escape(out, s);
}
