//! Credentials written into a URL (`https://user:token@host/…`) are
//! refused wherever a spec names a URL: a URL is stored with the job's
//! record, shown in its events and given to git, which writes it into
//! repositories' configuration and echoes it in its errors. A credential is
//! named by a reference instead (`repository.token = "env:NAME"`, the
//! forge's and the push's `token`), held by Paddock on the host. An SSH
//! URL may name its user (`ssh://git@host/…`): that is no secret.

/// Why `url` carries a credential, or `None`. Only the authority of a
/// `scheme://` URL is read: a password (`user:secret@`) anywhere, or any
/// user name but for `ssh://` and `git+ssh://` (a token is often given as
/// the user name of an `https://` URL). The reason never repeats the URL.
pub fn credentials_in_url(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let (userinfo, _host) = authority.rsplit_once('@')?;
    let scheme = scheme.to_ascii_lowercase();
    let ssh = matches!(scheme.as_str(), "ssh" | "git+ssh" | "ssh+git");
    if userinfo.contains(':') {
        return Some(format!(
            "the {scheme}:// URL carries a password (`user:…@`)"
        ));
    }
    if !ssh {
        return Some(format!(
            "the {scheme}:// URL carries a user name (`…@`), which is often a token"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_http_user_names_are_credentials_ssh_users_are_not() {
        let got: Vec<Option<String>> = [
            "https://github.com/o/r.git",
            "https://user:tok@github.com/o/r.git",
            "https://ghp_abc@github.com/o/r.git",
            "HTTP://u:p@127.0.0.1:9/r.git",
            "ssh://git@github.com/o/r.git",
            "ssh://git:pw@github.com/o/r.git",
            "git@github.com:o/r.git",
            "/srv/r@1.git",
            "https://host/path/with@sign",
            "file:///srv/r.git",
        ]
        .iter()
        .map(|u| credentials_in_url(u))
        .collect();
        let user = |s: &str| {
            Some(format!(
                "the {s}:// URL carries a user name (`…@`), which is often a token"
            ))
        };
        let password = |s: &str| Some(format!("the {s}:// URL carries a password (`user:…@`)"));
        assert_eq!(
            got,
            vec![
                None,
                password("https"),
                user("https"),
                password("http"),
                None,
                password("ssh"),
                None,
                None,
                None,
                None,
            ]
        );
    }
}
