//! What an Event goes through before it reaches the store: the correlation client-go's recorder
//! (`tools/record`, `EventCorrelator`) applies in every controller of a real cluster, so that a
//! workload rolled a hundred times keeps a handful of Events, not two hundred.
//!
//! In client-go's order, for each Event a controller records:
//!
//! 1. **Aggregation.** Events that differ only in their message — same source, involved
//!    object, type, reason and reporting controller and instance — are similar. From the
//!    [`AGGREGATE_MAX_EVENTS`]th distinct message within [`AGGREGATE_INTERVAL`] of the previous
//!    similar Event, the Event becomes `(combined from similar events): <message>` and is
//!    counted as one Event for the whole group.
//! 2. **Counting.** An Event identical to one already recorded (its message included, or the
//!    group's for an aggregate) is not stored again: the earlier Event's `count` goes up by one
//!    and its `lastTimestamp` (and, for an aggregate, its message) become this one's.
//! 3. **Spam filter.** A source may record [`SPAM_BURST`] Events about one object, then one
//!    more every [`SPAM_REFILL`]; the rest are dropped.
//!
//! Each of the three caches holds at most [`CACHE_ENTRIES`] keys, the least recently used
//! leaving first, as client-go's LRU caches do. Time is passed in, so the rules are tested on a
//! clock of the test's own.

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use lru::LruCache;
use serde_json::{Value, json};

/// Keys each cache holds (client-go's `maxLruCacheEntries`).
pub const CACHE_ENTRIES: NonZeroUsize = NonZeroUsize::MIN.saturating_add(4095);
/// Distinct messages of similar Events before they are aggregated.
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// How long after the previous similar Event a group stays open.
pub const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// Events a source may record about one object at once.
pub const SPAM_BURST: f64 = 25.0;
/// The time it takes a source to earn one more Event about an object.
pub const SPAM_REFILL: Duration = Duration::from_secs(300);
/// The prefix of an aggregate Event's message.
pub const AGGREGATE_PREFIX: &str = "(combined from similar events): ";

/// What becomes of an Event.
#[derive(Debug, Clone, PartialEq)]
pub enum Correlated {
    /// Store it as a new Event.
    New(Value),
    /// It repeats the stored Event it names (`metadata.name`): that one takes its `count`,
    /// `lastTimestamp` and `message`. If that Event is gone, store this one.
    Repeat(Value),
    /// Dropped by the spam filter.
    Dropped,
}

/// A group of similar Events.
#[derive(Debug)]
struct Similar {
    messages: Vec<String>,
    last: Instant,
}

/// An Event recorded before: what the next identical one updates.
#[derive(Debug, Clone)]
struct Observed {
    name: String,
    count: u64,
    first_timestamp: Value,
}

/// A source's budget of Events about one object (a token bucket).
#[derive(Debug)]
struct Budget {
    tokens: f64,
    refilled: Instant,
}

impl Budget {
    fn full(now: Instant) -> Self {
        Self {
            tokens: SPAM_BURST,
            refilled: now,
        }
    }

    fn try_take(&mut self, now: Instant) -> bool {
        let earned =
            now.saturating_duration_since(self.refilled).as_secs_f64() / SPAM_REFILL.as_secs_f64();
        self.tokens = (self.tokens + earned).min(SPAM_BURST);
        self.refilled = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The recorder's correlation state, shared by every simulated controller of one store.
#[derive(Debug)]
pub struct EventCorrelator {
    similar: LruCache<String, Similar>,
    observed: LruCache<String, Observed>,
    budgets: LruCache<String, Budget>,
}

impl Default for EventCorrelator {
    fn default() -> Self {
        Self {
            similar: LruCache::new(CACHE_ENTRIES),
            observed: LruCache::new(CACHE_ENTRIES),
            budgets: LruCache::new(CACHE_ENTRIES),
        }
    }
}

fn text<'a>(event: &'a Value, pointer: &str) -> &'a str {
    event.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The source and involved object (client-go's `getSpamKey`); fields are joined with a
/// separator no name contains.
fn object_key(event: &Value) -> String {
    [
        "/source/component",
        "/source/host",
        "/involvedObject/kind",
        "/involvedObject/namespace",
        "/involvedObject/name",
        "/involvedObject/uid",
        "/involvedObject/apiVersion",
    ]
    .iter()
    .map(|pointer| text(event, pointer))
    .collect::<Vec<_>>()
    .join("\u{0}")
}

/// Fields that, added to the object key, make the group of similar Events
/// (`EventAggregatorByReasonFunc`).
const SIMILAR: [&str; 4] = [
    "/type",
    "/reason",
    "/reportingComponent",
    "/reportingInstance",
];
/// Fields that, added to the object key, make an Event's identity (`getEventKey`).
const IDENTITY: [&str; 4] = ["/involvedObject/fieldPath", "/type", "/reason", "/message"];

/// `object` (an [`object_key`]) extended with `fields` of `event`.
fn key_with(object: &str, event: &Value, fields: &[&str]) -> String {
    let mut key = object.to_owned();
    for pointer in fields {
        key.push('\u{0}');
        key.push_str(text(event, pointer));
    }
    key
}

impl EventCorrelator {
    /// Decides what becomes of `event` (a core `v1` Event as a controller records it) at `now`.
    pub fn correlate(&mut self, mut event: Value, now: Instant) -> Correlated {
        // The source and object never change below: aggregation keeps them.
        let object = object_key(&event);
        // 1. Aggregation.
        let group = key_with(&object, &event, &SIMILAR);
        let message = text(&event, "/message").to_owned();
        let similar = self.similar.get_or_insert_mut(group.clone(), || Similar {
            messages: Vec::new(),
            last: now,
        });
        if now.saturating_duration_since(similar.last) > AGGREGATE_INTERVAL {
            similar.messages.clear();
        }
        if !similar.messages.contains(&message) {
            similar.messages.push(message.clone());
        }
        similar.last = now;
        let key = if similar.messages.len() < AGGREGATE_MAX_EVENTS {
            key_with(&object, &event, &IDENTITY)
        } else {
            // The set stays at its bound; the Event speaks for the group.
            similar.messages.pop();
            event["message"] = json!(format!("{AGGREGATE_PREFIX}{message}"));
            group
        };
        // 2. Counting.
        let repeat = match self.observed.get(&key).cloned() {
            Some(earlier) => {
                event["metadata"]["name"] = json!(earlier.name);
                event["firstTimestamp"] = earlier.first_timestamp;
                event["count"] = json!(earlier.count + 1);
                true
            }
            None => false,
        };
        self.observed.put(
            key,
            Observed {
                name: text(&event, "/metadata/name").to_owned(),
                count: event.get("count").and_then(Value::as_u64).unwrap_or(1),
                first_timestamp: event.get("firstTimestamp").cloned().unwrap_or(Value::Null),
            },
        );
        // 3. The spam filter.
        let allowed = self
            .budgets
            .get_or_insert_mut(object, || Budget::full(now))
            .try_take(now);
        match (allowed, repeat) {
            (false, _) => Correlated::Dropped,
            (true, false) => Correlated::New(event),
            (true, true) => Correlated::Repeat(event),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scaled(object: &str, message: &str, name: &str) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "shop"},
            "involvedObject": {"kind": "Deployment", "namespace": "shop", "name": object,
                               "uid": format!("uid-{object}"), "apiVersion": "apps/v1"},
            "reason": "ScalingReplicaSet", "message": message, "type": "Normal",
            "source": {"component": "deployment-controller"},
            "reportingComponent": "deployment-controller", "reportingInstance": "",
            "firstTimestamp": format!("first-{name}"), "lastTimestamp": format!("last-{name}"),
            "count": 1,
        })
    }

    fn outcome(correlated: &Correlated) -> (&'static str, String, u64, String) {
        match correlated {
            Correlated::New(e) | Correlated::Repeat(e) => (
                if matches!(correlated, Correlated::New(_)) {
                    "new"
                } else {
                    "repeat"
                },
                text(e, "/metadata/name").to_owned(),
                e["count"].as_u64().unwrap_or(0),
                text(e, "/message").to_owned(),
            ),
            Correlated::Dropped => ("dropped", String::new(), 0, String::new()),
        }
    }

    #[test]
    fn an_identical_event_counts_on_the_first_one() {
        let mut correlator = EventCorrelator::default();
        let now = Instant::now();
        let first = correlator.correlate(scaled("web", "Scaled up to 3", "web.1"), now);
        assert_eq!(
            outcome(&first),
            ("new", "web.1".into(), 1, "Scaled up to 3".into())
        );
        let again = correlator.correlate(scaled("web", "Scaled up to 3", "web.2"), now);
        assert_eq!(
            outcome(&again),
            ("repeat", "web.1".into(), 2, "Scaled up to 3".into())
        );
        let Correlated::Repeat(again) = again else {
            unreachable!()
        };
        // The repeat keeps the first occurrence's first timestamp and brings its own last one.
        assert_eq!(again["firstTimestamp"], "first-web.1");
        assert_eq!(again["lastTimestamp"], "last-web.2");
    }

    #[test]
    fn the_tenth_distinct_message_starts_one_combined_event() {
        let mut correlator = EventCorrelator::default();
        let now = Instant::now();
        let mut outcomes = Vec::new();
        for n in 1..=12 {
            let event = scaled(
                "web",
                &format!("Scaled up replica set web-{n}"),
                &format!("web.{n}"),
            );
            outcomes.push(outcome(&correlator.correlate(event, now)));
        }
        let want = |n: u32| format!("Scaled up replica set web-{n}");
        for (n, got) in (1..).zip(&outcomes[..9]) {
            assert_eq!(got, &("new", format!("web.{n}"), 1, want(n)));
        }
        assert_eq!(
            outcomes[9],
            (
                "new",
                "web.10".into(),
                1,
                format!("{AGGREGATE_PREFIX}{}", want(10))
            )
        );
        assert_eq!(
            outcomes[10],
            (
                "repeat",
                "web.10".into(),
                2,
                format!("{AGGREGATE_PREFIX}{}", want(11))
            )
        );
        assert_eq!(
            outcomes[11],
            (
                "repeat",
                "web.10".into(),
                3,
                format!("{AGGREGATE_PREFIX}{}", want(12))
            )
        );
        // Another object is another group.
        let other =
            correlator.correlate(scaled("api", "Scaled up replica set api-1", "api.1"), now);
        assert_eq!(outcome(&other).0, "new");
    }

    #[test]
    fn a_group_closes_after_ten_quiet_minutes() {
        let mut correlator = EventCorrelator::default();
        let start = Instant::now();
        for n in 1..=9 {
            correlator.correlate(scaled("web", &format!("m{n}"), &format!("web.{n}")), start);
        }
        let later = start + AGGREGATE_INTERVAL + Duration::from_secs(1);
        let fresh = correlator.correlate(scaled("web", "m10", "web.10"), later);
        assert_eq!(outcome(&fresh), ("new", "web.10".into(), 1, "m10".into()));
    }

    #[test]
    fn a_source_may_burst_twenty_five_events_about_an_object_then_one_per_five_minutes() {
        let mut correlator = EventCorrelator::default();
        let start = Instant::now();
        let kept = (1..=40)
            .map(|n| {
                correlator.correlate(scaled("web", &format!("m{n}"), &format!("web.{n}")), start)
            })
            .filter(|c| !matches!(c, Correlated::Dropped))
            .count();
        assert_eq!(kept, 25);
        let early = start + SPAM_REFILL - Duration::from_secs(1);
        assert_eq!(
            correlator.correlate(scaled("web", "m41", "web.41"), early),
            Correlated::Dropped
        );
        // The bucket refills continuously: by five minutes after the burst it holds one Event.
        let refilled = start + SPAM_REFILL + Duration::from_secs(1);
        assert_ne!(
            correlator.correlate(scaled("web", "m42", "web.42"), refilled),
            Correlated::Dropped
        );
        assert_eq!(
            correlator.correlate(scaled("web", "m43", "web.43"), refilled),
            Correlated::Dropped
        );
        // Another object has its own budget.
        assert_ne!(
            correlator.correlate(scaled("api", "m1", "api.1"), refilled),
            Correlated::Dropped
        );
    }
}
