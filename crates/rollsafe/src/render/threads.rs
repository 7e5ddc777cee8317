//! Whether a default-mode render hashes on a second thread, and how: the threading of the
//! core's pipeline (`rollsafe_core::render::pipeline`), decided here at the command's edge.
//!
//! With another core, the core's [`Walk`](pipeline::Walk) runs on a second thread: it owns the documents,
//! walks the hash order and hands each document back over a channel once hashed, and this
//! thread writes and drops it; the documents that hold a workload stay with the walk, which
//! applies the updates and writes them while the others are still being written. The hash then
//! costs wall time only where it is longer than the writing. The documents were parsed on this
//! thread, so they are freed here too: the pieces written from them take the space they leave
//! (an allocator keeps a heap per thread). On one core the walk runs on this thread alone
//! (`pipeline::render_default`), planning, hashing and writing in a row.
//!
//! Self-contained: the render benchmark and the fuzz tests include this file, to run what the
//! command runs.

use std::sync::mpsc;

use rollsafe_core::render::WorkloadType;
use rollsafe_core::render::pipeline::{self, Output, SetError};
use rollsafe_manifest::{Document, ManifestSet};

/// Renders `set` in default mode and writes it back, as pieces to be written in order, the
/// walk beside the writing when there is a second core. Nothing is returned unless everything
/// succeeded.
pub(crate) fn render_default(
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
pub(crate) fn beside_the_writing(
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
