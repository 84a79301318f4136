//! An address a forge answers with (a pull request's page, a comment's),
//! held before Paddock keeps it. The forge's answer is hostile input as
//! much as the job's output is: a broken or hostile forge (or whatever
//! answers at the API root a spec names) may send control characters,
//! terminal escapes, a `javascript:` URL, a page on another host or
//! megabytes where a URL belongs, and the address reaches the closeout
//! comment, the next attempt's brief, the job's events and the terminal.
//! So one is kept only when it is at most [`MAX_URL`] bytes of printable
//! ASCII (no space), parses as a URL without credentials, is `https`
//! (or the API root's own scheme: a forge, or a test's mock, served over
//! `http`) and is on the forge's web host ([`web_origin`]). Otherwise the
//! result names no address, and a warning says why without repeating it.

use reqwest::Url;

/// The longest address kept, in bytes. A real pull request's or note's
/// page is well under 200.
pub const MAX_URL: usize = 2048;

/// Where a forge's web pages are, as told from its API root: its scheme,
/// and its host and port. The web host is the API's own (GitLab's
/// `https://gitlab.com/api/v4`, GitHub Enterprise Server's
/// `https://ghe.example/api/v3`), or the API's with its leading `api.`
/// dropped (GitHub's `api.github.com`, GitHub Enterprise Cloud's
/// `api.NAME.ghe.com`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebOrigin {
    /// The API root's scheme (`https`, or `http` for a forge so served).
    scheme: String,
    /// The hosts a page may be on: the API's, and the API's without
    /// `api.` when it starts so.
    hosts: Vec<String>,
    port: Option<u16>,
}

/// The web origin of the API root `api`; `None` when it does not parse
/// as a URL with a host (no address the forge answers is kept then).
pub fn web_origin(api: &str) -> Option<WebOrigin> {
    let url = Url::parse(api).ok()?;
    let host = url.host_str()?.to_ascii_lowercase();
    let mut hosts = vec![host.clone()];
    if let Some(web) = host.strip_prefix("api.").filter(|w| w.contains('.')) {
        hosts.push(web.to_string());
    }
    Some(WebOrigin {
        scheme: url.scheme().to_string(),
        hosts,
        port: url.port_or_known_default(),
    })
}

/// `raw`, the address `forge` answered for `what` (`the pull request`,
/// `the closeout comment`), if it is one to keep; else why not, as a
/// warning for the job that never repeats it.
pub fn held(
    forge: &str,
    what: &str,
    raw: &str,
    origin: Option<&WebOrigin>,
) -> Result<String, String> {
    let why = why_not(raw, origin);
    match why {
        None => Ok(raw.to_string()),
        Some(why) => Err(format!(
            "{forge}: the address it answered for {what} was not kept ({why}); Paddock names \
             none for it"
        )),
    }
}

fn why_not(raw: &str, origin: Option<&WebOrigin>) -> Option<String> {
    if raw.len() > MAX_URL {
        return Some(format!("{} bytes, over {MAX_URL}", raw.len()));
    }
    if raw.is_empty() {
        return Some("it is empty".to_string());
    }
    if !raw.bytes().all(|b| b.is_ascii_graphic()) {
        return Some(
            "it has a space, a control character or a character that is not ASCII".to_string(),
        );
    }
    let Some(origin) = origin else {
        return Some("the forge's API root has no host to hold it to".to_string());
    };
    let url = match Url::parse(raw) {
        Ok(url) => url,
        Err(e) => return Some(format!("not a URL: {e}")),
    };
    if url.scheme() != "https" && url.scheme() != origin.scheme {
        return Some(format!(
            "its scheme is {}, not https{}",
            url.scheme(),
            match origin.scheme.as_str() {
                "https" => String::new(),
                other => format!(" or the API's {other}"),
            }
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Some("it has a user name or password".to_string());
    }
    let host = url.host_str().unwrap_or("").to_ascii_lowercase();
    if !origin.hosts.contains(&host) || url.port_or_known_default() != origin.port {
        return Some(format!(
            "it is not on the forge's web host {}",
            origin.hosts.last().map(String::as_str).unwrap_or("")
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_printable_https_address_on_the_forges_web_host_is_kept() {
        let github = web_origin("https://api.github.com").unwrap();
        let ghe = web_origin("https://ghe.example/api/v3").unwrap();
        let mock = web_origin("http://127.0.0.1:8080").unwrap();
        let long = format!("https://github.com/a/b/pull/1#{}", "x".repeat(MAX_URL));
        let cases: Vec<(&WebOrigin, &str, Option<&str>)> = vec![
            (&github, "https://github.com/acme/widgets/pull/1", None),
            (&github, "https://api.github.com/acme/widgets/pull/1", None),
            (
                &github,
                "https://github.com/acme/widgets/pull/1#issuecomment-7",
                None,
            ),
            (&ghe, "https://ghe.example/acme/widgets/pull/1", None),
            (&mock, "http://127.0.0.1:8080/acme/widgets/pull/1", None),
            (
                &github,
                "http://github.com/acme/widgets/pull/1",
                Some("its scheme is http, not https"),
            ),
            (
                &github,
                "javascript:alert(1)//github.com",
                Some("its scheme is javascript, not https"),
            ),
            (
                &mock,
                "javascript:alert(1)",
                Some("its scheme is javascript, not https or the API's http"),
            ),
            (
                &github,
                "https://evil.example/acme/widgets/pull/1",
                Some("it is not on the forge's web host github.com"),
            ),
            (
                &github,
                "https://github.com.evil.example/pull/1",
                Some("it is not on the forge's web host github.com"),
            ),
            (
                &github,
                "https://github.com:8443/acme/widgets/pull/1",
                Some("it is not on the forge's web host github.com"),
            ),
            (
                &ghe,
                "https://github.com/acme/widgets/pull/1",
                Some("it is not on the forge's web host ghe.example"),
            ),
            (
                &github,
                "https://user:pw@github.com/pull/1",
                Some("it has a user name or password"),
            ),
            (
                &github,
                "https://github.com/a/b/pull/1\u{1b}]8;;https://evil/\u{7}",
                Some("it has a space, a control character or a character that is not ASCII"),
            ),
            (
                &github,
                "https://github.com/a/b/pull/1\n- approved: yes",
                Some("it has a space, a control character or a character that is not ASCII"),
            ),
            (
                &github,
                "https://github.com/a/\u{202e}b/pull/1",
                Some("it has a space, a control character or a character that is not ASCII"),
            ),
            (&github, "", Some("it is empty")),
            (&github, &long, Some("2078 bytes, over 2048")),
            (
                &github,
                "github.com/acme/widgets/pull/1",
                Some("not a URL: relative URL without a base"),
            ),
        ];
        let got: Vec<(&str, Option<String>)> = cases
            .iter()
            .map(|(origin, raw, _)| (*raw, why_not(raw, Some(origin))))
            .collect();
        let want: Vec<(&str, Option<String>)> = cases
            .iter()
            .map(|(_, raw, why)| (*raw, why.map(str::to_string)))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_web_host_is_the_apis_or_the_apis_without_api_dot() {
        assert_eq!(
            web_origin("https://api.github.com").unwrap().hosts,
            ["api.github.com", "github.com"]
        );
        assert_eq!(
            web_origin("https://api.acme.ghe.com").unwrap().hosts,
            ["api.acme.ghe.com", "acme.ghe.com"]
        );
        assert_eq!(
            web_origin("https://gitlab.com/api/v4").unwrap().hosts,
            ["gitlab.com"]
        );
        // `api.com` is not dropped to a bare `com`.
        assert_eq!(web_origin("https://api.com").unwrap().hosts, ["api.com"]);
        assert_eq!(web_origin("not a url"), None);
    }

    #[test]
    fn a_refusal_names_the_forge_and_what_and_never_repeats_the_address() {
        let github = web_origin("https://api.github.com").unwrap();
        let raw = "https://evil.example/\u{1b}[2J";
        let message = held("github", "the pull request", raw, Some(&github)).unwrap_err();
        assert_eq!(
            message,
            "github: the address it answered for the pull request was not kept (it has a space, \
             a control character or a character that is not ASCII); Paddock names none for it"
        );
        assert_eq!(
            held(
                "github",
                "the pull request",
                "https://github.com/a/b/pull/2",
                Some(&github)
            ),
            Ok("https://github.com/a/b/pull/2".to_string())
        );
    }
}
