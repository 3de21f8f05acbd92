//! A Hive-partitioned Parquet dataset: [`ParquetDataset`], a [`Sink`] of
//! mem-ingest's engine, what `backfill --parquet DIR` writes.
//!
//! `DIR/records/format=<pi|claude|codex|...>/date=<YYYY-MM-DD>/<part>.parquet`:
//! the date is the record's timestamp's, in UTC; records without one are in
//! `date=__HIVE_DEFAULT_PARTITION__`, the partition Hive, Spark and DuckDB
//! read as null. The schema is [`schema`] (pinned in the README).
//!
//! Beside them, `DIR/usage/format=<agent>/date=<YYYY-MM-DD>/<part>.parquet`:
//! a row per response `stats` counts (exactly those, so that their sums
//! are `stats`' totals), dated by the response's time; the schema is
//! [`usage_schema`]. Usage parts are written, synced and covered by the
//! checkpoint with the records' parts: exactly once across kills as they
//! are. A folder in the layout of an earlier version (records at
//! `DIR/format=...`) is refused, never mixed (see [`ParquetDataset::create`]).
//!
//! ```
//! use mem_ingest::archive::{Archive, Shard};
//! use mem_ingest_dataset::ParquetDataset;
//!
//! let dir = std::env::temp_dir().join(format!("mem-ingest-ds-doc-{}", std::process::id()));
//! let mut ds = ParquetDataset::create(&dir, Shard::ALL)?;
//! let summary = Archive::builder()
//!     .path("fixtures/hand-built.jsonl")
//!     .build()
//!     .backfill(&mut ds)?;
//! assert_eq!(summary.written, 22);
//! let part = format!("part-0of1-{:016x}-000000.parquet", ds.id());
//! assert!(ds.written()[0].starts_with("records/format=pi/date=2026-"));
//! assert!(ds.written()[0].ends_with(&part));
//! // pi's usage, a row per response, beside them.
//! assert!(ds.written().last().unwrap().starts_with("usage/format=pi/date=2026-"));
//! // The folder holds parts of shard 0 of 1 now: a second run is refused.
//! assert!(ParquetDataset::create(&dir, Shard::ALL).is_err());
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Parts
//!
//! Records are buffered per partition and written as whole parts: sorted by
//! (session, file, line) within the part, written under a temporary name
//! (`.<part>.tmp`, which engines skip) and renamed. A part is written when
//! its partition's buffer reaches [`PART_ROWS`] rows or [`PART_BYTES`]
//! bytes, when all buffers together reach [`BUFFER_BYTES`] (the largest is
//! written), and at each checkpoint and at the end (all of them). Parts are
//! encoded on threads of their own, one per core at most, their rows
//! counted in [`BUFFER_BYTES`] until they are written: memory is bounded by
//! [`BUFFER_BYTES`] of rows, and for each part being written its current
//! row group's Arrow arrays and encoded pages.
//!
//! Part names are `part-<K>of<N>-<id>-<sequence>.parquet`: the shard (`0of1`
//! unsharded), the id of the run (with a checkpoint, the id of the state:
//! 16 hex digits) and a sequence of 6 digits or more, counted across the
//! runs of a state. A dataset never deletes or rewrites a part whose name is
//! not of its own id and shard; with a checkpoint, the parts the checkpoint
//! covers are listed in it, and a part of its own name that it does not
//! list (written after the last checkpoint of a killed run) is removed when
//! the next run starts.
#![deny(unsafe_code)]
#![deny(missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int64Builder, ListBuilder, StringBuilder,
    TimestampMillisecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::SortingColumn;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

pub use mem_ingest::archive::Shard;
use mem_ingest::sink::{Encoder, Mark, Place, Sink};
use mem_ingest::Record;
use mem_ingest::{Error, ErrorKind};

/// Rows of a part at most.
pub const PART_ROWS: usize = 1_000_000;
/// Bytes of a part's buffered rows at most (estimated: their strings, and
/// 256 bytes a row).
pub const PART_BYTES: usize = 128 << 20;
/// Bytes of buffered rows of all partitions together at most: past it, the
/// largest buffer is written as a part.
pub const BUFFER_BYTES: usize = 256 << 20;
/// Rows of a row group at most: DuckDB's own row group size (its unit of
/// parallel scans; Spark splits a file at row groups too).
pub const ROW_GROUP_ROWS: usize = 122_880;
/// The partition of records without a timestamp.
pub const NULL_DATE: &str = "__HIVE_DEFAULT_PARTITION__";
/// The folder of the records' table, in the dataset's folder.
pub const RECORDS: &str = "records";
/// The folder of the usage table, beside [`RECORDS`].
pub const USAGE: &str = "usage";
/// Usage rows buffered at most (all partitions together: about 60 MB):
/// past it, every usage buffer is written as a part.
pub const USAGE_BUFFER_ROWS: usize = 200_000;
/// The zstd level of every column.
const ZSTD_LEVEL: i32 = 3;
/// Columns written without a dictionary: their values are unique per row
/// or nearly, so a dictionary would be built and given up on every part.
const UNIQUE_COLUMNS: [&str; 8] = [
    "key",
    "text",
    "id",
    "parent_id",
    "byte",
    "tool_call_id",
    "message_id",
    "request_id",
];

/// The dataset's schema: every field of the NDJSON record, typed (usage as
/// `usage_*` columns, as in the store). `format` and `date` are the
/// partition columns, in the paths, not in the files.
pub fn schema() -> SchemaRef {
    use DataType::{Boolean, Float64, Int64, Utf8};
    let s = |name: &str, nullable: bool| Field::new(name, Utf8, nullable);
    let i = |name: &str| Field::new(name, Int64, true);
    Arc::new(Schema::new(vec![
        s("key", false),
        s("project", false),
        s("session", false),
        s("file", false),
        s("source", false),
        Field::new("line", Int64, false),
        Field::new("byte", Int64, false),
        s("id", true),
        s("parent_id", true),
        s("entry", false),
        s("role", false),
        Field::new("kinds", DataType::List(kinds_item()), false),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
        s("text", false),
        s("provider", true),
        s("model", true),
        i("usage_input"),
        i("usage_output"),
        i("usage_cache_read"),
        i("usage_cache_write"),
        i("usage_total_tokens"),
        Field::new("usage_cost", Float64, true),
        s("stop_reason", true),
        s("tool_name", true),
        s("tool_call_id", true),
        Field::new("is_error", Boolean, true),
        s("custom_type", true),
        s("command", true),
        i("exit_code"),
        s("agent_id", true),
        s("message_id", true),
        s("request_id", true),
        Field::new("provisional", Boolean, false),
        i("text_bytes"),
    ]))
}

/// The usage table's schema (`DIR/usage/`): a row per response `stats`
/// counts, the store's `usage` columns. `format` (the agent) and `date` (of
/// the response's time, UTC) are the partition columns.
///
/// Claude Code's responses are counted once across the archive, and a
/// response's kept copy can be replaced by a larger one found later (its
/// streamed lines, a copy in another file): such a row has `response` (its
/// index, from 0 in the order responses were first seen) and no `file` or
/// `line`; a response replaced after its row was written gets a second row
/// with `correction` true holding the difference (its counts and cost
/// may be negative), so that sums over the table are always `stats`'.
pub fn usage_schema() -> SchemaRef {
    use DataType::{Boolean, Float64, Int64, Utf8};
    let i = |name: &str| Field::new(name, Int64, false);
    Arc::new(Schema::new(vec![
        Field::new("session", Utf8, false),
        Field::new("project", Utf8, false),
        Field::new("file", Utf8, false),
        i("line"),
        Field::new("response", Int64, true),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
        Field::new("provider", Utf8, true),
        Field::new("model", Utf8, true),
        i("input"),
        i("output"),
        i("cache_read"),
        i("cache_write"),
        i("cache_write_1h"),
        i("reasoning"),
        i("total_tokens"),
        Field::new("cost", Float64, true),
        Field::new("cost_recorded", Boolean, false),
        Field::new("correction", Boolean, false),
    ]))
}

/// One usage row, owned, as the dataset stores it.
#[derive(Debug, Clone)]
struct UsageRow {
    session: String,
    project: String,
    file: String,
    line: i64,
    response: Option<i64>,
    timestamp: Option<i64>,
    provider: Option<String>,
    model: Option<String>,
    /// input, output, cache read, cache write, of it one hour, reasoning,
    /// total.
    counts: [i64; 7],
    cost: Option<f64>,
    cost_recorded: bool,
    correction: bool,
}

impl UsageRow {
    fn of(r: &mem_ingest::archive::CountedUsage) -> UsageRow {
        let u = &r.usage;
        UsageRow {
            session: r.session.clone(),
            project: r.project.clone(),
            file: r.file.clone(),
            line: sat(r.line),
            response: None,
            timestamp: r.time,
            provider: r.provider.clone(),
            model: r.model.clone(),
            counts: [
                u.input,
                u.output,
                u.cache_read,
                u.cache_write,
                r.cache_write_1h,
                r.reasoning,
                u.total_tokens,
            ]
            .map(sat),
            cost: r.cost(mem_ingest::prices::Prices::shipped()),
            cost_recorded: r.recorded,
            correction: false,
        }
    }

    /// A response's row: its usage now less what was written of it
    /// before (see [`usage_schema`]).
    fn of_response(r: &mem_ingest::sink::ResponseUsage) -> Option<UsageRow> {
        let now = r.row.as_ref().map(UsageRow::of);
        let before = r.written.as_ref().map(UsageRow::of);
        let mut row = match (now, before) {
            (Some(now), None) => now,
            // Replaced by a copy that counts the same (a sidechain's by
            // its session's): nothing to correct.
            (now, Some(before)) => before.difference(now)?,
            (None, None) => return None,
        };
        row.response = Some(i64::from(r.index));
        Some(row)
    }

    /// The correction row from this row written before to `now` (None:
    /// it left the run's bounds): dated and named by `now` (by this one
    /// when none), its counts and cost less this one's; None when that is
    /// nothing.
    fn difference(self, now: Option<UsageRow>) -> Option<UsageRow> {
        let before = self;
        let mut d = now.clone().unwrap_or_else(|| before.clone());
        let zero = [0; 7];
        let n = now.as_ref().map_or(&zero, |n| &n.counts);
        for (k, c) in d.counts.iter_mut().enumerate() {
            *c = n[k].saturating_sub(before.counts[k]);
        }
        d.cost = match (now.as_ref().map_or(Some(0.0), |n| n.cost), before.cost) {
            (Some(a), Some(b)) => Some(a - b),
            _ => None,
        };
        d.correction = true;
        (d.counts != zero || d.cost != Some(0.0)).then_some(d)
    }
}

fn kinds_item() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Utf8, false))
}

/// One record, owned, as the dataset stores it.
#[derive(Debug, Clone)]
pub struct Row {
    format: String,
    key: String,
    project: String,
    session: String,
    file: String,
    source: String,
    line: i64,
    byte: i64,
    id: Option<String>,
    parent_id: Option<String>,
    entry: String,
    role: &'static str,
    kinds: Vec<String>,
    timestamp: Option<i64>,
    text: String,
    provider: Option<String>,
    model: Option<String>,
    usage: Option<mem_ingest::Usage>,
    stop_reason: Option<String>,
    tool_name: Option<String>,
    tool_call_id: Option<String>,
    is_error: Option<bool>,
    custom_type: Option<String>,
    command: Option<String>,
    exit_code: Option<i64>,
    agent_id: Option<String>,
    message_id: Option<String>,
    request_id: Option<String>,
    provisional: bool,
    text_bytes: Option<i64>,
}

fn sat(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Row {
    /// What the row costs buffered, estimated: its strings, and 256 bytes.
    fn bytes(&self) -> usize {
        let o = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        256 + self.key.len()
            + self.project.len()
            + self.session.len()
            + self.file.len()
            + self.source.len()
            + self.entry.len()
            + self.text.len()
            + self.kinds.iter().map(|k| k.len() + 24).sum::<usize>()
            + o(&self.id)
            + o(&self.parent_id)
            + o(&self.provider)
            + o(&self.model)
            + o(&self.stop_reason)
            + o(&self.tool_name)
            + o(&self.tool_call_id)
            + o(&self.custom_type)
            + o(&self.command)
            + o(&self.agent_id)
            + o(&self.message_id)
            + o(&self.request_id)
    }

    /// The `date=` partition of the row.
    fn date(&self) -> String {
        match self.timestamp {
            Some(ms) => date_of(ms),
            None => NULL_DATE.to_owned(),
        }
    }
}

/// The UTC date of a time in Unix ms, `YYYY-MM-DD`.
pub fn date_of(ms: i64) -> String {
    let iso = mem_ingest::format_iso_millis(ms);
    match iso.split_once('T') {
        Some((d, _)) => d.to_owned(),
        None => iso,
    }
}

/// Encodes records into owned [`Row`]s on the workers.
#[derive(Debug, Clone, Copy, Default)]
pub struct RowEncoder;

impl Encoder for RowEncoder {
    type Batch = Vec<Row>;

    fn batch(&self, _bytes: u64) -> Vec<Row> {
        Vec::new()
    }

    fn encode(&self, batch: &mut Vec<Row>, r: &Record<'_>, place: Place<'_>) {
        let s = |v: Option<&str>| v.map(str::to_owned);
        batch.push(Row {
            format: place.format.to_owned(),
            key: r.key.to_owned(),
            project: r.project.to_owned(),
            session: r.session.to_owned(),
            file: place.file.to_owned(),
            source: r.source.to_owned(),
            line: sat(r.line),
            byte: sat(r.byte),
            id: s(r.id),
            parent_id: s(r.parent_id),
            entry: r.entry.to_owned(),
            role: r.role.as_str(),
            kinds: r.kinds.iter().map(|k| (*k).to_owned()).collect(),
            timestamp: r.timestamp,
            text: r.text.to_owned(),
            provider: s(r.provider),
            model: s(r.model),
            usage: r.usage,
            stop_reason: s(r.stop_reason),
            tool_name: s(r.tool_name),
            tool_call_id: s(r.tool_call_id),
            is_error: r.is_error,
            custom_type: s(r.custom_type),
            command: s(r.command),
            exit_code: r.exit_code,
            agent_id: s(r.agent_id),
            message_id: s(r.message_id),
            request_id: s(r.request_id),
            provisional: r.provisional,
            text_bytes: place.text_bytes.map(sat),
        });
    }
}

/// The rows of one partition not written yet.
#[derive(Debug, Default)]
struct Buffer {
    rows: Vec<Row>,
    bytes: usize,
}

/// A part being written on a thread of its own.
#[derive(Debug)]
struct InFlight {
    handle: std::thread::JoinHandle<Result<(), Error>>,
    /// Its path relative to the folder.
    rel: String,
    folder: PathBuf,
    /// Its rows' buffered bytes.
    bytes: usize,
}

/// A Hive-partitioned Parquet dataset in a folder (see the module docs).
#[derive(Debug)]
pub struct ParquetDataset {
    dir: PathBuf,
    shard: Shard,
    /// The id in the names of this run's parts (the state's, with one).
    id: u64,
    /// The sequence of the next part.
    next: u64,
    /// The checkpoint file this dataset pairs with, for messages.
    state: Option<PathBuf>,
    /// Partitions (format, date) and their rows not written yet.
    buffers: BTreeMap<(String, String), Buffer>,
    buffered: usize,
    /// Parts the last checkpoint covers (paths relative to `dir`).
    covered: Vec<String>,
    /// Parts written since (complete, renamed into place).
    written: Vec<String>,
    /// Parts written since the last sync that are not on the disk for sure.
    unsynced: BTreeSet<PathBuf>,
    /// Parts being written, oldest first.
    in_flight: std::collections::VecDeque<InFlight>,
    /// Parts written at once at most.
    parallel: usize,
    props: WriterProperties,
    schema: SchemaRef,
    part_rows: usize,
    /// Usage partitions (agent, date) and their rows not written yet.
    usage: BTreeMap<(String, String), Vec<UsageRow>>,
    /// Usage rows buffered, all partitions.
    usage_rows: usize,
    usage_props: WriterProperties,
    usage_schema: SchemaRef,
}

/// A new run id: 64 bits from the system's random hash keys, the time and
/// the process id.
fn new_id() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    // 0 is a file's mark.
    h.finish().max(1)
}

/// The dataset's own errors, each naming its folder; the engine's
/// [`Error`] wraps them ([`ErrorKind::Sink`]), as `From` does here.
#[derive(Debug)]
#[non_exhaustive]
pub enum DatasetError {
    /// The folder cannot be written, and is left as it is: why (parts of
    /// the same shard another run wrote).
    Refused {
        /// The dataset's folder.
        dir: PathBuf,
        /// Why.
        why: String,
    },
}

impl std::fmt::Display for DatasetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DatasetError::Refused { dir, why } => {
                write!(f, "the dataset {} {why}", dir.display())
            }
        }
    }
}

impl std::error::Error for DatasetError {}

impl From<DatasetError> for Error {
    /// A refusal is the caller's to fix (another run's folder).
    fn from(e: DatasetError) -> Error {
        let dir = match &e {
            DatasetError::Refused { dir, .. } => dir.clone(),
        };
        Error::new(&dir, ErrorKind::Sink(mem_ingest::SinkFailure::new(e, true)))
    }
}

fn refused(dir: &Path, why: String) -> Error {
    DatasetError::Refused {
        dir: dir.to_path_buf(),
        why,
    }
    .into()
}

impl ParquetDataset {
    /// A dataset written by a run without a checkpoint: a new id. A folder
    /// that already holds parts of this shard is refused (their records
    /// would be there twice), and so is one in the layout of an earlier
    /// version (records at `DIR/format=...`, without usage): the message
    /// says how to move them.
    ///
    /// # Errors
    /// `DatasetRefused` for such a folder; I/O errors reading it.
    pub fn create(dir: impl Into<PathBuf>, shard: Shard) -> Result<ParquetDataset, Error> {
        let ds = Self::new(dir.into(), shard, None);
        ds.refuse_old_layout()?;
        ds.refuse_same_shard()?;
        Ok(ds)
    }

    /// A dataset paired with the checkpoint at `state` (named in messages):
    /// the engine calls [`Sink::resume_at`] before writing, which takes the
    /// state's id and removes what a killed run left.
    pub fn append(dir: impl Into<PathBuf>, shard: Shard, state: impl Into<PathBuf>) -> Self {
        Self::new(dir.into(), shard, Some(state.into()))
    }

    fn new(dir: PathBuf, shard: Shard, state: Option<PathBuf>) -> ParquetDataset {
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(ZSTD_LEVEL).expect("a valid zstd level"),
            ))
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_sorting_columns(Some(
                [2, 3, 5]
                    .into_iter()
                    .map(|column_idx| SortingColumn {
                        column_idx,
                        descending: false,
                        nulls_first: false,
                    })
                    .collect(),
            ))
            .set_created_by(concat!("mem-ingest ", env!("CARGO_PKG_VERSION")).to_owned());
        // Columns of a value a row or nearly (texts, keys, ids): no
        // dictionary, which would be built and then given up on every part.
        let props = UNIQUE_COLUMNS.iter().fold(props, |p, c| {
            p.set_column_dictionary_enabled(ColumnPath::from(*c), false)
        });
        let props = props.build();
        let usage_props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(ZSTD_LEVEL).expect("a valid zstd level"),
            ))
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_sorting_columns(Some(
                [0, 2, 3, 4]
                    .into_iter()
                    .map(|column_idx| SortingColumn {
                        column_idx,
                        descending: false,
                        nulls_first: false,
                    })
                    .collect(),
            ))
            .set_created_by(concat!("mem-ingest ", env!("CARGO_PKG_VERSION")).to_owned())
            .build();
        ParquetDataset {
            dir,
            shard,
            id: new_id(),
            next: 0,
            state,
            buffers: BTreeMap::new(),
            buffered: 0,
            covered: Vec::new(),
            written: Vec::new(),
            unsynced: BTreeSet::new(),
            in_flight: std::collections::VecDeque::new(),
            parallel: std::thread::available_parallelism().map_or(1, |n| n.get()),
            props,
            schema: schema(),
            part_rows: PART_ROWS,
            usage: BTreeMap::new(),
            usage_rows: 0,
            usage_props,
            usage_schema: usage_schema(),
        }
    }

    /// Rows of a part at most (default [`PART_ROWS`]; at least 1).
    pub fn max_part_rows(mut self, rows: usize) -> Self {
        self.part_rows = rows.max(1);
        self
    }

    /// The dataset's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The id in this run's part names.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Parts written by this run (paths relative to the folder), in order.
    pub fn written(&self) -> &[String] {
        &self.written
    }

    /// The name prefix of this shard's parts (any run's).
    fn shard_prefix(&self) -> String {
        format!("part-{}of{}-", self.shard.k, self.shard.n)
    }

    /// The name prefix of this run's (or state's) parts.
    fn own_prefix(&self) -> String {
        format!("{}{:016x}-", self.shard_prefix(), self.id)
    }

    fn io(&self, e: io::Error) -> Error {
        Error::io(&self.dir, e)
    }

    /// Every part file under the folder's tables
    /// (`records|usage/format=*/date=*/*.parquet`, and temporary ones), as
    /// paths relative to it. A missing folder has none.
    fn parts(&self) -> Result<Vec<String>, Error> {
        let mut out = Vec::new();
        let mut stack = Vec::new();
        for t in [RECORDS, USAGE] {
            stack.push((self.dir.join(t), t.to_owned(), 0));
        }
        while let Some((dir, rel, depth)) = stack.pop() {
            let rd = match fs::read_dir(&dir) {
                Ok(rd) => rd,
                Err(e) if e.kind() == io::ErrorKind::NotFound && depth == 0 => continue,
                Err(e) => return Err(Error::io(&dir, e)),
            };
            for e in rd {
                let e = e.map_err(|e| Error::io(&dir, e))?;
                let name = e.file_name().to_string_lossy().into_owned();
                let t = e
                    .file_type()
                    .map_err(|e| Error::io(&e_path(&dir, &name), e))?;
                let rel_name = format!("{rel}/{name}");
                if t.is_dir() && depth < 2 {
                    stack.push((dir.join(&name), rel_name, depth + 1));
                } else if t.is_file() && depth == 2 {
                    out.push(rel_name);
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Refuses a folder in the layout of an earlier version (records at
    /// `DIR/format=...`, no usage): never mixed with this one.
    fn refuse_old_layout(&self) -> Result<(), Error> {
        let rd = match fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(self.io(e)),
        };
        for e in rd {
            let e = e.map_err(|e| self.io(e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("format=") {
                let d = self.dir.display();
                return Err(refused(
                    &self.dir,
                    format!(
                        "holds records in the layout of an earlier mem-ingest ({name}): records \
                         now go in {d}/{RECORDS}/format=..., beside usage rows in \
                         {d}/{USAGE}/format=..., never mixed with that layout; move them first \
                         (`mkdir {d}/{RECORDS} && mv {d}/format=* {d}/{RECORDS}/`: the --state \
                         that wrote them goes on with them, adding usage rows for what it reads \
                         from then on), or write into a new folder (with a new --state: usage \
                         for everything)"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn refuse_same_shard(&self) -> Result<(), Error> {
        let prefix = self.shard_prefix();
        if let Some(p) = self
            .parts()?
            .into_iter()
            .find(|p| file_name(p).starts_with(&prefix) && p.ends_with(".parquet"))
        {
            return Err(refused(
                &self.dir,
                format!(
                    "holds parts of shard {} already ({p}){}: their records would be there \
                     twice; write into another folder, or use the --state that wrote them",
                    self.shard,
                    if self.state.is_some() {
                        " and this state is new"
                    } else {
                        ""
                    }
                ),
            ));
        }
        Ok(())
    }

    /// The sequence of a part name of this run's id, when it is one.
    fn own_sequence(&self, rel: &str) -> Option<u64> {
        let name = file_name(rel);
        let rest = name.strip_prefix(&self.own_prefix())?;
        rest.strip_suffix(".parquet")?.parse().ok()
    }

    fn push(&mut self, row: Row) -> Result<(), Error> {
        let key = (row.format.clone(), row.date());
        let bytes = row.bytes();
        let b = self.buffers.entry(key.clone()).or_default();
        b.rows.push(row);
        b.bytes += bytes;
        self.buffered += bytes;
        if b.rows.len() >= self.part_rows || b.bytes >= PART_BYTES {
            self.write_part(&key)?;
        }
        while self.buffered >= BUFFER_BYTES {
            if !self.in_flight.is_empty() {
                self.join_one()?;
                continue;
            }
            let largest = self
                .buffers
                .iter()
                .max_by_key(|(_, b)| b.bytes)
                .map(|(k, _)| k.clone());
            match largest {
                Some(k) => self.write_part(&k)?,
                None => break,
            }
        }
        Ok(())
    }

    /// Writes the buffer of one partition as a part: sorted, under a
    /// temporary name, renamed into place.
    /// Hands the buffer of one partition to a thread that writes it as a
    /// part: sorted, under a temporary name, renamed into place. At most
    /// [`ParquetDataset::parallel`] parts are written at once; their rows
    /// count in the buffered bytes until they are done.
    fn write_part(&mut self, key: &(String, String)) -> Result<(), Error> {
        let Some(buf) = self.buffers.remove(key) else {
            return Ok(());
        };
        if buf.rows.is_empty() {
            return Ok(());
        }
        while self.in_flight.len() >= self.parallel {
            self.join_one()?;
        }
        let folder = self
            .dir
            .join(RECORDS)
            .join(format!("format={}", key.0))
            .join(format!("date={}", key.1));
        fs::create_dir_all(&folder).map_err(|e| Error::io(&folder, e))?;
        let name = format!("{}{:06}.parquet", self.own_prefix(), self.next);
        self.next += 1;
        let path = folder.join(&name);
        let tmp = folder.join(format!(".{name}.tmp"));
        let durable = self.state.is_some();
        let (schema, props) = (self.schema.clone(), self.props.clone());
        let mut rows = buf.rows;
        let handle = std::thread::spawn(move || -> Result<(), Error> {
            rows.sort_by(|a, b| (&a.session, &a.file, a.line).cmp(&(&b.session, &b.file, b.line)));
            let write = || -> Result<(), String> {
                let f = File::create(&tmp).map_err(|e| e.to_string())?;
                let mut w = ArrowWriter::try_new(f, schema.clone(), Some(props))
                    .map_err(|e| e.to_string())?;
                for chunk in rows.chunks(ROW_GROUP_ROWS) {
                    let batch = to_batch(&schema, chunk).map_err(|e| e.to_string())?;
                    w.write(&batch).map_err(|e| e.to_string())?;
                }
                let f = w.into_inner().map_err(|e| e.to_string())?;
                if durable {
                    f.sync_all().map_err(|e| e.to_string())?;
                }
                Ok(())
            };
            if let Err(why) = write() {
                let _ = fs::remove_file(&tmp);
                return Err(Error::new(&path, ErrorKind::Write(io::Error::other(why))));
            }
            fs::rename(&tmp, &path).map_err(|e| {
                let _ = fs::remove_file(&tmp);
                Error::io(&path, e)
            })
        });
        self.in_flight.push_back(InFlight {
            handle,
            rel: format!("{RECORDS}/format={}/date={}/{name}", key.0, key.1),
            folder,
            bytes: buf.bytes,
        });
        Ok(())
    }

    /// Waits for the oldest part being written.
    fn join_one(&mut self) -> Result<(), Error> {
        let Some(p) = self.in_flight.pop_front() else {
            return Ok(());
        };
        self.buffered -= p.bytes;
        let r = p.handle.join().unwrap_or_else(|_| {
            Err(Error::new(
                &self.dir.join(&p.rel),
                ErrorKind::Write(io::Error::other("the thread writing the part panicked")),
            ))
        });
        r?;
        if self.state.is_some() {
            self.unsynced.insert(p.folder);
        }
        self.written.push(p.rel);
        Ok(())
    }

    fn join_all(&mut self) -> Result<(), Error> {
        let mut first = Ok(());
        while !self.in_flight.is_empty() {
            if let Err(e) = self.join_one() {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }

    /// Writes every buffer as a part, and waits for all of them.
    fn write_all(&mut self) -> Result<(), Error> {
        let keys: Vec<_> = self.buffers.keys().cloned().collect();
        for k in keys {
            if let Err(e) = self.write_part(&k) {
                let _ = self.join_all();
                return Err(e);
            }
        }
        self.join_all()?;
        self.write_usage_parts()
    }

    fn push_usage(&mut self, agent: &str, row: UsageRow) -> Result<(), Error> {
        let date = match row.timestamp {
            Some(ms) => date_of(ms),
            None => NULL_DATE.to_owned(),
        };
        self.usage
            .entry((agent.to_owned(), date))
            .or_default()
            .push(row);
        self.usage_rows += 1;
        if self.usage_rows >= USAGE_BUFFER_ROWS.min(self.part_rows) {
            self.write_usage_parts()?;
        }
        Ok(())
    }

    /// Writes every usage buffer as a part (on this thread: usage rows are
    /// small), sorted by (session, file, line, response), under a
    /// temporary name and renamed, as the records' parts.
    fn write_usage_parts(&mut self) -> Result<(), Error> {
        let durable = self.state.is_some();
        for ((agent, date), mut rows) in std::mem::take(&mut self.usage) {
            self.usage_rows -= rows.len();
            if rows.is_empty() {
                continue;
            }
            let folder = self
                .dir
                .join(USAGE)
                .join(format!("format={agent}"))
                .join(format!("date={date}"));
            fs::create_dir_all(&folder).map_err(|e| Error::io(&folder, e))?;
            let name = format!("{}{:06}.parquet", self.own_prefix(), self.next);
            self.next += 1;
            let path = folder.join(&name);
            let tmp = folder.join(format!(".{name}.tmp"));
            rows.sort_by(|a, b| {
                (&a.session, &a.file, a.line, a.response)
                    .cmp(&(&b.session, &b.file, b.line, b.response))
            });
            let write = || -> Result<(), String> {
                let f = File::create(&tmp).map_err(|e| e.to_string())?;
                let mut w = ArrowWriter::try_new(
                    f,
                    self.usage_schema.clone(),
                    Some(self.usage_props.clone()),
                )
                .map_err(|e| e.to_string())?;
                for chunk in rows.chunks(ROW_GROUP_ROWS) {
                    let batch =
                        usage_batch(&self.usage_schema, chunk).map_err(|e| e.to_string())?;
                    w.write(&batch).map_err(|e| e.to_string())?;
                }
                let f = w.into_inner().map_err(|e| e.to_string())?;
                if durable {
                    f.sync_all().map_err(|e| e.to_string())?;
                }
                Ok(())
            };
            if let Err(why) = write() {
                let _ = fs::remove_file(&tmp);
                return Err(Error::new(&path, ErrorKind::Write(io::Error::other(why))));
            }
            fs::rename(&tmp, &path).map_err(|e| {
                let _ = fs::remove_file(&tmp);
                Error::io(&path, e)
            })?;
            if durable {
                self.unsynced.insert(folder);
            }
            self.written
                .push(format!("{USAGE}/format={agent}/date={date}/{name}"));
        }
        Ok(())
    }

    /// The mark of what is written: every part of this id so far.
    fn mark(&self) -> Mark {
        let mut parts = self.covered.clone();
        parts.extend(self.written.iter().cloned());
        Mark::dataset(
            self.dir.to_string_lossy().into_owned(),
            self.id,
            self.next,
            parts,
        )
    }
}

fn e_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

fn file_name(rel: &str) -> &str {
    rel.rsplit('/').next().unwrap_or(rel)
}

/// Syncs a folder, so that the names renamed into it are on the disk.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// One row group's rows as an Arrow batch of [`schema`].
fn to_batch(schema: &SchemaRef, rows: &[Row]) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let n = rows.len();
    let text_bytes: usize = rows.iter().map(|r| r.text.len()).sum();
    let string = |f: &dyn Fn(&Row) -> &str| -> ArrayRef {
        let bytes: usize = rows.iter().map(|r| f(r).len()).sum();
        let mut b = StringBuilder::with_capacity(n, bytes);
        for r in rows {
            b.append_value(f(r));
        }
        Arc::new(b.finish())
    };
    let opt = |f: &dyn Fn(&Row) -> Option<&str>| -> ArrayRef {
        let bytes: usize = rows.iter().map(|r| f(r).map_or(0, str::len)).sum();
        let mut b = StringBuilder::with_capacity(n, bytes);
        for r in rows {
            b.append_option(f(r));
        }
        Arc::new(b.finish())
    };
    let int = |f: &dyn Fn(&Row) -> Option<i64>| -> ArrayRef {
        let mut b = Int64Builder::with_capacity(n);
        for r in rows {
            b.append_option(f(r));
        }
        Arc::new(b.finish())
    };
    let boolean = |f: &dyn Fn(&Row) -> Option<bool>| -> ArrayRef {
        let mut b = BooleanBuilder::with_capacity(n);
        for r in rows {
            b.append_option(f(r));
        }
        Arc::new(b.finish())
    };
    let usage =
        |f: &dyn Fn(&mem_ingest::Usage) -> u64| int(&|r| r.usage.as_ref().map(|u| sat(f(u))));
    let mut kinds = ListBuilder::with_capacity(StringBuilder::new(), n).with_field(kinds_item());
    for r in rows {
        for k in &r.kinds {
            kinds.values().append_value(k);
        }
        kinds.append(true);
    }
    let mut ts = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
    for r in rows {
        ts.append_option(r.timestamp);
    }
    let mut cost = Float64Builder::with_capacity(n);
    for r in rows {
        cost.append_option(r.usage.as_ref().map(|u| u.cost));
    }
    let mut text = StringBuilder::with_capacity(n, text_bytes);
    for r in rows {
        text.append_value(&r.text);
    }
    let columns: Vec<ArrayRef> = vec![
        string(&|r| &r.key),
        string(&|r| &r.project),
        string(&|r| &r.session),
        string(&|r| &r.file),
        string(&|r| &r.source),
        int(&|r| Some(r.line)),
        int(&|r| Some(r.byte)),
        opt(&|r| r.id.as_deref()),
        opt(&|r| r.parent_id.as_deref()),
        string(&|r| &r.entry),
        string(&|r| r.role),
        Arc::new(kinds.finish()),
        Arc::new(ts.finish()),
        Arc::new(text.finish()),
        opt(&|r| r.provider.as_deref()),
        opt(&|r| r.model.as_deref()),
        usage(&|u| u.input),
        usage(&|u| u.output),
        usage(&|u| u.cache_read),
        usage(&|u| u.cache_write),
        usage(&|u| u.total_tokens),
        Arc::new(cost.finish()),
        opt(&|r| r.stop_reason.as_deref()),
        opt(&|r| r.tool_name.as_deref()),
        opt(&|r| r.tool_call_id.as_deref()),
        boolean(&|r| r.is_error),
        opt(&|r| r.custom_type.as_deref()),
        opt(&|r| r.command.as_deref()),
        int(&|r| r.exit_code),
        opt(&|r| r.agent_id.as_deref()),
        opt(&|r| r.message_id.as_deref()),
        opt(&|r| r.request_id.as_deref()),
        boolean(&|r| Some(r.provisional)),
        int(&|r| r.text_bytes),
    ];
    RecordBatch::try_new(schema.clone(), columns)
}

/// Usage rows as an Arrow batch of [`usage_schema`].
fn usage_batch(
    schema: &SchemaRef,
    rows: &[UsageRow],
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let n = rows.len();
    let string = |f: &dyn Fn(&UsageRow) -> Option<&str>| -> ArrayRef {
        let mut b = StringBuilder::with_capacity(n, 0);
        for r in rows {
            b.append_option(f(r));
        }
        Arc::new(b.finish())
    };
    let int = |f: &dyn Fn(&UsageRow) -> Option<i64>| -> ArrayRef {
        let mut b = Int64Builder::with_capacity(n);
        for r in rows {
            b.append_option(f(r));
        }
        Arc::new(b.finish())
    };
    let boolean = |f: &dyn Fn(&UsageRow) -> bool| -> ArrayRef {
        let mut b = BooleanBuilder::with_capacity(n);
        for r in rows {
            b.append_value(f(r));
        }
        Arc::new(b.finish())
    };
    let mut ts = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut cost = Float64Builder::with_capacity(n);
    for r in rows {
        ts.append_option(r.timestamp);
        cost.append_option(r.cost);
    }
    let mut columns: Vec<ArrayRef> = vec![
        string(&|r| Some(&r.session)),
        string(&|r| Some(&r.project)),
        string(&|r| Some(&r.file)),
        int(&|r| Some(r.line)),
        int(&|r| r.response),
        Arc::new(ts.finish()),
        string(&|r| r.provider.as_deref()),
        string(&|r| r.model.as_deref()),
    ];
    for k in 0..7 {
        columns.push(int(&|r| Some(r.counts[k])));
    }
    columns.push(Arc::new(cost.finish()));
    columns.push(boolean(&|r| r.cost_recorded));
    columns.push(boolean(&|r| r.correction));
    RecordBatch::try_new(schema.clone(), columns)
}

impl Sink for ParquetDataset {
    type Encoder = RowEncoder;

    fn encoder(&self) -> RowEncoder {
        RowEncoder
    }

    fn write(&mut self, batch: Vec<Row>, dropped: &[usize]) -> Result<bool, Error> {
        let mut dropped = dropped.iter().peekable();
        for (i, r) in batch.into_iter().enumerate() {
            if dropped.peek() == Some(&&i) {
                dropped.next();
                continue;
            }
            self.push(r)?;
        }
        Ok(true)
    }

    /// Writes every buffered row as parts; paired with a checkpoint, makes
    /// them durable (each part synced before its rename, then its folder).
    fn sync(&mut self) -> Result<Option<Mark>, Error> {
        self.write_all()?;
        for dir in std::mem::take(&mut self.unsynced) {
            sync_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        }
        if self.state.is_some() && !self.written.is_empty() {
            sync_dir(&self.dir).map_err(|e| self.io(e))?;
        }
        let mark = self.mark();
        if self.state.is_some() {
            // What the checkpoint about to be saved covers.
            self.covered = mark.parts.clone();
            self.written.clear();
        }
        Ok(Some(mark))
    }

    fn resume_at(&mut self, mark: Option<&Mark>, checkpoint_exists: bool) -> Result<(), Error> {
        let _ = checkpoint_exists;
        self.refuse_old_layout()?;
        let state = self.state.clone().unwrap_or_default();
        match mark {
            Some(m)
                if Path::new(&m.path) != self.dir.as_path() || m.parts.is_empty() && m.id == 0 =>
            {
                return Err(Error::new(
                    &state,
                    ErrorKind::OtherOutput {
                        paired: m.path.clone(),
                        output: self.dir.clone(),
                    },
                ))
            }
            Some(m) => {
                self.id = m.id;
                self.next = m.next_part;
                // A checkpoint of an earlier version lists its parts at
                // `format=...`: moved into `records/` (as the refusal of
                // that layout says), they are still its own.
                self.covered = m
                    .parts
                    .iter()
                    .map(|p| {
                        if p.starts_with("format=") {
                            format!("{RECORDS}/{p}")
                        } else {
                            p.clone()
                        }
                    })
                    .collect();
            }
            None => {
                // A new checkpoint: a new id, and a folder without parts of
                // this shard (another run's, whose records would be there
                // twice).
                self.refuse_same_shard()?;
                self.id = new_id();
            }
        }
        // Parts of this id the checkpoint does not cover: a killed run's.
        let covered: BTreeSet<&str> = self.covered.iter().map(String::as_str).collect();
        let own = self.own_prefix();
        let mut removed = BTreeSet::new();
        for p in self.parts()? {
            let name = file_name(&p);
            let tmp_own = name
                .strip_prefix('.')
                .is_some_and(|n| n.starts_with(&own) && n.ends_with(".parquet.tmp"));
            let stray = self.own_sequence(&p).is_some() && !covered.contains(p.as_str());
            if tmp_own || stray {
                let path = self.dir.join(&p);
                fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                removed.insert(path.parent().map(Path::to_path_buf).unwrap_or_default());
            }
        }
        for d in removed {
            sync_dir(&d).map_err(|e| Error::io(&d, e))?;
        }
        Ok(())
    }

    fn pairs_with_checkpoint(&self) -> bool {
        self.state.is_some()
    }

    /// Usage rows, as `DIR/usage/`, written with the records' parts.
    fn wants_usage(&self) -> bool {
        true
    }

    fn write_usage(&mut self, rows: &[mem_ingest::archive::CountedUsage]) -> Result<(), Error> {
        for r in rows {
            self.push_usage(r.agent, UsageRow::of(r))?;
        }
        Ok(())
    }

    /// A document's fresh rows, and a correction row for what its rows
    /// written before no longer hold (a part is never rewritten).
    fn write_document_usage(
        &mut self,
        doc: &mem_ingest::sink::DocumentUsage<'_>,
    ) -> Result<(), Error> {
        for r in doc.fresh {
            self.push_usage(r.agent, UsageRow::of(r))?;
        }
        for c in doc.corrections {
            if let Some(d) = UsageRow::of(&c.before).difference(Some(UsageRow::of(&c.now))) {
                self.push_usage(c.now.agent, d)?;
            }
        }
        Ok(())
    }

    fn write_response_usage(
        &mut self,
        rows: &[mem_ingest::sink::ResponseUsage],
    ) -> Result<(), Error> {
        for r in rows {
            let agent = match (&r.row, &r.written) {
                (Some(u), _) | (None, Some(u)) => u.agent,
                (None, None) => continue,
            };
            if let Some(row) = UsageRow::of_response(r) {
                self.push_usage(agent, row)?;
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Error> {
        self.write_all()
    }

    /// Removes the parts this run wrote that no checkpoint covers (all of
    /// them without one), and a temporary file.
    fn abandon(&mut self) {
        // A part that fails removes its temporary file itself.
        let _ = self.join_all();
        for p in self.written.drain(..) {
            let _ = fs::remove_file(self.dir.join(p));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint of the earlier layout lists its parts at `format=...`:
    /// moved into `records/`, they are still covered (not removed as a
    /// killed run's), and a part it does not list is.
    #[test]
    fn parts_an_earlier_checkpoint_lists_are_covered_once_moved() {
        let dir = std::env::temp_dir().join(format!("mem-ingest-ds-moved-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let folder = dir.join("records/format=pi/date=2026-01-15");
        fs::create_dir_all(&folder).unwrap();
        let (kept, stray) = (
            "part-0of1-00000000000000ab-000000.parquet",
            "part-0of1-00000000000000ab-000001.parquet",
        );
        for p in [kept, stray] {
            fs::write(folder.join(p), b"x").unwrap();
        }
        let mut ds = ParquetDataset::append(&dir, Shard::ALL, dir.join("st"));
        let mark = Mark::dataset(
            dir.to_string_lossy().into_owned(),
            0xab,
            2,
            vec![format!("format=pi/date=2026-01-15/{kept}")],
        );
        ds.resume_at(Some(&mark), true).unwrap();
        assert!(folder.join(kept).exists());
        assert!(!folder.join(stray).exists());
        assert_eq!(
            ds.mark().parts,
            [format!("records/format=pi/date=2026-01-15/{kept}")]
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(-1), "1969-12-31");
        // 2026-03-01T23:59:59.999Z and the next millisecond.
        assert_eq!(date_of(1_772_409_599_999), "2026-03-01");
        assert_eq!(date_of(1_772_409_600_000), "2026-03-02");
    }
}
