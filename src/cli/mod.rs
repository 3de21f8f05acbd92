//! The command line: `backfill` and `stats` over whole archives.

mod discover;
mod exec;
mod output;
mod plan;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, IsTerminal, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mem_ingest::{
    parse_iso_millis, PiSessionSource, RecordSource, Report, Role, RoleFilter, SourceOptions,
};

use output::{FailureLine, ModelLine, ProjectLine, Roles, SkipLine, Stats};
use plan::{Plan, TaskKind};

/// Reads pi coding-agent session archives into normalised records.
#[derive(Parser, Debug)]
#[command(name = "mem-ingest", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Writes one JSON object per record (NDJSON), files in sorted path
    /// order, records in file order.
    Backfill(BackfillArgs),
    /// Prints what an archive holds.
    Stats(StatsArgs),
}

#[derive(Args, Debug)]
struct Common {
    /// Session files, or folders searched recursively for `*.jsonl`.
    /// Default: pi's archive ($PI_CODING_AGENT_SESSION_DIR, else
    /// $PI_CODING_AGENT_DIR/sessions, else ~/.pi/agent/sessions).
    paths: Vec<PathBuf>,
    /// Worker threads (default: the number of cores). The output does not
    /// depend on it.
    #[arg(long, short = 'j', value_parser = clap::value_parser!(u32).range(1..=1024))]
    jobs: Option<u32>,
    /// No progress bar, no summary.
    #[arg(long, short = 'q')]
    quiet: bool,
}

#[derive(Args, Debug)]
struct BackfillArgs {
    #[command(flatten)]
    common: Common,
    /// Write to FILE (replaced when the run ends) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Keep only these roles (repeatable): user, assistant, tool_result,
    /// bash_execution, custom, system.
    #[arg(long, value_parser = parse_role, value_name = "ROLE")]
    role: Vec<Role>,
    /// Keep records at or after TIME (RFC 3339, or a date: its start, UTC).
    /// Records without a timestamp are dropped when a time bound is set.
    #[arg(long, value_parser = parse_time, value_name = "TIME")]
    since: Option<i64>,
    /// Keep records before TIME (RFC 3339, or a date: its start, UTC).
    #[arg(long, value_parser = parse_time, value_name = "TIME")]
    until: Option<i64>,
    /// Cut longer texts at a UTF-8 boundary; `text_bytes` then gives the
    /// full length.
    #[arg(long, value_name = "BYTES")]
    max_text: Option<usize>,
}

#[derive(Args, Debug)]
struct StatsArgs {
    #[command(flatten)]
    common: Common,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

fn parse_role(s: &str) -> Result<Role, String> {
    let alias = match s {
        "toolResult" => "tool_result",
        "bashExecution" => "bash_execution",
        other => other,
    };
    Role::from_name(alias).ok_or_else(|| {
        format!("unknown role {s:?} (user, assistant, tool_result, bash_execution, custom, system)")
    })
}

fn parse_time(s: &str) -> Result<i64, String> {
    parse_iso_millis(s).ok_or_else(|| format!("{s:?} is not an RFC 3339 time or a date"))
}

/// Runs the command line; returns the exit code.
pub fn run(cli: Cli) -> i32 {
    match cli.command {
        Command::Backfill(a) => backfill(a),
        Command::Stats(a) => stats(a),
    }
}

/// What a record filter keeps, beyond roles.
#[derive(Clone, Copy)]
struct Keep {
    since: Option<i64>,
    until: Option<i64>,
    max_text: Option<usize>,
}

/// The result of one task.
#[derive(Default)]
struct PartResult {
    report: Report,
    out: Vec<u8>,
    error: Option<String>,
    header: Option<mem_ingest::Header>,
    /// Records written to `out`.
    kept: u64,
}

/// Everything a run found, aggregated in file order.
#[derive(Default)]
struct Totals {
    files: u64,
    files_failed: u64,
    files_empty: u64,
    bytes: u64,
    written: u64,
    report: Report,
    by_project: BTreeMap<String, (u64, u64, u64, f64)>,
    failures: Vec<(String, String)>,
    skips: Vec<(String, mem_ingest::Skip)>,
}

const MAX_SKIPS: usize = 1000;

impl Totals {
    fn fail(&mut self, path: &Path, size: u64, error: String) {
        self.files += 1;
        self.files_failed += 1;
        self.bytes += size;
        self.failures.push((path.display().to_string(), error));
    }

    fn file_done(&mut self, path: &Path, report: &Report, header: Option<&mem_ingest::Header>) {
        self.files += 1;
        self.bytes += report.bytes;
        self.files_empty += u64::from(report.empty);
        self.report.merge(report);
        let room = MAX_SKIPS.saturating_sub(self.skips.len());
        let p = path.display().to_string();
        self.skips.extend(
            report
                .skips
                .iter()
                .take(room)
                .map(|s| (p.clone(), s.clone())),
        );
        if let Some(h) = header {
            let e = self.by_project.entry(h.cwd.clone()).or_default();
            e.0 += 1;
            e.1 += report.records;
            e.2 += report.usage.total_tokens;
            e.3 += report.usage.cost;
        }
    }
}

fn jobs_of(c: &Common) -> usize {
    c.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |j| j as usize,
    )
}

/// Discovers and plans; the PATH failures are already in `totals`.
fn prepare(c: &Common, opts: &SourceOptions, totals: &mut Totals) -> Result<Plan, String> {
    let paths = if c.paths.is_empty() {
        vec![discover::default_archive()?]
    } else {
        c.paths.clone()
    };
    let found = discover::discover(&paths);
    for (p, e) in &found.failures {
        totals.fail(p, 0, e.clone());
    }
    Ok(plan::plan(found.files, opts))
}

fn progress(c: &Common, total: u64) -> ProgressBar {
    if c.quiet || !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template(
            "{bar:40} {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} eta {eta}",
        )
        .expect("valid template"),
    );
    pb
}

/// Reads one task: a whole file or a part of one.
fn run_task(
    plan: &Plan,
    i: usize,
    opts: &SourceOptions,
    each: &(impl Fn(&mem_ingest::Record<'_>, &str, &mut Vec<u8>) -> bool + Sync),
) -> PartResult {
    let task = &plan.tasks[i];
    let path = &plan.files[task.file].path;
    let file = path.to_string_lossy();
    let mut each = |rec: &mem_ingest::Record<'_>, out: &mut Vec<u8>| each(rec, &file, out);
    let mut res = PartResult::default();
    let io_err = |e: io::Error| e.to_string();
    let open = || File::open(path).map_err(io_err);
    let result = (|| -> Result<(), String> {
        match &task.kind {
            TaskKind::Whole => {
                let src = PiSessionSource::from_reader_with(open()?, path, opts);
                drain(src.map_err(|e| e.cause())?, &mut res, &mut each)
            }
            TaskKind::Part { start: 0, end, .. } => {
                let src = PiSessionSource::from_reader_with(open()?.take(*end), path, opts);
                drain(src.map_err(|e| e.cause())?, &mut res, &mut each)
            }
            TaskKind::Part {
                start,
                end,
                lines,
                header,
            } => {
                let mut f = open()?;
                f.seek(SeekFrom::Start(*start)).map_err(io_err)?;
                let header = header.clone().expect("later parts carry the header");
                let src = PiSessionSource::resume(
                    f.take(end - start),
                    path,
                    header,
                    *start,
                    *lines,
                    opts,
                );
                drain(src, &mut res, &mut each)
            }
        }
    })();
    if let Err(e) = result {
        res.error = Some(e);
    }
    res
}

fn drain<R: Read>(
    mut src: PiSessionSource<R>,
    res: &mut PartResult,
    each: &mut impl FnMut(&mem_ingest::Record<'_>, &mut Vec<u8>) -> bool,
) -> Result<(), String> {
    let mut out = std::mem::take(&mut res.out);
    let r = loop {
        match src.next_record() {
            Ok(Some(rec)) => res.kept += u64::from(each(&rec, &mut out)),
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    res.out = out;
    res.header = src.header().cloned();
    res.report = src.report().clone();
    r.map_err(|e| e.cause())
}

/// Runs the plan; `sink` gets each part's output in order and returns false
/// to stop (closed stdout).
fn execute(
    plan: &Plan,
    jobs: usize,
    opts: &SourceOptions,
    pb: &ProgressBar,
    totals: &mut Totals,
    each: impl Fn(&mem_ingest::Record<'_>, &str, &mut Vec<u8>) -> bool + Sync,
    mut sink: impl FnMut(&[u8]) -> bool,
) {
    // The report of the file being assembled from its parts.
    type Assembling = (
        usize,
        Option<Report>,
        Option<mem_ingest::Header>,
        Option<String>,
        usize,
    );
    let mut current: Option<Assembling> = None;
    let mut planned_failures = plan
        .files
        .iter()
        .enumerate()
        .filter(|(_, f)| f.error.is_some());
    let mut next_failed = planned_failures.next();
    let mut flush_failures_before = |file: usize, totals: &mut Totals| {
        while let Some((i, f)) = next_failed {
            if i >= file {
                break;
            }
            totals.fail(&f.path, f.size, f.error.clone().unwrap_or_default());
            next_failed = planned_failures.next();
        }
    };
    exec::run_ordered(
        plan.tasks.len(),
        jobs,
        |i| {
            let r = run_task(plan, i, opts, &each);
            let t = &plan.tasks[i];
            pb.inc(match t.kind {
                TaskKind::Whole => plan.files[t.file].size,
                TaskKind::Part { start, end, .. } => end - start,
            });
            r
        },
        |i, res| {
            let fi = plan.tasks[i].file;
            flush_failures_before(fi, totals);
            let (_, report, header, error, parts) =
                current.get_or_insert_with(|| (fi, None, None, None, 0));
            if res.error.is_none() && error.is_none() {
                match report {
                    Some(r) => r.merge(&res.report),
                    None => *report = Some(res.report),
                }
            }
            if header.is_none() {
                *header = res.header;
            }
            if error.is_none() {
                *error = res.error;
            }
            *parts += 1;
            totals.written += res.kept;
            let going = error.is_some() || sink(&res.out);
            if *parts == plan.files[fi].tasks {
                let (_, report, header, error, _) = current.take().expect("set above");
                let f = &plan.files[fi];
                match (error, report) {
                    (None, Some(report)) => totals.file_done(&f.path, &report, header.as_ref()),
                    (e, _) => totals.fail(&f.path, f.size, e.unwrap_or_default()),
                }
            }
            going
        },
    );
    flush_failures_before(usize::MAX, totals);
    pb.finish_and_clear();
}

fn summary(quiet: bool, totals: &Totals, started: Instant, what: &str) {
    if quiet {
        return;
    }
    let secs = started.elapsed().as_secs_f64();
    let mb = totals.bytes as f64 / 1e6;
    let r = &totals.report;
    let mut err = io::stderr().lock();
    for (p, e) in &totals.failures {
        let _ = writeln!(err, "error: {p}: {e}");
    }
    for (p, s) in totals.skips.iter().take(20) {
        let _ = writeln!(
            err,
            "warning: {p}:{}:{}: skipped: {}",
            s.line, s.byte, s.reason
        );
    }
    if r.skipped > 20 {
        let _ = writeln!(
            err,
            "warning: ... and {} more skipped lines",
            r.skipped - 20
        );
    }
    let _ = writeln!(
        err,
        "mem-ingest: {} files ({} failed, {} empty), {} records{}, {} skipped, {} repaired, \
         {:.1} MB in {:.2} s ({:.0} MB/s)",
        totals.files,
        totals.files_failed,
        totals.files_empty,
        r.records,
        what,
        r.skipped,
        r.repaired,
        mb,
        secs,
        if secs > 0.0 { mb / secs } else { 0.0 },
    );
}

fn backfill(a: BackfillArgs) -> i32 {
    let started = Instant::now();
    let filter = if a.role.is_empty() {
        RoleFilter::ALL
    } else {
        RoleFilter::only(&a.role)
    };
    let opts = SourceOptions::new().roles(filter);
    let mut totals = Totals::default();
    let plan = match prepare(&a.common, &opts, &mut totals) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    // Never replace an input with the output.
    if let Some(o) = &a.output {
        if let Ok(om) = std::fs::metadata(o) {
            let clash = plan.files.iter().any(|f| {
                std::fs::metadata(&f.path).is_ok_and(|m| m.dev() == om.dev() && m.ino() == om.ino())
            });
            if clash {
                eprintln!(
                    "error: the output {} is one of the input files",
                    o.display()
                );
                return 2;
            }
        }
    }
    let keep = Keep {
        since: a.since,
        until: a.until,
        max_text: a.max_text,
    };
    let (mut writer, tmp): (Box<dyn Write>, Option<PathBuf>) = match &a.output {
        None => (Box::new(io::stdout().lock()), None),
        Some(o) => {
            let name = o
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let tmp = o.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
            match File::create(&tmp) {
                Ok(f) => (Box::new(f), Some(tmp)),
                Err(e) => {
                    eprintln!("error: {}: {e}", tmp.display());
                    return 1;
                }
            }
        }
    };
    let mut writer = io::BufWriter::with_capacity(1 << 20, &mut writer);
    let pb = progress(&a.common, plan.files.iter().map(|f| f.size).sum());
    let mut closed = false;
    let mut write_error = None;
    execute(
        &plan,
        jobs_of(&a.common),
        &opts,
        &pb,
        &mut totals,
        |rec, file, out| {
            if keep.since.is_some() || keep.until.is_some() {
                let Some(t) = rec.timestamp else { return false };
                if keep.since.is_some_and(|s| t < s) || keep.until.is_some_and(|u| t >= u) {
                    return false;
                }
            }
            output::write_record(out, rec, file, keep.max_text);
            true
        },
        |bytes| match writer.write_all(bytes) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                closed = true;
                false
            }
            Err(e) => {
                write_error = Some(e);
                false
            }
        },
    );
    if !closed && write_error.is_none() {
        if let Err(e) = writer.flush() {
            if e.kind() == io::ErrorKind::BrokenPipe {
                closed = true;
            } else {
                write_error = Some(e);
            }
        }
    }
    drop(writer);
    if closed {
        return 0;
    }
    if let Some(e) = write_error {
        eprintln!("error: writing the output: {e}");
        if let Some(t) = &tmp {
            let _ = std::fs::remove_file(t);
        }
        return 1;
    }
    if let (Some(t), Some(o)) = (&tmp, &a.output) {
        if let Err(e) = std::fs::rename(t, o) {
            eprintln!("error: {}: {e}", o.display());
            return 1;
        }
    }
    let what = format!(" ({} written)", totals.written);
    summary(a.common.quiet, &totals, started, &what);
    i32::from(totals.files_failed > 0)
}

fn stats(a: StatsArgs) -> i32 {
    let started = Instant::now();
    let opts = SourceOptions::new();
    let mut totals = Totals::default();
    let plan = match prepare(&a.common, &opts, &mut totals) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let pb = progress(&a.common, plan.files.iter().map(|f| f.size).sum());
    execute(
        &plan,
        jobs_of(&a.common),
        &opts,
        &pb,
        &mut totals,
        |_, _, _| true,
        |_| true,
    );
    let s = to_stats(&totals);
    let mut out = io::stdout().lock();
    let printed = if a.json {
        serde_json::to_writer(&mut out, &s)
            .map_err(io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
    } else {
        write_table(&mut out, &s)
    };
    match printed.and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return 0,
        Err(e) => {
            eprintln!("error: writing the output: {e}");
            return 1;
        }
    }
    summary(a.common.quiet, &totals, started, "");
    i32::from(totals.files_failed > 0)
}

fn to_stats(t: &Totals) -> Stats {
    let r = &t.report;
    let mut by_model: Vec<ModelLine> = r
        .by_model
        .iter()
        .map(|m| ModelLine {
            provider: m.provider.clone(),
            model: m.model.clone(),
            messages: m.messages,
            input: m.usage.input,
            output: m.usage.output,
            cache_read: m.usage.cache_read,
            cache_write: m.usage.cache_write,
            total_tokens: m.usage.total_tokens,
            cost: m.usage.cost,
        })
        .collect();
    by_model.sort_by(|a, b| (&a.provider, &a.model).cmp(&(&b.provider, &b.model)));
    Stats {
        files: t.files,
        files_failed: t.files_failed,
        files_empty: t.files_empty,
        bytes: t.bytes,
        lines: r.lines,
        records: r.records,
        skipped: r.skipped,
        repaired: r.repaired,
        roles: Roles::from_counts(&r.roles),
        entries: r.entries.iter().map(|(k, n)| (k.to_owned(), n)).collect(),
        usage: (&r.usage).into(),
        by_model,
        by_project: t
            .by_project
            .iter()
            .map(|(p, (sessions, records, tokens, cost))| ProjectLine {
                project: p.clone(),
                sessions: *sessions,
                records: *records,
                total_tokens: *tokens,
                cost: *cost,
            })
            .collect(),
        failures: t
            .failures
            .iter()
            .map(|(p, e)| FailureLine {
                path: p.clone(),
                error: e.clone(),
            })
            .collect(),
        skips: t
            .skips
            .iter()
            .map(|(p, s)| SkipLine {
                path: p.clone(),
                line: s.line,
                byte: s.byte,
                reason: s.reason.to_string(),
            })
            .collect(),
    }
}

fn write_table(out: &mut impl Write, s: &Stats) -> io::Result<()> {
    writeln!(
        out,
        "files      {:>12}  ({} failed, {} empty)",
        s.files, s.files_failed, s.files_empty
    )?;
    writeln!(out, "bytes      {:>12}", s.bytes)?;
    writeln!(out, "lines      {:>12}", s.lines)?;
    writeln!(out, "records    {:>12}", s.records)?;
    writeln!(out, "skipped    {:>12}", s.skipped)?;
    writeln!(out, "repaired   {:>12}", s.repaired)?;
    writeln!(out, "\nroles")?;
    let r = &s.roles;
    for (name, n) in [
        ("user", r.user),
        ("assistant", r.assistant),
        ("tool_result", r.tool_result),
        ("bash_execution", r.bash_execution),
        ("custom", r.custom),
        ("system", r.system),
    ] {
        writeln!(out, "  {name:<22} {n:>12}")?;
    }
    writeln!(out, "\nentries")?;
    for (name, n) in &s.entries {
        writeln!(out, "  {name:<22} {n:>12}")?;
    }
    writeln!(out, "\nusage by model          messages        input       output   cache_read  cache_write        total       cost")?;
    for m in &s.by_model {
        writeln!(
            out,
            "  {:<22} {:>8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10.4}",
            format!("{}/{}", m.provider, m.model),
            m.messages,
            m.input,
            m.output,
            m.cache_read,
            m.cache_write,
            m.total_tokens,
            m.cost
        )?;
    }
    writeln!(
        out,
        "\nby project              sessions      records  total_tokens       cost"
    )?;
    for p in &s.by_project {
        writeln!(
            out,
            "  {:<22} {:>8} {:>12} {:>13} {:>10.4}",
            p.project, p.sessions, p.records, p.total_tokens, p.cost
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_deleted_between_discovery_and_open_fails_alone() {
        let d = std::env::temp_dir().join(format!("mem-ingest-del-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hand-built.jsonl");
        for name in ["a.jsonl", "b.jsonl", "c.jsonl"] {
            std::fs::copy(&fixture, d.join(name)).unwrap();
        }
        let opts = SourceOptions::new();
        let found = discover::discover(std::slice::from_ref(&d));
        let plan = plan::plan(found.files, &opts);
        assert_eq!(plan.tasks.len(), 3);
        std::fs::remove_file(d.join("b.jsonl")).unwrap();
        let mut totals = Totals::default();
        let ok = |_: &mem_ingest::Record<'_>, _: &str, _: &mut Vec<u8>| true;
        execute(
            &plan,
            2,
            &opts,
            &ProgressBar::hidden(),
            &mut totals,
            ok,
            |_| true,
        );
        assert_eq!(
            (totals.files, totals.files_failed, totals.report.records),
            (3, 1, 44)
        );
        assert_eq!(
            totals.failures[0].0,
            d.join("b.jsonl").display().to_string()
        );
        assert_eq!(
            totals.failures[0].1,
            "No such file or directory (os error 2)"
        );
        std::fs::remove_dir_all(d).unwrap();
    }
}
