use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn window(text: &str) -> RestartWindow {
    text.parse().unwrap()
}

#[test]
fn the_grammar() {
    let good = [
        (
            "Mon-Fri 09:00-17:00 Europe/Berlin",
            "Mon-Fri 09:00-17:00 Europe/Berlin",
        ),
        ("  mon-fri   09:00-17:00  ", "mon-fri 09:00-17:00"),
        (
            "Sat,Sun 10:00-12:00; Mon-Fri 22:00-06:00 UTC",
            "Sat,Sun 10:00-12:00; Mon-Fri 22:00-06:00 UTC",
        ),
        ("* 00:00-24:00", "* 00:00-24:00"),
        (
            "Fri-Mon 01:00-02:00 America/New_York",
            "Fri-Mon 01:00-02:00 America/New_York",
        ),
        (
            "Monday,Wednesday 08:30-09:00 utc",
            "Monday,Wednesday 08:30-09:00 utc",
        ),
    ];
    for (text, shown) in good {
        let parsed: RestartWindow = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(parsed.to_string(), shown);
        assert_eq!(parsed.to_string().parse::<RestartWindow>().unwrap(), parsed);
    }
    let long = format!("Mon 09:00-10:00 {}", "x".repeat(MAX_WINDOW_BYTES));
    let many = vec!["* 01:00-02:00"; MAX_SPANS + 1].join(";");
    assert!(many.len() <= MAX_WINDOW_BYTES);
    let bad = [
        ("", WindowError::Empty),
        ("   ", WindowError::Empty),
        (long.as_str(), WindowError::TooLong),
        (many.as_str(), WindowError::TooManySpans),
        ("Mon-Fri", WindowError::Span),
        ("09:00-17:00", WindowError::Span),
        ("Mon-Fri 09:00-17:00 Mars/Olympus", WindowError::Zone),
        ("Mon-Fri 09:00 17:00", WindowError::Span),
        ("Mon-Fri 09:00-17:00 UTC extra", WindowError::Zone),
        ("Mon-Fri 9:00-17:00", WindowError::Time),
        ("Mon-Fri 09:60-17:00", WindowError::Time),
        ("Mon-Fri 24:00-06:00", WindowError::Time),
        ("Mon-Fri 09:00-24:01", WindowError::Time),
        ("Mon-Fri 09:00-25:00", WindowError::Time),
        ("Mon-Fri 0a:00-17:00", WindowError::Time),
        ("Mon-Fry 09:00-17:00", WindowError::Day),
        ("Mon-Fri 09:00-09:00", WindowError::EmptySpan),
        ("Mon-Fri 09:00-17:00;", WindowError::Span),
        ("Mon-Fri 09:00-17:00 Sat 10:00-11:00", WindowError::Span),
    ];
    for (text, error) in bad {
        assert_eq!(text.parse::<RestartWindow>(), Err(error), "{text:?}");
        assert!(error.code().starts_with("restart_window"));
    }
}

#[test]
fn open_and_next_open_table() {
    // (window, now, open now, next opening); 2026-12-03 is a Thursday.
    let cases = [
        (
            "Mon-Fri 09:00-17:00 UTC",
            "2026-12-03T08:59:59Z",
            false,
            Some("2026-12-03T09:00:00Z"),
        ),
        (
            "Mon-Fri 09:00-17:00 UTC",
            "2026-12-03T09:00:00Z",
            true,
            Some("2026-12-03T09:00:00Z"),
        ),
        (
            "Mon-Fri 09:00-17:00 UTC",
            "2026-12-03T16:59:59Z",
            true,
            Some("2026-12-03T16:59:59Z"),
        ),
        (
            "Mon-Fri 09:00-17:00 UTC",
            "2026-12-03T17:00:00Z",
            false,
            Some("2026-12-04T09:00:00Z"),
        ),
        // Friday evening → Monday morning.
        (
            "Mon-Fri 09:00-17:00 UTC",
            "2026-12-04T17:00:00Z",
            false,
            Some("2026-12-07T09:00:00Z"),
        ),
        // Berlin is UTC+1 in December.
        (
            "Mon-Fri 09:00-17:00 Europe/Berlin",
            "2026-12-03T07:30:00Z",
            false,
            Some("2026-12-03T08:00:00Z"),
        ),
        (
            "Mon-Fri 09:00-17:00 Europe/Berlin",
            "2026-12-03T15:59:00Z",
            true,
            Some("2026-12-03T15:59:00Z"),
        ),
        // Crossing midnight: Friday 22:00 to Saturday 06:00.
        (
            "Fri 22:00-06:00",
            "2026-12-05T05:59:00Z",
            true,
            Some("2026-12-05T05:59:00Z"),
        ),
        (
            "Fri 22:00-06:00",
            "2026-12-05T06:00:00Z",
            false,
            Some("2026-12-11T22:00:00Z"),
        ),
        (
            "Fri 22:00-06:00",
            "2026-12-04T21:00:00Z",
            false,
            Some("2026-12-04T22:00:00Z"),
        ),
        // A wrapping day range, and the end of the day.
        (
            "Sat-Mon 20:00-24:00",
            "2026-12-03T23:00:00Z",
            false,
            Some("2026-12-05T20:00:00Z"),
        ),
        (
            "Sat-Mon 20:00-24:00",
            "2026-12-07T23:59:59Z",
            true,
            Some("2026-12-07T23:59:59Z"),
        ),
        (
            "Sat-Mon 20:00-24:00",
            "2026-12-08T00:00:00Z",
            false,
            Some("2026-12-12T20:00:00Z"),
        ),
        // Several spans: the earliest opening.
        (
            "Sun 10:00-11:00; Thu 18:00-19:00",
            "2026-12-03T12:00:00Z",
            false,
            Some("2026-12-03T18:00:00Z"),
        ),
        // Daylight saving time: New York springs forward on 2027-03-14 at 02:00 (to 03:00).
        // The 02:30 start does not exist that day: it opens at 03:30 local (07:30Z).
        (
            "Sun 02:30-04:00 America/New_York",
            "2027-03-14T05:00:00Z",
            false,
            Some("2027-03-14T07:30:00Z"),
        ),
        // After the change, 09:00 local is 13:00Z, not 14:00Z.
        (
            "Mon 09:00-10:00 America/New_York",
            "2027-03-14T12:00:00Z",
            false,
            Some("2027-03-15T13:00:00Z"),
        ),
    ];
    for (text, now, open, next) in cases {
        let w = window(text);
        assert_eq!(w.is_open(at(now)), open, "{text} at {now}");
        assert_eq!(w.next_open(at(now)), next.map(at), "{text} from {now}");
    }
}

#[test]
fn windows_open_together() {
    let office = window("Mon-Fri 09:00-17:00 UTC");
    let late = window("* 16:00-18:00 UTC");
    let weekend = window("Sat,Sun 00:00-24:00 UTC");
    let thursday = at("2026-12-03T10:00:00Z");
    assert_eq!(
        next_open_all([&office, &late], thursday),
        Some(at("2026-12-03T16:00:00Z"))
    );
    assert_eq!(next_open_all([&office], thursday), Some(thursday));
    assert_eq!(next_open_all([&office, &weekend], thursday), None);
    assert_eq!(
        next_open_all(std::iter::empty::<&RestartWindow>(), thursday),
        Some(thursday)
    );
}

#[test]
fn local_times_show_the_zone_offset() {
    let w = window("Mon-Fri 09:00-17:00 Europe/Berlin");
    assert_eq!(
        w.local(at("2026-12-07T08:00:00Z")),
        "2026-12-07T09:00+01:00"
    );
    assert_eq!(
        w.local(at("2026-07-06T07:00:00Z")),
        "2026-07-06T09:00+02:00"
    );
}
