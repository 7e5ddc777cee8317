//! A default-mode render of a whole [`ManifestSet`], written back document by document, with
//! the hash computed beside the writing.
//!
//! Each group's hash covers nearly every object, in sorted order, as one FNV-1a chain: a serial
//! byte loop that upstream compatibility forbids splitting. What does not need it is writing
//! back every document that holds no workload. So a second thread owns the documents and walks
//! the hash order; as soon as it has hashed the last object of a document, it hands that
//! document back to this thread, which writes and drops it. The hash costs wall time only where
//! it is longer than the writing, and, as with [`ManifestSet::into_yaml_documents`], the parsed
//! set and its output are never both held whole. The documents that hold a workload stay with the hashing
//! thread, which applies the updates to them and writes them while the others are still being
//! written. On one core the same walk writes each document as it hands it over.
//!
//! The plan is [`DefaultPlan`], the same as [`super::plan`]'s: only who waits for whom differs.

use std::sync::mpsc;

use rollsafe_manifest::{Document, InputError, ManifestSet, Origin, Position};
use thiserror::Error;

use super::{DefaultPlan, RenderError, RenderSettings, WorkloadType};

/// Why a set could not be rendered and written.
#[derive(Debug, Error)]
pub enum SetError {
    /// The plan failed; the message names the input and document of the object.
    #[error("{origin}: {error}")]
    Render {
        /// Where the object is, as `label: document N[, item …]`.
        origin: String,
        /// What is wrong with it.
        error: Box<RenderError>,
    },
    /// A document could not be written back.
    #[error(transparent)]
    Write(#[from] InputError),
}

/// Renders `set` in default mode and writes it back: the stream [`ManifestSet::into_yaml`]
/// writes after [`super::render`], as pieces to be written in order (see
/// [`Document::write_pieces`]). Nothing is returned unless everything succeeded.
pub fn render_default(
    set: ManifestSet,
    workload_type: Option<WorkloadType>,
) -> Result<Vec<String>, SetError> {
    // A second thread only helps beside another core.
    let threads = match std::thread::available_parallelism() {
        Ok(cores) if cores.get() > 1 => Threads::Two,
        _ => Threads::One,
    };
    render_with(set, workload_type, threads)
}

/// Whether the hash gets a thread of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Threads {
    /// A second thread hashes while this one writes.
    Two,
    /// This thread hashes and writes.
    One,
}

fn render_with(
    set: ManifestSet,
    workload_type: Option<WorkloadType>,
    threads: Threads,
) -> Result<Vec<String>, SetError> {
    let settings = RenderSettings {
        workload_type,
        ..RenderSettings::default()
    };
    let (labels, documents) = set.into_documents();
    let inputs: Vec<usize> = documents.iter().map(|&(input, _)| input).collect();
    // Every object of the set, in order: its document and where it is in it.
    let mut places: Vec<(usize, Position)> = Vec::new();
    let plan = {
        let mut objects = Vec::new();
        for (index, (_, document)) in documents.iter().enumerate() {
            for (position, object) in document.objects() {
                places.push((index, position));
                objects.push(object);
            }
        }
        DefaultPlan::new(&objects, &settings)
            .map_err(|error| render_error(&labels, &inputs, &places, error))?
    };
    let count = documents.len();
    // A document is handed over once the hash has passed its last object; one without hashed
    // objects at once; one with a workload stays with the hasher, which writes it last.
    let mut last_hashed: Vec<Option<usize>> = vec![None; count];
    for (position, entry) in plan.order().iter().enumerate() {
        last_hashed[places[entry.index].0] = Some(position);
    }
    let mut kept = vec![false; count];
    for index in plan.workloads() {
        kept[places[index].0] = true;
    }
    let context = Context {
        labels: &labels,
        inputs: &inputs,
        places: &places,
        kept: &kept,
        last_hashed: &last_hashed,
    };
    let documents: Vec<Option<Document>> = documents.into_iter().map(|(_, d)| Some(d)).collect();
    // A second thread hashes; this one writes each document handed over (see the module
    // documentation).
    let mut outputs: Vec<Vec<String>> = vec![Vec::new(); count];
    let (late, written) = match threads {
        Threads::Two => std::thread::scope(|scope| {
            let (hand_over, handed) = mpsc::channel::<(usize, Document)>();
            let context = &context;
            // The documents were parsed on this thread, so they are freed here too: the pieces
            // written from them then take the space they leave (an allocator keeps a heap per
            // thread).
            let hasher = scope.spawn(move || {
                // A closed channel means the writer failed: hashing on costs no more than this.
                context.walk(plan, documents, |index, document| {
                    let _ = hand_over.send((index, document));
                })
            });
            let mut written = Vec::new();
            let mut failed = None;
            for (index, document) in handed {
                match context.write(index, document) {
                    Ok(done) => written.push(done),
                    Err(error) => {
                        failed = Some(error);
                        break;
                    }
                }
            }
            let late = hasher
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (late, failed.map_or(Ok(written), Err))
        }),
        // The same walk, each document written as it is handed over.
        Threads::One => {
            let mut written = Ok(Vec::new());
            let late = context.walk(plan, documents, |index, document| {
                if let Ok(done) = &mut written {
                    match context.write(index, document) {
                        Ok(piece) => done.push(piece),
                        Err(error) => written = Err(error),
                    }
                }
            });
            (late, written)
        }
    };
    for (index, pieces) in written? {
        outputs[index] = pieces;
    }
    for (index, pieces) in late? {
        outputs[index] = pieces;
    }
    let mut stream = Vec::with_capacity(outputs.iter().map(Vec::len).sum::<usize>() + count);
    for pieces in outputs.into_iter().filter(|pieces| !pieces.is_empty()) {
        if !stream.is_empty() {
            stream.push(DOCUMENT_MARKER.to_owned());
        }
        stream.extend(pieces);
    }
    Ok(stream)
}

/// What the walk over the hash order needs to know of the set.
struct Context<'a> {
    labels: &'a [String],
    /// Per document, the index of its input's label.
    inputs: &'a [usize],
    /// Per object, its document and where it is in it.
    places: &'a [(usize, Position)],
    /// Per document, whether it holds a workload (and waits for the updates).
    kept: &'a [bool],
    /// Per document, the position in the hash order of its last hashed object.
    last_hashed: &'a [Option<usize>],
}

impl Context<'_> {
    /// Hashes the objects of `plan`'s order, handing each document that holds no workload to
    /// `hand` once its last object is hashed (those with none at once); then checks and applies
    /// the updates to the documents left, which hold the workloads, and writes them.
    fn walk(
        &self,
        plan: DefaultPlan,
        mut documents: Vec<Option<Document>>,
        mut hand: impl FnMut(usize, Document),
    ) -> Result<Vec<(usize, Vec<String>)>, SetError> {
        let mut give = |index: usize, documents: &mut [Option<Document>]| {
            if let Some(document) = documents[index].take() {
                hand(index, document);
            }
        };
        for index in
            (0..documents.len()).filter(|&i| !self.kept[i] && self.last_hashed[i].is_none())
        {
            give(index, &mut documents);
        }
        let mut hashes = plan.hashes();
        for (position, entry) in plan.order().iter().enumerate() {
            let (index, place) = &self.places[entry.index];
            if let Some(object) = documents[*index].as_ref().and_then(|d| d.object(place)) {
                hashes.push(entry, object);
            }
            if !self.kept[*index] && self.last_hashed[*index] == Some(position) {
                give(*index, &mut documents);
            }
        }
        // Every update is checked before any is written, as `apply_all` does.
        let updates = plan.finish(hashes.finish());
        for update in &updates {
            let (index, place) = &self.places[update.index];
            if let Some(object) = documents[*index].as_ref().and_then(|d| d.object(place)) {
                update.check(object).map_err(|error| self.located(error))?;
            }
        }
        for update in &updates {
            let (index, place) = &self.places[update.index];
            if let Some(object) = documents[*index].as_mut().and_then(|d| d.object_mut(place)) {
                update.apply(object).map_err(|error| self.located(error))?;
            }
        }
        let mut late = Vec::new();
        for (index, document) in documents.into_iter().enumerate() {
            if let Some(document) = document {
                late.push(self.write(index, document)?);
            }
        }
        Ok(late)
    }

    /// Writes document `index` as pieces, and drops it.
    fn write(&self, index: usize, document: Document) -> Result<(usize, Vec<String>), InputError> {
        let mut pieces = Vec::new();
        document
            .write_pieces(&mut pieces)
            .map_err(|error| InputError {
                label: self.labels[self.inputs[index]].clone(),
                error,
            })?;
        Ok((index, pieces))
    }

    /// A plan error, named by its object's place.
    fn located(&self, error: RenderError) -> SetError {
        render_error(self.labels, self.inputs, self.places, error)
    }
}

/// The line between two documents of the stream.
const DOCUMENT_MARKER: &str = "---\n";

/// A plan error, with the input and position of the object it names.
fn render_error(
    labels: &[String],
    inputs: &[usize],
    places: &[(usize, Position)],
    error: RenderError,
) -> SetError {
    let origin = places
        .get(error.index())
        .map(|(document, position)| Origin {
            label: labels.get(inputs[*document]).map_or("", String::as_str),
            position: position.clone(),
        });
    SetError::Render {
        origin: origin.map(|o| o.to_string()).unwrap_or_default(),
        error: Box::new(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render;

    fn set(inputs: &[&str]) -> ManifestSet {
        let mut set = ManifestSet::new();
        for (i, text) in inputs.iter().enumerate() {
            set.parse_input(format!("in-{i}.yaml"), text).unwrap();
        }
        set
    }

    /// Planning and applying in one step, then writing the set.
    fn in_one_step(inputs: &[&str], workload_type: Option<WorkloadType>) -> Result<String, String> {
        let mut set = set(inputs);
        let settings = RenderSettings {
            workload_type,
            ..RenderSettings::default()
        };
        if let Err(error) = render::render(&mut set.objects_mut(), None, &settings) {
            let origin = set.locate(error.index()).map(|o| o.to_string());
            return Err(format!("{}: {error}", origin.unwrap_or_default()));
        }
        set.into_yaml().map_err(|e| e.to_string())
    }

    fn pipelined(inputs: &[&str], workload_type: Option<WorkloadType>) -> Result<String, String> {
        let two = render_default(set(inputs), workload_type)
            .map(|stream| stream.concat())
            .map_err(|e| e.to_string());
        let one = render_with(set(inputs), workload_type, Threads::One)
            .map(|stream| stream.concat())
            .map_err(|e| e.to_string());
        assert_eq!(one, two, "one thread writes what two write");
        two
    }

    #[test]
    fn writes_what_planning_in_one_step_writes() {
        // Longer than a piece, with characters of several bytes across piece boundaries.
        let long = "ünïcödé-€-𝄞 ".repeat(400);
        let big = format!(
            "kind: ConfigMap\napiVersion: v1\nmetadata: {{name: big}}\ndata:\n  text: \"{long}\"\n"
        );
        let mixed = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\ndata: {k: v}\n\
            ---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    metadata:\n      annotations: {keep: me}\n    spec: {}\n\
            ---\n# empty\n\
            ---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec: {template: {spec: {}}}\n\
            ---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: np}\n\
            ---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s}, data: {p: cA==}}\n- {apiVersion: apps/v1, kind: Deployment, metadata: {name: api}, spec: {template: {spec: {}}}}\n- {apiVersion: v1, kind: List, items: [{apiVersion: v1, kind: Service, metadata: {name: svc}, spec: {x: 100000000000000000000000001}}]}\n\
            ---\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n- 7\n";
        let cases: [&[&str]; 5] = [
            &[mixed],
            &[mixed, &big],
            &[&big],
            &["kind: ConfigMap\nmetadata: {name: only}\n"],
            &["kind: Deployment\nmetadata: {name: alone}\nspec: {template: {spec: {}}}\n"],
        ];
        for inputs in cases {
            for workload_type in [
                None,
                Some(WorkloadType::Deployment),
                Some(WorkloadType::StatefulSet),
            ] {
                let expected = in_one_step(inputs, workload_type);
                assert!(expected.is_ok(), "{expected:?}");
                assert_eq!(
                    pipelined(inputs, workload_type),
                    expected,
                    "{workload_type:?}"
                );
            }
        }
    }

    #[test]
    fn fails_as_planning_in_one_step_fails() {
        let first = "kind: ConfigMap\nmetadata: {name: a}\n";
        let second = "kind: ConfigMap\nmetadata: {name: b}\n---\nkind: List\nitems:\n- kind: Deployment\n  metadata: {name: web}\n";
        let expected = in_one_step(&[first, second], None);
        assert_eq!(
            expected,
            Err("in-1.yaml: document 2, item 0: Deployment web: resource missing spec".to_owned())
        );
        assert_eq!(pipelined(&[first, second], None), expected);
    }
}
