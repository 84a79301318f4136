//! The patch made while the engine shuts down (issue #14). Codex prints the
//! end of its turn (`turn.completed`) and then takes tens of milliseconds to
//! exit (its session files, its state databases); the patch (the work tree
//! staged, diffed, and its branch committed and bundled:
//! `results::patch_and_branch`) used to start only once it had, and the
//! job's own time held both one after the other. On an overlay workspace
//! the turn's end now starts the patch beside the engine's exit: first a
//! print of everything the job wrote (`workspace/upper_print.rs`: the upper
//! layer's entries and the content of its files), then the patch. When the
//! job concludes (the engine and what it left ended), a second print is
//! taken, and the early patch stands only if both prints are equal: nothing
//! the patch reads changed in between. Otherwise (an engine still writing
//! after its turn's end, a process it left, a print that could not be
//! taken or was still being taken when the job ended, an early patch that
//! failed) the patch is made again from the
//! final tree, as before, and the early one is dropped: it only wrote
//! Paddock's own objects, its index and the branch's bundle, which the
//! second overwrites. Nothing of it is published or recorded before that
//! decision. One early patch per job at most; a clone workspace (no upper
//! layer to print) has none. The gits it starts are Paddock's own children
//! (`own_children.rs`), which the end-of-job scan of the job's processes
//! spares, and are killed if the job ends without concluding.
//!
//! The second print is taken as soon as the job has ended, before the
//! early patch is waited for, and one that differs drops the early patch
//! at once (its gits killed), without waiting for it to end: a job alive
//! after its turn's end can make the early patch's git block (a FIFO
//! swapped in for a `.gitignore` or a file just as git opens it, which no
//! one opens for writing once the job is gone) and put the file back
//! before it exits; waited for, that git held the job's conclusion for
//! its whole time limit (`host_git::GIT_TIMEOUT`, ten minutes). Taken
//! then, the print still stands for the tree the patch read: once the job
//! has ended nothing writes its tree (the early patch only reads it, but
//! for giving a file the job closed its read bit back when Paddock is not
//! root, `workspace/reopen_tree.rs`: a change of its times the print
//! sees, so the early patch is then made again; a sealed one does not),
//! so a print equal at the
//! job's end is equal after the patch too.
//!
//! Sealed, on every rung. The job is still alive while the early patch
//! reads its tree, so it can swap a directory for a link between
//! Paddock's walk and a read of a file below it by path, or a FIFO in for
//! a file just as git opens it (and swap it back, within one tick of a
//! coarse clock, before the second print: on kernels before 6.13, whose
//! file systems stamp times with the coarse clock, the prints are then
//! equal, and a git blocked on that FIFO, which no one will open for
//! writing, was waited for up to its ten minutes). On the `sandbox` rung
//! a link could make Paddock's git read a host file the job cannot see
//! into its branch; on the `process` rung a FIFO could hold the job's
//! conclusion. So the early patch's workspace is sealed
//! (`Workspace::sealed`, `workspace/sealed_stage.rs`): no git has the
//! work tree, Paddock reads every file and link itself through
//! descriptors opened beneath the tree's root with no link followed and
//! without blocking, and gives git the bytes, and the ignore rules come
//! from a copy of the tree's ignore files in Paddock's own directory
//! (`workspace/ignore_shadow.rs`, with its attribute files). A tree the
//! sealed staging does not read (a file git would convert by its
//! attributes, more than 16 MiB to read, an entry that changed while
//! read, a file the job closed) fails it, and the
//! patch is made once the job has ended, by path, as before: the job is
//! gone then, and nothing swaps.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use paddock_protocol::JobSpec;

use crate::results::KeptOrNot;
use crate::workspace::upper_print::UpperPrint;
use crate::workspace::{Patch, Workspace, WorkspaceError};

/// What `results::patch_and_branch` made.
pub(super) type Made = Result<(Patch, KeptOrNot), WorkspaceError>;

/// The job's early patch, shared by what starts it (the engine's stream)
/// and what takes it (the job's conclusion), and the sandbox's
/// placeholders in the job's work tree, held until it is taken
/// ([`EarlyPatch::hold_placeholders`]).
#[derive(Debug, Clone, Default)]
pub(super) struct EarlyPatch {
    slot: Arc<Mutex<Slot>>,
    placeholders: Arc<Mutex<Option<paddock_sandbox::absent::Placeholders>>>,
}

#[derive(Debug, Default)]
enum Slot {
    /// Not started (yet).
    #[default]
    Idle,
    /// Started at the turn's end.
    Started(Started),
    /// Started and taken, or never to be started.
    Done,
}

/// An early patch under way, and its first print once taken.
#[derive(Debug)]
struct Started {
    task: tokio::task::JoinHandle<Option<Made>>,
    print: Arc<OnceLock<UpperPrint>>,
}

impl Drop for Started {
    /// A job that ends without concluding leaves no patch running (its
    /// gits are killed when their handles drop).
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What an early patch is made from.
pub(super) struct Inputs {
    pub ws: Workspace,
    pub spec: JobSpec,
    pub artifacts: PathBuf,
}

impl EarlyPatch {
    /// Starts the early patch from `inputs`, unless one was started already
    /// or taken.
    pub fn start(&self, inputs: Inputs) {
        let Ok(mut slot) = self.slot.lock() else {
            return;
        };
        if !matches!(*slot, Slot::Idle) {
            return;
        }
        let print = Arc::new(OnceLock::new());
        let printed = print.clone();
        let task = tokio::spawn(async move {
            let Inputs {
                ws,
                spec,
                artifacts,
            } = inputs;
            let to_print = ws.clone();
            // Before the patch reads anything: what it reads must be what
            // the print saw, or newer (then the prints differ).
            let first = tokio::task::spawn_blocking(move || to_print.upper_print())
                .await
                .ok()??;
            let _ = printed.set(first);
            Some(crate::results::patch_and_branch(&ws, &spec, &artifacts).await)
        });
        tracing::debug!("the patch is started at the turn's end");
        *slot = Slot::Started(Started { task, print });
    }

    /// The early patch, when one was started, made, and nothing it read
    /// changed since (a second print of `ws` equal to the first); `None`
    /// otherwise, and from then on none is started.
    pub async fn take(&self, ws: &Workspace) -> Option<Made> {
        // The placeholders go once the second print is taken (or none is).
        let _release = Release(self);
        let mut started = {
            let mut slot = self.slot.lock().ok()?;
            match std::mem::replace(&mut *slot, Slot::Done) {
                Slot::Started(started) => started,
                Slot::Idle | Slot::Done => return None,
            }
        };
        // A print still being taken when the job ends (a job that wrote a
        // great deal) is not waited for: a second one would cost as much,
        // on the job's path.
        if started.print.get().is_none() {
            tracing::debug!("no early patch: the job's writes were still being printed");
            stop(started).await;
            return None;
        }
        // The second print now, while the early patch may still be under
        // way (see the module's text: the job has ended, its tree no
        // longer changes).
        let (now, print) = (ws.clone(), started.print.clone());
        let unchanged = tokio::task::spawn_blocking(move || {
            print.get().is_some_and(|first| {
                now.upper_print_again(first)
                    .is_some_and(|again| again == *first)
            })
        })
        .await
        .unwrap_or(false);
        if !unchanged {
            tracing::debug!("the job wrote after its turn's end: the patch is made again");
            stop(started).await;
            return None;
        }
        match (&mut started.task).await {
            Ok(Some(Ok(made))) => {
                tracing::debug!("the patch made at the turn's end stands");
                Some(Ok(made))
            }
            // An early patch that failed is made again: what failed it may
            // have been the job still at work.
            Ok(Some(Err(e))) => {
                tracing::debug!("the early patch failed, made again: {e}");
                None
            }
            Ok(None) => {
                tracing::debug!("no early patch: the job's writes could not be printed");
                None
            }
            Err(e) => {
                tracing::debug!("no early patch: its task ended: {e}");
                None
            }
        }
    }
}

impl EarlyPatch {
    /// Holds the placeholders Paddock made in a sandboxed job's work tree
    /// before its runs (`paddock_sandbox::absent::Placeholders::make_in`),
    /// until the early patch is taken, then removes them. A run's helper
    /// removes the placeholders it made itself when it ends: the job's
    /// tree then changed after the first print (its entries and its
    /// directory's times), and no early patch on the `sandbox` rung ever
    /// stood. Made by Paddock, they are there for both prints. A job that
    /// ends without concluding has them removed when this is dropped.
    pub fn hold_placeholders(&self, placeholders: paddock_sandbox::absent::Placeholders) {
        if let Ok(mut held) = self.placeholders.lock() {
            *held = Some(placeholders);
        }
    }

    /// Removes the held placeholders now (the job moved off the `sandbox`
    /// rung before anything of it ran: its work tree is as it was).
    pub fn release_placeholders(&self) {
        drop(Release(self));
    }
}

/// Removes the held placeholders when dropped.
struct Release<'a>(&'a EarlyPatch);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        if let Ok(mut held) = self.0.placeholders.lock() {
            drop(held.take());
        }
    }
}

/// Stops an early patch and waits until it is stopped: its staging must
/// not run beside the one made next (both use `meta/patch.index`). Its
/// gits are killed with it (their handles dropped).
async fn stop(mut started: Started) {
    started.task.abort();
    let _ = (&mut started.task).await;
}
