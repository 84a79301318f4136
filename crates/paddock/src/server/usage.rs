//! Spend over the API: `GET /v1/usage?by=DIM` (the `paddock usage`
//! rollups of one dimension with the total) and `GET /v1/ledger` (the
//! broker's model calls a page at a time, resumable by cursor), both of
//! scope `read`, both the library's code (`crate::usage`, `crate::ledger`)
//! that `paddock usage` runs too.

use super::json::Json;
use axum::extract::{Query, State};
use serde::Deserialize;

use super::extract::Checked;
use super::problem::{chain, Problem};
use super::state::AppState;
use crate::ledger::{LedgerError, LedgerPage};
use crate::usage::{Dimension, UsageBy};

/// `GET /v1/usage` query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    /// The dimension: `day`, `project`, `task_type`, `engine` or `model`.
    pub by: Dimension,
}

/// `GET /v1/ledger` query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct LedgerQuery {
    /// A page's `next_cursor`: the rows after it (from the first without).
    pub cursor: Option<String>,
    /// At most this many calls (1 to 500, default 100).
    pub limit: Option<u32>,
}

/// Spend rolled up by one dimension, with the total.
#[utoipa::path(get, path = "/v1/usage", tag = "usage", security(("bearer" = ["read"])), params(UsageQuery),
    responses((status = 200, description = "The rollups of the dimension (docs/cli.md, `paddock usage`)", body = UsageBy)))]
pub async fn usage(
    State(state): State<AppState>,
    Checked(Query(query)): Checked<Query<UsageQuery>>,
) -> Result<Json<UsageBy>, Problem> {
    let report = crate::usage::from_store(state.store.as_ref()).await?;
    Ok(Json(report.by(query.by)))
}

/// The ledger a page at a time, oldest first.
#[utoipa::path(get, path = "/v1/ledger", tag = "usage", security(("bearer" = ["read"])), params(LedgerQuery),
    responses((status = 200, description = "A page of model calls and the cursor after it", body = LedgerPage)))]
pub async fn ledger(
    State(state): State<AppState>,
    Checked(Query(query)): Checked<Query<LedgerQuery>>,
) -> Result<Json<LedgerPage>, Problem> {
    crate::ledger::page(state.store.as_ref(), query.cursor.as_deref(), query.limit)
        .await
        .map(Json)
        .map_err(|e| match e {
            LedgerError::Read(source) => Problem::from(source),
            e => Problem::bad_request(chain(&e)),
        })
}
