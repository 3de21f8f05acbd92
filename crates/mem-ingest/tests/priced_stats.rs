//! `Archive::priced_stats` (what `stats` prints) keeps each response as
//! little as pricing needs: its stats must be those of `Archive::usage`'s
//! rows priced, to the bit, and its costs each response's cost summed in
//! order.

mod common;

use std::path::PathBuf;

use mem_ingest::archive::Archive;
use mem_ingest::prices::Prices;

/// Generated archives of six agents (pi and Claude Code record costs or
/// some; Codex, Gemini CLI, Qwen Code and Copilot CLI do not), 3 MB each.
fn archives() -> Vec<PathBuf> {
    let dir = common::tmpdir("priced", "archives");
    ["pi", "claude", "codex", "gemini", "qwen", "copilot"]
        .into_iter()
        .map(|format| {
            let a = dir.join(format);
            let status = gen_corpus::GenCorpus::new()
                .args(["--format", format, "--archive"])
                .arg(&a)
                .args(["--total-mb", "3", "--seed", "41"])
                .status()
                .unwrap();
            assert!(status.success(), "gen-corpus --format {format}");
            a
        })
        .collect()
}

#[test]
fn priced_stats_are_the_usage_rows_priced() {
    let paths = archives();
    let prices = Prices::shipped();
    for jobs in [1, 2] {
        let archive = Archive::builder()
            .formats(mem_ingest::formats::builtin())
            .paths(&paths)
            .jobs(jobs)
            .build();
        let (summary, priced) = archive.priced_stats(prices).unwrap();
        assert!(summary.usage.is_empty(), "no rows kept for the stats");
        let rows = archive.usage().unwrap();
        let from_rows = rows.to_stats_priced(prices);
        assert_eq!(
            serde_json::to_string(&priced).unwrap(),
            serde_json::to_string(&from_rows).unwrap(),
            "--jobs {jobs}"
        );

        // The totals' cost: every response's, summed in order (the
        // agent's own where it recorded one).
        let mut sum = 0.0f64;
        for r in &rows.usage {
            if let Some(c) = r.cost(prices) {
                sum += c;
            }
        }
        let cost = priced.totals.usage.cost.expect("a priced total");
        assert_eq!(cost.to_bits(), sum.to_bits(), "--jobs {jobs}");

        // Each agent priced, from its own responses alone.
        let by = priced.by_source.as_ref().expect("six sources");
        let names: Vec<&str> = by.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["claude", "codex", "copilot", "gemini", "pi", "qwen"],
            "--jobs {jobs}"
        );
        for (name, st) in by {
            let mut sum = 0.0f64;
            let mut n = 0;
            for r in rows.usage.iter().filter(|r| r.agent == name.as_str()) {
                n += 1;
                if let Some(c) = r.cost(prices) {
                    sum += c;
                }
            }
            assert!(n > 0, "{name}: responses");
            let all_recorded = rows
                .usage
                .iter()
                .filter(|r| r.agent == name.as_str())
                .all(|r| r.recorded);
            match st.usage.cost {
                // A line of recorded costs alone keeps its own sum (its
                // files' sums added: the same to within rounding).
                Some(c) if all_recorded => {
                    assert!((c - sum).abs() <= 1e-12 * sum, "{name}: {c} {sum}")
                }
                Some(c) => assert_eq!(c.to_bits(), sum.to_bits(), "{name}, --jobs {jobs}"),
                None => assert_eq!(sum, 0.0, "{name}: no price, no cost"),
            }
        }
        // Each model's and each project's line: its responses' costs
        // summed in order, where one of them is priced.
        let line = |keep: &dyn Fn(&mem_ingest::archive::CountedUsage) -> bool| {
            let mut sum = 0.0f64;
            let (mut any, mut known) = (false, false);
            for r in rows.usage.iter().filter(|r| keep(r)) {
                any |= !r.recorded;
                if let Some(c) = r.cost(prices) {
                    sum += c;
                    known = true;
                }
            }
            (any, known.then_some(sum))
        };
        let mut models_priced = 0;
        for m in &priced.totals.by_model {
            let (any, cost) = line(&|r| {
                r.provider.as_deref() == Some(m.provider.as_str())
                    && r.model.as_deref() == Some(m.model.as_str())
            });
            if any {
                models_priced += 1;
                assert_eq!(
                    m.usage.cost.map(f64::to_bits),
                    cost.map(f64::to_bits),
                    "{}/{}",
                    m.provider,
                    m.model
                );
            }
        }
        assert!(models_priced >= 10, "{models_priced} models priced");
        for p in &priced.totals.by_project {
            let (any, cost) = line(&|r| r.project == p.project);
            if any {
                assert_eq!(
                    p.cost.map(f64::to_bits),
                    cost.map(f64::to_bits),
                    "{}",
                    p.project
                );
            }
        }
        // Codex records no cost: its cost is priced, and not nothing.
        let codex = by["codex"].usage.cost.expect("Codex priced");
        assert!(codex > 0.0, "Codex's cost {codex}");
    }
}
