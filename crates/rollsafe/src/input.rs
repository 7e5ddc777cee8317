//! Reading manifest streams from files or stdin.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rollsafe_manifest::ManifestSet;

/// The largest manifest stream read from one input; a larger one is an error, never cut short.
pub(crate) const MAX_INPUT_BYTES: u64 = 256 * 1024 * 1024;

/// Reads and parses the inputs in order into one set; none (or `-`) means stdin. An error
/// names the input and, for invalid YAML, the document.
pub(crate) fn read_all(paths: &[PathBuf]) -> anyhow::Result<ManifestSet> {
    let mut set = ManifestSet::new();
    for path in &self::paths(paths) {
        read_into(&mut set, path)?;
    }
    Ok(set)
}

/// Reads and parses one input (a file, or stdin for `-`) as a set of its own.
pub(crate) fn read_one(path: &Path) -> anyhow::Result<ManifestSet> {
    let mut set = ManifestSet::new();
    read_into(&mut set, path)?;
    Ok(set)
}

/// Reads one input into the set a document at a time: its text is never held whole.
fn read_into(set: &mut ManifestSet, path: &Path) -> anyhow::Result<()> {
    let (label, reader) = open(path)?;
    set.read_input(label, std::io::BufReader::new(reader), MAX_INPUT_BYTES)?;
    Ok(())
}

/// Opens one input (a file, or stdin for `-`) with its label.
pub(crate) fn open(path: &Path) -> anyhow::Result<(String, Box<dyn Read>)> {
    if path.as_os_str() == "-" {
        Ok(("<stdin>".to_owned(), Box::new(std::io::stdin())))
    } else {
        let label = path.display().to_string();
        let file = std::fs::File::open(path).with_context(|| format!("{label}: cannot open"))?;
        Ok((label, Box::new(file)))
    }
}

/// The inputs' paths: none means stdin.
pub(crate) fn paths(paths: &[PathBuf]) -> Vec<PathBuf> {
    if paths.is_empty() {
        vec![PathBuf::from("-")]
    } else {
        paths.to_vec()
    }
}

/// Reads one input's text and its label (the path, or `<stdin>` for `-`).
pub(crate) fn read_text(path: &Path) -> anyhow::Result<(String, String)> {
    let (label, reader) = open(path)?;
    let mut text = String::new();
    reader
        .take(MAX_INPUT_BYTES + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("{label}: cannot read (is it UTF-8 text?)"))?;
    if text.len() as u64 > MAX_INPUT_BYTES {
        anyhow::bail!("{label}: larger than {MAX_INPUT_BYTES} bytes");
    }
    Ok((label, text))
}
