//! The `events` table on SQLite (`sql/events.rs` reads it): an append is
//! one statement that inserts only the job's next seq, so no other writer
//! slips in between the check and the insert. An append refused because
//! its seq holds the very same event (a retry whose first commit landed)
//! counts as stored.

use paddock_protocol::event::AgentEvent;

use super::codec::RowRef;
use super::{is_foreign_key_violation, SqliteStore, StoreError};
use crate::store::sql::events::{refused, Stored, APPEND, AT_SEQ};

impl SqliteStore {
    /// Appends `event` to its job's stream. Its `seq` must be the job's last
    /// stored seq + 1 (1 for the first event): anything else fails with
    /// `EventSeq`, naming the job, the seq given and the last one stored. A
    /// job the store does not have fails with `NoSuchJob`.
    pub(super) async fn append_event(&self, event: &AgentEvent) -> Result<(), StoreError> {
        let row = RowRef::new(
            "events",
            format!("event {} of job {}", event.seq, event.job_id),
        );
        let append_error = |source| StoreError::AppendEvent {
            job_id: event.job_id.clone(),
            seq: event.seq,
            source,
        };
        let seq = row.int("seq", event.seq)?;
        let given = Stored {
            kind: event.body.kind().to_owned(),
            at: row.time("at", event.at)?,
            body: row.json("body", &event.body)?,
        };
        let done = sqlx::query(APPEND)
            .bind(event.job_id.as_str())
            .bind(seq)
            .bind(given.at.as_str())
            .bind(given.kind.as_str())
            .bind(given.body.as_str())
            .execute(&self.pool)
            .await
            .map_err(|source| {
                if is_foreign_key_violation(&source) {
                    StoreError::NoSuchJob {
                        job_id: event.job_id.clone(),
                    }
                } else {
                    append_error(source)
                }
            })?;
        if done.rows_affected() == 1 {
            return Ok(());
        }

        // Refused by the density check: stored already (a retry), or say why.
        let (job_exists, last): (bool, Option<i64>) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1), \
                    (SELECT MAX(seq) FROM events WHERE job_id = $1)",
        )
        .bind(event.job_id.as_str())
        .fetch_one(&self.pool)
        .await
        .map_err(append_error)?;
        if !job_exists {
            return Err(StoreError::NoSuchJob {
                job_id: event.job_id.clone(),
            });
        }
        let stored = sqlx::query_as::<_, Stored>(AT_SEQ)
            .bind(event.job_id.as_str())
            .bind(seq)
            .fetch_optional(&self.pool)
            .await
            .map_err(append_error)?;
        let last = row.narrow("seq", last.unwrap_or(0))?;
        refused(&event.job_id, event.seq, last, &given, stored)
    }
}

crate::store::sql::events::events_queries!(SqliteStore);

#[cfg(test)]
mod tests {
    use paddock_protocol::event::EventBody;
    use paddock_protocol::event::{ChangeKind, Phase, TokenUsage};
    use serde_json::json;

    use super::*;
    use crate::store::fixtures::{event, job};

    /// One of every `EventBody` variant, with optional fields both set and
    /// unset where the variant has them.
    fn every_body() -> Vec<EventBody> {
        let mut bodies = vec![
            EventBody::Status {
                phase: Phase::SessionStarted,
                detail: None,
            },
            EventBody::Status {
                phase: Phase::TimedOut,
                detail: Some("wall clock 30m".to_owned()),
            },
            EventBody::Text {
                text: "Done.\nAll tests pass — ✓".to_owned(),
            },
            EventBody::Thought {
                text: "Let me look at the failing test first.".to_owned(),
            },
            EventBody::ToolCall {
                call_id: Some("call_1".to_owned()),
                tool: "shell".to_owned(),
                command: Some("cargo test -p x".to_owned()),
                input: json!({"argv": ["cargo", "test"], "timeout": 120, "nested": {"k": [1.5, null, true]}}),
            },
            EventBody::ToolCall {
                call_id: None,
                tool: "apply_patch".to_owned(),
                command: None,
                input: serde_json::Value::Null,
            },
            EventBody::ToolResult {
                call_id: Some("call_1".to_owned()),
                exit_code: Some(101),
                is_error: true,
                output: "test failed\n".to_owned(),
            },
            EventBody::ToolResult {
                call_id: None,
                exit_code: None,
                is_error: false,
                output: String::new(),
            },
            EventBody::Usage {
                tokens: TokenUsage {
                    input_tokens: 10,
                    cached_input_tokens: 20,
                    cache_write_tokens: 30,
                    output_tokens: 40,
                    reasoning_tokens: 5,
                },
                cost_usd: Some(0.012_345_6),
            },
            EventBody::Usage {
                tokens: TokenUsage::default(),
                cost_usd: None,
            },
            EventBody::ArtifactSummary {
                patch_path: "meta/patch.diff".to_owned(),
                changed_files: vec!["a.rs".to_owned(), "b/c.rs".to_owned()],
                patch_bytes: 4_096,
                interrupted: true,
            },
            EventBody::Policy {
                rule: "network".to_owned(),
                message: "denied connect to 1.2.3.4:443".to_owned(),
            },
            EventBody::Error {
                message: "engine crashed".to_owned(),
                source: Some("codex".to_owned()),
                fatal: true,
            },
            EventBody::Error {
                message: "retrying".to_owned(),
                source: None,
                fatal: false,
            },
            EventBody::Raw {
                engine: "claude".to_owned(),
                event_type: "system/compact".to_owned(),
                data: json!({"kind": "not the tag", "type": 3, "big": u64::MAX}),
            },
            EventBody::Network(paddock_protocol::EgressRecord {
                host: "registry.npmjs.org".to_owned(),
                port: 443,
                method: Some(paddock_protocol::EgressMethod::Connect),
                address: Some("104.16.0.1:443".to_owned()),
                bytes_up: 512,
                bytes_down: u64::MAX,
                duration_ms: 12,
                phase: paddock_protocol::EgressPhase::Setup,
                allowed: false,
                rule: Some("allowlist".to_owned()),
                reason: Some("not on the list".to_owned()),
                credential: None,
                substituted: None,
            }),
        ];
        for change in [ChangeKind::Add, ChangeKind::Update, ChangeKind::Delete] {
            bodies.push(EventBody::FileChange {
                path: "src/main.rs".to_owned(),
                change,
            });
        }
        bodies
    }

    /// Fails to compile when a variant is added, so `every_body` keeps up.
    fn covered(body: &EventBody) {
        match body {
            EventBody::Status { .. }
            | EventBody::Text { .. }
            | EventBody::Thought { .. }
            | EventBody::ToolCall { .. }
            | EventBody::ToolResult { .. }
            | EventBody::FileChange { .. }
            | EventBody::Usage { .. }
            | EventBody::ArtifactSummary { .. }
            | EventBody::Policy { .. }
            | EventBody::Error { .. }
            | EventBody::Network(_)
            | EventBody::Raw { .. } => {}
        }
    }

    async fn store_with_job(id: &str) -> SqliteStore {
        let store = SqliteStore::open_in_memory().await.unwrap();
        store.insert_job(&job(id, 0), "{}").await.unwrap();
        store
    }

    #[tokio::test]
    async fn every_body_round_trips() {
        let store = store_with_job("j1").await;
        let bodies = every_body();
        let kinds: std::collections::BTreeSet<_> = bodies.iter().map(EventBody::kind).collect();
        assert_eq!(kinds.len(), 12, "one of each kind: {kinds:?}");
        let written: Vec<AgentEvent> = bodies
            .into_iter()
            .zip(1..)
            .map(|(body, seq)| {
                covered(&body);
                event("j1", seq, body)
            })
            .collect();
        for ev in &written {
            store.append_event(ev).await.unwrap();
        }
        assert_eq!(
            crate::store::Store::events(&store, "j1", 0).await.unwrap(),
            written
        );

        let stored_kinds: Vec<String> =
            sqlx::query_scalar("SELECT kind FROM events WHERE job_id = 'j1' ORDER BY seq")
                .fetch_all(&store.pool)
                .await
                .unwrap();
        let expected: Vec<&str> = written.iter().map(|e| e.body.kind()).collect();
        assert_eq!(stored_kinds, expected);
    }
}
