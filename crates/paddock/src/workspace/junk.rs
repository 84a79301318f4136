//! Build output a job leaves behind that is not its work: Python bytecode
//! and tool caches, installed dependencies, editor and desktop litter. A
//! standard set, applied to untracked entries only (a repository that
//! tracks such a path keeps it in the patch, changes included), whatever
//! the repository's own `.gitignore` says; the entries left out are named
//! in the patch's warnings, so nothing disappears silently.

/// Directory names that are build output wherever they appear.
const DIRS: &[&str] = &[
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    ".tox",
    ".nox",
    ".venv",
    "node_modules",
    ".gradle",
    ".parcel-cache",
    ".eslintcache",
];

/// File names that are litter wherever they appear.
const FILES: &[&str] = &[".DS_Store", "Thumbs.db", ".coverage"];

/// File name endings that are compiled output or editor swap files.
const SUFFIXES: &[&str] = &[".pyc", ".pyo", ".swp", ".swo", "~"];

/// Whether the untracked entry `name` (a directory when `dir`) is build junk.
pub(super) fn is_junk(name: &[u8], dir: bool) -> bool {
    if dir {
        DIRS.iter().any(|d| d.as_bytes() == name)
    } else {
        FILES.iter().any(|f| f.as_bytes() == name)
            || SUFFIXES
                .iter()
                .any(|s| name.ends_with(s.as_bytes()) && name.len() > s.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_set_names_build_output_only() {
        let cases: Vec<(&str, bool, bool)> = vec![
            ("__pycache__", true, true),
            ("node_modules", true, true),
            ("__pycache__", false, false),
            ("m.cpython-312.pyc", false, true),
            (".DS_Store", false, true),
            ("notes.md~", false, true),
            ("~", false, false),
            ("src", true, false),
            ("pyc", false, false),
            ("main.py", false, false),
        ];
        let got: Vec<(&str, bool, bool)> = cases
            .iter()
            .map(|(n, d, _)| (*n, *d, is_junk(n.as_bytes(), *d)))
            .collect();
        assert_eq!(got, cases);
    }
}
