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
//! Which rules a text may hold is found in one pass of an Aho-Corasick
//! automaton of every rule's anchors (literals one of which each of its
//! matches contains, compared ignoring ASCII case); only those rules' own
//! regexes then run, so text without a token costs that one scan. A
//! [`regex::RegexSet`] of every rule did this until issue #14's profile:
//! its lazy DFA, built anew in each process over ~50 patterns with long
//! counted repetitions, cost about 800 instructions a byte on an engine's
//! session file (≈ 50 M of the 135 M a hello job's `paddock` ran). The set
//! is still what decides for a text holding `ſ` or `K` (U+017F, U+212A),
//! the only characters outside ASCII that a `(?i)` rule's ASCII letters
//! match, and which an ASCII-caseless anchor would miss.

use std::sync::{LazyLock, OnceLock};

use aho_corasick::AhoCorasick;
use regex::{Regex, RegexSet};

/// A character that cannot continue an identifier before a short prefix,
/// or a JSON escape.
const EDGE: &str = r"(?P<keep>^|[^A-Za-z0-9_]|\\[nrt])";

/// The characters outside ASCII that case-insensitive matching folds to an
/// ASCII letter (`ſ` to `s`, the Kelvin sign `K` to `k`): a text holding
/// one is checked by the whole set (a test checks there are no others).
const FOLDS_TO_ASCII: [char; 2] = ['\u{17F}', '\u{212A}'];

/// One kind of credential: its id (after gitleaks' rule ids where there is
/// one), its shape, and its anchors.
pub(crate) struct Rule {
    pub id: &'static str,
    pub pattern: String,
    /// Literals of the pattern one of which every match of it contains
    /// (compared ignoring ASCII case, so a case-sensitive rule's anchor
    /// picks it for more texts than it matches, never fewer).
    pub anchors: &'static [&'static str],
}

fn rule(id: &'static str, anchors: &'static [&'static str], pattern: &str) -> Rule {
    Rule {
        id,
        pattern: pattern.to_string(),
        anchors,
    }
}

/// A rule for a token that starts with a short prefix (`EDGE` before it).
fn edged(id: &'static str, anchors: &'static [&'static str], pattern: &str) -> Rule {
    Rule {
        id,
        pattern: format!("{EDGE}{pattern}"),
        anchors,
    }
}

/// Every rule, in the order they are applied.
pub(crate) fn rules() -> Vec<Rule> {
    vec![
        // Private key blocks (PEM, OpenSSH, PGP), also inside JSON strings.
        rule(
            "private-key",
            &["-----BEGIN "],
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?s:.*?)-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----",
        ),
        // Credentials in URLs: scheme://user:password@host.
        rule(
            "url-credentials",
            &["://"],
            r"(?P<keep>[A-Za-z][A-Za-z0-9+.-]*://[^\s:@/]+:)[^\s@/]+(?P<tail>@)",
        ),
        // HTTP authorization.
        rule(
            "bearer",
            &["bearer"],
            r"(?i)(?P<keep>bearer\s+)[A-Za-z0-9._~+/=-]{8,}",
        ),
        rule(
            "basic-auth",
            &["authorization"],
            r"(?i)(?P<keep>authorization[\x22']?\s*:\s*[\x22']?basic\s+)[A-Za-z0-9+/]{8,}={0,2}",
        ),
        // Assignments to a key-like name (env files, JSON, headers, YAML).
        rule(
            "key-assignment",
            &[
                "api_key",
                "api-key",
                "apikey",
                "access_token",
                "access-token",
                "accesstoken",
                "auth_token",
                "auth-token",
                "authtoken",
                "secret",
            ],
            r"(?i)(?P<keep>(?:x-api-key|api[_-]?key|access[_-]?token|auth[_-]?token|secret|client[_-]?secret)[\x22']?\s*[:=]\s*[\x22']?)[A-Za-z0-9._~+/=-]{12,}",
        ),
        rule(
            "password-assignment",
            &["passw"],
            r"(?i)(?P<keep>(?:password|passwd)[\x22']?\s*[:=]\s*[\x22']?)[^\s\x22'`;,]{8,}",
        ),
        // AI providers.
        edged("openai-anthropic-key", &["sk-"], r"sk-[A-Za-z0-9_-]{20,}"),
        edged("groq-api-key", &["gsk_"], r"gsk_[A-Za-z0-9]{48,}"),
        edged("xai-api-key", &["xai-"], r"xai-[A-Za-z0-9]{60,}"),
        edged("perplexity-api-key", &["pplx-"], r"pplx-[A-Za-z0-9]{40,}"),
        edged("replicate-api-token", &["r8_"], r"r8_[A-Za-z0-9]{37}"),
        edged("huggingface-access-token", &["hf_"], r"hf_[A-Za-z]{34}"),
        edged(
            "huggingface-org-token",
            &["api_org_"],
            r"api_org_[A-Za-z]{34}",
        ),
        // Paddock's own per-job tokens.
        rule("paddock-job-token", &["pdk-job-"], r"pdk-job-[0-9a-f]{16,}"),
        rule(
            "paddock-api-token",
            &["pdk-api-"],
            r"pdk-api-[0-9a-f]{12}-[0-9a-f]{64}",
        ),
        // Source hosting and package registries.
        rule(
            "github-token",
            &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
            r"gh[pousr]_[A-Za-z0-9]{30,}",
        ),
        rule(
            "github-fine-grained-pat",
            &["github_pat_"],
            r"github_pat_[A-Za-z0-9_]{22,}",
        ),
        rule(
            "gitlab-token",
            &[
                "glpat-", "gldt-", "glrt-", "glcbt-", "glimt-", "glptt-", "glft-", "gloas-",
                "glsoat-", "glagent-",
            ],
            r"gl(?:pat|dt|rt|cbt|imt|ptt|ft|oas|soat|agent)-[A-Za-z0-9_-]{20,}",
        ),
        rule(
            "gitlab-runner-registration-token",
            &["GR1348941"],
            r"GR1348941[A-Za-z0-9_-]{20}",
        ),
        edged("npm-access-token", &["npm_"], r"npm_[A-Za-z0-9]{36}"),
        rule(
            "pypi-upload-token",
            &["pypi-AgEIcHlwaS5vcmc"],
            r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        ),
        rule(
            "atlassian-api-token",
            &["ATATT3"],
            r"ATATT3[A-Za-z0-9_=-]{186}",
        ),
        rule("linear-api-key", &["lin_api_"], r"lin_api_[A-Za-z0-9]{40}"),
        // Chat.
        rule("slack-token", &["xox"], r"xox[abposre]-[A-Za-z0-9-]{10,}"),
        rule(
            "slack-webhook-url",
            &["hooks.slack.com/"],
            r"(?P<keep>hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9+/_-]{20,}",
        ),
        rule(
            "telegram-bot-token",
            &[":AA"],
            r"[0-9]{8,10}:AA[A-Za-z0-9_-]{33}",
        ),
        // Payments and commerce.
        rule(
            "stripe-secret-key",
            &["_live_", "_test_", "_prod_"],
            r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,}",
        ),
        rule(
            "shopify-token",
            &["shp"],
            r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        ),
        rule(
            "square-token",
            &["sq0"],
            r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}",
        ),
        // Clouds.
        rule(
            "aws-access-key-id",
            &["A3T", "AKIA", "ASIA", "ABIA", "ACCA"],
            r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}",
        ),
        rule(
            "aws-secret-access-key",
            &["secret"],
            r"(?i)(?P<keep>aws_?secret_?access_?key[\x22']?\s*[:=]\s*[\x22']?)[A-Za-z0-9/+=]{40}",
        ),
        rule("gcp-api-key", &["AIza"], r"AIza[0-9A-Za-z_-]{35}"),
        rule(
            "gcp-oauth-client-secret",
            &["GOCSPX-"],
            r"GOCSPX-[A-Za-z0-9_-]{28}",
        ),
        rule(
            "gcp-oauth-access-token",
            &["ya29."],
            r"ya29\.[0-9A-Za-z_-]{20,}",
        ),
        rule(
            "azure-storage-key",
            &["AccountKey="],
            r"(?P<keep>AccountKey=)[A-Za-z0-9+/]{86}==",
        ),
        rule("digitalocean-token", &["_v1_"], r"do[opr]_v1_[a-f0-9]{64}"),
        rule(
            "databricks-token",
            &["dapi"],
            r"dapi[a-f0-9]{32}(?:-[0-9]+)?",
        ),
        rule(
            "hashicorp-vault-token",
            &["hvs.", "hvb.", "hvr."],
            r"hv[sbr]\.[A-Za-z0-9_-]{24,}",
        ),
        rule(
            "terraform-cloud-token",
            &[".atlasv1."],
            r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}",
        ),
        rule(
            "doppler-token",
            &["dp."],
            r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}",
        ),
        rule("pulumi-access-token", &["pul-"], r"pul-[a-f0-9]{40}"),
        // Observability and mail.
        rule(
            "grafana-token",
            &["glc_", "glsa_"],
            r"gl(?:c|sa)_[A-Za-z0-9+/_]{32,}={0,2}",
        ),
        rule(
            "sentry-token",
            &["sntr"],
            r"sntr[ysu]s?_[A-Za-z0-9+/=_-]{40,}",
        ),
        rule(
            "sendgrid-api-key",
            &["SG."],
            r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        ),
        edged("twilio-api-key", &["SK"], r"SK[0-9a-fA-F]{32}"),
        rule(
            "postman-api-key",
            &["PMAK-"],
            r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}",
        ),
        // Encryption keys and generic tokens.
        rule(
            "age-secret-key",
            &["AGE-SECRET-KEY-1"],
            r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        ),
        edged(
            "jwt",
            &["eyJ"],
            r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        ),
    ]
}

/// The rules compiled: an automaton of their anchors to find which a text
/// may hold, and each rule's own regex to find and replace its matches,
/// compiled the first time the anchors pick that rule (most texts hold
/// none: compiling all of them up front was ≈ 10–15 ms of the job's start
/// in release, on the first event's way to the store).
pub(crate) struct Compiled {
    /// The ids of the rules (the tests check it is all).
    #[cfg_attr(not(test), allow(dead_code))]
    pub ids: Vec<&'static str>,
    /// Every rule's anchors, ASCII case ignored (`None`: it could not be
    /// built, and every rule runs).
    anchors: Option<AhoCorasick>,
    /// The rule of each of the automaton's patterns.
    anchor_rule: Vec<usize>,
    /// Each rule's pattern, and its regex once compiled (`None`: it did not
    /// compile alone, and is skipped).
    each: Vec<(String, OnceLock<Option<Regex>>)>,
    /// The set of every rule that compiles (and the rule of each of its
    /// patterns), for a text holding one of [`FOLDS_TO_ASCII`]; built the
    /// first time one comes.
    set: OnceLock<(RegexSet, Vec<usize>)>,
}

impl Compiled {
    /// The regex of rule `i`, compiled on first use.
    pub fn rule(&self, i: usize) -> Option<&Regex> {
        let (pattern, regex) = self.each.get(i)?;
        regex.get_or_init(|| Regex::new(pattern).ok()).as_ref()
    }

    /// The rules `text` may hold a match of, in rule order: those whose
    /// anchors it holds; those the set matches when it holds one of
    /// [`FOLDS_TO_ASCII`].
    pub fn candidates(&self, text: &str) -> Vec<usize> {
        if text.contains(FOLDS_TO_ASCII) {
            return self.by_set(text);
        }
        self.by_anchors(text)
    }

    /// The rules whose anchors `text` holds, in rule order.
    pub fn by_anchors(&self, text: &str) -> Vec<usize> {
        let Some(anchors) = &self.anchors else {
            return (0..self.each.len()).collect();
        };
        let mut picked = vec![false; self.each.len()];
        for m in anchors.find_overlapping_iter(text) {
            if let Some(&rule) = self.anchor_rule.get(m.pattern().as_usize()) {
                picked[rule] = true;
            }
        }
        (0..picked.len()).filter(|&i| picked[i]).collect()
    }

    /// The rules the set of every rule matches in `text`.
    pub fn by_set(&self, text: &str) -> Vec<usize> {
        let (set, rule_of) = self.set.get_or_init(|| {
            #[cfg(test)]
            SETS_BUILT.with(|n| n.set(n.get() + 1));
            let every: Vec<usize> = (0..self.each.len()).collect();
            match RegexSet::new(self.each.iter().map(|(p, _)| p)) {
                Ok(set) => (set, every),
                // A rule that does not compile (a test checks they all
                // do) is left out.
                Err(_) => {
                    let kept: Vec<usize> = every
                        .into_iter()
                        .filter(|&i| self.rule(i).is_some())
                        .collect();
                    let set =
                        RegexSet::new(kept.iter().filter_map(|&i| self.each.get(i).map(|e| &e.0)))
                            .unwrap_or_else(|_| RegexSet::empty());
                    (set, kept)
                }
            }
        });
        set.matches(text)
            .iter()
            .filter_map(|j| rule_of.get(j).copied())
            .collect()
    }
}

pub(crate) static COMPILED: LazyLock<Compiled> = LazyLock::new(|| compile(rules()));

/// `all` compiled: the automaton of every rule's anchors (tens of
/// microseconds), each regex left for its first use. Without the
/// automaton (a test checks it is built) every rule runs.
fn compile(all: Vec<Rule>) -> Compiled {
    let mut literals = Vec::new();
    let mut anchor_rule = Vec::new();
    for (i, r) in all.iter().enumerate() {
        for a in r.anchors {
            literals.push(*a);
            anchor_rule.push(i);
        }
    }
    let anchors = AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(&literals)
        .ok();
    Compiled {
        ids: all.iter().map(|r| r.id).collect(),
        anchors,
        anchor_rule,
        each: all
            .into_iter()
            .map(|r| (r.pattern, OnceLock::new()))
            .collect(),
        set: OnceLock::new(),
    }
}

#[cfg(test)]
thread_local! {
    /// How many sets this thread built.
    static SETS_BUILT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Builds the anchors' automaton on a thread of its own, so that a process
/// about to run a job has it ready when its first event is redacted.
pub(crate) fn warm_up() {
    let _ = std::thread::Builder::new()
        .name("redact-rules".into())
        .spawn(|| {
            LazyLock::force(&COMPILED);
        });
}

/// Where the rules match in `text`: (start, end) byte ranges.
pub(crate) fn spans(text: &str) -> Vec<(usize, usize)> {
    let compiled = &*COMPILED;
    compiled
        .candidates(text)
        .into_iter()
        .filter_map(|i| compiled.rule(i))
        .flat_map(|re| re.find_iter(text))
        .map(|m| (m.start(), m.end()))
        .collect()
}

/// `text` with every rule's matches replaced by `[REDACTED]` (keeping each
/// match's `keep` and `tail` groups); `None` when no rule matches.
pub(crate) fn redact(text: &str, redacted: &str) -> Option<String> {
    let compiled = &*COMPILED;
    let mut out: Option<String> = None;
    for i in compiled.candidates(text) {
        let Some(re) = compiled.rule(i) else {
            continue;
        };
        let now = out.as_deref().unwrap_or(text);
        // No match (the anchor alone), or an earlier rule's replacement
        // consumed it.
        if !re.is_match(now) {
            continue;
        }
        let replaced = re
            .replace_all(now, |caps: &regex::Captures<'_>| {
                let keep = caps.name("keep").map_or("", |m| m.as_str());
                let tail = caps.name("tail").map_or("", |m| m.as_str());
                format!("{keep}{redacted}{tail}")
            })
            .into_owned();
        out = Some(replaced);
    }
    out
}

#[cfg(test)]
mod compile_tests {
    use super::*;

    /// The set is built only for a text that holds a character folding to
    /// ASCII, once; with a rule that does not compile, of the rest.
    #[test]
    fn the_set_is_built_once_and_only_for_a_text_folding_to_ascii() {
        let built = |all: Vec<Rule>| {
            let before = SETS_BUILT.with(std::cell::Cell::get);
            let compiled = compile(all);
            let plain = compiled.candidates("ghp_0123456789abcdefghijklmnopqrstuvwxyz");
            let after_plain = SETS_BUILT.with(std::cell::Cell::get) - before;
            let folded = compiled.candidates("client_ſecret = abcdefghijklmnop");
            compiled.candidates("ſ");
            let after_folded = SETS_BUILT.with(std::cell::Cell::get) - before;
            let id = |v: Vec<usize>| v.into_iter().map(|i| compiled.ids[i]).collect::<Vec<_>>();
            (after_plain, after_folded, id(plain), id(folded))
        };
        let want = |n| (0, n, vec!["github-token"], vec!["key-assignment"]);
        // The anchors' automaton is built (without it every rule would run
        // and the anchors' tests would pass whatever the anchors).
        assert!(compile(rules()).anchors.is_some());
        assert_eq!(built(rules()), want(1));
        let mut with_bad = rules();
        with_bad.push(rule("bad", &["ghp_"], "(unclosed"));
        // The bad rule is picked by its anchor, and skipped: it has no regex.
        let (plain, folded, ids, by_set) = built(with_bad);
        assert_eq!(
            (plain, folded, ids, by_set),
            (0, 1, vec!["github-token", "bad"], vec!["key-assignment"])
        );
    }

    /// Case-insensitive matching folds to an ASCII letter only ASCII
    /// letters and [`FOLDS_TO_ASCII`]: any other character would need the
    /// set too.
    #[test]
    fn only_the_listed_characters_fold_to_ascii_letters() {
        let letter = Regex::new("(?i)^[a-z]$").unwrap();
        let folding: Vec<char> = (0..=u32::from(char::MAX))
            .filter_map(char::from_u32)
            .filter(|c| !c.is_ascii() && letter.is_match(c.encode_utf8(&mut [0; 4])))
            .collect();
        assert_eq!(folding, FOLDS_TO_ASCII.to_vec());
    }
}
