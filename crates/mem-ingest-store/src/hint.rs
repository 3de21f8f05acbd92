//! Close words for a search that found nothing: each word of the query the
//! index does not hold, and the indexed term nearest to it (a likely typo:
//! `compactoin` -> `compaction`), read through an `fts5vocab` table in the
//! `temp` schema (the store is opened read-only).

use std::path::Path;

use mem_ingest::Error;
use rusqlite::OptionalExtension;

use crate::{failed, open_to_read};

/// Edits (insertions, deletions, substitutions, swaps of two neighbours)
/// from `a` to `b`, or None when more than `most`.
fn distance(a: &[char], b: &[char], most: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > most {
        return None;
    }
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for (i, row) in d.chunks_mut(w).enumerate() {
        row[0] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        let mut best = usize::MAX;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
            best = best.min(v);
        }
        if best > most {
            return None;
        }
    }
    Some(d[a.len() * w + b.len()]).filter(|&v| v <= most)
}

/// The tokens of a query as the index's tokenizer keeps them: runs of
/// letters and digits, lower-cased.
fn tokens(query: &str) -> Vec<String> {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// For each token of `query` that no record holds, the indexed term
/// closest to it (at most two edits for a word of five letters or more,
/// one below that; none for a word of fewer than four), the most common
/// of equally close ones: `(word, term)`.
///
/// # Errors
/// The store cannot be read.
pub fn close_words(path: &Path, query: &str) -> Result<Vec<(String, String)>, Error> {
    let conn = open_to_read(path, "search")?;
    let fail = |e| failed(path, e);
    conn.execute_batch(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.mi_vocab USING fts5vocab(main, records_fts, row)",
    )
    .map_err(fail)?;
    let mut held = conn
        .prepare("SELECT 1 FROM temp.mi_vocab WHERE term = ?1")
        .map_err(fail)?;
    // Terms of about the word's length that share its first letter: a
    // typo keeps the first letter far more often than not, and the index
    // walks them in order.
    let mut near = conn
        .prepare(
            "SELECT term, doc FROM temp.mi_vocab WHERE term >= ?1 AND term < ?2
             AND length(term) BETWEEN ?3 AND ?4",
        )
        .map_err(fail)?;
    let mut out = Vec::new();
    for word in tokens(query) {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() < 4 {
            continue;
        }
        let found: Option<i64> = held
            .query_row([&word], |r| r.get(0))
            .optional()
            .map_err(fail)?;
        if found.is_some() {
            continue;
        }
        let most = if chars.len() >= 5 { 2 } else { 1 };
        let first = chars[0];
        let after = char::from_u32(first as u32 + 1).unwrap_or(char::MAX);
        let len = chars.len() as i64;
        let rows = near
            .query_map(
                rusqlite::params![first.to_string(), after.to_string(), len - 2, len + 2],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
            )
            .map_err(fail)?;
        let mut best: Option<(usize, i64, String)> = None;
        for row in rows {
            let (term, docs) = row.map_err(fail)?;
            let t: Vec<char> = term.chars().collect();
            let Some(d) = distance(&chars, &t, most) else {
                continue;
            };
            let better = match &best {
                None => true,
                Some((bd, bdocs, _)) => d < *bd || (d == *bd && docs > *bdocs),
            };
            if better {
                best = Some((d, docs, term));
            }
        }
        if let Some((_, _, term)) = best {
            out.push((word, term));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(a: &str, b: &str) -> Option<usize> {
        let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        distance(&a, &b, 2)
    }

    #[test]
    fn distances_count_edits_and_swaps() {
        assert_eq!(d("compactoin", "compaction"), Some(1));
        assert_eq!(d("compction", "compaction"), Some(1));
        assert_eq!(d("compacton", "compaction"), Some(1));
        assert_eq!(d("cmopactoin", "compaction"), Some(2));
        assert_eq!(d("compaction", "compaction"), Some(0));
        assert_eq!(d("xyz", "compaction"), None);
        assert_eq!(d("build", "guild"), Some(1));
        assert_eq!(d("abcdef", "badcfe"), None);
    }

    #[test]
    fn tokens_are_the_indexes() {
        assert_eq!(
            tokens("Compactoin, src/cli.rs"),
            ["compactoin", "src", "cli", "rs"]
        );
    }
}
