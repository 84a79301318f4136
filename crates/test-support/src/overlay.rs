//! A job's workspace for a test that plays a hostile job against it:
//! provisioned the way a job's is (`Layout::Overlay`, or the clone, on a
//! real repository), unmounted and removed when dropped. An overlay is
//! `None` (a printed reason locally, a failure in CI) where this process
//! cannot mount one (not root).

use std::path::{Path, PathBuf};

use paddock::workspace::{overlay, Layout, Lease, Workspace};
use paddock_protocol::RepositorySpec;

/// A job's overlay workspace under a temporary directory, which also
/// holds an `outside/` directory standing for the host's files.
pub struct OverlayJob {
    pub ws: Workspace,
    pub outside: PathBuf,
    dir: tempfile::TempDir,
}

impl OverlayJob {
    /// Provisions job `id`'s overlay workspace on a one-commit repository.
    pub async fn new(id: &str) -> Option<OverlayJob> {
        OverlayJob::with_layout(id, Layout::Overlay).await
    }

    /// The same with the given layout (`Layout::Clone` works anywhere).
    pub async fn with_layout(id: &str, layout: Layout) -> Option<OverlayJob> {
        let dir = tempfile::tempdir().unwrap();
        let repo = crate::git::repo(dir.path());
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let jobs = dir.path().join("jobs");
        let lease = Lease::take(&jobs, id).unwrap();
        let spec = RepositorySpec {
            path: Some(repo),
            url: None,
            base_ref: "main".into(),
            token: None,
        };
        match Workspace::provision_as(&jobs, id, lease, &spec, "paddock/T/1", layout).await {
            Ok(ws) => Some(OverlayJob { ws, outside, dir }),
            Err(e) if crate::skip::in_ci() => panic!("no overlay workspace in CI: {e}"),
            Err(e) => {
                eprintln!("skipping: no overlay workspace here (needs root and overlayfs): {e}");
                None
            }
        }
    }

    /// The temporary directory everything is under.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for OverlayJob {
    fn drop(&mut self) {
        let _ = overlay::unmount_work(&self.ws.root);
    }
}
