//! The human stats table: aligned whatever the length of model and
//! project names.

mod common;

use common::{run, tmpdir};

/// The end offset of each of the last `n` whitespace-separated cells of
/// `line`.
/// `line`, in characters.
fn cell_ends(line: &str, n: usize) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut prev = ' ';
    for (i, c) in line.chars().enumerate() {
        if c == ' ' && prev != ' ' {
            ends.push(i);
        }
        prev = c;
    }
    if prev != ' ' {
        ends.push(line.chars().count());
    }
    ends.split_off(ends.len() - n)
}

/// The lines of the block that starts with the line `title` (up to the
/// next blank line).
fn block<'a>(out: &'a str, title: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(title))
        .unwrap_or_else(|| panic!("no {title:?} in\n{out}"));
    lines[at..]
        .iter()
        .take_while(|l| !l.is_empty())
        .copied()
        .collect()
}

/// Every line of a table as long as the others (in characters), each of
/// its last `n` columns ending (so, right-aligned, starting) at the same
/// offset in the header and every row, and each row's name at offset 2
/// (a session without a `cwd` has an empty one).
fn assert_aligned(table: &[&str], n: usize, with_header: bool) {
    let width = table[0].chars().count();
    let ends = cell_ends(table[0], n);
    for l in table {
        assert_eq!(l.chars().count(), width, "{l:?} in\n{}", table.join("\n"));
        assert_eq!(cell_ends(l, n), ends, "{l:?} in\n{}", table.join("\n"));
    }
    for l in &table[usize::from(with_header)..] {
        let named = l.split_whitespace().count() > n;
        assert!(
            l.starts_with("  ") && l[2..].starts_with(' ') != named,
            "{l:?}"
        );
    }
}

#[test]
fn table_columns_align_whatever_the_names() {
    let d = tmpdir("stats", "table");
    let model = "claude-sonnet-4-5-with-a-very-long-model-name-of-sixty-chars";
    assert_eq!(model.len(), 60);
    let project = "/home/someone/work/a/deeply/nested/folder/of/projects/with-a-long-project-name";
    let session = format!(
        concat!(
            r#"{{"type":"session","version":3,"id":"long-names-1","timestamp":"2026-01-15T10:00:00.000Z","cwd":"{project}"}}"#,
            "\n",
            r#"{{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-15T10:00:05.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"hi"}}],"provider":"anthropic","model":"{model}","usage":{{"input":100,"output":20,"cacheRead":3000,"cacheWrite":400,"totalTokens":3520,"cost":{{"total":1}}}},"stopReason":"stop","timestamp":1768471205000}}}}"#,
            "\n"
        ),
        project = project,
        model = model
    );
    std::fs::write(d.join("long.jsonl"), session).unwrap();
    let out = run(&[
        &"stats",
        &"-q",
        &d.join("long.jsonl"),
        &"fixtures/hand-built.jsonl",
        &"fixtures/pi-1x.jsonl",
        &"fixtures/bad/",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let out = String::from_utf8(out.stdout).unwrap();

    let models = block(&out, "usage by model");
    assert!(models.iter().any(|l| l.contains(model)), "{out}");
    assert!(models.len() >= 4, "{out}");
    assert_aligned(&models, 7, true);
    let projects = block(&out, "by project");
    assert!(projects.iter().any(|l| l.contains(project)), "{out}");
    assert_aligned(&projects, 4, true);
    // Roles and entries: one column of counts between them.
    let mut counts = block(&out, "roles")[1..].to_vec();
    counts.extend(&block(&out, "entries")[1..]);
    assert!(counts.iter().any(|l| l.contains("thinking_level_change")));
    assert_aligned(&counts, 1, false);
    // The totals at the top: their values end in one column.
    let top = block(&out, "files");
    let ends: Vec<usize> = top
        .iter()
        .map(|l| cell_ends(l.split("  (").next().unwrap(), 1)[0])
        .collect();
    assert!(ends.iter().all(|e| *e == 23), "{ends:?}\n{out}");
    std::fs::remove_dir_all(d).unwrap();
}
