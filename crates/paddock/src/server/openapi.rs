//! The API's OpenAPI 3.1 document, derived by utoipa from the handlers'
//! `#[utoipa::path]` annotations and the wire types' schemas (the
//! protocol crate's with its `openapi` feature), served at
//! `GET /openapi.json`. A route missing here fails the test that walks the
//! router's routes against the document. Each operation's security
//! requirement names the scope its route needs (`bearer: [submit]`); the
//! problem answers every guarded route shares (401, 403, 503 `store_lost`
//! or `store_unavailable`)
//! and every route with input shares (400 from `extract.rs`, 413 and 415 for a
//! body) are added to each operation by [`ProblemAnswers`], so the
//! annotations list only a route's own.

use super::json::Json;
use utoipa::OpenApi;

use super::{discover, events, health, jobs, problem, turns, usage};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Paddock",
        description = "The runtime other systems dispatch coding-agent jobs to (docs/api.md)."
    ),
    paths(
        jobs::submit,
        jobs::list,
        jobs::get,
        jobs::cancel,
        jobs::dispose,
        events::events,
        turns::turn,
        discover::discover,
        usage::usage,
        usage::ledger,
        health::healthz,
        health::readyz,
        openapi_json,
        super::exposition,
    ),
    modifiers(&Bearer, &ProblemAnswers),
    components(schemas(
        problem::Problem,
        jobs::JobPage,
        jobs::JobSpecBody,
        jobs::CancelAnswer,
        jobs::CancelOutcome,
        jobs::CancelState,
        turns::TurnBody,
        paddock_protocol::JobRecord,
        paddock_protocol::JobStatus,
        paddock_protocol::TokenUsage,
        discover::Discovery,
        crate::store::Lane,
        health::Health,
        health::Readiness,
        crate::usage::UsageBy,
        crate::usage::Rollup,
        crate::usage::Dimension,
        crate::ledger::LedgerPage,
        paddock_protocol::ledger::ModelCall,
        paddock_protocol::ledger::CallStatus,
    )),
    tags(
        (name = "jobs", description = "Submit, list, watch, cancel and dispose of jobs"),
        (name = "turns", description = "One assistant turn, its events streamed back"),
        (name = "runtime", description = "What the server offers and whether it is ready"),
        (name = "usage", description = "Spend rollups and the ledger"),
    )
)]
pub struct ApiDoc;

/// The bearer scheme every route but health needs (docs/serve.md,
/// "Authentication").
struct Bearer;

impl utoipa::Modify for Bearer {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Adds the problem answers routes share to every operation that lacks
/// them: 401 and 403 (with `WWW-Authenticate`) and 503 (the token lookup's
/// store) where a token is needed, 400 where the operation takes
/// parameters or a body, 413 and 415 where it takes a body.
struct ProblemAnswers;

impl utoipa::Modify for ProblemAnswers {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        for item in doc.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for operation in operations.into_iter().flatten() {
                add_problem_answers(operation);
            }
        }
    }
}

fn add_problem_answers(operation: &mut utoipa::openapi::path::Operation) {
    let guarded = operation.security.as_ref().is_some_and(|s| !s.is_empty());
    let has_body = operation.request_body.is_some();
    let has_input = has_body || operation.parameters.as_ref().is_some_and(|p| !p.is_empty());
    let mut wanted: Vec<(&str, &str)> = Vec::new();
    if has_input {
        wanted.push(("400", "A malformed parameter or body (`bad_request`)"));
    }
    if guarded {
        wanted.push((
            "401",
            "No bearer token, or an unknown or revoked one (`unauthorized`)",
        ));
        wanted.push((
            "403",
            "The token's scope is smaller than the route's (`forbidden`)",
        ));
        wanted.push((
            "503",
            "The store failed (`store_lost`), or is unavailable for now (`store_unavailable`: \
             a failure that passes, or a read it did not answer within 5 s)",
        ));
    }
    if has_body {
        wanted.push(("413", "The body is too large (`too_large`)"));
        wanted.push((
            "415",
            "The body's `Content-Type` is not JSON (`unsupported_media_type`)",
        ));
    }
    for (status, description) in wanted {
        operation
            .responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| problem_answer(status, description).into());
    }
}

/// A problem+json answer; a 401 or 403 also carries `WWW-Authenticate`.
fn problem_answer(status: &str, description: &str) -> utoipa::openapi::Response {
    use utoipa::openapi::schema::{Object, Type};
    use utoipa::openapi::{ContentBuilder, Header, Ref, ResponseBuilder};
    let mut answer = ResponseBuilder::new().description(description).content(
        super::problem::PROBLEM_JSON,
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("Problem")))
            .build(),
    );
    if status == "401" || status == "403" {
        answer = answer.header(
            "www-authenticate",
            Header::new(Object::with_type(Type::String)),
        );
    }
    answer.build()
}

/// The document.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    doc
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "runtime", security(("bearer" = ["read"])),
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json")))]
pub async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(document())
}
