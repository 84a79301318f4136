//! A hostile job against `--keep` (`workspace/keep.rs`): the merged
//! overlay view copied into a plain directory at the job's end, and by the
//! reaper after a kill. What a sandboxed job writes reaches the copy
//! through `work/`; what a `process`-rung job (the user's own uid, no
//! namespace) could also plant is put straight into `meta/`. Each test
//! compares the whole copied tree with what must be there.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use paddock::workspace::overlay;
use paddock_test_support::prelude::*;

/// One entry of a tree as the user gets it: kind, mode bits (setuid and
/// setgid included), link count, extended attributes, and the bytes (a
/// file's, small ones) or target (a link's).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    kind: &'static str,
    mode: u32,
    nlink: u64,
    xattrs: Vec<String>,
    content: Vec<u8>,
}

fn xattrs(path: &Path) -> Vec<String> {
    let mut buf = vec![0u8; 4096];
    let n = rustix::fs::llistxattr(path, &mut buf).unwrap_or(0);
    let mut names: Vec<String> = buf[..n]
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect();
    names.sort();
    names
}

fn tree(dir: &Path) -> BTreeMap<PathBuf, Seen> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let (kind, content) = if m.is_dir() {
                stack.push(p.clone());
                ("dir", Vec::new())
            } else if m.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                ("link", t.into_os_string().into_encoded_bytes())
            } else if m.is_file() && m.len() <= 4096 {
                ("file", std::fs::read(&p).unwrap())
            } else if m.is_file() {
                ("big file", Vec::new())
            } else {
                ("other", Vec::new())
            };
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            let mode = if kind == "link" { 0 } else { m.mode() & 0o7777 };
            let seen = Seen {
                kind,
                mode,
                nlink: if kind == "dir" { 0 } else { m.nlink() },
                xattrs: xattrs(&p),
                content,
            };
            out.insert(rel, seen);
        }
    }
    out
}

fn seen(kind: &'static str, mode: u32, content: &[u8]) -> Seen {
    Seen {
        kind,
        mode,
        nlink: if kind == "dir" { 0 } else { 1 },
        xattrs: Vec::new(),
        content: content.to_vec(),
    }
}

/// Links to host files and to `/proc`, a hard link to a host file,
/// setuid/setgid files with a file capability and user attributes, FIFOs,
/// a socket, a device, names with a newline and a terminal escape, a file
/// and a directory made unreadable (0000) and a directory made unwritable:
/// the copy carries links as text, regular files as new inodes with their
/// bytes and permission bits only, and leaves out (naming them, escaped)
/// what is neither; the host's files are untouched.
#[tokio::test]
async fn what_a_job_plants_in_a_kept_tree_reaches_the_copy_only_as_data() {
    let Some(job) = OverlayJob::new("k1").await else {
        return;
    };
    let (work, outside) = (job.ws.work.clone(), job.outside.clone());
    std::fs::write(outside.join("host-secret"), "host\n").unwrap();
    // Through the merged view, as a sandboxed job writes.
    std::os::unix::fs::symlink("/etc/passwd", work.join("to-passwd")).unwrap();
    std::os::unix::fs::symlink("/proc/self/environ", work.join("to-proc")).unwrap();
    std::os::unix::fs::symlink(outside.join("host-secret"), work.join("to-host")).unwrap();
    for (name, mode) in [("suid", 0o4755), ("sgid", 0o2750)] {
        std::fs::write(work.join(name), "x\n").unwrap();
        std::fs::set_permissions(work.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    // A file capability (cap_net_raw+ep, v2) as root in a user namespace
    // mapped to root could set, and a user attribute.
    let cap: [u8; 20] = [0, 0, 0, 2, 0, 32, 0, 0, 0, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    rustix::fs::setxattr(
        work.join("suid"),
        "security.capability",
        &cap,
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    rustix::fs::setxattr(
        work.join("sgid"),
        "user.planted",
        b"1",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let fifo_mode = nix::sys::stat::Mode::from_bits_truncate(0o644);
    nix::unistd::mkfifo(&work.join("fifo"), fifo_mode).unwrap();
    nix::unistd::mkfifo(&work.join("evil\nname\x1b[31m"), fifo_mode).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(work.join("sock")).unwrap();
    nix::sys::stat::mknod(
        &work.join("null-dev"),
        nix::sys::stat::SFlag::S_IFCHR,
        fifo_mode,
        nix::sys::stat::makedev(1, 3),
    )
    .unwrap();
    std::fs::write(work.join("locked"), "mine\n").unwrap();
    std::fs::set_permissions(work.join("locked"), std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::create_dir(work.join("shut")).unwrap();
    std::fs::write(work.join("shut/in"), "in\n").unwrap();
    std::fs::set_permissions(work.join("shut"), std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::create_dir(work.join("ro")).unwrap();
    std::fs::write(work.join("ro/f"), "f\n").unwrap();
    std::fs::set_permissions(work.join("ro"), std::fs::Permissions::from_mode(0o555)).unwrap();
    // Straight into the upper layer, as a `process`-rung job (the user's
    // uid) could: a hard link to a host file. The mount is gone, as after
    // a restart; settling mounts it again.
    overlay::unmount_work(&job.ws.root).unwrap();
    std::fs::hard_link(
        outside.join("host-secret"),
        job.ws.meta.join("upper/hardlinked"),
    )
    .unwrap();

    let settled = job.ws.settle_kept().unwrap().unwrap();
    // The copy is the user's now: changing it leaves the host file alone.
    std::fs::write(work.join("hardlinked"), "changed\n").unwrap();
    let got = tree(&work);
    let mut want: BTreeMap<PathBuf, Seen> = [
        (
            "README.md",
            seen("file", 0o644, b"# sample\n\nA sample repository.\n"),
        ),
        ("to-passwd", seen("link", 0, b"/etc/passwd")),
        ("to-proc", seen("link", 0, b"/proc/self/environ")),
        (
            "to-host",
            seen(
                "link",
                0,
                outside.join("host-secret").as_os_str().as_encoded_bytes(),
            ),
        ),
        ("suid", seen("file", 0o755, b"x\n")),
        ("sgid", seen("file", 0o750, b"x\n")),
        ("locked", seen("file", 0, b"mine\n")),
        ("shut", seen("dir", 0, b"")),
        ("shut/in", seen("file", 0o644, b"in\n")),
        ("ro", seen("dir", 0o555, b"")),
        ("ro/f", seen("file", 0o644, b"f\n")),
        ("hardlinked", seen("file", 0o644, b"changed\n")),
    ]
    .into_iter()
    .map(|(p, s)| (PathBuf::from(p), s))
    .collect();
    // Git's files of the checkout, as they were.
    for (p, s) in &got {
        if p.starts_with(".git") || p == Path::new(".gitignore") {
            want.insert(p.clone(), s.clone());
        }
    }
    assert_eq!(
        (
            got,
            settled.left_out.clone(),
            std::fs::read_to_string(outside.join("host-secret")).unwrap(),
            std::fs::metadata(outside.join("host-secret"))
                .unwrap()
                .nlink(),
        ),
        (
            want,
            vec![
                "evil\\nname\\u{1b}[31m".to_string(),
                "fifo".to_string(),
                "null-dev".to_string(),
                "sock".to_string(),
            ],
            "host\n".to_string(),
            1,
        )
    );
    assert!(!settled.note().contains('\n') && !settled.note().contains('\x1b'));
}

/// A 1 TiB file that is all hole but 4 KiB (free for the job to make) is
/// copied sparse: the same length and bytes, about the same blocks; not a
/// terabyte of zeros on the host's disk.
#[tokio::test]
async fn a_huge_sparse_file_is_copied_sparse() {
    let Some(job) = OverlayJob::new("k2").await else {
        return;
    };
    let path = job.ws.work.join("sparse");
    let tib = 1u64 << 40;
    {
        use std::io::{Seek as _, Write as _};
        let mut f = std::fs::File::create(&path).unwrap();
        f.set_len(tib).unwrap();
        f.seek(std::io::SeekFrom::Start(tib / 2)).unwrap();
        f.write_all(&[7u8; 4096]).unwrap();
    }
    let started = std::time::Instant::now();
    job.ws.settle_kept().unwrap().unwrap();
    let took = started.elapsed();
    let m = std::fs::metadata(&path).unwrap();
    let middle = {
        use std::io::{Read as _, Seek as _};
        let mut f = std::fs::File::open(&path).unwrap();
        f.seek(std::io::SeekFrom::Start(tib / 2 - 1)).unwrap();
        let mut b = [0u8; 4098];
        f.read_exact(&mut b).unwrap();
        (b[0], b[1..4097].iter().all(|x| *x == 7), b[4097])
    };
    assert_eq!(
        (m.len(), m.blocks() * 512 <= 1 << 20, middle),
        (tib, true, (0, true, 0)),
        "blocks {}, took {took:?}",
        m.blocks()
    );
}

/// A tree deeper than the copy's limit (256 directories; a job can make
/// one thousands deep) is copied down to the limit and the rest left out
/// and named, on a thread with the default 2 MiB stack (`spawn_blocking`'s):
/// neither a stack overflow (a recursive copy overflowed it in a debug
/// build before 1,024 levels) nor a keep that fails for good.
#[tokio::test]
async fn a_tree_deeper_than_the_limit_is_cut_and_named() {
    let Some(job) = OverlayJob::new("k3").await else {
        return;
    };
    let mut dir = std::fs::File::open(&job.ws.work).unwrap();
    for _ in 0..2000 {
        rustix::fs::mkdirat(&dir, "d", rustix::fs::Mode::from_raw_mode(0o755)).unwrap();
        let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY;
        dir = rustix::fs::openat(&dir, "d", flags, rustix::fs::Mode::empty())
            .unwrap()
            .into();
    }
    let ws = job.ws.clone();
    let settled = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || ws.settle_kept())
        .unwrap()
        .join()
        .unwrap()
        .unwrap()
        .unwrap();
    // Down the copy: 256 directories, the last one empty.
    let mut depth = 0;
    let mut dir = std::fs::File::open(&job.ws.work).unwrap();
    while let Ok(next) = rustix::fs::openat(
        &dir,
        "d",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    ) {
        dir = next.into();
        depth += 1;
    }
    assert_eq!(
        (depth, settled.left_out),
        (256, vec![vec!["d"; 257].join("/")])
    );
}

/// A tree deeper than the open-file limit and than a recursive removal
/// fits in a 2 MiB stack (at least 25,000 levels: a fraction of a second
/// for a job) is settled all the same: copied down to the limit, the rest
/// named, and the overlay's upper layer, which holds it whole, removed.
/// Before, the layers were removed by the standard library's recursive
/// `remove_dir_all`, which overflowed the thread's stack (the process
/// aborted) or failed with `EMFILE` for good.
#[tokio::test]
async fn a_tree_deeper_than_any_recursion_is_settled() {
    let Some(job) = OverlayJob::new("k5").await else {
        return;
    };
    let (soft, _) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    let levels = soft.saturating_add(64).max(25_000);
    if levels > 200_000 {
        eprintln!("skipping: an open-file limit of {soft} asks for a tree too deep to make");
        return;
    }
    let mut dir = std::fs::File::open(&job.ws.work).unwrap();
    for _ in 0..levels {
        rustix::fs::mkdirat(&dir, "d", rustix::fs::Mode::from_raw_mode(0o755)).unwrap();
        let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY;
        dir = rustix::fs::openat(&dir, "d", flags, rustix::fs::Mode::empty())
            .unwrap()
            .into();
    }
    drop(dir);
    let ws = job.ws.clone();
    let settled = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || ws.settle_kept().map(|s| s.map(|s| s.left_out)))
        .unwrap()
        .join()
        .unwrap()
        .map_err(|e| e.to_string());
    assert_eq!(settled, Ok(Some(vec![vec!["d"; 257].join("/")])));
}

/// What a `process`-rung job (the user's uid) could plant where the copy
/// is made: `meta/kept-work.tmp` and `meta/kept-work` as links to host
/// directories. The copy is made in a directory of its own and put in
/// place; neither link is followed, renamed into `work/` or left.
#[tokio::test]
async fn links_planted_where_the_copy_is_made_are_not_taken_for_it() {
    let Some(job) = OverlayJob::new("k4").await else {
        return;
    };
    let (a, b) = (job.outside.join("a"), job.outside.join("b"));
    for d in [&a, &b] {
        std::fs::create_dir(d).unwrap();
        std::fs::write(d.join("host"), "host\n").unwrap();
    }
    std::fs::write(job.ws.work.join("mine"), "mine\n").unwrap();
    std::os::unix::fs::symlink(&a, job.ws.meta.join("kept-work.tmp")).unwrap();
    std::os::unix::fs::symlink(&b, job.ws.meta.join("kept-work")).unwrap();
    job.ws.settle_kept().unwrap().unwrap();
    let work_meta = std::fs::symlink_metadata(&job.ws.work).unwrap();
    assert_eq!(
        (
            work_meta.is_dir(),
            std::fs::read_to_string(job.ws.work.join("mine")).unwrap(),
            job.ws.work.join("host").exists(),
            tree(&job.outside).len(),
            std::fs::symlink_metadata(job.ws.meta.join("kept-work")).is_ok(),
        ),
        (true, "mine\n".to_string(), false, 4, false)
    );
}

/// A job still running (a `process`-rung job's leftover the reaper has not
/// killed yet) swaps a directory and a file for links to host ones while
/// the copy runs, over and over: whatever the copy ends with (a copy, or
/// an error naming the path), it never holds the host's files.
#[tokio::test]
async fn paths_swapped_for_links_while_copying_are_never_followed() {
    for round in 0..3 {
        let Some(job) = OverlayJob::new(&format!("k5-{round}")).await else {
            return;
        };
        let (work, outside) = (job.ws.work.clone(), job.outside.clone());
        std::fs::create_dir(outside.join("dir")).unwrap();
        std::fs::write(outside.join("dir/host"), "host\n").unwrap();
        std::fs::write(outside.join("file"), "host\n").unwrap();
        for i in 0..300 {
            std::fs::write(work.join(format!("f{i:03}")), "job\n").unwrap();
        }
        std::fs::create_dir(work.join("zdir")).unwrap();
        std::fs::write(work.join("zfile"), "job\n").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let racer = {
            let (work, outside, stop) = (work.clone(), outside.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for (name, host) in [("zdir", "dir"), ("zfile", "file")] {
                        let p = work.join(name);
                        let tmp = work.join(format!("{name}.swap"));
                        let _ = std::os::unix::fs::symlink(outside.join(host), &tmp);
                        let _ = std::fs::rename(&tmp, &p);
                    }
                    for name in ["zdir", "zfile"] {
                        let p = work.join(name);
                        let _ = std::fs::remove_file(&p);
                        if name == "zdir" {
                            let _ = std::fs::create_dir(&p);
                        } else {
                            let _ = std::fs::write(&p, "job\n");
                        }
                    }
                }
            })
        };
        let settled = job.ws.settle_kept();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        racer.join().unwrap();
        // Whatever was made (the copy in place, or the half-made one).
        // A settle that failed after removing the mount point leaves no
        // `work/` (its copy waits in `meta/` for the next settle).
        let mut made = tree(&job.ws.meta);
        if !overlay::is_mounted(&work) && work.is_dir() {
            made.extend(tree(&work));
        }
        let leaked: Vec<&PathBuf> = made
            .iter()
            .filter(|(p, s)| s.kind != "link" && (s.content == b"host\n" || p.ends_with("host")))
            .map(|(p, _)| p)
            .collect();
        assert_eq!(leaked, Vec::<&PathBuf>::new(), "round {round}: {settled:?}");
    }
}
