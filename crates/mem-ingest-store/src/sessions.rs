//! The sessions of a store, newest first, each with its first prompt: what
//! `mem-ingest sessions` lists.

use std::path::Path;

use mem_ingest::Error;
use rusqlite::types::Value;

use crate::{failed, open_to_read};

/// Which sessions to list. Every filter defaults to none.
#[derive(Debug, Clone, Default)]
pub struct SessionQuery {
    /// Only sessions whose project holds this (ASCII case folded; `%` and
    /// `_` are themselves).
    pub project: Option<String>,
    /// Only sessions whose id starts with this.
    pub session: Option<String>,
    /// Only this format (`pi`).
    pub format: Option<String>,
    /// Only sessions with a record at or after this time, Unix ms.
    pub since: Option<i64>,
    /// Only sessions that started before this time, Unix ms.
    pub until: Option<i64>,
    /// At most this many (0: 20).
    pub limit: usize,
}

/// One session of a store.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SessionRow {
    /// Its id.
    pub id: String,
    /// The agent that wrote it (the format's name: `pi`).
    pub agent: String,
    /// Its project.
    pub project: String,
    /// Its first record's time, Unix ms.
    pub started: Option<i64>,
    /// Its last record's time, Unix ms.
    pub ended: Option<i64>,
    /// Its records in the store.
    pub records: i64,
    /// The text of its first user record, whole.
    pub first_prompt: Option<String>,
}

/// A LIKE pattern that matches `s` itself, `\` escaping `%`, `_` and `\`.
pub(crate) fn like_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The sessions of the store at `path` that `q` asks for, the newest
/// (latest start) first.
///
/// # Errors
/// The store cannot be read (see `search`).
pub fn sessions(path: &Path, q: &SessionQuery) -> Result<Vec<SessionRow>, Error> {
    let conn = open_to_read(path, "sessions")?;
    let mut filters = String::new();
    let mut args: Vec<Value> = Vec::new();
    let mut filter = |clause: &str, v: Value| {
        args.push(v);
        filters.push_str(&format!(
            " AND {}",
            clause.replace('?', &format!("?{}", args.len()))
        ));
    };
    if let Some(p) = &q.project {
        filter(
            "s.project LIKE ? ESCAPE '\\'",
            format!("%{}%", like_literal(p)).into(),
        );
    }
    if let Some(x) = &q.session {
        filter(
            "s.id LIKE ? ESCAPE '\\'",
            format!("{}%", like_literal(x)).into(),
        );
    }
    if let Some(f) = &q.format {
        filter("s.format = ?", f.clone().into());
    }
    if let Some(t) = q.since {
        filter("s.last_timestamp >= ?", t.into());
    }
    if let Some(t) = q.until {
        filter("s.first_timestamp < ?", t.into());
    }
    let limit = if q.limit == 0 { 20 } else { q.limit };
    // The first prompt: the session's first user record by time, then by
    // where it was stored (records_session_time finds it).
    let sql = format!(
        "SELECT s.id, s.format, s.project, s.first_timestamp, s.last_timestamp, s.records,
                (SELECT r.text FROM records r WHERE r.session = s.id AND r.role = 'user'
                 ORDER BY r.timestamp, r.row_id LIMIT 1)
         FROM sessions s WHERE 1{filters}
         ORDER BY s.first_timestamp DESC NULLS LAST, s.id LIMIT {limit}"
    );
    let rows = conn
        .prepare(&sql)
        .and_then(|mut st| {
            st.query_map(rusqlite::params_from_iter(args.iter()), |r| {
                Ok(SessionRow {
                    id: r.get(0)?,
                    agent: r.get(1)?,
                    project: r.get(2)?,
                    started: r.get(3)?,
                    ended: r.get(4)?,
                    records: r.get(5)?,
                    first_prompt: r.get(6)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| failed(path, e))?;
    Ok(rows)
}

/// One record of a session, as `show` prints it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ShownRecord {
    /// Its key.
    pub key: String,
    /// Its role.
    pub role: String,
    /// Its time, Unix ms.
    pub timestamp: Option<i64>,
    /// Its text, whole.
    pub text: String,
    /// The tool a tool result is of.
    pub tool_name: Option<String>,
    /// A shell execution's command.
    pub command: Option<String>,
    /// A shell execution's exit code.
    pub exit_code: Option<i64>,
    /// The file it was read from.
    pub file: String,
    /// Its line there (1-based).
    pub line: i64,
}

/// The one session whose id starts with `prefix` (a whole id is one).
///
/// # Errors
/// No session's id starts with it, or several do (the error names up to
/// five, newest first): a usage error; or the store cannot be read.
pub fn find_session(path: &Path, prefix: &str) -> Result<SessionRow, Error> {
    let exact = sessions(
        path,
        &SessionQuery {
            session: Some(prefix.to_owned()),
            limit: 6,
            ..SessionQuery::default()
        },
    )?;
    if let Some(s) = exact.iter().find(|s| s.id == prefix) {
        return Ok(s.clone());
    }
    match exact.len() {
        0 => Err(crate::bad_query(
            path,
            format!("no session's id starts with {prefix:?} (`mem-ingest sessions` lists them)"),
        )),
        1 => Ok(exact.into_iter().next().expect("one")),
        n => {
            let names: Vec<&str> = exact.iter().take(5).map(|s| s.id.as_str()).collect();
            let more = if n > 5 { ", ..." } else { "" };
            Err(crate::bad_query(
                path,
                format!(
                    "{prefix:?} starts the ids of several sessions ({}{more}): give more of it",
                    names.join(", ")
                ),
            ))
        }
    }
}

/// The records of session `id`, in time order (then in the order they
/// were stored).
///
/// # Errors
/// The store cannot be read.
pub fn session_records(path: &Path, id: &str) -> Result<Vec<ShownRecord>, Error> {
    let conn = open_to_read(path, "show")?;
    let rows = conn
        .prepare(
            "SELECT key, role, timestamp, text, tool_name, command, exit_code, file, line
             FROM records WHERE session = ?1 ORDER BY timestamp, row_id",
        )
        .and_then(|mut st| {
            st.query_map([id], |r| {
                Ok(ShownRecord {
                    key: r.get(0)?,
                    role: r.get(1)?,
                    timestamp: r.get(2)?,
                    text: r.get(3)?,
                    tool_name: r.get(4)?,
                    command: r.get(5)?,
                    exit_code: r.get(6)?,
                    file: r.get(7)?,
                    line: r.get(8)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| failed(path, e))?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::like_literal;

    #[test]
    fn like_patterns_take_wildcards_literally() {
        assert_eq!(like_literal("a%b_c\\d"), "a\\%b\\_c\\\\d");
        assert_eq!(like_literal("/home/u/src"), "/home/u/src");
    }
}
