//! Files a job removed from its directory but still holds: a removed
//! file's blocks stay allocated while a process has it open or mapped,
//! and no walk of the directory sees it (it has no name left). A job
//! could so hold any amount of disk past `limits.max_disk_bytes`
//! (`exec 3>big; rm big; head -c 50G /dev/zero >&3`), only the host's
//! reserve stopping it, and every other job of the host with it. So each
//! of the disk watcher's measurements (`disk_watch.rs`) adds what
//! [`held`] finds: every process created since the job began
//! (`leftovers::Since`, as the leftovers scan; each of the job's
//! processes was, however it escaped its tree) that this user may read
//! is looked at, and
//!
//! - each open descriptor whose target lies under the job's directory and
//!   is removed (`/proc/PID/fd/N` reads `… (deleted)`) is `stat`ed through
//!   that link, which is the file itself whatever its name was: a regular
//!   file with no link left is charged its allocated blocks;
//! - each mapping of such a file (`/proc/PID/maps`: a file mapped, its
//!   descriptor closed, then removed) is `stat`ed the same way through
//!   `/proc/PID/map_files/`, where the kernel lets this process (root);
//!   where it does not, the mapping is charged the end of the range it
//!   maps (its offset and length), the most of the file the job can
//!   reach through it.
//!
//! Each file once (by device and inode), however many processes hold it;
//! at most [`MAX_LOOKED_AT`] descriptors and mappings looked at, past
//! which the measurement is partial and the job stopped.
//! Nothing is opened or followed but `/proc`'s own links, which name the
//! held file and nothing the job could redirect.
//!
//! Not seen (docs/sandbox.md, "Disk"): a removed file whose only
//! descriptor is in flight in a Unix socket (`SCM_RIGHTS` sent, never
//! received): no process's `/proc` names it, and the kernel shows it
//! nowhere else; only the host's reserve bounds what a job holds that way.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use crate::leftovers::Since;

/// The marker the kernel puts after a removed file's path.
const DELETED: &[u8] = b" (deleted)";

/// The most open descriptors and mappings one measurement looks at, all
/// processes together: each costs a `readlink` (and the mappings a read of
/// `maps`), and the watcher checks the host's reserve only between two
/// measurements, so a job must not make one last minutes with millions of
/// descriptors. Past it the job is stopped, as past the walk's own bounds:
/// what was not looked at could hide any amount.
pub(super) const MAX_LOOKED_AT: usize = 1_000_000;

/// What [`held`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held {
    /// The bytes the removed files hold.
    pub bytes: u64,
    /// More than [`MAX_LOOKED_AT`] descriptors and mappings: `bytes` is
    /// what the first of them hold.
    pub partial: bool,
}

/// One scan's findings so far.
#[derive(Debug)]
struct Scan<'a> {
    /// The job's directory, as the kernel names it.
    dir: &'a [u8],
    files: HashMap<(u64, u64), Charge>,
    /// Descriptors and mappings still to look at.
    left: usize,
}

impl Scan<'_> {
    /// Counts one more descriptor or mapping looked at; false past
    /// [`MAX_LOOKED_AT`].
    fn look(&mut self) -> bool {
        match self.left.checked_sub(1) {
            Some(left) => {
                self.left = left;
                true
            }
            None => false,
        }
    }
}

/// What one held file is charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Charge {
    /// Its allocated blocks, from its own `stat`.
    Exact(u64),
    /// The end of the furthest range a mapping of it reaches (no `stat`
    /// allowed).
    Mapped(u64),
}

/// The bytes held by files removed from under `dir` that processes
/// created since `since` (every readable process, without it) still hold
/// open or mapped; see the module's text.
pub(super) fn held(dir: &Path, since: Option<Since>) -> Held {
    // The kernel names files by their real path.
    let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut scan = Scan {
        dir: real.as_os_str().as_bytes(),
        files: HashMap::new(),
        left: MAX_LOOKED_AT,
    };
    let me = std::process::id();
    let mut partial = false;
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Held { bytes: 0, partial };
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let proc_dir = p.path();
        if let (Some(since), Some(started)) = (since, Since::of(&proc_dir)) {
            if started < since {
                continue;
            }
        }
        if !descriptors(&proc_dir, &mut scan) || !mappings(&proc_dir, &mut scan) {
            partial = true;
            break;
        }
    }
    let bytes = scan
        .files
        .values()
        .map(|c| match c {
            Charge::Exact(n) | Charge::Mapped(n) => *n,
        })
        .fold(0, u64::saturating_add);
    Held { bytes, partial }
}

/// Whether the link text `target` names a removed file under `dir`.
fn removed_under(target: &[u8], dir: &[u8]) -> bool {
    target
        .strip_suffix(DELETED)
        .and_then(|path| path.strip_prefix(dir))
        .is_some_and(|rest| rest.first() == Some(&b'/'))
}

/// A regular file with no link left, through `/proc`'s link `link`: its
/// device, inode and allocated bytes.
fn removed_file(link: &Path) -> Option<((u64, u64), u64)> {
    let st = rustix::fs::stat(link).ok()?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile
        || st.st_nlink != 0
    {
        return None;
    }
    #[allow(clippy::useless_conversion)]
    let key = (u64::from(st.st_dev), u64::from(st.st_ino));
    let blocks = u64::try_from(st.st_blocks).unwrap_or(0);
    Some((key, blocks.saturating_mul(512)))
}

/// The removed files under the scan's directory process `proc_dir` holds
/// open; false when the scan's bound stopped it.
fn descriptors(proc_dir: &Path, scan: &mut Scan<'_>) -> bool {
    let Ok(fds) = std::fs::read_dir(proc_dir.join("fd")) else {
        return true;
    };
    for fd in fds.flatten() {
        if !scan.look() {
            return false;
        }
        let link = fd.path();
        let Ok(target) = std::fs::read_link(&link) else {
            continue;
        };
        if !removed_under(target.as_os_str().as_bytes(), scan.dir) {
            continue;
        }
        if let Some((key, bytes)) = removed_file(&link) {
            scan.files.insert(key, Charge::Exact(bytes));
        }
    }
    true
}

/// The longest line of `/proc/PID/maps` read: its numbers and a path of
/// at most `PATH_MAX` (4,096 bytes) with the kernel's ` (deleted)`. A
/// longer one is skipped.
const MAX_MAPS_LINE: u64 = 8 * 1024;

/// The removed files under the scan's directory process `proc_dir` maps;
/// false when the scan's bound stopped it. `maps` is read a line at a
/// time: a process of the job holding 65,530 mappings (the kernel's
/// default `vm.max_map_count`) of a file whose path is 3,800 bytes long
/// has a `maps` of 250 MB, which each measurement read whole into
/// Paddock's memory, again for every such process.
fn mappings(proc_dir: &Path, scan: &mut Scan<'_>) -> bool {
    use std::io::{BufRead as _, Read as _};
    let Ok(file) = std::fs::File::open(proc_dir.join("maps")) else {
        return true;
    };
    let mut maps = std::io::BufReader::new(file);
    let mut read = Vec::new();
    loop {
        read.clear();
        match (&mut maps).take(MAX_MAPS_LINE).read_until(b'\n', &mut read) {
            Ok(0) | Err(_) => return true,
            Ok(_) => {}
        }
        let Some(line) = read.strip_suffix(b"\n") else {
            if read.len() as u64 == MAX_MAPS_LINE && !skip_line(&mut maps) {
                return true;
            }
            // Cut short, or the last line with no newline: not a whole
            // line the kernel wrote.
            continue;
        };
        if line.is_empty() {
            continue;
        }
        if !scan.look() {
            return false;
        }
        let Some(map) = Mapping::parse(line) else {
            continue;
        };
        if !removed_under(map.path, scan.dir) {
            continue;
        }
        let via = proc_dir
            .join("map_files")
            .join(std::ffi::OsStr::from_bytes(map.range));
        if let Some((key, bytes)) = removed_file(&via) {
            scan.files.insert(key, Charge::Exact(bytes));
            continue;
        }
        let reach = map.offset.saturating_add(map.end.saturating_sub(map.start));
        let key = (map.dev, map.inode);
        match scan.files.get(&key) {
            Some(Charge::Exact(_)) => {}
            Some(Charge::Mapped(n)) if *n >= reach => {}
            _ => {
                scan.files.insert(key, Charge::Mapped(reach));
            }
        }
    }
}

/// Reads past the rest of a line longer than [`MAX_MAPS_LINE`]; false at
/// the end of the file or on an error.
fn skip_line(maps: &mut impl std::io::BufRead) -> bool {
    loop {
        let (found, used) = match maps.fill_buf() {
            Ok([]) | Err(_) => return false,
            Ok(buf) => match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (true, i + 1),
                None => (false, buf.len()),
            },
        };
        maps.consume(used);
        if found {
            return true;
        }
    }
}

/// One line of `/proc/PID/maps`: `START-END PERMS OFFSET MAJ:MIN INODE
/// PATH` (numbers in hex but the inode; the path may hold spaces).
#[derive(Debug, PartialEq, Eq)]
struct Mapping<'a> {
    range: &'a [u8],
    start: u64,
    end: u64,
    offset: u64,
    dev: u64,
    inode: u64,
    path: &'a [u8],
}

impl<'a> Mapping<'a> {
    fn parse(line: &'a [u8]) -> Option<Mapping<'a>> {
        let mut rest = line;
        let mut field = || {
            let start = rest.iter().position(|b| *b != b' ')?;
            let len = rest[start..]
                .iter()
                .position(|b| *b == b' ')
                .unwrap_or(rest.len() - start);
            let f = &rest[start..start + len];
            rest = &rest[start + len..];
            Some(f)
        };
        let range = field()?;
        let _perms = field()?;
        let offset = field()?;
        let dev = field()?;
        let inode = field()?;
        let path = rest.strip_prefix(b" ")?.trim_ascii_start();
        let hex = |f: &[u8]| u64::from_str_radix(std::str::from_utf8(f).ok()?, 16).ok();
        let (start, end) = {
            let dash = range.iter().position(|b| *b == b'-')?;
            (hex(&range[..dash])?, hex(&range[dash + 1..])?)
        };
        let colon = dev.iter().position(|b| *b == b':')?;
        let (major, minor) = (hex(&dev[..colon])?, hex(&dev[colon + 1..])?);
        Some(Mapping {
            range,
            start,
            end,
            offset: hex(offset)?,
            dev: nix::sys::stat::makedev(major, minor),
            inode: std::str::from_utf8(inode).ok()?.parse().ok()?,
            path,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Write as _;

    /// Starts `command` with its stdout piped and waits for its first
    /// line (it prints one once it holds what the test measures); the
    /// child and that line.
    fn ready(command: &mut std::process::Command) -> (std::process::Child, String) {
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        (child, line)
    }

    #[test]
    fn a_maps_line_is_read_with_a_path_holding_spaces() {
        let line = b"7f00a000-7f00c000 rw-s 00003000 fd:01 1234    /j/job-1/work/a b (deleted)";
        assert_eq!(
            Mapping::parse(line),
            Some(Mapping {
                range: b"7f00a000-7f00c000",
                start: 0x7f00_a000,
                end: 0x7f00_c000,
                offset: 0x3000,
                dev: nix::sys::stat::makedev(0xfd, 1),
                inode: 1234,
                path: b"/j/job-1/work/a b (deleted)",
            })
        );
        assert_eq!(
            Mapping::parse(b"7f00a000-7f00c000 r-xp 00000000 00:00 0"),
            None
        );
        assert_eq!(
            [
                removed_under(b"/j/job-1/work/a b (deleted)", b"/j/job-1"),
                removed_under(b"/j/job-1/work/a", b"/j/job-1"),
                removed_under(b"/j/job-10/a (deleted)", b"/j/job-1"),
                removed_under(b"/j/job-1 (deleted)", b"/j/job-1"),
            ],
            [true, false, false, false]
        );
    }

    /// A removed file this test's child holds open is charged its blocks,
    /// once however many descriptors name it; a named file and one under
    /// another directory are not; nothing once it is closed.
    #[test]
    fn a_removed_file_held_open_is_charged_once() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let dir = root.join("job");
        let other = root.join("job-other");
        for d in [&dir, &other] {
            std::fs::create_dir(d).unwrap();
        }
        let since = Since::now();
        let mut child = std::process::Command::new("sh");
        child
            .arg("-c")
            .arg(
                "exec 3>\"$0/big\" 4<\"$0/big\" 5>\"$1/gone\" 6>\"$0/named\"; \
                 head -c 1048576 /dev/zero >&3; head -c 8192 /dev/zero >&5; \
                 rm \"$0/big\" \"$1/gone\"; echo ready; exec sleep 30",
            )
            .arg(&dir)
            .arg(&other);
        let (mut child, _) = ready(&mut child);
        let held_open = held(&dir, since);
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::File::create(dir.join("after"))
            .unwrap()
            .write_all(b"x")
            .unwrap();
        let full = |bytes| Held {
            bytes,
            partial: false,
        };
        assert_eq!((held_open, held(&dir, since)), (full(1 << 20), full(0)));
    }

    /// A removed file held by a mapping alone (its descriptor closed) is
    /// charged too: its blocks where `/proc/PID/map_files` may be read
    /// (root), else the mapped range; both are the MiB here.
    #[test]
    fn a_removed_file_held_by_a_mapping_is_charged() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let since = Since::now();
        let mut child = std::process::Command::new("python3");
        child
            .arg("-c")
            .arg(
                "import mmap, os, sys, time; p = sys.argv[1] + '/mapped'; \
                 f = open(p, 'w+b'); os.posix_fallocate(f.fileno(), 0, 1 << 20); \
                 m = mmap.mmap(f.fileno(), 1 << 20); f.close(); os.unlink(p); \
                 print('ready', flush=True); time.sleep(30)",
            )
            .arg(&dir);
        let (mut child, ready) = ready(&mut child);
        let mapped = held(&dir, since);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            (ready.as_str(), mapped),
            (
                "ready\n",
                Held {
                    bytes: 1 << 20,
                    partial: false
                }
            )
        );
    }
}
