//! A default-mode render of a whole [`ManifestSet`], written back document by document, with
//! the hash computed beside the writing.
//!
//! Each group's hash covers nearly every object, in sorted order, as one FNV-1a chain: a serial
//! byte loop that upstream compatibility forbids splitting. What does not need it is writing
//! back every document that holds no workload. So the render comes in pieces a caller
//! composes: [`prepare`] plans (the same [`DefaultPlan`] as [`super::plan`]'s) and returns the
//! set's [`Layout`] and the [`Walk`] over the hash order, which owns the documents; as soon as
//! the walk has hashed the last object of a document that holds no workload, it hands that
//! document to its caller, whose [`Output`] writes and drops it. The walk then checks and
//! applies the updates to the documents left, which hold the workloads, with
//! [`super::apply_all`] (the one check-then-apply step), and writes them. As with
//! [`ManifestSet::into_yaml_documents`], the parsed set and its output are never both held
//! whole.
//!
//! Nothing here starts a thread. [`render_default`] runs the walk on the calling thread,
//! writing each document as it is handed over; `rollsafe render` runs the walk on a second
//! thread when there is a core for it, so that the hash costs wall time only where it is
//! longer than the writing, and writes the handed documents on the thread that parsed them.

use std::ops::ControlFlow;

use rollsafe_manifest::{Document, InputError, ManifestSet, Origin, Position};
use serde_json::Value;
use thiserror::Error;

use super::{DefaultPlan, IndexedObjects, RenderError, RenderSettings, WorkloadType};

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

/// Renders `set` in default mode and writes it back on this thread: the stream
/// [`ManifestSet::into_yaml`] writes after [`super::render`], as pieces to be written in order
/// (see [`Document::write_pieces`]). Nothing is returned unless everything succeeded.
pub fn render_default(
    set: ManifestSet,
    workload_type: Option<WorkloadType>,
) -> Result<Vec<String>, SetError> {
    let (layout, walk) = prepare(set, workload_type)?;
    let mut output = Output::new(&layout);
    let late = walk.run(&layout, |index, document| {
        // After a failure the walk goes on (it reports its own first error); nothing more
        // is written.
        let _ = output.write(index, document);
    });
    output.finish(late)
}

/// Takes `set` apart and plans its default-mode render: where each object is and when each
/// document can be written ([`Layout`]), and the walk that hashes and applies ([`Walk`]).
/// Fails as [`super::render`] does, naming the object's input and document.
pub fn prepare(
    set: ManifestSet,
    workload_type: Option<WorkloadType>,
) -> Result<(Layout, Walk), SetError> {
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
    let layout = Layout::new(labels, inputs, places, &plan);
    let documents = documents.into_iter().map(|(_, d)| Some(d)).collect();
    Ok((layout, Walk { plan, documents }))
}

/// Where the objects of a set are, and when each document can be written.
#[derive(Debug)]
pub struct Layout {
    labels: Vec<String>,
    /// Per document, the index of its input's label.
    inputs: Vec<usize>,
    /// Per object, its document and where it is in it.
    places: Vec<(usize, Position)>,
    /// Per document, whether it holds a workload (and waits for the updates).
    kept: Vec<bool>,
    /// Per document, the position in the hash order of its last hashed object.
    last_hashed: Vec<Option<usize>>,
}

impl Layout {
    fn new(
        labels: Vec<String>,
        inputs: Vec<usize>,
        places: Vec<(usize, Position)>,
        plan: &DefaultPlan,
    ) -> Self {
        let count = inputs.len();
        // A document is handed over once the hash has passed its last object; one without
        // hashed objects at once; one with a workload stays with the walk, which writes it
        // last.
        let mut last_hashed: Vec<Option<usize>> = vec![None; count];
        for (position, entry) in plan.order().iter().enumerate() {
            last_hashed[places[entry.index].0] = Some(position);
        }
        let mut kept = vec![false; count];
        for index in plan.workloads() {
            kept[places[index].0] = true;
        }
        Self {
            labels,
            inputs,
            places,
            kept,
            last_hashed,
        }
    }

    /// How many documents the set has.
    fn documents(&self) -> usize {
        self.inputs.len()
    }

    /// Writes document `index` as pieces, and drops it.
    fn write(&self, index: usize, document: Document) -> Result<Vec<String>, InputError> {
        let mut pieces = Vec::new();
        document
            .write_pieces(&mut pieces)
            .map_err(|error| InputError {
                label: self.labels[self.inputs[index]].clone(),
                error,
            })?;
        Ok(pieces)
    }

    /// A plan error, named by its object's place.
    fn located(&self, error: RenderError) -> SetError {
        render_error(&self.labels, &self.inputs, &self.places, error)
    }
}

/// The walk over the hash order: it owns the plan and the documents, and can run on another
/// thread than the one writing what it hands over.
#[derive(Debug)]
pub struct Walk {
    plan: DefaultPlan,
    documents: Vec<Option<Document>>,
}

impl Walk {
    /// Hashes the objects of the plan's order, handing each document that holds no workload to
    /// `hand` once its last object is hashed (those with none at once); then checks and
    /// applies the updates to the documents left, which hold the workloads, and writes them.
    pub fn run(
        self,
        layout: &Layout,
        mut hand: impl FnMut(usize, Document),
    ) -> Result<Written, SetError> {
        let Walk {
            plan,
            mut documents,
        } = self;
        let mut give = |index: usize, documents: &mut [Option<Document>]| {
            if let Some(document) = documents[index].take() {
                hand(index, document);
            }
        };
        for index in
            (0..documents.len()).filter(|&i| !layout.kept[i] && layout.last_hashed[i].is_none())
        {
            give(index, &mut documents);
        }
        let mut hashes = plan.hashes();
        for (position, entry) in plan.order().iter().enumerate() {
            let (index, place) = &layout.places[entry.index];
            if let Some(object) = documents[*index].as_ref().and_then(|d| d.object(place)) {
                hashes.push(entry, object);
            }
            if !layout.kept[*index] && layout.last_hashed[*index] == Some(position) {
                give(*index, &mut documents);
            }
        }
        let updates = plan.finish(hashes.finish());
        let mut placed = Placed {
            places: &layout.places,
            documents: &mut documents,
        };
        super::apply_all(&updates, &mut placed).map_err(|error| layout.located(error))?;
        let mut late = Vec::new();
        for (index, document) in documents.into_iter().enumerate() {
            if let Some(document) = document {
                late.push((index, layout.write(index, document)?));
            }
        }
        Ok(Written(late))
    }
}

/// The documents a [`Walk`] wrote itself (those holding a workload): their indices and
/// pieces.
#[derive(Debug)]
pub struct Written(Vec<(usize, Vec<String>)>);

/// The objects of the documents a walk still holds, by their index in the set.
struct Placed<'a> {
    places: &'a [(usize, Position)],
    documents: &'a mut [Option<Document>],
}

impl IndexedObjects for Placed<'_> {
    fn object(&self, index: usize) -> Option<&Value> {
        let (document, place) = self.places.get(index)?;
        self.documents.get(*document)?.as_ref()?.object(place)
    }

    fn object_mut(&mut self, index: usize) -> Option<&mut Value> {
        let (document, place) = self.places.get(index)?;
        self.documents
            .get_mut(*document)?
            .as_mut()?
            .object_mut(place)
    }
}

/// Writes the documents a [`Walk`] hands over and puts the stream together.
#[derive(Debug)]
pub struct Output<'a> {
    layout: &'a Layout,
    /// Per document, its pieces.
    pieces: Vec<Vec<String>>,
    /// The first document that could not be written.
    failed: Option<InputError>,
}

impl<'a> Output<'a> {
    /// Nothing written yet.
    pub fn new(layout: &'a Layout) -> Self {
        Self {
            layout,
            pieces: vec![Vec::new(); layout.documents()],
            failed: None,
        }
    }

    /// Writes document `index` as the walk hands it over, and drops it. After a failure it
    /// writes nothing more and breaks: the rest need not be written.
    pub fn write(&mut self, index: usize, document: Document) -> ControlFlow<()> {
        if self.failed.is_some() {
            return ControlFlow::Break(());
        }
        match self.layout.write(index, document) {
            Ok(pieces) => {
                self.pieces[index] = pieces;
                ControlFlow::Continue(())
            }
            Err(error) => {
                self.failed = Some(error);
                ControlFlow::Break(())
            }
        }
    }

    /// The whole stream, from what was written here and what the walk wrote (`late`), the
    /// documents in order, separated by `---` lines. A document this output could not write
    /// fails it first, then the walk's own failure.
    pub fn finish(self, late: Result<Written, SetError>) -> Result<Vec<String>, SetError> {
        let Output {
            mut pieces, failed, ..
        } = self;
        if let Some(error) = failed {
            return Err(error.into());
        }
        for (index, written) in late?.0 {
            pieces[index] = written;
        }
        let mut stream =
            Vec::with_capacity(pieces.iter().map(Vec::len).sum::<usize>() + pieces.len());
        for document in pieces.into_iter().filter(|pieces| !pieces.is_empty()) {
            if !stream.is_empty() {
                stream.push(DOCUMENT_MARKER.to_owned());
            }
            stream.extend(document);
        }
        Ok(stream)
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

    /// The pipeline on this thread, and with every handed document written only after the
    /// walk, last first (as a writer beside the walk may fall behind it): the two agree.
    fn pipelined(inputs: &[&str], workload_type: Option<WorkloadType>) -> Result<String, String> {
        let beside = render_default(set(inputs), workload_type)
            .map(|stream| stream.concat())
            .map_err(|e| e.to_string());
        let after = written_after_the_walk(inputs, workload_type);
        assert_eq!(after, beside, "the order of writing changes nothing");
        beside
    }

    fn written_after_the_walk(
        inputs: &[&str],
        workload_type: Option<WorkloadType>,
    ) -> Result<String, String> {
        let (layout, walk) = prepare(set(inputs), workload_type).map_err(|e| e.to_string())?;
        let mut handed = Vec::new();
        let late = walk.run(&layout, |index, document| handed.push((index, document)));
        let mut output = Output::new(&layout);
        for (index, document) in handed.into_iter().rev() {
            let _ = output.write(index, document);
        }
        output
            .finish(late)
            .map(|stream| stream.concat())
            .map_err(|e| e.to_string())
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
