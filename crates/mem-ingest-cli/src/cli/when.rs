//! Times as the reading commands (`search`, `sessions`) take and print
//! them: relative ones (`7d`, `24h`, `yesterday`) besides RFC 3339, and
//! the local zone (or UTC) in what they print.

use std::time::{SystemTime, UNIX_EPOCH};

use mem_ingest::parse_iso_millis;

/// Now, Unix ms.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The local zone's view of a time (Unix seconds): its fields, and the
/// zone's offset east of UTC in seconds. UTC when the zone cannot be had.
pub(crate) struct Local {
    pub(crate) year: i64,
    pub(crate) month: u32,
    pub(crate) day: u32,
    pub(crate) hour: u32,
    pub(crate) minute: u32,
    pub(crate) second: u32,
    pub(crate) offset: i64,
}

pub(crate) fn local(secs: i64, utc: bool) -> Local {
    let mut tm: libc::tm = unsafe_zeroed_tm();
    let t = secs as libc::time_t;
    // SAFETY: localtime_r and gmtime_r read `t` and write the `tm` they
    // are given, both owned here; they are thread-safe (unlike localtime).
    #[allow(unsafe_code)]
    let ok = unsafe {
        if utc {
            !libc::gmtime_r(&t, &mut tm).is_null()
        } else {
            !libc::localtime_r(&t, &mut tm).is_null()
        }
    };
    if !ok {
        return Local {
            year: 1970,
            month: 1,
            day: 1,
            hour: 0,
            minute: 0,
            second: 0,
            offset: 0,
        };
    }
    Local {
        year: i64::from(tm.tm_year) + 1900,
        month: (tm.tm_mon + 1) as u32,
        day: tm.tm_mday as u32,
        hour: tm.tm_hour as u32,
        minute: tm.tm_min as u32,
        second: tm.tm_sec as u32,
        offset: if utc { 0 } else { tm.tm_gmtoff },
    }
}

fn unsafe_zeroed_tm() -> libc::tm {
    // SAFETY: libc::tm is plain old data (integers and, on some systems, a
    // pointer that may be null): all zeros is a valid value.
    #[allow(unsafe_code)]
    unsafe {
        std::mem::zeroed()
    }
}

/// The start of the local day (midnight) that holds `ms`, Unix ms.
fn day_start(ms: i64, utc: bool) -> i64 {
    let l = local(ms.div_euclid(1000), utc);
    let into_day = i64::from(l.hour) * 3600 + i64::from(l.minute) * 60 + i64::from(l.second);
    (ms.div_euclid(1000) - into_day) * 1000
}

/// `--since`/`--until` of a reading command, relative to `now` (Unix ms):
/// RFC 3339 or a date; `Nd`, `Nh`, `Nw` (N days, hours, weeks before
/// now); `today` and `yesterday` (the start of that day, in the local zone
/// or, with `utc`, in UTC); `last week` (seven days before now).
pub(crate) fn parse_when_at(s: &str, now: i64, utc: bool) -> Result<i64, String> {
    let t = s.trim();
    if let Some(ms) = parse_iso_millis(t) {
        return Ok(ms);
    }
    let day = 86_400_000;
    match t.to_ascii_lowercase().as_str() {
        "today" => return Ok(day_start(now, utc)),
        "yesterday" => return Ok(day_start(day_start(now, utc) - 1, utc)),
        "last week" => return Ok(now - 7 * day),
        _ => {}
    }
    let unit = match t.chars().last() {
        Some('h') => Some(3_600_000),
        Some('d') => Some(day),
        Some('w') => Some(7 * day),
        _ => None,
    };
    let n = unit.and_then(|_| t[..t.len() - 1].parse::<u32>().ok());
    match (n, unit) {
        (Some(n), Some(unit)) => Ok(now - i64::from(n) * unit),
        _ => Err(format!(
            "{s:?} is not a time: RFC 3339 (2026-12-01T09:00:00Z), a date (2026-12-01), \
             7d, 24h, 2w, today, yesterday or \"last week\""
        )),
    }
}

/// [`parse_when_at`] now, in the local zone (clap's parser: the zone is
/// known before the flags are, and `--utc` cannot reach it; `today` and
/// `yesterday` are the local day's start).
pub(crate) fn parse_when(s: &str) -> Result<i64, String> {
    parse_when_at(s, now_ms(), false)
}

/// `ms` as `2026-12-05 14:03` in the local zone, or in UTC with `utc`.
pub(crate) fn minute(ms: i64, utc: bool) -> String {
    let l = local(ms.div_euclid(1000), utc);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}",
        l.year, l.month, l.day, l.hour, l.minute
    )
}

/// `ms` as `2026-12-05 14:03:07` in the local zone, or in UTC with `utc`.
pub(crate) fn second(ms: i64, utc: bool) -> String {
    let l = local(ms.div_euclid(1000), utc);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        l.year, l.month, l.day, l.hour, l.minute, l.second
    )
}

/// `ms` as RFC 3339 with the local zone's offset (`+05:30`), or `Z` with
/// `utc`, to the second.
pub(crate) fn rfc3339(ms: i64, utc: bool) -> String {
    let l = local(ms.div_euclid(1000), utc);
    let zone = if l.offset == 0 && utc {
        "Z".to_owned()
    } else {
        let sign = if l.offset < 0 { '-' } else { '+' };
        let o = l.offset.abs();
        format!("{sign}{:02}:{:02}", o / 3600, o % 3600 / 60)
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{zone}",
        l.year, l.month, l.day, l.hour, l.minute, l.second
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-05T13:20:00Z.
    const NOW: i64 = 1_796_428_800_000 + 13 * 3_600_000 + 20 * 60_000;

    #[test]
    fn relative_times_count_back_from_now() {
        let at = |s| parse_when_at(s, NOW, true);
        assert_eq!(at("7d"), Ok(NOW - 7 * 86_400_000));
        assert_eq!(at("24h"), Ok(NOW - 86_400_000));
        assert_eq!(at("2w"), Ok(NOW - 14 * 86_400_000));
        assert_eq!(at("last week"), Ok(NOW - 7 * 86_400_000));
        assert_eq!(at("today"), Ok(1_796_428_800_000));
        assert_eq!(at("Yesterday"), Ok(1_796_428_800_000 - 86_400_000));
        assert_eq!(at("2026-12-01"), Ok(1_796_083_200_000));
        assert_eq!(
            at("2026-12-01T09:00:00+01:00"),
            Ok(1_796_083_200_000 + 8 * 3_600_000)
        );
        for bad in ["7", "d", "-7d", "7 days", "1.5h", "tomorrow"] {
            assert!(at(bad).unwrap_err().contains("is not a time"), "{bad}");
        }
    }

    #[test]
    fn times_print_in_utc_to_the_minute_or_the_second() {
        assert_eq!(minute(NOW, true), "2026-12-05 13:20");
        assert_eq!(second(NOW + 7_999, true), "2026-12-05 13:20:07");
        assert_eq!(rfc3339(NOW + 7_999, true), "2026-12-05T13:20:07Z");
        assert_eq!(minute(-1, true), "1969-12-31 23:59");
    }
}
