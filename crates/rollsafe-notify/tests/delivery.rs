//! Delivery against local receivers: retries, refusals, `Retry-After`, time limits, isolation
//! of sinks, the bounded queue, and the credential never logged.

mod common;

use std::time::{Duration, Instant};

use common::{Logs, Receiver, Reply, sample, wait_until};
use prometheus_client::registry::Registry;
use rollsafe_notify::{
    DeliveryResult, Format, NOTIFY_ATTEMPTS, NOTIFY_QUEUE, Notifier, NotifyMetrics, Timing,
};

const DEADLINE: Duration = Duration::from_secs(30);

/// Short waits, so the rules are tested rather than the clock.
fn fast() -> Timing {
    Timing {
        timeout: Duration::from_secs(10),
        backoff: Duration::from_millis(20),
        retry_after_max: Duration::from_secs(30),
    }
}

fn total(metrics: &NotifyMetrics, format: Format, result: DeliveryResult) -> u64 {
    metrics.total(format, result)
}

async fn settled(metrics: &NotifyMetrics, format: Format, messages: u64) {
    wait_until(DEADLINE, "the messages to settle", || {
        total(metrics, format, DeliveryResult::Sent)
            + total(metrics, format, DeliveryResult::Failed)
            >= messages
    })
    .await;
}

#[tokio::test]
async fn two_server_errors_then_delivered() {
    let logs = Logs::capture();
    let receiver = Receiver::start(
        vec![Reply::Status(500), Reply::Status(503)],
        Reply::Status(200),
    )
    .await;
    let metrics = NotifyMetrics::default();
    let notifier =
        Notifier::start_with(vec![receiver.sink(Format::Slack)], metrics.clone(), fast());
    notifier.notify(sample());
    settled(&metrics, Format::Slack, 1).await;
    assert_eq!(total(&metrics, Format::Slack, DeliveryResult::Sent), 1);
    assert_eq!(total(&metrics, Format::Slack, DeliveryResult::Failed), 0);
    let requests = receiver.requests();
    assert_eq!(requests.len(), 3);
    // The backoff doubles: at least 20ms, then 40ms.
    assert!(requests[1].at - requests[0].at >= Duration::from_millis(20));
    assert!(requests[2].at - requests[1].at >= Duration::from_millis(40));
    // Every attempt sends the same body.
    assert!(requests.iter().all(|r| r.body == requests[0].body));
    logs.assert_no_secret();
}

#[tokio::test]
async fn always_failing_gives_up_after_the_attempts() {
    let logs = Logs::capture();
    let receiver = Receiver::always(Reply::Status(500)).await;
    let metrics = NotifyMetrics::default();
    let notifier = Notifier::start_with(vec![receiver.sink(Format::Json)], metrics.clone(), fast());
    notifier.notify(sample());
    settled(&metrics, Format::Json, 1).await;
    assert_eq!(total(&metrics, Format::Json, DeliveryResult::Failed), 1);
    assert_eq!(total(&metrics, Format::Json, DeliveryResult::Sent), 0);
    assert_eq!(receiver.count(), NOTIFY_ATTEMPTS as usize);

    let text = logs.text();
    let warnings: Vec<&str> = text.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].contains("code=\"server_error\""), "{text}");
    assert!(
        warnings[0].contains(&format!("sink=http://{}/…", receiver.addr)),
        "{text}"
    );
    logs.assert_no_secret();
}

#[tokio::test]
async fn a_client_error_is_not_retried() {
    let logs = Logs::capture();
    let receiver = Receiver::start(vec![Reply::Status(400)], Reply::Status(200)).await;
    let metrics = NotifyMetrics::default();
    let notifier =
        Notifier::start_with(vec![receiver.sink(Format::Teams)], metrics.clone(), fast());
    notifier.notify(sample());
    settled(&metrics, Format::Teams, 1).await;
    assert_eq!(total(&metrics, Format::Teams, DeliveryResult::Failed), 1);
    assert_eq!(receiver.count(), 1);
    // The next message is delivered: a refusal holds nothing.
    notifier.notify(sample());
    settled(&metrics, Format::Teams, 2).await;
    assert_eq!(total(&metrics, Format::Teams, DeliveryResult::Sent), 1);
    assert_eq!(receiver.count(), 2);
    assert!(logs.text().contains("code=\"rejected\""));
    logs.assert_no_secret();
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let logs = Logs::capture();
    let receiver = Receiver::start(vec![Reply::RetryAfter(429, "1")], Reply::Status(200)).await;
    let metrics = NotifyMetrics::default();
    let notifier = Notifier::start_with(
        vec![receiver.sink(Format::GoogleChat)],
        metrics.clone(),
        fast(),
    );
    notifier.notify(sample());
    settled(&metrics, Format::GoogleChat, 1).await;
    assert_eq!(total(&metrics, Format::GoogleChat, DeliveryResult::Sent), 1);
    let requests = receiver.requests();
    assert_eq!(requests.len(), 2);
    // The backoff alone would be 20ms.
    assert!(requests[1].at - requests[0].at >= Duration::from_secs(1));
    logs.assert_no_secret();
}

#[tokio::test]
async fn retry_after_is_capped() {
    let receiver = Receiver::start(vec![Reply::RetryAfter(503, "86400")], Reply::Status(200)).await;
    let metrics = NotifyMetrics::default();
    let timing = Timing {
        retry_after_max: Duration::from_millis(300),
        ..fast()
    };
    let notifier =
        Notifier::start_with(vec![receiver.sink(Format::Slack)], metrics.clone(), timing);
    notifier.notify(sample());
    settled(&metrics, Format::Slack, 1).await;
    assert_eq!(total(&metrics, Format::Slack, DeliveryResult::Sent), 1);
    let requests = receiver.requests();
    assert_eq!(requests.len(), 2);
    let gap = requests[1].at - requests[0].at;
    assert!(gap >= Duration::from_millis(300), "{gap:?}");
    assert!(gap < Duration::from_secs(20), "{gap:?}");
}

#[tokio::test]
async fn a_sink_that_never_answers_times_out_each_attempt() {
    let logs = Logs::capture();
    let receiver = Receiver::always(Reply::Hang).await;
    let metrics = NotifyMetrics::default();
    let timing = Timing {
        timeout: Duration::from_millis(300),
        ..fast()
    };
    let notifier = Notifier::start_with(vec![receiver.sink(Format::Json)], metrics.clone(), timing);
    let started = Instant::now();
    notifier.notify(sample());
    settled(&metrics, Format::Json, 1).await;
    assert_eq!(total(&metrics, Format::Json, DeliveryResult::Failed), 1);
    assert_eq!(receiver.count(), NOTIFY_ATTEMPTS as usize);
    // Each attempt waited for its time limit.
    assert!(started.elapsed() >= Duration::from_millis(300) * NOTIFY_ATTEMPTS);
    let requests = receiver.requests();
    for pair in requests.windows(2) {
        assert!(pair[1].at - pair[0].at >= Duration::from_millis(300));
    }
    assert!(logs.text().contains("code=\"timeout\""));
    logs.assert_no_secret();
}

#[tokio::test]
async fn a_stuck_sink_holds_nothing_for_the_others() {
    let logs = Logs::capture();
    let stuck = Receiver::always(Reply::Hang).await;
    let healthy = Receiver::always(Reply::Status(200)).await;
    let metrics = NotifyMetrics::default();
    // The stuck sink's first attempt outlasts the test.
    let timing = Timing {
        timeout: Duration::from_secs(120),
        ..fast()
    };
    let notifier = Notifier::start_with(
        vec![stuck.sink(Format::Slack), healthy.sink(Format::Teams)],
        metrics.clone(),
        timing,
    );
    let messages = 20;
    let started = Instant::now();
    for _ in 0..messages {
        notifier.notify(sample());
    }
    // `notify` queues and returns.
    assert!(started.elapsed() < Duration::from_secs(1));
    wait_until(DEADLINE, "the healthy sink's messages", || {
        total(&metrics, Format::Teams, DeliveryResult::Sent) == messages
    })
    .await;
    wait_until(DEADLINE, "the stuck sink's first request", || {
        stuck.count() == 1
    })
    .await;
    assert_eq!(healthy.count(), messages as usize);
    assert_eq!(total(&metrics, Format::Slack, DeliveryResult::Failed), 0);
    // The stuck sink's other messages wait in its queue.
    assert_eq!(metrics.queue_depth.get(), messages as i64 - 1);
    logs.assert_no_secret();
}

#[tokio::test]
async fn a_full_queue_drops_and_counts() {
    let logs = Logs::capture();
    let receiver = Receiver::always(Reply::Gate).await;
    let metrics = NotifyMetrics::default();
    let timing = Timing {
        timeout: Duration::from_secs(120),
        ..fast()
    };
    let notifier =
        Notifier::start_with(vec![receiver.sink(Format::Slack)], metrics.clone(), timing);
    // The first message is in flight, held by the receiver...
    notifier.notify(sample());
    wait_until(DEADLINE, "the first request", || receiver.count() == 1).await;
    // ...so the queue fills and the surplus is dropped at once.
    let surplus = 5;
    let started = Instant::now();
    for _ in 0..NOTIFY_QUEUE + surplus {
        notifier.notify(sample());
    }
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(
        total(&metrics, Format::Slack, DeliveryResult::Dropped),
        surplus as u64
    );
    assert_eq!(metrics.queue_depth.get(), NOTIFY_QUEUE as i64);
    let text = logs.text();
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("code=\"queue_full\""))
            .count(),
        surplus,
        "{text}"
    );

    receiver.open_gate();
    let delivered = 1 + NOTIFY_QUEUE as u64;
    wait_until(DEADLINE, "the queued messages", || {
        total(&metrics, Format::Slack, DeliveryResult::Sent) == delivered
    })
    .await;
    assert_eq!(metrics.queue_depth.get(), 0);
    assert_eq!(receiver.count() as u64, delivered);

    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let mut exposition = String::new();
    prometheus_client::encoding::text::encode(&mut exposition, &registry).unwrap();
    assert!(exposition.contains(&format!(
        "rollsafe_notify_messages_total{{format=\"slack\",result=\"sent\"}} {delivered}"
    )));
    assert!(exposition.contains(&format!(
        "rollsafe_notify_messages_total{{format=\"slack\",result=\"dropped\"}} {surplus}"
    )));
    logs.assert_no_secret();
}

#[tokio::test]
async fn an_unreachable_sink_fails_after_the_attempts() {
    let logs = Logs::capture();
    // A port nothing listens on: bind, learn it, close it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let url = format!("http://{addr}/services/T0001/B0001/{}", common::TOKEN);
    let metrics = NotifyMetrics::default();
    let notifier = Notifier::start_with(
        vec![rollsafe_notify::Sink {
            url: url.parse().unwrap(),
            format: Format::Json,
        }],
        metrics.clone(),
        fast(),
    );
    notifier.notify(sample());
    settled(&metrics, Format::Json, 1).await;
    assert_eq!(total(&metrics, Format::Json, DeliveryResult::Failed), 1);
    let text = logs.text();
    assert!(text.contains("code=\"transport\""), "{text}");
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("notification attempt failed"))
            .count(),
        NOTIFY_ATTEMPTS as usize - 1,
        "{text}"
    );
    logs.assert_no_secret();
}

#[tokio::test]
async fn no_sinks_is_a_no_op() {
    let metrics = NotifyMetrics::default();
    let notifier = Notifier::start(Vec::new(), metrics.clone());
    assert_eq!(notifier.sinks(), 0);
    notifier.notify(sample());
    assert_eq!(metrics.queue_depth.get(), 0);
    for format in Format::ALL {
        assert_eq!(total(&metrics, format, DeliveryResult::Dropped), 0);
    }
}
