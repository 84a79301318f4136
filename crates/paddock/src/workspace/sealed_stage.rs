//! Staging the files the job changed without git reading any of them by
//! path: the `sandbox` rung's early patch (`runner/early_patch.rs`, issue
//! #14), made while the job is still alive. Git's `update-index --add`
//! opens each file by its path under the work tree, following any link on
//! the way; a sandboxed job that swapped a directory for a link between
//! Paddock's walk and that open (and back, within one tick of a coarse
//! clock, before the second print) could have Paddock's git read a host
//! file it cannot see into its own branch. Here Paddock reads each file
//! itself, through descriptors opened beneath the work tree's root with no
//! link followed (`beneath.rs`): a regular file's content (exactly the
//! length `fstat` gave, opened without blocking, so never a FIFO waited
//! on) with git's mode for it (`100755` when its owner may execute it,
//! else `100644`), a link's target; it writes the blobs itself, as loose
//! objects (`loose_object.rs`: no process started), when they are fewer
//! than [`FEW`], else hands the bytes to one `git fast-import`
//! (length-prefixed blobs, no filter, the object names asked back with
//! `get-mark`), and stages the names so made with `update-index
//! --index-info`. No git has a work tree: nothing of the job's tree is
//! read but what Paddock read. The ignore rules the walk asked for came
//! from a shadow of the tree's ignore files (`ignore_shadow.rs`).
//!
//! Git converts some files as it reads them by path, by the tree's
//! attributes (`.gitattributes`, copied into the shadow with the ignore
//! files): line endings (`text`, `eol`, the older `crlf`), `$Id$`
//! (`ident`) and encodings (`working-tree-encoding`); Paddock's git has no
//! filter driver configured, so a `filter` names nothing. Paddock asks
//! `git check-attr` (reading the shadow, then the staging's index, as
//! the staging by path reads the work tree, then the index) for the
//! files whose content a conversion could change, a CR with line-ending
//! attributes (not a binary file under `text=auto`, which git leaves as
//! it is), `$Id` with `ident`, any file with an encoding, and refuses the
//! staging if one would be converted: the bytes read are then not what
//! git would store. A tree with no attribute file asks nothing.
//!
//! What it does not do, it refuses (`WorkspaceError::SealedStaging`), and
//! the patch is then made by path once the job has ended, as before: a
//! file git would convert, more than [`MAX_SEALED_BYTES`] to read, an
//! entry that changed type or length while it was read. A path git never
//! stages (`.git` under another spelling) `update-index --index-info`
//! skips with a warning, as `--add` does, and the same warning is read
//! (`FinalTree::refused`). The result is otherwise the tree the staging
//! by path gives (the tests compare the two).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, OFlags};

use super::beneath;
use super::host_git::HostGit;
use super::ignore_shadow::IgnoreShadow;
use super::WorkspaceError;

/// The most bytes of files and link targets one sealed staging reads: the
/// early patch's print reads no more (`upper_print::MAX_CONTENT`), and
/// what is read is held in memory on its way to git.
pub(crate) const MAX_SEALED_BYTES: u64 = super::upper_print::MAX_CONTENT;

/// A file's or link's mode in the index, and its content.
#[derive(Debug, PartialEq, Eq)]
struct Read {
    mode: &'static str,
    content: Vec<u8>,
}

/// Stages `staged` (paths relative to `work`) in `git`'s index, each read
/// beneath `work` by Paddock (module text), refused if git would convert
/// one by the attributes `shadow` holds; the paths git refused to stage
/// (its "Ignoring path" lines, as the staging by path reads them). The
/// repository's objects are named by SHA-256 when `sha256`, else SHA-1.
pub(super) async fn stage(
    git: &HostGit,
    work: &Path,
    staged: &[Vec<u8>],
    shadow: &IgnoreShadow,
    sha256: bool,
) -> Result<Vec<Vec<u8>>, WorkspaceError> {
    if staged.is_empty() {
        return Ok(Vec::new());
    }
    let refused = |file: &[u8], why: String| WorkspaceError::SealedStaging {
        path: git.root.clone(),
        file: work.join(OsStr::from_bytes(file)).display().to_string(),
        why,
    };
    let (work_owned, paths) = (work.to_path_buf(), staged.to_vec());
    let read = tokio::task::spawn_blocking(move || read_all(&work_owned, &paths))
        .await
        .map_err(|e| refused(b"", format!("the read's task ended: {e}")))?;
    let reads = read.map_err(|(file, why)| refused(&file, why))?;
    if let Some((file, why)) = converted(git, shadow, staged, &reads).await? {
        return Err(refused(&file, why));
    }
    // Neither git has a work tree: each runs in Paddock's git directory.
    let git = HostGit {
        work_tree: None,
        ..git.clone()
    };
    let names = if reads.len() < FEW {
        loose(&git, reads, sha256).await?
    } else {
        imported(&git, &reads).await?
    };
    let mut info = Vec::new();
    for ((mode, name), path) in names.iter().zip(staged) {
        info.extend_from_slice(mode.as_bytes());
        info.push(b' ');
        info.extend_from_slice(name.as_bytes());
        info.push(b'\t');
        info.extend_from_slice(path);
        info.push(0);
    }
    // A path git never stages (`.git` under another spelling) is
    // skipped with a warning, as `--add` skips it: the same warning read.
    let args = ["update-index", "--replace", "-z", "--index-info"];
    let (status, _, stderr) = git.status(args, Some(&info)).await?;
    if !status.success() {
        return Err(git.failed(args, &stderr));
    }
    Ok(super::final_tree::refused_paths(&stderr))
}

/// Below this many blobs Paddock writes them itself as loose objects
/// ([`loose`]); from it on one `git fast-import` packs them
/// ([`imported`]). git's own line between the two: `fast-import` makes
/// the objects of a pack of fewer than `fastimport.unpackLimit` (100)
/// loose ones.
const FEW: usize = 100;

/// Each read's mode and the name of its blob, written by Paddock as a
/// loose object into `git`'s git directory (`loose_object.rs`): no
/// process started (issue #14: a `fast-import` was 1–2.75 ms of CPU on
/// the job's end, mostly its start-up).
async fn loose(
    git: &HostGit,
    reads: Vec<Read>,
    sha256: bool,
) -> Result<Vec<(&'static str, String)>, WorkspaceError> {
    let (root, git_dir) = (git.root.clone(), git.git_dir.clone());
    let failed = |file: String, source: std::io::Error| WorkspaceError::Write {
        path: root.clone(),
        file,
        source,
    };
    let Some(git_dir) = git_dir else {
        return Err(failed(
            "the staging's objects".to_string(),
            std::io::Error::other("no git directory to write them in"),
        ));
    };
    let written = tokio::task::spawn_blocking(move || {
        reads
            .into_iter()
            .map(|r| {
                super::loose_object::write(&git_dir, "blob", &r.content, sha256)
                    .map(|name| (r.mode, name))
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| {
        failed(
            "the staging's objects".to_string(),
            std::io::Error::other(e),
        )
    })?;
    written.map_err(|e| match e {
        super::loose_object::LooseObjectError::Write { path, source } => failed(path, source),
    })
}

/// Each read's mode and the name of its blob, the bytes handed to one
/// `git fast-import` (length-prefixed blobs, no filter, the names asked
/// back with `get-mark`) in `git`'s git directory.
async fn imported(
    git: &HostGit,
    reads: &[Read],
) -> Result<Vec<(&'static str, String)>, WorkspaceError> {
    let mut stream = Vec::new();
    for (i, r) in reads.iter().enumerate() {
        stream.extend_from_slice(
            format!("blob\nmark :{}\ndata {}\n", i + 1, r.content.len()).as_bytes(),
        );
        stream.extend_from_slice(&r.content);
        stream.push(b'\n');
    }
    for i in 0..reads.len() {
        stream.extend_from_slice(format!("get-mark :{}\n", i + 1).as_bytes());
    }
    stream.extend_from_slice(b"done\n");
    // A pack kept as it is, however few objects it holds: below the
    // unpack limit fast-import starts `unpack-objects` to make them loose.
    let import = [
        "-c",
        "fastimport.unpackLimit=0",
        "fast-import",
        "--quiet",
        "--done",
    ];
    // Each answer is an object name and a newline.
    let (status, out, stderr) = git
        .start(import)?
        .at_most(130 * reads.len() as u64)
        .finish(&stream)
        .await?;
    if !status.success() {
        return Err(git.failed(import, &stderr));
    }
    let names: Vec<&[u8]> = out
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let named = |n: &&[u8]| std::str::from_utf8(n).is_ok_and(super::is_object_name);
    if names.len() != reads.len() || !names.iter().all(named) {
        return Err(git.failed(
            import,
            format!(
                "answered {} object names for {} blobs: {}",
                names.len(),
                reads.len(),
                String::from_utf8_lossy(&out)
            )
            .as_bytes(),
        ));
    }
    Ok(reads
        .iter()
        .zip(names)
        .map(|(r, name)| (r.mode, String::from_utf8_lossy(name).into_owned()))
        .collect())
}

/// The attributes git's conversions on reading a file depend on, asked of
/// `check-attr` in this order.
const CONVERTING: [&str; 5] = ["text", "eol", "crlf", "ident", "working-tree-encoding"];

/// The first of the files read (`reads`, of the paths `staged`) that git
/// would convert as it read it by path, by the attributes `shadow` holds,
/// and why; `None` when none would (module text).
async fn converted(
    git: &HostGit,
    shadow: &IgnoreShadow,
    staged: &[Vec<u8>],
    reads: &[Read],
) -> Result<Option<(Vec<u8>, String)>, WorkspaceError> {
    if !shadow.has_attributes() {
        return Ok(None);
    }
    // A link's target is stored as it is; a file's content only when no
    // attribute could change it (its bytes say which could).
    let asked: Vec<(&[u8], &Read)> = staged
        .iter()
        .zip(reads)
        .filter(|(_, r)| r.mode != LINK)
        .filter(|(_, r)| {
            shadow.may_reencode() || r.content.contains(&b'\r') || has(&r.content, IDENT)
        })
        .map(|(path, r)| (path.as_slice(), r))
        .collect();
    if asked.is_empty() {
        return Ok(None);
    }
    // The shadow is the work tree git reads attribute files from; the
    // staging's index the one it falls back to, as the staging by path's.
    let attrs = HostGit {
        work_tree: Some(shadow.dir().to_path_buf()),
        ..git.clone()
    };
    let mut args = vec!["check-attr", "-z", "--stdin"];
    args.extend(CONVERTING);
    let mut input = Vec::new();
    let mut bound = 0u64;
    for (path, _) in &asked {
        input.extend_from_slice(path);
        input.push(0);
        // Each answer names the path, the attribute and its value: a
        // value longer than any git knows (a job's attribute files could
        // give each path a megabyte) fails the staging past the bound.
        bound += CONVERTING.len() as u64 * (path.len() as u64 + MAX_ANSWER);
    }
    let (status, out, stderr) = attrs.start(&args)?.at_most(bound).finish(&input).await?;
    if !status.success() {
        return Err(attrs.failed(&args, &stderr));
    }
    let values = parse_check_attr(&out)
        .ok_or_else(|| attrs.failed(&args, b"its -z output is not what git writes"))?;
    for (path, read) in asked {
        let value =
            |attr: &str| -> &[u8] { values.get(&(path, attr)).copied().unwrap_or(UNSPECIFIED) };
        if let Some(why) = conversion(value, &read.content) {
            return Ok(Some((path.to_vec(), why)));
        }
    }
    Ok(None)
}

/// The bytes of one `check-attr` answer besides its path: the
/// attribute's name, its value and the NULs.
const MAX_ANSWER: u64 = 256;

/// The mode of a link in the index.
const LINK: &str = "120000";

/// What `ident` collapses, at its start.
const IDENT: &[u8] = b"$Id";

/// An attribute's value as `check-attr` names the absence of any.
const UNSPECIFIED: &[u8] = b"unspecified";

/// Why git would convert `content` as it read it, given its attributes'
/// values (`check-attr`'s words: `set`, `unset`, `unspecified`, or the
/// value); `None` when it would store it as it is. It errs on the side of
/// a conversion: a value git would ignore is taken as set.
fn conversion<'a>(value: impl Fn(&str) -> &'a [u8], content: &[u8]) -> Option<String> {
    let given = |attr: &str| !matches!(value(attr), b"unspecified" | b"unset");
    if given("working-tree-encoding") {
        return Some(format!(
            "its attributes re-encode it (working-tree-encoding={})",
            String::from_utf8_lossy(value("working-tree-encoding"))
        ));
    }
    if given("ident") && has(content, IDENT) {
        return Some("its attributes collapse its $Id$ (ident)".to_string());
    }
    // `-text`, or no `text` and `-crlf` (the older spelling): binary, as
    // it is; otherwise any line-ending attribute may convert a CR. Under
    // `text=auto` git leaves a file it takes for binary (a NUL) alone.
    let (text, crlf) = (value("text"), value("crlf"));
    let binary = text == b"unset" || (text == UNSPECIFIED && crlf == b"unset");
    let line_endings = given("text") || given("crlf") || given("eol");
    let auto = text == b"auto" || (text == UNSPECIFIED && crlf == b"auto");
    if !binary && line_endings && content.contains(&b'\r') && !(auto && content.contains(&0)) {
        return Some(
            "its attributes convert its line endings (text, eol or crlf) and it holds a CR"
                .to_string(),
        );
    }
    None
}

/// Whether `needle` occurs in `haystack`.
fn has(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Attribute values by path and attribute.
type AttrValues<'a> = HashMap<(&'a [u8], &'a str), &'a [u8]>;

/// `check-attr -z`'s answers, `PATH\0ATTRIBUTE\0VALUE\0` each, by path
/// and attribute; `None` when they are not whole.
fn parse_check_attr(out: &[u8]) -> Option<AttrValues<'_>> {
    let mut fields = out.split(|b| *b == 0);
    let mut values = HashMap::new();
    loop {
        let path = fields.next()?;
        if path.is_empty() {
            // The answers end with a NUL: an empty last field.
            return fields.next().is_none().then_some(values);
        }
        let attr = std::str::from_utf8(fields.next()?).ok()?;
        let value = fields.next()?;
        values.insert((path, attr), value);
    }
}

/// Reads every path of `paths` beneath `work`, at most
/// [`MAX_SEALED_BYTES`] together; the first that cannot be read, and why.
fn read_all(work: &Path, paths: &[Vec<u8>]) -> Result<Vec<Read>, (Vec<u8>, String)> {
    let root = beneath::open_root(work).map_err(|e| (Vec::new(), e.to_string()))?;
    let mut left = MAX_SEALED_BYTES;
    let mut out = Vec::with_capacity(paths.len());
    // Consecutive paths often share a directory: opened once for them.
    let mut dir: Option<(Vec<u8>, OwnedFd)> = None;
    for path in paths {
        let (parent, name) = match path.iter().rposition(|b| *b == b'/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (&path[..0], &path[..]),
        };
        let fd = match &dir {
            Some((open, fd)) if open.as_slice() == parent => fd,
            _ => {
                let fd =
                    beneath::open_beneath(root.as_fd(), parent, OFlags::RDONLY | OFlags::DIRECTORY)
                        .map_err(|e| (path.clone(), format!("its directory: {e}")))?;
                &dir.insert((parent.to_vec(), fd)).1
            }
        };
        let read = read_one(fd, name, &mut left).map_err(|why| (path.clone(), why))?;
        out.push(read);
    }
    Ok(out)
}

/// The entry `name` of the directory `dir`: a link's target, or a regular
/// file's content read whole; `left` the bytes still allowed.
fn read_one(dir: &OwnedFd, name: &[u8], left: &mut u64) -> Result<Read, String> {
    let name = OsStr::from_bytes(name);
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| e.to_string())?;
    let content = match FileType::from_raw_mode(st.st_mode) {
        FileType::Symlink => {
            let target =
                rustix::fs::readlinkat(dir, name, Vec::new()).map_err(|e| e.to_string())?;
            return take(left, target.into_bytes()).map(|content| Read {
                mode: LINK,
                content,
            });
        }
        FileType::RegularFile => {
            let (mode, content) = beneath::read_regular_at(dir.as_fd(), name.as_bytes(), *left)
                .map_err(|refused| match refused {
                    beneath::Refused::Longer(size) => format!(
                        "{size} bytes, more than the {MAX_SEALED_BYTES} a staging beside the job \
                         reads"
                    ),
                    beneath::Refused::Why(why) => why,
                })?;
            let mode = if mode & 0o100 != 0 {
                "100755"
            } else {
                "100644"
            };
            (mode, content)
        }
        other => return Err(format!("not a file or a link any more ({other:?})")),
    };
    let (mode, content) = content;
    take(left, content).map(|content| Read { mode, content })
}

/// `content`, counted against `left`.
fn take(left: &mut u64, content: Vec<u8>) -> Result<Vec<u8>, String> {
    let len = content.len() as u64;
    if len > *left {
        return Err(format!(
            "more than the {MAX_SEALED_BYTES} bytes a staging beside the job reads"
        ));
    }
    *left -= len;
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Links are read as links, files with git's mode, nothing through a
    /// link on the way (a directory swapped for a link to the host is an
    /// error), a FIFO is refused without blocking, and the bytes are
    /// bounded.
    #[test]
    fn entries_are_read_beneath_the_tree_and_nothing_else() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("work");
        let host = tmp.path().join("host");
        std::fs::create_dir_all(work.join("d")).unwrap();
        std::fs::create_dir_all(&host).unwrap();
        std::fs::write(host.join("secret"), "host\n").unwrap();
        std::fs::write(work.join("d/plain"), "plain\n").unwrap();
        std::fs::write(work.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(work.join("run.sh"), std::fs::Permissions::from_mode(0o744))
            .unwrap();
        std::os::unix::fs::symlink(host.join("secret"), work.join("link")).unwrap();
        std::os::unix::fs::symlink(&host, work.join("swapped")).unwrap();
        nix::unistd::mkfifo(&work.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let paths: Vec<Vec<u8>> = ["d/plain", "link", "run.sh"]
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect();
        let read = read_all(&work, &paths).unwrap();
        let one = |p: &str| {
            read_all(&work, &[p.as_bytes().to_vec()])
                .map(|_| ())
                .map_err(|(f, _)| f)
        };
        assert_eq!(
            (read, one("swapped/secret"), one("fifo"), one("d"),),
            (
                vec![
                    Read {
                        mode: "100644",
                        content: b"plain\n".to_vec()
                    },
                    Read {
                        mode: "120000",
                        content: host.join("secret").as_os_str().as_bytes().to_vec()
                    },
                    Read {
                        mode: "100755",
                        content: b"#!/bin/sh\n".to_vec()
                    },
                ],
                Err(b"swapped/secret".to_vec()),
                Err(b"fifo".to_vec()),
                Err(b"d".to_vec()),
            )
        );
    }

    #[test]
    fn what_is_read_is_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(tmp.path().join("sparse")).unwrap();
        f.set_len(MAX_SEALED_BYTES + 1).unwrap();
        let refused = read_all(tmp.path(), &[b"sparse".to_vec()]).unwrap_err();
        assert_eq!(
            refused,
            (
                b"sparse".to_vec(),
                format!(
                    "{} bytes, more than the {MAX_SEALED_BYTES} a staging beside the job reads",
                    MAX_SEALED_BYTES + 1
                )
            )
        );
    }

    /// Which attribute values and contents git would convert, by the
    /// rules of its `convert.c` (erring towards a conversion): `-crlf`
    /// with no `text` is binary whatever `eol` says, as `-text` is.
    #[test]
    fn a_conversion_is_seen_where_git_would_make_one() {
        let of = |attrs: &[(&str, &str)], content: &[u8]| {
            let value = |attr: &str| -> &[u8] {
                attrs
                    .iter()
                    .find(|(a, _)| *a == attr)
                    .map_or(UNSPECIFIED, |(_, v)| v.as_bytes())
            };
            conversion(value, content).is_some()
        };
        let crlf = b"a\r\n".as_slice();
        let binary = b"\0a\r\n".as_slice();
        let seen = [
            of(&[], crlf),
            of(&[("text", "set")], crlf),
            of(&[("text", "set")], b"a\n"),
            of(&[("text", "unset"), ("eol", "crlf")], crlf),
            of(&[("eol", "lf")], crlf),
            of(&[("crlf", "unset"), ("eol", "lf")], crlf),
            of(&[("crlf", "input")], crlf),
            of(&[("text", "auto")], crlf),
            of(&[("text", "auto")], binary),
            of(&[("crlf", "auto")], binary),
            of(&[("text", "set")], binary),
            of(&[("ident", "set")], b"$Id: x $"),
            of(&[("ident", "set")], b"$I d"),
            of(&[("ident", "unset")], b"$Id$"),
            of(&[("working-tree-encoding", "UTF-16")], b""),
            of(&[("working-tree-encoding", "unset")], b"x"),
        ];
        assert_eq!(
            seen,
            [
                false, true, false, false, true, false, true, true, false, false, true, true,
                false, false, true, false
            ]
        );
    }

    #[test]
    fn check_attr_answers_are_read_whole_or_not_at_all() {
        let out = b"a b\0text\0set\0a b\0eol\0unspecified\0c\0text\0auto\0";
        let values = parse_check_attr(out).unwrap();
        let mut listed: Vec<_> = values.into_iter().collect();
        listed.sort();
        assert_eq!(
            listed,
            vec![
                ((b"a b".as_slice(), "eol"), b"unspecified".as_slice()),
                ((b"a b".as_slice(), "text"), b"set".as_slice()),
                ((b"c".as_slice(), "text"), b"auto".as_slice()),
            ]
        );
        assert_eq!(parse_check_attr(b"a\0text\0").map(|v| v.len()), None);
        assert_eq!(parse_check_attr(b"a\0text\0set").map(|v| v.len()), None);
        assert_eq!(parse_check_attr(b"").map(|v| v.len()), Some(0));
    }

    /// The rule against real git: for every pairing of attributes and
    /// content, `git hash-object` with its filters (what the staging by
    /// path stores) and without them; wherever git converts, the rule
    /// says so. Where the rule errs towards a conversion git does not
    /// make, it is one of the few cases it takes as set on purpose.
    #[test]
    fn a_conversion_git_makes_is_never_missed() {
        use std::process::Command;
        let attrs = [
            "",
            "text",
            "-text",
            "text=auto",
            "eol=lf",
            "eol=crlf",
            "text eol=crlf",
            "-text eol=crlf",
            "crlf",
            "-crlf",
            "-crlf eol=crlf",
            "crlf=input",
            "crlf=auto",
            "text=auto eol=crlf",
            "text=auto eol=lf",
            "text=foo",
            "ident",
            "-ident",
            "working-tree-encoding=latin1",
            "binary",
            "filter=lfs",
        ];
        let contents: [&[u8]; 8] = [
            b"a\n",
            b"a\r\n",
            b"a\rb\n",
            b"\0a\r\n",
            b"$Id: x $\n",
            b"$Id$\n",
            b"caf\xe9\n",
            b"",
        ];
        let tmp = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .args([
                    "-c",
                    "core.autocrlf=false",
                    "-c",
                    "core.attributesFile=/dev/null",
                ])
                .args(args)
                .current_dir(tmp.path())
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_ATTR_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
            out.stdout
        };
        git(&["init", "-q"]);
        let mut rules = String::new();
        let mut files = Vec::new();
        for (i, attr) in attrs.iter().enumerate() {
            rules.push_str(&format!("f{i}_* {attr}\n"));
            for (j, content) in contents.iter().enumerate() {
                let name = format!("f{i}_{j}");
                std::fs::write(tmp.path().join(&name), content).unwrap();
                files.push((name, *attr, *content));
            }
        }
        std::fs::write(tmp.path().join(".gitattributes"), rules).unwrap();
        let mut input = Vec::new();
        for (name, _, _) in &files {
            input.extend_from_slice(name.as_bytes());
            input.push(0);
        }
        let mut check = Command::new("git")
            .args(["check-attr", "-z", "--stdin"])
            .args(CONVERTING)
            .current_dir(tmp.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut check.stdin.take().unwrap(), &input).unwrap();
        let out = check.wait_with_output().unwrap();
        let values = parse_check_attr(&out.stdout).unwrap();
        let mut missed = Vec::new();
        let mut over = Vec::new();
        for (name, attr, content) in &files {
            let filtered = git(&["hash-object", "--", name]);
            let raw = git(&["hash-object", "--no-filters", "--", name]);
            let value = |a: &str| -> &[u8] {
                values
                    .get(&(name.as_bytes(), a))
                    .copied()
                    .unwrap_or(UNSPECIFIED)
            };
            let said = conversion(value, content).is_some();
            let converts = filtered != raw;
            if converts && !said {
                missed.push((
                    attr.to_string(),
                    String::from_utf8_lossy(content).into_owned(),
                ));
            }
            if said && !converts {
                over.push((
                    attr.to_string(),
                    String::from_utf8_lossy(content).into_owned(),
                ));
            }
        }
        assert_eq!(missed, Vec::<(String, String)>::new());
        let on_purpose = |(attr, content): &(String, String)| {
            attr == "working-tree-encoding=latin1"
                || attr == "text=foo"
                || content.contains("a\rb")
                || content == "$Id$\n"
        };
        assert_eq!(
            over.iter().filter(|o| !on_purpose(o)).collect::<Vec<_>>(),
            Vec::<&(String, String)>::new()
        );
    }
}
