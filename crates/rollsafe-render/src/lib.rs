//! The default-mode render at the edge: whether it hashes on a second thread, and how — the
//! threading of the core's pipeline (`rollsafe_core::render::pipeline`).
//!
//! With another core, the core's [`Walk`](pipeline::Walk) runs on a second thread: it owns the
//! documents, walks the hash order and hands each document back over a channel once hashed,
//! and the calling thread writes and drops it; the documents that hold a workload stay with
//! the walk, which applies the updates and writes them while the others are still being
//! written. The hash then costs wall time only where it is longer than the writing. The
//! documents were parsed on the calling thread, so they are freed there too: the pieces
//! written from them take the space they leave (an allocator keeps a heap per thread). On one
//! core the walk runs on the calling thread alone (`pipeline::render_default`), planning,
//! hashing and writing in a row.
//!
//! Why a crate of its own: the core promises that nothing in it starts a thread (it is pure,
//! and its callers — the controller, a server — own their threads), so the one place that
//! does cannot live there; and `rollsafe render`, its benchmark and its fuzz tests must run
//! the same code, which a binary crate cannot share. This crate is that code, and nothing
//! else: the front ends (the command line today) read inputs and write the pieces.

#![warn(missing_docs, unreachable_pub)]

use std::sync::mpsc;

use rollsafe_core::render::WorkloadType;
use rollsafe_core::render::pipeline::{self, Output, SetError};
use rollsafe_manifest::{Document, ManifestSet};

/// Renders `set` in default mode and writes it back, as pieces to be written in order, the
/// walk beside the writing when there is a second core. Nothing is returned unless everything
/// succeeded.
pub fn render_default(
    set: ManifestSet,
    workload_type: Option<WorkloadType>,
) -> Result<Vec<String>, SetError> {
    // A second thread only helps beside another core.
    match std::thread::available_parallelism() {
        Ok(cores) if cores.get() > 1 => beside_the_writing(set, workload_type),
        _ => pipeline::render_default(set, workload_type),
    }
}

/// [`render_default`] with the walk on a second thread, whatever the cores.
pub fn beside_the_writing(
    set: ManifestSet,
    workload_type: Option<WorkloadType>,
) -> Result<Vec<String>, SetError> {
    let (layout, walk) = pipeline::prepare(set, workload_type)?;
    let mut output = Output::new(&layout);
    let late = std::thread::scope(|scope| {
        let (hand_over, handed) = mpsc::channel::<(usize, Document)>();
        let layout = &layout;
        let walker = scope.spawn(move || {
            // A closed channel means the writing failed: hashing on costs no more than this.
            walk.run(layout, |index, document| {
                let _ = hand_over.send((index, document));
            })
        });
        for (index, document) in handed {
            if output.write(index, document).is_break() {
                break;
            }
        }
        walker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    output.finish(late)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollsafe_core::render;

    fn set(inputs: &[&str]) -> ManifestSet {
        let mut set = ManifestSet::new();
        for (i, text) in inputs.iter().enumerate() {
            set.parse_input(format!("in-{i}.yaml"), text).unwrap();
        }
        set
    }

    #[test]
    fn the_walk_beside_the_writing_writes_what_it_writes_on_one_thread() {
        let long = "ünïcödé-€-𝄞 ".repeat(400);
        let big = format!(
            "kind: ConfigMap\napiVersion: v1\nmetadata: {{name: big}}\ndata:\n  text: \"{long}\"\n"
        );
        let mixed = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n\
            ---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {template: {spec: {}}}\n\
            ---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec: {template: {spec: {}}}\n\
            ---\n- {apiVersion: v1, kind: Secret, metadata: {name: s}, data: {p: cA==}}\n";
        let failing =
            "kind: ConfigMap\nmetadata: {name: a}\n---\nkind: Deployment\nmetadata: {name: web}\n";
        let cases: [&[&str]; 4] = [&[mixed], &[mixed, &big], &[&big], &[failing]];
        for inputs in cases {
            for workload_type in [None, Some(WorkloadType::Deployment)] {
                let render = |stream: Result<Vec<String>, SetError>| {
                    stream.map(|s| s.concat()).map_err(|e| e.to_string())
                };
                let beside = render(beside_the_writing(set(inputs), workload_type));
                let alone = render(render::pipeline::render_default(set(inputs), workload_type));
                assert_eq!(beside, alone, "{workload_type:?}");
                assert_eq!(render(render_default(set(inputs), workload_type)), alone);
            }
        }
        let failed = beside_the_writing(set(&[failing]), None).unwrap_err();
        assert_eq!(
            failed.to_string(),
            "in-0.yaml: document 2: Deployment web: resource missing spec"
        );
    }
}
