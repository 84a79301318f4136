//! Where the store is: a SQLite file (a path, the default) or a PostgreSQL
//! database (`--db postgres://user[:password]@host[:port]/database`, or
//! `PADDOCK_DB`). A URL's password is a secret: [`PgUrl`] keeps the URL as
//! a [`Secret`] and shows only its label (`postgres://user@host:port/db`,
//! never the password) in Debug, Display and errors. A URL without a
//! password takes `PGPASSWORD`, which `paddock` withdraws from its own
//! environment before any thread starts ([`withdraw_env`]), as it does
//! `PADDOCK_DB` when that names a PostgreSQL URL: no child inherits either.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use paddock_protocol::KeyRef;
use sqlx::postgres::PgConnectOptions;

use super::StoreError;
use crate::secret::{Secret, SecretKind};

/// The variable libpq (and sqlx) read a PostgreSQL password from.
pub const PGPASSWORD: &str = "PGPASSWORD";

/// The variable that names the store (`--db`).
pub const PADDOCK_DB: &str = "PADDOCK_DB";

/// The store one `paddock` process uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreAt {
    /// A SQLite database file.
    File(PathBuf),
    /// A PostgreSQL database.
    Postgres(PgUrl),
}

impl StoreAt {
    /// The SQLite file, when the store is one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            StoreAt::File(p) => Some(p),
            StoreAt::Postgres(_) => None,
        }
    }
}

impl fmt::Display for StoreAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreAt::File(p) => write!(f, "{}", p.display()),
            StoreAt::Postgres(url) => write!(f, "{url}"),
        }
    }
}

/// Whether `text` is a PostgreSQL URL rather than a path.
pub fn is_postgres_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// A PostgreSQL URL whose password (if any) is never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct PgUrl {
    url: Secret,
    label: String,
}

impl PgUrl {
    /// Parses `text` (`postgres://…` or `postgresql://…`). A malformed URL
    /// is refused without repeating it (it may hold a password).
    pub fn parse(text: &str) -> Result<PgUrl, StoreError> {
        let options = PgConnectOptions::from_str(text).map_err(url_error)?;
        Ok(PgUrl {
            label: label(&options),
            url: Secret::new(text.to_owned()),
        })
    }

    /// `postgres://user@host:port/database` (a socket directory as
    /// `?host=DIR`): what messages name.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The connection options, with the withdrawn `PGPASSWORD` when the
    /// URL has no password.
    pub(crate) fn options(&self) -> Result<PgConnectOptions, StoreError> {
        let options = PgConnectOptions::from_str(self.url.expose()).map_err(url_error)?;
        if url_has_password(self.url.expose()) {
            return Ok(options);
        }
        match Secret::resolve(
            SecretKind::StorePassword,
            &KeyRef::Env(PGPASSWORD.to_owned()),
        ) {
            Ok(password) => Ok(options.password(password.expose())),
            Err(_) => Ok(options),
        }
    }
}

/// sqlx's refusal of a URL, without its "error with configuration" prefix.
fn url_error(e: sqlx::Error) -> StoreError {
    StoreError::PgUrl {
        message: match e {
            sqlx::Error::Configuration(inner) => inner.to_string(),
            other => other.to_string(),
        },
    }
}

/// Whether the URL's authority holds `user:password@`.
fn url_has_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
        || rest
            .split_once('?')
            .is_some_and(|(_, query)| query.split('&').any(|p| p.starts_with("password=")))
}

fn label(options: &PgConnectOptions) -> String {
    let database = options.get_database().unwrap_or(options.get_username());
    match options.get_socket() {
        Some(dir) => format!(
            "postgres://{}@localhost:{}/{database}?host={}",
            options.get_username(),
            options.get_port(),
            dir.display()
        ),
        None => format!(
            "postgres://{}@{}:{}/{database}",
            options.get_username(),
            options.get_host(),
            options.get_port()
        ),
    }
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgUrl({})", self.label)
    }
}

impl fmt::Display for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label)
    }
}

/// Takes the store's PostgreSQL password out of this process's
/// environment before any thread starts: `PGPASSWORD` into the secret
/// vault (where [`PgUrl::options`] finds it), and `PADDOCK_DB` when it is
/// a PostgreSQL URL (the command line has read it already).
pub fn withdraw_env() {
    crate::secret::withdraw_env(PGPASSWORD);
    if std::env::var(PADDOCK_DB).is_ok_and(|v| is_postgres_url(&v)) {
        std::env::remove_var(PADDOCK_DB);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_never_shown() {
        let url = PgUrl::parse("postgres://ann:s3cr3t-pw@db.example:6543/paddock").unwrap();
        assert_eq!(url.label(), "postgres://ann@db.example:6543/paddock");
        assert_eq!(format!("{url}"), "postgres://ann@db.example:6543/paddock");
        assert_eq!(
            format!("{url:?}"),
            "PgUrl(postgres://ann@db.example:6543/paddock)"
        );
        let at = StoreAt::Postgres(url);
        assert!(!format!("{at:?} {at}").contains("s3cr3t"));
        let socket = PgUrl::parse("postgresql://bob@localhost/jobs?host=/run/pg").unwrap();
        assert_eq!(
            socket.label(),
            "postgres://bob@localhost:5432/jobs?host=/run/pg"
        );
    }

    #[test]
    fn a_malformed_url_is_refused_without_repeating_it() {
        let err = PgUrl::parse("postgres://ann:s3cr3t-pw@db.example:notaport/x").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("the store URL is not a valid PostgreSQL URL"),
            "{text}"
        );
        assert!(!text.contains("s3cr3t"), "{text}");
    }

    #[test]
    fn passwords_in_urls_are_found() {
        assert!(url_has_password("postgres://a:b@h/d"));
        assert!(!url_has_password("postgres://a@h/d"));
        assert!(!url_has_password("postgres://h/d?user=a"));
        assert!(!url_has_password("postgres://h/d?x=a:b@c"));
    }
}
