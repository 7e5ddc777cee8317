//! `-o text`: a paragraph per workload, the counts and notes, then the values to move.

use serde_json::Value;

use rollsafe_migrate::reloader::Report;
use rollsafe_migrate::reloader::workload::{Consumed, WatchState, WorkloadReport, quoted};

/// The width of the labels of a workload's lines.
const LABEL: usize = 13;

pub(super) fn render(report: &Report) -> String {
    let mut out = String::new();
    for workload in &report.workloads {
        paragraph(&mut out, workload);
        out.push('\n');
    }
    let summary = &report.summary;
    if report.workloads.is_empty() {
        out.push_str(&format!(
            "{} workloads read; none carries Reloader annotations.\n",
            summary.workloads_read
        ));
    } else {
        out.push_str(&format!(
            "{} workloads read; {} carry Reloader annotations: {} watched, {} not watched.\n",
            summary.workloads_read,
            summary.with_reloader_annotations,
            summary.watched,
            summary.not_watched,
        ));
    }
    for note in &report.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out.push('\n');
    values(&mut out, report);
    out.trim_end().to_owned()
}

/// One workload.
fn paragraph(out: &mut String, workload: &WorkloadReport) {
    let name = workload.name.as_deref().unwrap_or("?");
    match &workload.namespace {
        Some(namespace) => out.push_str(&format!("{} {namespace}/{name}\n", workload.kind)),
        None => out.push_str(&format!("{} {name}\n", workload.kind)),
    }
    let mut line = |label: &str, text: &str| {
        out.push_str(&format!("  {label:<LABEL$}{text}\n"));
    };
    for (i, (key, value)) in workload.reloader_annotations.iter().enumerate() {
        line(
            if i == 0 { "reloader:" } else { "" },
            &format!("{key}: {value:?}"),
        );
    }
    for (i, (key, value)) in workload.template_annotations.iter().enumerate() {
        line(
            if i == 0 { "on template:" } else { "" },
            &format!("{key}: {value:?}"),
        );
    }
    if let Some(value) = &workload.rollsafe_watch {
        line("rollsafe:", &format!("rollsafe.dev/watch: {value:?}"));
    }
    line("watch:", &workload.watch.reason);
    if workload.watch.state == WatchState::Watched && workload.consumes.is_empty() {
        line(
            "consumes:",
            "nothing (no Secret or ConfigMap referenced or named)",
        );
    }
    for (i, consumed) in workload.consumes.iter().enumerate() {
        line(if i == 0 { "consumes:" } else { "" }, &consumes(consumed));
    }
    for (i, difference) in workload.differences.iter().enumerate() {
        line(if i == 0 { "differs:" } else { "" }, &difference.message);
    }
    for (i, leftover) in workload.leftovers.iter().enumerate() {
        line(
            if i == 0 { "left as is:" } else { "" },
            &format!("{leftover} (causes no roll)"),
        );
    }
}

fn consumes(consumed: &Consumed) -> String {
    let keys = match &consumed.keys {
        Some(keys) if keys.len() == 1 => format!("key {}", quoted(keys)),
        Some(keys) => format!("keys {}", quoted(keys)),
        None => "every key".to_owned(),
    };
    let rolls = match consumed.opted_out_by {
        Some(by) => format!("; rolls nothing: {by}"),
        None => String::new(),
    };
    format!(
        "{}/{} ({keys}{rolls})",
        consumed.kind.as_str(),
        consumed.name
    )
}

/// The values snippet, then what was moved and what was not.
fn values(out: &mut String, report: &Report) {
    let from = if report.summary.reloader_values == "file" {
        "from --reloader-values"
    } else {
        "for Reloader's chart defaults"
    };
    out.push_str(&format!("Helm values for rollsafe's chart ({from}):\n"));
    let yaml = serde_saphyr::to_string(&report.values)
        .ok()
        .or_else(|| serde_json::to_string_pretty(&report.values).ok())
        .unwrap_or_default();
    out.push_str(yaml.trim_end());
    out.push('\n');
    for mapped in &report.mapped {
        let note = mapped
            .note
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        out.push_str(&format!(
            "moved:      {} {} -> {}{note}\n",
            mapped.setting,
            compact(&mapped.value),
            mapped.to
        ));
    }
    for unmapped in &report.unmapped {
        out.push_str(&format!(
            "not moved:  {} {}: {}\n",
            unmapped.setting,
            compact(&unmapped.value),
            unmapped.reason
        ));
    }
}

/// A value on one line, at most 80 characters.
fn compact(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 80 {
        let cut: String = text.chars().take(77).collect();
        format!("{cut}...")
    } else {
        text
    }
}
