//! The state file's on-disk layout, as its own versioned definitions.
//!
//! The public types a state holds ([`Header`], [`Report`] and what is in
//! it) are encoded through the mirrors here (serde's remote derives), never
//! through derives of their own: postcard writes no field names, so a field
//! added to a public type would otherwise change the layout, break every
//! saved state and make every grown file be read again. A field added to a
//! public type gets `#[serde(skip)]` in its mirror until a new layout
//! version writes it.
//!
//! - Version 1 and 2: a file is [`FileV2`] (no format, no running
//!   context); version 1 also held the lineages decoded.
//! - Version 3: a file is [`FileState`] through [`FileStateV3`]: its format
//!   and the format's running context are saved, and the header digest is a
//!   hash of the header's fields ([`super::stamp::header_digest`]), not of its
//!   serialised form.
//! - Version 4: version 3, and the kept copy of every usage-bearing
//!   response ([`crate::usage::Responses`]), each through [`ResponseV4`],
//!   after the lineages.
//! - Version 5: version 4, and the options record the formats read
//!   ([`OutputOptions::sources`]): options go through [`OptionsV5`], where
//!   versions 1 to 4 had [`OptionsV4`].
//! - Version 6: version 5, and the options record the shard read
//!   ([`OutputOptions::shard`], through [`OptionsV6`]), and the output a
//!   dataset's id and parts ([`OutputState::id`], [`OutputState::parts`]):
//!   versions 1 to 5 wrote an output through [`OutputV5`].
//! - Version 7: version 6, and the options record how line bytes are
//!   hashed into fingerprints ([`OutputOptions::line_hash`], through
//!   [`OptionsV7`]); versions 1 to 6 read back as the serial hash, the
//!   only one they knew.
//! - Version 8: version 7, and after the responses the root of every
//!   lineage a `--shard` run saw named (`State::shard_roots`), a map of
//!   strings, then the forks waiting for a read-ahead parent
//!   (`State::pending_forks`), a map of string to strings; versions 1 to 7
//!   read back with none of either.
//! - Version 9: version 8's encoding, its files keyed by their path's
//!   spelling instead of the path made UTF-8 lossily (see
//!   `state::respell_keys`).
//! - Version 10: version 9, and the options record whether links met while
//!   walking a folder are followed ([`OutputOptions::links`], through
//!   [`OptionsV10`], a [`Links`] as its variant's index, [`LinksV10`]):
//!   versions 1 to 9 read back as [`Links::Follow`], since every walk
//!   followed them before `--follow-links` existed.
//! - Version 11: version 10, and a file's header says what its parent is
//!   (a [`Parent`]: a path or a session id, through [`HeaderV11`], its
//!   variant's index then its text); versions 1 to 10 wrote the text alone
//!   ([`HeaderDef`]) and read back as a path, or as a session id for a
//!   Codex file, the only format whose parent was an id then
//!   ([`WireV3`]). The store's `checkpoint_files` rows hold a file in this
//!   layout from its schema 5.
//! - Version 12: version 11, and the options record whether the records'
//!   text was redacted ([`OutputOptions::redact`], through [`OptionsV12`],
//!   an `Option<bool>` after the links); versions 1 to 11 read back as
//!   None: saved before redaction existed, their records unredacted. A
//!   file's entry is version 11's.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::model::{FileState, OutputOptions, OutputState};
use super::stamp::Identity;
use crate::archive::discover::Links;
use crate::line::{Header, Parent};
use crate::record::Usage;
use crate::report::{EntryCounts, ModelUsage, Report, Skip, SkipReason, DEFAULT_MAX_SKIPS};
use crate::usage::Response;

/// The header of versions 1 to 10: the parent as its text alone, read back
/// as a path (see [`WireV3`] for Codex's).
#[derive(Serialize, Deserialize)]
#[serde(remote = "Header")]
pub(super) struct HeaderDef {
    id: String,
    cwd: String,
    version: u64,
    timestamp: Option<i64>,
    #[serde(with = "parent_text")]
    parent: Option<Parent>,
    fingerprint: u64,
}

/// A parent as versions 1 to 10 wrote it: its text.
mod parent_text {
    use super::*;

    pub fn serialize<S: Serializer>(p: &Option<Parent>, s: S) -> Result<S::Ok, S::Error> {
        p.as_ref().map(Parent::as_str).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Parent>, D::Error> {
        Ok(Option::<String>::deserialize(d)?.map(Parent::Path))
    }
}

/// The header of version 11: the parent's kind, then its text.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Header")]
pub(super) struct HeaderV11 {
    id: String,
    cwd: String,
    version: u64,
    timestamp: Option<i64>,
    #[serde(with = "parent_v11")]
    parent: Option<Parent>,
    fingerprint: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "Parent")]
enum ParentV11 {
    Path(String),
    Session(String),
}

mod parent_v11 {
    use super::*;

    #[derive(Deserialize)]
    struct Wire(#[serde(with = "ParentV11")] Parent);

    struct Ref<'a>(&'a Parent);

    impl Serialize for Ref<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            ParentV11::serialize(self.0, s)
        }
    }

    pub fn serialize<S: Serializer>(p: &Option<Parent>, s: S) -> Result<S::Ok, S::Error> {
        p.as_ref().map(Ref).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Parent>, D::Error> {
        Ok(Option::<Wire>::deserialize(d)?.map(|w| w.0))
    }
}

/// The options of layouts 1 to 4: no sources (read back empty: not
/// recorded).
#[derive(Serialize, Deserialize)]
#[serde(remote = "OutputOptions")]
pub(super) struct OptionsV4 {
    command: String,
    roles: Vec<String>,
    since: Option<i64>,
    until: Option<i64>,
    max_text: Option<usize>,
    no_dedupe: bool,
    record_format: u32,
    #[serde(skip)]
    sources: Vec<String>,
    #[serde(skip)]
    shard: Option<super::shard::Shard>,
    #[serde(skip, default = "serial")]
    line_hash: u32,
    #[serde(skip, default = "followed")]
    links: Links,
    #[serde(skip)]
    redact: Option<bool>,
}

/// The options of layout 5: the sources after the rest.
#[derive(Serialize, Deserialize)]
#[serde(remote = "OutputOptions")]
pub(super) struct OptionsV5 {
    command: String,
    roles: Vec<String>,
    since: Option<i64>,
    until: Option<i64>,
    max_text: Option<usize>,
    no_dedupe: bool,
    record_format: u32,
    sources: Vec<String>,
    #[serde(skip)]
    shard: Option<super::shard::Shard>,
    #[serde(skip, default = "serial")]
    line_hash: u32,
    #[serde(skip, default = "followed")]
    links: Links,
    #[serde(skip)]
    redact: Option<bool>,
}

/// The options of layout 6: the shard after the sources.
#[derive(Serialize, Deserialize)]
#[serde(remote = "OutputOptions")]
pub(super) struct OptionsV6 {
    command: String,
    roles: Vec<String>,
    since: Option<i64>,
    until: Option<i64>,
    max_text: Option<usize>,
    no_dedupe: bool,
    record_format: u32,
    sources: Vec<String>,
    shard: Option<super::shard::Shard>,
    #[serde(skip, default = "serial")]
    line_hash: u32,
    #[serde(skip, default = "followed")]
    links: Links,
    #[serde(skip)]
    redact: Option<bool>,
}

/// The options of layouts 7 to 9: how line bytes are hashed, after the
/// shard.
#[derive(Serialize, Deserialize)]
#[serde(remote = "OutputOptions")]
pub(super) struct OptionsV7 {
    command: String,
    roles: Vec<String>,
    since: Option<i64>,
    until: Option<i64>,
    max_text: Option<usize>,
    no_dedupe: bool,
    record_format: u32,
    sources: Vec<String>,
    shard: Option<super::shard::Shard>,
    line_hash: u32,
    #[serde(skip, default = "followed")]
    links: Links,
    #[serde(skip)]
    redact: Option<bool>,
}

/// The options of layout 10: whether links met while walking are
/// followed, after the line hash.
#[derive(Serialize, Deserialize)]
#[serde(remote = "OutputOptions")]
pub(super) struct OptionsV10 {
    command: String,
    roles: Vec<String>,
    since: Option<i64>,
    until: Option<i64>,
    max_text: Option<usize>,
    no_dedupe: bool,
    record_format: u32,
    sources: Vec<String>,
    shard: Option<super::shard::Shard>,
    line_hash: u32,
    #[serde(with = "LinksV10")]
    links: Links,
    #[serde(skip)]
    redact: Option<bool>,
}

/// The options of layout 12: whether the records' text was redacted, after
/// the links (None: saved before it was recorded, see
/// [`OutputOptions::redact`]).
#[derive(Serialize, Deserialize)]
#[serde(remote = "OutputOptions")]
pub(super) struct OptionsV12 {
    command: String,
    roles: Vec<String>,
    since: Option<i64>,
    until: Option<i64>,
    max_text: Option<usize>,
    no_dedupe: bool,
    record_format: u32,
    sources: Vec<String>,
    shard: Option<super::shard::Shard>,
    line_hash: u32,
    #[serde(with = "LinksV10")]
    links: Links,
    redact: Option<bool>,
}

/// [`Links`] as layout 10 writes it: postcard writes a variant's index,
/// so this order is the layout's, whatever the public enum's.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Links")]
pub(super) enum LinksV10 {
    Skip,
    Follow,
}

/// What layouts 1 to 9 read back as: every walk followed links before
/// `--follow-links` existed, so a run over such a state that does not
/// follow them is refused instead of dropping what they led to.
fn followed() -> Links {
    Links::Follow
}

/// What layouts 1 to 6 hashed line bytes with: [`crate::LineHash::Serial`].
fn serial() -> u32 {
    crate::LineHash::Serial.id()
}

/// The output of layouts 1 to 5: a file's path and length (read back with
/// no dataset id or parts).
#[derive(Serialize, Deserialize)]
#[serde(remote = "OutputState")]
pub(super) struct OutputV5 {
    path: String,
    len: u64,
    #[serde(skip)]
    id: u64,
    #[serde(skip)]
    parts: Vec<String>,
}

/// An optional output in the layout of versions 1 to 5.
pub(super) mod output_v5 {
    use super::*;

    #[derive(Deserialize)]
    struct Wire(#[serde(with = "OutputV5")] OutputState);

    #[cfg(test)]
    struct Ref<'a>(&'a OutputState);

    #[cfg(test)]
    impl Serialize for Ref<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            OutputV5::serialize(self.0, s)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<OutputState>, D::Error> {
        Ok(Option::<Wire>::deserialize(d)?.map(|w| w.0))
    }

    #[cfg(test)]
    pub fn serialize<S: Serializer>(o: &&Option<OutputState>, s: S) -> Result<S::Ok, S::Error> {
        o.as_ref().map(Ref).serialize(s)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "Usage")]
struct UsageDef {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    total_tokens: u64,
    cost: f64,
}

/// A skip's reason as laid out: the variants in this order, by name (the
/// legacy JSON layouts). `SkipReason` is the parsing crate's and
/// non-exhaustive, so it is written through its exhaustive parts.
#[derive(Serialize, Deserialize)]
enum SkipReasonDef<'a> {
    Malformed(Cow<'a, str>),
    Truncated(Cow<'a, str>),
    NotAnEntry,
    TooDeep,
    TooLong { len: u64 },
    Nul,
    Unsupported(Cow<'a, str>),
}

mod skip_reason {
    use super::*;
    use mem_ingest_parse::report::SkipReasonParts as P;

    pub fn serialize<S: Serializer>(r: &SkipReason, s: S) -> Result<S::Ok, S::Error> {
        match r.parts() {
            P::Malformed(e) => SkipReasonDef::Malformed(Cow::Borrowed(e)),
            P::Truncated(e) => SkipReasonDef::Truncated(Cow::Borrowed(e)),
            P::NotAnEntry => SkipReasonDef::NotAnEntry,
            P::TooDeep => SkipReasonDef::TooDeep,
            P::TooLong { len } => SkipReasonDef::TooLong { len },
            P::Nul => SkipReasonDef::Nul,
            P::Unsupported(why) => SkipReasonDef::Unsupported(Cow::Borrowed(why)),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SkipReason, D::Error> {
        Ok(match SkipReasonDef::deserialize(d)? {
            SkipReasonDef::Malformed(e) => SkipReason::Malformed(e.into_owned()),
            SkipReasonDef::Truncated(e) => SkipReason::Truncated(e.into_owned()),
            SkipReasonDef::NotAnEntry => SkipReason::NotAnEntry,
            SkipReasonDef::TooDeep => SkipReason::TooDeep,
            SkipReasonDef::TooLong { len } => SkipReason::TooLong { len },
            SkipReasonDef::Nul => SkipReason::Nul,
            SkipReasonDef::Unsupported(why) => SkipReason::Unsupported(why.into_owned()),
        })
    }
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "Skip")]
struct SkipDef {
    line: u64,
    byte: u64,
    #[serde(with = "skip_reason")]
    reason: SkipReason,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "ModelUsage")]
struct ModelUsageDef {
    provider: String,
    model: String,
    messages: u64,
    #[serde(with = "UsageDef")]
    usage: Usage,
}

/// Entry counts as they were laid out: the counts of pi's known types in
/// their fixed order, then the others by name.
mod entry_counts {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Layout {
        known: [u64; crate::report::KNOWN_ENTRY_TYPES],
        other: Vec<(String, u64)>,
    }

    pub fn serialize<S: Serializer>(c: &EntryCounts, s: S) -> Result<S::Ok, S::Error> {
        let (known, other) = c.parts();
        Layout {
            known,
            other: other.to_vec(),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<EntryCounts, D::Error> {
        let l = Layout::deserialize(d)?;
        Ok(EntryCounts::from_parts(l.known, l.other))
    }
}

/// Skips, through their mirror.
mod skips {
    use super::*;

    #[derive(Deserialize)]
    struct Wire(#[serde(with = "SkipDef")] Skip);

    struct Ref<'a>(&'a Skip);

    impl Serialize for Ref<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            SkipDef::serialize(self.0, s)
        }
    }

    pub fn serialize<S: Serializer>(v: &[Skip], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(Ref))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Skip>, D::Error> {
        let v: Vec<Wire> = Vec::deserialize(d)?;
        Ok(v.into_iter().map(|w| w.0).collect())
    }
}

/// Usage by model, through its mirror.
mod by_model {
    use super::*;

    #[derive(Deserialize)]
    struct Wire(#[serde(with = "ModelUsageDef")] ModelUsage);

    struct Ref<'a>(&'a ModelUsage);

    impl Serialize for Ref<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            ModelUsageDef::serialize(self.0, s)
        }
    }

    pub fn serialize<S: Serializer>(v: &[ModelUsage], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(Ref))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ModelUsage>, D::Error> {
        let v: Vec<Wire> = Vec::deserialize(d)?;
        Ok(v.into_iter().map(|w| w.0).collect())
    }
}

fn default_max_skips() -> usize {
    DEFAULT_MAX_SKIPS
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "Report")]
pub(super) struct ReportDef {
    bytes: u64,
    lines: u64,
    records: u64,
    roles: [u64; 6],
    filtered: u64,
    #[serde(with = "entry_counts")]
    entries: EntryCounts,
    no_record: u64,
    skipped: u64,
    repaired: u64,
    #[serde(with = "skips")]
    skips: Vec<Skip>,
    pending: u64,
    deduplicated: u64,
    empty: bool,
    #[serde(with = "UsageDef")]
    usage: Usage,
    #[serde(with = "by_model")]
    by_model: Vec<ModelUsage>,
    unknown_roles: Vec<(String, u64)>,
    #[serde(skip)]
    responses: Vec<crate::usage::Response>,
    /// Not in the layout (rows are handed on, never saved).
    #[serde(skip)]
    usage_rows: Vec<crate::report::UsageRow>,
    #[serde(skip)]
    keep_usage_rows: bool,
    #[serde(skip, default = "default_max_skips")]
    max_skips: usize,
}

/// A file of a state of version 1 or 2.
#[derive(Serialize, Deserialize)]
pub(super) struct FileV2 {
    identity: Identity,
    #[serde(with = "HeaderDef")]
    header: Header,
    header_digest: u64,
    offset: u64,
    line: u64,
    open_line: bool,
    pending: u64,
    #[serde(with = "ReportDef")]
    report: Report,
}

impl From<FileV2> for FileState {
    /// A pi file (the only format then) with no running context; its header
    /// digest computed anew from the header it holds, as version 3 digests
    /// are: a grown file whose header is unchanged is resumed, not read again.
    fn from(f: FileV2) -> FileState {
        FileState {
            identity: f.identity,
            format: "pi".to_owned(),
            header_digest: super::stamp::header_digest(&f.header),
            header: f.header,
            offset: f.offset,
            line: f.line,
            open_line: f.open_line,
            pending: f.pending,
            context: Vec::new(),
            report: f.report,
        }
    }
}

impl FileV2 {
    /// The version 2 layout of a file, for tests that write old states.
    #[cfg(test)]
    pub(super) fn of(f: &FileState, v2_digest: u64) -> FileV2 {
        FileV2 {
            identity: f.identity,
            header: f.header.clone(),
            header_digest: v2_digest,
            offset: f.offset,
            line: f.line,
            open_line: f.open_line,
            pending: f.pending,
            report: f.report.clone(),
        }
    }
}

/// A file of a state of versions 3 to 10.
#[derive(Serialize, Deserialize)]
#[serde(remote = "FileState")]
pub(super) struct FileStateV3 {
    identity: Identity,
    format: String,
    #[serde(with = "HeaderDef")]
    header: Header,
    header_digest: u64,
    offset: u64,
    line: u64,
    open_line: bool,
    pending: u64,
    #[serde(with = "super::model::blob")]
    context: Vec<u8>,
    #[serde(with = "ReportDef")]
    report: Report,
}

/// A file of versions 3 to 10 read through its layout: a Codex file's
/// parent is the session id it always was; every other format's, a path.
pub(super) struct WireV3(pub FileState);

impl<'de> Deserialize<'de> for WireV3 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut f = FileStateV3::deserialize(d)?;
        if f.format == "codex" {
            f.header.parent = f
                .header
                .parent
                .map(|p| Parent::Session(p.as_str().to_owned()));
        }
        Ok(WireV3(f))
    }
}

/// A file of versions 3 to 10 written through its layout (for the writers
/// of those layouts the upgrade tests use).
pub(super) struct RefV3<'a>(pub &'a FileState);

impl Serialize for RefV3<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        FileStateV3::serialize(self.0, s)
    }
}

/// A file of version 11: version 3's with [`HeaderV11`].
#[derive(Serialize, Deserialize)]
#[serde(remote = "FileState")]
pub(super) struct FileStateV11 {
    identity: Identity,
    format: String,
    #[serde(with = "HeaderV11")]
    header: Header,
    header_digest: u64,
    offset: u64,
    line: u64,
    open_line: bool,
    pending: u64,
    #[serde(with = "super::model::blob")]
    context: Vec<u8>,
    #[serde(with = "ReportDef")]
    report: Report,
}

/// A version 11 file read through its layout.
#[derive(Deserialize)]
pub(super) struct WireV11(#[serde(with = "FileStateV11")] pub FileState);

/// A version 11 file written through its layout.
pub(super) struct RefV11<'a>(pub &'a FileState);

impl Serialize for RefV11<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        FileStateV11::serialize(self.0, s)
    }
}

/// A kept response of a state of version 4.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Response")]
pub(super) struct ResponseV4 {
    message_id: Option<String>,
    request_id: Option<String>,
    session: String,
    sidechain: bool,
    speed: bool,
    model: Option<String>,
    project: String,
    #[serde(with = "UsageDef")]
    usage: Usage,
    /// Not in the layout: a response read back from a state has no time
    /// (the `usage` report reads the archive without one).
    #[serde(skip)]
    time: Option<i64>,
    #[serde(skip)]
    cache_write_1h: u64,
}

/// A version 4 response read through its layout.
#[derive(Deserialize)]
pub(super) struct ResponseWire(#[serde(with = "ResponseV4")] pub Response);

/// A version 4 response written through its layout.
pub(super) struct ResponseRef<'a>(pub &'a Response);

impl Serialize for ResponseRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ResponseV4::serialize(self.0, s)
    }
}
