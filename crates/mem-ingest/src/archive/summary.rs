//! What a run found, added up: its files' totals ([`FileTotals`]), each
//! source's share, failures and skips ([`Summary`]), and the stats JSON
//! built from them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use super::counted::CountedUsage;
use super::stats::{
    known_cost, FailureLine, ModelLine, ProjectLine, Roles, SkipLine, SourceStats, Stats, UsageLine,
};
use crate::format::Format;
use crate::line::Header;
use crate::report::Report;
use crate::usage::Responses;

/// A skip as reported, with its file.
#[derive(Debug, Clone)]
pub struct SkipAt {
    /// The file, as found.
    pub path: String,
    /// 1-based line number.
    pub line: u64,
    /// 0-based byte offset of the line.
    pub byte: u64,
    /// Why it was skipped.
    pub reason: String,
    /// An earlier run read the line and reported it: it is in the
    /// checkpoint this run started from, in a file unchanged or grown
    /// since.
    pub reported: bool,
}

const MAX_SKIPS: usize = 1000;

/// Of a file's skipped lines, those in the checkpoint a run started
/// from: how many, and how many of them its report details (its first
/// `skips`).
pub(super) type Reported = (u64, usize);

/// Per project: its sessions (distinct ids), records, tokens and cost.
type Projects = BTreeMap<String, (HashSet<String>, u64, u64, f64)>;

/// What of the usage counted is of files whose agent records costs
/// ([`Format::records_cost`]): a sum with none of it has a known cost only
/// when it is not 0.
#[derive(Debug, Default, Clone)]
struct Priced {
    /// Any such file.
    any: bool,
    /// The providers and models such files named.
    models: BTreeSet<(String, String)>,
    /// Their projects.
    projects: BTreeSet<String>,
}

impl Priced {
    fn file_done(&mut self, report: &Report, header: Option<&Header>) {
        self.any = true;
        for m in &report.by_model {
            // Keys are cloned only when new: this runs for every file.
            let key = (m.provider.clone(), m.model.clone());
            if !self.models.contains(&key) {
                self.models.insert(key);
            }
        }
        if let Some(h) = header {
            if !self.projects.contains(&h.cwd) {
                self.projects.insert(h.cwd.clone());
            }
        }
    }

    fn model(&self, provider: &str, model: &str) -> bool {
        self.models
            .contains(&(provider.to_owned(), model.to_owned()))
    }
}

/// What files added up to: a run's totals ([`Summary`] derefs to them), or
/// one source's share of a run (the files of one format).
#[derive(Debug, Default, Clone)]
pub struct FileTotals {
    /// Files read or accounted (unchanged ones from the checkpoint).
    pub files: u64,
    /// Files and PATHs that failed.
    pub files_failed: u64,
    /// Files with nothing but whitespace, NULs and a BOM.
    pub files_empty: u64,
    /// Bytes of the files (all of them, over every run with a checkpoint).
    pub bytes: u64,
    /// The counts, over all files.
    pub report: Report,
    /// Per project: its sessions (distinct ids: a history written twice
    /// into two files is one session), records, tokens and cost.
    by_project: Projects,
    /// What of the usage is of agents that record costs.
    priced: Priced,
    /// Files whose usage is partial ([`Format::partial_usage`]).
    pub partial_usage: u64,
}

impl FileTotals {
    /// A file (or PATH) that failed, of `size` bytes.
    fn fail(&mut self, size: u64) {
        self.files += 1;
        self.files_failed += 1;
        self.bytes += size;
    }

    fn file_done(&mut self, report: &Report, header: Option<&Header>, priced: bool, partial: bool) {
        self.partial_usage += u64::from(partial);
        if priced {
            self.priced.file_done(report, header);
        }
        self.files += 1;
        self.bytes += report.bytes + report.pending;
        self.files_empty += u64::from(report.empty);
        let pending = self.report.pending + report.pending;
        // The rows are the run's (`Summary::usage`), not the totals'.
        self.report.merge_counts(report);
        self.report.pending = pending;
        if let Some(h) = header {
            add_to_project(&mut self.by_project, h, report);
        }
    }
}

/// Adds a file's records, tokens and cost, and its session, to its project.
fn add_to_project(projects: &mut Projects, h: &Header, report: &Report) {
    // Keys are cloned only when new: this runs for every file.
    if !projects.contains_key(&h.cwd) {
        projects.insert(h.cwd.clone(), Default::default());
    }
    let e = projects.get_mut(&h.cwd).expect("inserted");
    if !e.0.contains(&h.id) {
        e.0.insert(h.id.clone());
    }
    e.1 += report.records;
    e.2 += report.usage.total_tokens;
    e.3 += report.usage.cost;
}

/// Adds kept responses' tokens and cost to their project, one by one.
fn add_responses_to_project<'u>(
    projects: &mut Projects,
    project: &str,
    usages: impl Iterator<Item = &'u crate::record::Usage>,
) {
    if !projects.contains_key(project) {
        projects.insert(project.to_owned(), Default::default());
    }
    let e = projects.get_mut(project).expect("inserted");
    for u in usages {
        e.2 = e.2.saturating_add(u.total_tokens);
        e.3 += u.cost;
    }
}

/// The models of a report, sorted by provider and model; a model whose
/// every message was a copy taken back out (a subagent's replay of its
/// parent) is not one.
fn model_lines(r: &Report, priced: &Priced) -> Vec<ModelLine> {
    let mut by_model: Vec<ModelLine> = r
        .by_model
        .iter()
        .filter(|m| m.messages > 0 || m.usage != crate::record::Usage::default())
        .map(|m| ModelLine {
            provider: m.provider.clone(),
            model: m.model.clone(),
            messages: m.messages,
            usage: UsageLine::of(&m.usage, priced.model(&m.provider, &m.model)),
        })
        .collect();
    by_model.sort_by(|a, b| (&a.provider, &a.model).cmp(&(&b.provider, &b.model)));
    by_model
}

fn project_lines(projects: &Projects, priced: &Priced) -> Vec<ProjectLine> {
    projects
        .iter()
        .map(|(p, (sessions, records, tokens, cost))| ProjectLine {
            project: p.clone(),
            sessions: sessions.len() as u64,
            records: *records,
            total_tokens: *tokens,
            cost: known_cost(*cost, priced.projects.contains(p)),
        })
        .collect()
}

/// Everything a run found, aggregated in archive order: its files'
/// totals ([`FileTotals`], as its own fields: `summary.files`), by source,
/// failures, skips, and what the run did.
#[derive(Debug, Default)]
pub struct Summary {
    /// Files, bytes, the report, projects and prices: [`FileTotals`],
    /// whose fields a summary shows as its own (`summary.files`).
    totals: FileTotals,
    /// Bytes read in this run.
    pub read: u64,
    /// Records the sink received in this run.
    pub written: u64,
    /// Revisions in this run of records written before (messages edited
    /// after they were emitted: [`crate::line::Entry::revision`]): a
    /// store's rows updated by key; NDJSON and Parquet write nothing for
    /// them. Not counted in `written`.
    pub updated: u64,
    /// Secrets replaced by `[REDACTED:<rule id>]` in the records the sink
    /// received in this run, by rule id (none with redaction off).
    pub redactions: BTreeMap<&'static str, u64>,
    /// The run's checkpoint was saved before redaction was recorded (a
    /// state before layout 12, a store before schema 6 that `redact --db`
    /// did not rewrite): its records were written unredacted, and this run
    /// went on unredacted rather than mix redacted records in.
    pub unredacted_checkpoint: bool,
    /// The source (format name) of every file so far, while they are of
    /// one: the totals are its counts, and `by_source` stays empty (a run
    /// over one agent's archive adds up nothing twice).
    only_source: Option<&'static str>,
    /// The format (its name) whose sources hand over responses, counted
    /// once each across the archive ([`crate::usage`]), and their
    /// provider ([`Format::responses_provider`]): Claude Code's.
    responses_of: Option<(&'static str, &'static str)>,
    /// The formats whose stats, when theirs alone were read, have no
    /// `by_source` table ([`Format::stats_before_sources`]): pi's.
    before_sources: Vec<&'static str>,
    /// Failures of PATHs that could not be listed (of no source).
    unlisted: u64,
    /// The same counts for each source (format name) that had a file, the
    /// failures of its files included; once files of a second source
    /// came.
    by_source: BTreeMap<&'static str, FileTotals>,
    /// Files and PATHs that failed, with why.
    pub failures: Vec<(String, String)>,
    /// The first skipped lines, with their files.
    pub skips: Vec<SkipAt>,
    /// Of the skipped lines counted, those an earlier run reported (see
    /// [`SkipAt::reported`]).
    pub reported_skips: u64,
    /// Files unchanged since the checkpoint (not opened).
    pub unchanged: u64,
    /// Files read from where the checkpoint stopped.
    pub resumed: u64,
    /// Files that shrank or were replaced: read again from the start.
    pub reread: u64,
    /// The run had a checkpoint.
    pub stateful: bool,
    /// Deduplication was on.
    pub dedupe: bool,
    /// The sink's reader went away (`| head`).
    pub closed: bool,
    /// Stopped by the stop flag.
    pub interrupted: bool,
    /// The run followed the archive.
    pub follow: bool,
    /// Each response counted, when the run keeps them
    /// ([`super::Archive::usage`]): files' in archive order, then Claude
    /// Code's (counted once across the archive), in the order first seen.
    pub usage: Vec<CountedUsage>,
    /// The run keeps [`Summary::usage`].
    keep_usage: bool,
    /// The costs of the responses counted, priced as they are counted
    /// and summed by line ([`super::Archive::priced_stats`]): no row is
    /// kept.
    pricing: Option<Box<(Arc<crate::prices::Prices>, Pricing)>>,
    /// The agents this run added to those its checkpoint reads (an
    /// `--agent` naming agents the checkpoint did not read): later runs
    /// without `--agent` read them too.
    pub added_agents: Vec<&'static str>,
    /// Usage rows written for what a store read before it kept them
    /// (schema 6 and earlier), read again by this run before it went on
    /// ([`super::counted::UsageReread`], its rows taken out).
    pub usage_reread: Option<super::counted::UsageReread>,
    /// A usage re-read's pass: Claude Code's responses as kept, with their
    /// times.
    pub(super) kept_responses: Vec<crate::usage::Response>,
}

impl std::ops::Deref for Summary {
    type Target = FileTotals;

    /// The totals' fields, as `summary.files`.
    fn deref(&self) -> &FileTotals {
        &self.totals
    }
}

impl Summary {
    /// The summary a pass starts from: what its formats say of responses
    /// and of the stats' shape, whether it has a checkpoint, whether it
    /// deduplicates.
    pub(super) fn of_pass(
        formats: &[Arc<dyn Format>],
        stateful: bool,
        dedupe: bool,
        keep: Keep,
    ) -> Summary {
        let keep_usage = matches!(keep, Keep::Rows);
        let pricing = match keep {
            Keep::Costs(prices) => Some(Box::new((prices, Pricing::default()))),
            _ => None,
        };
        Summary {
            stateful,
            dedupe,
            keep_usage,
            pricing,
            responses_of: formats
                .iter()
                .find_map(|f| Some((f.name(), f.responses_provider()?))),
            before_sources: formats
                .iter()
                .filter(|f| f.stats_before_sources())
                .map(|f| f.name())
                .collect(),
            ..Summary::default()
        }
    }

    pub(super) fn fail(
        &mut self,
        path: &Path,
        size: u64,
        error: String,
        source: Option<&'static str>,
    ) {
        // Its source first: the totals split before they count this file.
        match source {
            None => self.unlisted += 1,
            Some(s) => {
                if let Some(s) = self.source(s) {
                    s.fail(size);
                }
            }
        }
        self.totals.fail(size);
        self.failures.push((path.display().to_string(), error));
    }

    /// The totals as one source's: without the PATHs that could not be
    /// listed.
    fn as_source(&self) -> FileTotals {
        FileTotals {
            files: self.totals.files - self.unlisted,
            files_failed: self.totals.files_failed - self.unlisted,
            ..self.totals.clone()
        }
    }

    /// Where a file of `source` is counted besides the totals: nowhere
    /// while every file is of one source; else its source's counts (the
    /// first source's split from the totals when a second one comes).
    fn source(&mut self, source: &'static str) -> Option<&mut FileTotals> {
        if self.by_source.is_empty() {
            match self.only_source {
                None => {
                    self.only_source = Some(source);
                    return None;
                }
                Some(only) if only == source => return None,
                Some(only) => {
                    let first = self.as_source();
                    self.by_source.insert(only, first);
                }
            }
        }
        Some(self.by_source.entry(source).or_default())
    }

    /// A file read or accounted: its report, of which `reported` was in
    /// the checkpoint the run started from.
    pub(super) fn file_done(
        &mut self,
        path: &Path,
        report: &Report,
        header: Option<&Header>,
        format: &dyn Format,
        context: &[u8],
        reported: Reported,
    ) {
        let priced = format.records_cost();
        let partial = format.partial_usage(context);
        if let Some(s) = self.source(format.name()) {
            s.file_done(report, header, priced, partial);
        }
        self.totals.file_done(report, header, priced, partial);
        if let Some((prices, p)) = self.pricing.as_deref_mut() {
            if !report.usage_rows.is_empty() {
                let project = header.map_or("", |h| h.cwd.as_str());
                p.add(
                    prices,
                    format.name(),
                    project,
                    report.usage_rows.iter().map(|r| CostOf {
                        provider: r.provider.as_deref(),
                        model: r.model.as_deref(),
                        usage: &r.usage,
                        hour: 0,
                        recorded: priced,
                    }),
                );
            }
        }
        if self.keep_usage && !report.usage_rows.is_empty() {
            let file = path.display().to_string();
            let (session, project) = header.map_or((String::new(), String::new()), |h| {
                (h.id.clone(), h.cwd.clone())
            });
            self.usage
                .extend(report.usage_rows.iter().map(|r| CountedUsage {
                    agent: format.name(),
                    session: session.clone(),
                    project: project.clone(),
                    file: file.clone(),
                    line: r.at.line,
                    seq: r.at.seq,
                    time: r.at.time,
                    provider: r.provider.as_deref().map(str::to_owned),
                    model: r.model.as_deref().map(str::to_owned),
                    usage: r.usage,
                    reasoning: r.at.reasoning,
                    cache_write_1h: 0,
                    recorded: priced,
                }));
        }
        self.reported_skips += reported.0.min(report.skipped);
        let room = MAX_SKIPS.saturating_sub(self.skips.len());
        if room > 0 && !report.skips.is_empty() {
            let p = path.display().to_string();
            self.skips.extend(
                report
                    .skips
                    .iter()
                    .enumerate()
                    .take(room)
                    .map(|(i, s)| SkipAt {
                        path: p.clone(),
                        line: s.line,
                        byte: s.byte,
                        reason: s.reason.to_string(),
                        reported: i < reported.1,
                    }),
            );
        }
    }

    /// Adds the usage of the kept responses (see [`crate::usage`]), in the
    /// order first seen: to the totals, by model (provider `anthropic`;
    /// one message per response) and to their files' projects, in total
    /// and in Claude Code's source.
    pub(super) fn add_responses(&mut self, responses: &Responses) {
        if responses.kept().is_empty() {
            return;
        }
        let (name, provider) = match self.responses_of {
            Some((name, provider)) => (Some(name), Some(provider)),
            None => (None, None),
        };
        let mut source = name.and_then(|n| self.source(n)).map(std::mem::take);
        // Responses come in runs of one model and project (a file's): each
        // run's model and project are looked up once, and its usages added
        // one by one, in order, so every sum is the same to the last bit.
        for run in responses
            .kept()
            .chunk_by(|a, b| a.model == b.model && a.project == b.project)
        {
            let model = run[0].model.as_deref();
            let usages = || run.iter().map(|r| &r.usage);
            self.totals
                .report
                .add_usages(provider, model, usages(), true);
            add_responses_to_project(&mut self.totals.by_project, &run[0].project, usages());
            if let Some(s) = source.as_mut() {
                s.report.add_usages(provider, model, usages(), true);
                add_responses_to_project(&mut s.by_project, &run[0].project, usages());
            }
        }
        if let (Some(s), Some(name)) = (source, name) {
            self.by_source.insert(name, s);
        }
        if let Some((prices, p)) = self.pricing.as_deref_mut() {
            let agent = name.unwrap_or("claude");
            for run in responses.kept().chunk_by(|a, b| a.project == b.project) {
                p.add(
                    prices,
                    agent,
                    &run[0].project,
                    run.iter().map(|r| CostOf {
                        provider,
                        model: r.model.as_deref(),
                        usage: &r.usage,
                        hour: r.cache_write_1h,
                        // `costUSD`, where the line has one.
                        recorded: r.usage.cost != 0.0,
                    }),
                );
            }
        }
        if self.keep_usage {
            let name = name.unwrap_or("claude");
            self.usage
                .extend(responses.kept().iter().map(|r| CountedUsage {
                    agent: name,
                    session: r.session.clone(),
                    project: r.project.clone(),
                    file: String::new(),
                    line: 0,
                    seq: 0,
                    time: r.time,
                    provider: provider.map(str::to_owned),
                    model: r.model.clone(),
                    usage: r.usage,
                    reasoning: 0,
                    cache_write_1h: r.cache_write_1h,
                    // `costUSD`, where the line has one.
                    recorded: r.usage.cost != 0.0,
                }));
        }
    }

    /// The stats of the run, in the pinned JSON shape: `by_source` only
    /// when a file of a source other than pi was counted (a pi archive's
    /// stats keep the shape they had before other formats).
    pub fn to_stats(&self) -> Stats {
        let by_source = match self.only_source {
            _ if !self.by_source.is_empty() => Some(
                self.by_source
                    .iter()
                    .map(|(name, s)| ((*name).to_owned(), s.to_stats()))
                    .collect(),
            ),
            Some(only) if !self.before_sources.contains(&only) => {
                Some([(only.to_owned(), self.as_source().to_stats())].into())
            }
            _ => None,
        };
        Stats {
            totals: self.totals.to_stats(),
            failures: self
                .failures
                .iter()
                .map(|(p, e)| FailureLine {
                    path: p.clone(),
                    error: e.clone(),
                })
                .collect(),
            skips: self
                .skips
                .iter()
                .map(|s| SkipLine {
                    path: s.path.clone(),
                    line: s.line,
                    byte: s.byte,
                    reason: s.reason.clone(),
                })
                .collect(),
            by_source,
        }
    }
}

impl Summary {
    /// [`Summary::to_stats`], the costs priced: where a line's usage (the
    /// totals, a model's, a project's, an agent's) holds responses whose
    /// agent records no cost, its cost is every response's summed, each
    /// the agent's own where it recorded one, else priced from `prices`
    /// (see [`CountedUsage::cost`]); a response of a model without a price
    /// adds nothing, and a line of such responses alone stays null. Lines
    /// of recorded costs alone keep theirs, to the bit.
    ///
    /// Only for a run that kept its responses ([`super::Archive::usage`])
    /// or priced them ([`super::Archive::priced_stats`], whose prices
    /// these are then, whatever `prices` says) without a checkpoint (a
    /// run with one does not see the responses of the files it finds
    /// unchanged or grown, so that its costs would depend on what earlier
    /// runs read): else as [`Summary::to_stats`].
    pub fn to_stats_priced(&self, prices: &crate::prices::Prices) -> Stats {
        let mut s = self.to_stats();
        if self.stateful {
            return s;
        }
        if let Some((_, p)) = self.pricing.as_deref() {
            p.apply(&mut s);
        } else if self.keep_usage {
            // The rows, priced in their order as a priced run prices them.
            let mut p = Pricing::default();
            for r in &self.usage {
                p.add(
                    prices,
                    r.agent,
                    &r.project,
                    std::iter::once(CostOf {
                        provider: r.provider.as_deref(),
                        model: r.model.as_deref(),
                        usage: &r.usage,
                        hour: r.cache_write_1h,
                        recorded: r.recorded,
                    }),
                );
            }
            p.apply(&mut s);
        }
        s
    }
}

/// What a pass keeps of each response counted, beyond the sums.
#[derive(Debug, Clone, Default)]
pub(super) enum Keep {
    /// Nothing.
    #[default]
    Nothing,
    /// A [`CountedUsage`] each ([`Summary::usage`]).
    Rows,
    /// Its cost, from these prices, summed by line ([`Pricing`]).
    Costs(Arc<crate::prices::Prices>),
}

/// A response as pricing reads it.
struct CostOf<'r> {
    provider: Option<&'r str>,
    model: Option<&'r str>,
    usage: &'r crate::record::Usage,
    /// Of its cache writes, those kept an hour.
    hour: u64,
    /// Its cost is the agent's.
    recorded: bool,
}

/// Costs summed by line as responses are counted, each response priced
/// once (see [`CountedUsage::cost`]), in the order counted: the totals',
/// and each agent's.
#[derive(Debug, Default)]
struct Pricing {
    /// Each model's price, looked up once.
    resolved: Keyed<Option<crate::prices::Resolved>>,
    totals: CostLines,
    by_agent: Vec<(&'static str, CostLines)>,
}

/// A price line's sums: the total, by provider and model, by project.
#[derive(Debug, Default)]
struct CostLines {
    total: PricedSum,
    /// By provider, then model.
    models: Keyed<Keyed<PricedSum>>,
    projects: Keyed<PricedSum>,
}

/// Values by name, the last name's found without a hash (responses come
/// in runs of one model and project).
#[derive(Debug)]
struct Keyed<V> {
    index: HashMap<Box<str>, usize>,
    values: Vec<V>,
    last: Option<usize>,
    names: Vec<Box<str>>,
}

impl<V> Default for Keyed<V> {
    fn default() -> Self {
        Keyed {
            index: HashMap::new(),
            values: Vec::new(),
            last: None,
            names: Vec::new(),
        }
    }
}

impl<V> Keyed<V> {
    /// `name`'s place, `new()` its value when it has none yet.
    fn at(&mut self, name: &str, new: impl FnOnce() -> V) -> usize {
        if let Some(i) = self.last {
            if *self.names[i] == *name {
                return i;
            }
        }
        let i = match self.index.get(name) {
            Some(&i) => i,
            None => {
                let i = self.values.len();
                self.index.insert(name.into(), i);
                self.names.push(name.into());
                self.values.push(new());
                i
            }
        };
        self.last = Some(i);
        i
    }

    fn get(&self, name: &str) -> Option<&V> {
        self.index.get(name).map(|&i| &self.values[i])
    }
}

impl Pricing {
    /// Responses of `agent` in `project`, in the order counted, priced
    /// from `prices` (the same table for every call).
    fn add<'r>(
        &mut self,
        prices: &crate::prices::Prices,
        agent: &'static str,
        project: &str,
        rows: impl Iterator<Item = CostOf<'r>>,
    ) {
        let a = match self.by_agent.iter().position(|(n, _)| *n == agent) {
            Some(a) => a,
            None => {
                self.by_agent.push((agent, CostLines::default()));
                self.by_agent.len() - 1
            }
        };
        let lines = &mut self.by_agent[a].1;
        let (pt, pa) = (
            self.totals.projects.at(project, PricedSum::default),
            lines.projects.at(project, PricedSum::default),
        );
        for r in rows {
            let resolved = &mut self.resolved;
            let cost = super::counted::cost_of(r.usage, r.hour, r.recorded, || {
                let m = r.model?;
                let i = resolved.at(m, || prices.resolve(m));
                resolved.values[i]
            });
            for l in [&mut self.totals, &mut *lines] {
                l.total.add(cost, r.recorded);
                if let (Some(p), Some(m)) = (r.provider, r.model) {
                    l.model(p, m).add(cost, r.recorded);
                }
            }
            self.totals.projects.values[pt].add(cost, r.recorded);
            lines.projects.values[pa].add(cost, r.recorded);
        }
    }

    /// The stats' lines priced: the totals', and each source's from its
    /// own responses.
    fn apply(&self, s: &mut Stats) {
        self.totals.apply(&mut s.totals);
        if let Some(by) = s.by_source.as_mut() {
            for (name, st) in by.iter_mut() {
                if let Some((_, l)) = self.by_agent.iter().find(|(n, _)| *n == name.as_str()) {
                    l.apply(st);
                }
            }
        }
    }
}

impl CostLines {
    fn model(&mut self, provider: &str, model: &str) -> &mut PricedSum {
        let p = self.models.at(provider, Keyed::default);
        let m = &mut self.models.values[p];
        let i = m.at(model, PricedSum::default);
        &mut m.values[i]
    }

    fn apply(&self, st: &mut SourceStats) {
        self.total.apply(&mut st.usage.cost);
        for m in &mut st.by_model {
            if let Some(p) = self.models.get(&m.provider).and_then(|k| k.get(&m.model)) {
                p.apply(&mut m.usage.cost);
            }
        }
        for p in &mut st.by_project {
            if let Some(x) = self.projects.get(&p.project) {
                x.apply(&mut p.cost);
            }
        }
    }
}

/// A cost summed over responses: the line's own when every one recorded
/// its cost, else the known costs summed (None when none is known).
#[derive(Debug, Default)]
struct PricedSum {
    sum: f64,
    known: bool,
    priced: bool,
}

impl PricedSum {
    fn add(&mut self, cost: Option<f64>, recorded: bool) {
        if let Some(c) = cost {
            self.sum += c;
            self.known = true;
        }
        self.priced |= !recorded;
    }

    fn apply(&self, cost: &mut Option<f64>) {
        if self.priced {
            *cost = self.known.then_some(self.sum);
        }
    }
}

impl FileTotals {
    /// Its stats: the run's shape without the failures and skips (each
    /// names its file, in the run's lists).
    fn to_stats(&self) -> SourceStats {
        let (r, priced) = (&self.report, &self.priced);
        SourceStats {
            files: self.files,
            files_failed: self.files_failed,
            files_empty: self.files_empty,
            bytes: self.bytes,
            lines: r.lines,
            records: r.records,
            skipped: r.skipped,
            repaired: r.repaired,
            deduplicated: r.deduplicated,
            pending: r.pending,
            roles: Roles::from_counts(&r.roles),
            entries: r.entries.iter().map(|(k, n)| (k.to_owned(), n)).collect(),
            usage: UsageLine::of(&r.usage, priced.any),
            partial_usage: self.partial_usage,
            by_model: model_lines(r, priced),
            by_project: project_lines(&self.by_project, priced),
        }
    }
}
