//! One git object written by Paddock itself into a git directory it owns
//! (`meta/git`) as a loose object, where a git process was one more start
//! on the job's end (issue #14): the result branch's commit
//! (`commit_object.rs`) and the blobs of a sealed staging of few files
//! (`sealed_stage.rs`). The object is `<kind> <length>\0<body>`, named by
//! the hash of the repository's object format (SHA-1, or SHA-256), stored
//! zlib-compressed (`flate2`, at the fastest level, as git writes loose
//! objects) in `objects/<2>/<rest>`, written to a temporary file (mode
//! 0444) and linked into place as git does; an object already there is
//! left as it is (the same name is the same content).

use std::io::Write as _;
use std::path::Path;

use sha1::Digest as _;

/// Why an object could not be written.
#[derive(Debug, thiserror::Error)]
pub enum LooseObjectError {
    #[error("write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Writes the object `kind` with `body` as a loose object of `git_dir`
/// (SHA-256 named when `sha256`); its name.
pub(crate) fn write(
    git_dir: &Path,
    kind: &str,
    body: &[u8],
    sha256: bool,
) -> Result<String, LooseObjectError> {
    let mut object = format!("{kind} {}\0", body.len()).into_bytes();
    object.extend_from_slice(body);
    let name = if sha256 {
        hex::encode(sha2::Sha256::digest(&object))
    } else {
        hex::encode(sha1::Sha1::digest(&object))
    };
    let dir = git_dir.join("objects").join(&name[..2]);
    let path = dir.join(&name[2..]);
    let failed = |source| LooseObjectError::Write {
        path: path.display().to_string(),
        source,
    };
    if path.exists() {
        return Ok(name);
    }
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(failed(e)),
    }
    let mut tmp = tempfile::Builder::new()
        .prefix("tmp_obj_")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o444))
        .tempfile_in(&dir)
        .map_err(failed)?;
    let framed = zlib(&object).map_err(failed)?;
    tmp.write_all(&framed).map_err(failed)?;
    match tmp.persist_noclobber(&path) {
        Ok(_) => Ok(name),
        // Written meanwhile by another writer: the same object.
        Err(e) if path.exists() => {
            drop(e);
            Ok(name)
        }
        Err(e) => Err(failed(e.error)),
    }
}

/// `data` as a zlib stream (flate2), compressed at zlib's fastest level,
/// git's own for loose objects (`core.looseCompression` 1).
fn zlib(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = flate2::write::ZlibEncoder::new(
        Vec::with_capacity(data.len() / 2 + 64),
        flate2::Compression::fast(),
    );
    encoder.write_all(data)?;
    encoder.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_test_support::git::git;

    /// Blobs of any content (empty, binary, large) are the objects `git
    /// hash-object -w` writes, in either object format, and git reads them
    /// back whole; writing one again leaves it as it is.
    #[test]
    fn a_blob_is_the_one_git_hash_object_writes_in_either_format() {
        let dir = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let contents: [&[u8]; 4] = [b"", b"a\n", b"\0\x01\r\n\xff", &big];
        for format in ["sha1", "sha256"] {
            let repo = dir.path().join(format);
            git(
                dir.path(),
                &[
                    "init",
                    "-q",
                    "--bare",
                    &format!("--object-format={format}"),
                    repo.to_str().unwrap(),
                ],
            );
            for content in contents {
                let ours = write(&repo, "blob", content, format == "sha256").unwrap();
                let again = write(&repo, "blob", content, format == "sha256").unwrap();
                let run = |args: &[&str], input: &[u8]| {
                    let mut child = std::process::Command::new("git")
                        .args(args)
                        .env("GIT_DIR", &repo)
                        .stdin(std::process::Stdio::piped())
                        .stdout(std::process::Stdio::piped())
                        .spawn()
                        .unwrap();
                    child.stdin.take().unwrap().write_all(input).unwrap();
                    let out = child.wait_with_output().unwrap();
                    assert!(out.status.success(), "{format} {args:?}");
                    out.stdout
                };
                let theirs = run(&["hash-object", "--stdin", "--no-filters"], content);
                let read = run(&["cat-file", "blob", &ours], b"");
                assert_eq!(
                    (
                        again,
                        String::from_utf8(theirs).unwrap().trim().to_string(),
                        read
                    ),
                    (ours.clone(), ours, content.to_vec()),
                    "{format}"
                );
            }
            let check = std::process::Command::new("git")
                .args(["fsck", "--strict"])
                .env("GIT_DIR", &repo)
                .output()
                .unwrap();
            assert!(check.status.success(), "{format}: {check:?}");
        }
    }
}
