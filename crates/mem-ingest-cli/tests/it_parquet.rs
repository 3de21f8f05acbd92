//! The Parquet dataset (`backfill --parquet DIR`) and shards (`--shard
//! K/N`): every row equal to the NDJSON record, read back with the parquet
//! crate; partitions by format and UTC date (nulls in Hive's default
//! partition); parts capped, sorted, never left half-written; a second run
//! into one shard refused; N shards equal one run; and real engines: DuckDB
//! (ignored in a plain clone, run by .ci/run, which installs it) counts
//! what `stats` counts, reads one partition for a date filter, and reads 4
//! shards as one run.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, TimestampMillisecondType};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use mem_ingest::archive::{shard_of, Archive, Shard};
use mem_ingest_dataset::{ParquetDataset, NULL_DATE};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Map, Value};

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("parquet", name)
}

fn bin() -> Command {
    common::cli()
}

/// A generated archive of about `mb` MB (forks, copies, damaged lines).
fn generate(dir: &Path, mb: u32, seed: u32) -> PathBuf {
    let arch = dir.join("archive");
    let g = gen_corpus::GenCorpus::new()
        .arg("--archive")
        .arg(&arch)
        .args(["--total-mb", &mb.to_string(), "--seed", &seed.to_string()])
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    arch
}

/// Eight lineages of pi sessions, each deduplicated within itself: a
/// session (hand-built.jsonl under another id), a fork of it and a fork of
/// the fork (each naming its parent's file, its first lines copies of the
/// parent's entries, then one of its own), and a copy of the session's file
/// in another folder (a history written twice). Files of one lineage sort
/// apart, in folders of their own.
fn lineages(d: &Path) -> PathBuf {
    let root = d.join("lineages");
    let hand = fs::read_to_string(common::fixtures().join("hand-built.jsonl")).unwrap();
    let body: Vec<&str> = hand.lines().skip(1).collect();
    for i in 0..8 {
        let session = format!("lin-{i}");
        let text = hand.replace("hand-built-0001", &session);
        let name = format!("2026-01-0{}T00-00-00-000Z_{session}.jsonl", i % 4 + 1);
        for dir in ["a", "z-copies"] {
            let dir = root.join(dir).join(format!("--p{i}--"));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join(&name), &text).unwrap();
        }
        let mut parent = name;
        for (depth, fork) in [(5, format!("fork-{i}")), (3, format!("fork2-{i}"))] {
            let header = format!(
                r#"{{"type":"session","version":3,"id":"{fork}","timestamp":"2026-01-05T00:00:00.000Z","cwd":"/tmp/p","parentSession":"/elsewhere/{parent}"}}"#
            );
            let mut lines = vec![header];
            lines.extend(body.iter().take(depth).map(|l| (*l).to_owned()));
            lines.push(
                common::user_line(&format!("own-{fork}"), "only in the fork")
                    .trim_end()
                    .to_owned(),
            );
            let name = format!("2026-01-06T00-00-00-000Z_{fork}.jsonl");
            let dir = root.join(format!("m-forks-{fork}"));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join(&name), lines.join("\n") + "\n").unwrap();
            parent = name;
        }
    }
    root
}

/// The inputs of most tests: the fixtures' pi sessions, one whose entries
/// have no timestamp, and a generated archive.
fn inputs(d: &Path) -> Vec<PathBuf> {
    let f = common::fixtures();
    let untimed = d.join("untimed.jsonl");
    fs::write(
        &untimed,
        concat!(
            r#"{"type":"session","version":3,"id":"untimed-1","cwd":"/u"}"#,
            "\n",
            r#"{"type":"message","id":"a1","parentId":null,"message":{"role":"user","content":"no time"}}"#,
            "\n",
            r#"{"type":"message","id":"a2","parentId":"a1","message":{"role":"assistant","content":[{"type":"text","text":"none"}]}}"#,
            "\n",
        ),
    )
    .unwrap();
    vec![
        untimed,
        lineages(d),
        f.join("hand-built.jsonl"),
        f.join("pi-1x.jsonl"),
        f.join("pi-classic.jsonl"),
        generate(d, 3, 7),
    ]
}

fn backfill(args: &[&str], paths: &[PathBuf]) -> Output {
    bin()
        .arg("backfill")
        .arg("-q")
        .args(args)
        .args(paths)
        .output()
        .unwrap()
}

/// Every file under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(d: &Path, rel: &str, out: &mut Vec<String>) {
        let Ok(rd) = fs::read_dir(d) else { return };
        for e in rd {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let r = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), &r, out);
            } else {
                out.push(r);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out);
    out.sort();
    out
}

/// A row of a batch as the NDJSON record it came from: nulls omitted,
/// usage nested, `provisional` only when true.
fn row_json(b: &RecordBatch, i: usize) -> Map<String, Value> {
    let mut m = Map::new();
    let mut usage = Map::new();
    for (f, col) in b.schema().fields().iter().zip(b.columns()) {
        if col.is_null(i) {
            continue;
        }
        let v: Value = match f.data_type() {
            DataType::Utf8 => col.as_string::<i32>().value(i).into(),
            DataType::Int64 => col.as_primitive::<Int64Type>().value(i).into(),
            DataType::Float64 => col.as_primitive::<Float64Type>().value(i).into(),
            DataType::Boolean => col.as_boolean().value(i).into(),
            DataType::Timestamp(..) => col
                .as_primitive::<TimestampMillisecondType>()
                .value(i)
                .into(),
            DataType::List(_) => {
                let l = col.as_list::<i32>().value(i);
                let s = l.as_string::<i32>();
                (0..s.len()).map(|j| Value::from(s.value(j))).collect()
            }
            t => panic!("unexpected column type {t}"),
        };
        let name = f.name().as_str();
        if let Some(u) = name.strip_prefix("usage_") {
            usage.insert(u.to_owned(), v);
        } else if name == "provisional" && v == Value::Bool(false) {
        } else {
            m.insert(name.to_owned(), v);
        }
    }
    if !usage.is_empty() {
        m.insert("usage".into(), Value::Object(usage));
    }
    m
}

/// Every row of the dataset, with its partition values and its part.
struct DsRow {
    part: String,
    format: String,
    date: String,
    rec: Map<String, Value>,
}

/// Every row of the dataset's records (`DIR/records/`).
fn read_dataset(dir: &Path) -> Vec<DsRow> {
    let mut out = Vec::new();
    for rel in tree(&dir.join("records")) {
        assert!(
            rel.ends_with(".parquet") && !rel.rsplit('/').next().unwrap().starts_with('.'),
            "{rel}: not a part"
        );
        let mut it = rel.split('/');
        let format = it
            .next()
            .unwrap()
            .strip_prefix("format=")
            .unwrap()
            .to_owned();
        let date = it.next().unwrap().strip_prefix("date=").unwrap().to_owned();
        let rel = format!("records/{rel}");
        let r = ParquetRecordBatchReaderBuilder::try_new(fs::File::open(dir.join(&rel)).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for b in r {
            let b = b.unwrap();
            for i in 0..b.num_rows() {
                out.push(DsRow {
                    part: rel.clone(),
                    format: format.clone(),
                    date: date.clone(),
                    rec: row_json(&b, i),
                });
            }
        }
    }
    out
}

/// Every usage row of the dataset (`DIR/usage/`): its row as JSON, with
/// `format` and `date` from its path (and `part`).
fn read_usage(dir: &Path) -> Vec<Map<String, Value>> {
    let mut out = Vec::new();
    for rel in tree(&dir.join("usage")) {
        assert!(
            rel.ends_with(".parquet") && !rel.rsplit('/').next().unwrap().starts_with('.'),
            "{rel}: not a part"
        );
        let mut it = rel.split('/');
        let format = it.next().unwrap().strip_prefix("format=").unwrap();
        let date = it.next().unwrap().strip_prefix("date=").unwrap();
        let f = fs::File::open(dir.join("usage").join(&rel)).unwrap();
        let r = ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap();
        for b in r {
            let b = b.unwrap();
            assert_eq!(b.schema(), mem_ingest_dataset::usage_schema());
            for i in 0..b.num_rows() {
                let mut m = row_json(&b, i);
                m.insert("format".into(), format.into());
                m.insert("date".into(), date.into());
                m.insert("part".into(), rel.clone().into());
                out.push(m);
            }
        }
    }
    out
}

/// The sums of the usage rows by (format, session, file, line, response):
/// each response's counts, whatever rows (corrections) made them.
fn usage_by_response(dir: &Path) -> BTreeMap<(String, String, String, i64, i64), [i64; 7]> {
    let mut by = BTreeMap::new();
    for m in read_usage(dir) {
        let s = |k: &str| m[k].as_str().unwrap().to_owned();
        let key = (
            s("format"),
            s("session"),
            s("file"),
            m["line"].as_i64().unwrap(),
            m.get("response").map_or(-1, |r| r.as_i64().unwrap()),
        );
        let e: &mut [i64; 7] = by.entry(key).or_insert([0; 7]);
        let names = [
            "input",
            "output",
            "cache_read",
            "cache_write",
            "cache_write_1h",
            "reasoning",
            "total_tokens",
        ];
        for (k, n) in names.iter().enumerate() {
            e[k] += m[*n].as_i64().unwrap();
        }
    }
    by
}

/// The records of an NDJSON output. serde_json reads floats to within an
/// ulp (no float_roundtrip): a cost is read again from its text by Rust's
/// correctly rounded parser, as the f64 the column holds.
fn ndjson(path: &Path) -> Vec<Map<String, Value>> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| match serde_json::from_str(l).unwrap() {
            Value::Object(mut m) => {
                if let Some(Value::Object(u)) = m.get_mut("usage") {
                    let at = l.find(",\"cost\":").unwrap() + 8;
                    let text = &l[at..at + l[at..].find('}').unwrap()];
                    if let Ok(c) = text.parse::<f64>() {
                        u.insert("cost".into(), c.into());
                    }
                }
                m
            }
            v => panic!("{v}"),
        })
        .collect()
}

fn sort_key(m: &Map<String, Value>) -> (String, String, i64) {
    (
        m["key"].as_str().unwrap().to_owned(),
        m["file"].as_str().unwrap().to_owned(),
        m["line"].as_i64().unwrap(),
    )
}

fn utc_date(ms: i64) -> String {
    let iso = mem_ingest::format_iso_millis(ms);
    iso[..iso.find('T').unwrap()].to_owned()
}

#[test]
fn every_row_is_its_ndjson_record_in_its_partition() {
    let d = tmpdir("rows");
    let ins = inputs(&d);
    let nd = d.join("out.ndjson");
    let ds = d.join("ds");
    assert!(backfill(&["-o", nd.to_str().unwrap()], &ins)
        .status
        .success());
    let o = backfill(&["--parquet", ds.to_str().unwrap()], &ins);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut want = ndjson(&nd);
    let rows = read_dataset(&ds);
    assert_eq!(rows.len(), want.len());
    let mut untimed = 0;
    for r in &rows {
        assert_eq!(r.format, "pi", "{}", r.part);
        match r.rec.get("timestamp") {
            Some(t) => assert_eq!(r.date, utc_date(t.as_i64().unwrap()), "{}", r.part),
            None => {
                assert_eq!(r.date, NULL_DATE);
                untimed += 1;
            }
        }
    }
    let mut got: Vec<_> = rows.into_iter().map(|r| r.rec).collect();
    got.sort_by_key(sort_key);
    want.sort_by_key(sort_key);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    // The records of untimed.jsonl, in Hive's partition for nulls.
    let want_untimed = want.iter().filter(|m| !m.contains_key("timestamp")).count();
    assert_eq!((untimed, want_untimed), (2, 2));
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn parts_are_capped_sorted_and_whole() {
    let d = tmpdir("parts");
    let ins = inputs(&d);
    let ds = d.join("ds");
    let mut sink = ParquetDataset::create(&ds, Shard::ALL)
        .unwrap()
        .max_part_rows(50);
    let s = Archive::builder()
        .paths(ins.clone())
        .build()
        .backfill(&mut sink)
        .unwrap();
    let rows = read_dataset(&ds);
    assert_eq!(rows.len() as u64, s.written);
    let mut by_part: BTreeMap<&str, Vec<&Map<String, Value>>> = BTreeMap::new();
    for r in &rows {
        by_part.entry(&r.part).or_default().push(&r.rec);
    }
    let records_parts = sink
        .written()
        .iter()
        .filter(|p| p.starts_with("records/"))
        .count();
    assert_eq!(by_part.len(), records_parts);
    let id = format!("{:016x}", sink.id());
    let mut seqs = Vec::new();
    let mut full = 0;
    for (part, recs) in &by_part {
        assert!(recs.len() <= 50, "{part}: {} rows", recs.len());
        full += usize::from(recs.len() == 50);
        let name = part.rsplit('/').next().unwrap();
        let seq = name
            .strip_prefix(&format!("part-0of1-{id}-"))
            .and_then(|n| n.strip_suffix(".parquet"))
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!(seq.len(), 6);
        seqs.push(seq.parse::<u64>().unwrap());
        let keys: Vec<_> = recs
            .iter()
            .map(|m| {
                (
                    m["session"].as_str().unwrap(),
                    m["file"].as_str().unwrap(),
                    m["line"].as_i64().unwrap(),
                )
            })
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "{part} is not sorted");
    }
    assert!(full >= 10, "{full} full parts");
    // One sequence for the records' parts and the usage's.
    for p in sink.written().iter().filter(|p| p.starts_with("usage/")) {
        let name = p.rsplit('/').next().unwrap();
        let seq = &name[name.len() - "000000.parquet".len()..name.len() - ".parquet".len()];
        seqs.push(seq.parse::<u64>().unwrap());
    }
    seqs.sort();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_second_run_into_one_shard_is_refused() {
    let d = tmpdir("refused");
    let ins = inputs(&d);
    let ds = d.join("ds");
    let dss = ds.to_str().unwrap();
    assert!(backfill(&["--parquet", dss], &ins).status.success());
    let before = tree(&ds);
    let o = backfill(&["--parquet", dss], &ins);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("holds parts of shard 0/1 already"), "{err}");
    assert_eq!(tree(&ds), before);
    // Another shard is another's parts: welcome.
    let o = backfill(&["--parquet", dss, "--shard", "1/2"], &ins);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(tree(&ds).len() > before.len());
    let o = backfill(&["--parquet", dss, "--shard", "1/2"], &ins);
    assert_eq!(o.status.code(), Some(2));
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn follow_and_other_outputs_are_refused_with_parquet() {
    let d = tmpdir("follow");
    let ds = d.join("ds");
    let st = d.join("st");
    let f = common::fixtures().join("hand-built.jsonl");
    for extra in [
        vec!["--follow", "--state", st.to_str().unwrap()],
        vec!["-o", "x.ndjson"],
        vec!["--db", "x.db"],
    ] {
        let mut args = vec!["--parquet", ds.to_str().unwrap()];
        args.extend(extra.iter().copied());
        let o = backfill(&args, std::slice::from_ref(&f));
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
    }
    assert!(!ds.exists() && !st.exists());
    let o = backfill(&["--shard", "0/2"], std::slice::from_ref(&f));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--shard needs -o FILE or --parquet DIR"));
    for bad in ["2/2", "x", "1/0"] {
        let o = backfill(&["--shard", bad, "-o", "y"], std::slice::from_ref(&f));
        assert_eq!(o.status.code(), Some(2), "{bad}");
    }
    let help = bin().args(["backfill", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).replace(char::is_whitespace, " ");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains("and --follow (exit 2)"), "{help}");
    fs::remove_dir_all(d).unwrap();
}

/// The lines of an NDJSON output without their `file` field, sorted.
fn rows_but_file(path: &Path) -> Vec<String> {
    let mut v: Vec<String> = ndjson(path)
        .into_iter()
        .map(|mut m| {
            m.remove("file");
            Value::Object(m).to_string()
        })
        .collect();
    v.sort();
    v
}

#[test]
fn shards_together_are_one_run_whatever_the_path_spelling() {
    let d = tmpdir("shards");
    let ins = inputs(&d);
    shards_together_are_one_run(&d, ins);
}

#[test]
#[ignore = "needs ../shared: samples/ of every agent (MEM_INGEST_SHARED)"]
fn shards_together_are_one_run_with_every_agents_samples() {
    let d = tmpdir("shards-samples");
    let mut ins = inputs(&d);
    ins.extend(common::shared::samples_read());
    shards_together_are_one_run(&d, ins);
}

/// `--shard k/n` for n of 2 and 3, each shard's PATHs spelled another way
/// every other shard, together give the records of one run over `ins`.
fn shards_together_are_one_run(d: &Path, ins: Vec<PathBuf>) {
    let all = d.join("all.ndjson");
    assert!(backfill(&["-o", all.to_str().unwrap()], &ins)
        .status
        .success());
    let want = rows_but_file(&all);
    // The lineages deduplicate: each fork's copies, each copied file (33
    // lines, its header a copy too).
    let s = stats(&ins);
    let dups = s["deduplicated"].as_u64().unwrap();
    assert!(dups >= 8 * (33 + 5 + 3), "{dups}");
    // The archive spelled another way below its root: shards agree.
    let spelled: Vec<PathBuf> = ins
        .iter()
        .map(|p| {
            let abs = fs::canonicalize(p).unwrap();
            let parent = abs.parent().unwrap();
            parent.join(".").join(abs.file_name().unwrap())
        })
        .collect();
    for n in [2u32, 3] {
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        for k in 0..n {
            let o = d.join(format!("s{k}of{n}.ndjson"));
            let paths = if k % 2 == 0 { &ins } else { &spelled };
            let r = backfill(
                &["-o", o.to_str().unwrap(), "--shard", &format!("{k}/{n}")],
                paths,
            );
            assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
            let rows = rows_but_file(&o);
            sizes.push(rows.len());
            got.extend(rows);
        }
        got.sort();
        assert_eq!(got.len(), want.len(), "{n} shards: {sizes:?}");
        assert!(got == want, "{n} shards differ from one run");
        assert!(sizes.iter().all(|s| *s > 0), "{n} shards: {sizes:?}");
    }
    fs::remove_dir_all(d).unwrap();
}

/// A lineage of [`lineages`] whose fork is its own root in another of `n`
/// shards than the session's.
fn split_lineage(n: u32) -> usize {
    (0..8)
        .find(|i| shard_of(&format!("fork-{i}"), n) != shard_of(&format!("lin-{i}"), n))
        .expect("one of 8 lineages")
}

/// A fork of a fork whose root is in another shard than the fork between
/// them: when that fork's file goes, the fork of the fork keeps its shard
/// (its root recorded in each shard's state), so no shard emits it again;
/// a line appended to it is emitted once, and a new fork of it goes to the
/// same shard. Without the recorded roots, it became its own root, in
/// another shard, and all its records were emitted again.
#[test]
fn a_fork_of_a_fork_keeps_its_shard_when_the_fork_between_goes() {
    let d = tmpdir("shard-roots");
    let root = lineages(&d);
    let n = 2u32;
    let i = split_lineage(n);
    let home = shard_of(&format!("lin-{i}"), n);
    let run = |tag: &str| -> Vec<Vec<String>> {
        (0..n)
            .map(|k| {
                let o = d.join(format!("s{k}.ndjson"));
                let st = d.join(format!("s{k}.state"));
                let before = fs::read_to_string(&o).unwrap_or_default().lines().count();
                let r = backfill(
                    &[
                        "-o",
                        o.to_str().unwrap(),
                        "--state",
                        st.to_str().unwrap(),
                        "--shard",
                        &format!("{k}/{n}"),
                    ],
                    std::slice::from_ref(&root),
                );
                assert!(
                    r.status.success(),
                    "{tag}: {}",
                    String::from_utf8_lossy(&r.stderr)
                );
                ndjson(&o)[before..]
                    .iter()
                    .map(|m| m["key"].as_str().unwrap().to_owned())
                    .collect()
            })
            .collect()
    };
    let first = run("first");
    let fork2 = format!("fork2-{i}");
    // fork2's own entry, the only one its copies leave it, is in its
    // root's shard.
    let own = format!("{fork2}:own-{fork2}");
    assert!(first[home as usize].contains(&own), "{first:?}");
    // Each lineage: the session's 22 records, and each fork's own entry.
    let total: usize = first.iter().map(Vec::len).sum();
    assert_eq!(total, 8 * (22 + 2), "{first:?}");
    fs::remove_dir_all(root.join(format!("m-forks-fork-{i}"))).unwrap();
    let second = run("fork gone");
    assert_eq!(second, vec![Vec::<String>::new(); n as usize]);
    // A line appended to the fork of the fork: once, in the same shard.
    let file = root
        .join(format!("m-forks-{fork2}"))
        .join(format!("2026-01-06T00-00-00-000Z_{fork2}.jsonl"));
    common::append(&file, &common::user_line("later", "appended"));
    let third = run("appended");
    let mut want = vec![Vec::<String>::new(); n as usize];
    want[home as usize].push(format!("{fork2}:later"));
    assert_eq!(third, want);
    // A new fork of it: its own entry, in the same shard.
    let fork3 = format!("fork3-{i}");
    let dir = root.join(format!("m-forks-{fork3}"));
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join(format!("2026-01-07T00-00-00-000Z_{fork3}.jsonl")),
        format!(
            r#"{{"type":"session","version":3,"id":"{fork3}","timestamp":"2026-01-07T00:00:00.000Z","cwd":"/tmp/p","parentSession":"/elsewhere/{}"}}"#,
            file.file_name().unwrap().to_str().unwrap()
        ) + "\n"
            + &common::user_line("own3", "only in the third fork"),
    )
    .unwrap();
    let fourth = run("new fork");
    let mut want = vec![Vec::<String>::new(); n as usize];
    want[home as usize].push(format!("{fork3}:own3"));
    assert_eq!(fourth, want);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn shard_hash_vectors() {
    // Documented in the README: FNV-1a 64 of the root's lineage id (values
    // from an independent implementation), modulo N.
    use mem_ingest::archive::fnv1a;
    for (root, hash, of4, of3) in [
        ("claude:*", 0xd347_d209_87e7_8067_u64, 3, 0),
        (
            "codex:019a0000-0000-7000-8000-000000000001",
            0xaae5_e5ee_ab08_fa97,
            3,
            0,
        ),
        (
            "0b5b2a4e-1f4c-4a59-a2b6-7c3a57c1d0e1",
            0x3d2c_6330_f076_7c50,
            0,
            1,
        ),
    ] {
        assert_eq!(fnv1a(root), hash, "{root}");
        assert_eq!(shard_of(root, 4), of4, "{root}");
        assert_eq!(shard_of(root, 3), of3, "{root}");
        assert_eq!(shard_of(root, 1), 0);
    }
}

/// (key, file, line) of every row of the dataset, sorted.
fn row_ids(dir: &Path) -> Vec<(String, String, i64)> {
    let mut v: Vec<_> = read_dataset(dir).iter().map(|r| sort_key(&r.rec)).collect();
    v.sort();
    v
}

#[test]
fn with_a_state_runs_add_parts_and_a_shard_is_kept() {
    let d = tmpdir("state");
    let ins = inputs(&d);
    let ds = d.join("ds");
    let st = d.join("st");
    let (dss, sts) = (ds.to_str().unwrap(), st.to_str().unwrap());
    let o = backfill(&["--parquet", dss, "--state", sts, "--shard", "1/2"], &ins);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let first = tree(&ds);
    let n = row_ids(&ds).len();
    // Unchanged: nothing new, no part.
    assert!(
        backfill(&["--parquet", dss, "--state", sts, "--shard", "1/2"], &ins)
            .status
            .success()
    );
    assert_eq!(tree(&ds), first);
    // Lines appended: exactly their records, in a new part of the same id
    // and a later sequence; the parts before untouched.
    common::append(
        &ins[0],
        &(common::user_line("z1", "one") + &common::user_line("z2", "two")),
    );
    let again = backfill(&["--parquet", dss, "--state", sts, "--shard", "1/2"], &ins);
    assert!(again.status.success());
    let second = tree(&ds);
    let added: Vec<_> = second.iter().filter(|p| !first.contains(p)).collect();
    // untimed.jsonl is shard 1's (FNV-1a of `untimed-1`, see the vectors).
    assert_eq!(shard_of("untimed-1", 2), 1);
    assert_eq!(row_ids(&ds).len(), n + 2);
    assert_eq!(added.len(), 1, "{added:?}");
    assert!(
        added[0].starts_with("records/format=pi/date=2026-02-01/"),
        "{}",
        added[0]
    );
    // part-1of2-<16 hex digits>-: the state's id.
    let id = &first[0].rsplit('/').next().unwrap()[..27];
    assert!(added[0].contains(id), "{} {id}", added[0]);
    assert!(first.iter().all(|p| second.contains(p)));
    // The state records its shard and its output.
    let o = backfill(&["--parquet", dss, "--state", sts, "--shard", "0/2"], &ins);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--shard: state has 1/2, this run 0/2"),
        "{err}"
    );
    let o = backfill(&["--parquet", dss, "--state", sts], &ins);
    assert_eq!(o.status.code(), Some(2));
    let other = d.join("other.ndjson");
    let o = backfill(
        &[
            "-o",
            other.to_str().unwrap(),
            "--state",
            sts,
            "--shard",
            "1/2",
        ],
        &ins,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(!other.exists());
    // A new state into a DIR holding this shard's parts: refused.
    let st2 = d.join("st2");
    let o = backfill(
        &[
            "--parquet",
            dss,
            "--state",
            st2.to_str().unwrap(),
            "--shard",
            "1/2",
        ],
        &ins,
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(tree(&ds), second);
    fs::remove_dir_all(d).unwrap();
}

/// A generated archive of `agent` of about `mb` MB.
fn generate_agent(dir: &Path, agent: &str, mb: u32, seed: u32) -> PathBuf {
    let arch = dir.join(agent);
    let g = gen_corpus::GenCorpus::new()
        .args(["--format", agent, "--archive"])
        .arg(&arch)
        .args(["--total-mb", &mb.to_string(), "--seed", &seed.to_string()])
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    arch
}

#[test]
fn killed_at_any_moment_every_record_exactly_once() {
    let d = tmpdir("kill");
    // pi's usage rows come with their lines; Claude Code's responses,
    // counted across the archive, at each checkpoint.
    let ins = [generate(&d, 10, 5), generate_agent(&d, "claude", 3, 5)];
    let clean = d.join("clean");
    assert!(backfill(&["--parquet", clean.to_str().unwrap()], &ins)
        .status
        .success());
    let want = row_ids(&clean);
    let want_usage = usage_by_response(&clean);
    let ds = d.join("ds");
    let st = d.join("st");
    // Parts of another run in the same DIR (another shard's): never touched.
    let other =
        ds.join("records/format=pi/date=2020-01-01/part-1of2-00000000000000aa-000000.parquet");
    fs::create_dir_all(other.parent().unwrap()).unwrap();
    fs::copy(clean.join(&tree(&clean)[0]), &other).unwrap();
    let mut kills = 0;
    let mut delay_ms = 20u64;
    let started = std::time::Instant::now();
    loop {
        let mut child = bin()
            .args(["backfill", "-q", "--jobs", "2", "--checkpoint-ms", "10"])
            .args([
                "--parquet",
                ds.to_str().unwrap(),
                "--state",
                st.to_str().unwrap(),
            ])
            .args(&ins)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(delay_ms);
        let mut done = None;
        while std::time::Instant::now() < deadline {
            if let Some(st) = child.try_wait().unwrap() {
                done = Some(st);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        match done {
            Some(st) => {
                assert!(st.success());
                break;
            }
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
            }
        }
        delay_ms = delay_ms * 3 / 2 + 10;
        assert!(
            started.elapsed() < std::time::Duration::from_secs(240),
            "did not finish"
        );
    }
    assert!(kills >= 3, "only {kills} kills");
    assert!(other.exists());
    fs::remove_file(&other).unwrap();
    let got = row_ids(&ds);
    assert_eq!(got.len(), want.len(), "after {kills} kills");
    assert!(got == want, "after {kills} kills");
    // Usage: each response's counts once, as a run not killed wrote them
    // (a Claude Code response cut by a checkpoint has a correction row),
    // and the sums are stats'.
    let got_usage = usage_by_response(&ds);
    assert_eq!(got_usage.len(), want_usage.len(), "after {kills} kills");
    assert!(got_usage == want_usage, "after {kills} kills");
    let s = stats(&ins);
    for agent in ["pi", "claude"] {
        let sum: i64 = want_usage
            .iter()
            .filter(|(k, _)| k.0 == agent)
            .map(|(_, c)| c[6])
            .sum();
        let st = &s["by_source"][agent]["usage"]["total_tokens"];
        assert_eq!(Some(sum), st.as_i64(), "{agent}");
        assert!(sum > 0, "{agent}");
    }
    fs::remove_dir_all(d).unwrap();
}

/// Claude Code's streamed responses across incremental runs into one
/// dataset: a response read in part (its first, provisional line) has its
/// row; the run that reads its final line adds a correction row of the
/// difference, and so does a larger copy found later; after each run the
/// usage rows sum to a fresh `stats` of the file, and by response to what
/// a fresh dataset of the whole file holds (one row each).
#[test]
fn claude_streamed_responses_sum_to_stats_across_runs() {
    let d = tmpdir("claude-runs");
    let s = d.join("claude-usage.jsonl");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/claude-usage.jsonl");
    let all = fs::read_to_string(data).unwrap();
    let lines: Vec<&str> = all.split_inclusive('\n').collect();
    fs::write(&s, lines[..2].concat()).unwrap();
    let (ds, st) = (d.join("ds"), d.join("st"));
    let run = || {
        let o = backfill(
            &[
                "--parquet",
                ds.to_str().unwrap(),
                "--state",
                st.to_str().unwrap(),
            ],
            std::slice::from_ref(&s),
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        stats(std::slice::from_ref(&s))["usage"]["total_tokens"]
            .as_i64()
            .unwrap()
    };
    let rows = || {
        let mut v: Vec<(i64, i64, bool)> = read_usage(&ds)
            .iter()
            .map(|m| {
                assert_eq!(m["format"], "claude");
                assert_eq!(m["date"], "2026-03-02");
                assert_eq!(
                    (&m["file"], &m["line"]),
                    (&Value::from(""), &Value::from(0))
                );
                (
                    m["response"].as_i64().unwrap(),
                    m["total_tokens"].as_i64().unwrap(),
                    m["correction"].as_bool().unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let sum = |v: &[(i64, i64, bool)]| v.iter().map(|r| r.1).sum::<i64>();
    // msg_01A's first, provisional line: 10 + 1 + 100.
    assert_eq!(run(), 111);
    assert_eq!(rows(), [(0, 111, false)]);
    fs::write(&s, &all).unwrap();
    let total = run();
    assert_eq!(total, 221);
    // msg_01A final (185: 74 more), msg_01B (28), msg_01C (8).
    let second = rows();
    assert_eq!(
        second,
        [
            (0, 74, true),
            (0, 111, false),
            (1, 28, false),
            (2, 8, false)
        ]
    );
    assert_eq!(sum(&second), total);
    // Unchanged: no part.
    let parts = tree(&ds);
    assert_eq!(run(), 221);
    assert_eq!(tree(&ds), parts);
    // A later copy of msg_01C with more output (14) and a recorded cost.
    common::append(&s, MSG_01C_AGAIN);
    let total = run();
    assert_eq!(total, 227);
    let third = rows();
    assert_eq!(third.len(), 5);
    assert!(third.contains(&(2, 6, true)), "{third:?}");
    assert_eq!(sum(&third), total);
    // The cost corrected too: the rows' costs sum to stats'.
    let cost: f64 = read_usage(&ds)
        .iter()
        .map(|m| m["cost"].as_f64().unwrap())
        .sum();
    let want = stats(std::slice::from_ref(&s))["usage"]["cost"]
        .as_f64()
        .unwrap();
    assert!((cost - want).abs() < 1e-9, "{cost} against {want}");
    // A fresh dataset of the file: one row a response, the same sums.
    let fresh = d.join("fresh");
    assert!(backfill(
        &["--parquet", fresh.to_str().unwrap()],
        std::slice::from_ref(&s)
    )
    .status
    .success());
    assert_eq!(usage_by_response(&fresh), usage_by_response(&ds));
    assert_eq!(read_usage(&fresh).len(), 3);
    fs::remove_dir_all(d).unwrap();
}

/// A later copy of `msg_01C` (no request id: the same response within the
/// session) with more output tokens than the file's (as it_store's).
const MSG_01C_AGAIN: &str = r#"{"parentUuid":"c7","isSidechain":false,"cwd":"/tmp/claude-fixture","sessionId":"fx-claude-1","type":"assistant","uuid":"c8","timestamp":"2026-03-02T09:01:08.000Z","message":{"id":"msg_01C","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Fixed, and tested."}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":9}},"costUSD":0.25}
"#;

/// A folder in the layout of an earlier version (records at
/// `DIR/format=...`, no usage) is refused, with or without a state, and
/// left as it is; the message says how to move it, and once moved as it
/// says, runs go on.
#[test]
fn a_dataset_of_the_earlier_layout_is_refused_with_how_to_move_it() {
    let d = tmpdir("old-layout");
    let f = common::fixtures().join("hand-built.jsonl");
    let ds = d.join("ds");
    let old = ds.join("format=pi/date=2026-01-15/part-1of2-00000000000000aa-000000.parquet");
    fs::create_dir_all(old.parent().unwrap()).unwrap();
    fs::write(&old, b"a part of an earlier run").unwrap();
    let before = tree(&ds);
    let st = d.join("st");
    for args in [
        vec!["--parquet", ds.to_str().unwrap()],
        vec![
            "--parquet",
            ds.to_str().unwrap(),
            "--state",
            st.to_str().unwrap(),
        ],
    ] {
        let o = backfill(&args, std::slice::from_ref(&f));
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        let dir = ds.display();
        assert!(
            err.contains(&format!(
                "the dataset {dir} holds records in the layout of an earlier mem-ingest \
                 (format=pi): records now go in {dir}/records/format=..."
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!(
                "`mkdir {dir}/records && mv {dir}/format=* {dir}/records/`"
            )),
            "{err}"
        );
        assert_eq!(tree(&ds), before);
        assert!(!st.exists());
    }
    // Moved as the message says: another run's part, kept.
    fs::create_dir_all(ds.join("records")).unwrap();
    fs::rename(ds.join("format=pi"), ds.join("records/format=pi")).unwrap();
    let o = backfill(
        &["--parquet", ds.to_str().unwrap()],
        std::slice::from_ref(&f),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let after = tree(&ds);
    assert!(
        after.contains(&format!("records/{}", before[0])),
        "{after:?}"
    );
    assert!(
        after.iter().any(|p| p.starts_with("usage/format=pi/")),
        "{after:?}"
    );
    fs::remove_dir_all(d).unwrap();
}

// ---------------------------------------------------------------------------
// DuckDB

/// DuckDB's answer (Python package) to `sql`, as JSON rows. A missing
/// DuckDB fails the test: .ci/run installs it.
fn duckdb(sql: &str) -> Result<Vec<Vec<Value>>, String> {
    let script = r#"
import duckdb, json, sys
try:
    rows = duckdb.sql(sys.argv[1]).fetchall()
except duckdb.Error as e:
    print(json.dumps({"error": str(e)}))
    sys.exit(0)
print(json.dumps([[v if isinstance(v, (int, float, str, type(None))) else str(v) for v in r] for r in rows]))
"#;
    let out = Command::new("python3")
        .args(["-c", script, sql])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "DuckDB's Python package is needed (pip install duckdb): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    match serde_json::from_slice(&out.stdout).unwrap() {
        Value::Array(rows) => Ok(rows
            .into_iter()
            .map(|r| r.as_array().unwrap().clone())
            .collect()),
        Value::Object(e) => Err(e["error"].as_str().unwrap().to_owned()),
        v => panic!("{v}"),
    }
}

/// The records' table of the dataset at `dir`, for DuckDB.
fn scan(dir: &Path) -> String {
    format!(
        "read_parquet('{}/records/**/*.parquet', hive_partitioning = true)",
        dir.display()
    )
}

/// The usage table of the dataset at `dir`, for DuckDB.
fn scan_usage(dir: &Path) -> String {
    format!(
        "read_parquet('{}/usage/**/*.parquet', hive_partitioning = true)",
        dir.display()
    )
}

fn stats(paths: &[PathBuf]) -> Value {
    let o = bin()
        .args(["stats", "--json", "-q"])
        .args(paths)
        .output()
        .unwrap();
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
#[ignore = "needs DuckDB's Python package and ../shared/samples; run by .ci/run with --include-ignored"]
fn duckdb_counts_what_stats_counts() {
    let d = tmpdir("duck-stats");
    let mut ins = inputs(&d);
    ins.extend(common::shared::samples_read());
    let ds = d.join("ds");
    let o = backfill(&["--parquet", ds.to_str().unwrap()], &ins);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = stats(&ins);
    let rows = duckdb(&format!("SELECT count(*) FROM {}", scan(&ds))).unwrap();
    assert_eq!(rows[0][0], s["records"]);
    let by_role = duckdb(&format!(
        "SELECT role, count(*) FROM {} GROUP BY role ORDER BY role",
        scan(&ds)
    ))
    .unwrap();
    let mut want: Vec<Vec<Value>> = s["roles"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, n)| n.as_u64() != Some(0))
        .map(|(r, n)| vec![Value::from(r.as_str()), n.clone()])
        .collect();
    want.sort_by(|a, b| a[0].as_str().cmp(&b[0].as_str()));
    assert_eq!(by_role, want);
    // Every format, and the null partition read as a null date.
    let formats = duckdb(&format!(
        "SELECT format, count(*) FILTER (date IS NULL), count(*) FILTER (timestamp IS NULL) \
         FROM {} GROUP BY format ORDER BY format",
        scan(&ds)
    ))
    .unwrap();
    assert_eq!(
        formats
            .iter()
            .map(|r| r[0].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["claude", "codex", "pi"]
    );
    for r in &formats {
        assert_eq!(r[1], r[2], "{r:?}");
    }
    assert!(formats.iter().any(|r| r[1].as_u64().unwrap() > 0));
    let types = duckdb(&format!(
        "SELECT column_name, column_type FROM (DESCRIBE SELECT timestamp, kinds, line, usage_input, date FROM {})",
        scan(&ds)
    ))
    .unwrap();
    assert_eq!(
        types,
        [
            ["timestamp", "TIMESTAMP WITH TIME ZONE"],
            ["kinds", "VARCHAR[]"],
            ["line", "BIGINT"],
            ["usage_input", "BIGINT"],
            ["date", "DATE"],
        ]
        .map(|r| r.map(Value::from).to_vec())
    );
    fs::remove_dir_all(d).unwrap();
}

/// `SELECT sum(total_tokens) FROM DIR/usage/` in DuckDB equals `stats`'
/// total for every agent (and input, output and cache too), written by one
/// run and by runs with a state that each read a part of the archive; the
/// costs sum to `stats`' where it prices the agent.
#[test]
#[ignore = "needs DuckDB's Python package; run by .ci/run with --include-ignored"]
fn duckdb_sums_usage_rows_to_the_stats_of_every_agent() {
    let d = tmpdir("duck-usage");
    let agents = ["pi", "gemini", "qwen", "copilot", "amp", "claude", "codex"];
    let ins: Vec<PathBuf> = agents.iter().map(|a| generate_agent(&d, a, 2, 4)).collect();
    let one = d.join("one");
    let o = backfill(&["--parquet", one.to_str().unwrap()], &ins);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The same archive in runs with a state: an agent more each run.
    let (inc, st) = (d.join("inc"), d.join("st"));
    for n in 1..=ins.len() {
        let o = backfill(
            &[
                "--parquet",
                inc.to_str().unwrap(),
                "--state",
                st.to_str().unwrap(),
            ],
            &ins[..n],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let s = stats(&ins);
    let by = s["by_source"].as_object().unwrap();
    assert_eq!(by.len(), agents.len(), "{:?}", by.keys());
    for ds in [&one, &inc] {
        let sums = duckdb(&format!(
            "SELECT format, sum(input), sum(output), sum(cache_read), sum(cache_write), \
             sum(total_tokens), sum(cost), count(cost) = count(*) FROM {} \
             GROUP BY format ORDER BY format",
            scan_usage(ds)
        ))
        .unwrap();
        assert_eq!(sums.len(), agents.len(), "{sums:?}");
        for row in &sums {
            let agent = row[0].as_str().unwrap();
            let u = &by[agent]["usage"];
            assert!(u["total_tokens"].as_u64().unwrap() > 0, "{agent}");
            for (i, k) in [
                "input",
                "output",
                "cache_read",
                "cache_write",
                "total_tokens",
            ]
            .iter()
            .enumerate()
            {
                assert_eq!(row[i + 1], u[*k], "{agent} {k} in {}", ds.display());
            }
            // Where stats prices every response, the rows do too.
            if let Some(want) = u["cost"].as_f64() {
                if row[7] == Value::Bool(true) {
                    let got = row[6].as_f64().unwrap();
                    assert!(
                        (got - want).abs() <= 1e-9 * want.max(1.0),
                        "{agent}: {got} against {want}"
                    );
                }
            }
        }
        let total = duckdb(&format!("SELECT sum(total_tokens) FROM {}", scan_usage(ds))).unwrap();
        assert_eq!(total[0][0], s["usage"]["total_tokens"]);
    }
    fs::remove_dir_all(d).unwrap();
}

#[test]
#[ignore = "needs DuckDB's Python package; run by .ci/run with --include-ignored"]
fn duckdb_reads_only_the_partition_a_date_filter_names() {
    let d = tmpdir("duck-prune");
    let ins = inputs(&d);
    let ds = d.join("ds");
    assert!(backfill(&["--parquet", ds.to_str().unwrap()], &ins)
        .status
        .success());
    let counts = duckdb(&format!(
        "SELECT CAST(date AS VARCHAR), count(*) FROM {} WHERE date IS NOT NULL \
         GROUP BY date ORDER BY date",
        scan(&ds)
    ))
    .unwrap();
    assert!(counts.len() >= 3, "{counts:?}");
    let (date, n) = (
        counts[0][0].as_str().unwrap().to_owned(),
        counts[0][1].clone(),
    );
    // A copy in which every other partition's files are garbage.
    let copy = d.join("copy");
    let mut corrupted = 0;
    for rel in tree(&ds) {
        let to = copy.join(&rel);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        if rel.contains(&format!("/date={date}/")) {
            fs::copy(ds.join(&rel), &to).unwrap();
        } else {
            fs::write(&to, b"not parquet at all, PAR1").unwrap();
            corrupted += 1;
        }
    }
    assert!(corrupted >= 2);
    let q = |filter: &str| {
        duckdb(&format!(
            "SELECT count(*), count(DISTINCT session) FROM {} {filter}",
            scan(&copy)
        ))
    };
    let filtered = q(&format!("WHERE date = DATE '{date}'")).unwrap();
    assert_eq!(filtered[0][0], n);
    // The corruption is real: a query that reads everything fails.
    let all = q("").unwrap_err();
    assert!(!all.is_empty());
    fs::remove_dir_all(d).unwrap();
}

#[test]
#[ignore = "needs DuckDB's Python package and ../shared/samples; run by .ci/run with --include-ignored"]
fn duckdb_reads_four_shards_as_one_run() {
    let d = tmpdir("duck-shards");
    let mut ins = inputs(&d);
    ins.extend(common::shared::samples_read());
    let one = d.join("one");
    let four = d.join("four");
    assert!(backfill(&["--parquet", one.to_str().unwrap()], &ins)
        .status
        .success());
    for k in 0..4 {
        let o = backfill(
            &[
                "--parquet",
                four.to_str().unwrap(),
                "--shard",
                &format!("{k}/4"),
            ],
            &ins,
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let rows = |dir: &Path| format!("SELECT * EXCLUDE (file) FROM {}", scan(dir));
    let total = duckdb(&format!("SELECT count(*) FROM ({})", rows(&one))).unwrap();
    assert!(total[0][0].as_u64().unwrap() > 1000);
    assert_eq!(
        duckdb(&format!("SELECT count(*) FROM ({})", rows(&four))).unwrap(),
        total
    );
    for (a, b) in [(&one, &four), (&four, &one)] {
        let diff = duckdb(&format!(
            "SELECT count(*) FROM ({} EXCEPT ALL {})",
            rows(a),
            rows(b)
        ))
        .unwrap();
        assert_eq!(diff[0][0], 0);
    }
    // Each shard wrote parts of its own name.
    let by_shard = duckdb(&format!(
        "SELECT regexp_extract(filename, 'part-([0-9])of4-', 1), count(*) > 0 \
         FROM read_parquet('{}/**/*.parquet', filename = true) GROUP BY 1 ORDER BY 1",
        four.display()
    ))
    .unwrap();
    assert_eq!(by_shard.len(), 4, "{by_shard:?}");
    fs::remove_dir_all(d).unwrap();
}

// Shards over an archive that changes between runs.

/// Runs shards 0..n (each with its own -o and --state) and one unsharded
/// reference run (its own -o and --state) over `root`; returns the keys
/// each shard wrote this time, and the keys the reference wrote.
fn shard_round(
    d: &Path,
    root: &Path,
    n: u32,
    tag: &str,
    cli: &dyn Fn() -> Command,
) -> (Vec<Vec<String>>, Vec<String>) {
    let one = |o: PathBuf, st: PathBuf, shard: Option<String>| -> Vec<String> {
        let before = fs::read_to_string(&o).unwrap_or_default().lines().count();
        let mut c = cli();
        c.arg("backfill")
            .arg("-q")
            .arg("-o")
            .arg(&o)
            .arg("--state")
            .arg(&st);
        if let Some(s) = &shard {
            c.arg("--shard").arg(s);
        }
        let r = c.arg(root).output().unwrap();
        // 1: a file failed (one made unreadable).
        assert!(
            matches!(r.status.code(), Some(0 | 1)),
            "{tag}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        if !o.exists() {
            return Vec::new();
        }
        ndjson(&o)[before..]
            .iter()
            .map(|m| m["key"].as_str().unwrap().to_owned())
            .collect()
    };
    let shards = (0..n)
        .map(|k| {
            one(
                d.join(format!("s{k}.ndjson")),
                d.join(format!("s{k}.state")),
                Some(format!("{k}/{n}")),
            )
        })
        .collect();
    let mut all = one(d.join("all.ndjson"), d.join("all.state"), None);
    all.sort();
    (shards, all)
}

fn flat(v: &[Vec<String>]) -> Vec<String> {
    let mut f: Vec<String> = v.iter().flatten().cloned().collect();
    f.sort();
    f
}

/// A fork of a fork whose fork between went keeps its recorded root while
/// it is moved out of the archive for a run, and back: no shard emits it
/// again, as one unsharded run does not. (When roots were kept only for
/// the ids named at the last run, the gone fork's shard emitted it all
/// again.)
#[test]
fn a_fork_of_a_fork_moved_away_and_back_keeps_its_shard() {
    let d = tmpdir("shard-moved");
    let root = lineages(&d);
    let n = 2u32;
    let i = split_lineage(n);
    let cli = || bin();
    let (s, a) = shard_round(&d, &root, n, "first", &cli);
    assert_eq!(flat(&s).len(), a.len());
    fs::remove_dir_all(root.join(format!("m-forks-fork-{i}"))).unwrap();
    let (s, a) = shard_round(&d, &root, n, "fork gone", &cli);
    assert_eq!((flat(&s), a), (vec![], vec![]));
    let f2 = root.join(format!("m-forks-fork2-{i}"));
    let away = d.join("away");
    fs::rename(&f2, &away).unwrap();
    let (s, a) = shard_round(&d, &root, n, "fork2 away", &cli);
    assert_eq!((flat(&s), a), (vec![], vec![]));
    fs::rename(&away, &f2).unwrap();
    let (s, a) = shard_round(&d, &root, n, "fork2 back", &cli);
    assert_eq!(flat(&s), a, "shards together differ from one run");
    fs::remove_dir_all(d).unwrap();
}

/// The shard that holds a file takes its header from its state (no open);
/// the others open it. A fork of a fork (its fork between gone) that
/// cannot be opened for one run (mode 000, the CLI run as nobody) keeps
/// its recorded root in every shard: once readable, it is in one shard,
/// and a line appended to it is emitted once. (When roots were kept only
/// for the ids named at the last run, it was in two shards.)
#[test]
fn a_fork_of_a_fork_unreadable_for_a_run_keeps_its_shard() {
    use std::os::unix::fs::PermissionsExt;
    let d = tmpdir("shard-unreadable");
    let root = lineages(&d);
    fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
    let n = 2u32;
    let i = split_lineage(n);
    let cli = || common::unprivileged_cli();
    let (s, a) = shard_round(&d, &root, n, "first", &cli);
    assert_eq!(flat(&s).len(), a.len());
    fs::remove_dir_all(root.join(format!("m-forks-fork-{i}"))).unwrap();
    let (s, a) = shard_round(&d, &root, n, "fork gone", &cli);
    assert_eq!((flat(&s), a), (vec![], vec![]));
    let f2 = root
        .join(format!("m-forks-fork2-{i}"))
        .join(format!("2026-01-06T00-00-00-000Z_fork2-{i}.jsonl"));
    fs::set_permissions(&f2, fs::Permissions::from_mode(0o000)).unwrap();
    let (s, a) = shard_round(&d, &root, n, "fork2 unreadable", &cli);
    assert_eq!(flat(&s), a, "fork2 unreadable");
    fs::set_permissions(&f2, fs::Permissions::from_mode(0o644)).unwrap();
    let (s, a) = shard_round(&d, &root, n, "fork2 readable", &cli);
    let again = flat(&s) == a;
    common::append(&f2, &common::user_line("later", "appended"));
    let (s2, a2) = shard_round(&d, &root, n, "appended", &cli);
    assert!(again, "readable again: shards {s:?} vs unsharded {a:?}");
    assert_eq!(flat(&s2), a2, "appended line");
    fs::remove_dir_all(d).unwrap();
}

/// Roots alone changing save the state; an unchanged archive does not
/// rewrite it.
#[test]
fn shard_roots_are_saved_when_they_change_and_only_then() {
    use std::os::unix::fs::MetadataExt;
    let d = tmpdir("shard-dirty");
    let root = lineages(&d);
    let n = 2u32;
    let cli = || bin();
    shard_round(&d, &root, n, "first", &cli);
    let ino = |k: u32| fs::metadata(d.join(format!("s{k}.state"))).unwrap().ino();
    let before: Vec<u64> = (0..n).map(ino).collect();
    let bytes: Vec<Vec<u8>> = (0..n)
        .map(|k| fs::read(d.join(format!("s{k}.state"))).unwrap())
        .collect();
    shard_round(&d, &root, n, "unchanged", &cli);
    let after: Vec<u64> = (0..n).map(ino).collect();
    assert_eq!(before, after, "an unchanged re-run rewrote a state");
    // A new session whose shard is 1's: shard 0's state must still learn it.
    let (id, k) = (0..100)
        .map(|j| format!("new-{j}"))
        .map(|id| {
            let k = shard_of(&id, n);
            (id, k)
        })
        .find(|(_, k)| *k == 1)
        .unwrap();
    let dir = root.join("new");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join(format!("2026-01-07T00-00-00-000Z_{id}.jsonl")),
        format!(r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-07T00:00:00.000Z","cwd":"/tmp/p"}}"#) + "\n"
            + &common::user_line("x", "new"),
    )
    .unwrap();
    let (s, _) = shard_round(&d, &root, n, "new in shard 1", &cli);
    assert_eq!(s[k as usize].len(), 1);
    let b0 = fs::read(d.join("s0.state")).unwrap();
    assert_ne!(b0, bytes[0], "shard 0's state did not record the new root");
    assert!(b0.windows(id.len()).any(|w| w == id.as_bytes()));
    let before: Vec<u64> = (0..n).map(ino).collect();
    shard_round(&d, &root, n, "unchanged 2", &cli);
    let after: Vec<u64> = (0..n).map(ino).collect();
    assert_eq!(before, after, "an unchanged re-run rewrote a state");
    fs::remove_dir_all(d).unwrap();
}

/// Library use: shards into SQLite stores, which keep their own
/// checkpoints, roots included (`checkpoint_meta`): the fork of a fork is
/// not emitted again when the fork between goes.
#[test]
fn shards_into_sqlite_stores_keep_their_roots() {
    use mem_ingest_store::SqliteStore;
    let d = tmpdir("shard-sqlite");
    let root = lineages(&d);
    let n = 2u32;
    let i = split_lineage(n);
    let run = || -> Vec<u64> {
        (0..n)
            .map(|k| {
                let mut store = SqliteStore::open(d.join(format!("s{k}.db"))).unwrap();
                Archive::builder()
                    .path(&root)
                    .shard(Shard { k, n })
                    .build()
                    .backfill(&mut store)
                    .unwrap()
                    .written
            })
            .collect()
    };
    assert_eq!(run().iter().sum::<u64>(), 8 * 24);
    assert_eq!(run(), [0, 0]);
    fs::remove_dir_all(root.join(format!("m-forks-fork-{i}"))).unwrap();
    assert_eq!(run(), [0, 0], "the fork of the fork emitted again");
    fs::remove_dir_all(d).unwrap();
}

/// The N tasks of one scheduled job do not start at one instant: a fork's
/// file arrives (synced) between the two shards' runs. A root is recorded
/// only once its chain ends at a session with a file, so the shard that
/// ran first, which saw the fork of the fork with no fork between, records
/// nothing for it, and the next runs over one archive agree: the fork and
/// the fork of the fork, and a line appended later, are each emitted once.
/// (When the unfinished chain's end was recorded, each shard thought the
/// other had them, and neither ever emitted them.)
#[test]
fn shards_agree_again_after_a_file_arrives_between_their_runs() {
    let d = tmpdir("shard-race");
    let root = lineages(&d);
    let n = 2u32;
    let i = split_lineage(n);
    let home = shard_of(&format!("lin-{i}"), n);
    let other = 1 - home;
    let f1 = root.join(format!("m-forks-fork-{i}"));
    let away = d.join("away");
    fs::rename(&f1, &away).unwrap();
    let one = |k: u32| -> Vec<String> {
        let o = d.join(format!("s{k}.ndjson"));
        let before = fs::read_to_string(&o).unwrap_or_default().lines().count();
        let r = backfill(
            &[
                "-o",
                o.to_str().unwrap(),
                "--state",
                d.join(format!("s{k}.state")).to_str().unwrap(),
                "--shard",
                &format!("{k}/{n}"),
            ],
            std::slice::from_ref(&root),
        );
        assert!(r.status.success());
        ndjson(&o)[before..]
            .iter()
            .map(|m| m["key"].as_str().unwrap().to_owned())
            .filter(|k| {
                k.starts_with(&format!("fork-{i}:")) || k.starts_with(&format!("fork2-{i}:"))
            })
            .collect()
    };
    // The root's shard runs first, then the fork's file arrives, then the
    // other shard runs.
    let mut got = one(home);
    fs::rename(&away, &f1).unwrap();
    got.extend(one(other));
    // From now on both shards run over the same archive.
    for _ in 0..2 {
        got.extend(one(home));
        got.extend(one(other));
    }
    let f2 = root
        .join(format!("m-forks-fork2-{i}"))
        .join(format!("2026-01-06T00-00-00-000Z_fork2-{i}.jsonl"));
    common::append(&f2, &common::user_line("later", "appended"));
    got.extend(one(home));
    got.extend(one(other));
    got.sort();
    assert_eq!(
        got,
        vec![
            format!("fork-{i}:own-fork-{i}"),
            format!("fork2-{i}:later"),
            format!("fork2-{i}:own-fork2-{i}"),
        ],
        "the fork and the fork of the fork, each once"
    );
    fs::remove_dir_all(d).unwrap();
}
