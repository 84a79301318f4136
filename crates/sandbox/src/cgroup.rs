//! Resource caps with cgroups: memory, pids and CPU, on cgroup v2 when the
//! controllers are available there, else on the v1 hierarchies (this
//! project's reference machine has v1 memory/pids/cpu). The helper creates
//! one cgroup per run, writes the caps, moves the sandbox's PID 1 in before
//! PID 1 starts the command (so the command and all its descendants are
//! inside), and removes it when the run ends. A non-root user needs a delegated, writable root (see
//! `Policy::cgroup_root`); without one the run is refused unless the
//! policy accepts running without caps.

use std::path::{Path, PathBuf};

use crate::error::SetupError;
use crate::policy::Limits;

/// Which cgroup interface a root offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// What the host offers under `root`.
pub fn detect(root: &Path) -> Option<Version> {
    let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
    let words: Vec<&str> = controllers.split_whitespace().collect();
    if ["memory", "pids", "cpu"].iter().all(|c| words.contains(c)) {
        return Some(Version::V2);
    }
    if ["memory", "pids", "cpu"]
        .iter()
        .all(|c| root.join(c).join("cgroup.procs").exists())
    {
        return Some(Version::V1);
    }
    None
}

/// One run's cgroup (one directory per controller on v1).
#[derive(Debug)]
pub struct Cgroup {
    version: Version,
    /// (controller, directory)
    dirs: Vec<(&'static str, PathBuf)>,
}

fn write(path: &Path, value: &str) -> Result<(), SetupError> {
    std::fs::write(path, value).map_err(|e| SetupError::Cgroup {
        path: path.to_path_buf(),
        detail: format!("write `{value}`: {e}"),
    })
}

impl Cgroup {
    /// Creates the run's cgroup under `root` and writes the caps.
    pub fn create(root: &Path, name: &str, limits: &Limits) -> Result<Cgroup, SetupError> {
        let version = detect(root).ok_or_else(|| SetupError::Cgroup {
            path: root.to_path_buf(),
            detail: "neither cgroup v2 with the memory, pids and cpu controllers nor the v1 memory, pids and cpu hierarchies".into(),
        })?;
        let leaf = format!("paddock/{name}");
        let dirs: Vec<(&'static str, PathBuf)> = match version {
            Version::V2 => vec![("", root.join(&leaf))],
            Version::V1 => ["memory", "pids", "cpu"]
                .into_iter()
                .map(|c| (c, root.join(c).join(&leaf)))
                .collect(),
        };
        let cg = Cgroup { version, dirs };
        // What was made of it goes again when a later step fails.
        match cg.make(root, limits) {
            Ok(()) => Ok(cg),
            Err(e) => {
                cg.remove();
                Err(e)
            }
        }
    }

    /// Makes the directories and writes the caps.
    fn make(&self, root: &Path, limits: &Limits) -> Result<(), SetupError> {
        let (cg, version) = (self, self.version);
        for (_, d) in &cg.dirs {
            std::fs::create_dir_all(d).map_err(|e| SetupError::Cgroup {
                path: d.clone(),
                detail: format!("create: {e}"),
            })?;
        }
        if version == Version::V2 {
            // Enable the controllers for paddock/ and for its children (a
            // failure shows up as a missing cap file just below).
            for dir in [root.to_path_buf(), root.join("paddock")] {
                let _ = std::fs::write(dir.join("cgroup.subtree_control"), "+memory +pids +cpu");
            }
        }
        if let Some(mb) = limits.memory_mb {
            let bytes = (mb * 1024 * 1024).to_string();
            match version {
                Version::V2 => {
                    write(&cg.dir("").join("memory.max"), &bytes)?;
                    let swap = cg.dir("").join("memory.swap.max");
                    if swap.exists() {
                        write(&swap, "0")?;
                    }
                }
                Version::V1 => {
                    write(&cg.dir("memory").join("memory.limit_in_bytes"), &bytes)?;
                    let memsw = cg.dir("memory").join("memory.memsw.limit_in_bytes");
                    if memsw.exists() {
                        write(&memsw, &bytes)?;
                    }
                }
            }
        }
        if let Some(n) = limits.pids {
            let dir = cg.dir(if version == Version::V2 { "" } else { "pids" });
            write(&dir.join("pids.max"), &n.to_string())?;
        }
        if let Some(pct) = limits.cpu_percent {
            let quota = (pct * 1000).max(1000);
            match version {
                Version::V2 => write(&cg.dir("").join("cpu.max"), &format!("{quota} 100000"))?,
                Version::V1 => {
                    write(&cg.dir("cpu").join("cpu.cfs_period_us"), "100000")?;
                    write(&cg.dir("cpu").join("cpu.cfs_quota_us"), &quota.to_string())?;
                }
            }
        }
        Ok(())
    }

    fn dir(&self, controller: &str) -> PathBuf {
        self.dirs
            .iter()
            .find(|(c, _)| *c == controller)
            .map(|(_, d)| d.clone())
            .unwrap_or_default()
    }

    /// Moves process `pid` (and so its future children) in.
    pub fn add(&self, pid: nix::unistd::Pid) -> Result<(), SetupError> {
        let pid = pid.to_string();
        for (_, d) in &self.dirs {
            write(&d.join("cgroup.procs"), &pid)?;
        }
        Ok(())
    }

    /// True when the kernel's OOM killer killed something in this cgroup.
    pub fn oom_killed(&self) -> bool {
        let (file, dir) = match self.version {
            Version::V2 => ("memory.events", self.dir("")),
            Version::V1 => ("memory.oom_control", self.dir("memory")),
        };
        std::fs::read_to_string(dir.join(file))
            .unwrap_or_default()
            .lines()
            .any(|l| {
                let mut w = l.split_whitespace();
                w.next() == Some("oom_kill") && w.next().is_some_and(|n| n != "0")
            })
    }

    /// Removes the cgroup (after the run's processes are gone; the kernel
    /// may take a moment to release a dying cgroup, hence the retries).
    pub fn remove(&self) {
        for (_, d) in &self.dirs {
            for _ in 0..100 {
                match std::fs::remove_dir(d) {
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                        std::thread::sleep(std::time::Duration::from_millis(5))
                    }
                    _ => break,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap()
    }

    /// The v2 interface on a stand-in tree (the files the kernel would
    /// offer): caps, joining and the OOM counter land where the kernel reads
    /// them.
    #[test]
    fn v2_caps_are_written_to_the_unified_files() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(
            root.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        assert_eq!(detect(root.path()), Some(Version::V2));
        let leaf = root.path().join("paddock/run-1");
        std::fs::create_dir_all(&leaf).unwrap();
        std::fs::write(leaf.join("memory.swap.max"), "max").unwrap();
        let limits = Limits {
            memory_mb: Some(64),
            pids: Some(32),
            cpu_percent: Some(50),
        };
        let cg = Cgroup::create(root.path(), "run-1", &limits).unwrap();
        cg.add(nix::unistd::Pid::this()).unwrap();
        assert_eq!(
            (
                read(&leaf.join("memory.max")),
                read(&leaf.join("memory.swap.max")),
                read(&leaf.join("pids.max")),
                read(&leaf.join("cpu.max")),
                read(&leaf.join("cgroup.procs")),
                read(&root.path().join("paddock/cgroup.subtree_control")),
            ),
            (
                (64 * 1024 * 1024).to_string(),
                "0".to_string(),
                "32".to_string(),
                "50000 100000".to_string(),
                std::process::id().to_string(),
                "+memory +pids +cpu".to_string(),
            )
        );
        assert!(!cg.oom_killed());
        std::fs::write(
            leaf.join("memory.events"),
            "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
        )
        .unwrap();
        assert!(cg.oom_killed());
    }

    #[test]
    fn v1_caps_are_written_per_hierarchy() {
        let root = tempfile::tempdir().unwrap();
        for c in ["memory", "pids", "cpu"] {
            std::fs::create_dir_all(root.path().join(c)).unwrap();
            std::fs::write(root.path().join(c).join("cgroup.procs"), "").unwrap();
        }
        assert_eq!(detect(root.path()), Some(Version::V1));
        let limits = Limits {
            memory_mb: Some(1),
            pids: None,
            cpu_percent: Some(250),
        };
        let cg = Cgroup::create(root.path(), "run-2", &limits).unwrap();
        let dir = |c: &str| root.path().join(c).join("paddock/run-2");
        assert_eq!(
            (
                read(&dir("memory").join("memory.limit_in_bytes")),
                dir("pids").join("pids.max").exists(),
                read(&dir("cpu").join("cpu.cfs_period_us")),
                read(&dir("cpu").join("cpu.cfs_quota_us")),
            ),
            (
                "1048576".to_string(),
                false,
                "100000".to_string(),
                "250000".to_string()
            )
        );
        std::fs::write(
            dir("memory").join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
        )
        .unwrap();
        assert!(!cg.oom_killed());
    }

    /// A cgroup that cannot be made whole leaves nothing made of it: here
    /// the memory directory is made, the pids one cannot be.
    #[test]
    fn a_cgroup_made_in_part_is_removed() {
        let root = tempfile::tempdir().unwrap();
        for c in ["memory", "pids", "cpu"] {
            std::fs::create_dir_all(root.path().join(c)).unwrap();
            std::fs::write(root.path().join(c).join("cgroup.procs"), "").unwrap();
        }
        std::fs::write(root.path().join("pids/paddock"), "not a directory").unwrap();
        let err = Cgroup::create(root.path(), "run-3", &Limits::default())
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            (
                err.is_some_and(|e| e.contains("pids/paddock/run-3")),
                root.path().join("memory/paddock/run-3").exists(),
            ),
            (true, false)
        );
    }

    #[test]
    fn a_root_without_controllers_is_refused_naming_it() {
        let root = tempfile::tempdir().unwrap();
        let err = Cgroup::create(root.path(), "x", &Limits::default())
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err,
            Some(format!(
                "cgroup {}: neither cgroup v2 with the memory, pids and cpu controllers nor the v1 memory, pids and cpu hierarchies",
                root.path().display()
            ))
        );
    }
}
