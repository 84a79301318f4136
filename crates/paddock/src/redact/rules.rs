//! The token shapes Paddock redacts wherever they appear: one rule per kind
//! of credential, written for Paddock after the rules of gitleaks
//! (`config/gitleaks.toml`, the maintained reference for secret shapes),
//! restricted to shapes with a distinctive prefix or context so that
//! ordinary text and code pass. No rule starts with `\b`: a token right after
//! a JSON escape such as `\n` must match too, so short prefixes that could
//! end a longer word (`sk-`, `hf_`, `npm_`) carry a `keep` group that
//! matches the character before them instead. A rule's `keep` group stays
//! before `[REDACTED]` and its `tail` group after it; the rest of the match
//! is replaced.
//!
//! All rules are checked in one pass of a [`regex::RegexSet`]; only the rules
//! that match are then applied, so text without a token costs one scan.

use std::sync::{LazyLock, OnceLock};

use regex::{Regex, RegexSet};

/// A character that cannot continue an identifier before a short prefix,
/// or a JSON escape.
const EDGE: &str = r"(?P<keep>^|[^A-Za-z0-9_]|\\[nrt])";

/// One kind of credential: its id (after gitleaks' rule ids where there is
/// one) and its shape.
pub(crate) struct Rule {
    pub id: &'static str,
    pub pattern: String,
}

fn rule(id: &'static str, pattern: &str) -> Rule {
    Rule {
        id,
        pattern: pattern.to_string(),
    }
}

/// A rule for a token that starts with a short prefix (`EDGE` before it).
fn edged(id: &'static str, pattern: &str) -> Rule {
    Rule {
        id,
        pattern: format!("{EDGE}{pattern}"),
    }
}

/// Every rule, in the order they are applied.
pub(crate) fn rules() -> Vec<Rule> {
    vec![
        // Private key blocks (PEM, OpenSSH, PGP), also inside JSON strings.
        rule(
            "private-key",
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?s:.*?)-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----",
        ),
        // Credentials in URLs: scheme://user:password@host.
        rule(
            "url-credentials",
            r"(?P<keep>[A-Za-z][A-Za-z0-9+.-]*://[^\s:@/]+:)[^\s@/]+(?P<tail>@)",
        ),
        // HTTP authorization.
        rule("bearer", r"(?i)(?P<keep>bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
        rule(
            "basic-auth",
            r"(?i)(?P<keep>authorization[\x22']?\s*:\s*[\x22']?basic\s+)[A-Za-z0-9+/]{8,}={0,2}",
        ),
        // Assignments to a key-like name (env files, JSON, headers, YAML).
        rule(
            "key-assignment",
            r"(?i)(?P<keep>(?:x-api-key|api[_-]?key|access[_-]?token|auth[_-]?token|secret|client[_-]?secret)[\x22']?\s*[:=]\s*[\x22']?)[A-Za-z0-9._~+/=-]{12,}",
        ),
        rule(
            "password-assignment",
            r"(?i)(?P<keep>(?:password|passwd)[\x22']?\s*[:=]\s*[\x22']?)[^\s\x22'`;,]{8,}",
        ),
        // AI providers.
        edged("openai-anthropic-key", r"sk-[A-Za-z0-9_-]{20,}"),
        edged("groq-api-key", r"gsk_[A-Za-z0-9]{48,}"),
        edged("xai-api-key", r"xai-[A-Za-z0-9]{60,}"),
        edged("perplexity-api-key", r"pplx-[A-Za-z0-9]{40,}"),
        edged("replicate-api-token", r"r8_[A-Za-z0-9]{37}"),
        edged("huggingface-access-token", r"hf_[A-Za-z]{34}"),
        edged("huggingface-org-token", r"api_org_[A-Za-z]{34}"),
        // Paddock's own per-job tokens.
        rule("paddock-job-token", r"pdk-job-[0-9a-f]{16,}"),
        rule("paddock-api-token", r"pdk-api-[0-9a-f]{12}-[0-9a-f]{64}"),
        // Source hosting and package registries.
        rule("github-token", r"gh[pousr]_[A-Za-z0-9]{30,}"),
        rule("github-fine-grained-pat", r"github_pat_[A-Za-z0-9_]{22,}"),
        rule(
            "gitlab-token",
            r"gl(?:pat|dt|rt|cbt|imt|ptt|ft|oas|soat|agent)-[A-Za-z0-9_-]{20,}",
        ),
        rule(
            "gitlab-runner-registration-token",
            r"GR1348941[A-Za-z0-9_-]{20}",
        ),
        edged("npm-access-token", r"npm_[A-Za-z0-9]{36}"),
        rule(
            "pypi-upload-token",
            r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        ),
        rule("atlassian-api-token", r"ATATT3[A-Za-z0-9_=-]{186}"),
        rule("linear-api-key", r"lin_api_[A-Za-z0-9]{40}"),
        // Chat.
        rule("slack-token", r"xox[abposre]-[A-Za-z0-9-]{10,}"),
        rule(
            "slack-webhook-url",
            r"(?P<keep>hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9+/_-]{20,}",
        ),
        rule("telegram-bot-token", r"[0-9]{8,10}:AA[A-Za-z0-9_-]{33}"),
        // Payments and commerce.
        rule(
            "stripe-secret-key",
            r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,}",
        ),
        rule("shopify-token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
        rule("square-token", r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}"),
        // Clouds.
        rule(
            "aws-access-key-id",
            r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}",
        ),
        rule(
            "aws-secret-access-key",
            r"(?i)(?P<keep>aws_?secret_?access_?key[\x22']?\s*[:=]\s*[\x22']?)[A-Za-z0-9/+=]{40}",
        ),
        rule("gcp-api-key", r"AIza[0-9A-Za-z_-]{35}"),
        rule("gcp-oauth-client-secret", r"GOCSPX-[A-Za-z0-9_-]{28}"),
        rule("gcp-oauth-access-token", r"ya29\.[0-9A-Za-z_-]{20,}"),
        rule(
            "azure-storage-key",
            r"(?P<keep>AccountKey=)[A-Za-z0-9+/]{86}==",
        ),
        rule("digitalocean-token", r"do[opr]_v1_[a-f0-9]{64}"),
        rule("databricks-token", r"dapi[a-f0-9]{32}(?:-[0-9]+)?"),
        rule("hashicorp-vault-token", r"hv[sbr]\.[A-Za-z0-9_-]{24,}"),
        rule(
            "terraform-cloud-token",
            r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}",
        ),
        rule(
            "doppler-token",
            r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}",
        ),
        rule("pulumi-access-token", r"pul-[a-f0-9]{40}"),
        // Observability and mail.
        rule("grafana-token", r"gl(?:c|sa)_[A-Za-z0-9+/_]{32,}={0,2}"),
        rule("sentry-token", r"sntr[ysu]s?_[A-Za-z0-9+/=_-]{40,}"),
        rule(
            "sendgrid-api-key",
            r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        ),
        edged("twilio-api-key", r"SK[0-9a-fA-F]{32}"),
        rule("postman-api-key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
        // Encryption keys and generic tokens.
        rule(
            "age-secret-key",
            r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        ),
        edged(
            "jwt",
            r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        ),
    ]
}

/// The rules compiled: one set to find which match, and each rule's own
/// regex to replace its matches, compiled the first time the set finds
/// that rule in a text (most texts match none: compiling all of them up
/// front was ≈ 10–15 ms of the job's start in release, on the first
/// event's way to the store).
pub(crate) struct Compiled {
    /// The ids of the rules in the set (the tests check it is all).
    #[cfg_attr(not(test), allow(dead_code))]
    pub ids: Vec<&'static str>,
    pub set: RegexSet,
    /// Each rule's pattern, and its regex once compiled (`None`: it did not
    /// compile alone, and is skipped).
    each: Vec<(String, OnceLock<Option<Regex>>)>,
}

impl Compiled {
    /// The regex of the set's rule `i`, compiled on first use.
    pub fn rule(&self, i: usize) -> Option<&Regex> {
        let (pattern, regex) = self.each.get(i)?;
        regex.get_or_init(|| Regex::new(pattern).ok()).as_ref()
    }
}

pub(crate) static COMPILED: LazyLock<Compiled> = LazyLock::new(|| compile(rules()));

/// `all` compiled: one set of every rule, built once (the set is most of
/// the start-up's redaction cost, ≈ 2 ms of CPU in release; it was built
/// twice, once to see that it compiles and again to keep, issue #14). If
/// a rule does not compile (a test checks they all do), it is found alone
/// and dropped, and the set made of the rest.
fn compile(all: Vec<Rule>) -> Compiled {
    let (kept, set) = match set_of(&all) {
        Ok(set) => (all, set),
        Err(_) => {
            let kept: Vec<Rule> = all
                .into_iter()
                .filter(|r| Regex::new(&r.pattern).is_ok())
                .collect();
            let set = set_of(&kept).unwrap_or_else(|_| RegexSet::empty());
            (kept, set)
        }
    };
    Compiled {
        ids: kept.iter().map(|r| r.id).collect(),
        set,
        each: kept
            .into_iter()
            .map(|r| (r.pattern, OnceLock::new()))
            .collect(),
    }
}

#[cfg(test)]
thread_local! {
    /// How many sets this thread built.
    static SETS_BUILT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The set of `rules`.
fn set_of(rules: &[Rule]) -> Result<RegexSet, regex::Error> {
    #[cfg(test)]
    SETS_BUILT.with(|n| n.set(n.get() + 1));
    RegexSet::new(rules.iter().map(|r| &r.pattern))
}

/// Compiles the rules' set on a thread of its own, so that a process about
/// to run a job has it ready (or nearly) when its first event is redacted,
/// instead of compiling it then; the first redaction waits for it if it is
/// not done yet.
pub(crate) fn warm_up() {
    let _ = std::thread::Builder::new()
        .name("redact-rules".into())
        .spawn(|| {
            // Compiled, and its search caches made once.
            COMPILED.set.is_match("paddock");
        });
}

/// Where the rules match in `text`: (start, end) byte ranges.
pub(crate) fn spans(text: &str) -> Vec<(usize, usize)> {
    let compiled = &*COMPILED;
    compiled
        .set
        .matches(text)
        .iter()
        .filter_map(|i| compiled.rule(i))
        .flat_map(|re| re.find_iter(text))
        .map(|m| (m.start(), m.end()))
        .collect()
}

/// `text` with every rule's matches replaced by `[REDACTED]` (keeping each
/// match's `keep` and `tail` groups); `None` when no rule matches.
pub(crate) fn redact(text: &str, redacted: &str) -> Option<String> {
    let compiled = &*COMPILED;
    let hits = compiled.set.matches(text);
    if !hits.matched_any() {
        return None;
    }
    let mut out = text.to_string();
    for i in hits.iter() {
        let Some(re) = compiled.rule(i) else {
            continue;
        };
        // An earlier rule's replacement may have consumed this match.
        if !re.is_match(&out) {
            continue;
        }
        out = re
            .replace_all(&out, |caps: &regex::Captures<'_>| {
                let keep = caps.name("keep").map_or("", |m| m.as_str());
                let tail = caps.name("tail").map_or("", |m| m.as_str());
                format!("{keep}{redacted}{tail}")
            })
            .into_owned();
    }
    Some(out)
}

#[cfg(test)]
mod compile_tests {
    use super::*;

    /// The set is built once, not once to check it and again to keep it;
    /// twice only when a rule does not compile (then the set of the rest).
    #[test]
    fn the_rules_set_is_built_once() {
        let built = |all: Vec<Rule>| {
            let before = SETS_BUILT.with(std::cell::Cell::get);
            let compiled = compile(all);
            let n = SETS_BUILT.with(std::cell::Cell::get) - before;
            (n, compiled.ids.len(), compiled.set.len())
        };
        let every = rules().len();
        assert_eq!(built(rules()), (1, every, every));
        let mut with_bad = rules();
        with_bad.push(rule("bad", "(unclosed"));
        assert_eq!(built(with_bad), (2, every, every));
    }
}
