//! The statements both backends run word for word, written once. SQLite
//! and PostgreSQL share the schema's tables and columns, `$N` placeholders
//! and the row types read back, so most of a table's queries are the same
//! text, binds and error mapping on either pool; only where a dialect or a
//! lock differs (an event's append, the ledger's page, spend's clamped
//! sums, the queue's claim) does a backend keep its own statement.
//!
//! Each table's shared methods are a macro (`api_tokens_queries!`, …) that
//! `sqlite/<table>.rs` and `postgres/<table>.rs` expand for their store
//! type: sqlx's executor, argument and decode bounds for a method generic
//! over `sqlx::Database` would have to be restated on every method (Rust
//! does not imply bounds on other types from a trait), which reads worse
//! than the one body a macro keeps. A macro takes the statements a backend
//! words differently as arguments.

pub(in crate::store) mod egress;
pub(in crate::store) mod events;
pub(in crate::store) mod jobs;
pub(in crate::store) mod ledger;
pub(in crate::store) mod profiles;
pub(in crate::store) mod spend;
pub(in crate::store) mod tokens;
pub(in crate::store) mod usage;
pub(in crate::store) mod webhooks;
