//! HTTP to a forge's REST API, the part GitHub's (`github.rs`) and
//! GitLab's (`gitlab.rs`) clients share: one reqwest client (Paddock's user
//! agent, a minute's timeout, no redirects followed: a redirect could carry
//! the token elsewhere), a request sent and its answer read within bounds
//! (`forge_answer.rs`: long strings cut as they stream in; a failure
//! status turned into the forge's own message by the forge's reader, a 204
//! read as `null`, the JSON decoded), the next page of a list (the `Link`
//! header's `rel="next"` as GitHub and GitLab send it, or GitLab's
//! `X-Next-Page`; only ever below the API root, and at most [`MAX_PAGES`]
//! pages), and the encoding of query strings and path segments. Each
//! client keeps its own authentication, headers and `refuse_merging`.

use reqwest::header::HeaderMap;
use reqwest::{Method, RequestBuilder};
use serde::de::DeserializeOwned;

use super::forge::ForgeError;

/// The environment variable bounding how long Paddock waits by itself,
/// per request, for a forge's rate limit to let it go on (whole seconds;
/// `0`: never waits).
pub const RATE_LIMIT_WAIT_ENV: &str = "PADDOCK_FORGE_RATE_LIMIT_WAIT_SECS";

/// [`RATE_LIMIT_WAIT_ENV`]'s default.
pub const RATE_LIMIT_WAIT_DEFAULT: u64 = 60;

/// How many times one request is sent again after a rate limit's wait.
const RATE_LIMIT_RETRIES: usize = 3;

/// The bound [`RATE_LIMIT_WAIT_ENV`] sets (its default when unset or not
/// a number of seconds).
fn rate_limit_wait_bound() -> u64 {
    std::env::var(RATE_LIMIT_WAIT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(RATE_LIMIT_WAIT_DEFAULT)
}

/// A rate limit's answer, as the forge's headers say when to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit {
    /// Not a rate limit (another status, a 403 that is a permission).
    None,
    /// `Retry-After` seconds (a secondary rate limit, GitLab's 429).
    RetryAfter(u64),
    /// The spent limit resets at this Unix time (GitHub's
    /// `x-ratelimit-remaining: 0` with `x-ratelimit-reset`, GitLab's
    /// `RateLimit-Remaining`/`RateLimit-Reset`).
    SpentUntil(i64),
    /// Spent, no reset time said.
    Spent,
    /// A 429 saying nothing of when.
    Limiting,
}

fn limit_of(status: u16, headers: &HeaderMap) -> Limit {
    if status != 403 && status != 429 {
        return Limit::None;
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    if let Some(secs) = header("retry-after").and_then(|v| v.parse::<u64>().ok()) {
        return Limit::RetryAfter(secs);
    }
    let spent = ["x-ratelimit-remaining", "ratelimit-remaining"]
        .iter()
        .any(|h| header(h) == Some("0"));
    let reset = ["x-ratelimit-reset", "ratelimit-reset"]
        .iter()
        .find_map(|h| header(h).and_then(|v| v.parse::<i64>().ok()));
    match (spent, reset) {
        (true, Some(at)) => Limit::SpentUntil(at),
        (true, None) => Limit::Spent,
        (false, _) if status == 429 => Limit::Limiting,
        (false, _) => Limit::None,
    }
}

/// How many seconds a rate limit's answer asks to wait from `now` (Unix
/// seconds) before the request may succeed (`0`: its reset has passed);
/// `None` when it is no rate limit or says no time.
fn wait_of(limit: Limit, now: i64) -> Option<u64> {
    match limit {
        Limit::RetryAfter(secs) => Some(secs),
        Limit::SpentUntil(at) => Some(u64::try_from(at.saturating_sub(now)).unwrap_or(0)),
        Limit::None | Limit::Spent | Limit::Limiting => None,
    }
}

/// When a 403 or 429 is a rate limit, when to try again, as the forge's
/// headers say it ([`Limit`]), as `; the forge's rate limit …` to append
/// to its message, naming the bound (`max_wait` seconds) Paddock waits by
/// itself when the wait was longer (`None`: a client that never waits,
/// nothing said of it); empty otherwise.
pub(super) fn rate_limit(status: u16, headers: &HeaderMap, max_wait: Option<u64>) -> String {
    let retry = "`paddock publish` of the job publishes it again";
    let longer = match max_wait {
        Some(max_wait) => {
            format!(", longer than Paddock waits by itself ({max_wait} s, {RATE_LIMIT_WAIT_ENV})")
        }
        None => String::new(),
    };
    match limit_of(status, headers) {
        Limit::None => String::new(),
        Limit::RetryAfter(secs) => {
            format!("; the forge's rate limit asks to wait {secs} s{longer}: {retry} after that")
        }
        Limit::SpentUntil(at) => {
            let at = time::OffsetDateTime::from_unix_timestamp(at)
                .map(crate::time_text::rfc3339)
                .unwrap_or_else(|_| at.to_string());
            format!("; the forge's rate limit is spent until {at}{longer}: {retry} then")
        }
        Limit::Spent => format!("; the forge's rate limit is spent: {retry} once it resets"),
        Limit::Limiting => format!("; the forge is rate limiting: {retry} later"),
    }
}

/// How many pages of one list are read at most (100 items a page): a
/// forge whose `next` never ends is not followed forever.
pub const MAX_PAGES: usize = 50;

/// Items asked for a page (GitHub's and GitLab's maximum).
pub const PER_PAGE: &str = "100";

/// The most of one comment's body Paddock keeps as it reads a list of
/// them (bytes, cut at a character boundary and marked as cut). Anyone
/// may comment on a public repository's pull request, each body up to
/// 65,536 characters on GitHub and 1,000,000 on GitLab, and a list is read
/// up to [`MAX_PAGES`] pages of 100: kept whole, a flood of long comments
/// would hold gigabytes in Paddock's memory at a review read or a
/// publish. What is read of a body needs far less: the next brief takes
/// 8,000 bytes of a comment (`bounce.rs`), a closeout is known by its
/// first lines (`closeout::job_of`).
pub const BODY_KEPT: usize = 16 * 1024;

/// A comment's body as a list gives it, cut to [`BODY_KEPT`] as it is
/// read (`#[serde(deserialize_with = "cut_body")]`): only the page being
/// read and the one body being cut are ever held whole.
pub fn cut_body<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let mut body = <String as serde::Deserialize>::deserialize(d)?;
    crate::output::cap_string(&mut body, BODY_KEPT);
    body.shrink_to_fit();
    Ok(body)
}

/// [`cut_body`] of a body that may be `null` (a GitHub review's).
pub fn cut_body_or_none<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<String>, D::Error> {
    let body = <Option<String> as serde::Deserialize>::deserialize(d)?;
    Ok(body.map(|mut body| {
        crate::output::cap_string(&mut body, BODY_KEPT);
        body.shrink_to_fit();
        body
    }))
}

/// One forge's API root and the client that talks to it.
pub(super) struct ForgeHttp {
    pub forge: &'static str,
    http: reqwest::Client,
    /// The API root, without a trailing `/`.
    pub api: String,
    /// Where the forge's web pages are, told from the API root: every
    /// address it answers is held to it ([`ForgeHttp::held_url`]);
    /// boxed: a client is carried in larger values.
    web: Option<Box<super::forge_url::WebOrigin>>,
    /// How long one request waits, at most, for a rate limit
    /// ([`RATE_LIMIT_WAIT_ENV`]), in seconds; `None`: never (a client
    /// [`ForgeHttp::without_waiting`]).
    max_wait: Option<u64>,
}

impl ForgeHttp {
    /// The client for the API root `api` of `forge`.
    pub fn new(forge: &'static str, api: &str) -> Result<ForgeHttp, ForgeError> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("paddock/", env!("CARGO_PKG_VERSION")))
            .timeout(std::time::Duration::from_secs(60))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ForgeError::Request {
                forge,
                step: "build the HTTP client",
                url: api.to_string(),
                message: e.to_string(),
            })?;
        Ok(ForgeHttp {
            forge,
            http,
            api: api.trim_end_matches('/').to_string(),
            web: super::forge_url::web_origin(api).map(Box::new),
            max_wait: Some(rate_limit_wait_bound()),
        })
    }

    /// This client, never waiting for a rate limit (the reaper's
    /// revocations, which `paddock gc` and the start of every `paddock
    /// run` make: a token left is expired by its forge anyway, and its
    /// record stays for a later pass).
    pub fn without_waiting(self) -> ForgeHttp {
        ForgeHttp {
            max_wait: None,
            ..self
        }
    }

    /// `raw`, the address the forge answered for `what`, held to
    /// [`super::forge_url::held`]: the address when it is kept, else why
    /// not (a warning for the job).
    pub fn held_url(&self, what: &str, raw: &str) -> (Option<String>, Option<String>) {
        match super::forge_url::held(self.forge, what, raw, self.web.as_deref()) {
            Ok(url) => (Some(url), None),
            Err(why) => (None, Some(why)),
        }
    }

    /// The request `method` to `path` below the API root, and its URL.
    pub fn request(&self, method: Method, path: &str) -> (RequestBuilder, String) {
        let url = format!("{}{path}", self.api);
        (self.http.request(method, &url), url)
    }

    /// Sends `req` (to `url`, for messages) and reads its answer as `T`,
    /// with its headers; a failure status is `Status` with the message
    /// `error_message` reads from the body. A rate limit that asks to wait
    /// no longer than this client's bound (`Retry-After`, or the reset of
    /// a spent limit; all waits of the request together) is waited and
    /// the request sent again (at most [`RATE_LIMIT_RETRIES`] times); the
    /// wait is a sleep that a cancel drops with the request's future.
    pub async fn send<T: DeserializeOwned>(
        &self,
        step: &'static str,
        url: &str,
        req: RequestBuilder,
        error_message: fn(&[u8]) -> String,
    ) -> Result<(T, HeaderMap), ForgeError> {
        let forge = self.forge;
        let fail = |e: reqwest::Error| ForgeError::Request {
            forge,
            step,
            url: url.to_string(),
            message: e.without_url().to_string(),
        };
        let mut req = req;
        let mut waited = 0u64;
        let mut retries = 0;
        let (status, headers, answer, exhausted) = loop {
            let again = req.try_clone();
            let resp = req.send().await.map_err(fail)?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let answer = super::forge_answer::read(resp).await.map_err(fail)?;
            let now = time::OffsetDateTime::now_utc().unix_timestamp();
            let wait = wait_of(limit_of(status.as_u16(), &headers), now);
            let bound = self.max_wait.unwrap_or(0);
            let within = wait.is_some_and(|secs| waited.saturating_add(secs) <= bound);
            match (again, wait) {
                (Some(again), Some(secs)) if within && retries < RATE_LIMIT_RETRIES => {
                    tracing::info!(
                        "{forge}: {step}: rate limited (HTTP {status}); waiting {secs} s, then \
                         sending it again"
                    );
                    tokio::time::sleep(std::time::Duration::from_secs(secs)).await;
                    waited += secs;
                    retries += 1;
                    req = again;
                }
                _ => break (status, headers, answer, within && retries > 0),
            }
        };
        if !status.is_success() {
            return Err(ForgeError::Status {
                forge,
                step,
                status: status.as_u16(),
                message: quoted(error_message(&answer.bytes)),
                limit: match exhausted {
                    // Waited as asked, and limited again each time.
                    true => format!(
                        "; the forge's rate limit still held after {retries} wait(s) of {waited} s \
                         in all: `paddock publish` of the job publishes it again later"
                    ),
                    false => rate_limit(status.as_u16(), &headers, self.max_wait),
                },
            });
        }
        if !answer.whole {
            return Err(ForgeError::Decode {
                forge,
                step,
                message: format!(
                    "the answer is over {} MiB (each of its strings cut at {} KiB)",
                    super::forge_answer::MAX_ANSWER >> 20,
                    super::forge_answer::MAX_STRING >> 10
                ),
            });
        }
        // A 204 (a revoked token) has no body: `()` reads it as `null`.
        let bytes: &[u8] = if answer.bytes.is_empty() {
            b"null"
        } else {
            &answer.bytes
        };
        let value = serde_json::from_slice(bytes).map_err(|e| ForgeError::Decode {
            forge,
            step,
            message: e.to_string(),
        })?;
        Ok((value, headers))
    }

    /// Every item of the list at `path` (its query kept, `per_page=100`
    /// added), page after page as [`ForgeHttp::next_page`] finds them,
    /// each page read by `fetch` (the forge's authenticated GET); at most
    /// [`MAX_PAGES`] pages, more an error.
    pub async fn all_pages<T, F, Fut>(
        &self,
        step: &'static str,
        path: &str,
        fetch: F,
    ) -> Result<Vec<T>, ForgeError>
    where
        F: FnMut(String) -> Fut,
        Fut: std::future::Future<Output = Result<(Vec<T>, HeaderMap), ForgeError>>,
    {
        match self.first_pages(step, path, fetch).await? {
            (out, false) => Ok(out),
            (_, true) => Err(ForgeError::Decode {
                forge: self.forge,
                step,
                message: format!("more than {MAX_PAGES} pages of {PER_PAGE}"),
            }),
        }
    }

    /// [`ForgeHttp::all_pages`] up to its bound: the items of the first
    /// [`MAX_PAGES`] pages, and whether more were left unread. For a list
    /// anyone may add to (the comments of a public repository's pull
    /// request), whose length must not decide whether Paddock's step
    /// works.
    pub async fn first_pages<T, F, Fut>(
        &self,
        step: &'static str,
        path: &str,
        mut fetch: F,
    ) -> Result<(Vec<T>, bool), ForgeError>
    where
        F: FnMut(String) -> Fut,
        Fut: std::future::Future<Output = Result<(Vec<T>, HeaderMap), ForgeError>>,
    {
        let per_page = form(&[("per_page", PER_PAGE)]);
        let separator = if path.contains('?') { '&' } else { '?' };
        let mut next = Some(format!("{path}{separator}{per_page}"));
        let mut out = Vec::new();
        for _ in 0..MAX_PAGES {
            let Some(page) = next.take() else {
                return Ok((out, false));
            };
            let (items, headers) = fetch(page.clone()).await?;
            out.extend(items);
            next = self.next_page(step, &headers, &page)?;
        }
        Ok((out, next.is_some()))
    }

    /// The path (below the API root) of the page after the one `path`
    /// answered with `headers`: the `Link` header's `rel="next"`, else
    /// GitLab's `X-Next-Page` (a number: `page` set in `path`'s query);
    /// `None` on the last page. A `next` link outside the API root is
    /// refused (the token goes only there).
    pub fn next_page(
        &self,
        step: &'static str,
        headers: &HeaderMap,
        path: &str,
    ) -> Result<Option<String>, ForgeError> {
        let link = headers
            .get_all(reqwest::header::LINK)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(next_link);
        if let Some(url) = link {
            return match below(&self.api, &url) {
                Some(rest) => Ok(Some(rest.to_string())),
                None => Err(ForgeError::Decode {
                    forge: self.forge,
                    step,
                    message: format!(
                        "the next page's link {} is not below {}",
                        quoted(url),
                        self.api
                    ),
                }),
            };
        }
        let next = headers
            .get("x-next-page")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|n| !n.is_empty());
        let Some(next) = next else {
            return Ok(None);
        };
        if !next.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ForgeError::Decode {
                forge: self.forge,
                step,
                message: format!(
                    "X-Next-Page `{}` is not a page number",
                    quoted(next.to_string())
                ),
            });
        }
        Ok(Some(with_page(path, next)))
    }
}

/// The `rel="next"` target of one `Link` header value
/// (`<URL>; rel="next", <URL>; rel="last"`).
fn next_link(value: &str) -> Option<String> {
    let mut rest = value;
    while let Some(start) = rest.find('<') {
        let after = &rest[start + 1..];
        let end = after.find('>')?;
        let url = &after[..end];
        let params = &after[end + 1..];
        let params = params.split('<').next().unwrap_or(params);
        let is_next = params.split(';').any(|p| {
            p.trim()
                .strip_prefix("rel=")
                .map(|r| r.trim_matches(|c| c == '"' || c == ',' || c == ' '))
                .is_some_and(|r| r.split_whitespace().any(|r| r == "next"))
        });
        if is_next {
            return Some(url.to_string());
        }
        rest = &after[end + 1..];
    }
    None
}

/// `path` with its query's `page` set to `page`.
fn with_page(path: &str, page: &str) -> String {
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    let mut pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k != "page")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    pairs.push(("page".into(), page.into()));
    let pairs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    format!("{route}?{}", form(&pairs))
}

/// `k=v&…`, form-encoded.
pub fn form(pairs: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// Every byte but an unreserved one (`A-Z a-z 0-9 - _ . ~`).
const RESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `s` as one path segment (`acme/widgets` → `acme%2Fwidgets`).
pub fn path_segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, RESERVED).to_string()
}

/// The part of `url` below the API root `api` (a path from its `/`),
/// when `url` is below it as a request resolves it: a link that starts
/// with the root but climbs out of it (`/../`, its `%2e%2e` spelling, a
/// backslash that a URL parser reads as `/`) leaves it once resolved,
/// and would take the token to another path of the forge's host.
fn below<'a>(api: &str, url: &'a str) -> Option<&'a str> {
    let rest = url.strip_prefix(api).filter(|r| r.starts_with('/'))?;
    let root = reqwest::Url::parse(api).ok()?;
    let root = root.as_str().trim_end_matches('/');
    let resolved = reqwest::Url::parse(&format!("{api}{rest}")).ok()?;
    resolved
        .as_str()
        .strip_prefix(root)
        .is_some_and(|r| r.starts_with('/'))
        .then_some(rest)
}

/// The body text of an error no forge shape reads: its end, bounded.
pub fn raw_message(bytes: &[u8]) -> String {
    crate::output::keep_end(&String::from_utf8_lossy(bytes), 500)
}

/// The most of one text a forge answered (its error's message, the
/// permissions a token was granted, an account's login, a `Link` header)
/// that Paddock quotes in an error, in bytes.
pub const QUOTED_MAX: usize = 1000;

/// `text`, a forge's, as an error of Paddock's quotes it: its first
/// [`QUOTED_MAX`] bytes (at a character boundary), marked with how long
/// it was when longer. A forge's answer is read with each string up to
/// 256 KiB and 64 MiB in all (`forge_answer.rs`), and its error's
/// `message` and `errors` are anyone's to fill (a comment's text echoed
/// in a validation error, a proxy's page): quoted whole, one answer would
/// be a job's reason, a `paddock publish`'s stored record and event, a
/// server's problem detail and a terminal's line of megabytes, and the
/// reason, kept by its end, would lose the step that failed.
pub fn quoted(mut text: String) -> String {
    crate::output::cap_string(&mut text, QUOTED_MAX);
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// What a rate limit's answer says about when to try again: GitLab's
    /// `RateLimit-*` headers as GitHub's `x-ratelimit-*`; a 403 that is no
    /// rate limit (a permission) and any other status say nothing.
    #[test]
    fn a_rate_limit_says_when_to_try_again() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, reqwest::header::HeaderValue::from_static(v));
            }
            h
        };
        let again = "`paddock publish` of the job publishes it again";
        let longer =
            "longer than Paddock waits by itself (60 s, PADDOCK_FORGE_RATE_LIMIT_WAIT_SECS)";
        assert_eq!(
            [
                rate_limit(
                    429,
                    &headers(&[
                        ("ratelimit-remaining", "0"),
                        ("ratelimit-reset", "1796230800")
                    ]),
                    Some(60)
                ),
                rate_limit(403, &headers(&[("retry-after", "120")]), Some(60)),
                rate_limit(429, &headers(&[]), Some(60)),
                rate_limit(403, &headers(&[("x-ratelimit-remaining", "0")]), Some(60)),
                rate_limit(403, &headers(&[("x-ratelimit-remaining", "4999")]), Some(60)),
                rate_limit(503, &headers(&[("retry-after", "30")]), Some(60)),
            ],
            [
                format!(
                    "; the forge's rate limit is spent until 2026-12-02T17:00:00Z, {longer}: {again} then"
                ),
                format!("; the forge's rate limit asks to wait 120 s, {longer}: {again} after that"),
                format!("; the forge is rate limiting: {again} later"),
                format!("; the forge's rate limit is spent: {again} once it resets"),
                String::new(),
                String::new(),
            ]
        );
    }

    /// How long a rate limit asks to wait: `Retry-After` as said, a spent
    /// limit until its reset (nothing once it has passed), and no time
    /// for one that says none or for what is no rate limit.
    #[test]
    fn a_rate_limit_says_how_long_to_wait() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, reqwest::header::HeaderValue::from_static(v));
            }
            h
        };
        let now = 1_796_230_800;
        let wait = |status, pairs| wait_of(limit_of(status, &headers(pairs)), now);
        assert_eq!(
            [
                wait(429, &[("retry-after", "7")]),
                wait(
                    403,
                    &[
                        ("x-ratelimit-remaining", "0"),
                        ("x-ratelimit-reset", "1796230830")
                    ]
                ),
                wait(
                    429,
                    &[
                        ("ratelimit-remaining", "0"),
                        ("ratelimit-reset", "1796230700")
                    ]
                ),
                wait(403, &[("x-ratelimit-remaining", "0")]),
                wait(429, &[]),
                wait(403, &[("x-ratelimit-remaining", "12")]),
                wait(503, &[("retry-after", "7")]),
            ],
            [Some(7), Some(30), Some(0), None, None, None, None]
        );
    }

    #[test]
    fn queries_and_segments_are_encoded() {
        assert_eq!(
            (
                form(&[("head", "acme:paddock/T-1/2"), ("state", "open")]),
                path_segment("acme/tools/widgets"),
                path_segment("a b~c"),
            ),
            (
                "head=acme%3Apaddock%2FT-1%2F2&state=open".to_string(),
                "acme%2Ftools%2Fwidgets".to_string(),
                "a%20b~c".to_string(),
            )
        );
    }

    /// GitHub's and GitLab's `Link` headers: the `next` target wherever it
    /// is in the list; none on the last page.
    #[test]
    fn the_next_link_is_read_from_a_link_header() {
        assert_eq!(
            [
                next_link(r#"<https://api.github.com/repositories/1/pulls/2/comments?per_page=100&page=2>; rel="next", <https://api.github.com/repositories/1/pulls/2/comments?per_page=100&page=3>; rel="last""#),
                next_link(r#"<https://gl.example/api/v4/projects/8/merge_requests/1/notes?page=1&per_page=100>; rel="prev", <https://gl.example/api/v4/projects/8/merge_requests/1/notes?page=3&per_page=100>; rel="next", <https://gl.example/api/v4/projects/8/merge_requests/1/notes?page=1&per_page=100>; rel="first""#),
                next_link(r#"<https://gl.example/api/v4/x?page=1>; rel="first", <https://gl.example/api/v4/x?page=1>; rel="last""#),
            ],
            [
                Some("https://api.github.com/repositories/1/pulls/2/comments?per_page=100&page=2".to_string()),
                Some("https://gl.example/api/v4/projects/8/merge_requests/1/notes?page=3&per_page=100".to_string()),
                None,
            ]
        );
    }

    /// The next page as a path below the API root: from `Link`, else from
    /// `X-Next-Page`; a link elsewhere or a page that is not a number is
    /// an error naming it.
    #[test]
    fn the_next_page_stays_below_the_api_root() {
        let api = ForgeHttp::new("gitlab", "https://gl.example/api/v4/").unwrap();
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().unwrap());
            }
            h
        };
        let path = "/projects/8/merge_requests/1/notes?sort=asc&per_page=100&page=2";
        let next = |h: &HeaderMap| api.next_page("read", h, path).map_err(|e| e.to_string());
        assert_eq!(
            [
                next(&headers(&[("link", r#"<https://gl.example/api/v4/projects/8/merge_requests/1/notes?page=3>; rel="next""#)])),
                next(&headers(&[("x-next-page", "3")])),
                next(&headers(&[("x-next-page", "")])),
                next(&headers(&[])),
                next(&headers(&[("link", r#"<https://evil.example/api/v4/x?page=3>; rel="next""#)])),
                next(&headers(&[("link", r#"<https://gl.example/api/v4.evil/x>; rel="next""#)])),
                next(&headers(&[("x-next-page", "3&admin=1")])),
                next(&headers(&[("link", r#"<https://gl.example/api/v4/../../admin/x>; rel="next""#)])),
                next(&headers(&[("link", r#"<https://gl.example/api/v4/%2e%2e/%2E%2e/admin/x>; rel="next""#)])),
                next(&headers(&[("link", r#"<https://gl.example/api/v4/..\..\admin/x>; rel="next""#)])),
                next(&headers(&[("link", r#"<https://gl.example/api/v4/projects/8/../9/notes?page=3>; rel="next""#)])),
            ],
            [
                Ok(Some("/projects/8/merge_requests/1/notes?page=3".to_string())),
                Ok(Some("/projects/8/merge_requests/1/notes?sort=asc&per_page=100&page=3".to_string())),
                Ok(None),
                Ok(None),
                Err("gitlab: read: unexpected answer: the next page's link https://evil.example/api/v4/x?page=3 is not below https://gl.example/api/v4".to_string()),
                Err("gitlab: read: unexpected answer: the next page's link https://gl.example/api/v4.evil/x is not below https://gl.example/api/v4".to_string()),
                Err("gitlab: read: unexpected answer: X-Next-Page `3&admin=1` is not a page number".to_string()),
                Err("gitlab: read: unexpected answer: the next page's link https://gl.example/api/v4/../../admin/x is not below https://gl.example/api/v4".to_string()),
                Err("gitlab: read: unexpected answer: the next page's link https://gl.example/api/v4/%2e%2e/%2E%2e/admin/x is not below https://gl.example/api/v4".to_string()),
                Err("gitlab: read: unexpected answer: the next page's link https://gl.example/api/v4/..\\..\\admin/x is not below https://gl.example/api/v4".to_string()),
                Ok(Some("/projects/8/../9/notes?page=3".to_string())),
            ]
        );
    }
}
