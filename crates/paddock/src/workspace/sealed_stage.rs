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
//! else `100644`), a link's target; it hands the bytes to one `git
//! fast-import` (length-prefixed blobs, no filter, the object names asked
//! back with `get-mark`), and stages the names so made with `update-index
//! --index-info`. Neither git has a work tree: nothing of the job's tree is
//! read but what Paddock read. The ignore rules the walk asked for came
//! from a shadow of the tree's ignore files (`ignore_shadow.rs`).
//!
//! What it does not do, it refuses (`WorkspaceError::SealedStaging`), and
//! the patch is then made by path once the job has ended, as before: a
//! tree with a `.gitattributes` (whose conversions git applies as it
//! reads a file by path), more than [`MAX_SEALED_BYTES`] to read, an entry
//! that changed type or length while it was read. A path git never
//! stages (`.git` under another spelling) `update-index --index-info`
//! skips with a warning, as `--add` does, and the same warning is read
//! (`FinalTree::refused`). The result is otherwise the tree the staging
//! by path gives (the tests compare the two).

use std::ffi::OsStr;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, OFlags};

use super::beneath;
use super::host_git::HostGit;
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
/// beneath `work` by Paddock (module text); the paths git refused to
/// stage (its "Ignoring path" lines, as the staging by path reads them).
pub(super) async fn stage(
    git: &HostGit,
    work: &Path,
    staged: &[Vec<u8>],
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
    // Neither git has a work tree: each runs in Paddock's git directory.
    let git = HostGit {
        work_tree: None,
        ..git.clone()
    };
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
    let mut info = Vec::new();
    for ((r, name), path) in reads.iter().zip(&names).zip(staged) {
        info.extend_from_slice(r.mode.as_bytes());
        info.push(b' ');
        info.extend_from_slice(name);
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
                mode: "120000",
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
}
