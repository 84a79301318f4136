//! `paddock token create|list|revoke`: the bearer tokens of `paddock serve`
//! (docs/serve.md, "Authentication"). `create` prints the token once, on
//! stdout alone so that it can be captured; the store keeps only its salted
//! hash, so a lost token is revoked and replaced, never shown again.

use anyhow::Context as _;
use clap::Subcommand;
use comfy_table::{presets, Table};
use jiff::tz::TimeZone;
use paddock::api_token::{self, Scope, StoredToken};
use paddock::paths::Paths;
use paddock::store::Store;
use time::OffsetDateTime;

use super::{exit, local_time, open_store, open_store_or_empty, Failure};

#[derive(Subcommand)]
pub enum TokenCmd {
    /// Create a token and print it (once: only its salted hash is kept).
    Create {
        /// What the token may do: read, submit (and read) or admin (everything).
        #[arg(long, value_parser = parse_scope)]
        scope: Scope,
        /// A label for `paddock token list` (who or what uses the token).
        #[arg(long)]
        name: Option<String>,
    },
    /// List the tokens (ids, scopes, names, times; never the tokens).
    List,
    /// Revoke a token: requests bearing it are refused from now on.
    Revoke {
        /// The token's id (`paddock token list`).
        id: String,
    },
}

fn parse_scope(s: &str) -> Result<Scope, String> {
    s.parse()
        .map_err(|e: api_token::ParseScopeError| e.to_string())
}

pub async fn exec(cmd: TokenCmd, paths: &Paths) -> Result<u8, Failure> {
    // Only `create` creates the database: a missing one has no tokens
    // (`list` shows none, `revoke` finds none).
    let store = match &cmd {
        TokenCmd::Create { .. } => open_store(paths).await?,
        TokenCmd::List | TokenCmd::Revoke { .. } => open_store_or_empty(paths).await?,
    };
    let out = run_token(
        cmd,
        &*store,
        OffsetDateTime::now_utc(),
        &local_time::system(),
    )
    .await?;
    for line in out.stderr {
        errln!("{line}");
    }
    out!("{}", out.stdout);
    Ok(exit::DONE)
}

/// What a token subcommand prints.
struct Output {
    stdout: String,
    stderr: Vec<String>,
}

async fn run_token(
    cmd: TokenCmd,
    store: &dyn Store,
    now: OffsetDateTime,
    tz: &TimeZone,
) -> Result<Output, Failure> {
    match cmd {
        TokenCmd::Create { scope, name } => {
            // `--name ""` is no name.
            let name = name.filter(|n| !n.trim().is_empty());
            let issued = api_token::issue(scope, name, now);
            store
                .insert_api_token(&issued.stored)
                .await
                .context("save the new token")?;
            Ok(Output {
                stdout: format!("{}\n", issued.token.expose()),
                stderr: vec![format!(
                    "created token {} (scope {scope}); it is shown only this once",
                    issued.stored.id
                )],
            })
        }
        TokenCmd::List => {
            let tokens = store.api_tokens().await.context("list tokens")?;
            let stderr = if tokens.is_empty() {
                vec!["no tokens yet (`paddock token create --scope read` makes one)".to_owned()]
            } else {
                Vec::new()
            };
            Ok(Output {
                stdout: format!("{}\n", table(&tokens, tz)),
                stderr,
            })
        }
        TokenCmd::Revoke { id } => {
            let revoked = store
                .revoke_api_token(&id, now)
                .await
                .with_context(|| format!("revoke token {id}"))?;
            match revoked {
                Some(t) if t.revoked_at == Some(now) => Ok(Output {
                    stdout: format!("revoked token {id}\n"),
                    stderr: Vec::new(),
                }),
                Some(t) => Ok(Output {
                    stdout: format!(
                        "token {id} was already revoked at {}\n",
                        t.revoked_at
                            .map(|at| local_time::format(at, tz, "%Y-%m-%d %H:%M:%S"))
                            .unwrap_or_default()
                    ),
                    stderr: Vec::new(),
                }),
                None => Err(Failure::BadInput(anyhow::anyhow!(
                    "no token {id} (`paddock token list` shows them)"
                ))),
            }
        }
    }
}

/// The tokens as a table, times in `tz`.
fn table(tokens: &[StoredToken], tz: &TimeZone) -> String {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING)
        .set_header(vec!["ID", "SCOPE", "NAME", "CREATED", "REVOKED"]);
    let at = |when: OffsetDateTime| local_time::format(when, tz, "%Y-%m-%d %H:%M:%S");
    for token in tokens {
        t.add_row(vec![
            token.id.clone(),
            token.scope.to_string(),
            // Any text given to `--name`: shown safe for a terminal.
            token
                .name
                .as_deref()
                .map(|n| paddock::terminal_text::line(n).into_owned())
                .unwrap_or_default(),
            at(token.created_at),
            token.revoked_at.map(at).unwrap_or_default(),
        ]);
    }
    t.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock::store::SqliteStore;
    use time::macros::datetime;

    #[tokio::test]
    async fn create_list_and_revoke() {
        let store = SqliteStore::open_in_memory().await.unwrap();
        let t0 = datetime!(2026-12-01 02:30:00 UTC);
        let tz = TimeZone::UTC;
        let created = run_token(
            TokenCmd::Create {
                scope: Scope::Submit,
                name: Some("orchestrator".into()),
            },
            &store,
            t0,
            &tz,
        )
        .await
        .ok()
        .unwrap();
        let token = created.stdout.trim_end().to_owned();
        let (id, secret) = api_token::split(&token).unwrap();
        let stored = store.api_token(id).await.unwrap().unwrap();
        assert!(api_token::matches(&stored, secret));
        assert_eq!(
            created.stderr,
            vec![format!(
                "created token {id} (scope submit); it is shown only this once"
            )]
        );
        let revoke = |id: &str| TokenCmd::Revoke { id: id.into() };
        let t1 = datetime!(2026-12-01 03:00:00 UTC);
        let revoked = run_token(revoke(id), &store, t1, &tz).await.ok().unwrap();
        let again = run_token(revoke(id), &store, t1 + time::Duration::HOUR, &tz)
            .await
            .ok()
            .unwrap();
        assert_eq!(
            (revoked.stdout, again.stdout),
            (
                format!("revoked token {id}\n"),
                format!("token {id} was already revoked at 2026-12-01 03:00:00\n")
            )
        );
        let unknown = run_token(revoke("nope"), &store, t1, &tz).await;
        assert!(
            matches!(&unknown, Err(Failure::BadInput(e)) if e.to_string() == "no token nope (`paddock token list` shows them)")
        );
        let listed = run_token(TokenCmd::List, &store, t1, &tz)
            .await
            .ok()
            .unwrap()
            .stdout;
        assert!(!listed.contains(secret), "{listed}");
        let listed: Vec<Vec<String>> = listed
            .lines()
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect();
        assert_eq!(
            listed,
            vec![
                vec!["ID", "SCOPE", "NAME", "CREATED", "REVOKED"],
                vec![
                    id,
                    "submit",
                    "orchestrator",
                    "2026-12-01",
                    "02:30:00",
                    "2026-12-01",
                    "03:00:00"
                ],
            ]
            .into_iter()
            .map(|r| r.into_iter().map(String::from).collect::<Vec<_>>())
            .collect::<Vec<_>>()
        );
    }

    /// A name is shown safe for a terminal (`--name` is any text); an
    /// empty one is no name.
    #[tokio::test]
    async fn names_are_listed_escaped_and_an_empty_one_is_none() {
        let store = SqliteStore::open_in_memory().await.unwrap();
        let t0 = datetime!(2026-12-01 02:30:00 UTC);
        let tz = TimeZone::UTC;
        // A second apart: listed oldest first.
        for (i, name) in [(0, "a\u{1b}[31mred"), (1, " ")] {
            let create = TokenCmd::Create {
                scope: Scope::Read,
                name: Some(name.into()),
            };
            let at = t0 + time::Duration::seconds(i);
            run_token(create, &store, at, &tz).await.ok().unwrap();
        }
        let names: Vec<Option<String>> = store
            .api_tokens()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        let listed = run_token(TokenCmd::List, &store, t0, &tz)
            .await
            .ok()
            .unwrap()
            .stdout;
        let shown: Vec<String> = listed
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().nth(2).unwrap_or_default().to_owned())
            .collect();
        assert_eq!(
            (names, shown),
            (
                vec![Some("a\u{1b}[31mred".to_owned()), None],
                vec!["a\\u{1b}[31mred".to_owned(), "2026-12-01".to_owned()]
            ),
            "{listed}"
        );
    }
}
