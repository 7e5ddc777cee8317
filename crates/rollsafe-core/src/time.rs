//! The one timestamp format of the contract: RFC 3339, UTC, with milliseconds
//! (`2026-11-29T18:00:00.123Z`). The restart annotation value and every audit record use it.

use jiff::Timestamp;

/// `now` as RFC 3339 UTC with exactly three fractional digits (truncated, not rounded).
pub fn rfc3339_millis(now: Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_with_milliseconds() {
        let table = [
            ("2026-11-29T18:00:00.123456789Z", "2026-11-29T18:00:00.123Z"),
            ("2026-11-29T18:00:00Z", "2026-11-29T18:00:00.000Z"),
            (
                "2026-11-29T19:00:00.999999+01:00",
                "2026-11-29T18:00:00.999Z",
            ),
        ];
        for (input, expected) in table {
            let now: Timestamp = input.parse().unwrap();
            assert_eq!(rfc3339_millis(now), expected, "{input}");
        }
    }
}
