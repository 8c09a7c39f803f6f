//! Date patterns in the syntax of Java's `SimpleDateFormat` (and Joda's, for what they share),
//! which Kafka Connect users already write: `yyyyMMdd`, `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`. Times
//! are formatted in UTC, or at a given offset from it.

use crate::error::{ConnectError, Result};
use crate::logical::{civil_from_days, MILLIS_PER_DAY};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
];

/// One element of a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Literal(String),
    /// A pattern letter repeated `count` times.
    Field(char, usize),
}

/// A parsed pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatePattern {
    pieces: Vec<Piece>,
}

impl DatePattern {
    /// Parse a pattern; letters it does not know, and an unclosed quote, are errors.
    pub fn parse(pattern: &str) -> Result<DatePattern> {
        let mut pieces = Vec::new();
        let mut chars = pattern.chars().peekable();
        let mut literal = String::new();
        while let Some(c) = chars.next() {
            if c == '\'' {
                if chars.peek() == Some(&'\'') {
                    chars.next();
                    literal.push('\'');
                    continue;
                }
                let mut closed = false;
                while let Some(q) = chars.next() {
                    if q == '\'' {
                        if chars.peek() == Some(&'\'') {
                            chars.next();
                            literal.push('\'');
                        } else {
                            closed = true;
                            break;
                        }
                    } else {
                        literal.push(q);
                    }
                }
                if !closed {
                    return Err(ConnectError::fatal(format!(
                        "date pattern {pattern:?} has an unclosed quote"
                    )));
                }
            } else if c.is_ascii_alphabetic() {
                if !"GyYMLdDEuaHkKhmsSzZX".contains(c) {
                    return Err(ConnectError::fatal(format!(
                        "date pattern {pattern:?}: unknown pattern letter {c:?}"
                    )));
                }
                if !literal.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                let mut count = 1;
                while chars.peek() == Some(&c) {
                    chars.next();
                    count += 1;
                }
                pieces.push(Piece::Field(c, count));
            } else {
                literal.push(c);
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        Ok(DatePattern { pieces })
    }

    /// Milliseconds since the epoch, formatted in UTC.
    pub fn format(&self, millis: i64) -> String {
        self.format_in(millis, 0, "UTC")
    }

    /// Milliseconds since the epoch, formatted in a time zone `offset_ms` ahead of UTC at that
    /// instant; `zone` is its name, for the `z` letter.
    pub fn format_in(&self, millis: i64, offset_ms: i64, zone: &str) -> String {
        let utc = offset_ms == 0 && zone == "UTC";
        let millis = millis + offset_ms;
        let days = millis.div_euclid(MILLIS_PER_DAY);
        let in_day = millis.rem_euclid(MILLIS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        let (hour, minute) = (in_day / 3_600_000, in_day / 60_000 % 60);
        let (second, milli) = (in_day / 1000 % 60, in_day % 1000);
        let weekday = days.rem_euclid(7) as usize;
        let day_of_year = days - crate::logical::days_from_civil(year, 1, 1) + 1;
        let mut out = String::new();
        let num = |out: &mut String, v: i64, width: usize| {
            out.push_str(&format!("{v:0width$}"));
        };
        for piece in &self.pieces {
            match piece {
                Piece::Literal(text) => out.push_str(text),
                Piece::Field(c, n) => match c {
                    'G' => out.push_str(if year > 0 { "AD" } else { "BC" }),
                    'y' | 'Y' if *n == 2 => num(&mut out, year.rem_euclid(100), 2),
                    'y' | 'Y' => num(&mut out, year, *n),
                    'M' | 'L' => match n {
                        1 | 2 => num(&mut out, i64::from(month), *n),
                        3 => out.push_str(&MONTHS[(month - 1) as usize][..3]),
                        _ => out.push_str(MONTHS[(month - 1) as usize]),
                    },
                    'd' => num(&mut out, i64::from(day), *n),
                    'D' => num(&mut out, day_of_year, *n),
                    'E' if *n <= 3 => out.push_str(&WEEKDAYS[weekday][..3]),
                    'E' => out.push_str(WEEKDAYS[weekday]),
                    'u' => num(&mut out, (weekday as i64 + 3) % 7 + 1, *n),
                    'a' => out.push_str(if hour < 12 { "AM" } else { "PM" }),
                    'H' => num(&mut out, hour, *n),
                    'k' => num(&mut out, if hour == 0 { 24 } else { hour }, *n),
                    'K' => num(&mut out, hour % 12, *n),
                    'h' => num(&mut out, if hour % 12 == 0 { 12 } else { hour % 12 }, *n),
                    'm' => num(&mut out, minute, *n),
                    's' => num(&mut out, second, *n),
                    'S' => num(&mut out, milli, *n),
                    'z' if utc && *n >= 4 => out.push_str("Coordinated Universal Time"),
                    'z' => out.push_str(zone),
                    'X' if offset_ms == 0 => out.push('Z'),
                    _ => {
                        // 'Z': +0900; 'X': +09, +0900, +09:00 as the count grows.
                        let sign = if offset_ms < 0 { '-' } else { '+' };
                        let minutes = offset_ms.abs() / 60_000;
                        let (h, m) = (minutes / 60, minutes % 60);
                        out.push_str(&match (c, n) {
                            ('X', 1) => format!("{sign}{h:02}"),
                            ('X', 3..) => format!("{sign}{h:02}:{m:02}"),
                            _ => format!("{sign}{h:02}{m:02}"),
                        });
                    }
                },
            }
        }
        out
    }
}

impl DatePattern {
    /// Text in this pattern as milliseconds since the epoch (UTC, unless the text carries an
    /// offset); the error says what did not match.
    pub fn parse_text(&self, text: &str) -> Result<i64> {
        let bad = |why: String| {
            ConnectError::data(format!("{text:?} does not match the date pattern: {why}"))
        };
        let chars: Vec<char> = text.chars().collect();
        let mut at = 0;
        let (mut year, mut month, mut day) = (1970i64, 1u32, 1u32);
        let (mut hour, mut minute, mut second, mut milli) = (0i64, 0i64, 0i64, 0i64);
        let mut pm: Option<bool> = None;
        let mut offset_minutes = 0i64;
        let number = |at: &mut usize, max: usize| -> Result<i64> {
            let start = *at;
            let signed = chars.get(*at) == Some(&'-');
            if signed {
                *at += 1;
            }
            while *at < chars.len() && *at - start < max && chars[*at].is_ascii_digit() {
                *at += 1;
            }
            let digits: String = chars[start..*at].iter().collect();
            digits
                .parse()
                .map_err(|_| bad(format!("expected a number at position {start}")))
        };
        for (i, piece) in self.pieces.iter().enumerate() {
            // A field followed by another field is read at its exact width.
            let next_is_field = matches!(self.pieces.get(i + 1), Some(Piece::Field(..)));
            match piece {
                Piece::Literal(lit) => {
                    for c in lit.chars() {
                        if chars.get(at) != Some(&c) {
                            return Err(bad(format!("expected {lit:?} at position {at}")));
                        }
                        at += 1;
                    }
                }
                Piece::Field(c, n) => {
                    let width = if next_is_field { *n } else { usize::MAX };
                    match c {
                        'y' | 'Y' => {
                            let v = number(&mut at, width.max(if *n == 2 { 2 } else { 1 }))?;
                            year = if *n == 2 && v < 100 { 2000 + v } else { v };
                        }
                        'M' | 'L' if *n >= 3 => {
                            let rest: String = chars[at..].iter().collect();
                            let found = MONTHS.iter().enumerate().find_map(|(i, m)| {
                                let name = if *n == 3 { &m[..3] } else { m };
                                rest.starts_with(name).then_some((i, name.len()))
                            });
                            let (i, len) = found.ok_or_else(|| {
                                bad(format!("expected a month name at position {at}"))
                            })?;
                            month = i as u32 + 1;
                            at += len;
                        }
                        'M' | 'L' => month = number(&mut at, width)? as u32,
                        'd' => day = number(&mut at, width)? as u32,
                        'H' | 'k' => hour = number(&mut at, width)? % 24,
                        'h' | 'K' => hour = number(&mut at, width)? % 12,
                        'm' => minute = number(&mut at, width)?,
                        's' => second = number(&mut at, width)?,
                        'S' => milli = number(&mut at, width)?,
                        'a' => {
                            let rest: String = chars[at..].iter().take(2).collect();
                            pm = Some(match rest.as_str() {
                                "AM" | "am" => false,
                                "PM" | "pm" => true,
                                _ => {
                                    return Err(bad(format!("expected AM or PM at position {at}")))
                                }
                            });
                            at += 2;
                        }
                        'E' => {
                            while chars.get(at).is_some_and(|c| c.is_alphabetic()) {
                                at += 1;
                            }
                        }
                        'z' => {
                            let rest: String = chars[at..].iter().collect();
                            let name = ["UTC", "GMT", "Z"]
                                .into_iter()
                                .find(|z| rest.starts_with(z));
                            at += name
                                .ok_or_else(|| bad(format!("expected UTC at position {at}")))?
                                .len();
                        }
                        'Z' | 'X' => {
                            if chars.get(at) == Some(&'Z') {
                                at += 1;
                            } else {
                                let sign = match chars.get(at) {
                                    Some('+') => 1,
                                    Some('-') => -1,
                                    _ => {
                                        return Err(bad(format!(
                                            "expected an offset at position {at}"
                                        )))
                                    }
                                };
                                at += 1;
                                let hh = number(&mut at, 2)?;
                                if chars.get(at) == Some(&':') {
                                    at += 1;
                                }
                                let mm = if chars.get(at).is_some_and(|c| c.is_ascii_digit()) {
                                    number(&mut at, 2)?
                                } else {
                                    0
                                };
                                offset_minutes = sign * (hh * 60 + mm);
                            }
                        }
                        other => {
                            return Err(bad(format!("pattern letter {other:?} cannot be parsed")))
                        }
                    }
                }
            }
        }
        if at != chars.len() {
            return Err(bad(format!("unexpected text at position {at}")));
        }
        if pm == Some(true) {
            hour += 12;
        }
        if !(1..=12).contains(&month) || !(1..=31).contains(&day) || minute > 59 || second > 59 {
            return Err(bad("a field is out of range".into()));
        }
        let days = crate::logical::days_from_civil(year, month, day);
        Ok(
            days * MILLIS_PER_DAY + ((hour * 60 + minute) * 60 + second) * 1000 + milli
                - offset_minutes * 60_000,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_parses_back_to_the_same_instant() {
        let t = 1_700_000_000_042;
        for pattern in [
            "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'",
            "yyyyMMddHHmmssSSS",
            "EEE, d MMM yyyy HH:mm:ss.SSS Z",
            "dd/MM/yyyy hh:mm:ss.SSS a",
        ] {
            let p = DatePattern::parse(pattern).expect(pattern);
            assert_eq!(p.parse_text(&p.format(t)).expect(pattern), t, "{pattern}");
        }
        let p = DatePattern::parse("yyyy-MM-dd HH:mm:ssXXX").expect("pattern");
        assert_eq!(
            p.parse_text("2023-11-15 07:13:20+09:00").expect("offset"),
            1_700_000_000_000
        );
        let day = DatePattern::parse("yyyy-MM-dd").expect("pattern");
        assert!(day.parse_text("2023-13-01").is_err());
        assert!(day.parse_text("2023-11-14x").is_err());
        assert!(day.parse_text("Nov 14").is_err());
    }

    #[test]
    fn patterns_format_as_simple_date_format_does_in_utc() {
        // 2023-11-14T22:13:20.042Z, a Tuesday.
        let t = 1_700_000_000_042;
        let cases = [
            ("yyyyMMdd", "20231114"),
            ("yyyyMMdd/HH/mm/yyyyMMddHHmm", "20231114/22/13/202311142213"),
            ("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", "2023-11-14T22:13:20.042Z"),
            ("yy-M-d h:mm a", "23-11-14 10:13 PM"),
            ("EEE, d MMM yyyy", "Tue, 14 Nov 2023"),
            ("EEEE MMMM", "Tuesday November"),
            ("'year' yyyy, 'o''clock' HH", "year 2023, o'clock 22"),
            ("D z Z X", "318 UTC +0000 Z"),
        ];
        for (pattern, want) in cases {
            let p = DatePattern::parse(pattern).expect(pattern);
            assert_eq!(p.format(t), want, "{pattern}");
        }
        assert_eq!(DatePattern::parse("yyyy").expect("ok").format(0), "1970");
    }

    #[test]
    fn patterns_format_in_a_time_zone() {
        // 2023-11-14T22:13:20.042Z is 2023-11-15 07:13 in Seoul (+09:00).
        let t = 1_700_000_000_042;
        let seoul = 9 * 3_600_000;
        let p = DatePattern::parse("yyyyMMdd/HH/mm z Z X XXX").expect("valid");
        assert_eq!(
            p.format_in(t, seoul, "KST"),
            "20231115/07/13 KST +0900 +09 +09:00"
        );
        let p = DatePattern::parse("HH:mm Z").expect("valid");
        assert_eq!(
            p.format_in(t, -(3 * 3_600_000 + 1_800_000), "NST"),
            "18:43 -0330"
        );
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert!(DatePattern::parse("yyyy-qq").is_err());
        assert!(DatePattern::parse("yyyy 'open").is_err());
    }
}
