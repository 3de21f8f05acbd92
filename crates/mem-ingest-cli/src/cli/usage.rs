//! `usage daily|weekly|monthly|session`: the tokens and cost of every
//! response the stats count, by period or by session, in ccusage's JSON
//! names (`ccusage daily --json`), read from the archive.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use mem_ingest::archive::{Archive, CountedUsage};
use mem_ingest::prices::Prices;
use serde::Serialize;

use super::output::{count, Table};
use super::{fail, summary, Agent};

/// How the responses are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Period {
    /// By day (`date`: YYYY-MM-DD in the zone).
    Daily,
    /// By week, weeks starting on Sunday as ccusage's (`week`: the
    /// Sunday's date).
    Weekly,
    /// By month (`month`: YYYY-MM).
    Monthly,
    /// By session (`sessionId`).
    Session,
}

#[derive(Args, Debug)]
pub(super) struct UsageArgs {
    /// daily, weekly, monthly or session.
    #[arg(value_enum)]
    report: Period,
    /// Session files, or folders searched recursively (default: every
    /// agent's archive that exists, as for stats).
    paths: Vec<PathBuf>,
    /// One JSON object (ccusage's names) instead of a table.
    #[arg(long)]
    json: bool,
    /// Only responses on or after this day in the zone (YYYY-MM-DD or
    /// YYYYMMDD).
    #[arg(long, value_parser = parse_day, value_name = "DATE")]
    since: Option<String>,
    /// Only responses on or before this day in the zone (inclusive, as
    /// ccusage's).
    #[arg(long, value_parser = parse_day, value_name = "DATE")]
    until: Option<String>,
    /// Read only this agent's sessions (repeatable), as stats.
    #[arg(
        long = "agent",
        visible_alias = "source",
        value_enum,
        value_name = "AGENT"
    )]
    agents: Vec<Agent>,
    /// The zone days, weeks and months are of (IANA name, as
    /// Europe/Berlin, or UTC). Default: the local zone ($TZ, else the
    /// system's).
    #[arg(long, value_name = "ZONE")]
    timezone: Option<String>,
    /// Each period's models on lines of their own.
    #[arg(long)]
    breakdown: bool,
    /// Prices from this file instead of the table shipped (ours, or
    /// LiteLLM's model_prices_and_context_window.json).
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
    /// Read the usage rows of this store (written by backfill --db)
    /// instead of the archive: the same results for what it holds.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["paths", "follow_links", "jobs"])]
    db: Option<PathBuf>,
    /// Follow symbolic links met while walking a folder.
    #[arg(long, short = 'L')]
    follow_links: bool,
    /// Worker threads (default: the number of cores).
    #[arg(long, short = 'j', value_parser = clap::value_parser!(u32).range(1..=1024))]
    jobs: Option<u32>,
    /// No summary on stderr (errors are still printed).
    #[arg(long, short = 'q')]
    quiet: bool,
}

/// `--since`/`--until`: a day, as `YYYY-MM-DD`.
fn parse_day(s: &str) -> Result<String, String> {
    let digits: String = s.chars().filter(|c| *c != '-').collect();
    let ok = digits.len() == 8
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (s.len() == 8 || (s.len() == 10 && &s[4..5] == "-" && &s[7..8] == "-"));
    let (m, d) = if ok {
        (
            digits[4..6].parse::<u32>().unwrap_or(0),
            digits[6..8].parse::<u32>().unwrap_or(0),
        )
    } else {
        (0, 0)
    };
    if !ok || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(format!("{s:?} is not a date: YYYY-MM-DD or YYYYMMDD"));
    }
    Ok(format!(
        "{}-{}-{}",
        &digits[..4],
        &digits[4..6],
        &digits[6..]
    ))
}

/// Whether `zone` names a zone the C library knows: UTC, or a file of
/// the zone database ($TZDIR, else /usr/share/zoneinfo).
fn known_zone(zone: &str) -> bool {
    if matches!(zone, "UTC" | "Etc/UTC" | "GMT") {
        return true;
    }
    if zone.is_empty() || zone.starts_with('/') || zone.split('/').any(|p| p == "..") {
        return false;
    }
    let dir = std::env::var_os("TZDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/share/zoneinfo"));
    dir.join(zone).is_file()
}

extern "C" {
    /// POSIX: reads $TZ again.
    fn tzset();
}

/// Makes `zone` the process's local zone (for [`super::when::local`]).
fn set_zone(zone: &str) {
    std::env::set_var("TZ", zone);
    // SAFETY: tzset takes no argument and only reads the environment; it
    // runs before any thread of this process reads the zone.
    #[allow(unsafe_code)]
    unsafe {
        tzset();
    }
}

/// Days from 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of days from 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The day (`YYYY-MM-DD`) of `ms` in the local zone.
fn day_of(ms: i64) -> (i64, u32, u32) {
    let l = super::when::local(ms.div_euclid(1000), false);
    (l.year, l.month, l.day)
}

fn ymd((y, m, d): (i64, u32, u32)) -> String {
    format!("{y:04}-{m:02}-{d:02}")
}

/// The period `r` falls in: its key.
fn key_of(p: Period, r: &CountedUsage) -> Option<String> {
    if p == Period::Session {
        return Some(format!("{}\u{0}{}", r.agent, r.session));
    }
    let (y, m, d) = day_of(r.time?);
    Some(match p {
        Period::Daily | Period::Session => ymd((y, m, d)),
        Period::Weekly => {
            let days = days_from_civil(y, m, d);
            // 1970-01-01 was a Thursday: days + 4 is 0 on Sundays.
            ymd(civil_from_days(days - (days + 4).rem_euclid(7)))
        }
        Period::Monthly => format!("{y:04}-{m:02}"),
    })
}

/// Tokens and cost summed, in ccusage's names.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Sums {
    input_tokens: u64,
    output_tokens: u64,
    cache_creation_tokens: u64,
    cache_read_tokens: u64,
    reasoning_output_tokens: u64,
    total_tokens: u64,
    /// The known costs summed; null when none of the responses had one.
    #[serde(rename = "costUSD")]
    cost_usd: Option<f64>,
    /// Responses of models without a price (their cost is not in
    /// `costUSD`); absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    unpriced_responses: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Sums {
    fn add(&mut self, r: &CountedUsage, cost: Option<f64>) {
        let u = &r.usage;
        // Saturating, as stats' sums are (hostile counts near u64::MAX).
        self.input_tokens = self.input_tokens.saturating_add(u.input);
        self.output_tokens = self.output_tokens.saturating_add(u.output);
        self.cache_creation_tokens = self.cache_creation_tokens.saturating_add(u.cache_write);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(u.cache_read);
        self.reasoning_output_tokens = self.reasoning_output_tokens.saturating_add(r.reasoning);
        self.total_tokens = self.total_tokens.saturating_add(u.total_tokens);
        match cost {
            Some(c) => *self.cost_usd.get_or_insert(0.0) += c,
            None => self.unpriced_responses += 1,
        }
    }
}

/// One period (or session): its key under the period's name, its sums,
/// its models.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Group {
    #[serde(skip_serializing_if = "Option::is_none")]
    date: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    week: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    month: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    project_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_activity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_activity: Option<String>,
    /// The agents whose responses it holds, by name.
    agents: Vec<&'static str>,
    #[serde(flatten)]
    sums: Sums,
    models: BTreeMap<String, Sums>,
    /// Times, for the sessions' first and last activity.
    #[serde(skip)]
    span: Option<(i64, i64)>,
}

/// The report's JSON: the groups under the period's name, then totals.
#[derive(Serialize)]
struct Report {
    #[serde(skip_serializing_if = "Option::is_none")]
    daily: Option<Vec<Group>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    weekly: Option<Vec<Group>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    monthly: Option<Vec<Group>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sessions: Option<Vec<Group>>,
    totals: Sums,
    /// Where the prices came from.
    prices: String,
}

/// ISO 8601 in UTC, to the millisecond (ccusage's `lastActivity`).
fn iso(ms: i64) -> String {
    mem_ingest::format_iso_millis(ms)
}

/// Groups `rows` by `period`, in key order (sessions: by their last
/// activity, as ccusage's), priced with `prices`, within `since..=until`.
fn group(
    rows: &[CountedUsage],
    period: Period,
    prices: &Prices,
    since: Option<&str>,
    until: Option<&str>,
) -> (Vec<Group>, Sums) {
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    let mut totals = Sums::default();
    for r in rows {
        if since.is_some() || until.is_some() {
            let Some(day) = r.time.map(|t| ymd(day_of(t))) else {
                continue;
            };
            if since.is_some_and(|s| day.as_str() < s) || until.is_some_and(|u| day.as_str() > u) {
                continue;
            }
        }
        // A response without a time is in no day: counted in the totals
        // and in its session.
        let cost = r.cost(prices);
        totals.add(r, cost);
        let Some(key) = key_of(period, r) else {
            continue;
        };
        let g = groups.entry(key.clone()).or_default();
        if g.agents.is_empty() {
            match period {
                Period::Daily => g.date = Some(key),
                Period::Weekly => g.week = Some(key),
                Period::Monthly => g.month = Some(key),
                Period::Session => {
                    g.session_id = Some(r.session.clone());
                    g.project_path = Some(r.project.clone());
                }
            }
        }
        if let Err(at) = g.agents.binary_search(&r.agent) {
            g.agents.insert(at, r.agent);
        }
        g.sums.add(r, cost);
        if let Some(m) = r.model.as_deref() {
            g.models.entry(m.to_owned()).or_default().add(r, cost);
        }
        if let Some(t) = r.time {
            g.span = Some(g.span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        }
    }
    let mut out: Vec<Group> = groups.into_values().collect();
    if period == Period::Session {
        for g in &mut out {
            if let Some((a, b)) = g.span {
                g.first_activity = Some(iso(a));
                g.last_activity = Some(iso(b));
            }
        }
        out.sort_by(|a, b| {
            (a.span.map(|s| s.1), &a.session_id).cmp(&(b.span.map(|s| s.1), &b.session_id))
        });
    }
    (out, totals)
}

/// A cost as the usage table writes it: dollars to two places, with
/// thousands separators; `-` when unknown.
fn dollars(c: Option<f64>) -> String {
    match c {
        None => "-".to_owned(),
        Some(c) => {
            let cents = (c * 100.0).round() as u64;
            format!("{}.{:02}", count(cents / 100), cents % 100)
        }
    }
}

fn cells(s: &Sums) -> Vec<String> {
    vec![
        count(s.input_tokens),
        count(s.output_tokens),
        count(s.cache_creation_tokens),
        count(s.cache_read_tokens),
        count(s.total_tokens),
        dollars(s.cost_usd),
    ]
}

fn write_table(
    out: &mut impl Write,
    period: Period,
    groups: &[Group],
    totals: &Sums,
    breakdown: bool,
) -> io::Result<()> {
    let title = match period {
        Period::Daily => "date",
        Period::Weekly => "week",
        Period::Monthly => "month",
        Period::Session => "session",
    };
    let mut rows = Vec::new();
    for g in groups {
        let name = g
            .date
            .clone()
            .or_else(|| g.week.clone())
            .or_else(|| g.month.clone())
            .or_else(|| {
                g.session_id
                    .as_deref()
                    .map(|s| super::safe::printable(s).into_owned())
            })
            .unwrap_or_default();
        rows.push((name, cells(&g.sums)));
        if breakdown {
            for (m, s) in &g.models {
                rows.push((format!("  {}", super::safe::printable(m)), cells(s)));
            }
        }
    }
    rows.push(("total".to_owned(), cells(totals)));
    let columns = [
        ("input", 5),
        ("output", 6),
        ("cache write", 11),
        ("cache read", 10),
        ("total tokens", 12),
        ("cost", 4),
    ];
    Table {
        title,
        columns: &columns,
        name_width: 10,
        rows,
    }
    .write(out)?;
    if totals.unpriced_responses > 0 {
        writeln!(
            out,
            "{} responses of models without a price: their cost is not in the totals (-)",
            count(totals.unpriced_responses)
        )?;
    }
    Ok(())
}

pub(super) fn usage(a: UsageArgs) -> i32 {
    let started = Instant::now();
    if let Some(z) = &a.timezone {
        if !known_zone(z) {
            eprintln!(
                "error: --timezone {z:?}: no such zone (an IANA name, as Europe/Berlin, or UTC)"
            );
            return 2;
        }
        set_zone(z);
    }
    let loaded;
    let prices = match &a.prices {
        None => Prices::shipped(),
        Some(p) => {
            let read = std::fs::read(p)
                .map_err(|e| e.to_string())
                .and_then(|b| Prices::from_json(&b));
            match read {
                Ok(mut t) => {
                    t.source = format!("{} ({})", p.display(), t.source);
                    loaded = t;
                    &loaded
                }
                Err(e) => {
                    eprintln!("error: --prices {}: {e}", p.display());
                    return 2;
                }
            }
        }
    };
    if let Some(db) = &a.db {
        return from_store(&a, db, prices);
    }
    let common = super::Common::for_usage(&a.paths, &a.agents, a.follow_links, a.jobs, a.quiet);
    let archive: Archive = match super::builder(&common, false, false) {
        Ok(b) => b.build(),
        Err(code) => return code,
    };
    if let Err(e) = archive.check_archive() {
        return fail(&e);
    }
    let t = match archive.usage() {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    if let Err(code) = print(&a, &t.usage, prices) {
        return code;
    }
    summary(a.quiet, &t, started, "");
    super::exit_code(&t)
}

/// `usage --db`: the store's rows, those of the agents asked for.
fn from_store(a: &UsageArgs, db: &std::path::Path, prices: &Prices) -> i32 {
    let (mut rows, since) = match mem_ingest_store::usage_rows(db) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    if !a.agents.is_empty() {
        let names: Vec<&'static str> = a.agents.iter().map(|g| g.format().name()).collect();
        rows.retain(|r| names.contains(&r.agent));
    }
    if let (Some(gap), false) = (since, a.quiet) {
        use mem_ingest_store::UsageGap;
        let at = |t: i64| super::when::minute(t, false);
        let why = match gap {
            UsageGap::Before7 => "has no usage rows (a store before schema 7): run backfill --db \
                                  once, which reads again what it read for them"
                .to_owned(),
            UsageGap::Pending(t) => format!(
                "has usage rows for what it read since {} only (its migration to schema 7): the \
                 next backfill --db reads again what it read before for them",
                at(t)
            ),
            UsageGap::Unread(t, what) => format!(
                "has no usage rows for files it read before {} (its migration to schema 7) that \
                 could not be read again: {what}",
                at(t)
            ),
        };
        eprintln!("warning: {} {why}", db.display());
    }
    match print(a, &rows, prices) {
        Ok(()) => 0,
        Err(code) => code,
    }
}

/// Groups `rows` and prints the report; Err(exit code) when writing fails.
fn print(a: &UsageArgs, rows: &[CountedUsage], prices: &Prices) -> Result<(), i32> {
    let (groups, totals) = group(
        rows,
        a.report,
        prices,
        a.since.as_deref(),
        a.until.as_deref(),
    );
    let mut out = io::stdout().lock();
    let printed = if a.json {
        let mut r = Report {
            daily: None,
            weekly: None,
            monthly: None,
            sessions: None,
            totals,
            prices: prices.source.clone(),
        };
        match a.report {
            Period::Daily => r.daily = Some(groups),
            Period::Weekly => r.weekly = Some(groups),
            Period::Monthly => r.monthly = Some(groups),
            Period::Session => r.sessions = Some(groups),
        }
        serde_json::to_writer(&mut out, &r)
            .map_err(io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
    } else {
        write_table(&mut out, a.report, &groups, &totals, a.breakdown)
    };
    match printed.and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(0),
        Err(e) => {
            eprintln!("error: writing the output: {e}");
            Err(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_sundays() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        // 2025-06-13 was a Friday: its week is Sunday 2025-06-08's.
        let d = days_from_civil(2025, 6, 13);
        assert_eq!(
            ymd(civil_from_days(d - (d + 4).rem_euclid(7))),
            "2025-06-08"
        );
        let d = days_from_civil(2025, 6, 8);
        assert_eq!(
            ymd(civil_from_days(d - (d + 4).rem_euclid(7))),
            "2025-06-08"
        );
    }

    #[test]
    fn sums_saturate_as_stats_does() {
        let huge = CountedUsage {
            agent: "gemini",
            session: "s".to_owned(),
            project: String::new(),
            file: "f".to_owned(),
            line: 1,
            seq: 0,
            time: None,
            provider: None,
            model: None,
            usage: mem_ingest::Usage {
                input: u64::MAX - 1,
                output: u64::MAX - 1,
                cache_read: u64::MAX - 1,
                cache_write: u64::MAX - 1,
                total_tokens: u64::MAX - 1,
                cost: 0.0,
            },
            reasoning: u64::MAX - 1,
            cache_write_1h: 0,
            recorded: false,
        };
        let mut s = Sums::default();
        s.add(&huge, None);
        s.add(&huge, None);
        assert_eq!(
            [
                s.input_tokens,
                s.output_tokens,
                s.cache_creation_tokens,
                s.cache_read_tokens,
                s.reasoning_output_tokens,
                s.total_tokens
            ],
            [u64::MAX; 6]
        );
        assert_eq!(s.unpriced_responses, 2);
        assert_eq!(huge.cost(Prices::shipped()), None);
    }

    #[test]
    fn dates_and_dollars() {
        assert_eq!(parse_day("2026-01-05").unwrap(), "2026-01-05");
        assert_eq!(parse_day("20260105").unwrap(), "2026-01-05");
        for bad in ["2026-1-5", "2026-13-01", "yesterday", "2026010"] {
            assert!(parse_day(bad).is_err(), "{bad}");
        }
        assert_eq!(dollars(Some(1234.565)), "1,234.57");
        assert_eq!(dollars(Some(0.004)), "0.00");
        assert_eq!(dollars(None), "-");
    }
}
