//! The API's OpenAPI 3.1 document, derived by utoipa from the handlers'
//! `#[utoipa::path]` annotations and the wire types' schemas (the
//! protocol crate's with its `openapi` feature), served at
//! `GET /openapi.json`. A route missing here fails the test that walks the
//! router's routes against the document.

use axum::Json;
use utoipa::OpenApi;

use super::{discover, events, health, jobs, problem};

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
        discover::discover,
        health::healthz,
        health::readyz,
        openapi_json,
        super::exposition,
    ),
    modifiers(&Bearer),
    components(schemas(
        problem::Problem,
        jobs::JobPage,
        jobs::JobSpecBody,
        paddock_protocol::JobRecord,
        paddock_protocol::JobStatus,
        paddock_protocol::TokenUsage,
        discover::Discovery,
        health::Health,
        health::Readiness,
    )),
    tags(
        (name = "jobs", description = "Submit, list, watch, cancel and dispose of jobs"),
        (name = "runtime", description = "What the server offers and whether it is ready"),
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

/// The document.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    doc
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "runtime", security(("bearer" = [])),
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json")))]
pub async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(document())
}
