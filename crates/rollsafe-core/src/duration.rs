//! The one duration format of every flag and setting: bare seconds (`90`), or whole numbers
//! with units summed (`500ms`, `15s`, `10m`, `8h`, `1d`, `1h30m`). No spaces, signs or
//! fractions. Each caller states its own bounds (a positive lifetime, a debounce of at most an
//! hour).

use std::time::Duration;

use thiserror::Error;

/// A text that is not a duration in the format above (or overflows).
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("not a duration (seconds, or e.g. 500ms, 30s, 15m, 8h, 1h30m)")]
pub struct DurationError;

/// Parses a duration; zero is a valid result.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError);
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| DurationError);
    }
    let mut total_millis: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(DurationError);
        }
        let value: u64 = rest[..digits].parse().map_err(|_| DurationError)?;
        rest = &rest[digits..];
        let units = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let millis_per_unit: u64 = match &rest[..units] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(DurationError),
        };
        rest = &rest[units..];
        total_millis = value
            .checked_mul(millis_per_unit)
            .and_then(|millis| total_millis.checked_add(millis))
            .ok_or(DurationError)?;
    }
    Ok(Duration::from_millis(total_millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format() {
        let good = [
            ("0", 0),
            ("90", 90_000),
            ("500ms", 500),
            ("2s", 2_000),
            ("15m", 900_000),
            ("8h", 28_800_000),
            ("1d", 86_400_000),
            ("1h30m", 5_400_000),
            ("1m30s", 90_000),
            ("1s500ms", 1_500),
            (" 7s ", 7_000),
        ];
        for (text, millis) in good {
            assert_eq!(parse(text), Ok(Duration::from_millis(millis)), "{text}");
        }
        for bad in [
            "",
            "s",
            "h",
            "8x",
            "1.5h",
            "-1",
            "-1s",
            "2 s",
            "1h 30m",
            "5mss",
            "99999999999999999999",
            "99999999999999999d",
        ] {
            assert_eq!(parse(bad), Err(DurationError), "{bad}");
        }
    }
}
