//! Reading manifest streams from files or stdin.

use std::io::Read;
use std::path::PathBuf;

use anyhow::Context;
use rollsafe_manifest::Manifest;

/// The largest manifest stream read from one input.
pub const MAX_INPUT_BYTES: u64 = 256 * 1024 * 1024;

/// Reads and parses every input, in order; no paths (or `-`) means stdin. An error names the input and,
/// for invalid YAML, the document.
pub fn read_all(paths: &[PathBuf]) -> anyhow::Result<Vec<Manifest>> {
    let stdin = [PathBuf::from("-")];
    let paths = if paths.is_empty() { &stdin[..] } else { paths };
    paths.iter().map(read_one).collect()
}

fn read_one(path: &PathBuf) -> anyhow::Result<Manifest> {
    let (label, text) = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .take(MAX_INPUT_BYTES)
            .read_to_string(&mut text)
            .context("<stdin>: cannot read")?;
        ("<stdin>".to_owned(), text)
    } else {
        let label = path.display().to_string();
        let file = std::fs::File::open(path).with_context(|| format!("{label}: cannot open"))?;
        let mut text = String::new();
        file.take(MAX_INPUT_BYTES)
            .read_to_string(&mut text)
            .with_context(|| format!("{label}: cannot read"))?;
        (label, text)
    };
    Manifest::parse(&text).with_context(|| label.clone())
}
