//! The record of a GitHub App installation token minted for a job
//! (`github_app.rs`), so that a `kill -9` between the mint and the
//! revocation does not leave the token alive until GitHub expires it. GitHub
//! revokes an installation token only when the token itself asks (`DELETE
//! /installation/token`; there is no revocation by id with the App's key),
//! so the record must hold the token's value: it is the host's secret, kept
//! as the App's key is. It is written the moment the mint is answered, as
//! `.github-token-<random>.json` in the job's artifacts directory (Paddock's
//! data directory, which no job's sandbox shows; the job has ended before
//! any publish begins), created new with mode 0600 and no link followed,
//! and removed as soon as the token is revoked (or GitHub says it is dead
//! already: `401 Bad credentials`). A record names its job (the artifacts
//! directory's name): one naming another job is left alone, so a record
//! copied from another job's directory never revokes that job's token. The reaper (`paddock gc`, the start of
//! `paddock run` and `paddock serve`) and the next `paddock publish` of the
//! job revoke what a record left behind holds ([`revoke_leftovers`]), at
//! the API root and repository of the job's stored spec, never the
//! record's. The intent written before the mint is asked for carries
//! the time it is asked, so a leftover intent ([`orphan`]) says until when
//! a token GitHub made then may live (an hour after), or that it has
//! expired.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::forge::ForgeError;
use super::github::GitHub;
use super::token_record;
use crate::secret::Secret;

const FORGE: &str = "github";

/// How a record's file name starts, in the job's artifacts.
const RECORD_PREFIX: &str = ".github-token-";

/// What an intent a kill left unfilled means (one without the time the
/// mint was asked, written by an older Paddock).
pub const ORPHAN: &str = "a publish (or review read) was killed after asking GitHub for an \
                          installation token and before recording the answer; if GitHub made the token, Paddock cannot \
                          revoke it (GitHub lists no installation tokens): it expires within the hour";

/// How long GitHub lets an installation token live.
const TOKEN_LIFE: time::Duration = time::Duration::hours(1);

/// What an intent a kill left unfilled means, asked for at `asked` and
/// read at `now`: the time any token it made expires by, or that it has
/// expired already.
pub fn orphan(asked: Option<time::OffsetDateTime>, now: time::OffsetDateTime) -> String {
    let Some(asked) = asked else {
        return ORPHAN.to_string();
    };
    let stamp = crate::time_text::rfc3339;
    let expires = asked + TOKEN_LIFE;
    let fate = match now < expires {
        true => format!(
            "if GitHub made the token, Paddock cannot revoke it (GitHub lists no installation \
             tokens): it expires by {}",
            stamp(expires)
        ),
        false => "any token GitHub made then has expired (GitHub's last an hour)".to_string(),
    };
    format!(
        "a publish (or review read) was killed after asking GitHub for an installation token at \
         {} and before recording the answer; {fate}",
        stamp(asked)
    )
}

/// The longest token a record may hold.
const MAX_TOKEN: usize = 512;

/// A record as it is on disk.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OnDisk {
    job: String,
    /// `None` in the intent written before the mint is asked for.
    token: Option<String>,
    /// The intent's: when the mint was asked for (RFC 3339), so that a
    /// kill's leftover says until when a token it made may live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    asked_at: Option<String>,
}

/// What a record holds: a token, or an intent never filled in (and when
/// its mint was asked for).
enum Held {
    Token(Secret),
    Intent(Option<time::OffsetDateTime>),
}

/// A token's record, written: what removes it.
#[derive(Debug)]
pub struct Recorded {
    pub path: PathBuf,
}

/// The job a record in `artifacts` belongs to: the directory's name.
fn job_of(artifacts: &Path) -> String {
    artifacts
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A record written before the mint is asked for (`{"job": …, "token":
/// null}`), so that a kill between GitHub's answer and the token's record
/// leaves a trace the reaper names: [`Intent::record`] fills it in once the
/// answer is there, [`Intent::abandon`] removes it when GitHub answered
/// with an error (no token was made).
#[derive(Debug)]
pub struct Intent {
    file: std::fs::File,
    path: PathBuf,
    /// The length of what is written now: the record written over it is
    /// at least as long, so no byte of the intent is left behind.
    written: usize,
}

/// Writes the intent of a record into `artifacts` (the job's artifacts
/// directory): created new, 0600, never through a link.
pub fn intend(artifacts: &Path) -> Result<Intent, ForgeError> {
    let nonce = hex::encode(rand::random::<[u8; 8]>());
    let path = artifacts.join(format!("{RECORD_PREFIX}{nonce}.json"));
    let failed = |step, source| ForgeError::TokenRecord {
        forge: FORGE,
        path: path.clone(),
        step,
        source,
    };
    std::fs::create_dir_all(artifacts).map_err(|e| failed("make its directory", e))?;
    let text = serde_json::to_string(&OnDisk {
        job: job_of(artifacts),
        token: None,
        asked_at: time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .ok(),
    })
    .unwrap_or_default();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&path)
        .map_err(|e| failed("create it", e))?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = std::fs::remove_file(&path);
        return Err(failed("write it", e));
    }
    Ok(Intent {
        file,
        path,
        written: text.len(),
    })
}

impl Intent {
    /// Records `token` in place of the intent: one write at the start of
    /// the file (a kill lands before or after it, never inside), padded
    /// with spaces to at least the intent's length, then synced.
    pub fn record(self, token: &Secret) -> Result<Recorded, ForgeError> {
        use std::os::unix::fs::FileExt as _;
        let failed = |source| ForgeError::TokenRecord {
            forge: FORGE,
            path: self.path.clone(),
            step: "write it",
            source,
        };
        let mut text = serde_json::to_string(&OnDisk {
            job: job_of(self.path.parent().unwrap_or(Path::new(""))),
            token: Some(token.expose().to_string()),
            asked_at: None,
        })
        .unwrap_or_default();
        while text.len() < self.written {
            text.push(' ');
        }
        self.file
            .write_all_at(text.as_bytes(), 0)
            .and_then(|()| self.file.sync_all())
            .map_err(failed)?;
        Ok(Recorded { path: self.path })
    }

    /// Removes the intent: GitHub answered, and made no token.
    pub fn abandon(self) {
        let _ = remove(&self.path);
    }
}

/// Removes a record (gone already is fine).
pub fn remove(path: &Path) -> Result<(), ForgeError> {
    token_record::remove(path, FORGE)
}

/// The records in `artifacts` (regular files only; a link is never
/// followed).
pub fn leftover_records(artifacts: &Path) -> Vec<PathBuf> {
    token_record::list(artifacts, RECORD_PREFIX)
}

/// Reads a record of the job `job` as [`token_record::read_text`] does:
/// its token, or `None` for an intent never filled in. A record that does
/// not parse is named, never quoted (it may hold the token), and one
/// naming another job is refused (left alone).
fn read(path: &Path, job: &str) -> Result<Held, String> {
    let text = token_record::read_text(path)?;
    let not_one = || format!("read {}: not a token record", path.display());
    let on_disk: OnDisk = serde_json::from_str(&text).map_err(|_| not_one())?;
    // A token is sent as a header: printable ASCII, no space, not huge
    // (GitHub's are `ghs_` and a few dozen characters).
    let plausible =
        |t: &String| (1..=MAX_TOKEN).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_graphic());
    if !on_disk.token.as_ref().is_none_or(plausible) {
        return Err(not_one());
    }
    if on_disk.job != job {
        return Err(format!(
            "read {}: the record is not this job's ({job}); left alone",
            path.display()
        ));
    }
    Ok(match on_disk.token {
        Some(token) => Held::Token(Secret::new(token)),
        None => Held::Intent(on_disk.asked_at.as_deref().and_then(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        })),
    })
}

/// The name a record is reported by (its file name: never the token).
fn label(path: &Path) -> String {
    path.file_name()
        .map(|n| format!("github installation token {}", n.to_string_lossy()))
        .unwrap_or_default()
}

/// Revokes the token `client` uses; one GitHub no longer knows (revoked
/// or expired already: `401`) counts as revoked.
pub async fn revoke_dead_or_alive(client: &GitHub) -> Result<(), ForgeError> {
    match super::github_app::revoke(client).await {
        Ok(()) | Err(ForgeError::Status { status: 401, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Revokes the token of every record in `artifacts` (a killed publish's),
/// at the spec's `api` for `owner/repo`, and removes the records revoked:
/// what was revoked (by record) and what failed (the record stays for a
/// later pass).
pub async fn revoke_leftovers(
    api: &str,
    owner: &str,
    repo: &str,
    artifacts: &Path,
) -> token_record::Pass {
    let mut pass = token_record::Pass::default();
    let job = job_of(artifacts);
    for path in leftover_records(artifacts) {
        let done = async {
            let token = match read(&path, &job)? {
                Held::Token(token) => token,
                Held::Intent(asked) => {
                    // Reported once, then gone: nothing more can be done.
                    remove(&path).map_err(|e| e.to_string())?;
                    return Err(format!(
                        "{}: {}",
                        label(&path),
                        orphan(asked, time::OffsetDateTime::now_utc())
                    ));
                }
            };
            let client = GitHub::new(api, owner, repo, token)
                .map_err(|e| e.to_string())?
                .without_waiting();
            revoke_dead_or_alive(&client)
                .await
                .map_err(|e| format!("revoke {}: {e}", label(&path)))?;
            remove(&path).map_err(|e| e.to_string())
        }
        .await;
        match done {
            Ok(()) => pass.revoked.push(label(&path)),
            Err(e) => pass.errors.push(e),
        }
    }
    pass
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    /// A record holds the token, readable by its owner only; it is read
    /// back, and a link or a directory in a record's name is never one.
    #[test]
    fn a_record_is_private_and_never_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let recorded = intend(dir.path())
            .unwrap()
            .record(&Secret::new("ghs_abc".into()))
            .unwrap();
        let outside = dir.path().join("outside.json");
        std::fs::write(&outside, r#"{"token":"ghs_other"}"#).unwrap();
        let link = dir.path().join(".github-token-link.json");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        std::fs::create_dir(dir.path().join(".github-token-dir.json")).unwrap();
        assert_eq!(
            (
                leftover_records(dir.path()),
                std::fs::metadata(&recorded.path)
                    .unwrap()
                    .permissions()
                    .mode()
                    & 0o777,
                read(&recorded.path, &job_of(dir.path())).map(|held| match held {
                    Held::Token(s) => Some(s.expose().to_string()),
                    Held::Intent(_) => None,
                }),
                read(&link, &job_of(dir.path())).is_err(),
            ),
            (
                vec![recorded.path.clone()],
                0o600,
                Ok(Some("ghs_abc".to_string())),
                true
            )
        );
        remove(&recorded.path).unwrap();
        assert_eq!(leftover_records(dir.path()), Vec::<PathBuf>::new());
        let fifo = dir.path().join(".github-token-fifo.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(
            read(&fifo, &job_of(dir.path())).map(|_| ()),
            Err(format!("read {}: not a regular file", fifo.display()))
        );
    }

    /// An intent a kill left unfilled is named once as a token that may be
    /// alive and cannot be revoked, and removed; no request is made (the
    /// API root here is nowhere). An abandoned intent leaves nothing; a
    /// filled one is the token's record with no byte of the intent left.
    #[tokio::test]
    async fn an_intent_left_by_a_kill_is_named_once() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("job-1");
        let left = intend(&dir).unwrap();
        let path = left.path.clone();
        drop(left);
        intend(&dir).unwrap().abandon();
        let on_disk: OnDisk =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let asked = time::OffsetDateTime::parse(
            on_disk.asked_at.as_deref().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
        let pass = revoke_leftovers("http://127.0.0.1:9", "acme", "widgets", &dir).await;
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            (pass.revoked, pass.errors, leftover_records(&dir)),
            (
                Vec::<String>::new(),
                vec![format!(
                    "github installation token {name}: {}",
                    orphan(Some(asked), asked)
                )],
                Vec::<PathBuf>::new()
            )
        );
        let filled = intend(&dir)
            .unwrap()
            .record(&Secret::new("t".into()))
            .unwrap();
        let written = std::fs::read_to_string(&filled.path).unwrap();
        assert_eq!(
            (
                written.trim_end(),
                written.trim_end_matches(' ').len() < written.len()
            ),
            (r#"{"job":"job-1","token":"t"}"#, true)
        );
    }

    /// An intent's leftover says until when a token its mint made may
    /// live (an hour after the mint was asked), or that it has expired;
    /// an intent without the time (an older Paddock's) says "within the
    /// hour".
    #[test]
    fn an_orphans_text_says_when_its_token_expires() {
        let asked = time::macros::datetime!(2026-12-03 01:00:00 UTC);
        let killed = "a publish (or review read) was killed after asking GitHub for an \
                      installation token at 2026-12-03T01:00:00Z and before recording the \
                      answer; ";
        assert_eq!(
            [
                orphan(Some(asked), asked + time::Duration::minutes(59)),
                orphan(Some(asked), asked + time::Duration::hours(1)),
                orphan(None, asked),
            ],
            [
                format!(
                    "{killed}if GitHub made the token, Paddock cannot revoke it (GitHub lists no \
                     installation tokens): it expires by 2026-12-03T02:00:00Z"
                ),
                format!("{killed}any token GitHub made then has expired (GitHub's last an hour)"),
                ORPHAN.to_string(),
            ]
        );
    }
}
