//! API bearer tokens of `paddock serve`: what one is, how it is issued and
//! how a presented one is checked. A token reads
//! `pdk-api-<id>-<secret>`: the 12 hex digits of `id` name its row in the
//! store (so checking a token is one lookup, not a scan), the 64 hex digits
//! of `secret` are 256 random bits. The store keeps only a random 16-byte
//! salt and SHA-256(salt ‖ secret), never the token: a slow password hash
//! (argon2) exists to make guessing low-entropy passwords expensive, and a
//! 256-bit random secret cannot be guessed at any hashing speed, so a fast
//! salted hash loses nothing and keeps every request cheap. The salt makes
//! equal secrets (there are none in practice) hash differently and rules
//! out precomputed tables. Digests are compared in constant time
//! (`subtle`). A token's value is a [`Secret`]: redacted in Debug and
//! Display, and its shape is one of the redactor's rules
//! (`paddock-api-token`), so it never reaches a log.
//!
//! Scopes nest: `admin` ⊇ `submit` ⊇ `read`. Whoever may submit jobs must
//! be able to watch the jobs they submitted (an orchestrator submits, then
//! follows events), and an operator who may revoke tokens may do
//! everything; no route needs a token that can write but not read.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use time::OffsetDateTime;

use crate::secret::Secret;

/// What every token starts with (the redactor's rule matches it).
pub const PREFIX: &str = "pdk-api-";

/// Hex digits of a token's public id.
const ID_HEX: usize = 12;
/// Random bytes of a token's secret part.
const SECRET_BYTES: usize = 32;
/// Random bytes of a token's salt.
const SALT_BYTES: usize = 16;

/// What a token may do; a larger scope includes the smaller ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Read jobs, events, usage and the ledger.
    Read,
    /// Read, and submit or cancel jobs.
    Submit,
    /// Everything, including the server's administration.
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Read, Scope::Submit, Scope::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Submit => "submit",
            Scope::Admin => "admin",
        }
    }

    /// Whether a token of this scope may do what `needed` allows.
    pub fn allows(self, needed: Scope) -> bool {
        self >= needed
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown token scope `{given}` (expected read, submit or admin)")]
pub struct ParseScopeError {
    pub given: String,
}

impl FromStr for Scope {
    type Err = ParseScopeError;

    fn from_str(s: &str) -> Result<Scope, ParseScopeError> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| ParseScopeError { given: s.into() })
    }
}

/// A token as the store keeps it: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredToken {
    /// The public id (`paddock token list`, `paddock token revoke ID`).
    pub id: String,
    /// The operator's label, if given.
    pub name: Option<String>,
    pub scope: Scope,
    /// Hex of the random salt.
    pub salt: String,
    /// Hex of SHA-256(salt ‖ secret).
    pub hash: String,
    pub created_at: OffsetDateTime,
    pub revoked_at: Option<OffsetDateTime>,
}

/// A freshly issued token: the value, shown once, and what is stored.
#[derive(Debug)]
pub struct Issued {
    pub token: Secret,
    pub stored: StoredToken,
}

/// A new token of `scope`, created `now`.
pub fn issue(scope: Scope, name: Option<String>, now: OffsetDateTime) -> Issued {
    let id_bytes: [u8; ID_HEX / 2] = rand::random();
    let secret: [u8; SECRET_BYTES] = rand::random();
    let salt: [u8; SALT_BYTES] = rand::random();
    let id = hex::encode(id_bytes);
    let secret = hex::encode(secret);
    let token = Secret::new(format!("{PREFIX}{id}-{secret}"));
    Issued {
        token,
        stored: StoredToken {
            id,
            name,
            scope,
            salt: hex::encode(salt),
            hash: hex::encode(digest(&salt, secret.as_bytes())),
            created_at: now,
            revoked_at: None,
        },
    }
}

fn digest(salt: &[u8], secret: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(salt);
    h.update(secret);
    h.finalize().into()
}

/// A presented token split into its id and secret part, or `None` when it
/// does not have a token's shape.
pub fn split(presented: &str) -> Option<(&str, &str)> {
    let rest = presented.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('-')?;
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(id, ID_HEX) && hex(secret, SECRET_BYTES * 2)).then_some((id, secret))
}

/// Whether `secret` (a presented token's secret part) is the one `stored`
/// was issued with, comparing the digests in constant time. A stored row
/// whose salt or hash is not hex (a hand-edited store) matches nothing.
pub fn matches(stored: &StoredToken, secret: &str) -> bool {
    #[cfg(test)]
    COMPARED.with(|n| n.set(n.get() + 1));
    let (Ok(salt), Ok(hash)) = (hex::decode(&stored.salt), hex::decode(&stored.hash)) else {
        return false;
    };
    digest(&salt, secret.as_bytes()).ct_eq(&hash).into()
}

#[cfg(test)]
thread_local! {
    /// How many times this thread ran [`matches`].
    static COMPARED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A row of an issued token whose secret was thrown away: what a presented
/// secret is compared against when the store has no row of its id. Its
/// salt and hash have an issued token's lengths, so the work is the same.
static DECOY: std::sync::LazyLock<StoredToken> =
    std::sync::LazyLock::new(|| issue(Scope::Read, None, OffsetDateTime::UNIX_EPOCH).stored);

/// The row `stored` (the store's row of the presented id, if it has one)
/// when `secret` is its token's secret. Whether the id is known or not,
/// the same decoding, digest and constant-time compare run (against
/// [`DECOY`] for an unknown id), and both outcomes are combined without a
/// branch before the answer: the time taken does not tell whether the id
/// exists (docs/serve.md#tokens).
pub fn verify<'a>(stored: Option<&'a StoredToken>, secret: &str) -> Option<&'a StoredToken> {
    let candidate = stored.unwrap_or(&DECOY);
    let same = subtle::Choice::from(u8::from(matches(candidate, secret)))
        & subtle::Choice::from(u8::from(stored.is_some()));
    if bool::from(same) {
        stored
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-12-01 02:30:00 UTC);

    #[test]
    fn an_issued_token_matches_its_row_and_the_row_never_holds_it() {
        let issued = issue(Scope::Submit, Some("ci".into()), NOW);
        let value = issued.token.expose().to_string();
        let (id, secret) = split(&value).unwrap();
        assert_eq!(id, issued.stored.id);
        assert!(matches(&issued.stored, secret));
        let row = format!("{:?}", issued.stored);
        assert!(!row.contains(secret), "{row}");
        assert_ne!(issued.stored.hash, secret);
        assert_ne!(issued.stored.hash, hex::encode(Sha256::digest(secret)));
    }

    #[test]
    fn another_secret_or_a_changed_salt_does_not_match() {
        let issued = issue(Scope::Read, None, NOW);
        let other = issue(Scope::Read, None, NOW);
        let value = other.token.expose().to_string();
        let (_, other_secret) = split(&value).unwrap();
        assert!(!matches(&issued.stored, other_secret));
        let own = issued.token.expose().to_string();
        let (_, secret) = split(&own).unwrap();
        let mut resalted = issued.stored.clone();
        resalted.salt = other.stored.salt.clone();
        assert!(!matches(&resalted, secret));
        let mut garbled = issued.stored.clone();
        garbled.hash = "not hex".into();
        assert!(!matches(&garbled, secret));
    }

    #[test]
    fn a_known_and_an_unknown_id_run_the_same_compare() {
        let issued = issue(Scope::Read, None, NOW);
        let own = issued.token.expose().to_string();
        let (_, secret) = split(&own).unwrap();
        let other = issue(Scope::Read, None, NOW);
        let (_, wrong) = split(other.token.expose()).unwrap();
        let compares = |stored: Option<&StoredToken>, secret: &str| {
            let before = COMPARED.with(|n| n.get());
            let found = verify(stored, secret).map(|s| s.id.clone());
            (found, COMPARED.with(|n| n.get()) - before)
        };
        assert_eq!(
            [
                compares(Some(&issued.stored), secret),
                compares(Some(&issued.stored), wrong),
                compares(None, secret),
                compares(None, wrong),
            ],
            [
                (Some(issued.stored.id.clone()), 1),
                (None, 1),
                (None, 1),
                (None, 1)
            ]
        );
        // The decoy has an issued row's shape (the same work to decode and
        // hash) and its secret is gone: no presented secret matches it.
        assert_eq!(
            (DECOY.salt.len(), DECOY.hash.len()),
            (issued.stored.salt.len(), issued.stored.hash.len())
        );
    }

    #[test]
    fn two_tokens_differ_in_id_secret_and_salt() {
        let a = issue(Scope::Admin, None, NOW);
        let b = issue(Scope::Admin, None, NOW);
        assert_ne!(a.token.expose(), b.token.expose());
        assert_ne!(a.stored.id, b.stored.id);
        assert_ne!(a.stored.salt, b.stored.salt);
    }

    #[test]
    fn only_the_token_shape_splits() {
        let id = "0123456789ab";
        let secret = "f".repeat(64);
        assert_eq!(
            split(&format!("pdk-api-{id}-{secret}")),
            Some((id, secret.as_str()))
        );
        for bad in [
            String::new(),
            format!("pdk-job-{id}-{secret}"),
            format!("pdk-api-{id}{secret}"),
            format!("pdk-api-{id}-{}", &secret[1..]),
            format!("pdk-api-0123456789a-{secret}"),
            format!("pdk-api-{id}-{}g", &secret[1..]),
            format!("pdk-api-{id}-{secret}-"),
        ] {
            assert_eq!(split(&bad), None, "{bad}");
        }
    }

    #[test]
    fn scopes_nest_admin_submit_read() {
        let allowed: Vec<(Scope, Scope)> = Scope::ALL
            .into_iter()
            .flat_map(|have| Scope::ALL.into_iter().map(move |need| (have, need)))
            .filter(|(have, need)| have.allows(*need))
            .collect();
        assert_eq!(
            allowed,
            vec![
                (Scope::Read, Scope::Read),
                (Scope::Submit, Scope::Read),
                (Scope::Submit, Scope::Submit),
                (Scope::Admin, Scope::Read),
                (Scope::Admin, Scope::Submit),
                (Scope::Admin, Scope::Admin),
            ]
        );
        assert_eq!("submit".parse::<Scope>(), Ok(Scope::Submit));
        assert_eq!(
            "root".parse::<Scope>().unwrap_err().to_string(),
            "unknown token scope `root` (expected read, submit or admin)"
        );
    }

    #[test]
    fn the_token_is_redacted_in_debug_display_and_logs() {
        let issued = issue(Scope::Admin, None, NOW);
        let value = issued.token.expose().to_string();
        assert!(!format!("{issued:?}").contains(&value));
        assert_eq!(issued.token.to_string(), "[REDACTED]");
        let line = format!("authorization: {value} failed");
        assert_eq!(
            crate::redact::Redactor::new().text(&line),
            "authorization: [REDACTED] failed"
        );
    }
}
