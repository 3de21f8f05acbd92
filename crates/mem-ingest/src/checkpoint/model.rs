//! What a checkpoint holds, as the engine uses it: the options that shape
//! the output, each file's state, the lineages, and what the output holds
//! ([`OutputState`], a sink's [`Mark`]). Its layout on disk is `layout`'s;
//! the state file and the checkpoint seam are `state`'s.

use serde::{Deserialize, Serialize};

use super::stamp::Identity;
use crate::archive::discover::Links;
use crate::line::Header;
use crate::report::Report;

/// The options that shape the output: a run with other ones refuses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputOptions {
    /// `backfill` or `stats`.
    pub command: String,
    /// The role filter, names sorted (empty: all).
    pub roles: Vec<String>,
    /// The lower time bound, Unix ms.
    pub since: Option<i64>,
    /// The upper time bound, Unix ms.
    pub until: Option<i64>,
    /// The text length limit.
    pub max_text: Option<usize>,
    /// Deduplication off.
    pub no_dedupe: bool,
    /// [`RECORD_FORMAT`] when written.
    pub record_format: u32,
    /// The formats the run reads, by [`crate::format::Format::name`], in
    /// its order of preference. Empty in a checkpoint saved before they
    /// were recorded (a state before layout version 5): a run takes the
    /// formats of the files it holds, pi when none (see
    /// [`OutputOptions::recorded_sources`]).
    #[serde(default)]
    pub sources: Vec<String>,
    /// The shard of the archive the run reads (`--shard K/N`; None: all
    /// of it). None in a checkpoint saved before layout version 6.
    #[serde(default)]
    pub shard: Option<super::shard::Shard>,
    /// How line bytes were hashed into the fingerprints the checkpoint
    /// holds ([`crate::LineHash::id`]): a run adopts it, it is never a
    /// difference. The serial hash (1) in a checkpoint saved before it was
    /// recorded (a state before layout version 7, a store's options
    /// without it).
    #[serde(default = "serial_line_hash")]
    pub line_hash: u32,
    /// Whether links met while walking a folder are followed
    /// (`--follow-links`). [`Links::Follow`] in a checkpoint saved before
    /// it was recorded (a state before layout version 10, a store's
    /// options without it): every walk followed them then, so a run that
    /// does not is refused rather than silently dropping the files they led
    /// to (and reading a file again under its other path).
    #[serde(default = "links_followed")]
    pub links: Links,
    /// Whether the records' free text was redacted (`--no-redact`: false;
    /// issue 46). None in a checkpoint saved before it was recorded (a
    /// state before layout version 12, a store's options without it): its
    /// records were written unredacted, and a run over it goes on
    /// unredacted, saying so ([`crate::archive::Summary::unredacted_checkpoint`]),
    /// rather than mix redacted records in. None for `stats`, which builds
    /// no text.
    #[serde(default)]
    pub redact: Option<bool>,
}

fn serial_line_hash() -> u32 {
    crate::LineHash::Serial.id()
}

fn links_followed() -> Links {
    Links::Follow
}

impl OutputOptions {
    /// What differs from `other`, for a message: `name: <what> has A,
    /// this run B`, `what` naming what holds these options (`state`,
    /// `store`).
    pub fn differences(&self, other: &OutputOptions, what: &str) -> Vec<String> {
        let mut d = Vec::new();
        let mut cmp = |name: &str, a: String, b: String| {
            if a != b {
                d.push(format!("{name}: {what} has {a}, this run {b}"));
            }
        };
        cmp("command", self.command.clone(), other.command.clone());
        let roles = |r: &[String]| match r {
            [] => "all roles".to_owned(),
            r => r.join(","),
        };
        cmp("--role", roles(&self.roles), roles(&other.roles));
        cmp(
            "--since",
            format!("{:?}", self.since),
            format!("{:?}", other.since),
        );
        cmp(
            "--until",
            format!("{:?}", self.until),
            format!("{:?}", other.until),
        );
        cmp(
            "--max-text",
            format!("{:?}", self.max_text),
            format!("{:?}", other.max_text),
        );
        cmp(
            "--no-dedupe",
            self.no_dedupe.to_string(),
            other.no_dedupe.to_string(),
        );
        cmp(
            "record format",
            self.record_format.to_string(),
            other.record_format.to_string(),
        );
        cmp("--agent", self.sources.join(","), other.sources.join(","));
        let shard =
            |s: &Option<super::shard::Shard>| s.map_or("none".to_owned(), |s| s.to_string());
        cmp("--shard", shard(&self.shard), shard(&other.shard));
        // What to do is not "another checkpoint" alone: a checkpoint saved
        // before links were recorded says followed, to users who never
        // gave -L.
        match (self.links, other.links) {
            (Links::Follow, Links::Skip) => d.push(format!(
                "--follow-links: {what} has links followed (given -L, or saved before -L \
                 existed, when runs always followed them), this run links not followed: give \
                 -L to go on"
            )),
            (Links::Skip, Links::Follow) => d.push(format!(
                "--follow-links: {what} has links not followed, this run links followed: \
                 leave out -L to go on"
            )),
            (Links::Skip, Links::Skip) | (Links::Follow, Links::Follow) => {}
        }
        match (self.redact, other.redact) {
            (Some(true), Some(false)) => d.push(format!(
                "--no-redact: {what} has its records' secrets redacted, this run keeps them: \
                 leave out --no-redact to go on"
            )),
            (Some(false), Some(true)) => d.push(format!(
                "--no-redact: {what} has its records' text as written (--no-redact), this run \
                 redacts secrets: give --no-redact to go on"
            )),
            _ => {}
        }
        d
    }

    /// Fills in [`OutputOptions::sources`] of a checkpoint saved before
    /// they were recorded: the formats of the files it holds (in the
    /// order of `known`, the names a run may read, unknown ones after), pi
    /// when it holds none. Before then the command line read pi alone
    /// unless `--source` said otherwise, so a state of pi's archive stays
    /// pi's and gains no records of another agent.
    pub fn recorded_sources<'f>(
        &mut self,
        files: impl IntoIterator<Item = &'f FileState>,
        known: &[&str],
    ) {
        if !self.sources.is_empty() {
            return;
        }
        let held: std::collections::BTreeSet<&str> =
            files.into_iter().map(|f| f.format.as_str()).collect();
        let mut s: Vec<String> = known
            .iter()
            .filter(|k| held.contains(*k))
            .map(|k| (*k).to_owned())
            .collect();
        s.extend(
            held.iter()
                .filter(|h| !known.contains(h))
                .map(|h| (*h).to_owned()),
        );
        if s.is_empty() {
            s.push("pi".to_owned());
        }
        self.sources = s;
    }
}

/// What earlier runs consumed of one session file.
#[derive(Debug, Clone)]
pub struct FileState {
    /// Identity and size when last read.
    pub identity: Identity,
    /// Its format's name.
    pub format: String,
    /// Its session header.
    pub header: Header,
    /// Digest of the header's fields; a file whose header changed is read
    /// again from the start.
    pub header_digest: u64,
    /// Byte offset and line number after the last complete line consumed.
    pub offset: u64,
    /// Lines before `offset`.
    pub line: u64,
    /// The last line consumed had no `\n`.
    pub open_line: bool,
    /// Bytes of a partial last line waiting for the writer.
    pub pending: u64,
    /// The format's running context at `offset` (empty for pi).
    pub context: Vec<u8>,
    /// Everything read of this file so far.
    pub report: Report,
}

/// One deduplication lineage: its sessions and the fingerprints of the
/// entries emitted, sorted, as little-endian u64 bytes (8 bytes each).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LineageState {
    /// Its sessions.
    pub sessions: Vec<String>,
    /// Sorted fingerprints, 8 little-endian bytes each.
    #[serde(with = "blob")]
    pub fingerprints: Vec<u8>,
}

/// A byte vector as one blob (a length, then the bytes), not as a sequence
/// of single bytes: postcard writes both the same way, but reads a blob
/// with one copy instead of a call per byte (64,132 fingerprints are
/// 513 KB of the generated archive's state).
pub(crate) mod blob {
    use serde::de::{Deserializer, Error, SeqAccess, Visitor};
    use serde::Serializer;

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(b)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct Blob;
        impl<'de> Visitor<'de> for Blob {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
                let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
                while let Some(b) = seq.next_element()? {
                    v.push(b);
                }
                Ok(v)
            }
        }
        d.deserialize_bytes(Blob)
    }
}

/// The output a state covers, and how much of it: a file's length, or a
/// dataset's parts (see [`Mark`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputState {
    /// Its path, as given.
    pub path: String,
    /// Bytes covered (a dataset: the sequence of its next part).
    pub len: u64,
    /// A dataset: the id its parts are named by (0 for a file).
    pub id: u64,
    /// A dataset: the parts covered, relative to `path`.
    pub parts: Vec<String>,
}

impl OutputState {
    /// What a sink is told the state covers of it.
    pub fn mark(&self) -> Mark {
        // The layout keeps one number, a file's bytes or a dataset's next
        // part: the mark carries it as both, and each sink reads its own.
        Mark {
            path: self.path.clone(),
            bytes: self.len,
            next_part: self.len,
            id: self.id,
            parts: self.parts.clone(),
            usage: None,
        }
    }

    /// What a state records of a sink's mark.
    pub fn of(m: Mark) -> OutputState {
        OutputState {
            path: m.path,
            // A file's mark has no next part, a dataset's no bytes; one
            // read back from here has the same number in both.
            len: m.bytes.max(m.next_part),
            id: m.id,
            parts: m.parts,
        }
    }
}

/// Where an output stands after a sync, for the checkpoint that covers it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mark {
    /// The output's path, as given.
    pub path: String,
    /// A file: the bytes of it the checkpoint covers.
    pub bytes: u64,
    /// A dataset: the sequence number of its next part.
    pub next_part: u64,
    /// A dataset: the id its parts are named by (0 for a file).
    pub id: u64,
    /// A dataset: the parts the checkpoint covers, as paths relative to
    /// `path` (none for a file).
    pub parts: Vec<String>,
    /// A file written with its usage rows' file beside it (`--usage-out`):
    /// that file's path, as given, and the bytes of it covered.
    pub usage: Option<(String, u64)>,
}

impl Mark {
    /// `bytes` bytes of the file at `path`.
    pub fn file(path: impl Into<String>, bytes: u64) -> Mark {
        Mark {
            path: path.into(),
            bytes,
            ..Mark::default()
        }
    }

    /// The parts of id `id` in the dataset at `dir`, the next of sequence
    /// `next`.
    pub fn dataset(dir: impl Into<String>, id: u64, next: u64, parts: Vec<String>) -> Mark {
        Mark {
            path: dir.into(),
            next_part: next,
            id,
            parts,
            ..Mark::default()
        }
    }
}
