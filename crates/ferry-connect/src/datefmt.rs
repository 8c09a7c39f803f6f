//! Date patterns in the syntax of Java's `SimpleDateFormat` (and Joda's, for what they share),
//! which Kafka Connect users already write: `yyyyMMdd`, `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`. Times
//! are formatted in UTC.

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
                    'z' => out.push_str(if *n >= 4 {
                        "Coordinated Universal Time"
                    } else {
                        "UTC"
                    }),
                    'Z' => out.push_str("+0000"),
                    _ => out.push('Z'), // 'X': UTC is "Z"
                },
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn bad_patterns_are_refused() {
        assert!(DatePattern::parse("yyyy-qq").is_err());
        assert!(DatePattern::parse("yyyy 'open").is_err());
    }
}
