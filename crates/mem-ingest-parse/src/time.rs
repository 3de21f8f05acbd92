//! ISO 8601 / RFC 3339 timestamps to Unix milliseconds, without a
//! dependency: pi writes `2025-11-20T23:33:50.805Z`.

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01 (Howard Hinnant's
/// algorithm, the inverse of `days_from_civil`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Unix milliseconds as RFC 3339 in UTC, to the millisecond
/// (`2026-01-15T10:00:01.000Z`).
pub fn format_iso_millis(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, milli) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{milli:03}Z")
}

fn num(s: &[u8]) -> Option<u32> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter().try_fold(0u32, |n, d| {
        n.checked_mul(10)?.checked_add(u32::from(d - b'0'))
    })
}

/// Parses `YYYY-MM-DD`, optionally followed by `T` (or a space) and
/// `HH:MM[:SS[.fff...]]` with `Z` or `±HH:MM` (no zone: UTC), into Unix
/// milliseconds. `None` for anything else.
pub fn parse_iso_millis(s: &str) -> Option<i64> {
    let b = s.trim().as_bytes();
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, mo, d) = (num(&b[0..4])?, num(&b[5..7])?, num(&b[8..10])?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let mut ms = days_from_civil(i64::from(y), mo, d) * 86_400_000;
    let rest = &b[10..];
    if rest.is_empty() {
        return Some(ms);
    }
    if !matches!(rest[0], b'T' | b't' | b' ') || rest.len() < 6 || rest[3] != b':' {
        return None;
    }
    let (h, mi) = (num(&rest[1..3])?, num(&rest[4..6])?);
    let mut i = 6;
    let mut sec = 0;
    if rest.get(i) == Some(&b':') {
        sec = num(rest.get(i + 1..i + 3)?)?;
        i += 3;
    }
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    ms += i64::from(h * 3600 + mi * 60 + sec) * 1000;
    if rest.get(i) == Some(&b'.') {
        let digits = rest[i + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits == 0 {
            return None;
        }
        let frac = &rest[i + 1..i + 1 + digits.min(3)];
        let mut f = num(frac)?;
        for _ in frac.len()..3 {
            f *= 10;
        }
        ms += i64::from(f);
        i += 1 + digits;
    }
    match &rest[i..] {
        b"" | b"Z" | b"z" => Some(ms),
        [sign @ (b'+' | b'-'), zh1, zh2, b':', zm1, zm2] => {
            let off = i64::from(num(&[*zh1, *zh2])? * 60 + num(&[*zm1, *zm2])?) * 60_000;
            Some(if *sign == b'+' { ms - off } else { ms + off })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::parse_iso_millis as p;
    use super::{format_iso_millis, parse_iso_millis};

    #[test]
    fn formats_what_it_parses() {
        for t in [
            "1970-01-01T00:00:00.000Z",
            "2026-01-15T10:00:01.000Z",
            "2000-02-29T23:59:59.999Z",
            "1969-12-31T23:59:59.999Z",
            "2100-03-01T00:00:00.001Z",
        ] {
            assert_eq!(format_iso_millis(parse_iso_millis(t).unwrap()), t);
        }
        assert_eq!(format_iso_millis(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn parses_what_pi_writes_and_rfc3339() {
        assert_eq!(p("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(p("2025-11-20T23:33:50.805Z"), Some(1_763_681_630_805));
        assert_eq!(p("2025-11-20"), Some(1_763_596_800_000));
        assert_eq!(
            p("2025-11-20T23:33:50+01:00"),
            Some(1_763_681_630_000 - 3_600_000)
        );
        assert_eq!(p("2024-02-29T12:00:00.1234567Z"), Some(1_709_208_000_123));
        assert_eq!(p("1969-12-31T23:59:59Z"), Some(-1000));
        assert_eq!(p("2025-13-01"), None);
        assert_eq!(p("yesterday"), None);
        assert_eq!(p("2025-11-20T23:33:50.Z"), None);
    }
}
