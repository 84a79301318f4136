//! The dependencies between the paddock crate's top-level modules (each
//! `src/<name>.rs` or `src/<name>/`, the library's and the binary's) point
//! one way: no module reaches, through `crate::` paths, a module that
//! reaches it back. Read from the source (comments and `#[cfg(test)]`
//! modules left out), so a new cycle fails here, naming the modules in it.
//! ARCHITECTURE.md draws the layers this keeps.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `crate::NAME` references of one file's code (not its comments, not its
/// test module).
fn references(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut text = String::new();
    for line in code.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        text.push_str(line);
        text.push('\n');
    }
    let mut rest = text.as_str();
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        // `paddock_crate::x` or `my_crate::x` are not `crate::`.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c, d::{e, f}}`: the top-level names.
            let mut depth = 0;
            let mut name = String::new();
            let mut at_start = true;
            for c in group.chars() {
                let ident = c.is_alphanumeric() || c == '_';
                if depth == 0 && at_start && ident {
                    name.push(c);
                    continue;
                }
                if !name.is_empty() {
                    out.insert(std::mem::take(&mut name));
                    at_start = false;
                }
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => at_start = true,
                    _ => {}
                }
            }
            if !name.is_empty() {
                out.insert(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Top-level module → the top-level modules its code names.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap();
        // A module's unit tests in a file of their own, or in a `tests/`
        // directory of files (`runner/tests/metrics.rs`), are test code.
        if rel.file_name().is_some_and(|n| n == "tests.rs")
            || rel.parent().is_some_and(|d| d.ends_with("tests"))
        {
            continue;
        }
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let refs = references(&std::fs::read_to_string(&file).unwrap());
        let entry = graph.entry(top.clone()).or_default();
        entry.extend(refs.into_iter().filter(|r| *r != top));
    }
    graph
}

/// The strongly connected components of more than one module (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.graph.contains_key(w) {
                continue; // not a module of this crate (a macro, `crate::self`)
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

#[test]
fn the_crates_modules_depend_on_each_other_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph(&src);
    assert!(graph.len() > 10, "too few modules found: {graph:?}");
    assert_eq!(
        cycles(&graph),
        Vec::<Vec<String>>::new(),
        "module cycles; the graph: {graph:#?}"
    );
}

/// The checker sees what it must: grouped and nested `use`s, paths in
/// code, not comments, not test modules; and it finds a cycle.
#[test]
fn the_checker_finds_references_and_cycles() {
    let code = "//! about crate::doc\nuse crate::{a, b::{c, d}, e::f};\nfn x() { crate::g::h(); my_crate::z(); }\n// crate::comment\n#[cfg(test)]\nmod tests { use crate::t; }\n";
    assert_eq!(
        references(code),
        ["a", "b", "e", "g"].map(String::from).into_iter().collect()
    );
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(cycles(&graph), vec![vec!["a", "b", "c"]]);
}
